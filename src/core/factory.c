/* Sequence factories: arange, linspace, logspace, eye. */
#include <math.h>
#include <string.h>

#include "dtype.h"
#include "factory.h"
#include "tensor_impl.h"

/* Note [Reproducing PyTorch's sequences bit for bit]
 * torch.arange on the CPU does not compute element i as start + i * step. Its loop is
 * vectorized: the output is cut into blocks of one SIMD register (32 bytes on the AVX2
 * and default builds that PyTorch ships), the first element of each block is computed
 * from the index and the rest as base + k * step, and the last (n mod 2*block)
 * elements come from a scalar loop. The kernel is compiled with FMA: the products with
 * the index are fused into their sums, and so are the k * step additions, except in
 * the bfloat16 vector (found by comparing candidate formulas against PyTorch's
 * output). Float16 and bfloat16 arithmetic rounds to the dtype after each operation.
 * torch.linspace (PyTorch 2.x) computes every element from its index, from the nearer
 * end: fused for float32, float64 and the integers (which truncate start and end
 * first), rounded after each operation for float16 and bfloat16.
 *
 * ctorch follows the same recipes with C's fma (correctly rounded, like the hardware
 * instruction), so its results equal PyTorch's bit for bit; the golden test in
 * tests/test_factory.c holds us to it for float64, float32, float16, bfloat16 and
 * int64. ISO C mode (-std=c11) keeps the compiler from fusing the unfused
 * expressions on its own. Two things are not reproduced for arange: the block width
 * of AVX-512 builds (64 bytes), and PyTorch's split of sequences longer than 32768
 * elements into per-thread chunks that restart the blocking (which makes its own
 * result depend on its thread count). ctorch treats the whole tensor as one chunk, so
 * its result never depends on the thread count. */
#define CT_SIMD_BYTES 32

/* Integer-to-double conversion of a scalar as c10::Scalar::to<int64_t> does it, with
 * its overflow check. */
static bool scalar_to_int64(const char *op, ct_scalar s, int64_t *out) {
    if (s.type == CT_SCALAR_INT) {
        *out = s.v.i;
        return true;
    }
    if (s.type == CT_SCALAR_BOOL) {
        *out = s.v.b ? 1 : 0;
        return true;
    }
    double f = s.v.f;
    if (!(f >= -9223372036854775808.0 && f < 9223372036854775808.0)) {
        ct_error(CT_ERROR_VALUE, op, "value cannot be converted to type int64_t without overflow");
        return false;
    }
    *out = (int64_t)f;
    return true;
}

static bool supported_range_dtype(const char *op, const char *kernel, ct_dtype dtype) {
    if (!ct_dtype_valid(dtype)) {
        ct_error(CT_ERROR_TYPE, op, "invalid dtype %d", (int)dtype);
        return false;
    }
    if (dtype == CT_DTYPE_BOOL) {
        ct_error(CT_ERROR_TYPE, op, "\"%s\" not implemented for 'Bool'", kernel);
        return false;
    }
    return true;
}

static inline void store_f(char *p, ct_dtype d, double v) {
    if (d == CT_DTYPE_FLOAT32)
        *(float *)p = (float)v;
    else if (d == CT_DTYPE_FLOAT64)
        *(double *)p = v;
    else
        ct_store_double(p, d, v);
}

/* Float16/bfloat16 arithmetic rounds after every operation, as c10::Half does. */
static inline float round_to(ct_dtype d, float v) {
    return d == CT_DTYPE_FLOAT16 ? ct_half_to_float(ct_float_to_half(v)) : ct_bfloat16_to_float(ct_float_to_bfloat16(v));
}

/* ------------------------------------------------------------------ arange */

static void arange_fill(char *p, ct_dtype d, int64_t n, ct_scalar start, ct_scalar step) {
    size_t esz = ct_dtype_size(d);
    if (ct_dtype_is_integral(d, false)) {
        /* Accumulation in int64; unsigned arithmetic gives the wrap-around PyTorch has. */
        int64_t s0 = 0, st = 0;
        scalar_to_int64("arange", start, &s0);
        scalar_to_int64("arange", step, &st);
        for (int64_t i = 0; i < n; i++)
            ct_store_int64(p + i * (int64_t)esz, d, (int64_t)((uint64_t)s0 + (uint64_t)st * (uint64_t)i));
        return;
    }
    int64_t w = CT_SIMD_BYTES / (int64_t)esz;
    int64_t nv = n / (2 * w) * (2 * w);
    if (d == CT_DTYPE_FLOAT16 || d == CT_DTYPE_BFLOAT16) {
        /* accumulate type float */
        float s0 = (float)ct_scalar_to_double(start), st = (float)ct_scalar_to_double(step);
        for (int64_t b = 0; b < nv; b += w) {
            float base = round_to(d, fmaf(st, (float)b, s0));
            /* PyTorch's AVX2 bfloat16 vector adds k * step unfused; its generic float16
             * vector fuses. */
            for (int64_t k = 0; k < w; k++)
                store_f(p + (b + k) * (int64_t)esz, d,
                        d == CT_DTYPE_BFLOAT16 ? base + (float)k * st : fmaf((float)k, st, base));
        }
        for (int64_t i = nv; i < n; i++)
            store_f(p + i * (int64_t)esz, d, fmaf(st, (float)i, s0));
        return;
    }
    /* float32 and float64 accumulate in double; see Note [Reproducing PyTorch's sequences bit for bit]. */
    double s0 = ct_scalar_to_double(start), st = ct_scalar_to_double(step);
    for (int64_t b = 0; b < nv; b += w) {
        double base = fma(st, (double)b, s0);
        if (d == CT_DTYPE_FLOAT32)
            base = (float)base;
        for (int64_t k = 0; k < w; k++)
            store_f(p + (b + k) * (int64_t)esz, d, fma((double)k, st, base));
    }
    for (int64_t i = nv; i < n; i++)
        store_f(p + i * (int64_t)esz, d, fma(st, (double)i, s0));
}

/* CUDA sequences are computed on the CPU and copied over, so they hold the same values
 * bit for bit; they are small next to what is then computed with them. */
#define CT_SEQUENCE_VIA_CPU(op, device, call)                     \
    do {                                                          \
        if ((device).type == CT_DEVICE_CUDA) {                    \
            if (!ct_check_device(op, device))                     \
                return NULL;                                      \
            ct_scope_begin();                                     \
            ct_tensor *cpu_ = (call);                             \
            ct_tensor *r_ = cpu_ ? ct_to_device_impl(cpu_, device) : NULL; \
            ct_keep(r_);                                          \
            ct_scope_end();                                       \
            return r_;                                            \
        }                                                         \
    } while (0)

static bool scalar_is_float(ct_scalar s) { return s.type == CT_SCALAR_FLOAT; }

ct_tensor *ct_arange_impl(ct_scalar start, ct_scalar end, ct_scalar step, ct_dtype dtype, ct_device device) {
    const char *op = "arange";
    CT_SEQUENCE_VIA_CPU(op, device, ct_arange_impl(start, end, step, dtype, CT_CPU));
    if (dtype == CT_DTYPE_UNDEFINED)
        dtype = scalar_is_float(start) || scalar_is_float(end) || scalar_is_float(step) ? ct_get_default_dtype()
                                                                                        : CT_DTYPE_INT64;
    if (!supported_range_dtype(op, "arange_cpu", dtype))
        return NULL;
    double size_d;
    bool integral = ct_dtype_is_integral(dtype, false);
    int64_t is = 0, ie = 0, ist = 0;
    if (integral && (!scalar_to_int64(op, start, &is) || !scalar_to_int64(op, end, &ie) ||
                     !scalar_to_int64(op, step, &ist)))
        return NULL;
    double ds = ct_scalar_to_double(start), de = ct_scalar_to_double(end), dst = ct_scalar_to_double(step);
    if (dtype == CT_DTYPE_INT64)
        /* int64 keeps the exact difference, as PyTorch does for ranges beyond 2^53 */
        size_d = ceil((double)(int64_t)((uint64_t)ie - (uint64_t)is) / (double)ist);
    else
        size_d = ceil((de - ds) / dst);
    /* The checks run on the values in the accumulate type (truncated for integers). */
    double xs = integral ? (double)is : ds, xe = integral ? (double)ie : de, xst = integral ? (double)ist : dst;
    if (!(xst > 0 || xst < 0)) {
        ct_error(CT_ERROR_VALUE, op, "step must be nonzero");
        return NULL;
    }
    if (!isfinite(xs) || !isfinite(xe)) {
        ct_error(CT_ERROR_VALUE, op, "unsupported range: %g -> %g", xs, xe);
        return NULL;
    }
    if (!((xst > 0 && xe >= xs) || (xst < 0 && xe <= xs))) {
        ct_error(CT_ERROR_VALUE, op, "upper bound and larger bound inconsistent with step sign");
        return NULL;
    }
    /* 2^63 itself is out of int64's range: the bound is exclusive (the double nearest
     * INT64_MAX is 2^63, so "<= INT64_MAX" would let it through to the cast) */
    if (!(size_d >= 0 && size_d < 0x1p63)) {
        ct_error(CT_ERROR_VALUE, op, "invalid size, possible overflow?");
        return NULL;
    }
    int64_t n = (int64_t)size_d;
    ct_tensor *t = ct_tensor_new(op, &n, NULL, 1, dtype, device);
    if (!t || device.type == CT_DEVICE_META || n == 0)
        return t;
    arange_fill(ct_tensor_ptr(t), dtype, n, integral ? ct_scalar_int(is) : start, integral ? ct_scalar_int(ist) : step);
    return t;
}

/* ------------------------------------------------------------------ linspace */

/* Every element from its index, from the nearer end (PyTorch 2.x's CPU kernel: no
 * blocks, unlike arange): fused in float32/float64 and int, each operation rounded in
 * float16/bfloat16. */
static void linspace_fill(char *p, ct_dtype d, int64_t n, double start, double end) {
    int64_t esz = (int64_t)ct_dtype_size(d);
    int64_t half = n / 2;
    if (d == CT_DTYPE_FLOAT64) {
        double s = start, e = end, st = (e - s) / (double)(n - 1);
        for (int64_t i = 0; i < n; i++)
            ((double *)p)[i] = i < half ? fma(st, (double)i, s) : fma(-st, (double)(n - i - 1), e);
    } else if (d == CT_DTYPE_FLOAT32) {
        float s = (float)start, e = (float)end, st = (e - s) / (float)(n - 1);
        for (int64_t i = 0; i < n; i++)
            ((float *)p)[i] = i < half ? fmaf(st, (float)i, s) : fmaf(-st, (float)(n - i - 1), e);
    } else if (d == CT_DTYPE_FLOAT16 || d == CT_DTYPE_BFLOAT16) {
        /* Every operation rounds to the dtype; nothing is fused. */
        float s = round_to(d, (float)start), e = round_to(d, (float)end);
        float st = round_to(d, round_to(d, e - s) / round_to(d, (float)(n - 1)));
        for (int64_t i = 0; i < n; i++) {
            float v = i < half ? round_to(d, s + round_to(d, st * round_to(d, (float)i)))
                               : round_to(d, e - round_to(d, st * round_to(d, (float)(n - i - 1))));
            store_f(p + i * esz, d, v);
        }
    } else {
        /* Integers: start and end truncated to the dtype, step in double. */
        char tmp[8];
        ct_store_double(tmp, d, start);
        double s = ct_load_double(tmp, d);
        ct_store_double(tmp, d, end);
        double e = ct_load_double(tmp, d);
        double st = (e - s) / (double)(n - 1);
        for (int64_t i = 0; i < n; i++)
            ct_store_double(p + i * esz, d, i < half ? fma(st, (double)i, s) : fma(-st, (double)(n - i - 1), e));
    }
}

static ct_tensor *range_common(const char *op, const char *kernel, int64_t steps, ct_dtype *dtype,
                               ct_device device) {
    if (*dtype == CT_DTYPE_UNDEFINED)
        *dtype = ct_get_default_dtype();
    if (steps < 0) {
        ct_error(CT_ERROR_VALUE, op, "number of steps must be non-negative");
        return NULL;
    }
    if (!supported_range_dtype(op, kernel, *dtype))
        return NULL;
    return ct_tensor_new(op, &steps, NULL, 1, *dtype, device);
}

ct_tensor *ct_linspace_impl(double start, double end, int64_t steps, ct_dtype dtype, ct_device device) {
    CT_SEQUENCE_VIA_CPU("linspace", device, ct_linspace_impl(start, end, steps, dtype, CT_CPU));
    ct_tensor *t = range_common("linspace", "linspace_cpu", steps, &dtype, device);
    if (!t || device.type == CT_DEVICE_META || steps == 0)
        return t;
    if (steps == 1)
        ct_store_double(ct_tensor_ptr(t), dtype, start);
    else
        linspace_fill(ct_tensor_ptr(t), dtype, steps, start, end);
    return t;
}

/* ------------------------------------------------------------------ logspace */

ct_tensor *ct_logspace_impl(double start, double end, int64_t steps, double base, ct_dtype dtype, ct_device device) {
    CT_SEQUENCE_VIA_CPU("logspace", device, ct_logspace_impl(start, end, steps, base, dtype, CT_CPU));
    if (dtype == CT_DTYPE_FLOAT16 && steps >= 0) { /* PyTorch 1.13 has no float16 logspace on the CPU */
        ct_error(CT_ERROR_TYPE, "logspace", "\"logspace_cpu\" not implemented for 'Half'");
        return NULL;
    }
    ct_tensor *t = range_common("logspace", "logspace_cpu", steps, &dtype, device);
    if (!t || device.type == CT_DEVICE_META || steps == 0)
        return t;
    char *p = ct_tensor_ptr(t);
    int64_t esz = (int64_t)ct_dtype_size(dtype);
    if (steps == 1) {
        ct_store_double(p, dtype, pow(base, start));
        return t;
    }
    /* PyTorch's logspace is a plain loop (no blocks, no FMA): start and end are rounded
     * to the dtype, the exponent is computed in double from both ends like linspace,
     * and integer dtypes use a float base. */
    char tmp[8];
    ct_store_double(tmp, dtype, start);
    double s = ct_load_double(tmp, dtype);
    ct_store_double(tmp, dtype, end);
    double e = ct_load_double(tmp, dtype);
    double st = (e - s) / (double)(steps - 1);
    double b = ct_dtype_is_integral(dtype, false) ? (double)(float)base : base;
    int64_t half = steps / 2;
    for (int64_t i = 0; i < steps; i++) {
        double prod = i < half ? st * (double)i : st * (double)(steps - i - 1);
        ct_store_double(p + i * esz, dtype, pow(b, i < half ? s + prod : e - prod));
    }
    return t;
}

/* ------------------------------------------------------------------ eye */

ct_tensor *ct_eye_impl(int64_t n, int64_t m, ct_dtype dtype, ct_device device) {
    CT_SEQUENCE_VIA_CPU("eye", device, ct_eye_impl(n, m, dtype, CT_CPU));
    if (n < 0) {
        ct_error(CT_ERROR_VALUE, "eye", "n must be greater or equal to 0, got %lld", (long long)n);
        return NULL;
    }
    if (m < 0)
        m = n;
    if (dtype == CT_DTYPE_UNDEFINED)
        dtype = ct_get_default_dtype();
    int64_t shape[2] = {n, m};
    ct_tensor *t = ct_tensor_new("eye", shape, NULL, 2, dtype, device);
    if (!t || device.type == CT_DEVICE_META || t->numel == 0)
        return t;
    char *p = ct_tensor_ptr(t);
    size_t esz = ct_dtype_size(dtype);
    memset(p, 0, (size_t)t->numel * esz);
    char one[8];
    ct_store_int64(one, dtype, 1);
    int64_t k = n < m ? n : m;
    for (int64_t i = 0; i < k; i++)
        memcpy(p + (i * m + i) * (int64_t)esz, one, esz);
    return t;
}
