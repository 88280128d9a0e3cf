/* The foreach power sum on CUDA: sum |x|^p over each tensor of a list, CT_FE_MAX tensors
 * a launch with their table as the kernels' argument (blocks take fixed-size chunks of
 * the tensors), then one thread per tensor
 * adds its chunks' partial sums in chunk order, so results are deterministic. Values
 * accumulate in double, as linalg._powsum does on the CPU. */
#include "casts.cuh"

#define FE_THREADS 256
#define FE_CHUNK ((int64_t)1 << 16)

static __device__ __forceinline__ double powabs(double x, double p) { return p == 2 ? x * x : pow(fabs(x), p); }

static __global__ void __launch_bounds__(FE_THREADS) foreach_partial(const ct_fe_table t, double p, double *partial) {
    __shared__ double sm[FE_THREADS];
    const int64_t b = blockIdx.x;
    /* the tensor whose chunks include b: the last ti with first[ti] <= b */
    int lo = 0, hi = t.n - 1;
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (t.first[mid] <= b)
            lo = mid;
        else
            hi = mid - 1;
    }
    const char *data = (const char *)t.data[lo];
    const int64_t numel = t.numel[lo];
    const int dt = (int)t.dt[lo];
    const int64_t esz = dt == CT_DTYPE_FLOAT64 ? 8 : dt == CT_DTYPE_FLOAT32 ? 4 : 2;
    const int64_t start = (b - t.first[lo]) * FE_CHUNK;
    const int64_t end = start + FE_CHUNK < numel ? start + FE_CHUNK : numel;
    double acc = 0;
    for (int64_t i = start + threadIdx.x; i < end; i += FE_THREADS)
        acc += powabs(cast_load(data + i * esz, dt).f, p);
    sm[threadIdx.x] = acc;
    for (int s = FE_THREADS / 2; s > 0; s >>= 1) {
        __syncthreads();
        if ((int)threadIdx.x < s)
            sm[threadIdx.x] += sm[threadIdx.x + s];
    }
    if (threadIdx.x == 0)
        partial[b] = sm[0];
}

static __global__ void foreach_finish(const ct_fe_table t, const double *partial) {
    for (int ti = blockIdx.x * blockDim.x + threadIdx.x; ti < t.n; ti += gridDim.x * blockDim.x) {
        double s = 0;
        for (int64_t c = t.first[ti]; c < t.first[ti + 1]; c++)
            s += partial[c];
        cast_store_f64((char *)t.out[ti], (int)t.odt[ti], s);
    }
}

extern "C" int64_t ct_cuda_foreach_chunks(int64_t numel) { return (numel + FE_CHUNK - 1) / FE_CHUNK; }

extern "C" ct_status ct_cuda_foreach_powsum_run(const ct_fe_table *t, double p, double *partial, int device) {
    const char *op = "_foreach_powsum";
    cudaStream_t s = ct_stream_of(device);
    int64_t nchunks = t->first[t->n];
    if (nchunks > 0) {
        if (nchunks > 0x7fffffffLL)
            return ct_error(CT_ERROR_NOT_IMPLEMENTED, op, "too many elements for one launch");
        foreach_partial<<<(unsigned)nchunks, FE_THREADS, 0, s>>>(*t, p, partial);
        ct_status st = ct_cuda_check_launch(op);
        if (st != CT_OK)
            return st;
    }
    foreach_finish<<<(unsigned)((t->n + FE_THREADS - 1) / FE_THREADS), FE_THREADS, 0, s>>>(*t, partial);
    return ct_cuda_check_launch(op);
}
