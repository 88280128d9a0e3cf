/* Indexing ops against PyTorch 1.13: scatter, scatter_reduce, index_copy, index_fill,
 * index/index_put, masked_select, masked_scatter, take, kthvalue, unique,
 * unique_consecutive, pad, meshgrid, einsum.
 *
 * tests/data/indexing_golden.txt (tests/golden/gen_indexing.py) holds each case's
 * inputs and PyTorch's outputs or error message. Every case runs on contiguous
 * inputs, on strided copies of them, in place where the op has an in-place form, and
 * on META (shapes and dtypes, or the refusal for ops whose shape depends on data). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#define MAXF 16

/* ------------------------------------------------------------------ parsing */

/* "float32[2,3]=0.0 1.0 ..." -> a contiguous CPU tensor; "_" -> NULL (*is_none set). */
static ct_tensor *parse_tensor(const char *s, bool *is_none) {
    *is_none = strcmp(s, "_") == 0;
    if (*is_none)
        return NULL;
    char dname[16];
    const char *lb = strchr(s, '[');
    assert_non_null(lb);
    size_t dl = (size_t)(lb - s);
    assert_true(dl < sizeof dname);
    memcpy(dname, s, dl);
    dname[dl] = '\0';
    ct_dtype dt = ct_dtype_from_name(dname);
    assert_true(dt != CT_DTYPE_UNDEFINED);
    int64_t shape[8];
    int nd = 0;
    const char *p = lb + 1;
    while (*p != ']') {
        char *end;
        shape[nd++] = strtoll(p, &end, 10);
        p = end;
        if (*p == ',')
            p++;
    }
    assert_true(p[1] == '=');
    p += 2;
    int64_t n = 1;
    for (int i = 0; i < nd; i++)
        n *= shape[i];
    double *vals = calloc((size_t)(n > 0 ? n : 1), sizeof *vals);
    for (int64_t i = 0; i < n; i++) {
        char *end;
        vals[i] = strtod(p, &end);
        assert_true(end != p);
        p = end;
    }
    ct_tensor *d = ct_from_data(vals, shape, nd, CT_F64);
    free(vals);
    ct_tensor *t = ct_to_dtype(d, dt);
    CT_ASSERT_OK(t);
    return t;
}

/* The same values in a non-contiguous tensor (every other element of a wider one). */
static ct_tensor *strided_copy(const ct_tensor *t) {
    if (!t)
        return NULL;
    int nd = ct_tensor_dim(t);
    int64_t shape[9];
    memcpy(shape, ct_tensor_shape(t), sizeof(int64_t) * (size_t)nd);
    shape[nd] = 2;
    ct_tensor *wide = ct_zeros(shape, nd + 1, ct_tensor_dtype(t), CT_CPU);
    ct_tensor *v = ct_select(wide, nd, 1);
    CT_ASSERT_OK(ct_copy_(v, t));
    return v;
}

static void expect_equal(const ct_tensor *got, const ct_tensor *want, const char *line, const char *what) {
    if (!got)
        fail_msg("%s: %s failed: %s", line, what, ct_last_error());
    if (ct_tensor_dtype(got) != ct_tensor_dtype(want))
        fail_msg("%s: %s dtype %s, want %s", line, what, ct_dtype_name(ct_tensor_dtype(got)),
                 ct_dtype_name(ct_tensor_dtype(want)));
    int nd = ct_tensor_dim(want);
    bool same = ct_tensor_dim(got) == nd;
    for (int i = 0; same && i < nd; i++)
        same = ct_tensor_shape(got)[i] == ct_tensor_shape(want)[i];
    if (!same)
        fail_msg("%s: %s has the wrong shape (%d dims)", line, what, ct_tensor_dim(got));
    if (ct_tensor_device(got).type == CT_DEVICE_META)
        return;
    for (int64_t i = 0; i < ct_tensor_numel(want); i++) {
        double g = ct_test_at(got, i), w = ct_test_at(want, i);
        if (!(g == w || (isnan(g) && isnan(w))))
            fail_msg("%s: %s element %lld is %.17g, want %.17g", line, what, (long long)i, g, w);
    }
}

/* Splits s in place at each sep; returns the number of fields. */
static int split(char *s, char sep, char **fields, int cap) {
    int n = 0;
    fields[n++] = s;
    for (char *p = s; *p && n < cap; p++)
        if (*p == sep) {
            *p = '\0';
            fields[n++] = p + 1;
        }
    return n;
}

/* ------------------------------------------------------------------ running a case */

typedef struct {
    char op[32];
    char params[MAXF][64];
    int nparams;
    ct_tensor *in[MAXF];
    int nin;
    ct_tensor *out[MAXF];
    int nout;
    const char *error; /* PyTorch's message, or NULL */
} golden_case;

static ct_scalar parse_scalar(const char *s) {
    if (strchr(s, '.') || strchr(s, 'e') || strchr(s, 'n'))
        return ct_scalar_float(strtod(s, NULL));
    return ct_scalar_int(strtoll(s, NULL, 10));
}

static int64_t pint(const golden_case *c, int i) { return strtoll(c->params[i], NULL, 10); }

/* Runs the op on inputs in[] (self may be replaced by an in-place target); writes the
 * outputs and returns how many (-1 on error). */
static int run_op(const golden_case *c, ct_tensor *const *in, bool inplace, ct_tensor **res) {
    const char *op = c->op;
    ct_tensor *self = in[0];
    if (strcmp(op, "scatter") == 0) {
        res[0] = inplace ? ct_scatter_(self, pint(c, 0), in[1], in[2]) : ct_scatter(self, pint(c, 0), in[1], in[2]);
    } else if (strcmp(op, "scatter_value") == 0) {
        ct_scalar v = parse_scalar(c->params[1]);
        res[0] = inplace ? ct_scatter_value_(self, pint(c, 0), in[1], v) : ct_scatter_value(self, pint(c, 0), in[1], v);
    } else if (strcmp(op, "scatter_reduce") == 0) {
        bool inc = pint(c, 2) != 0;
        res[0] = inplace ? ct_scatter_reduce_(self, pint(c, 0), in[1], in[2], c->params[1], inc)
                         : ct_scatter_reduce(self, pint(c, 0), in[1], in[2], c->params[1], inc);
    } else if (strcmp(op, "index_copy") == 0) {
        res[0] = inplace ? ct_index_copy_(self, pint(c, 0), in[1], in[2]) : ct_index_copy(self, pint(c, 0), in[1], in[2]);
    } else if (strcmp(op, "index_fill") == 0) {
        ct_scalar v = parse_scalar(c->params[1]);
        res[0] = inplace ? ct_index_fill_(self, pint(c, 0), in[1], v) : ct_index_fill(self, pint(c, 0), in[1], v);
    } else if (strcmp(op, "index") == 0) {
        res[0] = ct_index(self, (const ct_tensor *const *)in + 1, (int)pint(c, 0));
    } else if (strcmp(op, "index_put") == 0) {
        const ct_tensor *const *idx = (const ct_tensor *const *)in + 2;
        int n = (int)pint(c, 0);
        bool acc = pint(c, 1) != 0;
        res[0] = inplace ? ct_index_put_(self, idx, n, in[1], acc) : ct_index_put(self, idx, n, in[1], acc);
    } else if (strcmp(op, "masked_select") == 0) {
        res[0] = ct_masked_select(self, in[1]);
    } else if (strcmp(op, "masked_scatter") == 0) {
        res[0] = inplace ? ct_masked_scatter_(self, in[1], in[2]) : ct_masked_scatter(self, in[1], in[2]);
    } else if (strcmp(op, "take") == 0) {
        res[0] = ct_take(self, in[1]);
    } else if (strcmp(op, "kthvalue") == 0) {
        res[0] = ct_kthvalue(self, pint(c, 0), pint(c, 1), pint(c, 2) != 0, &res[1]);
        return res[0] ? 2 : -1;
    } else if (strcmp(op, "unique") == 0) {
        res[0] = ct_unique(self, true, &res[1], &res[2]);
        return res[0] ? 3 : -1;
    } else if (strcmp(op, "unique_consecutive") == 0) {
        res[0] = ct_unique_consecutive(self, &res[1], &res[2]);
        return res[0] ? 3 : -1;
    } else if (strcmp(op, "pad") == 0) {
        int64_t pads[16];
        int np = c->nparams - 2;
        for (int i = 0; i < np; i++)
            pads[i] = pint(c, 2 + i);
        res[0] = ct_pad(self, pads, np, c->params[0], strtod(c->params[1], NULL));
    } else if (strcmp(op, "meshgrid") == 0) {
        if (ct_meshgrid((const ct_tensor *const *)in, c->nin, c->params[0], res) != CT_OK)
            return -1;
        return c->nin;
    } else if (strcmp(op, "einsum") == 0) {
        char eq[64];
        snprintf(eq, sizeof eq, "%s", c->params[0]);
        for (char *q = eq; *q; q++)
            if (*q == '_')
                *q = ' ';
        res[0] = ct_einsum(eq, (const ct_tensor *const *)in, c->nin);
    } else {
        fail_msg("unknown op %s", op);
    }
    return res[0] ? 1 : -1;
}

static bool has_inplace(const char *op) {
    static const char *const ops[] = {"scatter", "scatter_value", "scatter_reduce", "index_copy", "index_fill",
                                      "index_put", "masked_scatter"};
    for (size_t i = 0; i < sizeof ops / sizeof *ops; i++)
        if (strcmp(op, ops[i]) == 0)
            return true;
    return false;
}

/* Ops (or cases) whose result shape depends on the data refuse META. */
static bool meta_refused(const golden_case *c) {
    if (!strcmp(c->op, "masked_select") || !strcmp(c->op, "unique") || !strcmp(c->op, "unique_consecutive"))
        return true;
    int first = !strcmp(c->op, "index") ? 1 : !strcmp(c->op, "index_put") ? 2 : c->nin;
    for (int i = first; i < c->nin; i++)
        if (c->in[i] && (ct_tensor_dtype(c->in[i]) == CT_BOOL || ct_tensor_dtype(c->in[i]) == CT_U8))
            return true;
    return false;
}

static void run_case(golden_case *c, const char *line) {
    ct_tensor *in[MAXF], *res[MAXF];
    char what[64];
    /* 1. contiguous inputs, 2. strided inputs */
    for (int pass = 0; pass < 2; pass++) {
        for (int i = 0; i < c->nin; i++)
            in[i] = pass ? strided_copy(c->in[i]) : c->in[i];
        memset(res, 0, sizeof res);
        int n = run_op(c, in, false, res);
        snprintf(what, sizeof what, "%s", pass ? "strided" : "contiguous");
        if (c->error) {
            if (n >= 0)
                fail_msg("%s: succeeded (%s) but PyTorch raised: %s", line, what, c->error);
            if (!strstr(ct_last_error(), c->error))
                fail_msg("%s: error '%s' does not contain PyTorch's '%s'", line, ct_last_error(), c->error);
            ct_clear_error();
            continue;
        }
        if (n != c->nout)
            fail_msg("%s: %s gave %d outputs, want %d (%s)", line, what, n, c->nout, ct_last_error());
        for (int i = 0; i < n; i++)
            expect_equal(res[i], c->out[i], line, what);
        /* 3. in place, on a clone of self (contiguous and strided) */
        if (has_inplace(c->op)) {
            ct_tensor *self = pass ? strided_copy(c->in[0]) : ct_clone(c->in[0]);
            in[0] = self;
            memset(res, 0, sizeof res);
            n = run_op(c, in, true, res);
            snprintf(what, sizeof what, "in place (%s)", pass ? "strided" : "contiguous");
            assert_int_equal(n, 1);
            assert_ptr_equal(res[0], self); /* in-place ops return self */
            expect_equal(self, c->out[0], line, what);
        }
    }
    /* 4. META */
    for (int i = 0; i < c->nin; i++)
        in[i] = c->in[i] ? ct_to_device(c->in[i], CT_META) : NULL;
    memset(res, 0, sizeof res);
    int n = run_op(c, in, false, res);
    if (c->error)
        return; /* data-dependent errors (bounds) cannot show on META */
    if (meta_refused(c)) {
        if (n >= 0)
            fail_msg("%s: META should be refused", line);
        assert_int_equal(ct_last_status(), CT_ERROR_NOT_IMPLEMENTED);
        assert_non_null(strstr(ct_last_error(), "depend"));
        ct_clear_error();
        return;
    }
    if (n != c->nout)
        fail_msg("%s: META gave %d outputs (%s)", line, n, ct_last_error());
    for (int i = 0; i < n; i++) {
        assert_int_equal(ct_tensor_device(res[i]).type, CT_DEVICE_META);
        expect_equal(res[i], c->out[i], line, "META");
    }
}

static void test_golden(void **state) {
    (void)state;
    ct_clear_error();
    FILE *f = fopen(CT_TEST_DATA_DIR "/indexing_golden.txt", "r");
    assert_non_null(f);
    static char line[1 << 16], copy[1 << 16];
    int cases = 0;
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        if (!line[0])
            continue;
        memcpy(copy, line, sizeof line);
        ct_scope_begin();
        golden_case c;
        memset(&c, 0, sizeof c);
        char *fields[3 * MAXF];
        int nf = split(copy, '|', fields, 3 * MAXF);
        snprintf(c.op, sizeof c.op, "%s", fields[0]);
        char *words[MAXF];
        int nw = split(fields[1], ' ', words, MAXF);
        for (int k = 0; k < nw; k++)
            if (*words[k])
                snprintf(c.params[c.nparams++], sizeof c.params[0], "%s", words[k]);
        int i = 2;
        for (; i < nf && strcmp(fields[i], "=>") != 0; i++) {
            bool none;
            c.in[c.nin++] = parse_tensor(fields[i], &none);
        }
        assert_true(i < nf);
        for (i++; i < nf; i++) {
            if (fields[i][0] == '!') {
                c.error = fields[i] + 1;
                break;
            }
            bool none;
            c.out[c.nout++] = parse_tensor(fields[i], &none);
        }
        char label[160];
        snprintf(label, sizeof label, "%.150s", line);
        run_case(&c, label);
        ct_scope_end();
        cases++;
    }
    fclose(f);
    assert_true(cases > 250);
}

/* ------------------------------------------------------------------ hand-written checks */

static ct_tensor *iv(const int64_t *v, int64_t n) { return ct_from_data(v, &n, 1, CT_I64); }
#define IV(...) iv((const int64_t[]){__VA_ARGS__}, (int64_t)(sizeof((const int64_t[]){__VA_ARGS__}) / sizeof(int64_t)))

static ct_tensor *grid(void) {
    return ct_view(ct_arange(ct_scalar_int(0), ct_scalar_int(12), ct_scalar_int(1), CT_F32, CT_CPU), CT_SHAPE(3, 4));
}

static void test_null_and_bad_arguments(void **state) {
    (void)state;
    ct_clear_error();
    ct_scope_begin();
    ct_tensor *x = grid(), *i = ct_zeros(CT_SHAPE(1, 4), CT_I64, CT_CPU), *src = ct_ones(CT_SHAPE(1, 4), CT_F32, CT_CPU);
    ct_tensor *m = ct_zeros(CT_SHAPE(3, 4), CT_BOOL, CT_CPU), *o = NULL;
    CT_ASSERT_ERR(ct_scatter(NULL, 0, i, src) != NULL, CT_ERROR_NULL_ARGUMENT, "scatter");
    CT_ASSERT_ERR(ct_scatter(x, 0, NULL, src) != NULL, CT_ERROR_NULL_ARGUMENT, "scatter");
    CT_ASSERT_ERR(ct_scatter(x, 0, i, NULL) != NULL, CT_ERROR_NULL_ARGUMENT, "scatter");
    CT_ASSERT_ERR(ct_scatter_(NULL, 0, i, src) != NULL, CT_ERROR_NULL_ARGUMENT, "scatter");
    CT_ASSERT_ERR(ct_scatter_value(x, 0, NULL, ct_scalar_int(1)) != NULL, CT_ERROR_NULL_ARGUMENT, "scatter");
    CT_ASSERT_ERR(ct_scatter_value_(NULL, 0, i, ct_scalar_int(1)) != NULL, CT_ERROR_NULL_ARGUMENT, "scatter");
    CT_ASSERT_ERR(ct_scatter_reduce(x, 0, i, src, "max", true) != NULL, CT_ERROR_VALUE,
                  "reduce argument must be either sum, prod, mean, amax or amin");
    CT_ASSERT_ERR(ct_scatter_reduce_(x, 0, i, src, NULL, true) != NULL, CT_ERROR_VALUE, "reduce argument");
    CT_ASSERT_ERR(ct_scatter_reduce(NULL, 0, i, src, "sum", true) != NULL, CT_ERROR_NULL_ARGUMENT, "scatter_reduce");
    CT_ASSERT_ERR(ct_index_copy(x, 0, NULL, src) != NULL, CT_ERROR_NULL_ARGUMENT, "index_copy");
    CT_ASSERT_ERR(ct_index_copy_(NULL, 0, i, src) != NULL, CT_ERROR_NULL_ARGUMENT, "index_copy");
    CT_ASSERT_ERR(ct_index_copy(x, 2, IV(0), src) != NULL, CT_ERROR_INDEX, "Dimension out of range");
    CT_ASSERT_ERR(ct_index_copy(x, 0, IV(0, 1), ct_ones(NULL, 0, CT_F32, CT_CPU)) != NULL, CT_ERROR_INDEX,
                  "When source is scalar, index should have one element (got 2)");
    CT_ASSERT_ERR(ct_index_copy(x, 0, IV(1), ct_ones(NULL, 0, CT_F32, CT_CPU)) != NULL, CT_ERROR_VALUE,
                  "must have same slice shapes. Destination slice shape: [4] and source slice shape: []");
    {   /* a scalar source into a 1-D tensor fills one element */
        ct_tensor *v = ct_index_copy(ct_zeros(CT_SHAPE(3), CT_F32, CT_CPU), 0, IV(1),
                                     ct_full(NULL, 0, ct_scalar_float(5), CT_F32, CT_CPU));
        CT_ASSERT_OK(v);
        assert_true(((const float *)ct_tensor_data(v))[1] == 5.0f && ((const float *)ct_tensor_data(v))[0] == 0.0f);
    }
    CT_ASSERT_ERR(ct_index_copy(x, 0, IV(0), ct_ones(CT_SHAPE(1, 1, 4), CT_F32, CT_CPU)) != NULL, CT_ERROR_INDEX,
                  "their dimensionality must match");
    CT_ASSERT_ERR(ct_index_fill(NULL, 0, i, ct_scalar_int(1)) != NULL, CT_ERROR_NULL_ARGUMENT, "index_fill");
    CT_ASSERT_ERR(ct_index_fill_(x, 0, NULL, ct_scalar_int(1)) != NULL, CT_ERROR_NULL_ARGUMENT, "index_fill");
    CT_ASSERT_ERR(ct_index_fill(ct_zeros(CT_SHAPE(2), CT_I8, CT_CPU), 0, IV(0), ct_scalar_int(1000)) != NULL,
                  CT_ERROR_VALUE, NULL);
    CT_ASSERT_ERR(ct_index_fill(x, 3, IV(0), ct_scalar_int(1)) != NULL, CT_ERROR_INDEX, "Dimension out of range");
    const ct_tensor *idx[1] = {IV(0)};
    CT_ASSERT_ERR(ct_index(NULL, idx, 1) != NULL, CT_ERROR_NULL_ARGUMENT, "index");
    CT_ASSERT_ERR(ct_index(x, NULL, 1) != NULL, CT_ERROR_VALUE, "list");
    CT_ASSERT_ERR(ct_index(x, idx, -1) != NULL, CT_ERROR_VALUE, "list");
    CT_ASSERT_ERR(ct_index_put(x, idx, 1, NULL, false) != NULL, CT_ERROR_NULL_ARGUMENT, "index_put");
    CT_ASSERT_ERR(ct_index_put_(NULL, idx, 1, src, false) != NULL, CT_ERROR_NULL_ARGUMENT, "index_put");
    CT_ASSERT_ERR(ct_index_put(x, NULL, 2, src, false) != NULL, CT_ERROR_VALUE, "list");
    const ct_tensor *scalar_mask[1] = {ct_ones(NULL, 0, CT_BOOL, CT_CPU)};
    CT_ASSERT_ERR(ct_index(x, scalar_mask, 1) != NULL, CT_ERROR_NOT_IMPLEMENTED, "0-dimensional masks");
    CT_ASSERT_ERR(ct_masked_select(NULL, m) != NULL, CT_ERROR_NULL_ARGUMENT, "masked_select");
    CT_ASSERT_ERR(ct_masked_select(x, NULL) != NULL, CT_ERROR_NULL_ARGUMENT, "masked_select");
    CT_ASSERT_ERR(ct_masked_scatter(x, m, NULL) != NULL, CT_ERROR_NULL_ARGUMENT, "masked_scatter");
    CT_ASSERT_ERR(ct_masked_scatter_(NULL, m, src) != NULL, CT_ERROR_NULL_ARGUMENT, "masked_scatter");
    CT_ASSERT_ERR(ct_masked_scatter(x, ct_zeros(CT_SHAPE(3, 4), CT_F32, CT_CPU), src) != NULL, CT_ERROR_TYPE,
                  "masked_scatter_ only supports boolean masks");
    CT_ASSERT_ERR(ct_masked_scatter(x, m, ct_ones(CT_SHAPE(12), CT_F64, CT_CPU)) != NULL, CT_ERROR_TYPE,
                  "masked_scatter: expected self and source to have same dtypes but got Float and Double");
    CT_ASSERT_ERR(ct_masked_scatter_(ct_zeros(CT_SHAPE(4), CT_F32, CT_CPU), m, src) != NULL, CT_ERROR_VALUE,
                  "cannot be broadcast");
    CT_ASSERT_ERR(ct_take(NULL, i) != NULL, CT_ERROR_NULL_ARGUMENT, "take");
    CT_ASSERT_ERR(ct_take(x, NULL) != NULL, CT_ERROR_NULL_ARGUMENT, "take");
    CT_ASSERT_ERR(ct_kthvalue(NULL, 1, 0, false, &o) != NULL, CT_ERROR_NULL_ARGUMENT, "kthvalue");
    CT_ASSERT_ERR(ct_unique(NULL, true, &o, NULL) != NULL, CT_ERROR_NULL_ARGUMENT, "unique");
    CT_ASSERT_ERR(ct_unique_consecutive(NULL, NULL, NULL) != NULL, CT_ERROR_NULL_ARGUMENT, "unique_consecutive");
    CT_ASSERT_ERR(ct_pad(NULL, CT_INDEX(1, 1), 2, "constant", 0) != NULL, CT_ERROR_NULL_ARGUMENT, "pad");
    CT_ASSERT_ERR(ct_pad(x, NULL, 2, "constant", 0) != NULL, CT_ERROR_VALUE, "invalid pad list");
    CT_ASSERT_ERR(ct_pad(x, CT_INDEX(1, 1), 2, "edge", 0) != NULL, CT_ERROR_NOT_IMPLEMENTED,
                  "Unrecognised padding mode edge");
    CT_ASSERT_ERR(ct_pad(x, CT_INDEX(1, 1), 2, NULL, 0) != NULL, CT_ERROR_NOT_IMPLEMENTED, "Unrecognised padding mode");
    CT_ASSERT_ERR(ct_pad(x, CT_INDEX(1, 1), 2, "reflect", 2.0) != NULL, CT_ERROR_VALUE,
                  "Padding mode \"reflect\" doesn't take in value argument");
    CT_ASSERT_ERR(ct_pad(ct_view(x, CT_SHAPE(1, 3, 4)), CT_INDEX(-3, -2), 2, "constant", 0) != NULL, CT_ERROR_VALUE,
                  "The input size 4, plus negative padding -3 and -2 resulted in a negative output size");
    CT_ASSERT_ERR(ct_pad(ct_view(x, CT_SHAPE(1, 3, 4)), CT_INDEX(0, 3, 3, 0), 4, "reflect", 0) != NULL, CT_ERROR_VALUE,
                  "Padding size should be less than the corresponding input dimension, but got: padding (3, 0) at "
                  "dimension 1 of input [1, 3, 4]");
    CT_ASSERT_ERR(ct_pad(ct_view(x, CT_SHAPE(1, 3, 4)), CT_INDEX(-5, 1), 2, "circular", 0) != NULL, CT_ERROR_VALUE,
                  "Negative padding value is resulting in an empty dimension");
    /* cropping the whole dim away and padding on the other side leaves nothing to wrap */
    CT_ASSERT_ERR(ct_pad(ct_view(x, CT_SHAPE(1, 4, 3)), CT_INDEX(2, -3), 2, "circular", 0) != NULL, CT_ERROR_VALUE,
                  "Negative padding value is resulting in an empty dimension");
    CT_ASSERT_ERR(ct_pad(ct_view(x, CT_SHAPE(1, 4, 3)), CT_INDEX(1, 0, -4, 2), 4, "circular", 0) != NULL,
                  CT_ERROR_VALUE, "Negative padding value is resulting in an empty dimension");
    CT_ASSERT_ERR(ct_pad(ct_zeros(CT_SHAPE(1, 3, 0), CT_F32, CT_CPU), CT_INDEX(1, 1), 2, "replicate", 0) != NULL,
                  CT_ERROR_VALUE, "non-empty");
    ct_tensor *outs[4];
    const ct_tensor *two[2] = {IV(1, 2), NULL};
    CT_ASSERT_ERR(ct_meshgrid(two, 2, "ij", outs) == CT_OK, CT_ERROR_NULL_ARGUMENT, "meshgrid");
    CT_ASSERT_ERR(ct_meshgrid(two, 0, "ij", outs) == CT_OK, CT_ERROR_VALUE, "meshgrid expects a non-empty TensorList");
    CT_ASSERT_ERR(ct_meshgrid(NULL, 2, "ij", outs) == CT_OK, CT_ERROR_VALUE, "non-empty TensorList");
    CT_ASSERT_ERR(ct_meshgrid(two, 1, "ij", NULL) == CT_OK, CT_ERROR_NULL_ARGUMENT, "meshgrid");
    const ct_tensor *mat[1] = {x};
    CT_ASSERT_ERR(ct_meshgrid(mat, 1, "ij", outs) == CT_OK, CT_ERROR_VALUE, "Expected 0D or 1D tensor");
    const ct_tensor *devs[2] = {IV(1), ct_zeros(CT_SHAPE(2), CT_I64, CT_META)};
    CT_ASSERT_ERR(ct_meshgrid(devs, 2, "ij", outs) == CT_OK, CT_ERROR_DEVICE, "same device");
    /* a kernel never reads another backend's memory */
    ct_tensor *mi = ct_zeros(CT_SHAPE(1, 4), CT_I64, CT_META);
    CT_ASSERT_ERR(ct_scatter(x, 0, mi, src) != NULL, CT_ERROR_DEVICE, "found at least two devices, cpu and meta");
    CT_ASSERT_ERR(ct_take(x, mi) != NULL, CT_ERROR_DEVICE, "same device");
    const ct_tensor *meta_idx[2] = {NULL, ct_zeros(CT_SHAPE(2), CT_I64, CT_META)};
    CT_ASSERT_ERR(ct_index(x, meta_idx, 2) != NULL, CT_ERROR_DEVICE, "same device");
    CT_ASSERT_ERR(ct_index_put_(x, meta_idx, 2, src, true) != NULL, CT_ERROR_DEVICE, "same device");
    CT_ASSERT_ERR(ct_masked_select(x, ct_zeros(CT_SHAPE(4), CT_BOOL, CT_META)) != NULL, CT_ERROR_DEVICE, "same device");
    const ct_tensor *ops[2] = {x, NULL};
    CT_ASSERT_ERR(ct_einsum(NULL, ops, 1) != NULL, CT_ERROR_NULL_ARGUMENT, "einsum");
    CT_ASSERT_ERR(ct_einsum("ij,jk", ops, 2) != NULL, CT_ERROR_NULL_ARGUMENT, "einsum");
    CT_ASSERT_ERR(ct_einsum("ij", ops, 0) != NULL, CT_ERROR_VALUE, "at least one operand");
    CT_ASSERT_ERR(ct_einsum("ij->i..", ops, 1) != NULL, CT_ERROR_VALUE, "found '.' for output that is not part of any ellipsis");
    CT_ASSERT_ERR(ct_einsum("ij->...i...", ops, 1) != NULL, CT_ERROR_VALUE, "found '.' for output but an ellipsis");
    CT_ASSERT_ERR(ct_einsum("ij->i$", ops, 1) != NULL, CT_ERROR_VALUE, "invalid subscript given at index 5");
    CT_ASSERT_ERR(ct_einsum("ijk...->i", ops, 1) != NULL, CT_ERROR_VALUE, "is more than the number of dimensions (2)");
    CT_ASSERT_ERR(ct_einsum("abcdefghi", ops, 1) != NULL, CT_ERROR_VALUE, "does not match the number of dimensions");
    const ct_tensor *ell[2] = {ct_zeros(CT_SHAPE(2, 2, 3, 4), CT_F32, CT_CPU), ct_zeros(CT_SHAPE(5, 4, 2), CT_F32, CT_CPU)};
    CT_ASSERT_ERR(ct_einsum("...ij,...jk", ell, 2) != NULL, CT_ERROR_VALUE,
                  "einsum(): dimension 0 covered by ellipsis in operand 1 has size 5 which does not broadcast with "
                  "previously seen ellipsis with size 2 for the respective dimension");
    const ct_tensor *mixed[2] = {x, ct_ones(CT_SHAPE(4), CT_F64, CT_CPU)};
    CT_ASSERT_ERR(ct_einsum("ij,j->i", mixed, 2) != NULL, CT_ERROR_TYPE, "same dtype");
    const ct_tensor *bools[2] = {m, m};
    CT_ASSERT_ERR(ct_einsum("ij,ij->i", bools, 2) != NULL, CT_ERROR_TYPE, "bool");
    ct_scope_end();
}

static void test_inplace_and_views(void **state) {
    (void)state;
    ct_clear_error();
    ct_scope_begin();
    ct_tensor *x = ct_clone(grid());
    int64_t v0 = ct_tensor_version(x);
    ct_tensor *r = ct_index_fill_(x, 1, IV(0), ct_scalar_float(-1));
    assert_ptr_equal(r, x);
    assert_true(ct_tensor_version(x) > v0); /* in-place writes bump the version */
    assert_true(ct_test_at(x, 4) == -1 && ct_test_at(x, 5) == 5);
    /* in place through a view writes the base */
    ct_tensor *col = ct_select(x, 1, 2); /* (3,), stride 4 */
    ct_scatter_value_(col, 0, IV(2, 0), ct_scalar_int(40));
    assert_true(ct_test_at(x, 2) == 40 && ct_test_at(x, 10) == 40 && ct_test_at(x, 6) == 6);
    const ct_tensor *idx[2] = {NULL, IV(3)};
    ct_index_put_(x, idx, 2, ct_full(CT_SHAPE(1), ct_scalar_int(7), CT_F32, CT_CPU), true);
    assert_true(ct_test_at(x, 3) == 10 && ct_test_at(x, 7) == 14 && ct_test_at(x, 11) == 18);
    /* a failing in-place op leaves self untouched */
    ct_tensor *before = ct_clone(x);
    assert_null(ct_index_copy_(x, 0, IV(0, 9), ct_ones(CT_SHAPE(2, 4), CT_F32, CT_CPU)));
    ct_clear_error();
    for (int64_t k = 0; k < 12; k++)
        assert_true(ct_test_at(x, k) == ct_test_at(before, k));
    /* out-of-place results never share self's storage; meshgrid results are views */
    ct_tensor *s = ct_scatter(x, 0, IV(0), ct_ones(CT_SHAPE(1), CT_F32, CT_CPU));
    assert_false(ct_tensor_shares_storage(s, x));
    ct_tensor *a = IV(1, 2, 3), *g[2];
    const ct_tensor *ab[2] = {a, IV(4, 5)};
    assert_int_equal(ct_meshgrid(ab, 2, NULL, g), CT_OK);
    assert_true(ct_tensor_shares_storage(g[0], a));
    CT_ASSERT_SHAPE(g[0], 3, 2);
    ct_scope_end();
}

static void test_unique_unsorted_and_optional_outputs(void **state) {
    (void)state;
    ct_clear_error();
    ct_scope_begin();
    ct_tensor *x = IV(3, 1, 3, 2);
    ct_tensor *u = ct_unique(x, false, NULL, NULL); /* sorted either way (docs/ops.md) */
    CT_ASSERT_SHAPE(u, 3);
    assert_true(ct_test_at(u, 0) == 1 && ct_test_at(u, 1) == 2 && ct_test_at(u, 2) == 3);
    ct_tensor *counts = NULL;
    u = ct_unique_consecutive(x, NULL, &counts);
    CT_ASSERT_SHAPE(counts, 4);
    /* dtypes beyond PyTorch 1.13's CPU kernels: float16 unique, int32 reflect pad */
    ct_tensor *h = ct_to_dtype(x, CT_F16), *inv = NULL;
    u = ct_unique(h, true, &inv, NULL);
    assert_int_equal(ct_tensor_dtype(u), CT_F16);
    assert_true(ct_test_at(inv, 0) == 2 && ct_test_at(inv, 3) == 1);
    /* uint64 above INT64_MAX orders as unsigned */
    const uint64_t big[4] = {UINT64_C(1) << 63, 5, UINT64_C(1) << 63, 7};
    ct_tensor *ub = ct_from_data(big, CT_SHAPE(4), CT_U64);
    u = ct_unique(ub, true, NULL, &counts);
    CT_ASSERT_SHAPE(u, 3);
    assert_true(ct_test_at(u, 0) == 5 && ct_test_at(u, 1) == 7 && ct_test_at(u, 2) == 9223372036854775808.0);
    assert_true(ct_test_at(counts, 2) == 2);
    ct_tensor *ki = NULL;
    ct_tensor *kv = ct_kthvalue(ub, 3, 0, false, &ki);
    assert_true(ct_test_at(kv, 0) == 9223372036854775808.0 && ct_test_at(ki, 0) == 0);
    ct_tensor *si = NULL;
    ct_tensor *sv = ct_sort(ub, 0, true, &si); /* stable: the two 2^63 keep their order */
    const double want_sv[] = {9223372036854775808.0, 9223372036854775808.0, 7, 5}, want_si[] = {0, 2, 3, 1};
    for (int k = 0; k < 4; k++)
        assert_true(ct_test_at(sv, k) == want_sv[k] && ct_test_at(si, k) == want_si[k]);
    ct_tensor *as = ct_argsort(ub, 0, false);
    assert_true(ct_test_at(as, 0) == 1 && ct_test_at(as, 1) == 3 && ct_test_at(as, 3) == 2);
    ct_tensor *tk = ct_topk(ub, 1, 0, true, NULL);
    assert_true(ct_test_at(tk, 0) == 9223372036854775808.0);
    ct_tensor *sr = ct_scatter_reduce(ct_zeros(CT_SHAPE(1), CT_U64, CT_CPU), 0, IV(0, 0, 0, 0), ub, "amax", false);
    assert_true(ct_test_at(sr, 0) == 9223372036854775808.0);
    ct_tensor *p = ct_pad(ct_view(ct_to_dtype(x, CT_I32), CT_SHAPE(1, 4)), CT_INDEX(2, 1), 2, "reflect", 0);
    CT_ASSERT_SHAPE(p, 1, 7);
    const double want[] = {3, 1, 3, 1, 3, 2, 3};
    for (int k = 0; k < 7; k++)
        assert_true(ct_test_at(p, k) == want[k]);
    ct_scope_end();
}

static void test_meta_shapes(void **state) {
    (void)state;
    ct_clear_error();
    ct_scope_begin();
    ct_tensor *m = ct_empty(CT_SHAPE(5, 6, 7), CT_F32, CT_META);
    ct_tensor *i2 = ct_empty(CT_SHAPE(2, 3), CT_I64, CT_META);
    const ct_tensor *sep[3] = {i2, NULL, i2};
    CT_ASSERT_SHAPE(ct_index(m, sep, 3), 2, 3, 6);
    const ct_tensor *adj[3] = {NULL, i2, i2};
    CT_ASSERT_SHAPE(ct_index(m, adj, 3), 5, 2, 3);
    const ct_tensor *mask[1] = {ct_empty(CT_SHAPE(5), CT_BOOL, CT_META)};
    CT_ASSERT_ERR(ct_index(m, mask, 1) != NULL, CT_ERROR_NOT_IMPLEMENTED, "depend on the data");
    CT_ASSERT_ERR(ct_masked_select(m, ct_empty(CT_SHAPE(7), CT_BOOL, CT_META)) != NULL, CT_ERROR_NOT_IMPLEMENTED,
                  "depends on the data");
    CT_ASSERT_ERR(ct_unique(m, true, NULL, NULL) != NULL, CT_ERROR_NOT_IMPLEMENTED, "depends on the data");
    CT_ASSERT_SHAPE(ct_pad(m, CT_INDEX(1, 2, 3, 4), 4, "reflect", 0), 5, 13, 10);
    const ct_tensor *ops[2] = {m, ct_empty(CT_SHAPE(5, 7, 2), CT_F32, CT_META)};
    ct_tensor *e = ct_einsum("bij,bjk->bik", ops, 2);
    CT_ASSERT_SHAPE(e, 5, 6, 2);
    assert_int_equal(ct_tensor_device(e).type, CT_DEVICE_META);
    ct_tensor *idx = NULL;
    CT_ASSERT_SHAPE(ct_kthvalue(m, 2, 1, true, &idx), 5, 1, 7);
    CT_ASSERT_SHAPE(idx, 5, 1, 7);
    ct_scope_end();
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_golden),
        cmocka_unit_test(test_null_and_bad_arguments),
        cmocka_unit_test(test_inplace_and_views),
        cmocka_unit_test(test_unique_unsorted_and_optional_outputs),
        cmocka_unit_test(test_meta_shapes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
