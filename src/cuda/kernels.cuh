/* Device-side building blocks shared by the kernel files: storage types, loads and
 * stores in the compute type, the offset calculator and launch sizing. C-style code;
 * templates only where a kernel is instantiated per dtype. */
#ifndef CT_CUDA_KERNELS_CUH
#define CT_CUDA_KERNELS_CUH

#include <cuda_runtime.h>
#include <stdint.h>

#include <type_traits>

#include "cuda_rt.h"

extern "C" {
#include "core/error.h"
}

/* Storage types of the dtypes whose C type is ambiguous. */
struct ct_bool_s {
    uint8_t x;
};
struct ct_half_s {
    uint16_t x;
};
struct ct_bf16_s {
    uint16_t x;
};

/* Compute type of a storage type: float for float16/bfloat16, uint8 for bool. */
template <typename S> struct ct_compute { typedef S type; };
template <> struct ct_compute<ct_bool_s> { typedef uint8_t type; };
template <> struct ct_compute<ct_half_s> { typedef float type; };
template <> struct ct_compute<ct_bf16_s> { typedef float type; };

/* IEEE half conversions, round to nearest even (what c10::Half does). */
/* NaNs take the CPU's path (ct_half_to_float / ct_float_to_half): the hardware
 * conversion makes every NaN canonical, the CPU keeps the payload quiet. */
static __device__ __forceinline__ float ct_dev_h2f(uint16_t h) {
    if ((h & 0x7c00u) == 0x7c00u && (h & 0x3ffu))
        return __uint_as_float(((uint32_t)(h & 0x8000u) << 16) | 0x7fc00000u | ((uint32_t)(h & 0x3ffu) << 13));
    float f;
    asm("{ cvt.f32.f16 %0, %1; }" : "=f"(f) : "h"(h));
    return f;
}
static __device__ __forceinline__ uint16_t ct_dev_f2h(float f) {
    if (f != f)
        return (uint16_t)(((__float_as_uint(f) >> 16) & 0x8000u) | 0x7e00u);
    uint16_t h;
    asm("{ cvt.rn.f16.f32 %0, %1; }" : "=h"(h) : "f"(f));
    return h;
}
static __device__ __forceinline__ float ct_dev_b2f(uint16_t b) { return __uint_as_float((uint32_t)b << 16); }
/* Round to nearest even; every NaN becomes 0x7fc0, as ct_float_to_bfloat16. */
static __device__ __forceinline__ uint16_t ct_dev_f2b(float f) {
    if (f != f)
        return 0x7fc0;
    uint32_t u = __float_as_uint(f);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

template <typename S> static __device__ __forceinline__ typename ct_compute<S>::type ct_load(S v) { return v; }
template <> __device__ __forceinline__ uint8_t ct_load<ct_bool_s>(ct_bool_s v) { return v.x; }
template <> __device__ __forceinline__ float ct_load<ct_half_s>(ct_half_s v) { return ct_dev_h2f(v.x); }
template <> __device__ __forceinline__ float ct_load<ct_bf16_s>(ct_bf16_s v) { return ct_dev_b2f(v.x); }

template <typename S> struct ct_storer {
    template <typename V> static __device__ __forceinline__ S st(V v) { return (S)v; }
};
template <> struct ct_storer<ct_bool_s> {
    template <typename V> static __device__ __forceinline__ ct_bool_s st(V v) {
        ct_bool_s b;
        b.x = v != 0;
        return b;
    }
};
template <> struct ct_storer<ct_half_s> {
    template <typename V> static __device__ __forceinline__ ct_half_s st(V v) {
        ct_half_s h;
        h.x = ct_dev_f2h((float)v);
        return h;
    }
};
template <> struct ct_storer<ct_bf16_s> {
    template <typename V> static __device__ __forceinline__ ct_bf16_s st(V v) {
        ct_bf16_s h;
        h.x = ct_dev_f2b((float)v);
        return h;
    }
};
template <typename S, typename V> static __device__ __forceinline__ S ct_store(V v) { return ct_storer<S>::st(v); }

/* x < 0 without the compiler's warning for unsigned types. */
template <typename C> static __device__ __forceinline__ bool ct_is_neg(C x) {
    if constexpr (std::is_signed<C>::value || std::is_floating_point<C>::value)
        return x < (C)0;
    else
        return false;
}

/* Byte offsets of element i in each of NT operands (dim 0 innermost). */
template <int NT>
static __device__ __forceinline__ void ct_offsets(const ct_cuda_iter_desc &d, int64_t i, int64_t *off) {
#pragma unroll
    for (int k = 0; k < NT; k++)
        off[k] = 0;
    for (int dim = 0; dim < d.ndim; dim++) {
        int64_t sz = d.shape[dim];
        int64_t q = i / sz, r = i - q * sz;
        i = q;
#pragma unroll
        for (int k = 0; k < NT; k++)
            off[k] += r * d.strides[dim][k];
    }
}

/* The same with 32-bit division, for iteration spaces and offsets below 2^31. */
template <int NT>
static __device__ __forceinline__ void ct_offsets32(const ct_cuda_iter_desc &d, uint32_t i, int64_t *off) {
#pragma unroll
    for (int k = 0; k < NT; k++)
        off[k] = 0;
    for (int dim = 0; dim < d.ndim; dim++) {
        uint32_t sz = (uint32_t)d.shape[dim];
        uint32_t q = i / sz, r = i - q * sz;
        i = q;
#pragma unroll
        for (int k = 0; k < NT; k++)
            off[k] += (int64_t)r * d.strides[dim][k];
    }
}

/* Whether every element index and byte offset of d fits in 32 bits. */
static inline bool ct_desc_fits32(const ct_cuda_iter_desc *d) {
    if (d->numel >= ((int64_t)1 << 31))
        return false;
    for (int k = 0; k < d->ntensors; k++) {
        int64_t span = 0;
        for (int i = 0; i < d->ndim; i++) {
            int64_t s = d->strides[i][k];
            span += (d->shape[i] - 1) * (s < 0 ? -s : s);
        }
        if (span >= ((int64_t)1 << 31))
            return false;
    }
    return true;
}

#define CT_CUDA_THREADS 256

/* Blocks for a grid-stride loop over n items: enough to fill the GPU several times
 * over, never more than the work needs. */
static inline unsigned ct_grid_for(int64_t n, int device) {
    int64_t want = (n + CT_CUDA_THREADS - 1) / CT_CUDA_THREADS;
    int64_t cap = (int64_t)ct_cuda_sm_count(device) * 16;
    if (want > cap)
        want = cap;
    return (unsigned)(want > 0 ? want : 1);
}

static inline cudaStream_t ct_stream_of(int device) { return (cudaStream_t)ct_cuda_raw_stream(device); }

/* Whether operand k is contiguous (1-d, element stride esize) or a broadcast scalar. */
static inline bool ct_desc_dense(const ct_cuda_iter_desc *d, int k, int64_t esize) {
    return d->ndim == 0 || (d->ndim == 1 && d->strides[0][k] == esize);
}
static inline bool ct_desc_scalar(const ct_cuda_iter_desc *d, int k) {
    return d->ndim == 0 || (d->ndim == 1 && d->strides[0][k] == 0);
}

/* N elements of T moved by one aligned vector load or store (16 bytes at most). */
template <typename T, int N> struct alignas(sizeof(T) * N) ct_vec {
    T v[N];
};

#endif
