/* The composite ops (src/ops/composite.c) against PyTorch: golden values and refusals
 * from tests/data/composites_golden.txt (tests/golden/gen_composites.py), gradients
 * through gradcheck and gradgradcheck, and the same calls on META and, where there is
 * a GPU, on CUDA against the same values. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tensor_impl.h"
#include "testutil.h"

#define MAX_IN 3
#define MAX_VALS 256

/* "dtype:shape:values" -> a tensor (NULL on a malformed field) */
static ct_tensor *parse_tensor(char *field) {
    char *dt = field, *shape_s = strchr(field, ':'), *vals = shape_s ? strchr(shape_s + 1, ':') : NULL;
    if (!vals)
        return NULL;
    *shape_s++ = '\0';
    *vals++ = '\0';
    int64_t shape[CT_MAX_DIMS];
    int nd = 0;
    for (char *p = shape_s; *p; nd++) {
        shape[nd] = strtoll(p, &p, 10);
        if (*p == 'x')
            p++;
    }
    static double v[MAX_VALS];
    int n = 0;
    for (char *p = vals; *p && n < MAX_VALS;) {
        v[n++] = strtod(p, &p);
        if (*p == ',')
            p++;
    }
    ct_tensor *t = ct_from_data(v, shape, nd, CT_F64);
    return t ? ct_to_dtype(t, ct_dtype_from_name(dt)) : NULL;
}

/* The call a case's name stands for (see gen_composites.py). */
static ct_tensor *run(const char *name, ct_tensor *const *in, int n) {
    double x, y;
    int i, j, k;
    char sel[16] = "", mode[16] = "";
    ct_tensor *v = NULL, *ix = NULL;
    if (!strcmp(name, "logaddexp")) return ct_logaddexp(in[0], in[1]);
    if (!strcmp(name, "logaddexp2")) return ct_logaddexp2(in[0], in[1]);
    if (!strcmp(name, "xlogy")) return ct_xlogy(in[0], in[1]);
    if (!strcmp(name, "xlog1py")) return ct_xlog1py(in[0], in[1]);
    if (!strcmp(name, "entr")) return ct_entr(in[0]);
    if (!strcmp(name, "ldexp")) return ct_ldexp(in[0], in[1]);
    if (!strcmp(name, "sinc")) return ct_sinc(in[0]);
    if (!strcmp(name, "deg2rad")) return ct_deg2rad(in[0]);
    if (!strcmp(name, "rad2deg")) return ct_rad2deg(in[0]);
    if (!strcmp(name, "heaviside")) return ct_heaviside(in[0], in[1]);
    if (!strcmp(name, "signbit")) return ct_signbit(in[0]);
    if (!strcmp(name, "float_power")) return ct_float_power(in[0], in[1]);
    if (!strcmp(name, "logsigmoid")) return ct_logsigmoid(in[0]);
    if (!strcmp(name, "softsign")) return ct_softsign(in[0]);
    if (!strcmp(name, "tanhshrink")) return ct_tanhshrink(in[0]);
    if (!strcmp(name, "hardshrink")) return ct_hardshrink(in[0], 0.5);
    if (sscanf(name, "hardshrink_%lf", &x) == 1) return ct_hardshrink(in[0], x);
    if (!strcmp(name, "softshrink")) return ct_softshrink(in[0], 0.5);
    if (!strcmp(name, "softshrink_neg")) return ct_softshrink(in[0], -1.0);
    if (sscanf(name, "softshrink_%lf", &x) == 1) return ct_softshrink(in[0], x);
    if (!strcmp(name, "glu")) return ct_glu(in[0], -1);
    if (!strcmp(name, "glu_dim0")) return ct_glu(in[0], 0);
    if (!strcmp(name, "prelu")) return ct_prelu(in[0], in[1]);
    if (!strcmp(name, "mv")) return ct_mv(in[0], in[1]);
    if (sscanf(name, "addmv_b%lf_a%lf", &x, &y) == 2)
        return ct_addmv(in[0], in[1], in[2], ct_scalar_float(x), ct_scalar_float(y));
    if (sscanf(name, "addr_b%lf_a%lf", &x, &y) == 2) /* integral: PyTorch's defaults are ints */
        return x == (int)x && y == (int)y ? ct_addr(in[0], in[1], in[2], ct_scalar_int((int)x), ct_scalar_int((int)y))
                                          : ct_addr(in[0], in[1], in[2], ct_scalar_float(x), ct_scalar_float(y));
    if (!strcmp(name, "inner")) return ct_inner(in[0], in[1]);
    if (!strcmp(name, "vdot")) return ct_vdot(in[0], in[1]);
    if (!strcmp(name, "tensordot_10_01")) return ct_tensordot(in[0], in[1], (int64_t[]){1, 0}, (int64_t[]){0, 1}, 2);
    if (sscanf(name, "tensordot_%d", &k) == 1) { /* the last k dims of a with the first k of b */
        int64_t da[CT_MAX_DIMS], db[CT_MAX_DIMS];
        for (i = 0; i < k; i++) {
            da[i] = ct_tensor_dim(in[0]) - k + i;
            db[i] = i;
        }
        return ct_tensordot(in[0], in[1], da, db, k);
    }
    if (!strcmp(name, "kron")) return ct_kron(in[0], in[1]);
    if (sscanf(name, "linalg_cross_%d", &k) == 1) return ct_linalg_cross(in[0], in[1], k);
    if (sscanf(name, "diag_%d", &k) == 1) return ct_diag(in[0], k);
    if (!strcmp(name, "trace")) return ct_trace(in[0]);
    if (sscanf(name, "aminmax_%d.%15s", &k, sel) == 2 || sscanf(name, "aminmax.%15s", sel) == 1) {
        int64_t dim = k;
        ct_tensor *lo = NULL, *hi = NULL;
        if (ct_aminmax(in[0], strchr(name, '_') ? &dim : NULL, false, &lo, &hi) != CT_OK)
            return NULL;
        return !strcmp(sel, "min") ? lo : hi;
    }
    if (!strcmp(name, "median")) return ct_median(in[0]);
    if (!strcmp(name, "nanmedian")) return ct_nanmedian(in[0]);
    if (sscanf(name, "median_%d_%d.%15s", &i, &j, sel) == 3 || sscanf(name, "nanmedian_%d_%d.%15s", &i, &j, sel) == 3) {
        ct_status st = name[0] == 'n' ? ct_nanmedian_dim(in[0], i, j != 0, &v, &ix) : ct_median_dim(in[0], i, j != 0, &v, &ix);
        return st != CT_OK ? NULL : !strcmp(sel, "values") ? v : ix;
    }
    if (!strcmp(name, "msort")) return ct_msort(in[0]);
    if (sscanf(name, "nanquantile_all_%d_%15s", &j, mode) == 2) return ct_nanquantile(in[0], in[1], NULL, j != 0, mode);
    if (sscanf(name, "nanquantile_%d_%d_%15s", &i, &j, mode) == 3)
        return ct_nanquantile(in[0], in[1], (int64_t[]){i}, j != 0, mode);
    if (sscanf(name, "rot90_%d_%d_%d", &k, &i, &j) == 3) return ct_rot90(in[0], k, (int64_t[]){i, j}, 2);
    if (sscanf(name, "diag_embed_%d_%d_%d", &k, &i, &j) == 3) return ct_diag_embed(in[0], k, i, j);
    if (!strcmp(name, "block_diag")) return ct_block_diag((const ct_tensor *const *)in, n);
    if (!strcmp(name, "cartesian_prod")) return ct_cartesian_prod((const ct_tensor *const *)in, n);
    if (sscanf(name, "cov_%d", &k) == 1) return ct_cov(in[0], k);
    if (!strcmp(name, "corrcoef")) return ct_corrcoef(in[0]);
    if (sscanf(name, "quantile_all_%d_%15s", &j, mode) == 2) return ct_quantile(in[0], in[1], NULL, j != 0, mode);
    if (sscanf(name, "quantile_%d_%d_%15s", &i, &j, mode) == 3)
        return ct_quantile(in[0], in[1], (int64_t[]){i}, j != 0, mode);
    if (!strcmp(name, "diff_pre_app")) return ct_diff(in[0], 1, -1, in[1], in[2]);
    if (sscanf(name, "diff_%d_%d", &i, &j) == 2) return ct_diff(in[0], i, j, NULL, NULL);
    if (sscanf(name, "tril_indices_%d_%d_%d", &i, &j, &k) == 3)
        return ct_tril_indices(i, j, k, CT_DTYPE_UNDEFINED, CT_CPU);
    if (sscanf(name, "triu_indices_%d_%d_%d", &i, &j, &k) == 3)
        return ct_triu_indices(i, j, k, CT_DTYPE_UNDEFINED, CT_CPU);
    if (sscanf(name, "cdist_%lf", &x) == 1) return ct_cdist(in[0], in[1], x);
    if (sscanf(name, "bucketize_%15s", mode) == 1)
        return ct_bucketize(in[0], in[1], !strcmp(mode, "right"), !strcmp(mode, "left32"));
    if (sscanf(name, "searchsorted_%15s", mode) == 1) return ct_searchsorted(in[0], in[1], !strcmp(mode, "right"), false);
    if (sscanf(name, "bincount_w_%d", &k) == 1) return ct_bincount(in[0], in[1], k);
    if (sscanf(name, "bincount_%d", &k) == 1) return ct_bincount(in[0], NULL, k);
    if (sscanf(name, "histc_%d_%lf_%lf", &k, &x, &y) == 3) return ct_histc(in[0], k, x, y);
    if (sscanf(name, "logcumsumexp_%d", &k) == 1) return ct_logcumsumexp(in[0], k);
    if (sscanf(name, "isclose_%lf_%lf_%d", &x, &y, &k) == 3) return ct_isclose(in[0], in[1], x, y, k != 0);
    if (sscanf(name, "allclose_%lf_%lf_%d", &x, &y, &k) == 3 || !strcmp(name, "equal")) {
        bool b = false;
        ct_status st = name[0] == 'e' ? ct_equal(in[0], in[1], &b) : ct_allclose(in[0], in[1], x, y, k != 0, &b);
        return st == CT_OK ? ct_scalar_tensor(ct_scalar_bool(b), CT_BOOL, ct_tensor_device(in[0])) : NULL;
    }
    if (!strcmp(name, "argwhere")) return ct_argwhere(in[0]);
    if (!strcmp(name, "take_along_dim_none")) return ct_take_along_dim(in[0], in[1], NULL);
    if (sscanf(name, "take_along_dim_%d", &k) == 1) return ct_take_along_dim(in[0], in[1], (int64_t[]){k});
    if (sscanf(name, "take_along_dim_sorted_%d", &k) == 1) /* gradients: the indices from the input */
        return ct_take_along_dim(in[0], ct_argsort(in[0], k, false), (int64_t[]){k});
    if (sscanf(name, "dist_%lf", &x) == 1) return ct_dist(in[0], in[1], x);
    fail_msg("composites_golden.txt names %s, which this test does not know", name);
    return NULL;
}

/* got against want: dtype, shape, values (NaN where NaN; floats within a few ulps of
 * the dtype, since a composite rounds its steps where PyTorch may fuse them). */
static bool same(const ct_tensor *got, const ct_tensor *want, char *why, size_t cap) {
    if (ct_tensor_dtype(got) != ct_tensor_dtype(want)) {
        snprintf(why, cap, "dtype %s, want %s", ct_dtype_name(ct_tensor_dtype(got)), ct_dtype_name(ct_tensor_dtype(want)));
        return false;
    }
    if (ct_tensor_dim(got) != ct_tensor_dim(want) ||
        memcmp(ct_tensor_shape(got), ct_tensor_shape(want), sizeof(int64_t) * (size_t)ct_tensor_dim(want))) {
        snprintf(why, cap, "shape differs (%d dims, want %d)", ct_tensor_dim(got), ct_tensor_dim(want));
        return false;
    }
    double tol = ct_tensor_dtype(want) == CT_F32 ? 4e-6 : 1e-13;
    for (int64_t k = 0; k < ct_tensor_numel(want); k++) {
        double a = ct_test_at(got, k), b = ct_test_at(want, k);
        bool ok = isnan(b) ? isnan(a) : isinf(b) ? a == b : fabs(a - b) <= tol * (1 + fabs(b));
        if (!ok) {
            snprintf(why, cap, "element %lld is %.17g, want %.17g", (long long)k, a, b);
            return false;
        }
    }
    return true;
}

static bool same_meta(const ct_tensor *m, const ct_tensor *r) {
    return ct_tensor_device(m).type == CT_DEVICE_META && ct_tensor_dtype(m) == ct_tensor_dtype(r) &&
           ct_tensor_dim(m) == ct_tensor_dim(r) &&
           !memcmp(ct_tensor_shape(m), ct_tensor_shape(r), sizeof(int64_t) * (size_t)ct_tensor_dim(r));
}

/* ---- through ct_compile (issue 25): each golden case captured and replayed */

static ct_tensor *compiled_fn(ct_tensor *const *in, int n, void *ud) { return run(ud, in, n); }

/* Cases ct_compile refuses by design (Note [What cannot be captured]), by name prefix:
 * their capture must fail with an error naming the op. */
typedef struct {
    const char *prefix, *op, *why;
} refusal;

static const refusal compile_refused[] = {
    {"quantile_", "quantile", "it checks q's values against [0, 1] on the host"},
    {"nanquantile_", "nanquantile", "it checks q's values against [0, 1] on the host"},
    {"bincount_", "bincount", "its result's length is the data's maximum"},
    /* histc without a range (min == max == 0) only: with one it is captured */
    {"histc_3_0_0", "histc", "without a range its bins span the data's minimum and maximum"},
    {"histc_2_0_0", "histc", "without a range its bins span the data's minimum and maximum"},
    {"allclose_", "allclose", "it answers with a host bool"},
    {"equal", "equal", "it answers with a host bool"},
    {"argwhere", "nonzero", "its result's shape depends on the data (it is nonzero)"},
};

static const refusal *refused_case(const char *name, ct_tensor *const *in, int n) {
    /* equal answers inputs of different shapes without reading them: captured */
    if (!strcmp(name, "equal") && n == 2 &&
        (ct_tensor_dim(in[0]) != ct_tensor_dim(in[1]) ||
         memcmp(ct_tensor_shape(in[0]), ct_tensor_shape(in[1]), sizeof(int64_t) * (size_t)ct_tensor_dim(in[0]))))
        return NULL;
    /* nor does bincount of an empty input */
    if (!strncmp(name, "bincount", 8) && ct_tensor_numel(in[0]) == 0)
        return NULL;
    for (size_t k = 0; k < sizeof compile_refused / sizeof compile_refused[0]; k++)
        if (!strncmp(name, compile_refused[k].prefix, strlen(compile_refused[k].prefix)))
            return &compile_refused[k];
    return NULL;
}

/* The case eager, captured and replayed: each result equals the eager one bit for bit
 * (1), or the case is in compile_refused and its capture fails naming the op (0). A
 * mismatch is printed and counted in *bad (-1). */
static int check_compiled(const char *name, ct_tensor *const *in, int n, const ct_tensor *eager, int *bad) {
    const refusal *refused = refused_case(name, in, n);
    ct_compiled *c = ct_compile(compiled_fn, (void *)name, 0);
    assert_non_null(c);
    int replayed = 0;
    for (int k = 0; k < 3; k++) {
        ct_tensor *r = ct_compiled_call(c, in, n);
        if (refused && k == 1) {
            if (r || !strstr(ct_last_error(), refused->op) || !strstr(ct_last_error(), "cannot be captured")) {
                printf("MISMATCH %s through ct_compile: expected a refusal naming %s (%s), got %s\n", name,
                       refused->op, refused->why, r ? "a result" : ct_last_error());
                (*bad)++;
            }
            ct_clear_error();
            break;
        }
        if (!r || !ct_test_same_bits(r, eager)) {
            printf("MISMATCH %s through ct_compile (call %d): %s\n", name, k + 1,
                   r ? "the result differs from the eager call" : ct_last_error());
            (*bad)++;
            ct_clear_error();
            replayed = -1;
            break;
        }
        replayed += k == 2;
    }
    ct_compiled_free(c);
    return replayed;
}

static void test_golden(void **state) {
    (void)state;
    FILE *f = fopen(CT_TEST_DATA_DIR "/composites_golden.txt", "r");
    assert_non_null(f);
    static char line[1 << 16];
    int cases = 0, errors = 0, bad = 0, gpu_cases = 0, gpu_gaps = 0, compiled = 0, compile_refusals = 0;
    while (fgets(line, sizeof line, f)) {
        if (line[0] == '#' || line[0] == '\n')
            continue;
        line[strcspn(line, "\r\n")] = '\0';
        /* name|inputs|output, inputs possibly empty */
        char *name = line, *ins = strchr(line, '|'), *out = ins ? strchr(ins + 1, '|') : NULL;
        assert_non_null(out);
        *ins++ = '\0';
        *out++ = '\0';
        if (!*ins)
            ins = NULL;
        assert_non_null(name);
        assert_non_null(out);
        ct_scope_begin();
        ct_tensor *in[MAX_IN];
        int n = 0;
        for (char *fld = ins; fld;) {
            char *next = strchr(fld, ';');
            if (next)
                *next++ = '\0';
            assert_true(n < MAX_IN);
            in[n] = parse_tensor(fld);
            assert_non_null(in[n]);
            n++;
            fld = next;
        }
        ct_clear_error();
        ct_tensor *r = run(name, in, n);
        char why[160] = "";
        if (!strncmp(out, "ERR:", 4)) {
            errors++;
            if (r) {
                printf("MISMATCH %s: PyTorch refuses (%s), ctorch gives a result\n", name, out + 4);
                bad++;
            }
        } else {
            ct_tensor *want = parse_tensor(out);
            assert_non_null(want);
            if (!r) {
                printf("MISMATCH %s: ctorch refuses: %s\n", name, ct_last_error());
                bad++;
            } else if (!same(r, want, why, sizeof why)) {
                printf("MISMATCH %s: %s\n", name, why);
                bad++;
            }
            /* the same call on META: the same shape and dtype */
            ct_tensor *min[MAX_IN];
            for (int i = 0; i < n; i++)
                min[i] = ct_to_device(in[i], CT_META);
            /* no META form: the result's size or value depends on the data */
            bool data_sized = !strncmp(name, "bincount", 8) || !strncmp(name, "histc_", 6) ||
                              !strncmp(name, "allclose", 8) || !strcmp(name, "equal") || !strcmp(name, "argwhere");
            ct_tensor *m = r && n && !data_sized ? run(name, min, n) : NULL;
            if (r && n && !data_sized && (!m || !same_meta(m, r))) {
                printf("MISMATCH %s on META: %s\n", name, m ? "shape or dtype differs" : ct_last_error());
                bad++;
            }
            /* through ct_compile: the same bits as the eager call (factories too) */
            if (r) {
                int how = check_compiled(name, in, n, r, &bad);
                compiled += how == 1;
                compile_refusals += how == 0;
            }
            /* and on the GPU where there is one: PyTorch's values again */
            if (n && ct_cuda_is_available()) {
                ct_tensor *gin[MAX_IN];
                for (int i = 0; i < n; i++)
                    gin[i] = ct_to_device(in[i], (ct_device){CT_DEVICE_CUDA, 0});
                ct_tensor *g = run(name, gin, n);
                /* integer GEMMs are CPU-only, as PyTorch's ("mm_cuda" not implemented) */
                bool cuda_only_gap = !g && strstr(ct_last_error(), "_cuda\" not implemented for") &&
                                     !ct_dtype_is_floating(ct_tensor_dtype(want));
                if (cuda_only_gap) {
                    gpu_gaps++;
                    ct_clear_error();
                } else if (g && ct_tensor_device(g).type != CT_DEVICE_CUDA)
                    snprintf(why, sizeof why, "the result is not on the GPU");
                if (!cuda_only_gap && (!g || ct_tensor_device(g).type != CT_DEVICE_CUDA ||
                                       !same(ct_to_device(g, CT_CPU), want, why, sizeof why))) {
                    printf("MISMATCH %s on CUDA: %s\n", name, g ? why : ct_last_error());
                    bad++;
                }
                gpu_cases++;
            }
        }
        ct_clear_error();
        ct_scope_end();
        cases++;
    }
    fclose(f);
    printf("%d cases, %d of them refusals; %d also on CUDA (%d integer GEMMs refused there, as PyTorch)\n", cases,
           errors, gpu_cases, gpu_gaps);
    printf("%d cases through ct_compile, %d refused by it\n", compiled, compile_refusals);
    assert_true(compiled > 180);
    assert_true(cases > 150);
    assert_int_equal(bad, 0);
}

/* ---- gradients: each differentiable composite through gradcheck and gradgradcheck */

static ct_tensor *grad_fn(ct_tensor *const *in, int n, void *ud) { return run(ud, in, n); }

typedef struct {
    const char *name;
    int n;
    int64_t shape[MAX_IN][4];
    int nd[MAX_IN];
    const char *domain; /* per input: 'n' normal, 'p' positive (0.5..2.5), 'q' quantiles (no grad) */
} grad_case;

static const grad_case grad_cases[] = {
    {"logaddexp", 2, {{2, 3}, {3}}, {2, 1}, "nn"},
    {"logaddexp2", 2, {{3}, {2, 3}}, {1, 2}, "nn"},
    {"xlogy", 2, {{2, 3}, {3}}, {2, 1}, "np"},
    {"xlog1py", 2, {{2, 3}, {3}}, {2, 1}, "np"},
    {"entr", 1, {{5}}, {1}, "p"},
    {"ldexp", 2, {{2, 3}, {3}}, {2, 1}, "nn"},
    {"sinc", 1, {{5}}, {1}, "n"},
    {"deg2rad", 1, {{4}}, {1}, "n"},
    {"rad2deg", 1, {{4}}, {1}, "n"},
    {"float_power", 2, {{3}, {3}}, {1, 1}, "pn"},
    {"logsigmoid", 1, {{6}}, {1}, "n"},
    {"softsign", 1, {{6}}, {1}, "n"},
    {"tanhshrink", 1, {{6}}, {1}, "n"},
    {"hardshrink", 1, {{6}}, {1}, "n"},
    {"softshrink", 1, {{6}}, {1}, "n"},
    {"glu", 1, {{2, 4}}, {2}, "n"},
    {"prelu", 2, {{2, 3, 2}, {3}}, {3, 1}, "nn"},
    {"mv", 2, {{3, 4}, {4}}, {2, 1}, "nn"},
    {"addmv_b0.5_a2", 3, {{3}, {3, 4}, {4}}, {1, 2, 1}, "nnn"},
    {"addr_b2_a0.5", 3, {{3, 2}, {3}, {2}}, {2, 1, 1}, "nnn"},
    {"inner", 2, {{2, 3}, {4, 3}}, {2, 2}, "nn"},
    {"vdot", 2, {{4}, {4}}, {1, 1}, "nn"},
    {"tensordot_1", 2, {{2, 3}, {3, 2}}, {2, 2}, "nn"},
    {"tensordot_10_01", 2, {{3, 2, 2}, {2, 3, 2}}, {3, 3}, "nn"},
    {"kron", 2, {{2, 2}, {2, 3}}, {2, 2}, "nn"},
    {"linalg_cross_-1", 2, {{2, 3}, {2, 3}}, {2, 2}, "nn"},
    {"diag_1", 1, {{3}}, {1}, "n"},
    {"diag_-1", 1, {{3, 4}}, {2}, "n"},
    {"trace", 1, {{3, 3}}, {2}, "n"},
    {"median_1_0.values", 1, {{3, 5}}, {2}, "n"},
    {"nanmedian_0_1.values", 1, {{4, 2}}, {2}, "n"},
    {"median", 1, {{2, 3}}, {2}, "n"},
    {"msort", 1, {{4, 2}}, {2}, "n"},
    {"quantile_1_1_linear", 2, {{3, 5}, {3}}, {2, 1}, "nq"},
    {"quantile_all_0_midpoint", 2, {{6}, {2}}, {1, 1}, "nq"},
    {"diff_2_-1", 1, {{2, 5}}, {2}, "n"},
    {"diff_pre_app", 3, {{2, 3}, {2, 1}, {2, 2}}, {2, 2, 2}, "nnn"},
    {"cdist_2.0", 2, {{3, 4}, {2, 4}}, {2, 2}, "nn"},
    {"cdist_1.5", 2, {{3, 4}, {2, 4}}, {2, 2}, "nn"},
    {"logcumsumexp_1", 1, {{2, 7}}, {2}, "n"},
    {"nanquantile_1_0_linear", 2, {{3, 5}, {2}}, {2, 1}, "nq"},
    {"rot90_1_0_1", 1, {{2, 3}}, {2}, "n"},
    {"diag_embed_1_-2_-1", 1, {{2, 3}}, {2}, "n"},
    {"block_diag", 2, {{2, 2}, {1, 3}}, {2, 2}, "nn"},
    {"cartesian_prod", 2, {{2}, {3}}, {1, 1}, "nn"},
    {"cov_1", 1, {{3, 5}}, {2}, "n"},
    {"corrcoef", 1, {{3, 5}}, {2}, "n"},
    {"take_along_dim_sorted_1", 1, {{3, 4}}, {2}, "n"},
    {"take_along_dim_sorted_0", 1, {{3, 4}}, {2}, "n"},
    {"dist_2", 2, {{3, 4}, {4}}, {2, 1}, "nn"},
    {"dist_3", 2, {{2, 3}, {2, 3}}, {2, 2}, "nn"},
    {"dist_1", 2, {{5}, {5}}, {1, 1}, "nn"},
};

static void test_gradients(void **state) {
    (void)state;
    uint64_t seed = 12345;
    for (size_t c = 0; c < sizeof grad_cases / sizeof grad_cases[0]; c++) {
        const grad_case *g = &grad_cases[c];
        ct_scope_begin();
        ct_tensor *in[MAX_IN];
        for (int i = 0; i < g->n; i++) {
            ct_tensor *t = ct_empty(g->shape[i], g->nd[i], CT_F64, CT_CPU);
            double *p = ct_tensor_data(t);
            for (int64_t k = 0; k < ct_tensor_numel(t); k++) {
                double u = ct_test_unit(&seed);
                p[k] = g->domain[i] == 'p' ? 0.5 + 2 * u : g->domain[i] == 'q' ? 0.05 + 0.9 * u : 4 * u - 2;
            }
            if (g->domain[i] != 'q')
                ct_tensor_set_requires_grad(t, true);
            in[i] = t;
        }
        if (ct_gradcheck(grad_fn, (void *)g->name, in, g->n, 1e-6, 1e-6, 1e-4) != CT_OK)
            fail_msg("%s: %s", g->name, ct_last_error());
        if (ct_gradgradcheck(grad_fn, (void *)g->name, in, g->n, 1e-6, 1e-6, 1e-4) != CT_OK)
            fail_msg("%s (second order): %s", g->name, ct_last_error());
        ct_scope_end();
    }
}

/* Gradients where the composites guard a branch: no NaN from the discarded side. */
static void test_gradients_at_guarded_points(void **state) {
    (void)state;
    ct_scope_begin();
    double xv[3] = {0.0, 0.0, 1.0}, yv[3] = {0.0, 2.0, 3.0};
    ct_tensor *x = ct_from_data(xv, CT_SHAPE(3), CT_F64), *y = ct_from_data(yv, CT_SHAPE(3), CT_F64);
    ct_tensor_set_requires_grad(x, true);
    ct_tensor_set_requires_grad(y, true);
    ct_tensor *out = ct_sum(ct_xlogy(x, y), NULL, 0, false, CT_DTYPE_UNDEFINED);
    const ct_tensor *ins[2] = {x, y};
    ct_tensor *grads[2] = {NULL, NULL};
    assert_int_equal(ct_autograd_grad((const ct_tensor *[]){out}, 1, ins, 2, NULL, false, false, false, grads), CT_OK);
    /* d/dx = log(y) where x != 0, 0 where x == 0; d/dy = x / y */
    assert_true(ct_test_at(grads[0], 0) == 0 && ct_test_at(grads[0], 1) == 0);
    assert_true(fabs(ct_test_at(grads[0], 2) - log(3.0)) < 1e-15);
    assert_true(ct_test_at(grads[1], 0) == 0 && ct_test_at(grads[1], 1) == 0);
    double zv[2] = {0.0, 0.5};
    ct_tensor *z = ct_from_data(zv, CT_SHAPE(2), CT_F64);
    ct_tensor_set_requires_grad(z, true);
    const ct_tensor *zin[1] = {z};
    ct_tensor *gz[1] = {NULL};
    const ct_tensor *sz[1] = {ct_sum(ct_sinc(z), NULL, 0, false, CT_DTYPE_UNDEFINED)};
    assert_int_equal(ct_autograd_grad(sz, 1, zin, 1, NULL, false, false, false, gz), CT_OK);
    assert_true(ct_test_at(gz[0], 0) == 0); /* sinc'(0) = 0, not NaN */
    /* logaddexp of equal infinities is that infinity */
    double iv[1] = {INFINITY};
    ct_tensor *a = ct_from_data(iv, CT_SHAPE(1), CT_F64), *b = ct_from_data(iv, CT_SHAPE(1), CT_F64);
    assert_true(isinf(ct_test_at(ct_logaddexp(a, b), 0)));
    ct_scope_end();
}

/* Errors the golden file cannot hold. allclose and equal answer through a bool: a
 * missing one, a missing tensor and META inputs (whose values cannot be read) are
 * errors, and *out is left alone. take_along_dim refuses an index out of range, for
 * which PyTorch 2.11 returns a value. */
static void test_error_inputs(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *a = ct_ones(CT_SHAPE(3), CT_F32, CT_CPU), *m = ct_to_device(a, CT_META);
    bool b = true;
    assert_int_equal(ct_allclose(a, a, 1e-5, 1e-8, false, NULL), CT_ERROR_NULL_ARGUMENT);
    assert_int_equal(ct_equal(a, a, NULL), CT_ERROR_NULL_ARGUMENT);
    assert_int_equal(ct_equal(NULL, a, &b), CT_ERROR_NULL_ARGUMENT);
    assert_int_not_equal(ct_allclose(m, m, 1e-5, 1e-8, false, &b), CT_OK);
    assert_int_not_equal(ct_equal(m, m, &b), CT_OK);
    assert_int_equal(ct_equal(a, m, &b), CT_ERROR_DEVICE);
    assert_non_null(strstr(ct_last_error(), "different devices"));
    assert_true(b);
    assert_int_equal(ct_equal(a, ct_zeros(CT_SHAPE(3), CT_F32, CT_CPU), &b), CT_OK);
    assert_false(b);
    assert_int_equal(ct_allclose(a, ct_full(CT_SHAPE(3), ct_scalar_float(1.0 + 1e-6), CT_F32, CT_CPU), 1e-5, 1e-8,
                                 false, &b),
                     CT_OK);
    assert_true(b);
    ct_tensor *x = ct_ones(CT_SHAPE(2, 3), CT_F64, CT_CPU), *ix = ct_full(CT_SHAPE(1, 1), ct_scalar_int(3), CT_I64, CT_CPU);
    assert_null(ct_take_along_dim(x, ix, (int64_t[]){1}));
    assert_non_null(strstr(ct_last_error(), "index 3 is out of bounds for dimension 1 with size 3"));
    ct_clear_error();
    ct_scope_end();
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_golden), cmocka_unit_test(test_gradients),
                                       cmocka_unit_test(test_gradients_at_guarded_points),
                                       cmocka_unit_test(test_error_inputs)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
