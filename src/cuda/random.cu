/* Philox on the GPU: the CPU generator's stream, element for element.
 *
 * Note [Same numbers on CPU and GPU]
 * Element i of a request is produced from Philox block (seed, offset + i / epc) exactly
 * as src/core/random.c does (epc elements per 128-bit block: 4 floats from 32-bit words,
 * 2 doubles or 2 normals from 64-bit words). The host reserves the counters from the
 * same generator, so CPU and GPU calls interleave in one stream. The arithmetic is
 * spelled with round-to-nearest intrinsics so nvcc cannot contract it into FMAs the CPU
 * does not use: uniform values are bit-identical. Normal values go through log, sqrt,
 * cos and sin in double; CUDA's log/cos/sin may differ from glibc's in the last bit of
 * a double, so float64 normals agree to within a few ulps and float32 (and smaller)
 * normals are identical except, rarely, one ulp.
 *
 * Note [Random numbers in a graph]
 * A kernel captured into a CUDA graph keeps its arguments, so a seed and offset passed
 * by value would give every replay the same numbers. Inside a capture the kernels take
 * state instead, a pointer to two words in device memory, the graph's own: seed =
 * state[0], offset = state[1] + the offset argument, which is then the request's
 * distance from the capture's first request. ct_cuda_graph_replay reserves the
 * capture's whole span of counters from the generator and writes (seed, start) there
 * with a one-thread kernel queued before the graph, as PyTorch's graph-safe
 * generator does. A replay thus draws exactly what the same work would draw eagerly
 * from the generator's state at the replay (same seed, same numbers as CPU and eager
 * GPU), and successive replays draw fresh numbers. The capture itself runs nothing:
 * ct_cuda_graph_end gives its span back to the generator (when nothing else drew
 * after it), so a replay right after the capture draws what the captured work would
 * have drawn eagerly in its place. Replays of one graph on two streams at once would
 * share the two words; replay it on one stream. */
#include "casts.cuh"
#include "philox.cuh"

static __device__ __forceinline__ double uniform_bits(uint64_t x, int digits) {
    return __dmul_rn((double)(x & ((1ull << digits) - 1)), 1.0 / (double)(1ull << digits));
}

template <typename S> static __device__ __forceinline__ void put(S *out, int64_t i, double v) {
    out[i] = ct_store<S>(v);
}
/* float16/bfloat16 round from float32 (the CPU stores through float). */
template <> __device__ __forceinline__ void put<ct_half_s>(ct_half_s *out, int64_t i, double v) {
    out[i] = ct_store<ct_half_s>((float)v);
}
template <> __device__ __forceinline__ void put<ct_bf16_s>(ct_bf16_s *out, int64_t i, double v) {
    out[i] = ct_store<ct_bf16_s>((float)v);
}

template <typename S>
static __global__ void uniform_kernel(S *out, int64_t n, int digits, double a, double b, uint64_t seed,
                                      uint64_t offset, const uint64_t *state) {
    graph_state(state, &seed, &offset);
    const int epc = digits == 53 ? 2 : 4;
    const int64_t ncounters = (n + epc - 1) / epc;
    const float ffrom = (float)a, fspan = __fsub_rn((float)b, (float)a);
    const double dspan = __dsub_rn(b, a);
    for (int64_t c = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; c < ncounters;
         c += (int64_t)gridDim.x * blockDim.x) {
        uint32_t r[4];
        philox_block(seed, offset + (uint64_t)c, r);
        int64_t i0 = c * epc;
        int m = (int)(n - i0 < epc ? n - i0 : epc);
        if (digits == 53) {
            for (int e = 0; e < m; e++) {
                uint64_t w = (uint64_t)r[2 * e] | ((uint64_t)r[2 * e + 1] << 32);
                put<S>(out, i0 + e, __dadd_rn(__dmul_rn(uniform_bits(w, 53), dspan), a));
            }
        } else {
            for (int e = 0; e < m; e++) {
                float u = (float)uniform_bits(r[e], digits);
                put<S>(out, i0 + e, (double)__fadd_rn(__fmul_rn(u, fspan), ffrom));
            }
        }
    }
}

template <typename S>
static __global__ void normal_kernel(S *out, int64_t n, double mean, double std, uint64_t seed, uint64_t offset,
                                     const uint64_t *state) {
    graph_state(state, &seed, &offset);
    const double two_pi = 6.283185307179586476925286766559;
    const int64_t ncounters = (n + 1) / 2;
    for (int64_t c = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; c < ncounters;
         c += (int64_t)gridDim.x * blockDim.x) {
        uint32_t r[4];
        philox_block(seed, offset + (uint64_t)c, r);
        uint64_t w0 = (uint64_t)r[0] | ((uint64_t)r[1] << 32), w1 = (uint64_t)r[2] | ((uint64_t)r[3] << 32);
        double u1 = __dsub_rn(1.0, uniform_bits(w0, 53));
        double u2 = uniform_bits(w1, 53);
        double radius = sqrt(__dmul_rn(-2.0, log(u1)));
        double angle = __dmul_rn(two_pi, u2);
        double sr = __dmul_rn(std, radius);
        int64_t i0 = c * 2;
        put<S>(out, i0, __dadd_rn(mean, __dmul_rn(sr, cos(angle))));
        if (i0 + 1 < n)
            put<S>(out, i0 + 1, __dadd_rn(mean, __dmul_rn(sr, sin(angle))));
    }
}

extern "C" int64_t ct_cuda_philox_counters(int kind, ct_dtype dtype, int64_t n) {
    int epc = kind != 0 || dtype == CT_DTYPE_FLOAT64 ? 2 : 4;
    return (n + epc - 1) / epc;
}

extern "C" ct_status ct_cuda_philox_fill(int kind, ct_dtype dtype, void *out, int64_t n, int digits, double a,
                                         double b, uint64_t seed, uint64_t offset, const uint64_t *state,
                                         int device) {
    const char *op = kind == 0 ? "uniform_" : "normal_";
    if (n == 0)
        return CT_OK;
    unsigned grid = ct_grid_for(ct_cuda_philox_counters(kind, dtype, n), device);
    cudaStream_t s = ct_stream_of(device);
#define CT_RNG_CASE(DT, S)                                                                                    \
    case DT:                                                                                                  \
        if (kind == 0)                                                                                        \
            uniform_kernel<S><<<grid, CT_CUDA_THREADS, 0, s>>>((S *)out, n, digits, a, b, seed, offset, state); \
        else                                                                                                  \
            normal_kernel<S><<<grid, CT_CUDA_THREADS, 0, s>>>((S *)out, n, a, b, seed, offset, state);          \
        break;
    switch (dtype) {
        CT_RNG_CASE(CT_DTYPE_FLOAT32, float)
        CT_RNG_CASE(CT_DTYPE_FLOAT64, double)
        CT_RNG_CASE(CT_DTYPE_FLOAT16, ct_half_s)
        CT_RNG_CASE(CT_DTYPE_BFLOAT16, ct_bf16_s)
    default: return ct_error(CT_ERROR_TYPE, op, "not implemented for '%s' on CUDA", ct_dtype_name(dtype));
    }
#undef CT_RNG_CASE
    return ct_cuda_check_launch(op);
}

/* One 64-bit draw per element, two per counter: 1 when its 53-bit uniform is below p. */
static __global__ void bernoulli_kernel(char *out, int dt, int64_t esz, int64_t n, double p, const double *probs,
                                        uint64_t seed, uint64_t offset, const uint64_t *state) {
    graph_state(state, &seed, &offset);
    const int64_t ncounters = (n + 1) / 2;
    for (int64_t c = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; c < ncounters;
         c += (int64_t)gridDim.x * blockDim.x) {
        uint32_t r[4];
        philox_block(seed, offset + (uint64_t)c, r);
        int64_t i0 = c * 2;
        int m = n - i0 < 2 ? 1 : 2;
        for (int e = 0; e < m; e++) {
            uint64_t w = (uint64_t)r[2 * e] | ((uint64_t)r[2 * e + 1] << 32);
            double pe = probs ? probs[i0 + e] : p;
            cast_store_i64(out + (i0 + e) * esz, dt, uniform_bits(w, 53) < pe ? 1 : 0);
        }
    }
}

extern "C" ct_status ct_cuda_bernoulli_fill(ct_dtype dtype, void *out, int64_t n, double p, const double *probs,
                                            uint64_t seed, uint64_t offset, const uint64_t *state, int device) {
    if (n == 0)
        return CT_OK;
    bernoulli_kernel<<<ct_grid_for((n + 1) / 2, device), CT_CUDA_THREADS, 0, ct_stream_of(device)>>>(
        (char *)out, (int)dtype, (int64_t)ct_dtype_size(dtype), n, p, probs, seed, offset, state);
    return ct_cuda_check_launch(probs ? "bernoulli" : "bernoulli_");
}

static __global__ void outside_unit_kernel(const double *p, int64_t n, unsigned long long *first) {
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        if (!(p[i] >= 0.0 && p[i] <= 1.0))
            atomicMin(first, (unsigned long long)i);
}

extern "C" ct_status ct_cuda_first_outside_unit(const double *p, int64_t n, uint64_t *first, int device) {
    if (n == 0)
        return CT_OK;
    outside_unit_kernel<<<ct_grid_for(n, device), CT_CUDA_THREADS, 0, ct_stream_of(device)>>>(
        p, n, (unsigned long long *)first);
    return ct_cuda_check_launch("bernoulli");
}
