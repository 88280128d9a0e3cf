/* Printing: golden reprs from PyTorch (tests/data/print_golden.txt), the snprintf
 * contract, options, layouts PyTorch 1.13 cannot produce, and error inputs. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "dtype.h"
#include "tensor_impl.h"

/* ------------------------------------------------------------------ helpers */

/* The repr of t as a malloc'd string (asserting success and the returned length). */
static char *repr(const ct_tensor *t) {
    int64_t n = ct_to_string(t, NULL, 0);
    if (n < 0)
        fail_msg("ct_to_string failed: %s", ct_last_error());
    char *s = malloc((size_t)n + 1);
    assert_non_null(s);
    assert_int_equal(ct_to_string(t, s, (size_t)n + 1), n);
    assert_int_equal(strlen(s), (size_t)n);
    return s;
}

static void assert_repr(const ct_tensor *t, const char *expected) {
    CT_ASSERT_OK(t);
    char *s = repr(t);
    if (strcmp(s, expected) != 0) {
        print_error("repr mismatch\nexpected:\n%s\ngot:\n%s\n", expected, s);
        free(s);
        fail();
    }
    free(s);
}

static ct_tensor *from_f32(const float *v, const int64_t *shape, int ndim) {
    return ct_from_data(v, shape, ndim, CT_F32);
}

/* ------------------------------------------------------------------ golden file */

typedef struct {
    char *text; /* whole file, lines NUL-terminated in place */
    char **lines;
    size_t nlines;
    size_t at;
} golden_file;

static void golden_load(golden_file *g, const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f)
        fail_msg("cannot open %s", path);
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    assert_true(size > 0);
    g->text = malloc((size_t)size + 1);
    assert_non_null(g->text);
    assert_int_equal(fread(g->text, 1, (size_t)size, f), (size_t)size);
    fclose(f);
    g->text[size] = '\0';
    size_t cap = 1;
    for (long i = 0; i < size; i++)
        cap += g->text[i] == '\n';
    g->lines = malloc(cap * sizeof *g->lines);
    assert_non_null(g->lines);
    g->nlines = 0;
    char *p = g->text;
    while (*p) {
        g->lines[g->nlines++] = p;
        char *nl = strchr(p, '\n');
        if (!nl)
            break;
        *nl = '\0';
        p = nl + 1;
    }
    g->at = 0;
}

static const char *golden_next(golden_file *g) { return g->at < g->nlines ? g->lines[g->at++] : NULL; }

/* The line after a keyword, or fail. */
static const char *expect_kw(golden_file *g, const char *kw) {
    const char *line = golden_next(g);
    if (!line || strncmp(line, kw, strlen(kw)) != 0 || line[strlen(kw)] != ' ')
        fail_msg("golden file: expected '%s' at line %zu, got '%s'", kw, g->at, line ? line : "(end)");
    return line + strlen(kw) + 1;
}

static void store_text(char *p, ct_dtype d, const char *tok) {
    if (ct_dtype_is_floating(d))
        ct_store_double(p, d, strtod(tok, NULL));
    else
        ct_store_int64(p, d, strtoll(tok, NULL, 10));
}

static void free_blob(void *ctx, void *data) {
    (void)ctx;
    free(data);
}

typedef struct {
    char name[128];
    int precision, edgeitems, linewidth, sci_mode;
    long long threshold;
    ct_dtype default_dtype;
    ct_tensor *t; /* owned by the caller's scope */
    char *expected; /* malloc'd */
} golden_case;

/* Reads the next case; false at end of file. */
static bool golden_case_read(golden_file *g, golden_case *c) {
    const char *line;
    do {
        line = golden_next(g);
        if (!line)
            return false;
    } while (line[0] == '#' || line[0] == '\0');
    if (strncmp(line, "case ", 5) != 0)
        fail_msg("golden file: expected 'case' at line %zu", g->at);
    snprintf(c->name, sizeof c->name, "%s", line + 5);

    char dd[32];
    line = expect_kw(g, "opts");
    assert_int_equal(sscanf(line, "%d %lld %d %d %d %31s", &c->precision, &c->threshold, &c->edgeitems,
                            &c->linewidth, &c->sci_mode, dd),
                     6);
    c->default_dtype = ct_dtype_from_name(dd);

    char dtname[32], devname[32];
    int rg, ndim, off = 0;
    line = expect_kw(g, "tensor");
    assert_int_equal(sscanf(line, "%31s %31s %d %d%n", dtname, devname, &rg, &ndim, &off), 4);
    ct_dtype dtype = ct_dtype_from_name(dtname);
    assert_true(dtype != CT_DTYPE_UNDEFINED);
    assert_true(ndim >= 0 && ndim <= 8);
    int64_t shape[8], strides[8];
    const char *q = line + off;
    for (int i = 0; i < ndim; i++) {
        char *end;
        shape[i] = strtoll(q, &end, 10);
        q = end;
    }
    bool strided = false;
    if (g->at < g->nlines && strncmp(g->lines[g->at], "strides ", 8) == 0) {
        q = expect_kw(g, "strides");
        for (int i = 0; i < ndim; i++) {
            char *end;
            strides[i] = strtoll(q, &end, 10);
            q = end;
        }
        strided = true;
    }

    /* Storage contents. */
    line = golden_next(g);
    assert_non_null(line);
    size_t esz = ct_dtype_size(dtype);
    long long n = 0;
    char *data = NULL;
    if (strncmp(line, "values ", 7) == 0) {
        char *end;
        n = strtoll(line + 7, &end, 10);
        data = calloc((size_t)n + 1, esz);
        assert_non_null(data);
        char *tok = end;
        for (long long i = 0; i < n; i++) {
            while (*tok == ' ')
                tok++;
            char word[64];
            size_t k = 0;
            while (tok[k] && tok[k] != ' ' && k < sizeof word - 1) {
                word[k] = tok[k];
                k++;
            }
            word[k] = '\0';
            assert_true(k > 0);
            store_text(data + i * (long long)esz, dtype, word);
            tok += k;
        }
    } else if (strncmp(line, "arange ", 7) == 0) {
        double start, step;
        assert_int_equal(sscanf(line + 7, "%lld %lf %lf", &n, &start, &step), 3);
        data = calloc((size_t)n + 1, esz);
        assert_non_null(data);
        for (long long i = 0; i < n; i++)
            ct_store_double(data + i * (long long)esz, dtype, start + (double)i * step);
    } else {
        fail_msg("golden file: expected values or arange at line %zu", g->at);
    }
    while (g->at < g->nlines && strncmp(g->lines[g->at], "set ", 4) == 0) {
        line = expect_kw(g, "set");
        long long idx;
        char word[64];
        assert_int_equal(sscanf(line, "%lld %63s", &idx, word), 2);
        assert_true(idx >= 0 && idx < n);
        store_text(data + idx * (long long)esz, dtype, word);
    }

    if (strcmp(devname, "meta") == 0) {
        c->t = ct_empty(shape, ndim, dtype, CT_META);
        free(data);
    } else if (strided) {
        c->t = ct_from_blob(data, shape, strides, ndim, dtype, free_blob, NULL);
    } else {
        c->t = ct_from_data(data, shape, ndim, dtype);
        free(data);
    }
    CT_ASSERT_OK(c->t);
    if (rg)
        CT_ASSERT_OK(ct_tensor_set_requires_grad(c->t, true));

    /* Expected text: its lines joined by newlines. */
    int nexp = 0;
    line = expect_kw(g, "expect");
    nexp = atoi(line);
    assert_true(nexp > 0);
    size_t len = 0;
    for (int i = 0; i < nexp; i++) {
        assert_true(g->at + (size_t)i < g->nlines);
        len += strlen(g->lines[g->at + (size_t)i]) + 1;
    }
    c->expected = malloc(len + 1);
    assert_non_null(c->expected);
    c->expected[0] = '\0';
    size_t pos = 0;
    for (int i = 0; i < nexp; i++) {
        const char *l = golden_next(g);
        size_t ll = strlen(l);
        memcpy(c->expected + pos, l, ll);
        pos += ll;
        if (i + 1 < nexp)
            c->expected[pos++] = '\n';
    }
    c->expected[pos] = '\0';
    return true;
}

static void test_golden(void **state) {
    (void)state;
    golden_file g;
    golden_load(&g, CT_TEST_DATA_DIR "/print_golden.txt");
    int ncases = 0, nfail = 0;
    golden_case c;
    for (;;) {
        ct_scope_begin();
        if (!golden_case_read(&g, &c)) {
            ct_scope_end();
            break;
        }
        ncases++;
        ct_reset_printoptions();
        ct_set_printoptions(c.precision, c.threshold, c.edgeitems, c.linewidth, c.sci_mode);
        assert_int_equal(ct_set_default_dtype(c.default_dtype), CT_OK);
        int64_t n = ct_to_string(c.t, NULL, 0);
        char *got = n >= 0 ? malloc((size_t)n + 1) : NULL;
        if (got)
            ct_to_string(c.t, got, (size_t)n + 1);
        ct_set_default_dtype(CT_F32);
        ct_reset_printoptions();
        if (!got || strcmp(got, c.expected) != 0) {
            nfail++;
            print_error("case %s:\nexpected:\n%s\ngot:\n%s\n", c.name, c.expected, got ? got : ct_last_error());
        }
        free(got);
        free(c.expected);
        ct_scope_end();
    }
    free(g.lines);
    free(g.text);
    assert_true(ncases >= 60);
    if (nfail)
        fail_msg("%d of %d golden reprs differ", nfail, ncases);
}

/* ------------------------------------------------------------------ snprintf contract */

static void test_truncation(void **state) {
    (void)state;
    ct_scope_begin();
    float v[] = {1.5f, 2.25f};
    ct_tensor *t = from_f32(v, CT_SHAPE(2));
    const char *full = "tensor([1.5000, 2.2500])";
    int64_t len = (int64_t)strlen(full);
    assert_int_equal(ct_to_string(t, NULL, 0), len);

    char buf[64];
    for (size_t cap = 1; cap <= sizeof buf; cap++) {
        memset(buf, 'x', sizeof buf);
        assert_int_equal(ct_to_string(t, buf, cap), len);
        size_t kept = cap - 1 < (size_t)len ? cap - 1 : (size_t)len;
        assert_int_equal(strlen(buf), kept);
        assert_memory_equal(buf, full, kept);
        if (cap < sizeof buf)
            assert_int_equal(buf[cap], 'x'); /* nothing written past cap */
    }
    /* cap 0 with a buffer writes nothing at all. */
    buf[0] = 'x';
    assert_int_equal(ct_to_string(t, buf, 0), len);
    assert_int_equal(buf[0], 'x');
    ct_scope_end();
}

static void test_null_args(void **state) {
    (void)state;
    ct_clear_error();
    char buf[16];
    CT_ASSERT_ERR(ct_to_string(NULL, buf, sizeof buf) >= 0, CT_ERROR_NULL_ARGUMENT, "to_string");
    CT_ASSERT_ERR(ct_print(NULL) == CT_OK, CT_ERROR_NULL_ARGUMENT, "print");
    CT_ASSERT_ERR(ct_fprint(stdout, NULL) == CT_OK, CT_ERROR_NULL_ARGUMENT, "print");

    ct_scope_begin();
    ct_tensor *t = ct_zeros(CT_SHAPE(2), CT_F32, CT_CPU);
    CT_ASSERT_OK(t);
    CT_ASSERT_ERR(ct_to_string(t, NULL, 5) >= 0, CT_ERROR_NULL_ARGUMENT, "cap 0");
    CT_ASSERT_ERR(ct_fprint(NULL, t) == CT_OK, CT_ERROR_NULL_ARGUMENT, "file is NULL");

    /* A NULL from a failed call keeps the first error. */
    ct_tensor *bad = ct_zeros(CT_SHAPE(-1), CT_F32, CT_CPU);
    assert_null(bad);
    assert_true(ct_to_string(bad, buf, sizeof buf) < 0);
    assert_int_equal(ct_last_status(), CT_ERROR_VALUE);
    assert_non_null(strstr(ct_last_error(), "negative dimension"));
    assert_int_equal(ct_fprint(stdout, bad), CT_ERROR_VALUE);
    ct_clear_error();
    ct_scope_end();
}

/* ------------------------------------------------------------------ fprint / print */

static void test_fprint(void **state) {
    (void)state;
    ct_scope_begin();
    int64_t v[] = {1, 2, 3, 4};
    ct_tensor *t = ct_from_data(v, CT_SHAPE(2, 2), CT_I64);
    CT_ASSERT_OK(t);
    FILE *f = tmpfile();
    assert_non_null(f);
    assert_int_equal(ct_fprint(f, t), CT_OK);
    assert_int_equal(ct_fprint(f, t), CT_OK);
    rewind(f);
    char got[128] = {0};
    size_t n = fread(got, 1, sizeof got - 1, f);
    fclose(f);
    const char *one = "tensor([[1, 2],\n        [3, 4]])\n";
    assert_int_equal(n, 2 * strlen(one));
    assert_memory_equal(got, one, strlen(one));
    assert_memory_equal(got + strlen(one), one, strlen(one));

    /* A stream that cannot be written to reports an I/O error. */
    FILE *ro = fopen(CT_TEST_DATA_DIR "/print_golden.txt", "r");
    assert_non_null(ro);
    CT_ASSERT_ERR(ct_fprint(ro, t) == CT_OK, CT_ERROR_IO, "could not write");
    fclose(ro);

    assert_int_equal(ct_print(t), CT_OK);
    ct_scope_end();
}

/* ------------------------------------------------------------------ layouts */

/* A transposed view prints in logical order, same as a contiguous copy of it. */
static void test_noncontiguous_matches_contiguous(void **state) {
    (void)state;
    ct_scope_begin();
    float *base = malloc(6 * sizeof *base);
    assert_non_null(base);
    for (int i = 0; i < 6; i++)
        base[i] = (float)i + 0.5f;
    /* base is (2, 3) row-major; view it as its (3, 2) transpose. */
    ct_tensor *tr = ct_from_blob(base, CT_INDEX(3, 2), CT_INDEX(1, 3), 2, CT_F32, free_blob, NULL);
    CT_ASSERT_OK(tr);
    assert_false(ct_tensor_is_contiguous(tr));
    assert_repr(tr, "tensor([[0.5000, 3.5000],\n        [1.5000, 4.5000],\n        [2.5000, 5.5000]])");
    ct_tensor *c = ct_contiguous(tr);
    CT_ASSERT_OK(c);
    assert_true(ct_tensor_is_contiguous(c));
    char *a = repr(tr), *b = repr(c);
    assert_string_equal(a, b);
    free(a);
    free(b);

    /* A summarized view with a storage offset: the hidden middle never counts. */
    int64_t *big = malloc(3000 * sizeof *big);
    assert_non_null(big);
    for (int i = 0; i < 3000; i++)
        big[i] = i % 2 ? -7 : 1000000 + i; /* every other element is a wide, hidden value */
    big[1] = big[3] = big[5] = 1;
    big[2995] = big[2997] = big[2999] = 2;
    /* The odd positions 1, 3, ..., 2999 seen through stride 2 (1500 elements). */
    ct_tensor *odd = ct_from_blob(big + 1, CT_INDEX(1500), CT_INDEX(2), 1, CT_I64, NULL, NULL);
    CT_ASSERT_OK(odd);
    assert_repr(odd, "tensor([1, 1, 1,  ..., 2, 2, 2])");
    ct_scope_end();
    free(big);
}

/* Dtypes PyTorch 1.13 lacks follow the integer rules and always name their dtype. */
static void test_unsigned_wide(void **state) {
    (void)state;
    ct_scope_begin();
    uint16_t a[] = {0, 65535, 7};
    assert_repr(ct_from_data(a, CT_SHAPE(3), CT_U16), "tensor([    0, 65535,     7], dtype=torch.uint16)");
    uint32_t b[] = {4294967295u, 1};
    assert_repr(ct_from_data(b, CT_SHAPE(2), CT_U32), "tensor([4294967295,          1], dtype=torch.uint32)");
    uint64_t c[] = {18446744073709551615ull, 0};
    assert_repr(ct_from_data(c, CT_SHAPE(2), CT_U64),
                "tensor([18446744073709551615,                    0], dtype=torch.uint64)");
    assert_repr(ct_from_data(c, NULL, 0, CT_U64), "tensor(18446744073709551615, dtype=torch.uint64)");
    assert_repr(ct_empty(CT_SHAPE(0), CT_U16, CT_CPU), "tensor([], dtype=torch.uint16)");
    ct_scope_end();
}

/* ------------------------------------------------------------------ options */

static void test_printoptions_keep_and_reset(void **state) {
    (void)state;
    ct_scope_begin();
    float v[] = {1.0f / 3.0f};
    ct_tensor *t = from_f32(v, CT_SHAPE(1));
    ct_set_printoptions(2, -1, -1, -1, -1);
    assert_repr(t, "tensor([0.33])");
    /* Negative arguments leave the others alone. */
    ct_set_printoptions(-1, 5, -1, -1, -2);
    assert_repr(t, "tensor([0.33])");
    ct_set_printoptions(-1, -1, -1, -1, 1);
    assert_repr(t, "tensor([3.33e-01])");
    ct_set_printoptions(-1, -1, -1, -1, -5); /* below -1: unchanged */
    assert_repr(t, "tensor([3.33e-01])");
    ct_set_printoptions(-1, -1, -1, -1, -1); /* -1: automatic again */
    assert_repr(t, "tensor([0.33])");

    /* threshold 5 from above still holds. */
    int64_t r[] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
    assert_repr(ct_from_data(r, CT_SHAPE(10), CT_I64), "tensor([0, 1, 2,  ..., 7, 8, 9])");

    ct_reset_printoptions();
    assert_repr(t, "tensor([0.3333])");
    assert_repr(ct_from_data(r, CT_SHAPE(10), CT_I64), "tensor([0, 1, 2, 3, 4, 5, 6, 7, 8, 9])");

    /* A threshold as large as it gets never summarizes (PyTorch's profile="full"). */
    ct_set_printoptions(-1, INT64_MAX, -1, -1, -1);
    ct_tensor *big = ct_zeros(CT_SHAPE(2000), CT_I32, CT_CPU);
    CT_ASSERT_OK(big);
    int64_t n = ct_to_string(big, NULL, 0);
    assert_true(n > 2000 * 3);
    ct_reset_printoptions();
    assert_true(ct_to_string(big, NULL, 0) < 200);
    ct_scope_end();
}

/* PyTorch fails on a 2-D summary with edgeitems 0; ctorch prints the ellipsis alone. */
static void test_edgeitems_zero_2d(void **state) {
    (void)state;
    ct_scope_begin();
    ct_set_printoptions(-1, 3, 0, -1, -1);
    /* PyTorch 2.x: "[...]" for any rank, and the size shown whenever edgeitems is 0 */
    assert_repr(ct_ones(CT_SHAPE(2, 2), CT_F32, CT_CPU), "tensor([...], size=(2, 2))");
    assert_repr(ct_ones(CT_SHAPE(2, 3, 4), CT_F64, CT_CPU), "tensor([...], size=(2, 3, 4), dtype=torch.float64)");
    assert_repr(ct_arange(ct_scalar_int(0), ct_scalar_int(3), ct_scalar_int(1), CT_I64, CT_CPU),
                "tensor([0, 1, 2], size=(3,))");
    ct_reset_printoptions();
    ct_scope_end();
}

/* The default dtype decides which float dtype goes unnamed. */
static void test_default_dtype_half(void **state) {
    (void)state;
    ct_scope_begin();
    assert_int_equal(ct_set_default_dtype(CT_F16), CT_OK);
    assert_repr(ct_ones(CT_SHAPE(2), CT_F16, CT_CPU), "tensor([1., 1.])");
    assert_repr(ct_ones(CT_SHAPE(2), CT_F32, CT_CPU), "tensor([1., 1.], dtype=torch.float32)");
    assert_int_equal(ct_set_default_dtype(CT_F32), CT_OK);
    ct_scope_end();
}

/* Large precisions need more room than any fixed buffer would give. */
static void test_long_elements(void **state) {
    (void)state;
    ct_scope_begin();
    double v[] = {1e300, 0.5};
    ct_tensor *t = ct_from_data(v, CT_SHAPE(2), CT_F64);
    ct_set_printoptions(40, -1, -1, -1, 0);
    char *s = repr(t);
    ct_reset_printoptions();
    /* 1e300 printed in full: 301 integer digits, a point, 40 decimals. */
    char expect[400];
    snprintf(expect, sizeof expect, "%.40f", 1e300);
    assert_non_null(strstr(s, expect));
    assert_int_equal(strncmp(s, "tensor([", 8), 0);
    assert_non_null(strstr(s, "dtype=torch.float64)"));
    free(s);
    ct_scope_end();
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_golden),
        cmocka_unit_test(test_truncation),
        cmocka_unit_test(test_null_args),
        cmocka_unit_test(test_fprint),
        cmocka_unit_test(test_noncontiguous_matches_contiguous),
        cmocka_unit_test(test_unsigned_wide),
        cmocka_unit_test(test_printoptions_keep_and_reset),
        cmocka_unit_test(test_edgeitems_zero_2d),
        cmocka_unit_test(test_default_dtype_half),
        cmocka_unit_test(test_long_elements),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
