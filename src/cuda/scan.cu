/* CUDA scans along one dim: cumsum, cumprod, cummax, cummin, softmax and log_softmax,
 * over the layout src/meta/reduce_iter.c plans (ct_scan_iter_init: one row per kept index,
 * rows of rshape[0] elements at input stride rstride[0], output strides rout[]).
 *
 * Cumulative ops walk each row on one thread, in order, exactly as the CPU does (so
 * integer and extremum results match bit for bit, float sums up to the libraries'
 * rounding: both accumulate in double in the same order), except cumsum over a few long
 * rows (Note [Parallel cumsum]).
 * softmax/log_softmax give a row to a warp (a block for rows of 1024 and more): the
 * row's max, then the sum of exp(x - max) accumulated in double, then the outputs. A
 * NaN in the row makes the whole row NaN; a row of -inf gives NaN, as the CPU. Dense,
 * aligned rows move in 16-byte vectors (softmax_vec_kernel). */
#include <math.h>

#include "casts.cuh"

#define SCAN_THREADS 256

static __device__ __forceinline__ int64_t unravel_off(int64_t i, int n, const int64_t *shape, const int64_t *strides) {
    int64_t off = 0;
    for (int k = n - 1; k >= 0; k--) {
        int64_t q = i / shape[k];
        off += (i - q * shape[k]) * strides[k];
        i = q;
    }
    return off;
}

template <typename T>
static __global__ void __launch_bounds__(SCAN_THREADS) cum_kernel(ct_cuda_reduce_desc d) {
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    const int64_t n = d.rshape[0], s = d.rstride[0];
    const int dt0 = (int)d.out_dtype[0], dt1 = (int)d.out_dtype[1];
    for (int64_t row = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; row < d.out_numel; row += stride) {
        const char *in = d.in + unravel_off(row, d.nk, d.kshape, d.kin);
        char *o0 = d.out[0] + unravel_off(row, d.nk, d.kshape, d.kout[0]);
        char *o1 = d.nout > 1 && d.out[1] ? d.out[1] + unravel_off(row, d.nk, d.kshape, d.kout[1]) : NULL;
        if (d.kind == CT_CUDA_RED_CUMSUM || d.kind == CT_CUDA_RED_CUMPROD) {
            const bool prod = d.kind == CT_CUDA_RED_CUMPROD;
            if constexpr (std::is_integral<T>::value) {
                uint64_t acc = prod ? 1u : 0u;
                for (int64_t i = 0; i < n; i++) {
                    uint64_t x = (uint64_t)*(const T *)(in + i * s);
                    acc = prod ? acc * x : acc + x;
                    cast_store_i64(o0 + i * d.rout[0], dt0, (int64_t)acc);
                }
            } else {
                double acc = prod ? 1.0 : 0.0;
                for (int64_t i = 0; i < n; i++) {
                    double x = (double)*(const T *)(in + i * s);
                    acc = prod ? acc * x : acc + x;
                    cast_store_f64(o0 + i * d.rout[0], dt0, acc);
                }
            }
        } else {
            /* Running extremum: a later equal value takes over the index; once a NaN is
             * seen, every later NaN moves the index. */
            const bool mx = d.kind == CT_CUDA_RED_CUMMAX;
            int64_t idx = 0;
            if constexpr (std::is_integral<T>::value) {
                int64_t cur = 0;
                for (int64_t i = 0; i < n; i++) {
                    int64_t x = (int64_t)*(const T *)(in + i * s);
                    if (i == 0 || (mx ? x >= cur : x <= cur))
                        cur = x, idx = i;
                    cast_store_i64(o0 + i * d.rout[0], dt0, cur);
                    if (o1)
                        cast_store_i64(o1 + i * d.rout[1], dt1, idx);
                }
            } else {
                double cur = 0;
                for (int64_t i = 0; i < n; i++) {
                    double x = (double)*(const T *)(in + i * s);
                    if (i == 0 || x != x || (cur == cur && (mx ? x >= cur : x <= cur)))
                        cur = x, idx = i;
                    cast_store_f64(o0 + i * d.rout[0], dt0, cur);
                    if (o1)
                        cast_store_i64(o1 + i * d.rout[1], dt1, idx);
                }
            }
        }
    }
}

/* Note [Parallel cumsum]
 * A few long rows would leave the GPU idle under cum_kernel's thread per row, so cumsum
 * over rows of SCAN_LONG elements or more, when there are fewer than SCAN_FEW_ROWS of
 * them, cuts each row into chunks of SCAN_CHUNK: cumsum_chunk_totals sums every chunk,
 * cumsum_chunk_offsets turns each row's totals into exclusive prefixes (one thread per
 * row, in order), and cumsum_chunks scans each chunk in shared memory (a thread's
 * SCAN_ITEMS neighbours in order, then the threads' totals) from its offset. The
 * accumulator is the CPU's (double for floats, wrapping uint64 for integers) and the
 * order is fixed by the shape: integer results are exact, float results differ from
 * the CPU's sequential sum only by rounding. */
#define SCAN_ITEMS 16
#define SCAN_CHUNK (SCAN_THREADS * SCAN_ITEMS)
#define SCAN_LONG 2048
#define SCAN_FEW_ROWS 1024

template <typename T>
using scan_acc = typename std::conditional<std::is_integral<T>::value, uint64_t, double>::type;

template <typename T> static __device__ __forceinline__ scan_acc<T> scan_load(const char *p) {
    return (scan_acc<T>)*(const T *)p;
}

template <typename T>
static __global__ void __launch_bounds__(SCAN_THREADS) cumsum_chunk_totals(ct_cuda_reduce_desc d, scan_acc<T> *totals) {
    typedef scan_acc<T> A;
    __shared__ A sm[SCAN_THREADS];
    const int64_t n = d.rshape[0], s = d.rstride[0], row = blockIdx.y, c = blockIdx.x;
    const char *in = d.in + unravel_off(row, d.nk, d.kshape, d.kin);
    A acc = 0;
    for (int64_t i = c * SCAN_CHUNK + threadIdx.x, end = min((c + 1) * SCAN_CHUNK, n); i < end; i += SCAN_THREADS)
        acc += scan_load<T>(in + i * s);
    sm[threadIdx.x] = acc;
    for (int st = SCAN_THREADS / 2; st > 0; st >>= 1) {
        __syncthreads();
        if ((int)threadIdx.x < st)
            sm[threadIdx.x] += sm[threadIdx.x + st];
    }
    if (threadIdx.x == 0)
        totals[row * gridDim.x + c] = sm[0];
}

template <typename A>
static __global__ void cumsum_chunk_offsets(A *totals, int64_t rows, int64_t chunks) {
    for (int64_t row = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; row < rows; row += (int64_t)gridDim.x * blockDim.x) {
        A run = 0;
        for (int64_t c = 0; c < chunks; c++) {
            A t = totals[row * chunks + c];
            totals[row * chunks + c] = run;
            run += t;
        }
    }
}

template <typename T>
static __global__ void __launch_bounds__(SCAN_THREADS) cumsum_chunks(ct_cuda_reduce_desc d, const scan_acc<T> *offsets) {
    typedef scan_acc<T> A;
    __shared__ A sm[SCAN_CHUNK];
    __shared__ A tot[SCAN_THREADS];
    const int64_t n = d.rshape[0], s = d.rstride[0], os = d.rout[0], row = blockIdx.y, c = blockIdx.x;
    const int64_t c0 = c * SCAN_CHUNK, len = min((int64_t)SCAN_CHUNK, n - c0);
    const char *in = d.in + unravel_off(row, d.nk, d.kshape, d.kin) + c0 * s;
    char *out = d.out[0] + unravel_off(row, d.nk, d.kshape, d.kout[0]) + c0 * os;
    const int dt0 = (int)d.out_dtype[0];
    for (int i = threadIdx.x; i < SCAN_CHUNK; i += SCAN_THREADS)
        sm[i] = i < len ? scan_load<T>(in + i * s) : (A)0;
    __syncthreads();
    A run = 0;
    for (int k = 0; k < SCAN_ITEMS; k++) {
        run += sm[threadIdx.x * SCAN_ITEMS + k];
        sm[threadIdx.x * SCAN_ITEMS + k] = run;
    }
    tot[threadIdx.x] = run;
    for (int st = 1; st < SCAN_THREADS; st <<= 1) { /* inclusive scan of the threads' totals */
        __syncthreads();
        A add = (int)threadIdx.x >= st ? tot[threadIdx.x - st] : (A)0;
        __syncthreads();
        tot[threadIdx.x] += add;
    }
    __syncthreads();
    const A base = offsets[row * gridDim.x + c] + (threadIdx.x > 0 ? tot[threadIdx.x - 1] : (A)0);
    for (int k = 0; k < SCAN_ITEMS; k++)
        sm[threadIdx.x * SCAN_ITEMS + k] = base + sm[threadIdx.x * SCAN_ITEMS + k];
    __syncthreads();
    for (int i = threadIdx.x; i < len; i += SCAN_THREADS) {
        if constexpr (std::is_integral<T>::value)
            cast_store_i64(out + i * os, dt0, (int64_t)sm[i]);
        else
            cast_store_f64(out + i * os, dt0, sm[i]);
    }
}

static bool cumsum_parallel(const ct_cuda_reduce_desc *d) {
    return d->kind == CT_CUDA_RED_CUMSUM && d->rshape[0] >= SCAN_LONG && d->out_numel < SCAN_FEW_ROWS;
}

static int64_t cumsum_chunks_of(const ct_cuda_reduce_desc *d) { return (d->rshape[0] + SCAN_CHUNK - 1) / SCAN_CHUNK; }

extern "C" size_t ct_cuda_scan_scratch(const ct_cuda_reduce_desc *d) {
    if (!cumsum_parallel(d))
        return 0;
    return (size_t)(d->out_numel * cumsum_chunks_of(d)) * sizeof(uint64_t);
}

template <typename T>
static ct_status cumsum_parallel_run(const ct_cuda_reduce_desc *d, void *scratch, int device, const char *op) {
    typedef scan_acc<T> A;
    cudaStream_t s = ct_stream_of(device);
    int64_t chunks = cumsum_chunks_of(d);
    dim3 grid((unsigned)chunks, (unsigned)d->out_numel);
    A *totals = (A *)scratch;
    cumsum_chunk_totals<T><<<grid, SCAN_THREADS, 0, s>>>(*d, totals);
    cumsum_chunk_offsets<A><<<ct_grid_for(d->out_numel, device), SCAN_THREADS, 0, s>>>(totals, d->out_numel, chunks);
    cumsum_chunks<T><<<grid, SCAN_THREADS, 0, s>>>(*d, totals);
    return ct_cuda_check_launch(op);
}

static __device__ __forceinline__ float d_exp(float x) { return expf(x); }
static __device__ __forceinline__ double d_exp(double x) { return exp(x); }

/* Combines v over the GROUP threads of a group through sm (every thread of the block
 * calls it; MAXOP: NaN-propagating max, else a sum). All threads get the result. */
template <bool MAXOP>
static __device__ double group_all(double v, double *sm, int group, int lane, int gbase) {
    sm[threadIdx.x] = v;
    for (int st = group / 2; st > 0; st >>= 1) {
        __syncthreads();
        if (lane < st) {
            double a = sm[threadIdx.x], b = sm[threadIdx.x + st];
            if (MAXOP)
                sm[threadIdx.x] = a != a ? a : (b != b ? b : (a > b ? a : b));
            else
                sm[threadIdx.x] = a + b;
        }
    }
    __syncthreads();
    double r = sm[gbase];
    __syncthreads();
    return r;
}

template <typename T>
static __global__ void __launch_bounds__(SCAN_THREADS) softmax_kernel(ct_cuda_reduce_desc d, int group) {
    __shared__ double sm[SCAN_THREADS];
    const int gpb = SCAN_THREADS / group;
    const int lane = (int)threadIdx.x % group, gib = (int)threadIdx.x / group, gbase = gib * group;
    const int64_t n = d.rshape[0], s = d.rstride[0], os = d.rout[0];
    const int dt0 = (int)d.out_dtype[0];
    const bool log_out = d.kind == CT_CUDA_RED_LOG_SOFTMAX;
    for (int64_t base = (int64_t)blockIdx.x * gpb; base < d.out_numel; base += (int64_t)gridDim.x * gpb) {
        const int64_t row = base + gib;
        const bool active = row < d.out_numel;
        const char *in = d.in;
        char *out = d.out[0];
        if (active) {
            in += unravel_off(row, d.nk, d.kshape, d.kin);
            out += unravel_off(row, d.nk, d.kshape, d.kout[0]);
        }
        double m = -INFINITY;
        if (active)
            for (int64_t i = lane; i < n; i += group) {
                double x = (double)*(const T *)(in + i * s);
                m = m != m ? m : (x != x || x > m) ? x : m;
            }
        m = group_all<true>(m, sm, group, lane, gbase);
        const T mt = (T)m;
        double sum = 0;
        if (active)
            for (int64_t i = lane; i < n; i += group)
                sum += (double)d_exp(*(const T *)(in + i * s) - mt);
        sum = group_all<false>(sum, sm, group, lane, gbase);
        if (active) {
            if (log_out) {
                const T lse = (T)log(sum);
                for (int64_t i = lane; i < n; i += group)
                    cast_store_f64(out + i * os, dt0, (double)((*(const T *)(in + i * s) - mt) - lse));
            } else {
                const T inv = (T)(1.0 / sum);
                for (int64_t i = lane; i < n; i += group)
                    cast_store_f64(out + i * os, dt0, (double)(d_exp(*(const T *)(in + i * s) - mt) * inv));
            }
        }
    }
}

/* softmax_kernel for rows that are dense, 16-byte aligned, a whole number of vectors
 * long, and stored in the work dtype: the same arithmetic per element, moved in
 * 16-byte vectors. */
template <typename T>
static __global__ void __launch_bounds__(SCAN_THREADS) softmax_vec_kernel(ct_cuda_reduce_desc d, int group) {
    constexpr int V = 16 / sizeof(T);
    typedef ct_vec<T, V> vec;
    __shared__ double sm[SCAN_THREADS];
    const int gpb = SCAN_THREADS / group;
    const int lane = (int)threadIdx.x % group, gib = (int)threadIdx.x / group, gbase = gib * group;
    const int64_t nv = d.rshape[0] / V;
    const bool log_out = d.kind == CT_CUDA_RED_LOG_SOFTMAX;
    for (int64_t base = (int64_t)blockIdx.x * gpb; base < d.out_numel; base += (int64_t)gridDim.x * gpb) {
        const int64_t row = base + gib;
        const bool active = row < d.out_numel;
        const vec *in = (const vec *)d.in;
        vec *out = (vec *)d.out[0];
        if (active) {
            in = (const vec *)(d.in + unravel_off(row, d.nk, d.kshape, d.kin));
            out = (vec *)(d.out[0] + unravel_off(row, d.nk, d.kshape, d.kout[0]));
        }
        double m = -INFINITY;
        if (active)
            for (int64_t i = lane; i < nv; i += group) {
                vec x = in[i];
#pragma unroll
                for (int k = 0; k < V; k++) {
                    double v = (double)x.v[k];
                    m = m != m ? m : (v != v || v > m) ? v : m;
                }
            }
        m = group_all<true>(m, sm, group, lane, gbase);
        const T mt = (T)m;
        double sum = 0;
        if (active)
            for (int64_t i = lane; i < nv; i += group) {
                vec x = in[i];
#pragma unroll
                for (int k = 0; k < V; k++)
                    sum += (double)d_exp(x.v[k] - mt);
            }
        sum = group_all<false>(sum, sm, group, lane, gbase);
        if (active) {
            const T lse = (T)log(sum), inv = (T)(1.0 / sum);
            for (int64_t i = lane; i < nv; i += group) {
                vec x = in[i], y;
#pragma unroll
                for (int k = 0; k < V; k++)
                    y.v[k] = log_out ? (x.v[k] - mt) - lse : d_exp(x.v[k] - mt) * inv;
                out[i] = y;
            }
        }
    }
}

/* Whether a softmax can take softmax_vec_kernel: unit strides along the row, rows a
 * whole number of vectors apart and starting 16-byte aligned, output in the work
 * dtype. */
static bool softmax_vec_ok(const ct_cuda_reduce_desc *d) {
    int64_t esz = d->in_dtype == CT_DTYPE_FLOAT64 ? 8 : 4, v = 16 / esz;
    if (d->out_dtype[0] != d->in_dtype || d->rstride[0] != esz || d->rout[0] != esz || d->rshape[0] % v)
        return false;
    if (((uintptr_t)d->in | (uintptr_t)d->out[0]) & 15)
        return false;
    for (int k = 0; k < d->nk; k++)
        if (d->kshape[k] > 1 && ((d->kin[k] | d->kout[0][k]) & 15))
            return false;
    return true;
}

template <typename T>
static void softmax_launch(const ct_cuda_reduce_desc *d, bool vec, unsigned blocks, int group, cudaStream_t s) {
    if (vec)
        softmax_vec_kernel<T><<<blocks, SCAN_THREADS, 0, s>>>(*d, group);
    else
        softmax_kernel<T><<<blocks, SCAN_THREADS, 0, s>>>(*d, group);
}

extern "C" ct_status ct_cuda_scan_run(const ct_cuda_reduce_desc *d, void *scratch, int device, const char *op) {
    if (d->out_numel == 0 || d->rshape[0] == 0)
        return CT_OK;
    cudaStream_t s = ct_stream_of(device);
    if (cumsum_parallel(d)) {
        if (!scratch)
            return ct_error(CT_ERROR_VALUE, op, "scan scratch memory missing");
        switch (d->in_dtype) {
        case CT_DTYPE_FLOAT32: return cumsum_parallel_run<float>(d, scratch, device, op);
        case CT_DTYPE_FLOAT64: return cumsum_parallel_run<double>(d, scratch, device, op);
        case CT_DTYPE_INT64: return cumsum_parallel_run<int64_t>(d, scratch, device, op);
        default: return ct_error(CT_ERROR_TYPE, op, "no CUDA scan for work dtype %s", ct_dtype_name(d->in_dtype));
        }
    }
    if (d->kind == CT_CUDA_RED_SOFTMAX || d->kind == CT_CUDA_RED_LOG_SOFTMAX) {
        int group = d->rshape[0] >= 1024 ? SCAN_THREADS : 32;
        int64_t gpb = SCAN_THREADS / group;
        int64_t blocks = (d->out_numel + gpb - 1) / gpb;
        int64_t cap = (int64_t)ct_cuda_sm_count(device) * 32;
        blocks = blocks > cap ? cap : blocks;
        bool vec = softmax_vec_ok(d);
        switch (d->in_dtype) {
        case CT_DTYPE_FLOAT32: softmax_launch<float>(d, vec, (unsigned)blocks, group, s); break;
        case CT_DTYPE_FLOAT64: softmax_launch<double>(d, vec, (unsigned)blocks, group, s); break;
        default: return ct_error(CT_ERROR_TYPE, op, "no CUDA softmax for work dtype %s", ct_dtype_name(d->in_dtype));
        }
        return ct_cuda_check_launch(op);
    }
    if (d->kind < CT_CUDA_RED_CUMSUM || d->kind > CT_CUDA_RED_CUMMIN)
        return ct_error(CT_ERROR_NOT_IMPLEMENTED, op, "no CUDA kernel for this scan");
    unsigned grid = ct_grid_for(d->out_numel, device);
    switch (d->in_dtype) {
    case CT_DTYPE_FLOAT32: cum_kernel<float><<<grid, SCAN_THREADS, 0, s>>>(*d); break;
    case CT_DTYPE_FLOAT64: cum_kernel<double><<<grid, SCAN_THREADS, 0, s>>>(*d); break;
    case CT_DTYPE_INT64: cum_kernel<int64_t><<<grid, SCAN_THREADS, 0, s>>>(*d); break;
    default: return ct_error(CT_ERROR_TYPE, op, "no CUDA scan for work dtype %s", ct_dtype_name(d->in_dtype));
    }
    return ct_cuda_check_launch(op);
}
