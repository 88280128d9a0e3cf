/* LR schedulers against torch.optim.lr_scheduler (tests/data/sched_golden.txt);
 * state dicts and resume; error inputs. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "ctorch/optim.h"

typedef struct fixture {
    ct_tensor *a, *b;
    ct_optimizer *opt;
} fixture;

/* Two groups with lr 0.1 and 0.05, as the generator builds them. */
static void fixture_make(fixture *f, const char *kind) {
    f->a = ct_zeros(CT_SHAPE(2), CT_F64, CT_CPU);
    f->b = ct_zeros(CT_SHAPE(3), CT_F64, CT_CPU);
    ct_optim_options o;
    ct_optim_kind k;
    if (!strcmp(kind, "SGD")) {
        o = ct_sgd_options(0.1);
        o.momentum = 0.9;
        k = CT_OPTIM_SGD;
    } else {
        o = ct_adam_options(0.1);
        k = CT_OPTIM_ADAM;
    }
    f->opt = ct_optimizer_new(k, &f->a, 1, &o);
    CT_ASSERT_OK(f->opt);
    o.lr = 0.05;
    assert_int_equal(ct_optimizer_add_param_group(f->opt, &f->b, 1, &o), CT_OK);
}

static void fixture_free(fixture *f) {
    ct_optimizer_free(f->opt);
    ct_release(f->a);
    ct_release(f->b);
}

static double lambda_095(int64_t epoch, void *ud) {
    (void)ud;
    return pow(0.95, (double)epoch);
}

/* The C side of each generator case. */
static ct_lr_scheduler *make_sched(const char *name, ct_optimizer *o) {
    if (!strcmp(name, "steplr"))
        return ct_steplr_new(o, 3, 0.5);
    if (!strcmp(name, "multisteplr"))
        return ct_multisteplr_new(o, CT_INDEX(9, 2, 5, 5), 4, 0.3);
    if (!strcmp(name, "exponentiallr"))
        return ct_exponentiallr_new(o, 0.9);
    if (!strcmp(name, "cosine"))
        return ct_cosineannealinglr_new(o, 10, 0.001);
    if (!strcmp(name, "linearlr"))
        return ct_linearlr_new(o, 0.25, 1.0, 8);
    if (!strcmp(name, "linearlr_down"))
        return ct_linearlr_new(o, 1.0, 0.1, 5);
    if (!strcmp(name, "lambdalr"))
        return ct_lambdalr_new(o, lambda_095, NULL);
    if (!strcmp(name, "sequential")) {
        ct_lr_scheduler *s[2];
        s[0] = ct_linearlr_new(o, 0.1, 1.0, 5);
        s[1] = ct_cosineannealinglr_new(o, 20, 0);
        return ct_sequentiallr_new(o, s, 2, CT_INDEX(5), 1);
    }
    if (!strcmp(name, "sequential3")) {
        ct_lr_scheduler *s[3];
        s[0] = ct_exponentiallr_new(o, 0.9);
        s[1] = ct_steplr_new(o, 4, 0.5);
        s[2] = ct_multisteplr_new(o, CT_INDEX(14, 16), 2, 0.5);
        return ct_sequentiallr_new(o, s, 3, CT_INDEX(6, 12), 2);
    }
    if (!strcmp(name, "onecycle_cos")) {
        ct_onecycle_options oc = ct_onecycle_defaults(0.5, 30);
        return ct_onecyclelr_new(o, &oc);
    }
    if (!strcmp(name, "onecycle_linear3")) {
        ct_onecycle_options oc = ct_onecycle_defaults(0.4, 30);
        oc.pct_start = 0.25;
        oc.anneal_strategy = CT_ANNEAL_LINEAR;
        oc.three_phase = true;
        return ct_onecyclelr_new(o, &oc);
    }
    if (!strcmp(name, "onecycle_adam")) {
        ct_onecycle_options oc = ct_onecycle_defaults(0.01, 30);
        oc.base_momentum = 0.8;
        oc.max_momentum = 0.9;
        oc.div_factor = 10;
        oc.final_div_factor = 100;
        return ct_onecyclelr_new(o, &oc);
    }
    if (!strcmp(name, "plateau_min")) {
        ct_plateau_options p = ct_plateau_defaults();
        p.factor = 0.5;
        p.patience = 2;
        p.threshold = 0.01;
        p.cooldown = 1;
        p.min_lr = 0.01;
        return ct_reducelronplateau_new(o, &p);
    }
    if (!strcmp(name, "plateau_max_abs")) {
        ct_plateau_options p = ct_plateau_defaults();
        p.mode_max = true;
        p.threshold_abs = true;
        p.threshold = 0.1;
        p.patience = 1;
        p.factor = 0.3;
        p.eps = 1e-3;
        return ct_reducelronplateau_new(o, &p);
    }
    fail_msg("unknown case %s", name);
    return NULL;
}

static double momentum_of(ct_optimizer *o, int g) {
    ct_optim_options oo;
    assert_int_equal(ct_optimizer_get_options(o, g, &oo), CT_OK);
    return ct_optimizer_kind(o) == CT_OPTIM_ADAM ? oo.beta1 : oo.momentum;
}

typedef struct sched_case {
    char name[64], opt[16];
    int nrows;
    int ncols;
    double rows[64][4];
    double metrics[64];
} sched_case;

static int load(sched_case *cases, int cap) {
    FILE *f = fopen(CT_TEST_DATA_DIR "/sched_golden.txt", "r");
    assert_non_null(f);
    char line[1024];
    int n = 0;
    sched_case *c = NULL;
    while (fgets(line, sizeof line, f)) {
        if (!strncmp(line, "case ", 5)) {
            assert_true(n < cap);
            c = &cases[n++];
            memset(c, 0, sizeof *c);
            assert_int_equal(sscanf(line + 5, "%63s %15s", c->name, c->opt), 2);
        } else if (!strncmp(line, "lr ", 3)) {
            char *p = line + 3, *end;
            int k = 0;
            for (;;) {
                double v = strtod(p, &end);
                if (end == p)
                    break;
                c->rows[c->nrows][k++] = v;
                p = end;
            }
            c->ncols = k;
            c->nrows++;
        } else if (!strncmp(line, "metric ", 7)) {
            c->metrics[c->nrows - 1] = strtod(line + 7, NULL);
        }
    }
    fclose(f);
    return n;
}

static void check_row(const sched_case *c, int r, ct_optimizer *o, ct_lr_scheduler *s) {
    for (int k = 0; k < c->ncols; k++) {
        double got = k < 2 ? ct_optimizer_get_lr(o, k) : momentum_of(o, k - 2);
        double want = c->rows[r][k];
        if (!(fabs(got - want) <= 1e-15 * fabs(want)))
            fail_msg("%s: row %d col %d: got %.17g want %.17g", c->name, r, k, got, want);
        if (k < 2)
            assert_true(ct_lr_scheduler_get_last_lr(s, k) == got);
    }
}

static bool is_plateau(const sched_case *c) {
    return !strncmp(c->name, "plateau", 7);
}

static ct_status do_step(const sched_case *c, ct_lr_scheduler *s, int r) {
    return is_plateau(c) ? ct_lr_scheduler_step_metric(s, c->metrics[r]) : ct_lr_scheduler_step(s);
}

static void test_golden_sequences(void **state) {
    (void)state;
    static sched_case cases[32];
    int n = load(cases, 32);
    assert_int_equal(n, 14);
    for (int i = 0; i < n; i++) {
        const sched_case *c = &cases[i];
        fixture f;
        fixture_make(&f, c->opt);
        ct_lr_scheduler *s = make_sched(c->name, f.opt);
        CT_ASSERT_OK(s);
        assert_int_equal(c->nrows, 31);
        check_row(c, 0, f.opt, s);
        for (int r = 1; r < c->nrows; r++) {
            assert_int_equal(do_step(c, s, r - 1), CT_OK);
            check_row(c, r, f.opt, s);
        }
        ct_lr_scheduler_free(s);
        fixture_free(&f);
    }
}

/* Stop after k steps, save both state dicts, rebuild the optimizer and scheduler with
 * other settings, load, continue: the lr sequence is the golden one, bit for bit the
 * same as without the interruption. */
static void test_resume(void **state) {
    (void)state;
    static sched_case cases[32];
    int n = load(cases, 32);
    for (int i = 0; i < n; i++) {
        const sched_case *c = &cases[i];
        for (int k = 1; k < 30; k += 7) {
            fixture f;
            fixture_make(&f, c->opt);
            ct_lr_scheduler *s = make_sched(c->name, f.opt);
            for (int r = 1; r <= k; r++)
                assert_int_equal(do_step(c, s, r - 1), CT_OK);
            ct_value *osd = ct_optimizer_state_dict(f.opt), *ssd = ct_lr_scheduler_state_dict(s);
            CT_ASSERT_OK(osd);
            CT_ASSERT_OK(ssd);
            ct_lr_scheduler_free(s);
            fixture_free(&f);

            fixture g;
            fixture_make(&g, c->opt);
            ct_optimizer_set_lr(g.opt, 0, 7.0); /* overwritten by the dict */
            s = make_sched(c->name, g.opt);
            CT_ASSERT_OK(s);
            assert_int_equal(ct_optimizer_load_state_dict(g.opt, osd), CT_OK);
            assert_int_equal(ct_lr_scheduler_load_state_dict(s, ssd), CT_OK);
            ct_value_free(osd);
            ct_value_free(ssd);
            for (int r = k + 1; r < c->nrows; r++) {
                assert_int_equal(do_step(c, s, r - 1), CT_OK);
                for (int col = 0; col < 2; col++)
                    if (!(fabs(ct_optimizer_get_lr(g.opt, col) - c->rows[r][col]) <= 1e-15 * fabs(c->rows[r][col])))
                        fail_msg("%s resumed at %d: row %d differs", c->name, k, r);
            }
            ct_lr_scheduler_free(s);
            fixture_free(&g);
        }
    }
}

static void test_onecycle_past_total(void **state) {
    (void)state;
    fixture f;
    fixture_make(&f, "SGD");
    ct_onecycle_options oc = ct_onecycle_defaults(0.1, 3);
    ct_lr_scheduler *s = ct_onecyclelr_new(f.opt, &oc);
    for (int i = 0; i < 3; i++)
        assert_int_equal(ct_lr_scheduler_step(s), CT_OK);
    double before = ct_optimizer_get_lr(f.opt, 0);
    CT_ASSERT_ERR(ct_lr_scheduler_step(s) == CT_OK, CT_ERROR_VALUE,
                  "Tried to step 5 times. The specified number of total steps is 3");
    assert_true(ct_optimizer_get_lr(f.opt, 0) == before);
    assert_string_equal(ct_lr_scheduler_name(s), "OneCycleLR");
    ct_lr_scheduler_free(s);
    fixture_free(&f);
}

static void test_errors(void **state) {
    (void)state;
    fixture f;
    fixture_make(&f, "SGD");
    ct_optimizer *o = f.opt;
    CT_ASSERT_ERR(ct_steplr_new(NULL, 3, 0.1) != NULL, CT_ERROR_NULL_ARGUMENT, "optimizer");
    CT_ASSERT_ERR(ct_steplr_new(o, 0, 0.1) != NULL, CT_ERROR_VALUE, "step_size");
    CT_ASSERT_ERR(ct_multisteplr_new(o, NULL, 2, 0.1) != NULL, CT_ERROR_NULL_ARGUMENT, "milestones");
    CT_ASSERT_ERR(ct_multisteplr_new(o, CT_INDEX(1), -1, 0.1) != NULL, CT_ERROR_VALUE, "milestones");
    CT_ASSERT_ERR(ct_exponentiallr_new(NULL, 0.5) != NULL, CT_ERROR_NULL_ARGUMENT, "optimizer");
    CT_ASSERT_ERR(ct_cosineannealinglr_new(o, 0, 0) != NULL, CT_ERROR_VALUE, "T_max");
    CT_ASSERT_ERR(ct_linearlr_new(o, 1.5, 1, 5) != NULL, CT_ERROR_VALUE, "Starting multiplicative factor");
    CT_ASSERT_ERR(ct_linearlr_new(o, 0, 1, 5) != NULL, CT_ERROR_VALUE, "Starting multiplicative factor");
    CT_ASSERT_ERR(ct_linearlr_new(o, 0.5, -1, 5) != NULL, CT_ERROR_VALUE,
                  "Ending multiplicative factor expected to be between 0 and 1.");
    CT_ASSERT_ERR(ct_linearlr_new(o, 0.5, 1, 0) != NULL, CT_ERROR_VALUE, "total_iters");
    CT_ASSERT_ERR(ct_lambdalr_new(o, NULL, NULL) != NULL, CT_ERROR_NULL_ARGUMENT, "lr_lambda");
    ct_onecycle_options oc = ct_onecycle_defaults(0.1, 0);
    CT_ASSERT_ERR(ct_onecyclelr_new(o, &oc) != NULL, CT_ERROR_VALUE, "Expected positive integer total_steps, but got 0");
    oc = ct_onecycle_defaults(0.1, 10);
    oc.pct_start = 1.5;
    CT_ASSERT_ERR(ct_onecyclelr_new(o, &oc) != NULL, CT_ERROR_VALUE, "Expected float between 0 and 1 pct_start");
    oc = ct_onecycle_defaults(0.1, 10);
    oc.anneal_strategy = 7;
    CT_ASSERT_ERR(ct_onecyclelr_new(o, &oc) != NULL, CT_ERROR_VALUE, "anneal_strategy must by one of");
    CT_ASSERT_ERR(ct_onecyclelr_new(o, NULL) != NULL, CT_ERROR_NULL_ARGUMENT, "options");
    ct_plateau_options p = ct_plateau_defaults();
    p.factor = 1.0;
    CT_ASSERT_ERR(ct_reducelronplateau_new(o, &p) != NULL, CT_ERROR_VALUE, "Factor should be < 1.0.");
    CT_ASSERT_ERR(ct_reducelronplateau_new(o, NULL) != NULL, CT_ERROR_NULL_ARGUMENT, "options");

    /* Adagrad has no momentum to cycle */
    ct_tensor *w = ct_zeros(CT_SHAPE(2), CT_F32, CT_CPU);
    ct_optimizer *ada = ct_optimizer_new(CT_OPTIM_ADAGRAD, &w, 1, NULL);
    oc = ct_onecycle_defaults(0.1, 10);
    CT_ASSERT_ERR(ct_onecyclelr_new(ada, &oc) != NULL, CT_ERROR_VALUE,
                  "optimizer must support momentum with `cycle_momentum` option enabled");
    oc.cycle_momentum = false;
    ct_lr_scheduler *ok = ct_onecyclelr_new(ada, &oc);
    CT_ASSERT_OK(ok);
    ct_lr_scheduler_free(ok);

    /* SequentialLR */
    ct_lr_scheduler *x = ct_exponentiallr_new(o, 0.9), *y = ct_exponentiallr_new(ada, 0.9);
    ct_lr_scheduler *two[2] = {x, y};
    CT_ASSERT_ERR(ct_sequentiallr_new(o, two, 2, CT_INDEX(3), 1) != NULL, CT_ERROR_VALUE,
                  "got schedulers at index 1 to be different than the optimizer passed in.");
    x = ct_exponentiallr_new(o, 0.9); /* the failed call freed both */
    y = ct_steplr_new(o, 2, 0.9);
    two[0] = x;
    two[1] = y;
    CT_ASSERT_ERR(ct_sequentiallr_new(o, two, 2, CT_INDEX(3, 4), 2) != NULL, CT_ERROR_VALUE,
                  "number of schedulers 2 and the number of milestones to be equal to 2");
    CT_ASSERT_ERR(ct_sequentiallr_new(o, NULL, 2, NULL, 1) != NULL, CT_ERROR_NULL_ARGUMENT, "at least one");
    ct_lr_scheduler *pl = ct_reducelronplateau_new(o, &(ct_plateau_options){.factor = 0.1, .patience = 1});
    ct_lr_scheduler *one[1] = {pl};
    CT_ASSERT_ERR(ct_sequentiallr_new(o, one, 1, NULL, 0) != NULL, CT_ERROR_NOT_IMPLEMENTED, "ReduceLROnPlateau");

    /* stepping the wrong way */
    ct_lr_scheduler *st = ct_steplr_new(o, 2, 0.5);
    CT_ASSERT_ERR(ct_lr_scheduler_step_metric(st, 1.0) == CT_OK, CT_ERROR_VALUE, "does not take a metric");
    pl = ct_reducelronplateau_new(o, &(ct_plateau_options){.factor = 0.1, .patience = 1});
    CT_ASSERT_ERR(ct_lr_scheduler_step(pl) == CT_OK, CT_ERROR_VALUE, "ct_lr_scheduler_step_metric");
    CT_ASSERT_ERR(ct_lr_scheduler_step(NULL) == CT_OK, CT_ERROR_NULL_ARGUMENT, "scheduler");
    CT_ASSERT_ERR(ct_lr_scheduler_step_metric(NULL, 1) == CT_OK, CT_ERROR_NULL_ARGUMENT, "scheduler");
    CT_ASSERT_ERR(!isnan(ct_lr_scheduler_get_last_lr(st, 2)), CT_ERROR_INDEX, "out of range");
    CT_ASSERT_ERR(!isnan(ct_lr_scheduler_get_last_lr(NULL, 0)), CT_ERROR_NULL_ARGUMENT, "scheduler");

    /* state dicts of another kind or shape */
    ct_value *sd = ct_lr_scheduler_state_dict(st);
    CT_ASSERT_OK(sd);
    ct_value_set(sd, "step_size", ct_value_new_float(2.5));
    CT_ASSERT_ERR(ct_lr_scheduler_load_state_dict(st, sd) == CT_OK, CT_ERROR_VALUE, "'step_size' should be an integer");
    ct_value_set(sd, "step_size", ct_value_new_int(0));
    CT_ASSERT_ERR(ct_lr_scheduler_load_state_dict(st, sd) == CT_OK, CT_ERROR_VALUE, "step_size");
    ct_value_set(sd, "step_size", ct_value_new_int(2));
    ct_value *lrs = ct_value_new_list();
    ct_value_append(lrs, ct_value_new_float(0.1));
    ct_value_set(sd, "base_lrs", lrs);
    CT_ASSERT_ERR(ct_lr_scheduler_load_state_dict(st, sd) == CT_OK, CT_ERROR_VALUE, "list of 2 numbers");
    ct_value_free(sd);
    ct_value *empty = ct_value_new_dict();
    CT_ASSERT_ERR(ct_lr_scheduler_load_state_dict(st, empty) == CT_OK, CT_ERROR_VALUE, "no 'last_epoch'");
    ct_value_free(empty);
    CT_ASSERT_ERR(ct_lr_scheduler_load_state_dict(st, NULL) == CT_OK, CT_ERROR_NULL_ARGUMENT, "state_dict");
    CT_ASSERT_ERR(ct_lr_scheduler_state_dict(NULL) != NULL, CT_ERROR_NULL_ARGUMENT, "scheduler");

    /* a group added after the scheduler was made */
    ct_tensor *z = ct_zeros(CT_SHAPE(1), CT_F64, CT_CPU);
    assert_int_equal(ct_optimizer_add_param_group(o, &z, 1, NULL), CT_OK);
    CT_ASSERT_ERR(ct_lr_scheduler_step(st) == CT_OK, CT_ERROR_VALUE, "make the scheduler after adding every group");
    ct_lr_scheduler_free(st);
    ct_lr_scheduler_free(pl);
    ct_lr_scheduler_free(NULL);
    ct_optimizer_free(ada);
    ct_release(w);
    ct_release(z);
    fixture_free(&f);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_golden_sequences),
        cmocka_unit_test(test_resume),
        cmocka_unit_test(test_onecycle_past_total),
        cmocka_unit_test(test_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
