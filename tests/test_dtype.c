/* dtypes against real PyTorch: metadata, names, the default dtype, and every
 * conversion between the 13 dtypes, bit-exact, from tests/data/dtype_casts.txt
 * (written by tests/golden/gen_casts.py with PyTorch 1.13; see its docstring). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dtype.h"
#include "cpu/loop.h"
#include "testutil.h"

#define GOLDEN CT_TEST_DATA_DIR "/dtype_casts.txt"
#define MAX_LINES 4096

static char *golden_text;
static char *lines[MAX_LINES];
static int nlines;

static int load_golden(void **state) {
    (void)state;
    FILE *f = fopen(GOLDEN, "rb");
    if (!f) {
        fprintf(stderr, "cannot open %s\n", GOLDEN);
        return -1;
    }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    golden_text = malloc((size_t)n + 1);
    if (!golden_text || fread(golden_text, 1, (size_t)n, f) != (size_t)n) {
        fclose(f);
        return -1;
    }
    fclose(f);
    golden_text[n] = '\0';
    for (char *p = golden_text; *p && nlines < MAX_LINES;) {
        char *e = strchr(p, '\n');
        if (e)
            *e = '\0';
        if (*p && *p != '#')
            lines[nlines++] = p;
        if (!e)
            break;
        p = e + 1;
    }
    return 0;
}

static int free_golden(void **state) {
    (void)state;
    free(golden_text);
    return 0;
}

static ct_dtype dtype_named(const char *name) {
    ct_dtype d = ct_dtype_from_name(name);
    if (d == CT_DTYPE_UNDEFINED) {
        print_error("golden file names unknown dtype '%s'\n", name);
        fail();
    }
    return d;
}

static uint64_t bits_at(const void *p, size_t size) {
    uint64_t v = 0;
    memcpy(&v, p, size); /* little-endian hosts only, as the golden file's origin */
    return v;
}

/* A transposed view of a 2-d tensor (the view functions live in another layer). */
static ct_tensor *transposed(const ct_tensor *t) {
    const int64_t *sh = ct_tensor_shape(t), *st = ct_tensor_strides(t);
    int64_t shape[2] = {sh[1], sh[0]}, strides[2] = {st[1], st[0]};
    return ct_tensor_make_view(t, ct_tensor_storage_offset(t), shape, strides, 2);
}

/* ------------------------------------------------------------------ metadata */

static void test_dtype_metadata(void **state) {
    (void)state;
    int seen = 0;
    for (int i = 0; i < nlines; i++) {
        char name[32], origin[16];
        int size, is_float, is_signed;
        if (sscanf(lines[i], "D %31s %d %d %d %15s", name, &size, &is_float, &is_signed, origin) != 5)
            continue;
        /* The golden file lists dtypes in ctorch's enum order. */
        ct_dtype d = (ct_dtype)seen++;
        assert_string_equal(ct_dtype_name(d), name);
        assert_int_equal(ct_dtype_from_name(name), d);
        assert_int_equal(ct_dtype_size(d), size);
        assert_int_equal(ct_dtype_is_floating(d), is_float);
        assert_int_equal(ct_dtype_is_signed(d), is_signed);
        /* torch's is_integral: neither floating nor (without include_bool) bool. */
        assert_int_equal(ct_dtype_is_integral(d, false), !is_float && d != CT_BOOL);
        assert_int_equal(ct_dtype_is_integral(d, true), !is_float);
        assert_int_equal(ct_dtype_from_name(ct_dtype_name(d)), d);
    }
    assert_int_equal(seen, CT_DTYPE_COUNT);
    /* Out-of-range enums answer without crashing. */
    ct_dtype bad[] = {CT_DTYPE_UNDEFINED, CT_DTYPE_COUNT, (ct_dtype)99, (ct_dtype)-7};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_string_equal(ct_dtype_name(bad[i]), "undefined");
        assert_int_equal(ct_dtype_size(bad[i]), 0);
        assert_false(ct_dtype_is_floating(bad[i]));
        assert_false(ct_dtype_is_integral(bad[i], true));
        assert_false(ct_dtype_is_signed(bad[i]));
    }
}

static void test_dtype_names(void **state) {
    (void)state;
    int aliases = 0;
    for (int i = 0; i < nlines; i++) {
        char name[32], canonical[32], prefixed[48];
        if (sscanf(lines[i], "A %31s %31s", name, canonical) != 2)
            continue;
        aliases++;
        ct_dtype want = strcmp(canonical, "-") == 0 ? CT_DTYPE_UNDEFINED : dtype_named(canonical);
        snprintf(prefixed, sizeof prefixed, "torch.%s", name);
        if (ct_dtype_from_name(name) != want || ct_dtype_from_name(prefixed) != want) {
            print_error("ct_dtype_from_name(\"%s\") is %d, torch.%s is %s\n", name, (int)ct_dtype_from_name(name),
                        name, canonical);
            fail();
        }
    }
    assert_true(aliases >= 20);
    /* Names PyTorch 1.13 lacks but ctorch has. */
    assert_int_equal(ct_dtype_from_name("torch.uint16"), CT_U16);
    assert_int_equal(ct_dtype_from_name("uint64"), CT_U64);
    const char *garbage[] = {"", "torch.", "torch", "Float32", "float32 ", " float32", "torch.torch.float32",
                             "float3", "float320", "torch:float32", "f32", "undefined", "uint", "complex64",
                             "torch.cfloat", "qint8"};
    for (size_t i = 0; i < sizeof garbage / sizeof garbage[0]; i++)
        if (ct_dtype_from_name(garbage[i]) != CT_DTYPE_UNDEFINED) {
            print_error("ct_dtype_from_name(\"%s\") should be undefined\n", garbage[i]);
            fail();
        }
    assert_int_equal(ct_dtype_from_name(NULL), CT_DTYPE_UNDEFINED);
}

static void test_default_dtype(void **state) {
    (void)state;
    assert_int_equal(ct_get_default_dtype(), CT_F32);
    for (int d = 0; d < CT_DTYPE_COUNT; d++) {
        int st = ct_set_default_dtype((ct_dtype)d);
        if (ct_dtype_is_floating((ct_dtype)d)) {
            /* PyTorch 1.13 accepts float16 and bfloat16 too. */
            assert_int_equal(st, CT_OK);
            assert_int_equal(ct_get_default_dtype(), d);
            ct_scope_begin();
            ct_tensor *t = ct_full(CT_SHAPE(2), ct_scalar_float(0.5), CT_DTYPE_UNDEFINED, CT_CPU);
            CT_ASSERT_OK(t);
            assert_int_equal(ct_tensor_dtype(t), d);
            /* Integer fills keep int64, whatever the default. */
            assert_int_equal(ct_tensor_dtype(ct_full(CT_SHAPE(2), ct_scalar_int(1), CT_DTYPE_UNDEFINED, CT_CPU)),
                             CT_I64);
            ct_scope_end();
        } else {
            ct_dtype before = ct_get_default_dtype();
            CT_ASSERT_ERR(st == CT_OK, CT_ERROR_TYPE,
                          "only floating-point types are supported as the default type");
            assert_int_equal(ct_get_default_dtype(), before);
        }
    }
    CT_ASSERT_ERR(ct_set_default_dtype(CT_DTYPE_UNDEFINED) == CT_OK, CT_ERROR_TYPE, "got undefined");
    CT_ASSERT_ERR(ct_set_default_dtype((ct_dtype)42) == CT_OK, CT_ERROR_TYPE, "floating-point");
    assert_int_equal(ct_set_default_dtype(CT_F32), CT_OK);
    assert_int_equal(ct_get_default_dtype(), CT_F32);
}

/* ------------------------------------------------------------------ edge values */

/* Note [Documented departures]
 * Where C leaves a conversion undefined and PyTorch 1.13 has no single answer, the
 * golden cell is marked '!' and holds ctorch's own rule (Note [Casts] in copy.c).
 * Every such cell must belong to one of these cases; the test asserts ctorch's rule. */
static const char *const departure_names[] = {
    "float32/float64 NaN -> bfloat16: PyTorch writes 0xffff on its vectorised contiguous path and "
    "0x7fc0 elsewhere; ctorch always writes 0x7fc0",
    "float -> uint16/uint32/uint64 for NaN, inf or out of range: no such dtype in PyTorch 1.13 "
    "and undefined in C; ctorch goes through int64 and wraps (uint64 keeps [2^63, 2^64))",
};
enum { DEPARTURE_COUNT = 2 };

/* Which documented departure covers src -> dst, or -1. */
static int departure_of(ct_dtype src, uint64_t src_bits, ct_dtype dst) {
    if (!ct_dtype_is_floating(src))
        return -1;
    double v = ct_load_double(&src_bits, src);
    if (dst == CT_BF16 && (src == CT_F32 || src == CT_F64) && isnan(v))
        return 0;
    if ((dst == CT_U16 || dst == CT_U32 || dst == CT_U64) &&
        (isnan(v) || isinf(v) || trunc(v) < 0 || trunc(v) >= ldexp(1.0, 8 * (int)ct_dtype_size(dst))))
        return 1;
    return -1;
}

typedef struct {
    ct_dtype src;
    uint64_t src_bits;
    char flag[CT_DTYPE_COUNT];
    uint64_t want[CT_DTYPE_COUNT];
} cast_row;

static int parse_rows(cast_row *rows, int cap) {
    int n = 0;
    for (int i = 0; i < nlines && n < cap; i++) {
        if (lines[i][0] != 'C')
            continue;
        char buf[1024];
        snprintf(buf, sizeof buf, "%s", lines[i]);
        char *save = NULL;
        strtok_r(buf, " ", &save);
        cast_row *r = &rows[n++];
        r->src = dtype_named(strtok_r(NULL, " ", &save));
        r->src_bits = strtoull(strtok_r(NULL, " ", &save), NULL, 16);
        for (int d = 0; d < CT_DTYPE_COUNT; d++) {
            char *cell = strtok_r(NULL, " ", &save);
            assert_non_null(cell);
            r->flag[d] = cell[0];
            r->want[d] = strtoull(cell + 1, NULL, 16);
        }
    }
    return n;
}

/* Mismatches are counted, not failed at once, so one run lists them all. */
static int mismatches;

static void check_cell(const cast_row *r, ct_dtype dst, uint64_t got, const char *how, int *departures) {
    if (r->flag[dst] == '!') {
        int which = departure_of(r->src, r->src_bits, dst);
        if (which < 0) {
            print_error("%s %llx -> %s is marked undefined but no documented departure covers it\n",
                        ct_dtype_name(r->src), (unsigned long long)r->src_bits, ct_dtype_name(dst));
            fail();
        }
        if (departures)
            departures[which]++;
    } else if (r->flag[dst] == '=' || r->flag[dst] == '~') {
        /* A departure rule never covers a case PyTorch (or C) defines. */
        if (departure_of(r->src, r->src_bits, dst) >= 0) {
            print_error("%s %llx -> %s has a defined result but a departure rule claims it\n",
                        ct_dtype_name(r->src), (unsigned long long)r->src_bits, ct_dtype_name(dst));
            fail();
        }
    } else {
        print_error("bad golden flag '%c'\n", r->flag[dst]);
        fail();
    }
    if (got != r->want[dst]) {
        print_error("%s: %s %llx -> %s gave %llx, want %llx (%s)\n", how, ct_dtype_name(r->src),
                    (unsigned long long)r->src_bits, ct_dtype_name(dst), (unsigned long long)got,
                    (unsigned long long)r->want[dst],
                    r->flag[dst] == '=' ? "PyTorch 1.13" : r->flag[dst] == '~' ? "derived" : "ctorch's rule");
        mismatches++;
    }
}

static cast_row rows[1024];

static void test_casts_contiguous(void **state) {
    (void)state;
    int n = parse_rows(rows, 1024);
    mismatches = 0;
    assert_true(n > 400);
    int departures[DEPARTURE_COUNT] = {0}, cells = 0;
    ct_scope_begin();
    for (int s = 0; s < CT_DTYPE_COUNT; s++) {
        /* All source values of one dtype in one contiguous tensor (long enough for any
         * vector loop, with a tail). */
        uint64_t src_buf[128];
        const cast_row *mine[128];
        int m = 0;
        size_t ss = ct_dtype_size((ct_dtype)s);
        for (int i = 0; i < n; i++)
            if (rows[i].src == (ct_dtype)s) {
                assert_true(m < 128);
                memcpy((char *)src_buf + (size_t)m * ss, &rows[i].src_bits, ss);
                mine[m++] = &rows[i];
            }
        assert_true(m >= 2);
        ct_tensor *src = ct_from_data(src_buf, CT_SHAPE(m), (ct_dtype)s);
        CT_ASSERT_OK(src);
        for (int d = 0; d < CT_DTYPE_COUNT; d++) {
            ct_tensor *out = ct_to_dtype(src, (ct_dtype)d);
            CT_ASSERT_OK(out);
            assert_int_equal(ct_tensor_dtype(out), d);
            const char *p = ct_tensor_data(out);
            size_t ds = ct_dtype_size((ct_dtype)d);
            for (int k = 0; k < m; k++) {
                check_cell(mine[k], (ct_dtype)d, bits_at(p + (size_t)k * ds, ds), "to_dtype", departures);
                cells++;
            }
        }
    }
    ct_scope_end();
    assert_int_equal(mismatches, 0);
    assert_int_equal(cells, n * CT_DTYPE_COUNT);
    /* Both documented departures occur in the golden file, and nothing else does. */
    for (int k = 0; k < DEPARTURE_COUNT; k++) {
        print_message("documented departure (%d cells): %s\n", departures[k], departure_names[k]);
        assert_true(departures[k] > 0);
    }
}

/* Casting through strided sources and destinations (ct_from_blob with explicit strides),
 * and broadcasting copy_ into a transposed destination. */
static void test_casts_strided_and_broadcast(void **state) {
    (void)state;
    int n = parse_rows(rows, 1024);
    mismatches = 0;
    for (int i = 0; i < n; i++) {
        const cast_row *r = &rows[i];
        ct_scope_begin(); /* the blobs below live on this iteration's stack */
        size_t ss = ct_dtype_size(r->src);
        /* Source: 4 copies, 3 elements apart. */
        uint64_t sbuf[12] = {0};
        for (int k = 0; k < 4; k++)
            memcpy((char *)sbuf + (size_t)(3 * k) * ss, &r->src_bits, ss);
        ct_tensor *src = ct_from_blob(sbuf, CT_INDEX(4), CT_INDEX(3), 1, r->src, NULL, NULL);
        CT_ASSERT_OK(src);
        assert_false(ct_tensor_is_contiguous(src));
        ct_tensor *one = ct_from_blob(sbuf, NULL, NULL, 0, r->src, NULL, NULL);
        CT_ASSERT_OK(one);
        for (int d = 0; d < CT_DTYPE_COUNT; d++) {
            size_t ds = ct_dtype_size((ct_dtype)d);
            /* Destination: 4 elements, 2 apart. */
            uint64_t dbuf[8] = {0};
            ct_tensor *dst = ct_from_blob(dbuf, CT_INDEX(4), CT_INDEX(2), 1, (ct_dtype)d, NULL, NULL);
            CT_ASSERT_OK(ct_copy_(dst, src));
            for (int k = 0; k < 4; k++)
                check_cell(r, (ct_dtype)d, bits_at((char *)dbuf + (size_t)(2 * k) * ds, ds), "strided copy_",
                           NULL);
            for (int k = 0; k < 4; k++) /* the gaps are untouched */
                assert_int_equal(bits_at((char *)dbuf + (size_t)(2 * k + 1) * ds, ds), 0);
            /* A 0-d source broadcast into a transposed (3, 2) destination. */
            ct_tensor *base = ct_zeros(CT_SHAPE(2, 3), (ct_dtype)d, CT_CPU);
            ct_tensor *tr = transposed(base);
            CT_ASSERT_OK(ct_copy_(tr, one));
            const char *p = ct_tensor_data(base);
            for (int k = 0; k < 6; k++)
                check_cell(r, (ct_dtype)d, bits_at(p + (size_t)k * ds, ds), "broadcast copy_", NULL);
            /* The strided source broadcast over rows of a (3, 4) destination. */
            ct_tensor *rowsdst = ct_zeros(CT_SHAPE(3, 4), (ct_dtype)d, CT_CPU);
            CT_ASSERT_OK(ct_copy_(rowsdst, src));
            for (int k = 0; k < 12; k++)
                check_cell(r, (ct_dtype)d, bits_at((const char *)ct_tensor_data(rowsdst) + (size_t)k * ds, ds),
                           "row broadcast copy_", NULL);
            /* The strided source through to_dtype and contiguous. */
            ct_tensor *conv = ct_contiguous(ct_to_dtype(src, (ct_dtype)d));
            CT_ASSERT_OK(conv);
            for (int k = 0; k < 4; k++)
                check_cell(r, (ct_dtype)d, bits_at((const char *)ct_tensor_data(conv) + (size_t)k * ds, ds),
                           "strided to_dtype", NULL);
        }
        ct_scope_end();
    }
    assert_int_equal(mismatches, 0);
}

/* ------------------------------------------------------------------ scalar functions */

static float f32_from_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}
static uint32_t f32_to_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static void test_scalar_tricky_cases(void **state) {
    (void)state;
    int count = 0;
    mismatches = 0;
    for (int i = 0; i < nlines; i++) {
        char kind[8];
        unsigned in, want;
        if (sscanf(lines[i], "T %7s %x %x", kind, &in, &want) != 3)
            continue;
        unsigned got = 0;
        if (strcmp(kind, "h2f") == 0)
            got = f32_to_bits(ct_half_to_float((uint16_t)in));
        else if (strcmp(kind, "bf2f") == 0)
            got = f32_to_bits(ct_bfloat16_to_float((uint16_t)in));
        else if (strcmp(kind, "f2h") == 0)
            got = ct_float_to_half(f32_from_bits(in));
        else if (strcmp(kind, "f2bf") == 0)
            got = ct_float_to_bfloat16(f32_from_bits(in));
        else
            fail_msg("unknown kind %s", kind);
        if (got != want) {
            print_error("%s(%x) = %x, PyTorch gives %x\n", kind, in, got, want);
            mismatches++;
        }
        count++;
    }
    assert_int_equal(mismatches, 0);
    assert_true(count > 60);
}

/* ------------------------------------------------------------------ sweeps */

static const uint32_t LOW13[] = {0x0000, 0x0001, 0x0fff, 0x1000, 0x1001, 0x1fff};
static const uint32_t LOW16[] = {0x0000, 0x0001, 0x7fff, 0x8000, 0x8001, 0xffff};

/* Inputs of a sweep as float32 bit patterns (or half/bfloat16 patterns in the low bits). */
static uint32_t *sweep_inputs(const char *name, int64_t *count) {
    uint32_t *in = NULL;
    int64_t n = 0;
    if (strcmp(name, "h2f") == 0 || strcmp(name, "bf2f") == 0) {
        n = 65536;
        in = malloc((size_t)n * 4);
        for (int64_t i = 0; i < n; i++)
            in[i] = (uint32_t)i;
    } else if (strcmp(name, "f2h") == 0) {
        n = (INT64_C(1) << 19) * 6;
        in = malloc((size_t)n * 4);
        for (int64_t i = 0; i < (INT64_C(1) << 19); i++)
            for (int k = 0; k < 6; k++)
                in[i * 6 + k] = ((uint32_t)i << 13) | LOW13[k];
    } else if (strcmp(name, "f2bf") == 0) {
        n = 65536 * 6;
        in = malloc((size_t)n * 4);
        for (int64_t i = 0; i < 65536; i++)
            for (int k = 0; k < 6; k++)
                in[i * 6 + k] = ((uint32_t)i << 16) | LOW16[k];
    } else if (strcmp(name, "f2hs") == 0) {
        n = 4096 * 2 * 3;
        in = malloc((size_t)n * 4);
        int64_t j = 0;
        for (int k = 0; k < 4096; k++)
            for (int s = 0; s < 2; s++) {
                float t = (float)((s ? -1.0 : 1.0) * (k + 0.5) * 0x1p-24);
                in[j++] = f32_to_bits(nextafterf(t, -INFINITY));
                in[j++] = f32_to_bits(t);
                in[j++] = f32_to_bits(nextafterf(t, INFINITY));
            }
    }
    *count = n;
    return in;
}

static uint64_t fnv(const uint8_t *p, size_t n) {
    uint64_t h = UINT64_C(0xcbf29ce484222325);
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * UINT64_C(0x100000001b3);
    return h;
}

/* Outputs (little-endian bytes) of a sweep, through the scalar functions (tensor == 0)
 * or through ct_to_dtype on one contiguous tensor (tensor == 1). */
static uint8_t *sweep_outputs(const char *name, const uint32_t *in, int64_t n, int tensor, size_t *esize) {
    bool from_half = strcmp(name, "h2f") == 0, from_bf = strcmp(name, "bf2f") == 0;
    *esize = from_half || from_bf ? 4 : 2;
    uint8_t *out = malloc((size_t)n * *esize);
    if (tensor) {
        ct_scope_begin();
        ct_tensor *src;
        ct_dtype dst;
        if (from_half || from_bf) {
            uint16_t *h = malloc((size_t)n * 2);
            for (int64_t i = 0; i < n; i++)
                h[i] = (uint16_t)in[i];
            src = ct_from_data(h, CT_SHAPE(n), from_half ? CT_F16 : CT_BF16);
            free(h);
            dst = CT_F32;
        } else {
            src = ct_from_data(in, CT_SHAPE(n), CT_F32);
            dst = strcmp(name, "f2bf") == 0 ? CT_BF16 : CT_F16;
        }
        ct_tensor *t = ct_to_dtype(src, dst);
        CT_ASSERT_OK(t);
        memcpy(out, ct_tensor_data(t), (size_t)n * *esize);
        ct_scope_end();
        return out;
    }
    for (int64_t i = 0; i < n; i++) {
        if (from_half || from_bf) {
            uint32_t r = f32_to_bits(from_half ? ct_half_to_float((uint16_t)in[i]) : ct_bfloat16_to_float((uint16_t)in[i]));
            memcpy(out + i * 4, &r, 4);
        } else {
            uint16_t r = strcmp(name, "f2bf") == 0 ? ct_float_to_bfloat16(f32_from_bits(in[i]))
                                                   : ct_float_to_half(f32_from_bits(in[i]));
            memcpy(out + i * 2, &r, 2);
        }
    }
    return out;
}

static void test_sweeps(void **state) {
    (void)state;
    int sweeps = 0;
    for (int i = 0; i < nlines; i++) {
        char name[16];
        long long count, block;
        if (sscanf(lines[i], "S %15s %lld %lld", name, &count, &block) != 3)
            continue;
        sweeps++;
        int64_t n = 0;
        uint32_t *in = sweep_inputs(name, &n);
        assert_non_null(in);
        assert_int_equal(n, count);
        for (int tensor = 0; tensor < 2; tensor++) {
            size_t es = 0;
            uint8_t *out = sweep_outputs(name, in, n, tensor, &es);
            int64_t nblocks = (n + block - 1) / block;
            for (int64_t b = 0; b < nblocks; b++) {
                unsigned long long want = 0;
                assert_true(i + 1 + b < nlines);
                assert_int_equal(sscanf(lines[i + 1 + b], "H %llx", &want), 1);
                int64_t len = b == nblocks - 1 ? n - b * block : block;
                uint64_t got = fnv(out + b * block * (int64_t)es, (size_t)(len * (int64_t)es));
                if (got != want) {
                    /* Name the first input of the block for whoever debugs it. */
                    print_error("sweep %s (%s) block %lld (inputs %llx..) differs from PyTorch\n", name,
                                tensor ? "ct_to_dtype" : "scalar function", (long long)b,
                                (unsigned long long)in[b * block]);
                    fail();
                }
            }
            free(out);
        }
        free(in);
    }
    assert_int_equal(sweeps, 5);
}

/* ------------------------------------------------------------------ same-dtype copies */

static void test_same_dtype_copies_are_byte_moves(void **state) {
    (void)state;
    /* Same-dtype copies move bytes: NaN payloads and signalling NaNs survive, which a
     * convert-through-float loop would not keep. */
    ct_scope_begin();
    uint16_t h[6] = {0x7c01, 0xfd55, 0x7fff, 0x0001, 0x8000, 0x7e00};
    ct_dtype halfs[] = {CT_F16, CT_BF16};
    for (int k = 0; k < 2; k++) {
        ct_tensor *a = ct_from_data(h, CT_SHAPE(2, 3), halfs[k]);
        ct_tensor *c = ct_clone(a);
        ct_tensor *tc = ct_contiguous(transposed(a));
        ct_tensor *dst = ct_empty(CT_SHAPE(3, 2), halfs[k], CT_CPU);
        CT_ASSERT_OK(ct_copy_(transposed(dst), a));
        CT_ASSERT_OK(tc);
        assert_memory_equal(ct_tensor_data(c), h, sizeof h);
        for (int i = 0; i < 2; i++)
            for (int j = 0; j < 3; j++) {
                assert_int_equal(((uint16_t *)ct_tensor_data(tc))[j * 2 + i], h[i * 3 + j]);
                assert_int_equal(((uint16_t *)ct_tensor_data(dst))[j * 2 + i], h[i * 3 + j]);
            }
    }
    uint32_t f[2] = {0x7f800001, 0xffbfffff};
    ct_tensor *fc = ct_clone(ct_from_data(f, CT_SHAPE(2), CT_F32));
    assert_memory_equal(ct_tensor_data(fc), f, sizeof f);
    ct_scope_end();
    /* Same-dtype loops do not depend on the dtype, only on its size: one byte mover. */
    assert_ptr_equal(ct_cast_loop(CT_F32, CT_F32), ct_cast_loop(CT_I32, CT_I32));
    assert_ptr_equal(ct_cast_loop(CT_F16, CT_F16), ct_cast_loop(CT_BF16, CT_BF16));
    assert_ptr_equal(ct_cast_loop(CT_F64, CT_F64), ct_cast_loop(CT_U64, CT_U64));
    assert_ptr_not_equal(ct_cast_loop(CT_F32, CT_I32), ct_cast_loop(CT_I32, CT_I32));
}

/* ------------------------------------------------------------------ errors */

static void test_cast_errors(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *t = ct_ones(CT_SHAPE(2, 3), CT_F32, CT_CPU);
    CT_ASSERT_ERR(ct_to_dtype(t, CT_DTYPE_UNDEFINED) != NULL, CT_ERROR_TYPE, "invalid dtype");
    CT_ASSERT_ERR(ct_to_dtype(t, CT_DTYPE_COUNT) != NULL, CT_ERROR_TYPE, "invalid dtype");
    CT_ASSERT_ERR(ct_to_dtype(NULL, CT_F16) != NULL, CT_ERROR_NULL_ARGUMENT, "to");
    CT_ASSERT_ERR(ct_copy_(NULL, t) != NULL, CT_ERROR_NULL_ARGUMENT, "copy_");
    CT_ASSERT_ERR(ct_copy_(t, NULL) != NULL, CT_ERROR_NULL_ARGUMENT, "copy_");
    ct_tensor *bad = ct_zeros(CT_SHAPE(4), CT_I64, CT_CPU);
    CT_ASSERT_ERR(ct_copy_(t, bad) != NULL, CT_ERROR_VALUE, "cannot be broadcast");
    /* A same-dtype to_dtype returns t itself; a META tensor converts metadata only. */
    ct_tensor *same = ct_to_dtype(t, CT_F32);
    assert_ptr_equal(same, t);
    ct_tensor *meta = ct_to_dtype(ct_empty(CT_SHAPE(5), CT_F32, CT_META), CT_BF16);
    CT_ASSERT_OK(meta);
    assert_int_equal(ct_tensor_dtype(meta), CT_BF16);
    ct_tensor *empty = ct_to_dtype(ct_empty(CT_SHAPE(0, 3), CT_F64, CT_CPU), CT_U8);
    CT_ASSERT_OK(empty);
    assert_int_equal(ct_tensor_numel(empty), 0);
    ct_scope_end();
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dtype_metadata),
        cmocka_unit_test(test_dtype_names),
        cmocka_unit_test(test_default_dtype),
        cmocka_unit_test(test_casts_contiguous),
        cmocka_unit_test(test_casts_strided_and_broadcast),
        cmocka_unit_test(test_scalar_tricky_cases),
        cmocka_unit_test(test_sweeps),
        cmocka_unit_test(test_same_dtype_copies_are_byte_moves),
        cmocka_unit_test(test_cast_errors),
    };
    return cmocka_run_group_tests(tests, load_golden, free_golden);
}
