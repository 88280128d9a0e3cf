/* The CPU backend's copies, casts and fills, and its device interface (Note [Device
 * interface] in src/core/device.h): the 13x13 cast loops (one per vector ISA),
 * streaming stores for long runs, and the split of large copies over the threads. */
#include <stdio.h>
#include <string.h>

#include "cpu/cpu_backend.h"
#include "cpu/loop.h"
#include "cpu/stream.h"
#include "cpu/cpu_isa.h"
#include "core/cast.h"
#include "core/device.h"
#include "core/dtype.h"
#include "core/parallel.h"

/* ------------------------------------------------------------------ loops */

void ct_loop2(int ndim, const int64_t *shape, char *dst, const int64_t *dst_strides, size_t dst_esize,
              const char *src, const int64_t *src_strides, size_t src_esize, ct_loop2_fn fn, void *ctx) {
    int64_t sh[CT_MAX_DIMS], ds[CT_MAX_DIMS], ss[CT_MAX_DIMS];
    int n = 0;
    /* Drop size-1 dims, convert to byte strides, then merge neighbours that are
     * contiguous with each other in both operands (innermost last). */
    for (int i = 0; i < ndim; i++) {
        if (shape[i] == 0)
            return;
        if (shape[i] == 1)
            continue;
        sh[n] = shape[i];
        ds[n] = dst_strides[i] * (int64_t)dst_esize;
        ss[n] = src_strides ? src_strides[i] * (int64_t)src_esize : 0;
        if (n > 0 && ds[n - 1] == ds[n] * sh[n] && ss[n - 1] == ss[n] * sh[n]) {
            sh[n - 1] *= sh[n];
            ds[n - 1] = ds[n];
            ss[n - 1] = ss[n];
            continue;
        }
        n++;
    }
    if (n == 0) {
        fn(dst, src, 1, 0, 0, ctx);
        return;
    }
    int64_t idx[CT_MAX_DIMS] = {0};
    int inner = n - 1;
    for (;;) {
        fn(dst, src, sh[inner], ds[inner], ss[inner], ctx);
        int d = inner - 1;
        for (; d >= 0; d--) {
            dst += ds[d];
            src += ss[d];
            if (++idx[d] < sh[d])
                break;
            dst -= ds[d] * sh[d];
            src -= ss[d] * sh[d];
            idx[d] = 0;
        }
        if (d < 0)
            return;
    }
}

/* ------------------------------------------------------------------ casts */


/* Contiguous runs take the same element expression with constant strides, which the
 * compiler turns into a vector loop, once per vector ISA (Note [Loops per ISA] in
 * cpu_isa.h: the float16/bfloat16 and 64-bit conversions vectorize only with AVX2 or
 * AVX-512); the caller never passes overlapping dst and src (copy_ reads an
 * overlapping source through a temporary). */
#define CAST_PARAMS (char *dst, const char *src, int64_t n, int64_t ds, int64_t ss, void *ctx)
#define CAST_ARGS (dst, src, n, ds, ss, ctx)
#define CAST_FN(D, S)                                                                                     \
    CT_LOOP_BODY(cast_##D##_##S, CAST_PARAMS) {                                                           \
        (void)ctx;                                                                                        \
        if (ds == SZ_##D && ss == SZ_##S) {                                                               \
            char *restrict o = dst;                                                                       \
            const char *restrict a = src;                                                                 \
            int64_t i = 0;                                                                                \
            if (ct_stream_wanted(n * (SZ_##D + SZ_##S), o, SZ_##D)) { /* Note [Streaming stores] */       \
                for (; i < n && (uintptr_t)(o + i * SZ_##D) % 64u != 0; i++) /* a short run ends first */  \
                    STORE_##D(o + i * SZ_##D, LOAD_##S(a + i * SZ_##S), ISF_##S);                         \
                for (; i + 64 / SZ_##D <= n; i += 64 / SZ_##D) {                                          \
                    _Alignas(64) char line[64];                                                           \
                    CT_STREAM_SIMD                                                                        \
                    for (int k = 0; k < 64 / SZ_##D; k++)                                                 \
                        STORE_##D(line + k * SZ_##D, LOAD_##S(a + (i + k) * SZ_##S), ISF_##S);            \
                    ct_stream_line(o + i * SZ_##D, line);                                                 \
                }                                                                                         \
                ct_stream_fence();                                                                        \
            }                                                                                             \
            for (; i < n; i++)                                                                            \
                STORE_##D(o + i * SZ_##D, LOAD_##S(a + i * SZ_##S), ISF_##S);                             \
            return;                                                                                       \
        }                                                                                                 \
        for (int64_t i = 0; i < n; i++)                                                                   \
            STORE_##D(dst + i * ds, LOAD_##S(src + i * ss), ISF_##S);                                     \
    }                                                                                                     \
    CT_LOOP_ISA(cast_##D##_##S, CAST_PARAMS, CAST_ARGS)
#define CAST_ROW(D, T)                 \
    CAST_FN(D, CT_DTYPE_BOOL)          \
    CAST_FN(D, CT_DTYPE_UINT8)         \
    CAST_FN(D, CT_DTYPE_INT8)          \
    CAST_FN(D, CT_DTYPE_INT16)         \
    CAST_FN(D, CT_DTYPE_INT32)         \
    CAST_FN(D, CT_DTYPE_INT64)         \
    CAST_FN(D, CT_DTYPE_UINT16)        \
    CAST_FN(D, CT_DTYPE_UINT32)        \
    CAST_FN(D, CT_DTYPE_UINT64)        \
    CAST_FN(D, CT_DTYPE_FLOAT16)       \
    CAST_FN(D, CT_DTYPE_BFLOAT16)      \
    CAST_FN(D, CT_DTYPE_FLOAT32)       \
    CAST_FN(D, CT_DTYPE_FLOAT64)
CT_FOR_EACH_DTYPE(CAST_ROW)

#define CAST_ENTRY(D, S) [S] = cast_##D##_##S,
#define CAST_TABLE_ROW(D, T)               \
    [D] = {CAST_ENTRY(D, CT_DTYPE_BOOL)     \
           CAST_ENTRY(D, CT_DTYPE_UINT8)    \
           CAST_ENTRY(D, CT_DTYPE_INT8)     \
           CAST_ENTRY(D, CT_DTYPE_INT16)    \
           CAST_ENTRY(D, CT_DTYPE_INT32)    \
           CAST_ENTRY(D, CT_DTYPE_INT64)    \
           CAST_ENTRY(D, CT_DTYPE_UINT16)   \
           CAST_ENTRY(D, CT_DTYPE_UINT32)   \
           CAST_ENTRY(D, CT_DTYPE_UINT64)   \
           CAST_ENTRY(D, CT_DTYPE_FLOAT16)  \
           CAST_ENTRY(D, CT_DTYPE_BFLOAT16) \
           CAST_ENTRY(D, CT_DTYPE_FLOAT32)  \
           CAST_ENTRY(D, CT_DTYPE_FLOAT64)},
static const ct_loop2_fn cast_table[CT_DTYPE_COUNT][CT_DTYPE_COUNT] = {CT_FOR_EACH_DTYPE(CAST_TABLE_ROW)};

/* Same-dtype copies move bytes, whatever the dtype: a contiguous run is one memcpy
 * (streamed when long: Note [Streaming stores]). */
#define COPY_SAME_FN(N)                                                                               \
    static void copy_same_##N(char *dst, const char *src, int64_t n, int64_t ds, int64_t ss, void *ctx) { \
        (void)ctx;                                                                                    \
        if (ds == N && ss == N) {                                                                     \
            ct_stream_copy(dst, src, (size_t)n * N);                                                  \
            return;                                                                                   \
        }                                                                                             \
        for (int64_t i = 0; i < n; i++)                                                               \
            memcpy(dst + i * ds, src + i * ss, N);                                                    \
    }
COPY_SAME_FN(1)
COPY_SAME_FN(2)
COPY_SAME_FN(4)
COPY_SAME_FN(8)

/* Note [Hardware half conversion]
 * float32 -> float16 is the one cast whose branch-free software form stays
 * compute-bound even vectorized (about 29 GB/s against 40 for the other casts on two
 * cores). With AVX2 (F16C) or AVX-512 the CPU converts with vcvtps2ph, which rounds to
 * nearest even like the software form, subnormals and overflow to infinity included;
 * only NaN differs (the hardware keeps the payload), so NaN lanes are set to the
 * software form's 0x7e00 with their sign. The results are the same bits
 * (test_loops_isa compares every cast at every level). */
#ifdef CT_ISA_VARIANTS
#include <immintrin.h>
__attribute__((target("avx2,fma,f16c"))) static int64_t f32_to_half_run_avx2(uint16_t *o, const float *a, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_loadu_ps(a + i);
        __m128i h = _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q));
        __m128i nan16 = _mm_packs_epi32(_mm256_castsi256_si128(nan), _mm256_extracti128_si256(nan, 1));
        __m128i fixed = _mm_or_si128(_mm_and_si128(h, _mm_set1_epi16((short)0x8000)), _mm_set1_epi16(0x7e00));
        _mm_storeu_si128((__m128i *)(void *)(o + i), _mm_blendv_epi8(h, fixed, nan16));
    }
    return i;
}
__attribute__((target("avx512f,avx512dq,avx512bw,avx512vl"))) static int64_t f32_to_half_run_avx512(uint16_t *o,
                                                                                                   const float *a,
                                                                                                   int64_t n) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512 v = _mm512_loadu_ps(a + i);
        __m256i h = _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
        __m256i fixed = _mm256_or_si256(_mm256_and_si256(h, _mm256_set1_epi16((short)0x8000)), _mm256_set1_epi16(0x7e00));
        _mm256_storeu_si256((__m256i *)(void *)(o + i), _mm256_mask_blend_epi16(nan, h, fixed));
    }
    return i;
}

static void cast_half_from_f32(char *dst, const char *src, int64_t n, int64_t ds, int64_t ss, void *ctx) {
    int level = ct_cpu_isa_level();
    if (ds == 2 && ss == 4 && level > 0) {
        int64_t done = level == CT_ISA_AVX512 ? f32_to_half_run_avx512((uint16_t *)(void *)dst, (const float *)(const void *)src, n)
                                  : f32_to_half_run_avx2((uint16_t *)(void *)dst, (const float *)(const void *)src, n);
        dst += done * 2;
        src += done * 4;
        n -= done;
    }
    cast_CT_DTYPE_FLOAT16_CT_DTYPE_FLOAT32(dst, src, n, ds, ss, ctx);
}
#endif

ct_loop2_fn ct_cast_loop(ct_dtype dst, ct_dtype src) {
#ifdef CT_ISA_VARIANTS
    if (dst == CT_DTYPE_FLOAT16 && src == CT_DTYPE_FLOAT32)
        return cast_half_from_f32;
#endif
    if (dst != src)
        return cast_table[dst][src];
    switch (ct_dtype_size(dst)) {
    case 1: return copy_same_1;
    case 2: return copy_same_2;
    case 4: return copy_same_4;
    default: return copy_same_8;
    }
}

/* ------------------------------------------------------------------ copies */

/* Note [Parallel copies]
 * A CPU copy of at least CT_COPY_GRAIN elements is split over the threads, as PyTorch
 * splits its copies (its grain is 32768 elements too): one core cannot saturate memory
 * bandwidth, and a cast is compute-bound besides. When dst is contiguous and src walks
 * memory the same way (same strides, no broadcast), the copy is one flat run cut into
 * pieces (a few per thread, claimed as in Note [Threads on a busy machine]), each a memcpy for equal dtypes or a contiguous cast loop; otherwise the
 * outermost dimension left after coalescing is cut. Every element is converted on its
 * own, so the split never changes a result. Inside a parallel region (an op already
 * running on the threads) the copy stays on the calling thread. */
#define CT_COPY_GRAIN 32768

/* Pieces worth cutting n elements into (1: run here), a few per thread
 * (CT_CHUNKS_PER_THREAD); *nth gets the thread count. */
static int copy_pieces(int64_t n, int *nth) {
    *nth = ct_get_num_threads();
    if (n < CT_COPY_GRAIN || *nth < 2)
        return 1;
    int64_t chunks = n / (CT_COPY_GRAIN / 2), most = (int64_t)CT_CHUNKS_PER_THREAD * *nth;
    return (int)(chunks < most ? chunks : most);
}

/* Is src (with the broadcast strides sstr) laid out like the contiguous dst? */
static bool same_flat_layout(const ct_tensor *dst, const int64_t *sstr) {
    if (!ct_tensor_is_contiguous(dst))
        return false;
    int64_t expected = 1;
    for (int i = dst->ndim - 1; i >= 0; i--) {
        if (dst->shape[i] != 1 && sstr[i] != expected)
            return false;
        expected *= dst->shape[i];
    }
    return true;
}

typedef struct {
    char *dst;
    const char *src;
    int64_t n;
    size_t desz, sesz;
    ct_loop2_fn fn;
    int pieces;
    const ct_tensor *dt;
    const int64_t *sstr;
    int outer;
    const char *one;
} copy_job;

/* Piece c of pieces over n elements: boundaries on multiples of 64 elements keep each
 * piece's stores to whole cache lines of its own. */
static void piece_bounds(int64_t n, int64_t c, int pieces, int64_t *b, int64_t *e) {
    *b = (n * c / pieces) & ~(int64_t)63;
    *e = c == pieces - 1 ? n : (n * (c + 1) / pieces) & ~(int64_t)63;
}

static void copy_flat_piece(void *ctx, int64_t c) {
    const copy_job *j = ctx;
    int64_t b, e;
    piece_bounds(j->n, c, j->pieces, &b, &e);
    if (e > b)
        j->fn(j->dst + b * (int64_t)j->desz, j->src + b * (int64_t)j->sesz, e - b, (int64_t)j->desz,
              (int64_t)j->sesz, NULL);
}

static void copy_flat(char *dst, const char *src, int64_t n, size_t desz, size_t sesz, ct_loop2_fn fn) {
    int nth, pieces = copy_pieces(n, &nth);
    if (pieces <= 1) {
        fn(dst, src, n, (int64_t)desz, (int64_t)sesz, NULL);
        return;
    }
    copy_job j = {.dst = dst, .src = src, .n = n, .desz = desz, .sesz = sesz, .fn = fn, .pieces = pieces};
    ct_parallel_for(pieces, nth, copy_flat_piece, &j);
}

static void copy_strided_piece(void *ctx, int64_t c) {
    const copy_job *j = ctx;
    const ct_tensor *dst = j->dt;
    int outer = j->outer;
    int64_t len = dst->shape[outer];
    int64_t b = len * c / j->pieces, e = len * (c + 1) / j->pieces;
    int64_t shape[CT_MAX_DIMS];
    memcpy(shape, dst->shape, sizeof(int64_t) * (size_t)dst->ndim);
    shape[outer] = e - b;
    ct_loop2(dst->ndim, shape, j->dst + b * dst->strides[outer] * (int64_t)j->desz, dst->strides, j->desz,
             j->src + b * j->sstr[outer] * (int64_t)j->sesz, j->sstr, j->sesz, j->fn, NULL);
}

/* The general N-d copy, its outermost dimension split over the threads. */
static void copy_strided(const ct_tensor *dst, const ct_tensor *src, const int64_t *sstr, ct_loop2_fn fn) {
    size_t desz = ct_dtype_size(dst->dtype), sesz = ct_dtype_size(src->dtype);
    char *dp = ct_tensor_ptr(dst);
    const char *sp = ct_tensor_ptr(src);
    int nth, pieces = copy_pieces(dst->numel, &nth);
    /* the outermost dimension of more than one element */
    int outer = 0;
    while (outer < dst->ndim && dst->shape[outer] == 1)
        outer++;
    if (pieces > 1 && outer < dst->ndim && dst->shape[outer] < pieces)
        pieces = (int)dst->shape[outer];
    if (pieces <= 1 || outer >= dst->ndim) {
        ct_loop2(dst->ndim, dst->shape, dp, dst->strides, desz, sp, sstr, sesz, fn, NULL);
        return;
    }
    copy_job j = {.dst = dp, .src = sp, .desz = desz, .sesz = sesz, .fn = fn, .pieces = pieces, .dt = dst,
                  .sstr = sstr, .outer = outer};
    ct_parallel_for(pieces, nth, copy_strided_piece, &j);
}

static ct_status cpu_copy(ct_tensor *dst, const ct_tensor *src, const int64_t *src_strides) {
    ct_loop2_fn fn = ct_cast_loop(dst->dtype, src->dtype);
    if (same_flat_layout(dst, src_strides))
        copy_flat(ct_tensor_ptr(dst), ct_tensor_ptr(src), dst->numel, ct_dtype_size(dst->dtype),
                  ct_dtype_size(src->dtype), fn);
    else
        copy_strided(dst, src, src_strides, fn);
    return CT_OK;
}

/* ------------------------------------------------------------------ fills */

static void fill_bytes(char *dst, const char *src, int64_t n, int64_t ds, int64_t ss, void *ctx) {
    (void)ss;
    size_t esz = (size_t)(uintptr_t)ctx;
    for (int64_t i = 0; i < n; i++)
        memcpy(dst + i * ds, src, esz);
}

/* A contiguous run of n elements of esz bytes, each set to the bytes at one. */
static void fill_run(char *p, int64_t n, const char *one, size_t esz) {
    bool zero = true;
    for (size_t i = 0; i < esz; i++)
        zero = zero && one[i] == 0;
    if (zero || esz == 1) {
        memset(p, zero ? 0 : one[0], (size_t)n * esz);
        return;
    }
    /* typed stores of a constant vectorise; one memcpy per element does not */
    if (esz == 2) {
        uint16_t v;
        memcpy(&v, one, 2);
        uint16_t *restrict o = (uint16_t *)p;
        CT_CONTIG_RUN(uint16_t, o, n, 2, i, ((void)i, v));
    } else if (esz == 4) {
        uint32_t v;
        memcpy(&v, one, 4);
        uint32_t *restrict o = (uint32_t *)p;
        CT_CONTIG_RUN(uint32_t, o, n, 4, i, ((void)i, v));
    } else {
        uint64_t v;
        memcpy(&v, one, 8);
        uint64_t *restrict o = (uint64_t *)p;
        CT_CONTIG_RUN(uint64_t, o, n, 8, i, ((void)i, v));
    }
}

/* Split over the threads above the copy grain, as copies are (Note [Parallel copies]). */
static void fill_piece(void *ctx, int64_t c) {
    const copy_job *j = ctx;
    int64_t b, e;
    piece_bounds(j->n, c, j->pieces, &b, &e);
    if (e > b)
        fill_run(j->dst + b * (int64_t)j->desz, e - b, j->one, j->desz);
}

static void fill_flat(char *p, int64_t n, const char *one, size_t esz) {
    int nth, pieces = copy_pieces(n, &nth);
    if (pieces <= 1) {
        fill_run(p, n, one, esz);
        return;
    }
    copy_job j = {.dst = p, .n = n, .desz = esz, .pieces = pieces, .one = one};
    ct_parallel_for(pieces, nth, fill_piece, &j);
}

static ct_status cpu_fill(ct_tensor *t, const void *value, size_t esz) {
    if (ct_tensor_is_contiguous(t)) {
        fill_flat(ct_tensor_ptr(t), t->numel, value, esz);
    } else {
        ct_loop2(t->ndim, t->shape, ct_tensor_ptr(t), t->strides, esz, value, NULL, 0, fill_bytes,
                 (void *)(uintptr_t)esz);
    }
    return CT_OK;
}

/* ------------------------------------------------------------------ the interface */

static bool cpu_use_device(const char *op, int index) {
    (void)op, (void)index;
    return true;
}

static ct_status cpu_read_element(const ct_tensor *t, int64_t elem_offset, void *out) {
    memcpy(out, ct_tensor_ptr(t) + elem_offset * (int64_t)ct_dtype_size(t->dtype), ct_dtype_size(t->dtype));
    return CT_OK;
}

static ct_status cpu_first_outside_unit(const double *p, int64_t n, int64_t *first, int device_index) {
    (void)device_index;
    *first = -1;
    for (int64_t i = 0; i < n; i++)
        if (!(p[i] >= 0.0 && p[i] <= 1.0)) {
            *first = i;
            break;
        }
    return CT_OK;
}

static const char *cpu_describe(void) {
    static char line[64];
    int n = ct_get_num_threads();
    snprintf(line, sizeof line, "cpu: %d thread%s", n, n == 1 ? "" : "s");
    return line;
}

static const ct_device_iface cpu_iface = {
    .name = "cpu",
    .use_device = cpu_use_device,
    .copy = cpu_copy,
    .fill = cpu_fill,
    .read_element = cpu_read_element,
    .random_fill = ct_cpu_random_fill,
    .first_outside_unit = cpu_first_outside_unit,
    .describe = cpu_describe,
};

void ct_cpu_register_device(void) { ct_device_register(CT_DEVICE_CPU, &cpu_iface); }
