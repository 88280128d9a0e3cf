/* Copies and dtype conversions: copy_, contiguous, clone, to, fill_, item. */
#include <math.h>
#include <string.h>

#include "cpu_isa.h"
#include "dtype.h"
#include "loop.h"
#include "view.h"
#include "cpu/stream.h"
#ifdef CT_HAVE_OPENMP
#include <omp.h>
#endif
#ifdef CT_HAVE_CUDA
#include "cuda/cuda_tensor.h"
#endif

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

bool ct_broadcast_strides(const ct_tensor *src, const int64_t *shape, int ndim, int64_t *out) {
    if (src->ndim > ndim)
        return false;
    int lead = ndim - src->ndim;
    for (int i = 0; i < ndim; i++) {
        if (i < lead) {
            out[i] = 0;
            continue;
        }
        int64_t s = src->shape[i - lead];
        if (s == shape[i])
            out[i] = s == 1 ? 0 : src->strides[i - lead];
        else if (s == 1)
            out[i] = 0;
        else
            return false;
    }
    return true;
}

/* ------------------------------------------------------------------ casts */

/* Note [Casts]
 * Conversions follow PyTorch's CPU casts (checked bit for bit against PyTorch 1.13 by
 * tests/test_dtype.c; docs/dtypes.md lists the rules and the departures):
 * - to bool: x != 0 (NaN is true, -0.0 is false);
 * - between integers: two's-complement wrap-around (modulo 2^N);
 * - float to integer: truncation toward zero. C leaves NaN, inf and out-of-range values
 *   undefined; ctorch defines them as x86-64 PyTorch consistently behaves:
 *     int8, int16, int32: through int32 (the 32-bit truncating instruction): NaN, inf
 *       and values outside int32 become INT32_MIN, then wrap (so 0 for int8/int16);
 *     uint8, int64: through int64 (c10 converts to uint8 via int64 on purpose): NaN,
 *       inf and values outside int64 become INT64_MIN, then wrap;
 *     uint16, uint32 (no such dtypes in PyTorch 1.13): through int64, as uint8;
 *     uint64: values in [2^63, 2^64) convert directly, others as int64.
 * - integer to float: rounded to nearest even; to float16/bfloat16 through float32
 *   (a double rounding, as PyTorch does), and float64 to float16/bfloat16 too.
 * - NaN to bfloat16 is always 0x7fc0 (c10::BFloat16's; PyTorch's vectorised contiguous
 *   float32 path writes 0xffff instead, its strided path 0x7fc0).
 * - same dtype: bytes are moved, never converted, so NaN payloads survive. */
/* Written without branches (both sides of each choice computed, the conversion done on
 * an in-range stand-in) so contiguous loops vectorise. */
static inline int64_t f2i64(double v) {
    int ok = (v > -9223372036854775808.0) & (v < 9223372036854775808.0);
    int64_t r = (int64_t)(ok ? v : 0.0);
    return ok ? r : INT64_MIN;
}
static inline int32_t f2i32(double v) {
    int ok = (v > -2147483649.0) & (v < 2147483648.0);
    int32_t r = (int32_t)(ok ? v : 0.0);
    return ok ? r : INT32_MIN;
}
/* The same for a float value: no float lies between -2^31 - 1 and -2^31, and staying in
 * float lets the loop convert four lanes per instruction instead of two. */
static inline int32_t f2i32f(float v) {
    int ok = (v >= -2147483648.0f) & (v < 2147483648.0f);
    int32_t r = (int32_t)(ok ? v : 0.0f);
    return ok ? r : INT32_MIN;
}
static inline uint64_t f2u64(double v) {
    if (v >= 9223372036854775808.0 && v < 18446744073709551616.0)
        return (uint64_t)v;
    return (uint64_t)f2i64(v);
}

/* Note [Branch-free half conversions]
 * The cast loops inline their own float16/bfloat16 conversions instead of calling
 * ct_half_to_float and friends (src/core/dtype.c) per element: every case is computed and
 * the right one selected, so a contiguous loop vectorises. They give the same bits as
 * dtype.c's for every input (tests/test_copy_fast.c checks all 65536 halves and a sweep
 * of floats): round to nearest even, overflow to inf, subnormals, the canonical NaNs
 * float -> half 0x7e00 | sign and float -> bfloat16 0x7fc0, half NaN payloads kept and
 * made quiet. */
static inline uint32_t f32_to_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}
static inline float bits_to_f32(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}
/* c (0 or 1) ? a : b, as masks */
static inline uint32_t pick(uint32_t c, uint32_t a, uint32_t b) { return (a & (0u - c)) | (b & (c - 1u)); }
static inline float half_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t em = (uint32_t)(h & 0x7fffu) << 13; /* exponent and mantissa in float's place */
    uint32_t e = em & 0x0f800000u;
    uint32_t normal = em + 0x38000000u; /* rebias 15 -> 127 */
    /* inf/NaN: exponent all ones; a NaN keeps its payload and gets the quiet bit */
    uint32_t special = em | 0x7f800000u | ((uint32_t)((em & 0x007fe000u) != 0) << 22);
    /* subnormal or zero: mant * 2^-24, exactly, by subtracting 2^-14 from 2^-14 + mant * 2^-24 */
    uint32_t sub = f32_to_bits(bits_to_f32(em + 0x38800000u) - bits_to_f32(0x38800000u));
    uint32_t r = pick(e == 0x0f800000u, special, pick(e == 0, sub, normal));
    return bits_to_f32(sign | r);
}
static inline uint16_t f32_to_half(float f) {
    uint32_t x = f32_to_bits(f);
    uint32_t sign = (x >> 16) & 0x8000u;
    uint32_t ax = x & 0x7fffffffu;
    /* subnormal half: adding 0.5 makes the FPU round at half's subnormal step (2^-24);
     * the input's sign is dropped so -0.0 + 0.5 cannot differ */
    uint32_t sub = f32_to_bits(bits_to_f32(ax) + 0.5f) - 0x3f000000u;
    /* normal: rebias the exponent (-112 << 23) and round to even */
    uint32_t normal = (ax + 0xc8000fffu + ((ax >> 13) & 1u)) >> 13;
    uint32_t r = pick(ax > 0x7f800000u, 0x7e00u, pick(ax >= 0x477ff000u, 0x7c00u, pick(ax < 0x38800000u, sub, normal)));
    return (uint16_t)(sign | r);
}
static inline float bf16_to_f32(uint16_t b) { return bits_to_f32((uint32_t)b << 16); }
static inline uint16_t f32_to_bf16(float f) {
    uint32_t x = f32_to_bits(f);
    uint32_t rounded = (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
    return (uint16_t)pick((x & 0x7fffffffu) > 0x7f800000u, 0x7fc0u, rounded);
}

/* Load to a "compute" value: floats widen to float/double, half types to float. */
#define LOAD_CT_DTYPE_BOOL(p) (*(const uint8_t *)(p) != 0)
#define LOAD_CT_DTYPE_UINT8(p) (*(const uint8_t *)(p))
#define LOAD_CT_DTYPE_INT8(p) (*(const int8_t *)(p))
#define LOAD_CT_DTYPE_INT16(p) (*(const int16_t *)(p))
#define LOAD_CT_DTYPE_INT32(p) (*(const int32_t *)(p))
#define LOAD_CT_DTYPE_INT64(p) (*(const int64_t *)(p))
#define LOAD_CT_DTYPE_UINT16(p) (*(const uint16_t *)(p))
#define LOAD_CT_DTYPE_UINT32(p) (*(const uint32_t *)(p))
#define LOAD_CT_DTYPE_UINT64(p) (*(const uint64_t *)(p))
#define LOAD_CT_DTYPE_FLOAT16(p) half_to_f32(*(const uint16_t *)(p))
#define LOAD_CT_DTYPE_BFLOAT16(p) bf16_to_f32(*(const uint16_t *)(p))
#define LOAD_CT_DTYPE_FLOAT32(p) (*(const float *)(p))
#define LOAD_CT_DTYPE_FLOAT64(p) (*(const double *)(p))

/* Is the source a floating type (needs the float-to-integer rules)? 2: its compute
 * value is a float (float32, float16, bfloat16), 1: a double. */
#define ISF_CT_DTYPE_BOOL 0
#define ISF_CT_DTYPE_UINT8 0
#define ISF_CT_DTYPE_INT8 0
#define ISF_CT_DTYPE_INT16 0
#define ISF_CT_DTYPE_INT32 0
#define ISF_CT_DTYPE_INT64 0
#define ISF_CT_DTYPE_UINT16 0
#define ISF_CT_DTYPE_UINT32 0
#define ISF_CT_DTYPE_UINT64 0
#define ISF_CT_DTYPE_FLOAT16 2
#define ISF_CT_DTYPE_BFLOAT16 2
#define ISF_CT_DTYPE_FLOAT32 2
#define ISF_CT_DTYPE_FLOAT64 1

/* Store a compute value v (of a source that is floating when F is non-zero). */
#define STORE_INT(T, v, F) ((F) ? (T)f2i64((double)(v)) : (T)(v))
#define STORE_INT32(T, v, F) ((F) == 2 ? (T)f2i32f((float)(v)) : (F) ? (T)f2i32((double)(v)) : (T)(v))
#define STORE_CT_DTYPE_BOOL(p, v, F) (*(uint8_t *)(p) = (uint8_t)((v) != 0))
#define STORE_CT_DTYPE_UINT8(p, v, F) (*(uint8_t *)(p) = STORE_INT(uint8_t, v, F))
#define STORE_CT_DTYPE_INT8(p, v, F) (*(int8_t *)(p) = STORE_INT32(int8_t, v, F))
#define STORE_CT_DTYPE_INT16(p, v, F) (*(int16_t *)(p) = STORE_INT32(int16_t, v, F))
#define STORE_CT_DTYPE_INT32(p, v, F) (*(int32_t *)(p) = STORE_INT32(int32_t, v, F))
#define STORE_CT_DTYPE_INT64(p, v, F) (*(int64_t *)(p) = STORE_INT(int64_t, v, F))
#define STORE_CT_DTYPE_UINT16(p, v, F) (*(uint16_t *)(p) = STORE_INT(uint16_t, v, F))
#define STORE_CT_DTYPE_UINT32(p, v, F) (*(uint32_t *)(p) = STORE_INT(uint32_t, v, F))
#define STORE_CT_DTYPE_UINT64(p, v, F) (*(uint64_t *)(p) = (F) ? f2u64((double)(v)) : (uint64_t)(v))
#define STORE_CT_DTYPE_FLOAT16(p, v, F) (*(uint16_t *)(p) = f32_to_half((float)(v)))
#define STORE_CT_DTYPE_BFLOAT16(p, v, F) (*(uint16_t *)(p) = f32_to_bf16((float)(v)))
#define STORE_CT_DTYPE_FLOAT32(p, v, F) (*(float *)(p) = (float)(v))
#define STORE_CT_DTYPE_FLOAT64(p, v, F) (*(double *)(p) = (double)(v))

/* Element sizes, for the contiguous branch's constant strides. */
#define SZ_CT_DTYPE_BOOL 1
#define SZ_CT_DTYPE_UINT8 1
#define SZ_CT_DTYPE_INT8 1
#define SZ_CT_DTYPE_INT16 2
#define SZ_CT_DTYPE_INT32 4
#define SZ_CT_DTYPE_INT64 8
#define SZ_CT_DTYPE_UINT16 2
#define SZ_CT_DTYPE_UINT32 4
#define SZ_CT_DTYPE_UINT64 8
#define SZ_CT_DTYPE_FLOAT16 2
#define SZ_CT_DTYPE_BFLOAT16 2
#define SZ_CT_DTYPE_FLOAT32 4
#define SZ_CT_DTYPE_FLOAT64 8

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
                for (; (uintptr_t)(o + i * SZ_##D) % 64u != 0; i++)                                       \
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

double ct_load_double(const void *p, ct_dtype d) {
    double out = 0;
    cast_table[CT_DTYPE_FLOAT64][d]((char *)&out, p, 1, 0, 0, NULL);
    return out;
}

int64_t ct_load_int64(const void *p, ct_dtype d) {
    int64_t out = 0;
    cast_table[CT_DTYPE_INT64][d]((char *)&out, p, 1, 0, 0, NULL);
    return out;
}

void ct_store_double(void *p, ct_dtype d, double v) { cast_table[d][CT_DTYPE_FLOAT64](p, (const char *)&v, 1, 0, 0, NULL); }

void ct_store_int64(void *p, ct_dtype d, int64_t v) { cast_table[d][CT_DTYPE_INT64](p, (const char *)&v, 1, 0, 0, NULL); }

void ct_store_scalar(void *p, ct_dtype d, ct_scalar s) {
    if (s.type == CT_SCALAR_FLOAT)
        ct_store_double(p, d, s.v.f);
    else if (s.type == CT_SCALAR_INT)
        ct_store_int64(p, d, s.v.i);
    else
        ct_store_int64(p, d, s.v.b ? 1 : 0);
}

/* ------------------------------------------------------------------ copy_ */

static bool ranges_overlap(const ct_tensor *a, const ct_tensor *b) {
    if (a->storage != b->storage || a->numel == 0 || b->numel == 0)
        return false;
    return true; /* conservative: any two views of one storage may overlap */
}

/* Note [Parallel copies]
 * A CPU copy of at least CT_COPY_GRAIN elements is split over the threads, as PyTorch
 * splits its copies (its grain is 32768 elements too): one core cannot saturate memory
 * bandwidth, and a cast is compute-bound besides. When dst is contiguous and src walks
 * memory the same way (same strides, no broadcast), the copy is one flat run cut into
 * equal pieces, each a memcpy for equal dtypes or a contiguous cast loop; otherwise the
 * outermost dimension left after coalescing is cut. Every element is converted on its
 * own, so the split never changes a result. Inside a parallel region (an op already
 * running on the threads) the copy stays on the calling thread. */
#define CT_COPY_GRAIN 32768

/* Threads worth using for n elements (1: run here). */
static int copy_threads(int64_t n) {
#ifdef CT_HAVE_OPENMP
    if (n < CT_COPY_GRAIN || omp_in_parallel())
        return 1;
    int64_t nth = ct_get_num_threads(), chunks = n / (CT_COPY_GRAIN / 2);
    return (int)(chunks < nth ? chunks : nth);
#else
    (void)n;
    return 1;
#endif
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

static void copy_flat(char *dst, const char *src, int64_t n, size_t desz, size_t sesz, ct_loop2_fn fn) {
    int nth = copy_threads(n);
    if (nth <= 1) {
        fn(dst, src, n, (int64_t)desz, (int64_t)sesz, NULL);
        return;
    }
#ifdef CT_HAVE_OPENMP
#pragma omp parallel for num_threads(nth) schedule(static)
    for (int c = 0; c < nth; c++) {
        /* piece boundaries on multiples of 64 elements keep each piece's stores to whole
         * cache lines of its own */
        int64_t b = (n * c / nth) & ~(int64_t)63, e = c == nth - 1 ? n : (n * (c + 1) / nth) & ~(int64_t)63;
        if (e > b)
            fn(dst + b * (int64_t)desz, src + b * (int64_t)sesz, e - b, (int64_t)desz, (int64_t)sesz, NULL);
    }
#endif
}

/* The general N-d copy, its outermost dimension split over the threads. */
static void copy_strided(const ct_tensor *dst, const ct_tensor *src, const int64_t *sstr, ct_loop2_fn fn) {
    size_t desz = ct_dtype_size(dst->dtype), sesz = ct_dtype_size(src->dtype);
    char *dp = ct_tensor_ptr(dst);
    const char *sp = ct_tensor_ptr(src);
    int nth = copy_threads(dst->numel);
    /* the outermost dimension of more than one element */
    int outer = 0;
    while (outer < dst->ndim && dst->shape[outer] == 1)
        outer++;
    if (nth <= 1 || outer >= dst->ndim || dst->shape[outer] < nth) {
        ct_loop2(dst->ndim, dst->shape, dp, dst->strides, desz, sp, sstr, sesz, fn, NULL);
        return;
    }
#ifdef CT_HAVE_OPENMP
    int64_t len = dst->shape[outer];
#pragma omp parallel for num_threads(nth) schedule(static)
    for (int c = 0; c < nth; c++) {
        int64_t b = len * c / nth, e = len * (c + 1) / nth;
        int64_t shape[CT_MAX_DIMS];
        memcpy(shape, dst->shape, sizeof(int64_t) * (size_t)dst->ndim);
        shape[outer] = e - b;
        ct_loop2(dst->ndim, shape, dp + b * dst->strides[outer] * (int64_t)desz, dst->strides, desz,
                 sp + b * sstr[outer] * (int64_t)sesz, sstr, sesz, fn, NULL);
    }
#endif
}

static bool copy_into(ct_tensor *dst, const ct_tensor *src, const int64_t *src_strides) {
#ifdef CT_HAVE_CUDA
    if (dst->device.type == CT_DEVICE_CUDA)
        return ct_cuda_copy_into(dst, src, src_strides) == CT_OK;
#endif
    ct_loop2_fn fn = ct_cast_loop(dst->dtype, src->dtype);
    if (same_flat_layout(dst, src_strides))
        copy_flat(ct_tensor_ptr(dst), ct_tensor_ptr(src), dst->numel, ct_dtype_size(dst->dtype),
                  ct_dtype_size(src->dtype), fn);
    else
        copy_strided(dst, src, src_strides, fn);
    return true;
}

ct_tensor *ct_copy_impl(ct_tensor *dst, const ct_tensor *src) {
    CT_CHECK_ARG("copy_", dst);
    CT_CHECK_ARG("copy_", src);
    int64_t sstr[CT_MAX_DIMS];
    if (!ct_broadcast_strides(src, dst->shape, dst->ndim, sstr)) {
        char a[256], b[256];
        ct_error(CT_ERROR_VALUE, "copy_", "the source of shape %s cannot be broadcast to the destination's shape %s",
                 ct_shape_str(src->shape, src->ndim, a, sizeof a), ct_shape_str(dst->shape, dst->ndim, b, sizeof b));
        return NULL;
    }
#ifdef CT_HAVE_CUDA
    if ((dst->device.type == CT_DEVICE_CUDA || src->device.type == CT_DEVICE_CUDA) &&
        !ct_device_equal(dst->device, src->device)) {
        return ct_cuda_copy_cross(dst, src) == CT_OK ? ct_tensor_ref(dst) : NULL;
    }
#endif
    if (dst->device.type != src->device.type) {
        ct_error(CT_ERROR_DEVICE, "copy_", "copies between device types %d and %d are not supported in this build",
                 (int)src->device.type, (int)dst->device.type);
        return NULL;
    }
    /* The dispatcher bumps dst's version (ct_copy_ is an in-place op). */
    if (dst->device.type == CT_DEVICE_META || dst->numel == 0)
        return ct_tensor_ref(dst);
    if (ranges_overlap(dst, src) && !(dst == src)) {
        /* Read everything before writing anything. */
        ct_scope_begin();
        ct_tensor *tmp = ct_clone_impl(src);
        if (!tmp) {
            ct_scope_end();
            return NULL;
        }
        ct_broadcast_strides(tmp, dst->shape, dst->ndim, sstr);
        bool ok = copy_into(dst, tmp, sstr);
        ct_scope_end();
        if (!ok)
            return NULL;
    } else if (dst != src && !copy_into(dst, src, sstr)) {
        return NULL;
    }
    return ct_tensor_ref(dst);
}

ct_tensor *ct_clone_impl(const ct_tensor *t) {
    CT_CHECK_ARG("clone", t);
    ct_tensor *out = ct_tensor_new("clone", t->shape, NULL, t->ndim, t->dtype, t->device);
    if (!out)
        return NULL;
    if (t->device.type != CT_DEVICE_META && t->numel > 0 && !copy_into(out, t, t->strides))
        return NULL; /* out stays with the scope */
    return out;
}

ct_tensor *ct_contiguous_impl(const ct_tensor *t) {
    CT_CHECK_ARG("contiguous", t);
    if (ct_tensor_is_contiguous(t))
        return ct_tensor_ref(t);
    return ct_clone_impl(t);
}

ct_tensor *ct_to_dtype_impl(const ct_tensor *t, ct_dtype dtype) {
    CT_CHECK_ARG("to", t);
    if (!ct_dtype_valid(dtype)) {
        ct_error(CT_ERROR_TYPE, "to", "invalid dtype %d", (int)dtype);
        return NULL;
    }
    if (dtype == t->dtype)
        return ct_tensor_ref(t);
    ct_tensor *out = ct_tensor_new("to", t->shape, NULL, t->ndim, dtype, t->device);
    if (!out)
        return NULL;
    if (t->device.type != CT_DEVICE_META && t->numel > 0 && !copy_into(out, t, t->strides))
        return NULL; /* out stays with the scope */
    return out;
}

ct_tensor *ct_to_device(const ct_tensor *t, ct_device device) {
    CT_CHECK_ARG("to_device", t);
    if (ct_device_equal(t->device, device))
        return ct_tensor_ref(t);
#ifdef CT_HAVE_CUDA
    if (t->device.type == CT_DEVICE_CUDA || device.type == CT_DEVICE_CUDA)
        return ct_cuda_to_device(t, device);
#endif
    if (!ct_check_device("to_device", device))
        return NULL;
    ct_tensor *out = ct_tensor_new("to_device", t->shape, NULL, t->ndim, t->dtype, device);
    if (!out)
        return NULL;
    if (device.type == CT_DEVICE_CPU && t->device.type == CT_DEVICE_META) {
        ct_error(CT_ERROR_DEVICE, "to_device", "cannot copy out of meta tensor; it has no data");
        return NULL;
    }
    return out; /* CPU -> META keeps only the metadata */
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
static void fill_flat(char *p, int64_t n, const char *one, size_t esz) {
    int nth = copy_threads(n);
    if (nth <= 1) {
        fill_run(p, n, one, esz);
        return;
    }
#ifdef CT_HAVE_OPENMP
#pragma omp parallel for num_threads(nth) schedule(static)
    for (int c = 0; c < nth; c++) {
        int64_t b = (n * c / nth) & ~(int64_t)63, e = c == nth - 1 ? n : (n * (c + 1) / nth) & ~(int64_t)63;
        if (e > b)
            fill_run(p + b * (int64_t)esz, e - b, one, esz);
    }
#endif
}

static bool fill_impl(ct_tensor *t, ct_scalar value) {
    ct_tensor_bump_version(t);
    if (t->device.type == CT_DEVICE_META || t->numel == 0)
        return true;
    char one[16];
    ct_store_scalar(one, t->dtype, value);
    size_t esz = ct_dtype_size(t->dtype);
#ifdef CT_HAVE_CUDA
    if (t->device.type == CT_DEVICE_CUDA)
        return ct_cuda_fill(t, one, esz) == CT_OK;
#endif
    if (ct_tensor_is_contiguous(t)) {
        fill_flat(ct_tensor_ptr(t), t->numel, one, esz);
    } else {
        ct_loop2(t->ndim, t->shape, ct_tensor_ptr(t), t->strides, esz, one, NULL, 0, fill_bytes,
                 (void *)(uintptr_t)esz);
    }
    return true;
}

ct_status ct_check_scalar_fits(const char *op, ct_scalar s, ct_dtype d) {
    /* PyTorch refuses fill values the dtype cannot hold (checked_convert): integers
     * outside the range (for unsigned types, negatives down to -max wrap and are
     * accepted), finite floats beyond the float type's range. NaN and infinities are
     * fine for floating types; bool takes anything. */
    if (d == CT_DTYPE_BOOL)
        return CT_OK;
    double lo, hi;
    switch (d) {
    case CT_DTYPE_UINT8: lo = 0, hi = 255; break;
    case CT_DTYPE_INT8: lo = -128, hi = 127; break;
    case CT_DTYPE_INT16: lo = -32768, hi = 32767; break;
    case CT_DTYPE_INT32: lo = -2147483648.0, hi = 2147483647.0; break;
    case CT_DTYPE_UINT16: lo = 0, hi = 65535; break;
    case CT_DTYPE_UINT32: lo = 0, hi = 4294967295.0; break;
    case CT_DTYPE_INT64: lo = -9223372036854775808.0, hi = 9223372036854775807.0; break;
    case CT_DTYPE_UINT64: lo = 0, hi = 18446744073709551615.0; break;
    case CT_DTYPE_FLOAT16: lo = -65504, hi = 65504; break;
    case CT_DTYPE_BFLOAT16: lo = -3.3895313892515355e38, hi = 3.3895313892515355e38; break;
    case CT_DTYPE_FLOAT32: lo = -3.4028234663852886e38, hi = 3.4028234663852886e38; break;
    default: return CT_OK;
    }
    bool ok;
    if (s.type == CT_SCALAR_INT && ct_dtype_is_integral(d, false)) {
        /* exact integer comparison: doubles cannot hold every int64 */
        int64_t v = s.v.i;
        if (d == CT_DTYPE_INT64 || d == CT_DTYPE_UINT64)
            ok = true;
        else if (!ct_dtype_is_signed(d)) /* unsigned: negatives that wrap are accepted */
            ok = (double)v <= hi && -(double)v <= hi;
        else
            ok = (double)v >= lo && (double)v <= hi;
    } else {
        double v = ct_scalar_to_double(s);
        if (isnan(v) || isinf(v))
            ok = ct_dtype_is_floating(d);
        else if (ct_dtype_is_integral(d, false) && !ct_dtype_is_signed(d))
            ok = v <= hi && -v <= hi;
        else
            ok = v >= lo && v <= hi;
    }
    if (!ok)
        return ct_error(CT_ERROR_VALUE, op, "value cannot be converted to type %s without overflow", ct_dtype_name(d));
    return CT_OK;
}

ct_tensor *ct_fill_(ct_tensor *t, ct_scalar value) {
    CT_CHECK_ARG("fill_", t);
    if (ct_check_scalar_fits("fill_", value, t->dtype))
        return NULL;
    return fill_impl(t, value) ? ct_tensor_ref(t) : NULL;
}

ct_tensor *ct_zero_(ct_tensor *t) { return ct_fill_(t, ct_scalar_int(0)); }

static ct_dtype infer_scalar_dtype(ct_scalar v) {
    return v.type == CT_SCALAR_BOOL ? CT_DTYPE_BOOL : v.type == CT_SCALAR_INT ? CT_DTYPE_INT64 : ct_get_default_dtype();
}

ct_tensor *ct_full(const int64_t *shape, int ndim, ct_scalar value, ct_dtype dtype, ct_device device) {
    if (dtype == CT_DTYPE_UNDEFINED)
        dtype = infer_scalar_dtype(value);
    if (ct_dtype_valid(dtype) && ct_check_scalar_fits("full", value, dtype))
        return NULL;
    ct_tensor *t = ct_tensor_new("full", shape, NULL, ndim, dtype, device);
    if (!t || !fill_impl(t, value))
        return NULL; /* t stays with the scope */
    return t;
}

ct_tensor *ct_zeros(const int64_t *shape, int ndim, ct_dtype dtype, ct_device device) {
    return ct_full(shape, ndim, ct_scalar_int(0), dtype, device);
}
ct_tensor *ct_ones(const int64_t *shape, int ndim, ct_dtype dtype, ct_device device) {
    return ct_full(shape, ndim, ct_scalar_int(1), dtype, device);
}
ct_tensor *ct_scalar_tensor(ct_scalar value, ct_dtype dtype, ct_device device) {
    return ct_full(NULL, 0, value, dtype, device);
}
ct_tensor *ct_zeros_like(const ct_tensor *t, ct_dtype dtype) {
    CT_CHECK_ARG("zeros_like", t);
    return ct_zeros(t->shape, t->ndim, dtype == CT_DTYPE_UNDEFINED ? t->dtype : dtype, t->device);
}
ct_tensor *ct_ones_like(const ct_tensor *t, ct_dtype dtype) {
    CT_CHECK_ARG("ones_like", t);
    return ct_ones(t->shape, t->ndim, dtype == CT_DTYPE_UNDEFINED ? t->dtype : dtype, t->device);
}
ct_tensor *ct_full_like(const ct_tensor *t, ct_scalar value, ct_dtype dtype) {
    CT_CHECK_ARG("full_like", t);
    return ct_full(t->shape, t->ndim, value, dtype == CT_DTYPE_UNDEFINED ? t->dtype : dtype, t->device);
}

/* ------------------------------------------------------------------ elements */

static ct_status element_ptr(const char *op, const ct_tensor *t, const int64_t *index, char **out) {
    CT_CHECK_ARG_STATUS(op, t);
    if (t->device.type != CT_DEVICE_CPU)
        return ct_error(CT_ERROR_DEVICE, op, "element access needs a CPU tensor");
    if (t->ndim > 0 && !index)
        return ct_error(CT_ERROR_NULL_ARGUMENT, op, "index is NULL for a %d-d tensor", t->ndim);
    int64_t off = 0;
    for (int i = 0; i < t->ndim; i++) {
        int64_t k = index[i] < 0 ? index[i] + t->shape[i] : index[i];
        if (k < 0 || k >= t->shape[i])
            return ct_error(CT_ERROR_INDEX, op, "index %lld is out of bounds for dimension %d with size %lld",
                            (long long)index[i], i, (long long)t->shape[i]);
        off += k * t->strides[i];
    }
    *out = ct_tensor_ptr(t) + off * (int64_t)ct_dtype_size(t->dtype);
    return CT_OK;
}

ct_status ct_tensor_get(const ct_tensor *t, const int64_t *index, double *out) {
    char *p = NULL;
    ct_status st = element_ptr("get", t, index, &p);
    if (st == CT_OK)
        *out = ct_load_double(p, t->dtype);
    return st;
}

ct_status ct_tensor_set(ct_tensor *t, const int64_t *index, double value) {
    char *p = NULL;
    ct_status st = element_ptr("set", t, index, &p);
    if (st == CT_OK) {
        ct_store_double(p, t->dtype, value);
        ct_tensor_bump_version(t);
    }
    return st;
}

/* buf (16 bytes) receives the element of a CUDA tensor. */
static ct_status item_ptr(const char *op, const ct_tensor *t, char **p, char *buf) {
    CT_CHECK_ARG_STATUS(op, t);
    if (t->numel != 1)
        return ct_error(CT_ERROR_VALUE, op, "a Tensor with %lld elements cannot be converted to Scalar",
                        (long long)t->numel);
#ifdef CT_HAVE_CUDA
    if (t->device.type == CT_DEVICE_CUDA) {
        *p = buf;
        return ct_cuda_read_element(t, 0, buf);
    }
#else
    (void)buf;
#endif
    if (t->device.type != CT_DEVICE_CPU)
        return ct_error(CT_ERROR_DEVICE, op, "item needs a CPU tensor");
    *p = ct_tensor_ptr(t);
    return CT_OK;
}

ct_status ct_item_double(const ct_tensor *t, double *out) {
    char *p = NULL, buf[16];
    ct_status st = item_ptr("item", t, &p, buf);
    if (st == CT_OK)
        *out = ct_load_double(p, t->dtype);
    return st;
}

ct_status ct_item_int64(const ct_tensor *t, int64_t *out) {
    char *p = NULL, buf[16];
    ct_status st = item_ptr("item", t, &p, buf);
    if (st == CT_OK)
        *out = ct_load_int64(p, t->dtype);
    return st;
}
