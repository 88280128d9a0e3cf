/* ZeRO-1 and DiLoCo on the tcp backend (forked ranks, tests/dist_ranks.h): ZeRO-1's
 * weights are bit-identical to one process running AdamW on the same global batch, its
 * clipping uses the global norm; DiLoCo with h = 1, outer lr 1 and no momentum is
 * parameter averaging, and on a learnable task it reaches DDP's validation-loss band
 * in the same steps. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "dist_ranks.h"
#include "dist_model.h"

enum { RUN_ZERO, RUN_DILOCO, RUN_DDP };

typedef struct {
    char dir[64];
    int kind;
    double max_norm;   /* ZeRO: clipping */
    int h;             /* DiLoCo */
    double outer_lr, outer_momentum;
    bool bf16;
    bool inner_sgd;    /* DiLoCo's inner optimizer: SGD lr 0.1 (else AdamW lr 1e-2) */
    bool learnable;    /* targets a function of the inputs; else the fixed noise of dist_model.h */
    int steps;
} optim_case;

/* A learnable task: y = tanh(x W*) for a fixed W*. */
static ct_tensor *task_loss(ct_module *m, int s, int64_t start, int64_t count) {
    ct_tensor *x = rows(s, start, count, IN, 0);
    ct_tensor *wstar = rows(0, 1000, IN, OUT, 5);
    ct_tensor *y = ct_tanh(ct_mm(x, wstar));
    ct_tensor *h = x;
    for (int k = 0; k < 3; k++)
        h = ct_module_forward(ct_module_child_at(m, k, NULL), h);
    return ct_mse_loss(h, y, CT_REDUCTION_MEAN);
}

static ct_tensor *case_loss(const optim_case *c, ct_module *m, int s, int64_t start, int64_t count) {
    return c->learnable ? task_loss(m, s, start, count) : loss_of(m, s, start, count, false);
}

static double val_loss(ct_module *m) {
    ct_scope_begin();
    bool prev = ct_set_grad_enabled(false);
    double v = NAN;
    ct_tensor *l = task_loss(m, 999, 5000, 64);
    if (!l || ct_item_double(l, &v) != CT_OK)
        v = NAN;
    ct_set_grad_enabled(prev);
    ct_scope_end();
    return v;
}

static int write_double(const char *dir, const char *name, double v) {
    char path[160];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    if (!f)
        return 1;
    fprintf(f, "%.17g\n", v);
    fclose(f);
    return 0;
}

static double read_double(const char *dir, const char *name) {
    char path[160];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "r");
    double v = NAN;
    if (f) {
        if (fscanf(f, "%lf", &v) != 1)
            v = NAN;
        fclose(f);
    }
    return v;
}

static ct_optimizer *adamw(ct_tensor **ps, int64_t n) {
    ct_optim_options o = ct_adamw_options(1e-2);
    return ct_optimizer_new(CT_OPTIM_ADAMW, ps, (int)n, &o);
}

static ct_optimizer *sgd(ct_tensor **ps, int64_t n) {
    ct_optim_options o = ct_sgd_options(0.1);
    return ct_optimizer_new(CT_OPTIM_SGD, ps, (int)n, &o);
}

static int optim_rank(ct_process_group *pg, int r, int n, void *ud) {
    const optim_case *c = ud;
    RCHECK(pg);
    ct_module *m = make_model(false);
    ct_tensor *ps[8];
    int64_t np = ct_module_parameters(m, ps, NULL, 8);
    ct_zero1 *z = NULL;
    ct_diloco *dl = NULL;
    ct_ddp *ddp = NULL;
    ct_optimizer *opt = NULL;
    if (c->kind == RUN_ZERO) {
        z = ct_zero1_new(pg, ps, (int)np, 1e-2, 0.9, 0.999, 1e-8, 1e-2);
        RCHECK(z);
        /* The parameters are views of one buffer now, and still the module's. */
        RCHECK(ct_tensor_shares_storage(ps[0], ps[3]));
    } else if (c->kind == RUN_DILOCO) {
        opt = c->inner_sgd ? sgd(ps, np) : adamw(ps, np);
        dl = ct_diloco_new(pg, ps, (int)np, opt, c->h, c->outer_lr, c->outer_momentum, c->bf16);
        RCHECK(opt && dl);
    } else {
        ddp = ct_ddp_new(pg, m, NULL);
        opt = adamw(ps, np);
        RCHECK(ddp && opt);
    }
    int64_t per = BATCH / n;
    int64_t sent0 = ct_process_group_bytes_sent(pg);
    FILE *norms = NULL;
    if (c->max_norm > 0 && r == 0) {
        char path[160];
        snprintf(path, sizeof path, "%s/norms.txt", c->dir);
        norms = fopen(path, "w");
    }
    for (int s = 0; s < c->steps; s++) {
        if (z)
            RCHECK(ct_zero1_zero_grad(z) == CT_OK);
        else if (ddp)
            RCHECK(ct_ddp_zero_grad(ddp) == CT_OK);
        else
            RCHECK(ct_optimizer_zero_grad(opt, true) == CT_OK);
        ct_scope_begin();
        /* DiLoCo's ranks see different data at every step, as DDP's do. */
        ct_tensor *loss = case_loss(c, m, s, (int64_t)r * per, per);
        RCHECK(loss && ct_backward(loss, NULL, false, false) == CT_OK);
        ct_scope_end();
        if (z) {
            double norm = 0;
            RCHECK(ct_zero1_step(z, c->max_norm, &norm) == CT_OK);
            if (norms)
                fprintf(norms, "%.17g\n", norm);
        } else if (dl) {
            RCHECK(ct_diloco_step(dl) == CT_OK);
        } else {
            RCHECK(ct_ddp_finish(ddp) == CT_OK);
            RCHECK(ct_optimizer_step(opt) == CT_OK);
        }
    }
    if (norms)
        fclose(norms);
    if (dl)
        RCHECK(ct_diloco_outer_steps(dl) == c->steps / c->h);
    char name[32];
    snprintf(name, sizeof name, "rank%d.bin", r);
    char path[160];
    snprintf(path, sizeof path, "%s/%s", c->dir, name);
    RCHECK(write_params(m, path) == 0);
    if (r == 0) {
        RCHECK(write_double(c->dir, "val.txt", val_loss(m)) == 0);
        RCHECK(write_double(c->dir, "bytes.txt", (double)(ct_process_group_bytes_sent(pg) - sent0)) == 0);
    }
    ct_zero1_free(z);
    ct_diloco_free(dl);
    ct_ddp_free(ddp);
    ct_optimizer_free(opt);
    ct_module_free(m);
    return 0;
}

/* One process: the global batch as n micro-batches in rank order, averaged. */
typedef struct {
    optim_case c;
    int n;
    bool use_sgd;
} ref_arg;

static int reference_rank(ct_process_group *pg, int r, int n_unused, void *ud) {
    const ref_arg *ra = ud;
    const optim_case *c = &ra->c;
    int n = ra->n;
    ct_module *m = make_model(false);
    ct_tensor *ps[8];
    int64_t np = ct_module_parameters(m, ps, NULL, 8);
    ct_optimizer *opt = ra->use_sgd ? sgd(ps, np) : adamw(ps, np);
    int64_t per = BATCH / n;
    FILE *norms = NULL;
    if (c->max_norm > 0) {
        char path[160];
        snprintf(path, sizeof path, "%s/ref_norms.txt", c->dir);
        norms = fopen(path, "w");
    }
    for (int s = 0; s < c->steps; s++) {
        ct_optimizer_zero_grad(opt, true);
        for (int k = 0; k < n; k++) {
            ct_scope_begin();
            ct_tensor *loss = case_loss(c, m, s, k * per, per);
            if (!loss || ct_backward(loss, NULL, false, false) != CT_OK)
                return 1;
            ct_scope_end();
        }
        for (int64_t i = 0; i < np; i++) {
            ct_tensor *g = ct_tensor_grad(ps[i]);
            float *p = ct_tensor_data(g);
            for (int64_t j = 0; j < ct_tensor_numel(g); j++)
                p[j] = p[j] / (float)n;
            ct_release(g);
        }
        if (c->max_norm > 0) {
            double norm = 0;
            if (ct_clip_grad_norm_(ps, (int)np, c->max_norm, 2.0, false, &norm) != CT_OK)
                return 1;
            fprintf(norms, "%.17g\n", norm);
        }
        if (ct_optimizer_step(opt) != CT_OK)
            return 1;
    }
    if (norms)
        fclose(norms);
    char path[160];
    snprintf(path, sizeof path, "%s/ref.bin", c->dir);
    int rc = write_params(m, path);
    if (rc == 0)
        rc = write_double(c->dir, "ref_val.txt", val_loss(m));
    ct_optimizer_free(opt);
    ct_module_free(m);
    return rc;
}

static void new_dir(optim_case *c) {
    snprintf(c->dir, sizeof c->dir, "/tmp/ct_optim_test_XXXXXX");
    assert_non_null(mkdtemp(c->dir));
}

static void rm_dir(const optim_case *c) {
    assert_int_equal(remove_dir(c->dir), 0);
}

/* Runs the case on n ranks and the reference; max |diff| of every rank's weights
 * against the reference, *identical when every rank's are the same bits. */
static double run_against_reference(optim_case *c, int n, bool use_sgd, bool *identical) {
    assert_int_equal(run_ranks(n, optim_rank, c), 0);
    ref_arg ra = {*c, n, use_sgd};
    assert_int_equal(run_ranks(1, reference_rank, &ra), 0);
    double worst = 0;
    *identical = true;
    for (int r = 0; r < n; r++) {
        char name[32];
        snprintf(name, sizeof name, "rank%d.bin", r);
        bool same = false;
        double w = compare(c->dir, name, "ref.bin", &same);
        assert_true(w >= 0);
        worst = w > worst ? w : worst;
        *identical &= same;
    }
    return worst;
}

static void test_zero1_bit_identical(void **state) {
    for (int n = 2; n <= 3; n++) {
        optim_case c = {.kind = RUN_ZERO, .steps = 4};
        new_dir(&c);
        bool same = false;
        double worst = run_against_reference(&c, n, false, &same);
        if (!same)
            fail_msg("ZeRO-1 on %d ranks: weights differ from one process's AdamW (max |diff| %g)", n, worst);
        rm_dir(&c);
    }
}

static void test_zero1_clip(void **state) {
    optim_case c = {.kind = RUN_ZERO, .steps = 3, .max_norm = 0.05};
    new_dir(&c);
    bool same = false;
    double worst = run_against_reference(&c, 2, false, &same);
    assert_true(worst < 1e-6);
    /* The global norm, as clip_grad_norm_ of the averaged gradients gives it. */
    char p1[160], p2[160];
    snprintf(p1, sizeof p1, "%s/norms.txt", c.dir);
    snprintf(p2, sizeof p2, "%s/ref_norms.txt", c.dir);
    FILE *a = fopen(p1, "r"), *b = fopen(p2, "r");
    assert_non_null(a);
    assert_non_null(b);
    double x, y;
    int k = 0;
    while (fscanf(a, "%lf", &x) == 1 && fscanf(b, "%lf", &y) == 1) {
        assert_true(x > 0.05); /* the clipping did something */
        assert_true(fabs(x - y) <= 1e-6 * y);
        k++;
    }
    assert_int_equal(k, 3);
    fclose(a);
    fclose(b);
    rm_dir(&c);
}

/* h = 1, outer lr 1, no momentum: the new parameters are the ranks' average after
 * one inner SGD step, which is one SGD step on the averaged gradient. */
static void test_diloco_averaging(void **state) {
    optim_case c = {.kind = RUN_DILOCO, .steps = 3, .h = 1, .outer_lr = 1.0, .inner_sgd = true};
    new_dir(&c);
    bool same = false;
    double worst = run_against_reference(&c, 2, true, &same);
    if (worst > 1e-6)
        fail_msg("DiLoCo h=1 differs from parameter averaging by %g", worst);
    rm_dir(&c);
}

static void test_diloco_band(void **state) {
    optim_case ddp = {.kind = RUN_DDP, .steps = 60, .learnable = true};
    new_dir(&ddp);
    assert_int_equal(run_ranks(2, optim_rank, &ddp), 0);
    double ddp_val = read_double(ddp.dir, "val.txt"), ddp_bytes = read_double(ddp.dir, "bytes.txt");
    double f32_bytes = 0;
    for (int bf16 = 0; bf16 <= 1; bf16++) {
        optim_case c = {.kind = RUN_DILOCO, .steps = 60, .h = 10, .outer_lr = 0.7, .outer_momentum = 0.9,
                        .learnable = true, .bf16 = bf16};
        new_dir(&c);
        assert_int_equal(run_ranks(2, optim_rank, &c), 0);
        double val = read_double(c.dir, "val.txt"), bytes = read_double(c.dir, "bytes.txt");
        print_message("DDP val %.4f (%.0f bytes), DiLoCo h=10%s val %.4f (%.0f bytes)\n", ddp_val, ddp_bytes,
                      bf16 ? " bf16" : "", val, bytes);
        assert_true(val == val && ddp_val == ddp_val);
        assert_true(val < 1.5 * ddp_val + 0.01);
        /* 1/h of DDP's gradient bytes (plus the messages' headers), and bfloat16
         * pseudo-gradients about half again. */
        assert_true(bytes < ddp_bytes / 6);
        if (bf16)
            assert_true(bytes < 0.7 * f32_bytes);
        f32_bytes = bytes;
        rm_dir(&c);
    }
    rm_dir(&ddp);
}

static void test_optim_errors(void **state) {
    char dir[64];
    ct_store *s = NULL;
    ct_process_group *pg = single_rank_begin("ct_optim_err", dir, &s);
    CT_ASSERT_OK(pg);
    ct_scope_begin();
    ct_tensor *a = ct_tensor_set_requires_grad(ct_ones(CT_SHAPE(3), CT_F32, CT_CPU), true);
    ct_tensor *b = ct_tensor_set_requires_grad(ct_ones(CT_SHAPE(2), CT_F64, CT_CPU), true);
    ct_tensor *ab[2] = {a, b}, *aa[2] = {a, a};
    CT_ASSERT_ERR(ct_zero1_new(pg, ab, 2, 1e-3, 0.9, 0.999, 1e-8, 0) != NULL, CT_ERROR_TYPE, "one floating-point dtype");
    CT_ASSERT_ERR(ct_zero1_new(pg, aa, 2, 1e-3, 0.9, 0.999, 1e-8, 0) != NULL, CT_ERROR_VALUE, "appears twice");
    CT_ASSERT_ERR(ct_zero1_new(pg, NULL, 0, 1e-3, 0.9, 0.999, 1e-8, 0) != NULL, CT_ERROR_VALUE, "at least one");
    CT_ASSERT_ERR(ct_zero1_new(NULL, ab, 2, 1e-3, 0.9, 0.999, 1e-8, 0) != NULL, CT_ERROR_NULL_ARGUMENT, NULL);
    ct_zero1 *z = ct_zero1_new(pg, &a, 1, 1e-3, 0.9, 0.999, 1e-8, 0);
    CT_ASSERT_OK(z);
    CT_ASSERT_ERR(ct_zero1_step(z, NAN, NULL) == CT_OK, CT_ERROR_VALUE, "NaN");
    CT_ASSERT_ERR(ct_zero1_step(NULL, 0, NULL) == CT_OK, CT_ERROR_NULL_ARGUMENT, NULL);
    assert_int_equal(ct_zero1_set_lr(z, 0.5), CT_OK);
    ct_zero1_free(z);
    ct_zero1_free(NULL);
    ct_optim_options o = ct_sgd_options(0.1);
    ct_optimizer *opt = ct_optimizer_new(CT_OPTIM_SGD, &b, 1, &o);
    CT_ASSERT_ERR(ct_diloco_new(pg, &b, 1, opt, 0, 0.7, 0.9, false) != NULL, CT_ERROR_VALUE, "at least 1");
    CT_ASSERT_ERR(ct_diloco_new(pg, &b, 1, opt, 5, -1, 0.9, false) != NULL, CT_ERROR_VALUE, "outer lr");
    CT_ASSERT_ERR(ct_diloco_new(pg, &b, 1, opt, 5, 0.7, 1.0, false) != NULL, CT_ERROR_VALUE, "momentum");
    CT_ASSERT_ERR(ct_diloco_new(pg, &b, 1, NULL, 5, 0.7, 0.9, false) != NULL, CT_ERROR_NULL_ARGUMENT, NULL);
    CT_ASSERT_ERR(ct_diloco_new(pg, NULL, 1, opt, 5, 0.7, 0.9, false) != NULL, CT_ERROR_VALUE, "at least one");
    CT_ASSERT_ERR(ct_diloco_step(NULL) == CT_OK, CT_ERROR_NULL_ARGUMENT, NULL);
    assert_int_equal(ct_diloco_outer_steps(NULL), -1);
    ct_diloco_free(NULL);
    ct_optimizer_free(opt);
    /* set__: an alias of another tensor's memory. */
    ct_tensor *flat = ct_zeros(CT_SHAPE(6), CT_F64, CT_CPU);
    CT_ASSERT_ERR(ct_tensor_set_(a, flat) != NULL, CT_ERROR_TYPE, "Could not set tensor");
    CT_ASSERT_ERR(ct_tensor_set_(ct_narrow(flat, 0, 0, 2), b) != NULL, CT_ERROR_RUNTIME, "view");
    CT_ASSERT_ERR(ct_tensor_set_(NULL, b) != NULL, CT_ERROR_NULL_ARGUMENT, NULL);
    assert_non_null(ct_tensor_set_(b, ct_narrow(flat, 0, 4, 2)));
    ((double *)ct_tensor_data(flat))[5] = 3.5;
    assert_true(((double *)ct_tensor_data(b))[1] == 3.5);
    ct_scope_end();
    assert_int_equal(single_rank_end(pg, s, dir), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_zero1_bit_identical), cmocka_unit_test(test_zero1_clip),
        cmocka_unit_test(test_diloco_averaging),    cmocka_unit_test(test_diloco_band),
        cmocka_unit_test(test_optim_errors), /* last: it runs ops in this process */
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
