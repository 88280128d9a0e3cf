/* The GPU elementwise engine: the host has already broadcast, promoted, reordered and
 * coalesced the operands (ct_iter); these kernels walk the result.
 *
 * Note [GPU elementwise paths]
 * - contiguous: every operand is dense (or a broadcast scalar). Each thread of a
 *   grid-stride loop moves 16 bytes per operand per step through aligned vector loads
 *   and stores; a scalar tail covers what does not fill a vector. Misaligned pointers
 *   (a view at an odd offset) take the same loop one element at a time.
 * - strided: an offset calculator turns the linear index into one byte offset per
 *   operand by dividing through the dims; 32-bit division when every index and offset
 *   fits, 64-bit otherwise. */
#ifndef CT_CUDA_ELEMENTWISE_CUH
#define CT_CUDA_ELEMENTWISE_CUH

#include <type_traits>

#include "kernels.cuh"

template <int NIN, typename C, typename F>
static __device__ __forceinline__ auto ct_apply(const F &f, C x, C y) {
    if constexpr (NIN == 1) {
        (void)y;
        return f(x);
    } else {
        return f(x, y);
    }
}

template <int NIN, typename OutS, typename InS, int VEC, typename F>
static __global__ void __launch_bounds__(CT_CUDA_THREADS)
    ew_contig(OutS *__restrict__ out, const InS *__restrict__ a, const InS *__restrict__ b, bool a_scalar,
              bool b_scalar, int64_t n, F f) {
    typedef typename ct_compute<InS>::type C;
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    const int64_t tid = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    const C sa = a_scalar ? ct_load(a[0]) : C();
    C sb = C();
    if constexpr (NIN == 2)
        sb = b_scalar ? ct_load(b[0]) : C();
    const int64_t nvec = n / VEC;
    for (int64_t v = tid; v < nvec; v += stride) {
        ct_vec<InS, VEC> va, vb;
        if (!a_scalar)
            va = *(const ct_vec<InS, VEC> *)(a + v * VEC);
        if constexpr (NIN == 2)
            if (!b_scalar)
                vb = *(const ct_vec<InS, VEC> *)(b + v * VEC);
        ct_vec<OutS, VEC> vo;
#pragma unroll
        for (int j = 0; j < VEC; j++) {
            C x = a_scalar ? sa : ct_load(va.v[j]);
            C y = C();
            if constexpr (NIN == 2)
                y = b_scalar ? sb : ct_load(vb.v[j]);
            vo.v[j] = ct_store<OutS>(ct_apply<NIN, C>(f, x, y));
        }
        *(ct_vec<OutS, VEC> *)(out + v * VEC) = vo;
    }
    for (int64_t i = nvec * VEC + tid; i < n; i += stride) {
        C x = a_scalar ? sa : ct_load(a[i]);
        C y = C();
        if constexpr (NIN == 2)
            y = b_scalar ? sb : ct_load(b[i]);
        out[i] = ct_store<OutS>(ct_apply<NIN, C>(f, x, y));
    }
}

/* The strided walk; with VEC > 1, d counts VEC-element vectors (ew_rows_desc). */
template <int NIN, typename OutS, typename InS, bool SMALL, int VEC, typename F>
static __global__ void __launch_bounds__(CT_CUDA_THREADS) ew_strided(ct_cuda_iter_desc d, F f) {
    typedef typename ct_compute<InS>::type C;
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < d.numel; i += stride) {
        int64_t off[NIN + 1];
        if constexpr (SMALL)
            ct_offsets32<NIN + 1>(d, (uint32_t)i, off);
        else
            ct_offsets<NIN + 1>(d, i, off);
        ct_vec<InS, VEC> va = *(const ct_vec<InS, VEC> *)(d.data[1] + off[1]), vb;
        if constexpr (NIN == 2)
            vb = *(const ct_vec<InS, VEC> *)(d.data[2] + off[2]);
        ct_vec<OutS, VEC> vo;
#pragma unroll
        for (int j = 0; j < VEC; j++) {
            C y = C();
            if constexpr (NIN == 2)
                y = ct_load(vb.v[j]);
            vo.v[j] = ct_store<OutS>(ct_apply<NIN, C>(f, ct_load(va.v[j]), y));
        }
        *(ct_vec<OutS, VEC> *)(d.data[0] + off[0]) = vo;
    }
}

/* Note [Strided rows]
 * A strided walk whose operands all run along dense rows (a slice of a wider matrix,
 * a transposed view's rows) moves VEC elements per operand at a time: d is rewritten
 * to count vectors when every row length, stride and pointer allows 16-byte vectors
 * of the wider operand. On an H200 the gradient of GPT-2's q, k and v slices, added
 * into their (32768, 2304) bfloat16 parent an element at a time, took 144 us a slice
 * (1 TB/s); in vectors 42 us, 3.6 TB/s (PyTorch's slice add_: 78 us, same run). */
static inline bool ew_rows_desc(ct_cuda_iter_desc *d, int nin, int64_t osz, int64_t isz, int vec) {
    if (d->ndim < 2 || d->shape[0] % vec != 0)
        return false;
    for (int k = 0; k <= nin; k++) {
        int64_t sz = k == 0 ? osz : isz, vb = sz * vec;
        if (d->strides[0][k] != sz || (uintptr_t)d->data[k] % (uintptr_t)vb != 0)
            return false;
        for (int i = 1; i < d->ndim; i++)
            if (d->strides[i][k] % vb != 0)
                return false;
    }
    d->shape[0] /= vec;
    d->numel /= vec;
    for (int k = 0; k <= nin; k++)
        d->strides[0][k] *= vec;
    return true;
}

template <int NIN, typename OutS, typename InS, typename F>
static ct_status ew_launch(const ct_cuda_iter_desc *d, const F &f, int device, const char *op) {
    if (d->numel == 0)
        return CT_OK;
    cudaStream_t s = ct_stream_of(device);
    constexpr int64_t osz = sizeof(OutS), isz = sizeof(InS);
    constexpr int VEC = (int)(16 / (osz > isz ? osz : isz));
    bool contig = ct_desc_dense(d, 0, osz);
    bool scalar[2] = {false, false};
    for (int k = 1; k <= NIN && contig; k++) {
        if (d->ndim == 1 && ct_desc_scalar(d, k))
            scalar[k - 1] = true;
        else if (!ct_desc_dense(d, k, isz))
            contig = false;
    }
    if (contig) {
        bool aligned = (uintptr_t)d->data[0] % (uintptr_t)(VEC * osz) == 0;
        for (int k = 1; k <= NIN; k++)
            aligned = aligned && (scalar[k - 1] || (uintptr_t)d->data[k] % (uintptr_t)(VEC * isz) == 0);
        const InS *b = NIN == 2 ? (const InS *)d->data[2] : NULL;
        if (aligned) {
            unsigned grid = ct_grid_for((d->numel + VEC - 1) / VEC, device);
            ew_contig<NIN, OutS, InS, VEC><<<grid, CT_CUDA_THREADS, 0, s>>>(
                (OutS *)d->data[0], (const InS *)d->data[1], b, scalar[0], scalar[1], d->numel, f);
        } else {
            unsigned grid = ct_grid_for(d->numel, device);
            ew_contig<NIN, OutS, InS, 1><<<grid, CT_CUDA_THREADS, 0, s>>>(
                (OutS *)d->data[0], (const InS *)d->data[1], b, scalar[0], scalar[1], d->numel, f);
        }
    } else if (ct_cuda_iter_desc w = *d; VEC > 1 && ct_desc_fits32(d) && ew_rows_desc(&w, NIN, osz, isz, VEC)) {
        ew_strided<NIN, OutS, InS, true, VEC><<<ct_grid_for(w.numel, device), CT_CUDA_THREADS, 0, s>>>(w, f);
    } else if (ct_desc_fits32(d)) {
        ew_strided<NIN, OutS, InS, true, 1><<<ct_grid_for(d->numel, device), CT_CUDA_THREADS, 0, s>>>(*d, f);
    } else {
        ew_strided<NIN, OutS, InS, false, 1><<<ct_grid_for(d->numel, device), CT_CUDA_THREADS, 0, s>>>(*d, f);
    }
    return ct_cuda_check_launch(op);
}

/* Dtype groups an op is instantiated for. */
enum { CT_EW_FLOAT = 1, CT_EW_INT = 2, CT_EW_BOOL = 4, CT_EW_ALL = 7 };

/* Runs f over d for compute dtype dt; the output is bool when CMP, else dt. */
template <int NIN, bool CMP, int GROUPS, typename F>
static ct_status ew_dispatch(ct_dtype dt, const ct_cuda_iter_desc *d, const F &f, int device, const char *op) {
#define CT_EW_CASE(DT, S)                                                                                 \
    case DT:                                                                                              \
        return ew_launch<NIN, typename std::conditional<CMP, ct_bool_s, S>::type, S>(d, f, device, op);
    if constexpr ((GROUPS & CT_EW_FLOAT) != 0) {
        switch (dt) {
            CT_EW_CASE(CT_DTYPE_FLOAT32, float)
            CT_EW_CASE(CT_DTYPE_FLOAT64, double)
            CT_EW_CASE(CT_DTYPE_FLOAT16, ct_half_s)
            CT_EW_CASE(CT_DTYPE_BFLOAT16, ct_bf16_s)
        default: break;
        }
    }
    if constexpr ((GROUPS & CT_EW_INT) != 0) {
        switch (dt) {
            CT_EW_CASE(CT_DTYPE_UINT8, uint8_t)
            CT_EW_CASE(CT_DTYPE_INT8, int8_t)
            CT_EW_CASE(CT_DTYPE_INT16, int16_t)
            CT_EW_CASE(CT_DTYPE_INT32, int32_t)
            CT_EW_CASE(CT_DTYPE_INT64, int64_t)
            CT_EW_CASE(CT_DTYPE_UINT16, uint16_t)
            CT_EW_CASE(CT_DTYPE_UINT32, uint32_t)
            CT_EW_CASE(CT_DTYPE_UINT64, uint64_t)
        default: break;
        }
    }
    if constexpr ((GROUPS & CT_EW_BOOL) != 0) {
        if (dt == CT_DTYPE_BOOL)
            return ew_launch<NIN, ct_bool_s, ct_bool_s>(d, f, device, op);
    }
#undef CT_EW_CASE
    return ct_error(CT_ERROR_TYPE, op, "\"%s_cuda\" not implemented for '%s'", op, ct_dtype_name(dt));
}

static inline bool ct_ew_in_groups(int groups, ct_dtype dt) {
    if (dt == CT_DTYPE_BOOL)
        return (groups & CT_EW_BOOL) != 0;
    if (ct_dtype_is_floating(dt))
        return (groups & CT_EW_FLOAT) != 0;
    return (groups & CT_EW_INT) != 0 && (int)dt >= 0 && dt < CT_DTYPE_COUNT;
}

#endif
