/* DDP on the tcp backend: N ranks give bit-identical weights to one process that
 * accumulates the same N micro-batches in rank order and averages; buckets; no_sync;
 * find_unused_parameters; errors. Ranks are forked processes (tests/dist_ranks.h);
 * they write their weights to files that the parent compares byte for byte. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "dist_ranks.h"
#include "dist_model.h"

typedef struct {
    char dir[64];
    bool unused_layer;  /* a layer that never takes part in the loss */
    bool find_unused;
    int accum;          /* micro-batches per rank and step (no_sync for all but the last) */
} ddp_case;

static int ddp_rank(ct_process_group *pg, int r, int n, void *ud) {
    const ddp_case *c = ud;
    RCHECK(pg);
    ct_module *m = make_model(c->unused_layer);
    RCHECK(m);
    ct_ddp_options o = ct_ddp_defaults();
    o.bucket_cap_first = 200; /* bytes: several buckets for this small model */
    o.bucket_cap = 400;
    o.find_unused_parameters = c->find_unused;
    ct_ddp *d = ct_ddp_new(pg, m, &o);
    RCHECK(d);
    RCHECK(ct_ddp_num_buckets(d) >= 3);
    /* Reverse order: the last parameter opens the first bucket. */
    int idx[8];
    RCHECK(ct_ddp_bucket_params(d, 0, idx, 8) >= 1);
    RCHECK(idx[0] == (c->unused_layer ? 5 : 3));
    ct_tensor *ps[8];
    int64_t np = ct_module_parameters(m, ps, NULL, 8);
    ct_optim_options oo = ct_sgd_options(0.1);
    oo.momentum = 0.9;
    ct_optimizer *opt = ct_optimizer_new(CT_OPTIM_SGD, ps, (int)np, &oo);
    RCHECK(opt);
    int64_t per = BATCH / n / c->accum;
    for (int s = 0; s < STEPS; s++) {
        RCHECK(ct_ddp_zero_grad(d) == CT_OK);
        for (int a = 0; a < c->accum; a++) {
            bool last = a == c->accum - 1;
            RCHECK(ct_ddp_set_sync(d, last) == CT_OK);
            ct_scope_begin();
            ct_tensor *loss = loss_of(m, s, (int64_t)r * per * c->accum + a * per, per, c->unused_layer);
            RCHECK(loss && ct_backward(loss, NULL, false, false) == CT_OK);
            ct_scope_end();
        }
        ct_status st = ct_ddp_finish(d);
        if (c->unused_layer && !c->find_unused) {
            RCHECK(st != CT_OK);
            RCHECK(strstr(ct_last_error(), "parameters 4, 5 received no gradient") != NULL);
            ct_clear_error();
            goto done;
        }
        RCHECK(st == CT_OK);
        RCHECK(ct_optimizer_step(opt) == CT_OK);
    }
    char path[128];
    snprintf(path, sizeof path, "%s/rank%d.bin", c->dir, r);
    RCHECK(write_params(m, path) == 0);
done:
    ct_optimizer_free(opt);
    ct_ddp_free(d);
    ct_module_free(m);
    return 0;
}

/* One process, the same global batch as n micro-batches in rank order. */
static int reference_run(const ddp_case *c, int n) {
    ct_module *m = make_model(c->unused_layer);
    ct_tensor *ps[8];
    int64_t np = ct_module_parameters(m, ps, NULL, 8);
    ct_optim_options oo = ct_sgd_options(0.1);
    oo.momentum = 0.9;
    ct_optimizer *opt = ct_optimizer_new(CT_OPTIM_SGD, ps, (int)np, &oo);
    int64_t per = BATCH / n / c->accum;
    for (int s = 0; s < STEPS; s++) {
        ct_optimizer_zero_grad(opt, true);
        for (int k = 0; k < n * c->accum; k++) {
            ct_scope_begin();
            ct_tensor *loss = loss_of(m, s, k * per, per, c->unused_layer);
            if (!loss || ct_backward(loss, NULL, false, false) != CT_OK)
                return 1;
            ct_scope_end();
        }
        for (int64_t i = 0; i < np; i++) {
            ct_tensor *g = ct_tensor_grad(ps[i]);
            if (!g) { /* the unused layer: DDP leaves zeros */
                g = ct_zeros_like(ps[i], CT_DTYPE_UNDEFINED);
                ct_tensor_set_grad(ps[i], g);
                continue;
            }
            float *p = ct_tensor_data(g);
            for (int64_t j = 0; j < ct_tensor_numel(g); j++)
                p[j] = p[j] / (float)n; /* the AVG of the all-reduce */
            ct_release(g);
        }
        if (ct_optimizer_step(opt) != CT_OK)
            return 1;
    }
    char path[128];
    snprintf(path, sizeof path, "%s/ref.bin", c->dir);
    int rc = write_params(m, path);
    ct_optimizer_free(opt);
    ct_module_free(m);
    return rc;
}

typedef struct {
    ddp_case c;
    int n;
} ref_arg;

static int reference_rank(ct_process_group *pg, int r, int n, void *ud) {
    const ref_arg *ra = ud;
    return reference_run(&ra->c, ra->n);
}

static void run_case(ddp_case *c, int n, bool expect_identical) {
    snprintf(c->dir, sizeof c->dir, "/tmp/ct_ddp_test_XXXXXX");
    assert_non_null(mkdtemp(c->dir));
    assert_int_equal(run_ranks(n, ddp_rank, c), 0);
    ref_arg ra = {*c, n};
    assert_int_equal(run_ranks(1, reference_rank, &ra), 0);
    for (int r = 0; r < n; r++) {
        char name[32];
        snprintf(name, sizeof name, "rank%d.bin", r);
        bool same = false;
        double worst = compare(c->dir, name, "ref.bin", &same);
        assert_true(worst >= 0);
        if (expect_identical && !same)
            fail_msg("rank %d of %d: weights differ from one process (max |diff| %g)", r, n, worst);
        assert_true(worst < 1e-5);
    }
    assert_int_equal(remove_dir(c->dir), 0);
}

static void test_ddp_bit_identical(void **state) {
    ddp_case c = {.accum = 1};
    run_case(&c, 2, true);
    run_case(&c, 3, true);
}

/* no_sync: each rank sums its micro-batches before the all-reduce, so the sum's order
 * differs from one process's; equal up to rounding. */
static void test_ddp_no_sync(void **state) {
    ddp_case c = {.accum = 2};
    run_case(&c, 2, false);
}

static void test_ddp_unused(void **state) {
    ddp_case c = {.accum = 1, .unused_layer = true, .find_unused = true};
    run_case(&c, 2, true);
    ddp_case bad = {.accum = 1, .unused_layer = true, .find_unused = false};
    snprintf(bad.dir, sizeof bad.dir, "/tmp");
    assert_int_equal(run_ranks(2, ddp_rank, &bad), 0);
}

static void test_ddp_errors(void **state) {
    CT_ASSERT_ERR(ct_ddp_new(NULL, NULL, NULL) != NULL, CT_ERROR_NULL_ARGUMENT, NULL);
    char dir[64];
    ct_store *s = NULL;
    ct_process_group *pg = single_rank_begin("ct_ddp_err", dir, &s);
    CT_ASSERT_OK(pg);
    ct_scope_begin();
    ct_tensor *frozen = ct_ones(CT_SHAPE(3), CT_F32, CT_CPU);
    CT_ASSERT_ERR(ct_ddp_new_params(pg, &frozen, 1, NULL) != NULL, CT_ERROR_VALUE,
                  "doesn't have any parameter that requires a gradient");
    ct_tensor *w = ct_tensor_set_requires_grad(ct_ones(CT_SHAPE(3), CT_F32, CT_CPU), true);
    ct_ddp_options o = ct_ddp_defaults();
    o.bucket_cap = 0;
    CT_ASSERT_ERR(ct_ddp_new_params(pg, &w, 1, &o) != NULL, CT_ERROR_VALUE, "bucket caps");
    CT_ASSERT_ERR(ct_ddp_new_params(pg, &w, -1, NULL) != NULL, CT_ERROR_VALUE, NULL);
    ct_ddp *d = ct_ddp_new_params(pg, &w, 1, NULL);
    CT_ASSERT_OK(d);
    CT_ASSERT_ERR(ct_ddp_bucket_params(d, 5, NULL, 0) >= 0, CT_ERROR_INDEX, "bucket 5");
    /* Two backward passes without no_sync: an error at finish. */
    for (int k = 0; k < 2; k++) {
        ct_tensor *loss = ct_sum(ct_mul(w, w), NULL, 0, false, CT_DTYPE_UNDEFINED);
        assert_int_equal(ct_backward(loss, NULL, false, false), CT_OK);
    }
    CT_ASSERT_ERR(ct_ddp_finish(d) == CT_OK, CT_ERROR_RUNTIME, "accumulated twice");
    /* The gradient is a view of the bucket: zero_grad keeps it so. */
    assert_int_equal(ct_ddp_zero_grad(d), CT_OK);
    ct_tensor *g = ct_tensor_grad(w);
    assert_true(((float *)ct_tensor_data(g))[0] == 0.0f);
    ct_release(g);
    CT_ASSERT_ERR(ct_ddp_finish(NULL) == CT_OK, CT_ERROR_NULL_ARGUMENT, NULL);
    CT_ASSERT_ERR(ct_ddp_set_sync(NULL, true) == CT_OK, CT_ERROR_NULL_ARGUMENT, NULL);
    ct_ddp_free(d);
    ct_ddp_free(NULL);
    ct_scope_end();
    assert_int_equal(single_rank_end(pg, s, dir), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ddp_bit_identical),
        cmocka_unit_test(test_ddp_no_sync),
        cmocka_unit_test(test_ddp_unused),
        cmocka_unit_test(test_ddp_errors), /* last: it runs ops in this process */
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
