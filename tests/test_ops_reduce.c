/* Reductions and scans: OpInfo entries, PyTorch goldens, edge cases, errors. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "opinfo.h"
#include "ctorch/ops.h"

/* 0, 1, 2, ... in row-major order. */
static ct_tensor *seq(const int64_t *shape, int nd, ct_dtype d) {
    ct_tensor *t = ct_empty(shape, nd, d, CT_CPU);
    int64_t n = ct_tensor_numel(t);
    for (int64_t i = 0; i < n; i++) {
        int64_t idx[8], r = i;
        for (int k = nd - 1; k >= 0; k--) {
            idx[k] = r % shape[k];
            r /= shape[k];
        }
        ct_tensor_set(t, idx, (double)i);
    }
    return t;
}

/* A view of base's memory with other sizes/strides (base must outlive it). */
static ct_tensor *restride(const ct_tensor *base, const int64_t *shape, const int64_t *strides, int nd) {
    return ct_from_blob(ct_tensor_data(base), shape, strides, nd, ct_tensor_dtype(base), NULL, NULL);
}

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static double unit(void) { return ct_test_unit(&rng); }
static ct_tensor *randu(const int64_t *shape, int nd, ct_dtype d, double lo, double hi) {
    ct_tensor *t = ct_empty(shape, nd, d, CT_CPU);
    int64_t n = ct_tensor_numel(t);
    double *v = malloc((size_t)n * sizeof(double));
    for (int64_t i = 0; i < n; i++)
        v[i] = lo + (hi - lo) * unit();
    ct_tensor *src = ct_from_data(v, shape, nd, CT_F64);
    ct_copy_(t, src);
    free(v);
    return t;
}

static void test_sum_basic(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *a = seq(CT_SHAPE(2, 3, 4), CT_F32);
    ct_tensor *r = ct_sum(a, NULL, 0, false, CT_DTYPE_UNDEFINED);
    CT_ASSERT_SHAPE(r, );
    assert_true(ct_test_at(r, 0) == 276);
    r = ct_sum(a, CT_INDEX(-1, 0), 2, false, CT_DTYPE_UNDEFINED);
    CT_ASSERT_SHAPE(r, 3);
    assert_true(ct_test_at(r, 0) == (0 + 1 + 2 + 3) + (12 + 13 + 14 + 15));
    r = ct_sum(a, CT_INDEX(1), 1, true, CT_DTYPE_UNDEFINED);
    CT_ASSERT_SHAPE(r, 2, 1, 4);
    assert_true(ct_test_at(r, 5) == 13 + 17 + 21);
    /* ints and bools sum to int64 */
    r = ct_sum(ct_ones(CT_SHAPE(5), CT_BOOL, CT_CPU), NULL, 0, false, CT_DTYPE_UNDEFINED);
    assert_int_equal(ct_tensor_dtype(r), CT_I64);
    assert_true(ct_test_at(r, 0) == 5);
    r = ct_sum(a, NULL, 0, false, CT_F64);
    assert_int_equal(ct_tensor_dtype(r), CT_F64);
    /* transposed input */
    r = ct_sum(restride(a, CT_INDEX(4, 3, 2), CT_INDEX(1, 4, 12), 3), CT_INDEX(2), 1, false, CT_DTYPE_UNDEFINED);
    CT_ASSERT_SHAPE(r, 4, 3);
    assert_true(ct_test_at(r, 1) == 4 + 16);
    /* empty: 0 */
    r = ct_sum(ct_zeros(CT_SHAPE(0, 3), CT_F32, CT_CPU), CT_INDEX(0), 1, false, CT_DTYPE_UNDEFINED);
    CT_ASSERT_SHAPE(r, 3);
    assert_true(ct_test_at(r, 2) == 0);
    /* 0-d */
    r = ct_sum(ct_scalar_tensor(ct_scalar_float(2.5), CT_F32, CT_CPU), CT_INDEX(-1), 1, true, CT_DTYPE_UNDEFINED);
    CT_ASSERT_SHAPE(r, );
    assert_true(ct_test_at(r, 0) == 2.5);
    /* out= */
    ct_tensor *o = ct_empty(CT_SHAPE(2), CT_F64, CT_CPU);
    CT_ASSERT_OK(ct_sum_out(a, CT_INDEX(1, 2), 2, false, CT_DTYPE_UNDEFINED, o));
    assert_true(ct_test_at(o, 1) == 210);
    /* META */
    ct_tensor *m = ct_sum(ct_empty(CT_SHAPE(2, 3, 4), CT_I32, CT_META), CT_INDEX(1), 1, true, CT_DTYPE_UNDEFINED);
    CT_ASSERT_SHAPE(m, 2, 1, 4);
    assert_int_equal(ct_tensor_dtype(m), CT_I64);
    assert_true(ct_tensor_device(m).type == CT_DEVICE_META);
    ct_scope_end();
}

static void test_sum_errors(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *a = ct_zeros(CT_SHAPE(2, 3), CT_F32, CT_CPU);
    CT_ASSERT_ERR(ct_sum(NULL, NULL, 0, false, CT_DTYPE_UNDEFINED) != NULL, CT_ERROR_NULL_ARGUMENT, "sum");
    CT_ASSERT_ERR(ct_sum(a, CT_INDEX(2), 1, false, CT_DTYPE_UNDEFINED) != NULL, CT_ERROR_INDEX,
                  "Dimension out of range (expected to be in range of [-2, 1], but got 2)");
    CT_ASSERT_ERR(ct_sum(a, CT_INDEX(0, -2), 2, false, CT_DTYPE_UNDEFINED) != NULL, CT_ERROR_VALUE,
                  "dim 0 appears multiple times in the list of dims");
    int64_t many[20] = {0};
    CT_ASSERT_ERR(ct_sum(a, many, 20, false, CT_DTYPE_UNDEFINED) != NULL, CT_ERROR_VALUE, "appears multiple times");
    CT_ASSERT_ERR(ct_sum(a, CT_INDEX(0), -1, false, CT_DTYPE_UNDEFINED) != NULL, CT_ERROR_VALUE, "negative");
    CT_ASSERT_ERR(ct_sum(a, NULL, 0, false, (ct_dtype)99) != NULL, CT_ERROR_TYPE, "invalid dtype");
    CT_ASSERT_ERR(ct_sum_out(a, CT_INDEX(0), 1, false, CT_DTYPE_UNDEFINED, ct_empty(CT_SHAPE(2), CT_F32, CT_CPU)) != NULL,
                  CT_ERROR_VALUE, "shape");
    CT_ASSERT_ERR(ct_sum_out(a, NULL, 0, false, CT_DTYPE_UNDEFINED, NULL) != NULL, CT_ERROR_NULL_ARGUMENT, "sum_out");
    ct_scope_end();
}

/* 1e7 float32 ones sum to exactly 1e7 (a naive float32 loop stops at 2^24), and the
 * result does not depend on the thread count. */
static void test_sum_accuracy_threads(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *ones = ct_ones(CT_SHAPE(10000000), CT_F32, CT_CPU);
    ct_tensor *r = ct_sum(ones, NULL, 0, false, CT_DTYPE_UNDEFINED);
    assert_true(ct_test_at(r, 0) == 1e7);
    ct_tensor *x = randu(CT_SHAPE(3, 400000), CT_F32, -1, 1);
    int nth = ct_get_num_threads();
    ct_set_num_threads(1);
    ct_tensor *r1 = ct_sum(x, NULL, 0, false, CT_DTYPE_UNDEFINED);
    ct_tensor *c1 = ct_sum(x, CT_INDEX(1), 1, false, CT_DTYPE_UNDEFINED);
    ct_set_num_threads(2);
    ct_tensor *r2 = ct_sum(x, NULL, 0, false, CT_DTYPE_UNDEFINED);
    ct_tensor *c2 = ct_sum(x, CT_INDEX(1), 1, false, CT_DTYPE_UNDEFINED);
    ct_set_num_threads(nth);
    assert_memory_equal(ct_tensor_data(r1), ct_tensor_data(r2), 4);
    assert_memory_equal(ct_tensor_data(c1), ct_tensor_data(c2), 12);
    /* against a double loop */
    const float *p = ct_tensor_data(x);
    double s = 0;
    for (int64_t i = 0; i < 1200000; i++)
        s += p[i];
    assert_true(fabs(ct_test_at(r1, 0) - s) <= 1e-6 * (1 + fabs(s)) + 1e-3);
    ct_scope_end();
}


/* ------------------------------------------------------------------ PyTorch goldens */

typedef struct gargs {
    int64_t dims[8];
    int ndims;
    int64_t dim;
    bool keepdim;
    ct_dtype dtype;
    double p, correction;
} gargs;

static int split(char *s, char sep, char **parts, int max) {
    int n = 0;
    parts[n++] = s;
    for (char *c = s; *c && n < max; c++)
        if (*c == sep) {
            *c = 0;
            parts[n++] = c + 1;
        }
    return n;
}

static int parse_list(const char *s, double *v, int max) {
    int n = 0;
    char *end;
    while (*s && n < max) {
        v[n++] = strtod(s, &end);
        s = *end == ',' ? end + 1 : end;
        if (end == s && *s != 0)
            break;
    }
    return n;
}

static void parse_args(char *s, gargs *a) {
    memset(a, 0, sizeof *a);
    a->dtype = CT_DTYPE_UNDEFINED;
    a->correction = 1;
    char *parts[16];
    int n = *s ? split(s, ' ', parts, 16) : 0;
    for (int i = 0; i < n; i++) {
        char *eq = strchr(parts[i], '=');
        assert_non_null(eq);
        *eq = 0;
        const char *k = parts[i], *v = eq + 1;
        if (!strcmp(k, "dims")) {
            double d[8];
            a->ndims = parse_list(v, d, 8);
            for (int j = 0; j < a->ndims; j++)
                a->dims[j] = (int64_t)d[j];
        } else if (!strcmp(k, "dim")) {
            a->dim = strtoll(v, NULL, 10);
        } else if (!strcmp(k, "keepdim")) {
            a->keepdim = atoi(v) != 0;
        } else if (!strcmp(k, "dtype")) {
            a->dtype = ct_dtype_from_name(v);
        } else if (!strcmp(k, "p")) {
            a->p = strtod(v, NULL);
        } else if (!strcmp(k, "correction")) {
            a->correction = strtod(v, NULL);
        } else {
            fail_msg("unknown golden argument %s", k);
        }
    }
}

/* Runs op by its golden-file name; r1 is set for two-result ops. */
static bool run_golden_op(const char *op, const ct_tensor *x, const gargs *a, ct_tensor **r0, ct_tensor **r1) {
    const int64_t *d = a->dims;
    int nd = a->ndims;
    *r0 = *r1 = NULL;
#define R1(call) (*r0 = (call)) != NULL
#define R2(call) (call) == CT_OK
    if (!strcmp(op, "sum")) return R1(ct_sum(x, d, nd, a->keepdim, a->dtype));
    if (!strcmp(op, "nansum")) return R1(ct_nansum(x, d, nd, a->keepdim, a->dtype));
    if (!strcmp(op, "mean")) return R1(ct_mean(x, d, nd, a->keepdim, a->dtype));
    if (!strcmp(op, "nanmean")) return R1(ct_nanmean(x, d, nd, a->keepdim, a->dtype));
    if (!strcmp(op, "prod")) return R1(ct_prod(x, d, nd, a->keepdim, a->dtype));
    if (!strcmp(op, "amax")) return R1(ct_amax(x, d, nd, a->keepdim));
    if (!strcmp(op, "amin")) return R1(ct_amin(x, d, nd, a->keepdim));
    if (!strcmp(op, "logsumexp")) return R1(ct_logsumexp(x, d, nd, a->keepdim));
    if (!strcmp(op, "all")) return R1(ct_all(x, d, nd, a->keepdim));
    if (!strcmp(op, "any")) return R1(ct_any(x, d, nd, a->keepdim));
    if (!strcmp(op, "count_nonzero")) return R1(ct_count_nonzero(x, d, nd));
    if (!strcmp(op, "max")) return R1(ct_max(x));
    if (!strcmp(op, "min")) return R1(ct_min(x));
    if (!strcmp(op, "argmax")) return R1(ct_argmax(x));
    if (!strcmp(op, "argmin")) return R1(ct_argmin(x));
    if (!strcmp(op, "max_dim")) return R2(ct_max_dim(x, a->dim, a->keepdim, r0, r1));
    if (!strcmp(op, "min_dim")) return R2(ct_min_dim(x, a->dim, a->keepdim, r0, r1));
    if (!strcmp(op, "argmax_dim")) return R1(ct_argmax_dim(x, a->dim, a->keepdim));
    if (!strcmp(op, "argmin_dim")) return R1(ct_argmin_dim(x, a->dim, a->keepdim));
    if (!strcmp(op, "var")) return R1(ct_var(x, d, nd, a->correction, a->keepdim));
    if (!strcmp(op, "std")) return R1(ct_std(x, d, nd, a->correction, a->keepdim));
    if (!strcmp(op, "var_mean")) return R2(ct_var_mean(x, d, nd, a->correction, a->keepdim, r0, r1));
    if (!strcmp(op, "std_mean")) return R2(ct_std_mean(x, d, nd, a->correction, a->keepdim, r0, r1));
    if (!strcmp(op, "norm")) return R1(ct_norm(x, a->p, d, nd, a->keepdim, a->dtype));
    if (!strcmp(op, "linalg_vector_norm")) return R1(ct_linalg_vector_norm(x, a->p, d, nd, a->keepdim, a->dtype));
    if (!strcmp(op, "cumsum")) return R1(ct_cumsum(x, a->dim, a->dtype));
    if (!strcmp(op, "cumprod")) return R1(ct_cumprod(x, a->dim, a->dtype));
    if (!strcmp(op, "softmax")) return R1(ct_softmax(x, a->dim, a->dtype));
    if (!strcmp(op, "log_softmax")) return R1(ct_log_softmax(x, a->dim, a->dtype));
    if (!strcmp(op, "cummax")) return R2(ct_cummax(x, a->dim, r0, r1));
    if (!strcmp(op, "cummin")) return R2(ct_cummin(x, a->dim, r0, r1));
#undef R1
#undef R2
    fail_msg("golden op %s has no runner", op);
    return false;
}

static double rel_tol(ct_dtype d) {
    switch (d) {
    case CT_F16: return 2e-3;
    case CT_BF16: return 1.6e-2;
    case CT_F32: return 1e-5;
    case CT_F64: return 1e-12;
    default: return 0;
    }
}

static void expect_tensor(const char *where, const ct_tensor *t, char *dt, char *shape, char *vals) {
    if (!t)
        fail_msg("%s: result missing", where);
    if (strcmp(ct_dtype_name(ct_tensor_dtype(t)), dt) != 0)
        fail_msg("%s: dtype %s, PyTorch %s", where, ct_dtype_name(ct_tensor_dtype(t)), dt);
    double sh[8], v[256];
    int nd = parse_list(shape, sh, 8);
    if (ct_tensor_dim(t) != nd)
        fail_msg("%s: %d dims, PyTorch %d", where, ct_tensor_dim(t), nd);
    for (int k = 0; k < nd; k++)
        if (ct_tensor_shape(t)[k] != (int64_t)sh[k])
            fail_msg("%s: size %lld at dim %d, PyTorch %lld", where, (long long)ct_tensor_shape(t)[k], k,
                     (long long)sh[k]);
    int n = parse_list(vals, v, 256);
    assert_int_equal(ct_tensor_numel(t), n);
    double tol = rel_tol(ct_tensor_dtype(t));
    for (int i = 0; i < n; i++) {
        double got = ct_test_at(t, i), want = v[i];
        bool ok = isnan(want) ? isnan(got) : isinf(want) ? got == want : fabs(got - want) <= tol * (1 + fabs(want));
        if (!ok)
            fail_msg("%s: element %d is %.9g, PyTorch %.9g", where, i, got, want);
    }
}

static void test_golden(void **state) {
    (void)state;
    FILE *f = fopen(CT_TEST_DATA_DIR "/reductions.txt", "r");
    assert_non_null(f);
    static char line[65536];
    int cases = 0;
    while (fgets(line, sizeof line, f)) {
        if (line[0] == '#')
            continue;
        line[strcspn(line, "\n")] = 0;
        char where[512];
        snprintf(where, sizeof where, "%.500s", line);
        char *parts[8];
        int np = split(line, ';', parts, 8);
        assert_int_equal(np, 6);
        gargs a;
        parse_args(parts[1], &a);
        double sh[8];
        static double vals[4096];
        int nd = parse_list(parts[3], sh, 8);
        int nv = parse_list(parts[4], vals, 4096);
        int64_t shape[8];
        for (int k = 0; k < nd; k++)
            shape[k] = (int64_t)sh[k];
        ct_scope_begin();
        ct_tensor *x64 = ct_from_data(vals, shape, nd, CT_F64);
        assert_int_equal(ct_tensor_numel(x64), nv);
        ct_tensor *x = ct_to_dtype(x64, ct_dtype_from_name(parts[2]));
        CT_ASSERT_OK(x);
        ct_tensor *r0, *r1;
        bool ok = run_golden_op(parts[0], x, &a, &r0, &r1);
        char *exp[8];
        int ne = split(parts[5], '|', exp, 8);
        if (!strcmp(exp[0], "ERR")) {
            if (ok)
                fail_msg("%s: succeeded, PyTorch raised '%s'", where, exp[1]);
            /* PyTorch's message, less its missing space after a dim number. */
            char want[512];
            snprintf(want, sizeof want, "%s", exp[1]);
            char *q = strstr(want, "because");
            if (q && q > want && q[-1] >= '0' && q[-1] <= '9') {
                memmove(q + 1, q, strlen(q) + 1);
                *q = ' ';
            }
            const char *ni = strstr(want, "not implemented for");
            if (!strstr(ct_last_error(), ni ? ni : want))
                fail_msg("%s: error '%s', PyTorch '%s'", where, ct_last_error(), exp[1]);
            ct_clear_error();
        } else {
            if (!ok)
                fail_msg("%s: failed: %s", where, ct_last_error());
            expect_tensor(where, r0, exp[1], exp[2], exp[3]);
            if (ne > 4)
                expect_tensor(where, r1, exp[4], exp[5], exp[6]);
        }
        ct_scope_end();
        cases++;
    }
    fclose(f);
    assert_true(cases > 300);
}

/* Every parallel path gives bit-identical results with 1 and 2 threads. */
static void test_threads_deterministic(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *x = randu(CT_SHAPE(3, 200000), CT_F32, -1, 1);
    ct_tensor *y = randu(CT_SHAPE(2000, 300), CT_F64, -1, 1);
    ct_tensor *r[2][10];
    int nth = ct_get_num_threads();
    for (int t = 0; t < 2; t++) {
        ct_set_num_threads(t + 1);
        int k = 0;
        r[t][k++] = ct_sum(x, NULL, 0, false, CT_DTYPE_UNDEFINED);
        r[t][k++] = ct_sum(x, CT_INDEX(0), 1, false, CT_DTYPE_UNDEFINED); /* outer path */
        r[t][k++] = ct_mean(y, CT_INDEX(0), 1, false, CT_DTYPE_UNDEFINED);
        r[t][k++] = ct_var(x, CT_INDEX(1), 1, 1.0, false);
        r[t][k++] = ct_logsumexp(x, NULL, 0, false);
        r[t][k++] = ct_linalg_vector_norm(x, 3.0, NULL, 0, false, CT_DTYPE_UNDEFINED);
        r[t][k++] = ct_softmax(y, 1, CT_DTYPE_UNDEFINED);
        r[t][k++] = ct_cumsum(y, 0, CT_DTYPE_UNDEFINED);
        r[t][k++] = ct_argmax_dim(y, 0, false);
        r[t][k++] = ct_amax(y, CT_INDEX(1), 1, false);
    }
    ct_set_num_threads(nth);
    for (int k = 0; k < 10; k++) {
        CT_ASSERT_OK(r[0][k]);
        CT_ASSERT_OK(r[1][k]);
        size_t bytes = (size_t)ct_tensor_numel(r[0][k]) * ct_tensor_element_size(r[0][k]);
        if (memcmp(ct_tensor_data(r[0][k]), ct_tensor_data(r[1][k]), bytes) != 0)
            fail_msg("result %d differs between 1 and 2 threads", k);
    }
    /* the outer path agrees with a double loop */
    const double *p = ct_tensor_data(y);
    for (int64_t c = 0; c < 300; c += 37) {
        double s = 0;
        for (int64_t i = 0; i < 2000; i++)
            s += p[i * 300 + c];
        assert_true(fabs(ct_test_at(r[0][2], c) - s / 2000) < 1e-15);
    }
    ct_scope_end();
}

/* linalg__powsum and foreach_powsum, with the semantics of formats.md section 6. */
static void test_powsum(void **state) {
    (void)state;
    ct_scope_begin();
    float v[] = {3, 0, -4, 0.5f};
    ct_tensor *a = ct_from_data(v, CT_SHAPE(2, 2), CT_F32);
    ct_tensor *r = ct_linalg__powsum(a, 2, NULL, 0, false, CT_DTYPE_UNDEFINED);
    assert_true(fabs(ct_test_at(r, 0) - 25.25) < 1e-6);
    /* no root, no special cases: ord 0 counts every element (0^0 = 1), inf sums |x|^inf */
    r = ct_linalg__powsum(a, 0, NULL, 0, false, CT_DTYPE_UNDEFINED);
    assert_true(ct_test_at(r, 0) == 4);
    r = ct_linalg__powsum(a, INFINITY, NULL, 0, false, CT_DTYPE_UNDEFINED);
    assert_true(isinf(ct_test_at(r, 0)));
    float w[] = {0.5f, -1, 0.25f};
    r = ct_linalg__powsum(ct_from_data(w, CT_SHAPE(3), CT_F32), INFINITY, NULL, 0, false, CT_DTYPE_UNDEFINED);
    assert_true(ct_test_at(r, 0) == 1);
    r = ct_linalg__powsum(a, 1, CT_INDEX(1), 1, true, CT_F64);
    CT_ASSERT_SHAPE(r, 2, 1);
    assert_int_equal(ct_tensor_dtype(r), CT_F64);
    assert_true(ct_test_at(r, 1) == 4.5);
    r = ct_linalg__powsum(ct_zeros(CT_SHAPE(0, 3), CT_F32, CT_CPU), -1, NULL, 0, false, CT_DTYPE_UNDEFINED);
    assert_true(ct_test_at(r, 0) == 0); /* empty: 0, no identity error */
    CT_ASSERT_ERR(ct_linalg__powsum(ct_ones(CT_SHAPE(2), CT_I32, CT_CPU), 2, NULL, 0, false, CT_DTYPE_UNDEFINED) != NULL,
                  CT_ERROR_TYPE, "Expected a floating point or complex tensor as input. Got Int");
    CT_ASSERT_ERR(ct_linalg__powsum(a, 2, NULL, 0, false, CT_I64) != NULL, CT_ERROR_TYPE,
                  "dtype should be floating point or complex, but got Long");

    const ct_tensor *list[3] = {a, ct_ones(CT_SHAPE(5), CT_F64, CT_CPU), ct_zeros(CT_SHAPE(0), CT_F32, CT_CPU)};
    ct_tensor *res[3];
    assert_int_equal(ct_foreach_powsum(list, 3, 2, CT_DTYPE_UNDEFINED, res), CT_OK);
    for (int i = 0; i < 3; i++)
        CT_ASSERT_SHAPE(res[i], );
    assert_true(fabs(ct_test_at(res[0], 0) - 25.25) < 1e-6);
    assert_true(ct_test_at(res[1], 0) == 5);
    assert_int_equal(ct_tensor_dtype(res[1]), CT_F64);
    assert_true(ct_test_at(res[2], 0) == 0);
    assert_int_equal(ct_foreach_powsum(list, 2, 3, CT_F64, res), CT_OK);
    assert_int_equal(ct_tensor_dtype(res[0]), CT_F64);
    assert_true(fabs(ct_test_at(res[0], 0) - (27 + 64 + 0.125)) < 1e-9);
    const ct_tensor *bad[2] = {a, NULL};
    CT_ASSERT_ERR(ct_foreach_powsum(bad, 2, 2, CT_DTYPE_UNDEFINED, res) == CT_OK, CT_ERROR_NULL_ARGUMENT, NULL);
    assert_null(res[0]);
    const ct_tensor *ints[2] = {a, ct_ones(CT_SHAPE(2), CT_I64, CT_CPU)};
    CT_ASSERT_ERR(ct_foreach_powsum(ints, 2, 2, CT_DTYPE_UNDEFINED, res) == CT_OK, CT_ERROR_TYPE, "Got Long");
    assert_null(res[0]);
    assert_null(res[1]);
    CT_ASSERT_ERR(ct_foreach_powsum(list, 0, 2, CT_DTYPE_UNDEFINED, res) == CT_OK, CT_ERROR_VALUE,
                  "Tensor list must have at least one tensor.");
    CT_ASSERT_ERR(ct_foreach_powsum(NULL, 1, 2, CT_DTYPE_UNDEFINED, res) == CT_OK, CT_ERROR_NULL_ARGUMENT, NULL);
    CT_ASSERT_ERR(ct_foreach_powsum(list, 1, 2, CT_DTYPE_UNDEFINED, NULL) == CT_OK, CT_ERROR_NULL_ARGUMENT, NULL);
    ct_scope_end();
}

/* Errors of the individual ops beyond the shared ones of the OpInfo runner. */
static void test_op_errors(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *f = ct_zeros(CT_SHAPE(2, 3), CT_F32, CT_CPU);
    ct_tensor *i = ct_zeros(CT_SHAPE(2, 3), CT_I32, CT_CPU);
    ct_tensor *e = ct_zeros(CT_SHAPE(0, 3), CT_F32, CT_CPU);
    ct_tensor *v = NULL, *ix = NULL;
    CT_ASSERT_ERR(ct_mean(i, NULL, 0, false, CT_DTYPE_UNDEFINED) != NULL, CT_ERROR_TYPE, "could not infer output dtype");
    CT_ASSERT_ERR(ct_nanmean(f, NULL, 0, false, CT_I32) != NULL, CT_ERROR_TYPE, "floating point dtype but got Int");
    CT_ASSERT_ERR(ct_var(i, NULL, 0, 1, false) != NULL, CT_ERROR_TYPE, "std and var only support floating point");
    CT_ASSERT_ERR(ct_std_mean(i, NULL, 0, 1, false, &v, &ix) == CT_OK, CT_ERROR_TYPE, "std_mean only support");
    assert_null(v);
    CT_ASSERT_ERR(ct_var_mean(f, NULL, 0, 1, false, NULL, &ix) == CT_OK, CT_ERROR_NULL_ARGUMENT, NULL);
    CT_ASSERT_ERR(ct_var_mean(NULL, NULL, 0, 1, false, &v, &ix) == CT_OK, CT_ERROR_NULL_ARGUMENT, NULL);
    CT_ASSERT_ERR(ct_amax(e, NULL, 0, false) != NULL, CT_ERROR_VALUE, "Expected reduction dim to be specified");
    CT_ASSERT_ERR(ct_max_dim(e, 0, false, &v, &ix) == CT_OK, CT_ERROR_INDEX, "Expected reduction dim 0 to have non-zero size");
    assert_null(v);
    assert_null(ix);
    CT_ASSERT_ERR(ct_max_dim(f, 0, false, &v, NULL) == CT_OK, CT_ERROR_NULL_ARGUMENT, NULL);
    CT_ASSERT_ERR(ct_max_dim_out(f, 0, false, ct_empty(CT_SHAPE(3), CT_F32, CT_CPU), NULL) == CT_OK,
                  CT_ERROR_NULL_ARGUMENT, NULL);
    CT_ASSERT_ERR(ct_max_dim_out(f, 0, false, ct_empty(CT_SHAPE(3), CT_F32, CT_CPU), ct_empty(CT_SHAPE(3), CT_F32, CT_CPU)) ==
                      CT_OK,
                  CT_ERROR_TYPE, "Expected out tensor to have dtype int64, but got float32 instead");
    CT_ASSERT_ERR(ct_argmax(e) != NULL, CT_ERROR_INDEX, "argmax(): Expected reduction dim to be specified");
    ct_tensor *flags = ct_ones(CT_SHAPE(3), CT_BOOL, CT_CPU);
    CT_ASSERT_ERR(ct_argmax(flags) != NULL, CT_ERROR_TYPE, "argmax(): does not support bool input");
    CT_ASSERT_ERR(ct_argmin_dim(flags, 0, false) != NULL, CT_ERROR_TYPE, "argmin(): does not support bool input");
    ct_tensor *mv = NULL, *mi = NULL; /* max with a dim takes bools */
    assert_int_equal(ct_max_dim(flags, 0, false, &mv, &mi), CT_OK);
    assert_true(ct_test_at(mi, 0) == 0);
    CT_ASSERT_ERR(ct_argmin_dim(f, 5, false) != NULL, CT_ERROR_INDEX, "Dimension out of range");
    CT_ASSERT_ERR(ct_amax(ct_zeros(CT_SHAPE(2), CT_U64, CT_CPU), NULL, 0, false) != NULL, CT_ERROR_TYPE,
                  "not implemented for 'UInt64'");
    CT_ASSERT_ERR(ct_norm(i, 2, NULL, 0, false, CT_DTYPE_UNDEFINED) != NULL, CT_ERROR_TYPE,
                  "linalg.vector_norm: Expected a floating point or complex tensor as input. Got Int");
    CT_ASSERT_ERR(ct_linalg_vector_norm(e, INFINITY, NULL, 0, false, CT_DTYPE_UNDEFINED) != NULL, CT_ERROR_VALUE,
                  "cannot compute the inf norm on an empty tensor");
    CT_ASSERT_ERR(ct_linalg_vector_norm(ct_zeros(CT_SHAPE(2), CT_BF16, CT_CPU), 2, NULL, 0, false, CT_F16) != NULL,
                  CT_ERROR_TYPE, "without narrowing");
    CT_ASSERT_ERR(ct_softmax(i, 1, CT_DTYPE_UNDEFINED) != NULL, CT_ERROR_TYPE, "not implemented for 'Int'");
    CT_ASSERT_ERR(ct_log_softmax(f, 2, CT_DTYPE_UNDEFINED) != NULL, CT_ERROR_INDEX, "Dimension out of range");
    CT_ASSERT_ERR(ct_cumsum(f, -3, CT_DTYPE_UNDEFINED) != NULL, CT_ERROR_INDEX, "Dimension out of range");
    CT_ASSERT_ERR(ct_cumsum_out(f, 0, CT_DTYPE_UNDEFINED, ct_empty(CT_SHAPE(3, 2), CT_F32, CT_CPU)) != NULL,
                  CT_ERROR_VALUE, "shape");
    CT_ASSERT_ERR(ct_cummax(f, 0, &v, NULL) == CT_OK, CT_ERROR_NULL_ARGUMENT, NULL);
    CT_ASSERT_ERR(ct_cummax(NULL, 0, &v, &ix) == CT_OK, CT_ERROR_NULL_ARGUMENT, NULL);
    CT_ASSERT_ERR(ct_cummin_out(f, 0, NULL, ct_empty(CT_SHAPE(2, 3), CT_I64, CT_CPU)) == CT_OK,
                  CT_ERROR_NULL_ARGUMENT, NULL);
    CT_ASSERT_ERR(ct_count_nonzero(f, CT_INDEX(0, 0), 2) != NULL, CT_ERROR_VALUE, "appears multiple times");
    CT_ASSERT_ERR(ct_any(NULL, NULL, 0, false) != NULL, CT_ERROR_NULL_ARGUMENT, NULL);
    CT_ASSERT_ERR(ct_sum_out(f, NULL, 0, false, CT_F64, ct_empty(NULL, 0, CT_I32, CT_CPU)) != NULL, CT_ERROR_TYPE,
                  "can't be cast");
    CT_ASSERT_ERR(ct_sum_out(f, NULL, 0, false, CT_DTYPE_UNDEFINED, ct_empty(NULL, 0, CT_F32, CT_META)) != NULL,
                  CT_ERROR_DEVICE, "meta");
    ct_scope_end();
}

/* Values that need care: softmax of huge logits, logsumexp of -inf rows, out= dtype
 * from the out tensor, the max/min pair, and cummax's index rule. */
static void test_numerics(void **state) {
    (void)state;
    ct_scope_begin();
    float big[] = {1000, 1001, 1002, -INFINITY};
    ct_tensor *b = ct_from_data(big, CT_SHAPE(4), CT_F32);
    ct_tensor *sm = ct_softmax(b, 0, CT_DTYPE_UNDEFINED);
    assert_true(fabs(ct_test_at(sm, 2) - 1 / (1 + exp(-1) + exp(-2))) < 1e-6);
    assert_true(ct_test_at(sm, 3) == 0);
    ct_tensor *ls = ct_log_softmax(b, 0, CT_DTYPE_UNDEFINED);
    assert_true(isinf(ct_test_at(ls, 3)) && ct_test_at(ls, 3) < 0);
    assert_true(fabs(ct_test_at(ls, 0) + 2 + log(1 + exp(-1) + exp(-2))) < 1e-5);
    /* the float32 row path's exp, down to subnormal results */
    float wide[] = {0, -1e-3f, -0.5f, -3, -17.25f, -60, -87.5f, -95, -100, -104, -120};
    ct_tensor *ws = ct_softmax(ct_from_data(wide, CT_SHAPE(11), CT_F32), 0, CT_DTYPE_UNDEFINED);
    double z = 0;
    for (int k = 0; k < 11; k++)
        z += exp((double)wide[k]);
    for (int k = 0; k < 11; k++) {
        double want = (double)(float)(exp((double)wide[k]) / z);
        assert_true(fabs(ct_test_at(ws, k) - want) <= 3e-7 * want + 3e-45);
    }
    ct_tensor *lse = ct_logsumexp(b, NULL, 0, false);
    assert_true(fabs(ct_test_at(lse, 0) - (1002 + log(1 + exp(-1) + exp(-2)))) < 1e-3);
    float ninf[] = {-INFINITY, -INFINITY};
    lse = ct_logsumexp(ct_from_data(ninf, CT_SHAPE(2), CT_F32), NULL, 0, false);
    assert_true(isinf(ct_test_at(lse, 0)) && ct_test_at(lse, 0) < 0);
    /* mean into a float64 out= tensor computes in float64 */
    float third[] = {1, 1, 1.0f / 3};
    ct_tensor *o = ct_empty(NULL, 0, CT_F64, CT_CPU);
    CT_ASSERT_OK(ct_mean_out(ct_from_data(third, CT_SHAPE(3), CT_F32), NULL, 0, false, CT_DTYPE_UNDEFINED, o));
    assert_true(ct_test_at(o, 0) == (2.0 + (double)(1.0f / 3)) / 3);
    /* max and min with a dim: both results, keepdim */
    float m[] = {1, 7, 7, -2, NAN, 3};
    ct_tensor *x = ct_from_data(m, CT_SHAPE(2, 3), CT_F32), *v, *ix;
    assert_int_equal(ct_max_dim(x, 1, true, &v, &ix), CT_OK);
    CT_ASSERT_SHAPE(v, 2, 1);
    assert_true(ct_test_at(v, 0) == 7 && ct_test_at(ix, 0) == 1);
    assert_true(isnan(ct_test_at(v, 1)) && ct_test_at(ix, 1) == 1);
    assert_true(isnan(ct_test_at(ct_max(x), 0)));
    ct_tensor *vo = ct_empty(CT_SHAPE(3), CT_F32, CT_CPU), *io = ct_empty(CT_SHAPE(3), CT_I64, CT_CPU);
    assert_int_equal(ct_min_dim_out(x, 0, false, vo, io), CT_OK);
    assert_true(ct_test_at(vo, 0) == -2 && ct_test_at(io, 0) == 1 && isnan(ct_test_at(vo, 1)));
    /* cummax: equal values move the index forward */
    int32_t c[] = {1, 3, 3, 2};
    assert_int_equal(ct_cummax(ct_from_data(c, CT_SHAPE(4), CT_I32), 0, &v, &ix), CT_OK);
    assert_int_equal(ct_tensor_dtype(v), CT_I32);
    assert_true(ct_test_at(ix, 2) == 2 && ct_test_at(ix, 3) == 2 && ct_test_at(v, 3) == 3);
    ct_scope_end();
}

/* ------------------------------------------------------------------ OpInfo entries */

/* Adaptors: every reduction behind one signature (out NULL: functional). */
#define ADAPT_DT(op)                                                                                  \
    static ct_tensor *a_##op(const ct_tensor *a, const int64_t *d, int n, bool k, ct_dtype dt, ct_tensor *o) { \
        return o ? ct_##op##_out(a, d, n, k, dt, o) : ct_##op(a, d, n, k, dt);                        \
    }
#define ADAPT(op)                                                                                     \
    static ct_tensor *a_##op(const ct_tensor *a, const int64_t *d, int n, bool k, ct_dtype dt, ct_tensor *o) { \
        (void)dt;                                                                                     \
        return o ? ct_##op##_out(a, d, n, k, o) : ct_##op(a, d, n, k);                                \
    }
ADAPT_DT(sum)
ADAPT_DT(nansum)
ADAPT_DT(mean)
ADAPT_DT(nanmean)
ADAPT_DT(prod)
ADAPT(amax)
ADAPT(amin)
ADAPT(logsumexp)
ADAPT(all)
ADAPT(any)

static ct_tensor *a_count_nonzero(const ct_tensor *a, const int64_t *d, int n, bool k, ct_dtype dt, ct_tensor *o) {
    (void)k, (void)dt, (void)o;
    return ct_count_nonzero(a, d, n);
}
#define ADAPT_FULL(op)                                                                                \
    static ct_tensor *a_##op(const ct_tensor *a, const int64_t *d, int n, bool k, ct_dtype dt, ct_tensor *o) { \
        (void)d, (void)n, (void)k, (void)dt, (void)o;                                                 \
        return ct_##op(a);                                                                            \
    }
ADAPT_FULL(max)
ADAPT_FULL(min)
ADAPT_FULL(argmax)
ADAPT_FULL(argmin)
#define ADAPT_ARGDIM(op)                                                                              \
    static ct_tensor *a_##op##_dim(const ct_tensor *a, const int64_t *d, int n, bool k, ct_dtype dt, ct_tensor *o) { \
        (void)n, (void)dt;                                                                            \
        if (!d)                                                                                       \
            return ct_##op##_dim(a, 99, k); /* reaches only the NULL-input check */                   \
        return o ? ct_##op##_dim_out(a, d[0], k, o) : ct_##op##_dim(a, d[0], k);                      \
    }
ADAPT_ARGDIM(argmax)
ADAPT_ARGDIM(argmin)
/* Two-result ops: one adaptor per result. */
#define ADAPT_MINMAX(op, which)                                                                       \
    static ct_tensor *a_##op##_##which(const ct_tensor *a, const int64_t *d, int n, bool k, ct_dtype dt,      \
                                       ct_tensor *o) {                                                \
        (void)n, (void)dt;                                                                            \
        ct_tensor *v = NULL, *i = NULL;                                                               \
        int64_t dim = d ? d[0] : 99;                                                                  \
        if (o) {                                                                                      \
            ct_tensor *other = ct_empty(ct_tensor_shape(o), ct_tensor_dim(o), ct_tensor_dtype(o) == CT_I64 ? \
                                        ct_tensor_dtype(a) : CT_I64, ct_tensor_device(o));            \
            if (ct_tensor_dim(o) == 1 && ct_tensor_shape(o)[0] == 7) /* the bad-shape probe */        \
                other = ct_empty(CT_SHAPE(7), CT_I64, ct_tensor_device(o));                           \
            bool vals = !strcmp(#which, "values");                                                    \
            if (ct_##op##_dim_out(a, dim, k, vals ? o : other, vals ? other : o) != CT_OK)            \
                return NULL;                                                                          \
            return o;                                                                                 \
        }                                                                                             \
        if (ct_##op##_dim(a, dim, k, &v, &i) != CT_OK)                                                \
            return NULL;                                                                              \
        return !strcmp(#which, "values") ? v : i;                                                     \
    }
ADAPT_MINMAX(max, values)
ADAPT_MINMAX(max, indices)
ADAPT_MINMAX(min, values)
ADAPT_MINMAX(min, indices)
#define ADAPT_VAR(op, corr)                                                                           \
    static ct_tensor *a_##op(const ct_tensor *a, const int64_t *d, int n, bool k, ct_dtype dt, ct_tensor *o) { \
        (void)dt;                                                                                     \
        return o ? ct_##op##_out(a, d, n, corr, k, o) : ct_##op(a, d, n, corr, k);                    \
    }
ADAPT_VAR(var, 1.0)
ADAPT_VAR(std, 0.0)
#define ADAPT_VARMEAN(op, which, corr)                                                                \
    static ct_tensor *a_##op##_##which(const ct_tensor *a, const int64_t *d, int n, bool k, ct_dtype dt,      \
                                       ct_tensor *o) {                                                \
        (void)dt, (void)o;                                                                            \
        ct_tensor *r0 = NULL, *r1 = NULL;                                                             \
        if (ct_##op(a, d, n, corr, k, &r0, &r1) != CT_OK)                                             \
            return NULL;                                                                              \
        return which ? r1 : r0;                                                                       \
    }
ADAPT_VARMEAN(var_mean, 0, 1.0)
ADAPT_VARMEAN(var_mean, 1, 1.0)
ADAPT_VARMEAN(std_mean, 0, 2.0)
#define ADAPT_NORM(op, tag, ord)                                                                      \
    static ct_tensor *a_##op##_##tag(const ct_tensor *a, const int64_t *d, int n, bool k, ct_dtype dt,        \
                                     ct_tensor *o) {                                                  \
        return o ? ct_##op##_out(a, ord, d, n, k, dt, o) : ct_##op(a, ord, d, n, k, dt);              \
    }
ADAPT_NORM(norm, 2, 2.0)
ADAPT_NORM(norm, 3, 3.0)
ADAPT_NORM(norm, inf, INFINITY)
ADAPT_NORM(linalg_vector_norm, 1, 1.0)
ADAPT_NORM(linalg_vector_norm, half, 0.5)
ADAPT_NORM(linalg_vector_norm, ninf, -INFINITY)
ADAPT_NORM(linalg_vector_norm, 0, 0.0)
ADAPT_NORM(linalg__powsum, 2, 2.0)
ADAPT_NORM(linalg__powsum, 3, 3.0)
#define ADAPT_SCAN(op)                                                                                \
    static ct_tensor *a_##op(const ct_tensor *a, const int64_t *d, int n, bool k, ct_dtype dt, ct_tensor *o) { \
        (void)n, (void)k;                                                                             \
        int64_t dim = d ? d[0] : 99;                                                                  \
        return o ? ct_##op##_out(a, dim, dt, o) : ct_##op(a, dim, dt);                                \
    }
ADAPT_SCAN(cumsum)
ADAPT_SCAN(cumprod)
ADAPT_SCAN(softmax)
ADAPT_SCAN(log_softmax)
#define ADAPT_SCANIDX(op, which)                                                                      \
    static ct_tensor *a_##op##_##which(const ct_tensor *a, const int64_t *d, int n, bool k, ct_dtype dt,      \
                                       ct_tensor *o) {                                                \
        (void)n, (void)k, (void)dt, (void)o;                                                          \
        ct_tensor *v = NULL, *i = NULL;                                                               \
        if (ct_##op(a, d ? d[0] : 99, &v, &i) != CT_OK)                                               \
            return NULL;                                                                              \
        return which ? i : v;                                                                         \
    }
ADAPT_SCANIDX(cummax, 0)
ADAPT_SCANIDX(cummax, 1)
ADAPT_SCANIDX(cummin, 0)
ADAPT_SCANIDX(cummin, 1)

/* References (double precision, PyTorch's NaN rules). */
static double r_sum(const double *v, int64_t n, double p) {
    (void)p;
    double s = 0;
    for (int64_t i = 0; i < n; i++)
        s += v[i];
    return s;
}
static double r_nansum(const double *v, int64_t n, double p) {
    (void)p;
    double s = 0;
    for (int64_t i = 0; i < n; i++)
        s += isnan(v[i]) ? 0 : v[i];
    return s;
}
static double r_mean(const double *v, int64_t n, double p) { return r_sum(v, n, p) / (double)n; }
static double r_nanmean(const double *v, int64_t n, double p) {
    int64_t k = 0;
    for (int64_t i = 0; i < n; i++)
        k += !isnan(v[i]);
    return r_nansum(v, n, p) / (double)k;
}
static double r_prod(const double *v, int64_t n, double p) {
    (void)p;
    double s = 1;
    for (int64_t i = 0; i < n; i++)
        s *= v[i];
    return s;
}
/* Index of the first extremum (the first NaN if any); p > 0 max, p < 0 min. */
static int64_t argext(const double *v, int64_t n, double p) {
    int64_t best = 0;
    for (int64_t i = 0; i < n; i++) {
        if (isnan(v[i]))
            return i;
        if (p > 0 ? v[i] > v[best] : v[i] < v[best])
            best = i;
    }
    return best;
}
static double r_ext(const double *v, int64_t n, double p) { return v[argext(v, n, p)]; }
static double r_argext(const double *v, int64_t n, double p) { return (double)argext(v, n, p); }
static double r_logsumexp(const double *v, int64_t n, double p) {
    (void)p;
    double s = 0;
    for (int64_t i = 0; i < n; i++)
        s += exp(v[i]);
    return log(s);
}
static double r_count(const double *v, int64_t n, double p) {
    (void)p;
    int64_t k = 0;
    for (int64_t i = 0; i < n; i++)
        k += v[i] != 0;
    return (double)k;
}
static double r_any(const double *v, int64_t n, double p) { return r_count(v, n, p) > 0; }
static double r_all(const double *v, int64_t n, double p) { return r_count(v, n, p) == (double)n; }
static double r_var(const double *v, int64_t n, double corr) {
    double m = r_mean(v, n, 0), s = 0;
    for (int64_t i = 0; i < n; i++)
        s += (v[i] - m) * (v[i] - m);
    double d = (double)n - corr;
    return s / (d > 0 ? d : 0);
}
static double r_std(const double *v, int64_t n, double corr) { return sqrt(r_var(v, n, corr)); }
static double r_norm(const double *v, int64_t n, double p) {
    if (n == 0)
        return 0;
    if (isinf(p)) {
        double m = fabs(v[0]);
        for (int64_t i = 0; i < n; i++)
            m = p > 0 ? fmax(m, fabs(v[i])) : fmin(m, fabs(v[i]));
        return m;
    }
    if (p == 0)
        return r_count(v, n, 0);
    double s = 0;
    for (int64_t i = 0; i < n; i++)
        s += pow(fabs(v[i]), p);
    return pow(s, 1 / p);
}
static double r_powsum(const double *v, int64_t n, double p) {
    double s = 0;
    for (int64_t i = 0; i < n; i++)
        s += pow(fabs(v[i]), p);
    return s;
}
static void s_cumsum(const double *v, int64_t n, double *o) {
    double s = 0;
    for (int64_t i = 0; i < n; i++)
        o[i] = s += v[i];
}
static void s_cumprod(const double *v, int64_t n, double *o) {
    double s = 1;
    for (int64_t i = 0; i < n; i++)
        o[i] = s *= v[i];
}
static void s_softmax(const double *v, int64_t n, double *o) {
    double m = -INFINITY, s = 0;
    for (int64_t i = 0; i < n; i++)
        m = fmax(m, v[i]);
    for (int64_t i = 0; i < n; i++)
        s += exp(v[i] - m);
    for (int64_t i = 0; i < n; i++)
        o[i] = exp(v[i] - m) / s;
}
static void s_log_softmax(const double *v, int64_t n, double *o) {
    s_softmax(v, n, o);
    for (int64_t i = 0; i < n; i++)
        o[i] = log(o[i]);
}
/* cummax/cummin: a later equal value (or a later NaN after a NaN) takes the index. */
static void cumext(const double *v, int64_t n, double *val, double *idx, bool mx) {
    double cur = 0;
    int64_t at = 0;
    for (int64_t i = 0; i < n; i++) {
        if (i == 0 || isnan(v[i]) || (!isnan(cur) && (mx ? v[i] >= cur : v[i] <= cur)))
            cur = v[i], at = i;
        if (val)
            val[i] = cur;
        if (idx)
            idx[i] = (double)at;
    }
}
static void s_cummax_v(const double *v, int64_t n, double *o) { cumext(v, n, o, NULL, true); }
static void s_cummax_i(const double *v, int64_t n, double *o) { cumext(v, n, NULL, o, true); }
static void s_cummin_v(const double *v, int64_t n, double *o) { cumext(v, n, o, NULL, false); }
static void s_cummin_i(const double *v, int64_t n, double *o) { cumext(v, n, NULL, o, false); }

#define ALL (CT_DTS_ALL)
#define NUM (CT_DTS_FLOAT | CT_DTS_INT)
#define CMP (ALL & ~CT_DT(CT_U64))
#define CMP_NO_BOOL (CMP & ~CT_DT(CT_BOOL)) /* argmax/argmin refuse bool, as PyTorch */
#define FLT CT_DTS_FLOAT

static const ct_opinfo_red red_infos[] = {
    {"sum", a_sum, true, r_sum, .dtypes = ALL, .out = CT_RED_OUT_LONG, .lo = -9, .hi = 9, .dtype_arg = CT_F64},
    {"nansum", a_nansum, true, r_nansum, .dtypes = ALL, .out = CT_RED_OUT_LONG, .lo = -9, .hi = 9, .nan_fraction = 0.2},
    {"mean", a_mean, true, r_mean, .dtypes = FLT, .lo = -9, .hi = 9, .dtype_arg = CT_F64},
    {"nanmean", a_nanmean, true, r_nanmean, .dtypes = FLT, .lo = -9, .hi = 9, .nan_fraction = 0.2},
    {"prod", a_prod, true, r_prod, .dtypes = ALL, .out = CT_RED_OUT_LONG, .lo = -1.4, .hi = 1.4,
     .integer_inputs = true, .dtype_arg = CT_F64},
    {"amax", a_amax, true, r_ext, .param = 1, .dtypes = CMP, .lo = -9, .hi = 9, .nan_fraction = 0.02,
     .no_identity = true},
    {"amin", a_amin, true, r_ext, .param = -1, .dtypes = CMP, .lo = -9, .hi = 9, .no_identity = true},
    {"logsumexp", a_logsumexp, true, r_logsumexp, .dtypes = ALL & ~CT_DT(CT_U64), .out = CT_RED_OUT_FLOAT, .lo = -5,
     .hi = 5, .tol_scale = 2},
    {"all", a_all, true, r_all, .dtypes = ALL, .out = CT_RED_OUT_BOOL, .lo = 0, .hi = 1.2, .integer_inputs = true},
    {"any", a_any, true, r_any, .dtypes = ALL, .out = CT_RED_OUT_BOOL, .lo = -0.3, .hi = 0.3, .integer_inputs = true},
    {"count_nonzero", a_count_nonzero, false, r_count, .dtypes = ALL, .out = CT_RED_OUT_INT64, .lo = -1, .hi = 1,
     .integer_inputs = true, .no_keepdim = true},
    {"max", a_max, false, r_ext, .param = 1, .full_only = true, .dtypes = CMP, .lo = -9, .hi = 9,
     .nan_fraction = 0.01, .no_identity = true},
    {"min", a_min, false, r_ext, .param = -1, .full_only = true, .dtypes = CMP, .lo = -9, .hi = 9,
     .no_identity = true},
    {"argmax", a_argmax, false, r_argext, .param = 1, .full_only = true, .dtypes = CMP_NO_BOOL, .out = CT_RED_OUT_INT64,
     .lo = -3, .hi = 3, .integer_inputs = true, .no_identity = true},
    {"argmin", a_argmin, false, r_argext, .param = -1, .full_only = true, .dtypes = CMP_NO_BOOL, .out = CT_RED_OUT_INT64,
     .lo = -3, .hi = 3, .integer_inputs = true, .nan_fraction = 0.01, .no_identity = true},
    {"argmax_dim", a_argmax_dim, true, r_argext, .param = 1, .single_dim = true, .dtypes = CMP_NO_BOOL,
     .out = CT_RED_OUT_INT64, .lo = -3, .hi = 3, .integer_inputs = true, .nan_fraction = 0.05, .no_identity = true},
    {"argmin_dim", a_argmin_dim, true, r_argext, .param = -1, .single_dim = true, .dtypes = CMP_NO_BOOL,
     .out = CT_RED_OUT_INT64, .lo = -3, .hi = 3, .integer_inputs = true, .no_identity = true},
    {"max_dim.values", a_max_values, true, r_ext, .param = 1, .single_dim = true, .dtypes = CMP, .lo = -9, .hi = 9,
     .nan_fraction = 0.05, .no_identity = true},
    {"max_dim.indices", a_max_indices, true, r_argext, .param = 1, .single_dim = true, .dtypes = CMP,
     .out = CT_RED_OUT_INT64, .lo = -3, .hi = 3, .integer_inputs = true, .nan_fraction = 0.05, .no_identity = true},
    {"min_dim.values", a_min_values, true, r_ext, .param = -1, .single_dim = true, .dtypes = CMP, .lo = -9, .hi = 9,
     .no_identity = true},
    {"min_dim.indices", a_min_indices, true, r_argext, .param = -1, .single_dim = true, .dtypes = CMP,
     .out = CT_RED_OUT_INT64, .lo = -3, .hi = 3, .integer_inputs = true, .no_identity = true},
    {"var", a_var, true, r_var, .param = 1, .dtypes = FLT, .lo = -9, .hi = 9, .tol_scale = 4},
    {"std", a_std, true, r_std, .param = 0, .dtypes = FLT, .lo = -9, .hi = 9, .tol_scale = 4},
    {"var_mean.var", a_var_mean_0, false, r_var, .param = 1, .dtypes = FLT, .lo = -9, .hi = 9, .tol_scale = 4},
    {"var_mean.mean", a_var_mean_1, false, r_mean, .dtypes = FLT, .lo = -9, .hi = 9},
    {"std_mean.std", a_std_mean_0, false, r_std, .param = 2, .dtypes = FLT, .lo = -9, .hi = 9, .tol_scale = 4},
    {"norm.2", a_norm_2, true, r_norm, .param = 2, .dtypes = FLT, .lo = -9, .hi = 9, .dtype_arg = CT_F64},
    {"norm.3", a_norm_3, true, r_norm, .param = 3, .dtypes = FLT, .lo = -9, .hi = 9, .tol_scale = 4},
    {"norm.inf", a_norm_inf, true, r_norm, .param = INFINITY, .dtypes = FLT, .lo = -9, .hi = 9, .no_identity = true},
    {"linalg_vector_norm.1", a_linalg_vector_norm_1, true, r_norm, .param = 1, .dtypes = FLT, .lo = -9, .hi = 9,
     .dtype_arg = CT_F64},
    {"linalg_vector_norm.0.5", a_linalg_vector_norm_half, true, r_norm, .param = 0.5, .dtypes = FLT, .lo = -9,
     .hi = 9, .tol_scale = 8},
    {"linalg_vector_norm.-inf", a_linalg_vector_norm_ninf, true, r_norm, .param = -INFINITY, .dtypes = FLT,
     .lo = -9, .hi = 9, .no_identity = true},
    {"linalg_vector_norm.0", a_linalg_vector_norm_0, true, r_norm, .param = 0, .dtypes = FLT, .lo = -2, .hi = 2,
     .integer_inputs = true},
    {"linalg__powsum.2", a_linalg__powsum_2, true, r_powsum, .param = 2, .dtypes = FLT, .lo = -9, .hi = 9,
     .dtype_arg = CT_F64},
    {"linalg__powsum.3", a_linalg__powsum_3, true, r_powsum, .param = 3, .dtypes = FLT, .lo = -9, .hi = 9,
     .tol_scale = 4},
    {"cumsum", a_cumsum, true, .ref_scan = s_cumsum, .dtypes = ALL, .out = CT_RED_OUT_LONG, .lo = -9, .hi = 9,
     .dtype_arg = CT_F64, .tol_scale = 4},
    {"cumprod", a_cumprod, true, .ref_scan = s_cumprod, .dtypes = ALL, .out = CT_RED_OUT_LONG, .lo = -1.4, .hi = 1.4,
     .integer_inputs = true},
    {"softmax", a_softmax, true, .ref_scan = s_softmax, .dtypes = FLT, .lo = -9, .hi = 9, .dtype_arg = CT_F64,
     .tol_scale = 2},
    {"log_softmax", a_log_softmax, true, .ref_scan = s_log_softmax, .dtypes = FLT, .lo = -9, .hi = 9,
     .dtype_arg = CT_F64, .tol_scale = 2},
    {"cummax.values", a_cummax_0, false, .ref_scan = s_cummax_v, .dtypes = CMP, .lo = -3, .hi = 3,
     .integer_inputs = true, .nan_fraction = 0.1},
    {"cummax.indices", a_cummax_1, false, .ref_scan = s_cummax_i, .dtypes = CMP, .out = CT_RED_OUT_INT64, .lo = -3,
     .hi = 3, .integer_inputs = true, .nan_fraction = 0.1},
    {"cummin.values", a_cummin_0, false, .ref_scan = s_cummin_v, .dtypes = CMP, .lo = -3, .hi = 3,
     .integer_inputs = true},
    {"cummin.indices", a_cummin_1, false, .ref_scan = s_cummin_i, .dtypes = CMP, .out = CT_RED_OUT_INT64, .lo = -3,
     .hi = 3, .integer_inputs = true},
};

static void test_opinfo_reduce(void **state) { ct_opinfo_reduce_run(*state); }

int main(void) {
    static const struct CMUnitTest fixed[] = {
        cmocka_unit_test(test_sum_basic),
        cmocka_unit_test(test_sum_errors),
        cmocka_unit_test(test_sum_accuracy_threads),
        cmocka_unit_test(test_golden),
        cmocka_unit_test(test_threads_deterministic),
        cmocka_unit_test(test_powsum),
        cmocka_unit_test(test_op_errors),
        cmocka_unit_test(test_numerics),
    };
    enum { NINFO = sizeof red_infos / sizeof red_infos[0], NFIXED = sizeof fixed / sizeof fixed[0] };
    struct CMUnitTest tests[NINFO + NFIXED];
    size_t n = 0;
    for (size_t i = 0; i < NINFO; i++)
        tests[n++] = (struct CMUnitTest){red_infos[i].name, test_opinfo_reduce, NULL, NULL, (void *)&red_infos[i]};
    for (size_t i = 0; i < NFIXED; i++)
        tests[n++] = fixed[i];
    /* CT_TEST_FILTER=pattern runs a subset (cmocka's wildcards), for timing and debugging. */
    if (getenv("CT_TEST_FILTER"))
        cmocka_set_test_filter(getenv("CT_TEST_FILTER"));
    return _cmocka_run_group_tests("reduce", tests, n, NULL, NULL);
}
