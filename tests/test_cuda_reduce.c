/* Reductions and scans on the GPU (reduce.cu, scan.cu) against the CPU: every
 * reduction op over dim lists with and without keepdim, dtype= arguments, the three
 * kernel shapes (a thread per output for kept-innermost layouts, a warp or a block per
 * output otherwise) and the chunked path for few long outputs, strided / transposed /
 * broadcast inputs, empty and 0-d inputs, NaN handling and index ties, var/std
 * corrections, logsumexp with infinities, vector norms of every order, cumulative
 * scans and softmax / log_softmax over long rows. Skipped (exit code 77) without a GPU. */
#include <string.h>

#include "cuda_testutil.h"

#define CUDA0 CT_CUDA(0)

/* One signature for every reduction: (a, dims, ndims, keepdim) -> result. */
typedef ct_tensor *(*red_fn)(const ct_tensor *a, const int64_t *dims, int nd, bool keep);

#define R_DT(op) \
    static ct_tensor *r_##op(const ct_tensor *a, const int64_t *d, int n, bool k) { return ct_##op(a, d, n, k, CT_DTYPE_UNDEFINED); }
#define R_PLAIN(op) \
    static ct_tensor *r_##op(const ct_tensor *a, const int64_t *d, int n, bool k) { return ct_##op(a, d, n, k); }
R_DT(sum)
R_DT(nansum)
R_DT(mean)
R_DT(nanmean)
R_DT(prod)
R_PLAIN(amax)
R_PLAIN(amin)
R_PLAIN(logsumexp)
R_PLAIN(all)
R_PLAIN(any)
static ct_tensor *r_count_nonzero(const ct_tensor *a, const int64_t *d, int n, bool k) {
    (void)k;
    return ct_count_nonzero(a, d, n);
}
static ct_tensor *r_var1(const ct_tensor *a, const int64_t *d, int n, bool k) { return ct_var(a, d, n, 1.0, k); }
static ct_tensor *r_var0(const ct_tensor *a, const int64_t *d, int n, bool k) { return ct_var(a, d, n, 0.0, k); }
static ct_tensor *r_std1(const ct_tensor *a, const int64_t *d, int n, bool k) { return ct_std(a, d, n, 1.0, k); }
static ct_tensor *r_sum_f64(const ct_tensor *a, const int64_t *d, int n, bool k) { return ct_sum(a, d, n, k, CT_F64); }
static ct_tensor *r_sum_i32(const ct_tensor *a, const int64_t *d, int n, bool k) { return ct_sum(a, d, n, k, CT_I32); }
static ct_tensor *r_mean_f16(const ct_tensor *a, const int64_t *d, int n, bool k) { return ct_mean(a, d, n, k, CT_F16); }
#define R_NORM(tag, ord, op) \
    static ct_tensor *tag(const ct_tensor *a, const int64_t *d, int n, bool k) { return op(a, ord, d, n, k, CT_DTYPE_UNDEFINED); }
R_NORM(r_norm0, 0.0, ct_linalg_vector_norm)
R_NORM(r_norm1, 1.0, ct_linalg_vector_norm)
R_NORM(r_norm2, 2.0, ct_linalg_vector_norm)
R_NORM(r_norm3, 3.0, ct_linalg_vector_norm)
R_NORM(r_norm_inf, INFINITY, ct_linalg_vector_norm)
R_NORM(r_norm_minf, -INFINITY, ct_linalg_vector_norm)
R_NORM(r_norm_old, 2.0, ct_norm)
R_NORM(r_powsum2, 2.0, ct_linalg__powsum)
R_NORM(r_powsum15, 1.5, ct_linalg__powsum)

typedef struct {
    const char *name;
    red_fn f;
    uint32_t dtypes; /* bit per dtype: which input dtypes to try */
    double lo, hi;
    double scale; /* tolerance scale for float results */
} rcase;

#define DTB(d) (1u << (d))
#define FLOATS (DTB(CT_F16) | DTB(CT_BF16) | DTB(CT_F32) | DTB(CT_F64))
#define INTS (DTB(CT_U8) | DTB(CT_I8) | DTB(CT_I16) | DTB(CT_I32) | DTB(CT_I64) | DTB(CT_U16) | DTB(CT_U32))
#define ALL (FLOATS | INTS | DTB(CT_BOOL) | DTB(CT_U64))

static const rcase cases[] = {
    {"sum", r_sum, ALL, -5, 5, 8},
    {"nansum", r_nansum, FLOATS, -5, 5, 8},
    {"mean", r_mean, FLOATS, -5, 5, 8},
    {"nanmean", r_nanmean, FLOATS, -5, 5, 8},
    {"prod", r_prod, ALL, 0.5, 1.5, 8},
    {"amax", r_amax, ALL, -50, 50, 1},
    {"amin", r_amin, ALL, -50, 50, 1},
    {"logsumexp", r_logsumexp, ALL, -5, 5, 8},
    {"all", r_all, ALL, 0, 3, 1},
    {"any", r_any, ALL, -1, 1, 1},
    {"count_nonzero", r_count_nonzero, ALL, -1, 2, 1},
    {"var", r_var1, FLOATS, -5, 5, 8},
    {"var correction 0", r_var0, FLOATS, -5, 5, 8},
    {"std", r_std1, FLOATS, -5, 5, 8},
    {"sum dtype f64", r_sum_f64, ALL, -5, 5, 8},
    {"sum dtype i32", r_sum_i32, ALL, -5, 5, 8},
    {"mean dtype f16", r_mean_f16, FLOATS | INTS, -5, 5, 8},
    {"norm 0", r_norm0, FLOATS, -2, 2, 8},
    {"norm 1", r_norm1, FLOATS, -5, 5, 8},
    {"norm 2", r_norm2, FLOATS, -5, 5, 8},
    {"norm 3", r_norm3, FLOATS, -5, 5, 8},
    {"norm inf", r_norm_inf, FLOATS, -5, 5, 1},
    {"norm -inf", r_norm_minf, FLOATS, -5, 5, 1},
    {"norm (torch.norm)", r_norm_old, FLOATS, -5, 5, 8},
    {"powsum 2", r_powsum2, FLOATS, -5, 5, 8},
    {"powsum 1.5", r_powsum15, FLOATS, -5, 5, 8},
};
#define NCASES ((int)(sizeof cases / sizeof cases[0]))

static const ct_dtype all_dtypes[] = {CT_BOOL, CT_U8,  CT_I8,  CT_I16, CT_I32,  CT_I64, CT_U16,
                                      CT_U32,  CT_U64, CT_F16, CT_BF16, CT_F32, CT_F64};
#define NDT ((int)(sizeof all_dtypes / sizeof all_dtypes[0]))

/* Random values without the special ones (those get their own test), as a CPU tensor. */
static ct_tensor *values(const int64_t *shape, int nd, ct_dtype dt, double lo, double hi, uint64_t seed) {
    return ct_test_values(shape, nd, dt, lo, hi, seed);
}

static void agree(const rcase *c, const char *layout, ct_dtype dt, const ct_tensor *cpu_in, const ct_tensor *gpu_in,
                  const int64_t *dims, int nd, bool keep) {
    char what[200];
    snprintf(what, sizeof what, "%s %s %s ndims %d keepdim %d", c->name, layout, ct_dtype_name(dt), nd, keep);
    ct_clear_error();
    ct_tensor *r = c->f(cpu_in, dims, nd, keep);
    ct_status st = ct_last_status();
    ct_clear_error();
    ct_tensor *g = c->f(gpu_in, dims, nd, keep);
    if (!r) {
        if (g || ct_last_status() != st)
            fail_msg("%s: CPU refused (%s) but the GPU gave %s", what, ct_status_name(st),
                     g ? "a result" : ct_status_name(ct_last_status()));
        ct_clear_error();
        return;
    }
    CT_AGREE(what, r, g, c->scale);
}

static void run_case(const rcase *c, ct_dtype dt) {
    ct_scope_begin();
    static const struct {
        int nd;
        int64_t shape[3];
        int ndims;
        int64_t dims[3];
    } shapes[] = {
        {3, {6, 7, 9}, 0, {0}},  {3, {6, 7, 9}, 1, {0}},  {3, {6, 7, 9}, 1, {1}},    {3, {6, 7, 9}, 1, {-1}},
        {3, {6, 7, 9}, 2, {0, 2}}, {3, {6, 7, 9}, 2, {2, 1}}, {2, {0, 5}, 1, {0}},  {2, {0, 5}, 1, {1}},
        {0, {0}, 0, {0}},        {1, {1}, 1, {0}},        {2, {3, 5000}, 1, {1}},   {2, {5000, 3}, 1, {0}},
    };
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        ct_tensor *a = values(shapes[s].shape, shapes[s].nd, dt, c->lo, c->hi, 60 + s);
        ct_tensor *g = ct_to_device(a, CUDA0);
        for (int keep = 0; keep < 2; keep++)
            agree(c, "contiguous", dt, a, g, shapes[s].dims, shapes[s].ndims, keep != 0);
        if (shapes[s].nd >= 2) { /* transposed, and a strided window */
            ct_tensor *t = ct_transpose(a, 0, shapes[s].nd - 1), *gt = ct_transpose(g, 0, shapes[s].nd - 1);
            agree(c, "transposed", dt, t, gt, shapes[s].dims, shapes[s].ndims, false);
            int last = shapes[s].nd - 1;
            int64_t len = shapes[s].shape[last];
            agree(c, "strided", dt, ct_slice(a, last, 0, len, 2), ct_slice(g, last, 0, len, 2), shapes[s].dims,
                  shapes[s].ndims, false);
        }
    }
    /* broadcast input (stride 0) */
    ct_tensor *col = values(CT_SHAPE(50, 1), dt, c->lo, c->hi, 90);
    ct_tensor *ex = ct_expand(col, CT_SHAPE(50, 70)), *gex = ct_expand(ct_to_device(col, CUDA0), CT_SHAPE(50, 70));
    agree(c, "expanded", dt, ex, gex, CT_INDEX(1), 1, false);
    agree(c, "expanded", dt, ex, gex, CT_INDEX(0), 1, true);
    ct_scope_end();
}

static void test_reductions(void **state) {
    (void)state;
    for (int o = 0; o < NCASES; o++)
        for (int d = 0; d < NDT; d++)
            if (cases[o].dtypes & DTB(all_dtypes[d]))
                run_case(&cases[o], all_dtypes[d]);
}

/* Long reductions take the chunked path (few outputs) and the block-per-output path;
 * integer sums must be exact, float ones close. */
static void test_large(void **state) {
    (void)state;
    ct_scope_begin();
    const int64_t N = ct_test_size(3000000, 300000);
    ct_tensor *f = values(CT_SHAPE(N), CT_F32, -1, 1, 91);
    ct_tensor *gf = ct_to_device(f, CUDA0);
    CT_AGREE("sum N", ct_sum(f, NULL, 0, false, CT_DTYPE_UNDEFINED), ct_sum(gf, NULL, 0, false, CT_DTYPE_UNDEFINED), 8);
    CT_AGREE("amax N", ct_amax(f, NULL, 0, false), ct_amax(gf, NULL, 0, false), 0);
    CT_AGREE("argmax N", ct_argmax(f), ct_argmax(gf), 0);
    CT_AGREE("var N", ct_var(f, NULL, 0, 1.0, false), ct_var(gf, NULL, 0, 1.0, false), 8);
    CT_AGREE("norm N", ct_linalg_vector_norm(f, 2.0, NULL, 0, false, CT_DTYPE_UNDEFINED),
             ct_linalg_vector_norm(gf, 2.0, NULL, 0, false, CT_DTYPE_UNDEFINED), 8);
    CT_AGREE("logsumexp N", ct_logsumexp(f, NULL, 0, false), ct_logsumexp(gf, NULL, 0, false), 8);
    ct_tensor *i = values(CT_SHAPE(N), CT_I64, -1000000, 1000000, 92);
    ct_tensor *gi = ct_to_device(i, CUDA0);
    CT_AGREE("int sum N", ct_sum(i, NULL, 0, false, CT_DTYPE_UNDEFINED), ct_sum(gi, NULL, 0, false, CT_DTYPE_UNDEFINED), 0);
    CT_AGREE("int prod N (wraps)", ct_prod(i, NULL, 0, false, CT_DTYPE_UNDEFINED),
             ct_prod(gi, NULL, 0, false, CT_DTYPE_UNDEFINED), 0);
    /* few outputs with the kept dim innermost: a thread per output, chunked */
    ct_tensor *m = values(CT_SHAPE(200000, 4), CT_F64, -1, 1, 93);
    ct_tensor *gm = ct_to_device(m, CUDA0);
    CT_AGREE("sum dim 0 of (200000, 4)", ct_sum(m, CT_INDEX(0), 1, false, CT_DTYPE_UNDEFINED),
             ct_sum(gm, CT_INDEX(0), 1, false, CT_DTYPE_UNDEFINED), 8);
    ct_tensor *vals[2], *gvals[2];
    CT_ASSERT_OK(ct_min_dim(m, 0, false, &vals[0], &vals[1]) == CT_OK ? vals[0] : NULL);
    CT_ASSERT_OK(ct_min_dim(gm, 0, false, &gvals[0], &gvals[1]) == CT_OK ? gvals[0] : NULL);
    CT_AGREE("min dim 0 values", vals[0], gvals[0], 0);
    CT_AGREE("min dim 0 indices", vals[1], gvals[1], 0);
    /* many short rows, and rows long enough for a block each */
    ct_tensor *w = values(CT_SHAPE(1000, 5000), CT_BF16, -3, 3, 94);
    ct_tensor *gw = ct_to_device(w, CUDA0);
    CT_AGREE("mean rows of (1000, 5000) bf16", ct_mean(w, CT_INDEX(1), 1, false, CT_DTYPE_UNDEFINED),
             ct_mean(gw, CT_INDEX(1), 1, false, CT_DTYPE_UNDEFINED), 2);
    CT_AGREE("std rows of (1000, 5000) bf16", ct_std(w, CT_INDEX(1), 1, 1.0, true), ct_std(gw, CT_INDEX(1), 1, 1.0, true), 2);
    /* Unit-stride runs are read in 16-byte vectors: starts off a vector boundary, runs
     * that are not a whole number of vectors, the first NaN or tie inside a vector. */
    for (int64_t off = 0; off < 4; off++) {
        ct_tensor *v = ct_slice(f, 0, off, N - 2 * off + 1, 1), *gv = ct_slice(gf, 0, off, N - 2 * off + 1, 1);
        CT_AGREE("sum of an offset run", ct_sum(v, NULL, 0, false, CT_DTYPE_UNDEFINED),
                 ct_sum(gv, NULL, 0, false, CT_DTYPE_UNDEFINED), 8);
        CT_AGREE("argmin of an offset run", ct_argmin(v), ct_argmin(gv), 0);
        ct_tensor *iv = ct_slice(i, 0, off, N / 3 + 3, 1), *giv = ct_slice(gi, 0, off, N / 3 + 3, 1);
        CT_AGREE("int sum of an offset run", ct_sum(iv, NULL, 0, false, CT_DTYPE_UNDEFINED),
                 ct_sum(giv, NULL, 0, false, CT_DTYPE_UNDEFINED), 0);
        ct_tensor *rows = ct_slice(ct_view(ct_slice(f, 0, 0, N - 3, 1), CT_SHAPE(3, N / 3 - 1)), 1, off, N / 3 - 1, 1);
        ct_tensor *grows = ct_slice(ct_view(ct_slice(gf, 0, 0, N - 3, 1), CT_SHAPE(3, N / 3 - 1)), 1, off, N / 3 - 1, 1);
        CT_AGREE("amax of offset rows", ct_amax(rows, CT_INDEX(1), 1, false), ct_amax(grows, CT_INDEX(1), 1, false), 0);
    }
    /* A broadcast kept dim (stride 0) over a unit-stride reduced one: a thread per
     * output, each run cut into chunks whose starts fall off 16-byte boundaries (the
     * unaligned head of a chunk is several elements), in every floating dtype; and the
     * narrow dtypes read as they are (Note [Narrow reduction inputs]). */
    const ct_dtype fdt[4] = {CT_F16, CT_BF16, CT_F32, CT_F64};
    for (int k = 0; k < 4; k++) {
        ct_tensor *row = ct_to_dtype(ct_slice(f, 0, 1, N / 7 + 1, 1), fdt[k]);
        ct_tensor *e = ct_expand(ct_unsqueeze(row, 0), CT_SHAPE(3, N / 7));
        ct_tensor *ge = ct_expand(ct_unsqueeze(ct_to_device(row, CUDA0), 0), CT_SHAPE(3, N / 7));
        CT_AGREE("sum of broadcast rows", ct_sum(e, CT_INDEX(1), 1, false, CT_DTYPE_UNDEFINED),
                 ct_sum(ge, CT_INDEX(1), 1, false, CT_DTYPE_UNDEFINED), 8);
        CT_AGREE("amax of broadcast rows", ct_amax(e, CT_INDEX(1), 1, false), ct_amax(ge, CT_INDEX(1), 1, false), 0);
        ct_tensor *col = ct_slice(row, 0, 0, N / 7, 3), *gcol = ct_slice(ct_to_device(row, CUDA0), 0, 0, N / 7, 3);
        CT_AGREE("sum of a strided column", ct_sum(col, NULL, 0, false, CT_DTYPE_UNDEFINED),
                 ct_sum(gcol, NULL, 0, false, CT_DTYPE_UNDEFINED), 8);
    }
    ct_tensor *nan_at = ct_clone(f);
    ct_fill_(ct_slice(nan_at, 0, N / 3 + 1, N / 3 + 2, 1), ct_scalar_float(NAN));
    ct_fill_(ct_slice(nan_at, 0, 2 * N / 3 + 5, 2 * N / 3 + 6, 1), ct_scalar_float(NAN));
    CT_AGREE("argmax finds the first NaN", ct_argmax(nan_at), ct_argmax(ct_to_device(nan_at, CUDA0)), 0);
    ct_scope_end();
}

/* Sums over the rows of (R, n) matrices take the column tile kernel (Note [Column
 * sums] in src/cuda/reduce.cu): a partial tile of columns, several tiles, one chunk
 * (R < 64) and many, a sum over the middle dim of a 3-d tensor, the mean, and views
 * the tiles refuse (columns off a 16-byte boundary, a row stride not a whole number
 * of vectors); each within rounding of the CPU and the same bits on a second run. */
static void test_column_sums(void **state) {
    (void)state;
    ct_scope_begin();
    const ct_dtype dts[3] = {CT_BF16, CT_F16, CT_F32};
    const int64_t shapes[][2] = {{5000, 72}, {4099, 768}, {40, 2304}, {ct_test_size(32768, 3000), 384}, {2, 8}};
    for (int k = 0; k < 3; k++)
        for (size_t q = 0; q < sizeof shapes / sizeof shapes[0]; q++) {
            ct_tensor *a = values(CT_SHAPE(shapes[q][0], shapes[q][1]), dts[k], -2, 2, 200 + q);
            ct_tensor *ga = ct_to_device(a, CUDA0);
            ct_tensor *s1 = ct_sum(ga, CT_INDEX(0), 1, false, CT_DTYPE_UNDEFINED);
            CT_AGREE("column sums", ct_sum(a, CT_INDEX(0), 1, false, CT_DTYPE_UNDEFINED), s1, 4);
            CT_ASSERT_CLOSE(ct_sum(ga, CT_INDEX(0), 1, false, CT_DTYPE_UNDEFINED), ct_to_device(s1, CT_CPU), 0, 0,
                            "column sums repeat");
            CT_AGREE("column means, float32 out", ct_mean(a, CT_INDEX(0), 1, true, CT_F32),
                     ct_mean(ga, CT_INDEX(0), 1, true, CT_F32), 4);
            /* the columns of a slice: one vector in (aligned) and one element in (not) */
            int64_t n = shapes[q][1], v = 16 / (int64_t)ct_dtype_size(dts[k]);
            if (n > 2 * v) {
                ct_tensor *sa = ct_narrow(a, 1, v, n - 2 * v), *sg = ct_narrow(ga, 1, v, n - 2 * v);
                CT_AGREE("column sums of a slice", ct_sum(sa, CT_INDEX(0), 1, false, CT_DTYPE_UNDEFINED),
                         ct_sum(sg, CT_INDEX(0), 1, false, CT_DTYPE_UNDEFINED), 4);
                sa = ct_narrow(a, 1, 1, n - v), sg = ct_narrow(ga, 1, 1, n - v);
                CT_AGREE("column sums off a vector boundary", ct_sum(sa, CT_INDEX(0), 1, false, CT_DTYPE_UNDEFINED),
                         ct_sum(sg, CT_INDEX(0), 1, false, CT_DTYPE_UNDEFINED), 4);
            }
        }
    /* (4, 700, 64): the middle dim, kept dims outside and inside */
    ct_tensor *t = values(CT_SHAPE(4, 700, 64), CT_BF16, -2, 2, 230);
    ct_tensor *gt = ct_to_device(t, CUDA0);
    CT_AGREE("sum over the middle dim", ct_sum(t, CT_INDEX(1), 1, false, CT_DTYPE_UNDEFINED),
             ct_sum(gt, CT_INDEX(1), 1, false, CT_DTYPE_UNDEFINED), 4);
    /* rows of 36 float32 (144 bytes: not a whole number of 16-byte vectors apart) */
    ct_tensor *u = ct_narrow(values(CT_SHAPE(3000, 36), CT_F32, -2, 2, 231), 1, 0, 32);
    CT_AGREE("rows 144 bytes apart", ct_sum(u, CT_INDEX(0), 1, false, CT_DTYPE_UNDEFINED),
             ct_sum(ct_test_to_device_as(u, CUDA0), CT_INDEX(0), 1, false, CT_DTYPE_UNDEFINED), 4);
    ct_scope_end();
}

/* cumsum over a few long rows runs chunked in parallel (Note [Parallel cumsum]):
 * integers exact, floats within rounding. */
static void test_long_cumsum(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *i = values(CT_SHAPE(ct_test_size(1000003, 100003)), CT_I64, -1000000, 1000000, 95);
    CT_AGREE("int cumsum long", ct_cumsum(i, 0, CT_DTYPE_UNDEFINED),
             ct_cumsum(ct_to_device(i, CUDA0), 0, CT_DTYPE_UNDEFINED), 0);
    ct_tensor *b = ct_gt_scalar(values(CT_SHAPE(3, ct_test_size(70001, 9001)), CT_F32, -1, 1, 96), ct_scalar_float(0.2));
    CT_AGREE("bool cumsum rows", ct_cumsum(b, 1, CT_DTYPE_UNDEFINED),
             ct_cumsum(ct_to_device(b, CUDA0), 1, CT_DTYPE_UNDEFINED), 0);
    ct_tensor *f = values(CT_SHAPE(5, ct_test_size(40000, 9000)), CT_F32, 0, 1, 97);
    CT_AGREE("float cumsum rows", ct_cumsum(f, 1, CT_DTYPE_UNDEFINED),
             ct_cumsum(ct_to_device(f, CUDA0), 1, CT_DTYPE_UNDEFINED), 8);
    CT_AGREE("float cumsum strided rows", ct_cumsum(ct_t(f), 0, CT_F64),
             ct_cumsum(ct_t(ct_to_device(f, CUDA0)), 0, CT_F64), 8);
    ct_tensor *h = values(CT_SHAPE(2, 3000), CT_F16, -1, 1, 98);
    CT_AGREE("half cumsum rows", ct_cumsum(h, 1, CT_DTYPE_UNDEFINED),
             ct_cumsum(ct_to_device(h, CUDA0), 1, CT_DTYPE_UNDEFINED), 4);
    /* softmax rows that are not a whole number of vectors take the element kernel */
    ct_tensor *r = values(CT_SHAPE(7, 4099), CT_F32, -10, 10, 99);
    CT_AGREE("softmax odd rows", ct_softmax(r, 1, CT_DTYPE_UNDEFINED),
             ct_softmax(ct_to_device(r, CUDA0), 1, CT_DTYPE_UNDEFINED), 4);
    ct_tensor *q = values(CT_SHAPE(9, 4096), CT_F64, -10, 10, 100);
    CT_AGREE("log_softmax dense rows", ct_log_softmax(q, 1, CT_DTYPE_UNDEFINED),
             ct_log_softmax(ct_to_device(q, CUDA0), 1, CT_DTYPE_UNDEFINED), 4);
    ct_scope_end();
}

/* Index ties resolve to the first index, NaN wins with its first index, across the
 * chunks of a long reduction too. */
static void test_ties_and_nan(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *z = ct_zeros(CT_SHAPE(2000000), CT_F32, CT_CPU);
    ct_tensor *gz = ct_to_device(z, CUDA0);
    CT_AGREE("argmax all equal", ct_argmax(z), ct_argmax(gz), 0);
    CT_AGREE("argmin all equal", ct_argmin(z), ct_argmin(gz), 0);
    int64_t k[1];
    float *p = ct_tensor_data(z);
    p[1500000] = 5.0f;
    p[1700000] = 5.0f;
    p[1200000] = NAN;
    p[1900000] = NAN;
    gz = ct_to_device(z, CUDA0);
    CT_AGREE("argmax NaN first", ct_argmax(z), ct_argmax(gz), 0);
    k[0] = 0;
    CT_AGREE("amax NaN", ct_amax(z, k, 1, false), ct_amax(gz, k, 1, false), 0);
    CT_AGREE("sum NaN", ct_sum(z, NULL, 0, false, CT_DTYPE_UNDEFINED), ct_sum(gz, NULL, 0, false, CT_DTYPE_UNDEFINED), 0);
    CT_AGREE("nansum", ct_nansum(z, NULL, 0, false, CT_DTYPE_UNDEFINED), ct_nansum(gz, NULL, 0, false, CT_DTYPE_UNDEFINED), 8);
    CT_AGREE("nanmean", ct_nanmean(z, NULL, 0, false, CT_DTYPE_UNDEFINED),
             ct_nanmean(gz, NULL, 0, false, CT_DTYPE_UNDEFINED), 8);
    /* ties within rows, for max/min with indices over each dim */
    ct_tensor *t = ct_to_dtype(values(CT_SHAPE(30, 40, 50), CT_I32, 0, 3, 95), CT_F16);
    ct_tensor *gt = ct_to_device(t, CUDA0);
    for (int d = 0; d < 3; d++) {
        ct_tensor *v, *ix, *gv, *gix;
        CT_ASSERT_OK(ct_max_dim(t, d, d == 1, &v, &ix) == CT_OK ? v : NULL);
        CT_ASSERT_OK(ct_max_dim(gt, d, d == 1, &gv, &gix) == CT_OK ? gv : NULL);
        CT_AGREE("max_dim values", v, gv, 0);
        CT_AGREE("max_dim indices", ix, gix, 0);
        CT_AGREE("argmin_dim", ct_argmin_dim(t, d, false), ct_argmin_dim(gt, d, false), 0);
    }
    CT_AGREE("max full", ct_max(t), ct_max(gt), 0);
    /* logsumexp with infinities: all -inf gives -inf, an inf gives inf */
    double inf_rows[] = {-INFINITY, -INFINITY, -INFINITY, 1.0, INFINITY, 2.0, NAN, 1.0, 0.0};
    ct_tensor *li = ct_from_data(inf_rows, CT_SHAPE(3, 3), CT_F64);
    CT_AGREE("logsumexp infinities", ct_logsumexp(li, CT_INDEX(1), 1, false),
             ct_logsumexp(ct_to_device(li, CUDA0), CT_INDEX(1), 1, false), 0);
    ct_tensor *vv, *vm, *gvv, *gvm;
    ct_tensor *s = values(CT_SHAPE(8, 300), CT_F32, -4, 4, 96);
    CT_ASSERT_OK(ct_var_mean(s, CT_INDEX(1), 1, 1.0, false, &vv, &vm) == CT_OK ? vv : NULL);
    CT_ASSERT_OK(ct_std_mean(ct_to_device(s, CUDA0), CT_INDEX(1), 1, 1.0, false, &gvv, &gvm) == CT_OK ? gvv : NULL);
    CT_AGREE("std_mean std", ct_sqrt(vv), gvv, 8);
    CT_AGREE("std_mean mean", vm, gvm, 8);
    ct_scope_end();
}

static void test_out_and_errors(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *a = ct_to_device(values(CT_SHAPE(4, 6), CT_F32, -3, 3, 97), CUDA0);
    ct_tensor *out = ct_empty(CT_SHAPE(4), CT_F64, CUDA0);
    CT_ASSERT_OK(ct_sum_out(a, CT_INDEX(1), 1, false, CT_DTYPE_UNDEFINED, out));
    CT_AGREE("sum_out float64", ct_sum(ct_to_device(a, CT_CPU), CT_INDEX(1), 1, false, CT_F64), out, 8);
    CT_ASSERT_ERR(ct_sum_out(a, CT_INDEX(1), 1, false, CT_DTYPE_UNDEFINED, ct_empty(CT_SHAPE(4), CT_F32, CT_CPU)) != NULL,
                  CT_ERROR_DEVICE, "the output is on cpu");
    ct_tensor *e = ct_to_device(ct_zeros(CT_SHAPE(0, 3), CT_F32, CT_CPU), CUDA0);
    CT_ASSERT_ERR(ct_amax(e, CT_INDEX(0), 1, false) != NULL, CT_ERROR_INDEX, "Expected reduction dim 0 to have non-zero size");
    CT_ASSERT_ERR(ct_argmax(e) != NULL, CT_ERROR_INDEX, "numel() == 0");
    CT_ASSERT_ERR(ct_var(ct_to_device(ct_ones(CT_SHAPE(3), CT_I32, CT_CPU), CUDA0), NULL, 0, 1.0, false) != NULL,
                  CT_ERROR_TYPE, "std and var only support floating point");
    CT_ASSERT_ERR(ct_amax(ct_to_device(ct_ones(CT_SHAPE(3), CT_U64, CT_CPU), CUDA0), NULL, 0, false) != NULL,
                  CT_ERROR_TYPE, "UInt64");
    CT_ASSERT_ERR(ct_sum(a, CT_INDEX(2), 1, false, CT_DTYPE_UNDEFINED) != NULL, CT_ERROR_INDEX, "Dimension out of range");
    ct_scope_end();
}

/* ------------------------------------------------------------------ scans */

typedef ct_tensor *(*scan_fn)(const ct_tensor *a, int64_t dim);
static ct_tensor *s_cumsum(const ct_tensor *a, int64_t d) { return ct_cumsum(a, d, CT_DTYPE_UNDEFINED); }
static ct_tensor *s_cumprod(const ct_tensor *a, int64_t d) { return ct_cumprod(a, d, CT_DTYPE_UNDEFINED); }
static ct_tensor *s_softmax(const ct_tensor *a, int64_t d) { return ct_softmax(a, d, CT_DTYPE_UNDEFINED); }
static ct_tensor *s_log_softmax(const ct_tensor *a, int64_t d) { return ct_log_softmax(a, d, CT_DTYPE_UNDEFINED); }
static ct_tensor *s_softmax_f64(const ct_tensor *a, int64_t d) { return ct_softmax(a, d, CT_F64); }
static ct_tensor *s_cummax_v(const ct_tensor *a, int64_t d) {
    ct_tensor *v = NULL, *i = NULL;
    return ct_cummax(a, d, &v, &i) == CT_OK ? v : NULL;
}
static ct_tensor *s_cummin_i(const ct_tensor *a, int64_t d) {
    ct_tensor *v = NULL, *i = NULL;
    return ct_cummin(a, d, &v, &i) == CT_OK ? i : NULL;
}

static void test_scans(void **state) {
    (void)state;
    static const struct {
        const char *name;
        scan_fn f;
        uint32_t dtypes;
        double lo, hi;
    } scans[] = {
        {"cumsum", s_cumsum, ALL, -5, 5},          {"cumprod", s_cumprod, ALL, 0.5, 1.5},
        {"cummax values", s_cummax_v, FLOATS | INTS, -3, 3}, {"cummin indices", s_cummin_i, FLOATS | INTS, -3, 3},
        {"softmax", s_softmax, FLOATS, -10, 10},   {"log_softmax", s_log_softmax, FLOATS, -10, 10},
        {"softmax dtype f64", s_softmax_f64, FLOATS | INTS, -10, 10},
    };
    for (size_t k = 0; k < sizeof scans / sizeof scans[0]; k++)
        for (int d = 0; d < NDT; d++) {
            ct_dtype dt = all_dtypes[d];
            if (!(scans[k].dtypes & DTB(dt)))
                continue;
            ct_scope_begin();
            ct_tensor *a = ct_test_special(CT_SHAPE(7, 33, 40), dt, scans[k].lo, scans[k].hi, 98);
            ct_tensor *g = ct_to_device(a, CUDA0);
            for (int dim = -1; dim < 3; dim++) {
                char what[128];
                snprintf(what, sizeof what, "%s dim %d %s", scans[k].name, dim, ct_dtype_name(dt));
                CT_AGREE_ERR(what, scans[k].f(a, dim), scans[k].f(g, dim));
                snprintf(what, sizeof what, "%s transposed dim %d %s", scans[k].name, dim, ct_dtype_name(dt));
                CT_AGREE_ERR(what, scans[k].f(ct_transpose(a, 0, 2), dim), scans[k].f(ct_transpose(g, 0, 2), dim));
            }
            /* rows long enough for a block per row, a 0-d input, an empty one */
            ct_tensor *l = ct_test_special(CT_SHAPE(3, 3000), dt, scans[k].lo, scans[k].hi, 99);
            CT_AGREE_ERR(scans[k].name, scans[k].f(l, 1), scans[k].f(ct_to_device(l, CUDA0), 1));
            ct_tensor *z = ct_test_special(NULL, 0, dt, scans[k].lo, scans[k].hi, 100);
            CT_AGREE_ERR(scans[k].name, scans[k].f(z, 0), scans[k].f(ct_to_device(z, CUDA0), 0));
            ct_tensor *e = ct_zeros(CT_SHAPE(0, 4), dt, CT_CPU);
            CT_AGREE_ERR(scans[k].name, scans[k].f(e, 1), scans[k].f(ct_to_device(e, CUDA0), 1));
            ct_scope_end();
        }
    ct_scope_begin();
    /* a row of -inf gives NaN, as on the CPU; a NaN makes its row NaN */
    float rows[] = {-INFINITY, -INFINITY, 1.0f, NAN, 0.5f, 2.0f};
    ct_tensor *r = ct_from_data(rows, CT_SHAPE(3, 2), CT_F32);
    CT_AGREE("softmax special rows", ct_softmax(r, 1, CT_DTYPE_UNDEFINED),
             ct_softmax(ct_to_device(r, CUDA0), 1, CT_DTYPE_UNDEFINED), 4);
    CT_ASSERT_ERR(ct_softmax(ct_to_device(ct_ones(CT_SHAPE(3), CT_I32, CT_CPU), CUDA0), 0, CT_DTYPE_UNDEFINED) != NULL,
                  CT_ERROR_TYPE, "not implemented for 'Int'");
    ct_scope_end();
}

static void test_foreach_powsum(void **state) {
    (void)state;
    ct_scope_begin();
    const ct_tensor *cpu[3], *gpu[3];
    cpu[0] = values(CT_SHAPE(100, 7), CT_F32, -2, 2, 101);
    cpu[1] = values(CT_SHAPE(3), CT_F32, -2, 2, 102);
    cpu[2] = values(CT_SHAPE(5000), CT_F32, -2, 2, 103);
    for (int i = 0; i < 3; i++)
        gpu[i] = ct_to_device(cpu[i], CUDA0);
    ct_tensor *rc[3], *rg[3];
    assert_int_equal(ct_foreach_powsum(cpu, 3, 2.0, CT_F64, rc), CT_OK);
    assert_int_equal(ct_foreach_powsum(gpu, 3, 2.0, CT_F64, rg), CT_OK);
    for (int i = 0; i < 3; i++)
        CT_AGREE("foreach_powsum", rc[i], rg[i], 8);
    /* mixed float dtypes widened to float32, an empty tensor, order 3 */
    const ct_tensor *mc[4], *mg[4];
    mc[0] = values(CT_SHAPE(70000), CT_F16, -2, 2, 104);
    mc[1] = ct_zeros(CT_SHAPE(0, 5), CT_BF16, CT_CPU);
    mc[2] = ct_t(values(CT_SHAPE(30, 40), CT_F32, -2, 2, 105));
    mc[3] = values(CT_SHAPE(200000), CT_BF16, -2, 2, 106);
    for (int i = 0; i < 4; i++)
        mg[i] = ct_test_to_device_as(mc[i], CUDA0);
    ct_tensor *mrc[4], *mrg[4];
    assert_int_equal(ct_foreach_powsum(mc, 4, 3.0, CT_F32, mrc), CT_OK);
    assert_int_equal(ct_foreach_powsum(mg, 4, 3.0, CT_F32, mrg), CT_OK);
    for (int i = 0; i < 4; i++)
        CT_AGREE("foreach_powsum mixed", mrc[i], mrg[i], 8);
    /* a float16 target narrows: the per-tensor path, same results */
    assert_int_equal(ct_foreach_powsum(mc, 2, 2.0, CT_F16, mrc), CT_OK);
    assert_int_equal(ct_foreach_powsum(mg, 2, 2.0, CT_F16, mrg), CT_OK);
    for (int i = 0; i < 2; i++)
        CT_AGREE("foreach_powsum float16", mrc[i], mrg[i], 8);
    /* tensors on different devices take the per-tensor path */
    const ct_tensor *mixed[2] = {mg[0], mc[2]};
    assert_int_equal(ct_foreach_powsum(mixed, 2, 2.0, CT_F64, mrg), CT_OK);
    assert_int_equal(ct_tensor_device(mrg[0]).type, CT_DEVICE_CUDA);
    assert_int_equal(ct_tensor_device(mrg[1]).type, CT_DEVICE_CPU);
    /* errors: integer tensors */
    const ct_tensor *ints[1] = {ct_to_device(ct_ones(CT_SHAPE(3), CT_I32, CT_CPU), CUDA0)};
    CT_ASSERT_ERR(ct_foreach_powsum(ints, 1, 2.0, CT_DTYPE_UNDEFINED, mrg) == CT_OK, CT_ERROR_TYPE,
                  "Expected a floating point or complex tensor as input");
    ct_scope_end();
}

int main(void) {
    int skip = ct_test_require_gpu("test_cuda_reduce");
    if (skip)
        return skip;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reductions),  cmocka_unit_test(test_large),
        cmocka_unit_test(test_ties_and_nan), cmocka_unit_test(test_out_and_errors),
        cmocka_unit_test(test_scans),       cmocka_unit_test(test_foreach_powsum),
        cmocka_unit_test(test_long_cumsum), cmocka_unit_test(test_column_sums),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
