/* The foreach power sum on CUDA: sum |x|^p over each tensor of a list, every tensor in
 * one launch (blocks take fixed-size chunks of the tensors), then one thread per tensor
 * adds its chunks' partial sums in chunk order, so results are deterministic. Values
 * accumulate in double, as linalg._powsum does on the CPU. */
#include "casts.cuh"

#define FE_THREADS 256
#define FE_CHUNK ((int64_t)1 << 16)

/* The device table: per tensor {data, numel, dtype, out, out dtype}, then the first
 * chunk of each tensor (n + 1 entries). */
enum { FE_DATA, FE_NUMEL, FE_DT, FE_OUT, FE_ODT, FE_FIELDS };

static __device__ __forceinline__ double powabs(double x, double p) { return p == 2 ? x * x : pow(fabs(x), p); }

static __global__ void __launch_bounds__(FE_THREADS)
    foreach_partial(const int64_t *table, int n, double p, double *partial) {
    __shared__ double sm[FE_THREADS];
    const int64_t *first = table + (int64_t)n * FE_FIELDS;
    const int64_t b = blockIdx.x;
    /* the tensor whose chunks include b: the last ti with first[ti] <= b */
    int lo = 0, hi = n - 1;
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (first[mid] <= b)
            lo = mid;
        else
            hi = mid - 1;
    }
    const int64_t *row = table + (int64_t)lo * FE_FIELDS;
    const char *data = (const char *)(uintptr_t)row[FE_DATA];
    const int64_t numel = row[FE_NUMEL];
    const int dt = (int)row[FE_DT];
    const int64_t esz = dt == CT_DTYPE_FLOAT64 ? 8 : dt == CT_DTYPE_FLOAT32 ? 4 : 2;
    const int64_t start = (b - first[lo]) * FE_CHUNK;
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

static __global__ void foreach_finish(const int64_t *table, int n, const double *partial) {
    const int64_t *first = table + (int64_t)n * FE_FIELDS;
    for (int ti = blockIdx.x * blockDim.x + threadIdx.x; ti < n; ti += gridDim.x * blockDim.x) {
        double s = 0;
        for (int64_t c = first[ti]; c < first[ti + 1]; c++)
            s += partial[c];
        const int64_t *row = table + (int64_t)ti * FE_FIELDS;
        cast_store_f64((char *)(uintptr_t)row[FE_OUT], (int)row[FE_ODT], s);
    }
}

extern "C" int64_t ct_cuda_foreach_chunks(int64_t numel) { return (numel + FE_CHUNK - 1) / FE_CHUNK; }

extern "C" ct_status ct_cuda_foreach_powsum_run(const int64_t *table, int n, int64_t nchunks, double p,
                                                double *partial, int device) {
    const char *op = "_foreach_powsum";
    cudaStream_t s = ct_stream_of(device);
    if (nchunks > 0) {
        if (nchunks > 0x7fffffffLL)
            return ct_error(CT_ERROR_NOT_IMPLEMENTED, op, "too many elements for one launch");
        foreach_partial<<<(unsigned)nchunks, FE_THREADS, 0, s>>>(table, n, p, partial);
        ct_status st = ct_cuda_check_launch(op);
        if (st != CT_OK)
            return st;
    }
    foreach_finish<<<(unsigned)((n + FE_THREADS - 1) / FE_THREADS), FE_THREADS, 0, s>>>(table, n, partial);
    return ct_cuda_check_launch(op);
}
