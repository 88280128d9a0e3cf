/* Optimizers against torch.optim (tests/data/optim_golden.txt), both code paths;
 * state dicts and resume; zero_grad; gradient clipping; error inputs. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "optim/grad_access.h"
#include "tensor_impl.h"

#define MAXP 8
#define MAXG 4

/* Writes the .grad field itself rather than through ct_tensor_set_grad, so that the
 * error tests can plant a gradient of the wrong shape or dtype (which set_grad
 * refuses) and reach the optimizer's own checks. */
static void set_grad(ct_tensor *p, ct_tensor *g) {
    ct_tensor *old = p->grad;
    p->grad = g ? ct_retain(g) : NULL;
    ct_release(old);
}

/* ------------------------------------------------------------ golden file */

typedef struct golden_case {
    char name[64];
    ct_optim_kind kind;
    int ngroups;
    int group_n[MAXG];
    ct_optim_options opts[MAXG];
    int np;
    int ndim[MAXP];
    int64_t shape[MAXP][4];
    int64_t numel[MAXP];
    double *init[MAXP];
    int nsteps;
    double *grads[MAXP];   /* nsteps * numel, NAN-free; has_grad says which exist */
    bool *has_grad[MAXP];  /* nsteps */
    double *expect[MAXP];  /* nsteps * numel */
} golden_case;

static ct_optim_kind kind_from(const char *s) {
    if (!strcmp(s, "SGD"))
        return CT_OPTIM_SGD;
    if (!strcmp(s, "Adam"))
        return CT_OPTIM_ADAM;
    if (!strcmp(s, "AdamW"))
        return CT_OPTIM_ADAMW;
    if (!strcmp(s, "RMSprop"))
        return CT_OPTIM_RMSPROP;
    return CT_OPTIM_ADAGRAD;
}

static ct_optim_options options_for(ct_optim_kind k, double lr) {
    switch (k) {
    case CT_OPTIM_SGD:
        return ct_sgd_options(lr);
    case CT_OPTIM_ADAM:
        return ct_adam_options(lr);
    case CT_OPTIM_ADAMW:
        return ct_adamw_options(lr);
    case CT_OPTIM_RMSPROP:
        return ct_rmsprop_options(lr);
    default:
        return ct_adagrad_options(lr);
    }
}

static void apply_option(ct_optim_options *o, const char *kv) {
    char key[64];
    const char *eq = strchr(kv, '=');
    assert_non_null(eq);
    size_t n = (size_t)(eq - kv);
    assert_true(n < sizeof key);
    memcpy(key, kv, n);
    key[n] = 0;
    double v = strtod(eq + 1, NULL);
    if (!strcmp(key, "lr"))
        o->lr = v;
    else if (!strcmp(key, "weight_decay"))
        o->weight_decay = v;
    else if (!strcmp(key, "momentum"))
        o->momentum = v;
    else if (!strcmp(key, "dampening"))
        o->dampening = v;
    else if (!strcmp(key, "nesterov"))
        o->nesterov = v != 0;
    else if (!strcmp(key, "beta1"))
        o->beta1 = v;
    else if (!strcmp(key, "beta2"))
        o->beta2 = v;
    else if (!strcmp(key, "eps"))
        o->eps = v;
    else if (!strcmp(key, "amsgrad"))
        o->amsgrad = v != 0;
    else if (!strcmp(key, "alpha"))
        o->alpha = v;
    else if (!strcmp(key, "centered"))
        o->centered = v != 0;
    else if (!strcmp(key, "lr_decay"))
        o->lr_decay = v;
    else if (!strcmp(key, "initial_accumulator_value"))
        o->initial_accumulator_value = v;
    else if (!strcmp(key, "maximize"))
        o->maximize = v != 0;
    else
        fail_msg("unknown option %s", key);
}

/* Reads whitespace-separated hex floats from s into out[0..n). */
static void read_values(char *s, double *out, int64_t n) {
    char *save = NULL;
    char *tok = strtok_r(s, " \n", &save);
    for (int64_t i = 0; i < n; i++) {
        assert_non_null(tok);
        out[i] = strtod(tok, NULL);
        tok = strtok_r(NULL, " \n", &save);
    }
    assert_null(tok);
}

static int load_cases(golden_case **out) {
    FILE *f = fopen(CT_TEST_DATA_DIR "/optim_golden.txt", "r");
    assert_non_null(f);
    static char line[1 << 16];
    int ncases = 0, cap = 0;
    golden_case *cases = NULL, *c = NULL;
    int grad_i = 0, expect_i = 0;
    while (fgets(line, sizeof line, f)) {
        if (!strncmp(line, "case ", 5)) {
            if (ncases == cap) {
                cap = cap ? cap * 2 : 16;
                cases = realloc(cases, sizeof *cases * (size_t)cap);
                assert_non_null(cases);
            }
            c = &cases[ncases++];
            memset(c, 0, sizeof *c);
            char kind[32];
            assert_int_equal(sscanf(line + 5, "%63s %31s", c->name, kind), 2);
            c->kind = kind_from(kind);
        } else if (!strncmp(line, "group ", 6)) {
            char *save = NULL;
            char *tok = strtok_r(line + 6, " \n", &save);
            int g = c->ngroups++;
            c->group_n[g] = atoi(tok);
            c->opts[g] = options_for(c->kind, 0);
            while ((tok = strtok_r(NULL, " \n", &save)))
                apply_option(&c->opts[g], tok);
        } else if (!strncmp(line, "param ", 6)) {
            int p = c->np++;
            char *s = line + 6, *end;
            c->ndim[p] = (int)strtol(s, &end, 10);
            c->numel[p] = 1;
            for (int d = 0; d < c->ndim[p]; d++) {
                c->shape[p][d] = strtol(end, &end, 10);
                c->numel[p] *= c->shape[p][d];
            }
            c->init[p] = malloc(sizeof(double) * (size_t)c->numel[p]);
            read_values(end, c->init[p], c->numel[p]);
            c->grads[p] = calloc(64 * (size_t)c->numel[p], sizeof(double));
            c->expect[p] = calloc(64 * (size_t)c->numel[p], sizeof(double));
            c->has_grad[p] = calloc(64, sizeof(bool));
        } else if (!strncmp(line, "step", 4)) {
            c->nsteps++;
            assert_true(c->nsteps <= 64);
            grad_i = expect_i = 0;
        } else if (!strncmp(line, "grad ", 5)) {
            int p = grad_i++, s = c->nsteps - 1;
            if (strncmp(line + 5, "none", 4) != 0) {
                c->has_grad[p][s] = true;
                read_values(line + 5, c->grads[p] + s * c->numel[p], c->numel[p]);
            }
        } else if (!strncmp(line, "expect ", 7)) {
            int p = expect_i++, s = c->nsteps - 1;
            read_values(line + 7, c->expect[p] + s * c->numel[p], c->numel[p]);
        }
    }
    fclose(f);
    *out = cases;
    return ncases;
}

static void free_cases(golden_case *cases, int n) {
    for (int i = 0; i < n; i++)
        for (int p = 0; p < cases[i].np; p++) {
            free(cases[i].init[p]);
            free(cases[i].grads[p]);
            free(cases[i].expect[p]);
            free(cases[i].has_grad[p]);
        }
    free(cases);
}

/* Builds the parameters and the optimizer of a case (foreach forced to fe). */
static ct_optimizer *make_case(const golden_case *c, ct_tensor **params, int fe, ct_dtype dtype) {
    for (int p = 0; p < c->np; p++) {
        ct_tensor *t = ct_from_data(c->init[p], c->shape[p], c->ndim[p], CT_F64);
        CT_ASSERT_OK(t);
        params[p] = dtype == CT_F64 ? t : ct_to_dtype(t, dtype);
        if (params[p] != t)
            ct_release(t);
    }
    ct_optim_options o = c->opts[0];
    o.foreach = fe;
    ct_optimizer *opt = ct_optimizer_new(c->kind, params, c->group_n[0], &o);
    CT_ASSERT_OK(opt);
    int at = c->group_n[0];
    for (int g = 1; g < c->ngroups; g++) {
        o = c->opts[g];
        o.foreach = fe;
        assert_int_equal(ct_optimizer_add_param_group(opt, params + at, c->group_n[g], &o), CT_OK);
        at += c->group_n[g];
    }
    return opt;
}

static void feed_grads(const golden_case *c, ct_tensor **params, int s, ct_dtype dtype) {
    for (int p = 0; p < c->np; p++) {
        if (!c->has_grad[p][s]) {
            set_grad(params[p], NULL);
            continue;
        }
        ct_tensor *g = ct_from_data(c->grads[p] + s * c->numel[p], c->shape[p], c->ndim[p], CT_F64);
        ct_tensor *gd = dtype == CT_F64 ? g : ct_to_dtype(g, dtype);
        set_grad(params[p], gd);
        if (gd != g)
            ct_release(gd);
        ct_release(g);
    }
}

static double max_rel_error(const golden_case *c, ct_tensor **params, int s) {
    double worst = 0;
    for (int p = 0; p < c->np; p++)
        for (int64_t i = 0; i < c->numel[p]; i++) {
            double want = c->expect[p][s * c->numel[p] + i], got = ct_test_at(params[p], i);
            double err = fabs(got - want) / fmax(fabs(want), 1e-3);
            if (!(err <= worst))
                worst = err;
        }
    return worst;
}

static void release_params(ct_tensor **params, int n) {
    for (int p = 0; p < n; p++)
        ct_release(params[p]);
}

static void run_golden(int fe) {
    golden_case *cases;
    int n = load_cases(&cases);
    assert_true(n >= 17);
    for (int ci = 0; ci < n; ci++) {
        const golden_case *c = &cases[ci];
        ct_tensor *params[MAXP];
        ct_optimizer *opt = make_case(c, params, fe, CT_F64);
        assert_int_equal(c->nsteps, 20);
        for (int s = 0; s < c->nsteps; s++) {
            feed_grads(c, params, s, CT_F64);
            int64_t v0 = ct_tensor_version(params[0]);
            assert_int_equal(ct_optimizer_step(opt), CT_OK);
            if (c->has_grad[0][s])
                assert_true(ct_tensor_version(params[0]) > v0);
            double err = max_rel_error(c, params, s);
            if (!(err <= 1e-12))
                fail_msg("%s (foreach=%d) step %d: relative error %g", c->name, fe, s, err);
        }
        ct_optimizer_free(opt);
        release_params(params, c->np);
    }
    free_cases(cases, n);
}

static void test_golden_foreach(void **state) {
    (void)state;
    run_golden(1);
}

static void test_golden_plain(void **state) {
    (void)state;
    run_golden(0);
}

/* float32: the fused loop and the op-by-op path round the same way per element. */
static void test_float32_paths_agree(void **state) {
    (void)state;
    golden_case *cases;
    int n = load_cases(&cases);
    for (int ci = 0; ci < n; ci++) {
        const golden_case *c = &cases[ci];
        ct_tensor *pa[MAXP], *pb[MAXP];
        ct_optimizer *a = make_case(c, pa, 1, CT_F32), *b = make_case(c, pb, 0, CT_F32);
        for (int s = 0; s < c->nsteps; s++) {
            feed_grads(c, pa, s, CT_F32);
            feed_grads(c, pb, s, CT_F32);
            assert_int_equal(ct_optimizer_step(a), CT_OK);
            assert_int_equal(ct_optimizer_step(b), CT_OK);
        }
        for (int p = 0; p < c->np; p++)
            for (int64_t i = 0; i < c->numel[p]; i++) {
                double x = ct_test_at(pa[p], i), y = ct_test_at(pb[p], i);
                double want = c->expect[p][(c->nsteps - 1) * c->numel[p] + i];
                if (!(fabs(x - y) <= 1e-5 * fmax(1, fabs(y))))
                    fail_msg("%s: float32 paths differ at param %d [%lld]: %.9g vs %.9g", c->name, p,
                             (long long)i, x, y);
                /* and both stay close to the float64 trajectory */
                if (!(fabs(x - want) <= 1e-3 * fmax(1, fabs(want))))
                    fail_msg("%s: float32 drifts from float64 at param %d: %.9g vs %.9g", c->name, p, x, want);
            }
        ct_optimizer_free(a);
        ct_optimizer_free(b);
        release_params(pa, c->np);
        release_params(pb, c->np);
    }
    free_cases(cases, n);
}

/* Stop after k steps, save the state dict, build a fresh optimizer, load, continue:
 * the parameters must equal an uninterrupted run bit for bit. */
static void test_state_dict_resume_bit_identical(void **state) {
    (void)state;
    golden_case *cases;
    int n = load_cases(&cases);
    for (int ci = 0; ci < n; ci++) {
        const golden_case *c = &cases[ci];
        for (int fe = 0; fe <= 1; fe++) {
            ct_tensor *pa[MAXP], *pb[MAXP];
            ct_optimizer *a = make_case(c, pa, fe, CT_F64);
            ct_optimizer *b = make_case(c, pb, fe, CT_F64);
            const int k = 7;
            for (int s = 0; s < k; s++) {
                feed_grads(c, pa, s, CT_F64);
                assert_int_equal(ct_optimizer_step(a), CT_OK);
                feed_grads(c, pb, s, CT_F64);
                assert_int_equal(ct_optimizer_step(b), CT_OK);
            }
            /* b is torn down and rebuilt from its parameters' values and its state dict */
            ct_value *sd = ct_optimizer_state_dict(b);
            CT_ASSERT_OK(sd);
            ct_optimizer_free(b);
            ct_optim_options o = options_for(c->kind, 123.0); /* overwritten by the dict */
            o.foreach = fe;
            b = ct_optimizer_new(c->kind, pb, c->group_n[0], &o);
            CT_ASSERT_OK(b);
            int at = c->group_n[0];
            for (int g = 1; g < c->ngroups; g++) {
                assert_int_equal(ct_optimizer_add_param_group(b, pb + at, c->group_n[g], &o), CT_OK);
                at += c->group_n[g];
            }
            assert_int_equal(ct_optimizer_load_state_dict(b, sd), CT_OK);
            ct_value_free(sd);
            assert_true(ct_optimizer_get_lr(b, 0) == c->opts[0].lr);
            for (int s = k; s < c->nsteps; s++) {
                feed_grads(c, pa, s, CT_F64);
                assert_int_equal(ct_optimizer_step(a), CT_OK);
                feed_grads(c, pb, s, CT_F64);
                assert_int_equal(ct_optimizer_step(b), CT_OK);
            }
            for (int p = 0; p < c->np; p++)
                assert_memory_equal(ct_tensor_data(pa[p]), ct_tensor_data(pb[p]),
                                    sizeof(double) * (size_t)c->numel[p]);
            ct_optimizer_free(a);
            ct_optimizer_free(b);
            release_params(pa, c->np);
            release_params(pb, c->np);
        }
    }
    free_cases(cases, n);
}

/* The dict's layout is torch's: int keys under "state", tensors named as torch names
 * them, "params" id lists, betas as a tuple. */
static void test_state_dict_layout(void **state) {
    (void)state;
    ct_tensor *w = ct_zeros(CT_SHAPE(2, 3), CT_F32, CT_CPU), *b = ct_zeros(CT_SHAPE(3), CT_F32, CT_CPU);
    ct_tensor *ps[2] = {w, b};
    ct_optim_options o = ct_adam_options(0.01);
    o.amsgrad = true;
    ct_optimizer *opt = ct_optimizer_new(CT_OPTIM_ADAM, ps, 2, &o);
    CT_ASSERT_OK(opt);
    ct_tensor *g = ct_ones(CT_SHAPE(2, 3), CT_F32, CT_CPU);
    set_grad(w, g);
    assert_int_equal(ct_optimizer_step(opt), CT_OK);
    assert_int_equal(ct_optimizer_step(opt), CT_OK);
    ct_value *sd = ct_optimizer_state_dict(opt);
    CT_ASSERT_OK(sd);
    ct_value *st = ct_value_get(sd, "state");
    assert_int_equal(ct_value_len(st), 1); /* b never had a gradient */
    assert_int_equal(ct_value_kind(ct_value_key_at(st, 0)), CT_VALUE_INT);
    assert_int_equal(ct_value_int(ct_value_key_at(st, 0)), 0);
    ct_value *s0 = ct_value_at(st, 0);
    ct_tensor *step = ct_value_tensor(ct_value_get(s0, "step"));
    double sv;
    assert_int_equal(ct_item_double(step, &sv), CT_OK);
    assert_true(sv == 2.0);
    assert_int_equal(ct_tensor_dtype(step), CT_F32);
    ct_release(step);
    ct_tensor *m = ct_value_tensor(ct_value_get(s0, "exp_avg"));
    CT_ASSERT_SHAPE(m, 2, 3);
    /* a copy: changing the optimizer later does not change the dict */
    assert_false(ct_tensor_shares_storage(m, w));
    ct_release(m);
    assert_non_null(ct_value_get(s0, "max_exp_avg_sq"));
    ct_value *g0 = ct_value_at(ct_value_get(sd, "param_groups"), 0);
    assert_true(ct_value_float(ct_value_get(g0, "lr")) == 0.01);
    ct_value *betas = ct_value_get(g0, "betas");
    assert_int_equal(ct_value_kind(betas), CT_VALUE_TUPLE);
    assert_true(ct_value_float(ct_value_at(betas, 1)) == 0.999);
    ct_value *ids = ct_value_get(g0, "params");
    assert_int_equal(ct_value_len(ids), 2);
    assert_int_equal(ct_value_int(ct_value_at(ids, 1)), 1);
    ct_value_free(sd);

    /* SGD without momentum keeps momentum_buffer = None, as torch */
    ct_optim_options so = ct_sgd_options(0.1);
    ct_optimizer *sgd = ct_optimizer_new(CT_OPTIM_SGD, ps, 1, &so);
    assert_int_equal(ct_optimizer_step(sgd), CT_OK);
    sd = ct_optimizer_state_dict(sgd);
    ct_value *mb = ct_value_get(ct_value_at(ct_value_get(sd, "state"), 0), "momentum_buffer");
    assert_non_null(mb);
    assert_int_equal(ct_value_kind(mb), CT_VALUE_NONE);
    ct_value_free(sd);
    ct_optimizer_free(sgd);
    ct_optimizer_free(opt);
    ct_release(g);
    ct_release(w);
    ct_release(b);
}

static void test_state_dict_errors_leave_optimizer_unchanged(void **state) {
    (void)state;
    ct_tensor *w = ct_ones(CT_SHAPE(4), CT_F64, CT_CPU), *v = ct_ones(CT_SHAPE(2), CT_F64, CT_CPU);
    ct_tensor *ps[2] = {w, v};
    ct_optim_options o = ct_adam_options(0.5);
    ct_optimizer *opt = ct_optimizer_new(CT_OPTIM_ADAM, ps, 2, &o);
    ct_tensor *g = ct_ones(CT_SHAPE(4), CT_F64, CT_CPU);
    set_grad(w, g);
    assert_int_equal(ct_optimizer_step(opt), CT_OK);
    ct_value *sd = ct_optimizer_state_dict(opt);

    /* a dict for another group layout */
    ct_optimizer *one = ct_optimizer_new(CT_OPTIM_ADAM, ps, 1, &o);
    CT_ASSERT_ERR(ct_optimizer_load_state_dict(one, sd) == CT_OK, CT_ERROR_VALUE, "doesn't match the size");
    ct_optimizer_free(one);
    ct_tensor *ps2[2] = {v, w}; /* same count, shapes swapped */
    ct_optimizer *swapped = ct_optimizer_new(CT_OPTIM_ADAM, ps2, 2, &o);
    CT_ASSERT_ERR(ct_optimizer_load_state_dict(swapped, sd) == CT_OK, CT_ERROR_VALUE, "has shape [4]");
    ct_optimizer_free(swapped);

    /* broken entries */
    ct_value *g0 = ct_value_at(ct_value_get(sd, "param_groups"), 0);
    ct_value_set(g0, "lr", ct_value_new_float(-1));
    CT_ASSERT_ERR(ct_optimizer_load_state_dict(opt, sd) == CT_OK, CT_ERROR_VALUE, "Invalid learning rate");
    ct_value_set(g0, "lr", ct_value_new_str("fast"));
    CT_ASSERT_ERR(ct_optimizer_load_state_dict(opt, sd) == CT_OK, CT_ERROR_VALUE, "should be a number");
    ct_value_set(g0, "lr", ct_value_new_float(0.25));
    ct_value *s0 = ct_value_at(ct_value_get(sd, "state"), 0);
    ct_value_set(s0, "exp_avg", ct_value_new_int(3));
    CT_ASSERT_ERR(ct_optimizer_load_state_dict(opt, sd) == CT_OK, CT_ERROR_VALUE, "should be a tensor");
    assert_true(ct_optimizer_get_lr(opt, 0) == 0.5); /* nothing was applied */
    ct_value_free(sd);

    ct_value *notdict = ct_value_new_list();
    CT_ASSERT_ERR(ct_optimizer_load_state_dict(opt, notdict) == CT_OK, CT_ERROR_VALUE, "should be a dict");
    ct_value_free(notdict);
    ct_value *empty = ct_value_new_dict();
    CT_ASSERT_ERR(ct_optimizer_load_state_dict(opt, empty) == CT_OK, CT_ERROR_VALUE, "'param_groups'");
    ct_value_free(empty);
    CT_ASSERT_ERR(ct_optimizer_load_state_dict(opt, NULL) == CT_OK, CT_ERROR_NULL_ARGUMENT, "state_dict");
    CT_ASSERT_ERR(ct_optimizer_load_state_dict(NULL, NULL) == CT_OK, CT_ERROR_NULL_ARGUMENT, "optimizer");
    CT_ASSERT_ERR(ct_optimizer_state_dict(NULL) != NULL, CT_ERROR_NULL_ARGUMENT, "optimizer");
    ct_optimizer_free(opt);
    ct_release(g);
    ct_release(w);
    ct_release(v);
}

static void test_zero_grad(void **state) {
    (void)state;
    ct_tensor *w = ct_ones(CT_SHAPE(3), CT_F32, CT_CPU);
    ct_optim_options o = ct_sgd_options(0.1);
    ct_optimizer *opt = ct_optimizer_new(CT_OPTIM_SGD, &w, 1, &o);
    ct_tensor *g = ct_full(CT_SHAPE(3), ct_scalar_float(2), CT_F32, CT_CPU);
    set_grad(w, g);
    assert_int_equal(ct_optimizer_zero_grad(opt, false), CT_OK);
    assert_ptr_equal(ct_optim_grad(w), g);
    assert_true(ct_test_at(g, 2) == 0.0);
    assert_int_equal(ct_optimizer_zero_grad(opt, true), CT_OK);
    assert_null(ct_optim_grad(w));
    /* a parameter without a gradient is left alone by step */
    int64_t v = ct_tensor_version(w);
    assert_int_equal(ct_optimizer_step(opt), CT_OK);
    assert_int_equal(ct_tensor_version(w), v);
    assert_true(ct_test_at(w, 0) == 1.0);
    CT_ASSERT_ERR(ct_optimizer_zero_grad(NULL, true) == CT_OK, CT_ERROR_NULL_ARGUMENT, "optimizer");
    ct_optimizer_free(opt);
    ct_release(g);
    ct_release(w);
}

/* The optimizer holds its own references; non-contiguous parameters take the plain
 * path and still update in place. */
static void test_ownership_and_strided(void **state) {
    (void)state;
    int64_t before = ct_memory_allocated(CT_CPU);
    ct_tensor *base = ct_ones(CT_SHAPE(4, 4), CT_F64, CT_CPU);
    ct_tensor *wt = ct_t(base); /* non-contiguous view */
    ct_optim_options o = ct_adam_options(0.1);
    o.foreach = 1;
    ct_optimizer *opt = ct_optimizer_new(CT_OPTIM_ADAM, &wt, 1, &o);
    ct_release(wt); /* the optimizer keeps it alive */
    ct_tensor *p = ct_optimizer_group_param(opt, 0, 0);
    ct_tensor *g = ct_ones(CT_SHAPE(4, 4), CT_F64, CT_CPU);
    set_grad(p, g);
    ct_release(g);
    assert_int_equal(ct_optimizer_step(opt), CT_OK);
    /* Adam's first step moves each element by lr (g / |g|) */
    assert_true(fabs(ct_test_at(base, 5) - 0.9) < 1e-7);
    set_grad(p, NULL);
    ct_optimizer_free(opt);
    ct_release(base);
    assert_int_equal(ct_memory_allocated(CT_CPU), before);
}

static void test_options_accessors(void **state) {
    (void)state;
    ct_tensor *a = ct_ones(CT_SHAPE(2), CT_F32, CT_CPU), *b = ct_ones(CT_SHAPE(2), CT_F32, CT_CPU);
    ct_optim_options o = ct_rmsprop_options(0.01);
    ct_optimizer *opt = ct_optimizer_new(CT_OPTIM_RMSPROP, &a, 1, &o);
    ct_optim_options o2 = o;
    o2.lr = 0.5;
    o2.weight_decay = 0.1;
    assert_int_equal(ct_optimizer_add_param_group(opt, &b, 1, &o2), CT_OK);
    assert_int_equal(ct_optimizer_num_groups(opt), 2);
    assert_int_equal(ct_optimizer_group_size(opt, 1), 1);
    assert_ptr_equal(ct_optimizer_group_param(opt, 1, 0), b);
    assert_true(ct_optimizer_get_lr(opt, 1) == 0.5);
    assert_int_equal(ct_optimizer_set_lr(opt, 0, 0.2), CT_OK);
    ct_optim_options got;
    assert_int_equal(ct_optimizer_get_options(opt, 0, &got), CT_OK);
    assert_true(got.lr == 0.2 && got.alpha == 0.99);
    assert_string_equal(ct_optimizer_name(opt), "RMSprop");
    assert_int_equal(ct_optimizer_kind(opt), CT_OPTIM_RMSPROP);

    CT_ASSERT_ERR(ct_optimizer_set_lr(opt, 0, -1) == CT_OK, CT_ERROR_VALUE, "Invalid learning rate: -1");
    CT_ASSERT_ERR(ct_optimizer_set_lr(opt, 2, 0.1) == CT_OK, CT_ERROR_INDEX, "param group 2 out of range");
    CT_ASSERT_ERR(!isnan(ct_optimizer_get_lr(opt, -1)), CT_ERROR_INDEX, "out of range");
    CT_ASSERT_ERR(ct_optimizer_group_size(opt, 5) >= 0, CT_ERROR_INDEX, "out of range");
    CT_ASSERT_ERR(ct_optimizer_group_param(opt, 0, 1) != NULL, CT_ERROR_INDEX, "parameter 1 out of range");
    CT_ASSERT_ERR(ct_optimizer_get_options(opt, 0, NULL) == CT_OK, CT_ERROR_NULL_ARGUMENT, "out");
    CT_ASSERT_ERR(ct_optimizer_set_options(opt, 0, NULL) == CT_OK, CT_ERROR_NULL_ARGUMENT, "options");
    o2.alpha = -1;
    CT_ASSERT_ERR(ct_optimizer_set_options(opt, 0, &o2) == CT_OK, CT_ERROR_VALUE, "Invalid alpha value: -1");
    /* a tensor in two groups */
    CT_ASSERT_ERR(ct_optimizer_add_param_group(opt, &a, 1, NULL) == CT_OK, CT_ERROR_VALUE,
                  "more than one parameter group");
    assert_int_equal(ct_optimizer_num_groups(opt), 2);
    ct_optimizer_free(opt);
    ct_release(a);
    ct_release(b);
}

static void test_constructor_errors(void **state) {
    (void)state;
    ct_tensor *w = ct_ones(CT_SHAPE(2), CT_F32, CT_CPU);
    ct_tensor *iw = ct_ones(CT_SHAPE(2), CT_I64, CT_CPU);
    ct_optim_options o = ct_sgd_options(-0.1);
    CT_ASSERT_ERR(ct_optimizer_new(CT_OPTIM_SGD, &w, 1, &o) != NULL, CT_ERROR_VALUE, "Invalid learning rate: -0.1");
    o = ct_sgd_options(0.1);
    o.momentum = -0.5;
    CT_ASSERT_ERR(ct_optimizer_new(CT_OPTIM_SGD, &w, 1, &o) != NULL, CT_ERROR_VALUE, "Invalid momentum value: -0.5");
    o = ct_sgd_options(0.1);
    o.nesterov = true;
    CT_ASSERT_ERR(ct_optimizer_new(CT_OPTIM_SGD, &w, 1, &o) != NULL, CT_ERROR_VALUE,
                  "Nesterov momentum requires a momentum and zero dampening");
    o.momentum = 0.9;
    o.dampening = 0.1;
    CT_ASSERT_ERR(ct_optimizer_new(CT_OPTIM_SGD, &w, 1, &o) != NULL, CT_ERROR_VALUE,
                  "Nesterov momentum requires a momentum and zero dampening");
    o = ct_sgd_options(0.1);
    o.weight_decay = -1;
    CT_ASSERT_ERR(ct_optimizer_new(CT_OPTIM_SGD, &w, 1, &o) != NULL, CT_ERROR_VALUE, "Invalid weight_decay value");
    o = ct_sgd_options(NAN);
    CT_ASSERT_ERR(ct_optimizer_new(CT_OPTIM_SGD, &w, 1, &o) != NULL, CT_ERROR_VALUE, "Invalid learning rate");
    CT_ASSERT_ERR(ct_optimizer_new(CT_OPTIM_SGD, &w, 1, NULL) != NULL, CT_ERROR_VALUE, "learning rate");
    o = ct_adam_options(0.1);
    o.beta1 = 1.0;
    CT_ASSERT_ERR(ct_optimizer_new(CT_OPTIM_ADAM, &w, 1, &o) != NULL, CT_ERROR_VALUE,
                  "Invalid beta parameter at index 0: 1");
    o = ct_adamw_options(0.1);
    o.beta2 = -0.1;
    CT_ASSERT_ERR(ct_optimizer_new(CT_OPTIM_ADAMW, &w, 1, &o) != NULL, CT_ERROR_VALUE,
                  "Invalid beta parameter at index 1");
    o.beta2 = 0.9;
    o.eps = -1;
    CT_ASSERT_ERR(ct_optimizer_new(CT_OPTIM_ADAMW, &w, 1, &o) != NULL, CT_ERROR_VALUE, "Invalid epsilon value");
    o = ct_rmsprop_options(0.1);
    o.momentum = -1;
    CT_ASSERT_ERR(ct_optimizer_new(CT_OPTIM_RMSPROP, &w, 1, &o) != NULL, CT_ERROR_VALUE, "Invalid momentum value");
    o = ct_adagrad_options(0.1);
    o.lr_decay = -1;
    CT_ASSERT_ERR(ct_optimizer_new(CT_OPTIM_ADAGRAD, &w, 1, &o) != NULL, CT_ERROR_VALUE, "Invalid lr_decay value");
    o = ct_adagrad_options(0.1);
    o.initial_accumulator_value = -1;
    CT_ASSERT_ERR(ct_optimizer_new(CT_OPTIM_ADAGRAD, &w, 1, &o) != NULL, CT_ERROR_VALUE,
                  "Invalid initial_accumulator_value value");
    o = ct_adam_options(0.1);
    o.foreach = 3;
    CT_ASSERT_ERR(ct_optimizer_new(CT_OPTIM_ADAM, &w, 1, &o) != NULL, CT_ERROR_VALUE, "foreach");
    CT_ASSERT_ERR(ct_optimizer_new((ct_optim_kind)42, &w, 1, NULL) != NULL, CT_ERROR_VALUE, "unknown optimizer");
    CT_ASSERT_ERR(ct_optimizer_new(CT_OPTIM_ADAM, NULL, 1, NULL) != NULL, CT_ERROR_NULL_ARGUMENT, "params");
    CT_ASSERT_ERR(ct_optimizer_new(CT_OPTIM_ADAM, &w, 0, NULL) != NULL, CT_ERROR_VALUE, "empty parameter list");
    ct_tensor *nul = NULL;
    CT_ASSERT_ERR(ct_optimizer_new(CT_OPTIM_ADAM, &nul, 1, NULL) != NULL, CT_ERROR_NULL_ARGUMENT, "parameter 0");
    CT_ASSERT_ERR(ct_optimizer_new(CT_OPTIM_ADAM, &iw, 1, NULL) != NULL, CT_ERROR_TYPE, "int64");
    ct_tensor *twice[2] = {w, w};
    CT_ASSERT_ERR(ct_optimizer_new(CT_OPTIM_ADAM, twice, 2, NULL) != NULL, CT_ERROR_VALUE, "more than one");
    CT_ASSERT_ERR(ct_optimizer_add_param_group(NULL, &w, 1, NULL) == CT_OK, CT_ERROR_NULL_ARGUMENT, "optimizer");
    CT_ASSERT_ERR(ct_optimizer_step(NULL) == CT_OK, CT_ERROR_NULL_ARGUMENT, "optimizer");
    ct_optimizer_free(NULL);
    assert_int_equal(ct_optimizer_num_groups(NULL), -1);
    assert_int_equal((int)ct_optimizer_kind(NULL), -1);
    assert_string_equal(ct_optimizer_name(NULL), "");
    ct_release(w);
    ct_release(iw);
}

static void test_step_errors(void **state) {
    (void)state;
    ct_tensor *w = ct_ones(CT_SHAPE(3), CT_F32, CT_CPU), *v = ct_ones(CT_SHAPE(2), CT_F32, CT_CPU);
    ct_tensor *ps[2] = {w, v};
    ct_optimizer *opt = ct_optimizer_new(CT_OPTIM_ADAM, ps, 2, NULL);
    ct_tensor *good = ct_ones(CT_SHAPE(3), CT_F32, CT_CPU);
    ct_tensor *shape = ct_ones(CT_SHAPE(3), CT_F32, CT_CPU);
    ct_tensor *dtype = ct_ones(CT_SHAPE(2), CT_F64, CT_CPU);
    set_grad(w, good);
    set_grad(v, shape);
    CT_ASSERT_ERR(ct_optimizer_step(opt) == CT_OK, CT_ERROR_VALUE, "has shape [3] but the parameter has shape [2]");
    assert_true(ct_test_at(w, 0) == 1.0); /* nothing moved */
    set_grad(v, dtype);
    CT_ASSERT_ERR(ct_optimizer_step(opt) == CT_OK, CT_ERROR_TYPE, "float64");
    set_grad(w, NULL);
    set_grad(v, NULL);
    ct_optimizer_free(opt);
    ct_release(good);
    ct_release(shape);
    ct_release(dtype);
    ct_release(w);
    ct_release(v);
}

/* ------------------------------------------------------------ clipping */

static void test_clip_grad_norm(void **state) {
    (void)state;
    ct_tensor *a = ct_zeros(CT_SHAPE(2), CT_F32, CT_CPU), *b = ct_zeros(CT_SHAPE(1), CT_F64, CT_CPU);
    ct_tensor *c = ct_zeros(CT_SHAPE(2), CT_F32, CT_CPU); /* no gradient */
    ct_tensor *ps[3] = {a, b, c};
    float ga[2] = {3, 4};
    double gb[1] = {12};
    ct_tensor *ta = ct_from_data(ga, CT_SHAPE(2), CT_F32), *tb = ct_from_data(gb, CT_SHAPE(1), CT_F64);
    set_grad(a, ta);
    set_grad(b, tb);
    double total = 0;
    /* norm sqrt(9 + 16 + 144) = 13; max_norm 26 leaves the gradients alone */
    assert_int_equal(ct_clip_grad_norm_(ps, 3, 26, 2, false, &total), CT_OK);
    assert_true(fabs(total - 13) < 1e-12);
    assert_true(ct_test_at(ta, 1) == 4.0);
    assert_int_equal(ct_clip_grad_norm_(ps, 3, 6.5, 2, false, &total), CT_OK);
    double coef = 6.5 / (13 + 1e-6);
    assert_true(fabs(ct_test_at(ta, 0) - 3 * coef) < 1e-6);
    assert_true(fabs(ct_test_at(tb, 0) - 12 * coef) < 1e-12);
    /* inf-norm and 1-norm over what is left */
    assert_int_equal(ct_clip_grad_norm_(ps, 3, 1e9, INFINITY, false, &total), CT_OK);
    assert_true(fabs(total - 12 * coef) < 1e-12);
    assert_int_equal(ct_clip_grad_norm_(ps, 3, 1e9, 1, false, &total), CT_OK);
    assert_true(fabs(total - 19 * coef) < 1e-6);
    assert_int_equal(ct_clip_grad_norm_(ps, 3, 1e9, 3, false, &total), CT_OK);
    assert_true(fabs(total - cbrt(27 + 64 + 1728.0) * coef) < 1e-5);
    /* non-finite totals */
    ct_tensor_set(tb, CT_INDEX(0), INFINITY);
    CT_ASSERT_ERR(ct_clip_grad_norm_(ps, 3, 1, 2, true, &total) == CT_OK, CT_ERROR_RUNTIME,
                  "The total norm of order 2 for gradients from `parameters` is non-finite");
    assert_true(isinf(total));
    /* errors */
    CT_ASSERT_ERR(ct_clip_grad_norm_(NULL, 1, 1, 2, false, NULL) == CT_OK, CT_ERROR_NULL_ARGUMENT, "params");
    ct_tensor *nul[1] = {NULL};
    CT_ASSERT_ERR(ct_clip_grad_norm_(nul, 1, 1, 2, false, NULL) == CT_OK, CT_ERROR_NULL_ARGUMENT, "parameter 0");
    CT_ASSERT_ERR(ct_clip_grad_norm_(ps, 3, 1, -2, false, NULL) == CT_OK, CT_ERROR_VALUE, "norm_type");
    CT_ASSERT_ERR(ct_clip_grad_norm_(ps, -1, 1, 2, false, NULL) == CT_OK, CT_ERROR_VALUE, ">= 0");
    ct_tensor *ig = ct_ones(CT_SHAPE(2), CT_I64, CT_CPU);
    set_grad(c, ig);
    CT_ASSERT_ERR(ct_clip_grad_norm_(ps, 3, 1, 2, false, NULL) == CT_OK, CT_ERROR_TYPE, "floating point, got int64");
    set_grad(c, NULL);
    ct_release(ig);
    /* p = 0 counts the nonzero entries */
    assert_int_equal(ct_clip_grad_norm_(ps, 2, 1e9, 0, false, &total), CT_OK);
    assert_true(total == 3);
    assert_int_equal(ct_clip_grad_norm_(NULL, 0, 1, 2, false, &total), CT_OK);
    assert_true(total == 0);
    set_grad(a, NULL);
    set_grad(b, NULL);
    ct_release(ta);
    ct_release(tb);
    ct_release(a);
    ct_release(b);
    ct_release(c);
}

static void test_clip_grad_norm_strided_matches(void **state) {
    (void)state;
    ct_tensor *p = ct_zeros(CT_SHAPE(3, 5), CT_F32, CT_CPU), *q = ct_zeros(CT_SHAPE(3, 5), CT_F32, CT_CPU);
    ct_manual_seed(7);
    ct_tensor *g = ct_randn(CT_SHAPE(5, 3), CT_F32, CT_CPU);
    ct_tensor *gt = ct_t(g); /* strided */
    ct_tensor *gc = ct_contiguous(gt);
    set_grad(p, gt);
    set_grad(q, gc);
    double n1, n2;
    assert_int_equal(ct_clip_grad_norm_(&p, 1, 0.5, 2, false, &n1), CT_OK);
    assert_int_equal(ct_clip_grad_norm_(&q, 1, 0.5, 2, false, &n2), CT_OK);
    assert_true(n1 == n2);
    for (int64_t i = 0; i < 15; i++)
        assert_true(ct_test_at(gt, i) == ct_test_at(gc, i));
    set_grad(p, NULL);
    set_grad(q, NULL);
    ct_release(g);
    ct_release(gt);
    ct_release(gc);
    ct_release(p);
    ct_release(q);
}

static void test_clip_grad_value(void **state) {
    (void)state;
    ct_tensor *a = ct_zeros(CT_SHAPE(4), CT_F64, CT_CPU), *b = ct_zeros(CT_SHAPE(2, 2), CT_F32, CT_CPU);
    double ga[4] = {-3, 0.5, 2, NAN};
    ct_tensor *ta = ct_from_data(ga, CT_SHAPE(4), CT_F64);
    ct_tensor *tb0 = ct_full(CT_SHAPE(2, 2), ct_scalar_float(-9), CT_F32, CT_CPU);
    ct_tensor *tb = ct_t(tb0); /* strided: the op path */
    set_grad(a, ta);
    set_grad(b, tb);
    ct_tensor *ps[2] = {a, b};
    int64_t v = ct_tensor_version(ta);
    assert_int_equal(ct_clip_grad_value_(ps, 2, 1.0), CT_OK);
    assert_true(ct_tensor_version(ta) > v);
    assert_true(ct_test_at(ta, 0) == -1.0 && ct_test_at(ta, 1) == 0.5 && ct_test_at(ta, 2) == 1.0);
    assert_true(isnan(ct_test_at(ta, 3)));
    assert_true(ct_test_at(tb0, 3) == -1.0);
    CT_ASSERT_ERR(ct_clip_grad_value_(NULL, 2, 1) == CT_OK, CT_ERROR_NULL_ARGUMENT, "params");
    CT_ASSERT_ERR(ct_clip_grad_value_(ps, 2, NAN) == CT_OK, CT_ERROR_VALUE, "clip_value");
    ct_tensor *nul[1] = {NULL};
    CT_ASSERT_ERR(ct_clip_grad_value_(nul, 1, 1) == CT_OK, CT_ERROR_NULL_ARGUMENT, "parameter 0");
    set_grad(a, NULL);
    set_grad(b, NULL);
    ct_release(ta);
    ct_release(tb);
    ct_release(tb0);
    ct_release(a);
    ct_release(b);
}

/* Devices: state dicts load onto the parameters' device (a state tensor of another
 * device is copied over; one with no data, on meta, is refused and the optimizer is
 * left as it was), and meta parameters are refused, as there is nothing to update.
 * Parameters on CUDA are tested in test_cuda_module. */
static void test_state_devices(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *w = ct_tensor_set_requires_grad(ct_zeros(CT_SHAPE(2, 3), CT_F32, CT_CPU), true);
    ct_tensor *ps[1] = {w};
    set_grad(w, ct_ones(CT_SHAPE(2, 3), CT_F32, CT_CPU));
    ct_optim_options o = ct_adamw_options(0.1);
    ct_optimizer *opt = ct_optimizer_new(CT_OPTIM_ADAMW, ps, 1, &o);
    assert_int_equal(ct_optimizer_step(opt), CT_OK);
    ct_value *sd = ct_optimizer_state_dict(opt);
    ct_value *s0 = ct_value_at(ct_value_get(sd, "state"), 0);
    ct_tensor *m = ct_value_tensor(ct_value_get(s0, "exp_avg"));
    assert_true(ct_device_equal(ct_tensor_device(m), CT_CPU));
    double before = ct_test_at(m, 0);
    assert_true(before != 0);
    /* exp_avg on meta: refused, nothing loaded */
    assert_int_equal(ct_value_set(s0, "exp_avg", ct_value_new_tensor(ct_empty(CT_SHAPE(2, 3), CT_F32, CT_META))),
                     CT_OK);
    assert_int_equal(ct_value_set(s0, "exp_avg_sq", ct_value_new_tensor(ct_zeros(CT_SHAPE(2, 3), CT_F32, CT_CPU))),
                     CT_OK);
    CT_ASSERT_ERR(ct_optimizer_load_state_dict(opt, sd) == CT_OK, CT_ERROR_DEVICE, "meta");
    ct_value *sd2 = ct_optimizer_state_dict(opt);
    ct_value *s2 = ct_value_at(ct_value_get(sd2, "state"), 0);
    assert_true(ct_test_at(ct_value_tensor(ct_value_get(s2, "exp_avg")), 0) == before);
    assert_true(ct_test_at(ct_value_tensor(ct_value_get(s2, "exp_avg_sq")), 0) != 0);
    ct_value_free(sd2);
    ct_value_free(sd);
    ct_optimizer_free(opt);
    set_grad(w, NULL);

    ct_tensor *mw = ct_tensor_set_requires_grad(ct_empty(CT_SHAPE(2), CT_F32, CT_META), true);
    CT_ASSERT_ERR(ct_optimizer_new(CT_OPTIM_SGD, &mw, 1, &o) != NULL, CT_ERROR_DEVICE,
                  "can't optimize a meta tensor");
    ct_scope_end();
}

/* ------------------------------------------------------------ fused Adam op */

/* n parameters of odd sizes with gradients, deterministic, dtype dt (new references). */
static void make_params(ct_tensor **ps, int n, ct_dtype dt, uint64_t seed) {
    static const int64_t sizes[] = {7, 1, 33, 0, 600, 5};
    uint64_t s = seed;
    for (int i = 0; i < n; i++) {
        int64_t sz = sizes[i % 6];
        ct_tensor *p = ct_empty(&sz, 1, CT_F64, CT_CPU), *g = ct_empty(&sz, 1, CT_F64, CT_CPU);
        for (int64_t k = 0; k < sz; k++) {
            ((double *)ct_tensor_data(p))[k] = 2 * ct_test_unit(&s) - 1;
            ((double *)ct_tensor_data(g))[k] = 2 * ct_test_unit(&s) - 1;
        }
        ps[i] = ct_retain(ct_to_dtype(p, dt));
        ct_tensor *gd = ct_to_dtype(g, dt);
        set_grad(ps[i], gd);
    }
}

static void new_grads(ct_tensor *const *ps, int n, uint64_t seed) {
    uint64_t s = seed;
    for (int i = 0; i < n; i++) {
        ct_tensor *g = ct_optim_grad(ps[i]);
        for (int64_t k = 0; k < ct_tensor_numel(g); k++) {
            double v = 2 * ct_test_unit(&s) - 1;
            if (ct_tensor_dtype(g) == CT_F32)
                ((float *)ct_tensor_data(g))[k] = (float)v;
            else
                ((double *)ct_tensor_data(g))[k] = v;
        }
    }
}

static void release_fused_params(ct_tensor **ps, int n) {
    for (int i = 0; i < n; i++) {
        set_grad(ps[i], NULL);
        ct_release(ps[i]);
    }
}

static bool same_bits(const ct_tensor *a, const ct_tensor *b) {
    size_t nb = (size_t)ct_tensor_numel(a) * ct_dtype_itemsize(ct_tensor_dtype(a));
    return ct_tensor_numel(a) == ct_tensor_numel(b) && ct_tensor_dtype(a) == ct_tensor_dtype(b) &&
           (nb == 0 || memcmp(ct_tensor_data(a), ct_tensor_data(b), nb) == 0);
}

static int fused_calls;
static ct_status count_fused(ct_keyset ks, ct_call *call, void *ud) {
    (void)ud;
    fused_calls++;
    return ct_call_next(ks, call);
}

/* fused = 1 on CPU runs the op's CPU kernel; it must give the foreach path's bits, for
 * Adam and AdamW, with weight decay, amsgrad and maximize, float32 and float64. */
static void test_fused_cpu_matches_foreach(void **state) {
    (void)state;
    enum { N = 6 };
    const ct_dtype dts[2] = {CT_F32, CT_F64};
    int64_t h[2] = {ct_op_override(CT_OP_fused_adam, CT_KEY_CPU, count_fused, NULL, 0),
                    ct_op_override(CT_OP_fused_adamw, CT_KEY_CPU, count_fused, NULL, 0)};
    assert_true(h[0] > 0 && h[1] > 0);
    fused_calls = 0;
    for (int d = 0; d < 2; d++)
        for (int kind = CT_OPTIM_ADAM; kind <= CT_OPTIM_ADAMW; kind++)
            for (int variant = 0; variant < 4; variant++) {
                ct_scope_begin();
                ct_tensor *a[N], *b[N];
                make_params(a, N, dts[d], 11);
                make_params(b, N, dts[d], 11);
                ct_optim_options o = kind == CT_OPTIM_ADAMW ? ct_adamw_options(1e-2) : ct_adam_options(1e-2);
                o.weight_decay = variant == 0 ? 0 : 0.1;
                o.amsgrad = variant == 2;
                o.maximize = variant == 3;
                ct_optimizer *ref = ct_optimizer_new((ct_optim_kind)kind, a, N, &o);
                o.fused = 1;
                o.foreach = 0;
                ct_optimizer *fu = ct_optimizer_new((ct_optim_kind)kind, b, N, &o);
                assert_non_null(ref);
                assert_non_null(fu);
                for (int step = 0; step < 3; step++) {
                    new_grads(a, N, 100 + (uint64_t)step);
                    new_grads(b, N, 100 + (uint64_t)step);
                    int64_t v = ct_tensor_version(b[0]);
                    assert_int_equal(ct_optimizer_step(ref), CT_OK);
                    assert_int_equal(ct_optimizer_step(fu), CT_OK);
                    assert_true(ct_tensor_version(b[0]) > v);
                    for (int i = 0; i < N; i++)
                        if (!same_bits(a[i], b[i]))
                            fail_msg("%s %s variant %d step %d param %d differs", kind == CT_OPTIM_ADAMW ? "AdamW" : "Adam",
                                     ct_dtype_name(dts[d]), variant, step, i);
                }
                /* the state dict is torch's either way */
                ct_value *sa = ct_optimizer_state_dict(ref), *sb = ct_optimizer_state_dict(fu);
                const ct_value *s0 = ct_value_at(ct_value_get(sb, "state"), 0);
                assert_non_null(s0);
                assert_non_null(ct_value_get(s0, "exp_avg"));
                assert_non_null(ct_value_get(s0, "exp_avg_sq"));
                assert_true(same_bits(ct_value_tensor(ct_value_get(s0, "exp_avg_sq")),
                                      ct_value_tensor(ct_value_get(ct_value_at(ct_value_get(sa, "state"), 0),
                                                                   "exp_avg_sq"))));
                ct_value_free(sa);
                ct_value_free(sb);
                ct_optimizer_free(ref);
                ct_optimizer_free(fu);
                release_fused_params(a, N);
                release_fused_params(b, N);
                ct_scope_end();
            }
    /* one call a step: 2 dtypes x 2 kinds x 4 variants x 3 steps */
    assert_int_equal(fused_calls, 48);
    ct_op_override_remove(h[0]);
    ct_op_override_remove(h[1]);
}

/* The op called directly against the optimizer's foreach path, with grad_scale,
 * found_inf and clip_coef. */
static void test_fused_op_direct(void **state) {
    (void)state;
    enum { N = 3 };
    ct_scope_begin();
    ct_tensor *a[N], *b[N], *m[N], *v[N], *g[N];
    make_params(a, N, CT_F32, 5);
    make_params(b, N, CT_F32, 5);
    ct_optim_options o = ct_adamw_options(1e-3);
    ct_optimizer *ref = ct_optimizer_new(CT_OPTIM_ADAMW, a, N, &o);
    assert_int_equal(ct_optimizer_step(ref), CT_OK);
    for (int i = 0; i < N; i++) {
        m[i] = ct_zeros_like(b[i], CT_DTYPE_UNDEFINED);
        v[i] = ct_zeros_like(b[i], CT_DTYPE_UNDEFINED);
        g[i] = ct_mul_scalar(ct_optim_grad(b[i]), ct_scalar_float(4)); /* scaled by 4 */
    }
    ct_tensor *scale = ct_scalar_tensor(ct_scalar_float(4), CT_F32, CT_CPU);
    ct_tensor *inf1 = ct_scalar_tensor(ct_scalar_float(1), CT_F32, CT_CPU);
    ct_tensor *inf0 = ct_scalar_tensor(ct_scalar_float(0), CT_F32, CT_CPU);
    /* found_inf: nothing moves */
    assert_int_equal(ct_fused_adamw_(b, N, g, N, m, N, v, N, NULL, 0, NULL, 0, 1, o.lr, o.beta1, o.beta2,
                                     o.weight_decay, o.eps, false, false, scale, inf1, NULL),
                     CT_OK);
    assert_true(ct_test_at(g[0], 0) == 4 * ct_test_at(ct_optim_grad(b[0]), 0));
    assert_true(ct_test_at(m[0], 0) == 0);
    assert_int_equal(ct_fused_adamw_(b, N, g, N, m, N, v, N, NULL, 0, NULL, 0, 1, o.lr, o.beta1, o.beta2,
                                     o.weight_decay, o.eps, false, false, scale, inf0, NULL),
                     CT_OK);
    for (int i = 0; i < N; i++) {
        assert_true(same_bits(a[i], b[i]));                   /* 4 * g / 4 is g exactly */
        assert_true(same_bits(g[i], ct_optim_grad(b[i]))); /* unscaled gradients written back */
    }
    /* clip_coef: the gradients times the factor, left as they are */
    ct_tensor *half = ct_scalar_tensor(ct_scalar_float(0.5), CT_F32, CT_CPU);
    for (int i = 0; i < N; i++)
        assert_non_null(ct_mul_scalar_(ct_optim_grad(a[i]), ct_scalar_float(0.5)));
    assert_int_equal(ct_optimizer_step(ref), CT_OK);
    assert_int_equal(ct_fused_adamw_(b, N, g, N, m, N, v, N, NULL, 0, NULL, 0, 2, o.lr, o.beta1, o.beta2,
                                     o.weight_decay, o.eps, false, false, NULL, NULL, half),
                     CT_OK);
    for (int i = 0; i < N; i++) {
        assert_true(same_bits(a[i], b[i]));
        assert_true(same_bits(g[i], ct_optim_grad(b[i])));
    }
    ct_optimizer_free(ref);
    release_fused_params(a, N);
    release_fused_params(b, N);
    ct_scope_end();
}

static void test_fused_op_errors(void **state) {
    (void)state;
    ct_scope_begin();
    int64_t sz = 4;
    ct_tensor *p = ct_zeros(&sz, 1, CT_F32, CT_CPU), *g = ct_ones(&sz, 1, CT_F32, CT_CPU);
    ct_tensor *m = ct_zeros(&sz, 1, CT_F32, CT_CPU), *v = ct_zeros(&sz, 1, CT_F32, CT_CPU);
    ct_tensor *P[2] = {p, p}, *G[1] = {g}, *M[1] = {m}, *V[1] = {v};
#define CALL(params, np, grads, ng, ms, nm, vs, nv, step, ams, gs, fi, cc)                                     \
    ct_fused_adamw_(params, np, grads, ng, ms, nm, vs, nv, NULL, 0, NULL, 0, step, 1e-3, 0.9, 0.999, 0.01, 1e-8, \
                    ams, false, gs, fi, cc)
    CT_ASSERT_ERR(CALL(P, 2, G, 1, M, 1, V, 1, 1, false, NULL, NULL, NULL) == CT_OK, CT_ERROR_VALUE,
                  "Tensor lists must have the same number of tensors, got 2 and 1");
    CT_ASSERT_ERR(CALL(P, 0, G, 0, M, 0, V, 0, 1, false, NULL, NULL, NULL) == CT_OK, CT_ERROR_VALUE,
                  "at least one tensor");
    CT_ASSERT_ERR(CALL(NULL, 1, G, 1, M, 1, V, 1, 1, false, NULL, NULL, NULL) == CT_OK, CT_ERROR_NULL_ARGUMENT,
                  "params is NULL");
    CT_ASSERT_ERR(CALL(P, 1, G, 1, M, 1, V, 1, 0, false, NULL, NULL, NULL) == CT_OK, CT_ERROR_VALUE, "step");
    CT_ASSERT_ERR(CALL(P, 1, G, 1, M, 1, V, 1, 1, true, NULL, NULL, NULL) == CT_OK, CT_ERROR_VALUE, "amsgrad");
    ct_tensor *nul[1] = {NULL};
    CT_ASSERT_ERR(CALL(P, 1, nul, 1, M, 1, V, 1, 1, false, NULL, NULL, NULL) == CT_OK, CT_ERROR_NULL_ARGUMENT,
                  "grads[0] is NULL");
    /* mixed devices */
    ct_tensor *gm = ct_empty(&sz, 1, CT_F32, ct_device_make(CT_DEVICE_META, 0));
    ct_tensor *GM[1] = {gm};
    CT_ASSERT_ERR(CALL(P, 1, GM, 1, M, 1, V, 1, 1, false, NULL, NULL, NULL) == CT_OK, CT_ERROR_DEVICE,
                  "same device");
    /* non-float params, mismatched dtypes and shapes, strides */
    ct_tensor *pi = ct_zeros(&sz, 1, CT_I32, CT_CPU), *gi = ct_zeros(&sz, 1, CT_I32, CT_CPU);
    ct_tensor *PI[1] = {pi}, *GI[1] = {gi};
    CT_ASSERT_ERR(CALL(PI, 1, GI, 1, M, 1, V, 1, 1, false, NULL, NULL, NULL) == CT_OK, CT_ERROR_TYPE,
                  "floating point");
    ct_tensor *g64 = ct_zeros(&sz, 1, CT_F64, CT_CPU), *G64[1] = {g64};
    CT_ASSERT_ERR(CALL(P, 1, G64, 1, M, 1, V, 1, 1, false, NULL, NULL, NULL) == CT_OK, CT_ERROR_TYPE,
                  "grads[0] has dtype");
    int64_t sz5 = 5;
    ct_tensor *g5 = ct_zeros(&sz5, 1, CT_F32, CT_CPU), *G5[1] = {g5};
    CT_ASSERT_ERR(CALL(P, 1, G5, 1, M, 1, V, 1, 1, false, NULL, NULL, NULL) == CT_OK, CT_ERROR_VALUE, "shape");
    ct_tensor *g22 = ct_t(ct_zeros(CT_SHAPE(2, 2), CT_F32, CT_CPU));
    ct_tensor *p22 = ct_zeros(CT_SHAPE(2, 2), CT_F32, CT_CPU), *m22 = ct_zeros(CT_SHAPE(2, 2), CT_F32, CT_CPU);
    ct_tensor *P22[1] = {p22}, *G22[1] = {g22}, *M22[1] = {m22};
    CT_ASSERT_ERR(CALL(P22, 1, G22, 1, M22, 1, M22, 1, 1, false, NULL, NULL, NULL) == CT_OK, CT_ERROR_VALUE,
                  "contiguous");
    ct_tensor *s64 = ct_scalar_tensor(ct_scalar_float(1), CT_F64, CT_CPU);
    CT_ASSERT_ERR(CALL(P, 1, G, 1, M, 1, V, 1, 1, false, s64, NULL, NULL) == CT_OK, CT_ERROR_TYPE,
                  "grad_scale must be a one-element float32");
    /* master copies are for bfloat16/float16 params; the CPU kernel takes float32/float64 */
    ct_tensor *MS[1] = {m};
    CT_ASSERT_ERR(ct_fused_adamw_(P, 1, G, 1, M, 1, V, 1, NULL, 0, MS, 1, 1, 1e-3, 0.9, 0.999, 0, 1e-8, false, false,
                                  NULL, NULL, NULL) == CT_OK,
                  CT_ERROR_TYPE, "master_params");
    ct_tensor *pb = ct_zeros(&sz, 1, CT_BF16, CT_CPU), *gb = ct_zeros(&sz, 1, CT_BF16, CT_CPU);
    ct_tensor *mb = ct_zeros(&sz, 1, CT_BF16, CT_CPU), *PB[1] = {pb}, *GB[1] = {gb}, *MB[1] = {mb};
    CT_ASSERT_ERR(CALL(PB, 1, GB, 1, MB, 1, MB, 1, 1, false, NULL, NULL, NULL) == CT_OK, CT_ERROR_NOT_IMPLEMENTED,
                  "CPU kernel takes float32 and float64");
#undef CALL
    /* options */
    ct_tensor *one[1] = {p};
    ct_optim_options o = ct_adamw_options(1e-3);
    o.fused = 2;
    CT_ASSERT_ERR(ct_optimizer_new(CT_OPTIM_ADAMW, one, 1, &o) != NULL, CT_ERROR_VALUE, "fused must be");
    o.fused = 1;
    o.foreach = 1;
    CT_ASSERT_ERR(ct_optimizer_new(CT_OPTIM_ADAMW, one, 1, &o) != NULL, CT_ERROR_VALUE,
                  "`fused` and `foreach` cannot be `True` together.");
    ct_optim_options so = ct_sgd_options(0.1);
    so.fused = 1;
    CT_ASSERT_ERR(ct_optimizer_new(CT_OPTIM_SGD, one, 1, &so) != NULL, CT_ERROR_NOT_IMPLEMENTED, "Adam and AdamW");
    assert_int_equal(ct_adamw_options(1).fused, -1);
    assert_false(ct_adamw_options(1).master_weights);
    ct_scope_end();
}

/* step_clipped: clip_grad_norm_ then step, with the factor folded into the fused
 * kernel (gradients left as they are) or applied to the gradients (other paths). */
static void test_step_clipped(void **state) {
    (void)state;
    enum { N = 6 };
    for (int fused = 0; fused <= 1; fused++) {
        ct_scope_begin();
        ct_tensor *a[N], *b[N];
        make_params(a, N, CT_F32, 3);
        make_params(b, N, CT_F32, 3);
        ct_optim_options o = ct_adamw_options(1e-2);
        ct_optimizer *ref = ct_optimizer_new(CT_OPTIM_ADAMW, a, N, &o);
        o.fused = fused;
        o.foreach = fused ? 0 : -1;
        ct_optimizer *cl = ct_optimizer_new(CT_OPTIM_ADAMW, b, N, &o);
        for (int step = 0; step < 3; step++) {
            new_grads(a, N, 40 + (uint64_t)step);
            new_grads(b, N, 40 + (uint64_t)step);
            double norm = 0;
            assert_int_equal(ct_clip_grad_norm_(a, N, 0.5, 2.0, false, &norm), CT_OK);
            assert_int_equal(ct_optimizer_step(ref), CT_OK);
            double g0 = ct_test_at(ct_optim_grad(b[0]), 0);
            ct_tensor *tn = NULL;
            assert_int_equal(ct_optimizer_step_clipped(cl, 0.5, 2.0, &tn), CT_OK);
            assert_non_null(tn);
            assert_int_equal(ct_tensor_dtype(tn), CT_F64);
            assert_true(fabs(ct_test_at(tn, 0) - norm) <= 1e-12 * norm);
            double g1 = ct_test_at(ct_optim_grad(b[0]), 0);
            if (fused)
                assert_true(g1 == g0); /* folded: the gradient is untouched */
            else
                assert_true(fabs(g1 - ct_test_at(ct_optim_grad(a[0]), 0)) <= 1e-7);
            for (int i = 0; i < N; i++)
                for (int64_t k = 0; k < ct_tensor_numel(a[i]); k++) {
                    double x = ct_test_at(b[i], k), y = ct_test_at(a[i], k);
                    if (!(fabs(x - y) <= 1e-6 * fabs(y) + 1e-7))
                        fail_msg("fused %d step %d param %d element %lld: %.9g vs %.9g", fused, step, i,
                                 (long long)k, x, y);
                }
        }
        ct_optimizer_free(ref);
        ct_optimizer_free(cl);
        release_fused_params(a, N);
        release_fused_params(b, N);
        ct_scope_end();
    }
    /* no gradient: no norm, and the step is a no-op */
    ct_scope_begin();
    int64_t sz = 3;
    ct_tensor *p = ct_retain(ct_ones(&sz, 1, CT_F32, CT_CPU)), *ps[1] = {p};
    ct_optimizer *opt = ct_optimizer_new(CT_OPTIM_ADAMW, ps, 1, NULL);
    ct_tensor *tn = (ct_tensor *)1;
    assert_int_equal(ct_optimizer_step_clipped(opt, 1.0, 2.0, &tn), CT_OK);
    assert_null(tn);
    CT_ASSERT_ERR(ct_optimizer_step_clipped(NULL, 1.0, 2.0, NULL) == CT_OK, CT_ERROR_NULL_ARGUMENT, "optimizer");
    CT_ASSERT_ERR(ct_optimizer_step_clipped(opt, NAN, 2.0, NULL) == CT_OK, CT_ERROR_VALUE, "max_norm");
    ct_optimizer_free(opt);
    ct_release(p);
    ct_scope_end();
}

/* The tensor form of clip_grad_norm_: the same norm and gradients as the host form. */
static void test_clip_grad_norm_tensor(void **state) {
    (void)state;
    enum { N = 6 };
    ct_scope_begin();
    ct_tensor *a[N], *b[N];
    make_params(a, N, CT_F32, 9);
    make_params(b, N, CT_F32, 9);
    for (int t = 0; t < 2; t++) {
        const double p = t ? 3.0 : 2.0;
        double norm = 0;
        assert_int_equal(ct_clip_grad_norm_(a, N, 0.25, p, false, &norm), CT_OK);
        ct_tensor *tn = NULL;
        assert_int_equal(ct_clip_grad_norm_tensor_(b, N, 0.25, p, &tn), CT_OK);
        assert_non_null(tn);
        assert_int_equal(ct_tensor_dim(tn), 0);
        assert_true(fabs(ct_test_at(tn, 0) - norm) <= 1e-12 * norm);
        for (int i = 0; i < N; i++)
            for (int64_t k = 0; k < ct_tensor_numel(a[i]); k++)
                assert_true(fabs(ct_test_at(ct_optim_grad(a[i]), k) - ct_test_at(ct_optim_grad(b[i]), k)) <= 1e-7);
    }
    ct_tensor *tn = (ct_tensor *)1;
    CT_ASSERT_ERR(ct_clip_grad_norm_tensor_(b, N, 1.0, INFINITY, &tn) == CT_OK, CT_ERROR_NOT_IMPLEMENTED,
                  "finite norm_type");
    assert_null(tn);
    CT_ASSERT_ERR(ct_clip_grad_norm_tensor_(NULL, 1, 1.0, 2.0, NULL) == CT_OK, CT_ERROR_NULL_ARGUMENT, "params");
    CT_ASSERT_ERR(ct_clip_grad_norm_tensor_(b, N, 1.0, -1.0, NULL) == CT_OK, CT_ERROR_VALUE, "norm_type");
    ct_tensor *nul[1] = {NULL};
    CT_ASSERT_ERR(ct_clip_grad_norm_tensor_(nul, 1, 1.0, 2.0, NULL) == CT_OK, CT_ERROR_NULL_ARGUMENT, "parameter 0");
    release_fused_params(a, N);
    release_fused_params(b, N);
    ct_scope_end();
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_golden_foreach),
        cmocka_unit_test(test_golden_plain),
        cmocka_unit_test(test_float32_paths_agree),
        cmocka_unit_test(test_state_dict_resume_bit_identical),
        cmocka_unit_test(test_state_dict_layout),
        cmocka_unit_test(test_state_dict_errors_leave_optimizer_unchanged),
        cmocka_unit_test(test_zero_grad),
        cmocka_unit_test(test_ownership_and_strided),
        cmocka_unit_test(test_options_accessors),
        cmocka_unit_test(test_constructor_errors),
        cmocka_unit_test(test_step_errors),
        cmocka_unit_test(test_clip_grad_norm),
        cmocka_unit_test(test_clip_grad_norm_strided_matches),
        cmocka_unit_test(test_clip_grad_value),
        cmocka_unit_test(test_state_devices),
        cmocka_unit_test(test_fused_cpu_matches_foreach),
        cmocka_unit_test(test_fused_op_direct),
        cmocka_unit_test(test_fused_op_errors),
        cmocka_unit_test(test_step_clipped),
        cmocka_unit_test(test_clip_grad_norm_tensor),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
