/* cuBLASLt's algorithm for each product: the heuristic's answer, cached, or the one
 * TunableOp chose.
 *
 * Note [TunableOp]
 * cublasLtMatmulAlgoGetHeuristic ranks a product's algorithms from a model of the
 * GPU; its first pick is usually good and sometimes not the fastest. TunableOp
 * (PyTorch's torch.cuda.tunable, which on CUDA offers only the default algorithm)
 * times the candidates instead:
 *
 *   - Every product is known by a key: a signature (dtype, compute type, transposes)
 *     and parameters (sizes, leading dimensions, batch count and strides, whether beta
 *     is 0, the epilogue, the operands' alignments, the workspace). The key decides
 *     which algorithms cuBLASLt may run, so results are kept per key and device.
 *   - The heuristic's answer is cached by key whether TunableOp is on or not: asking
 *     cuBLASLt costs microseconds of host time at every product otherwise.
 *   - With TunableOp on and tuning allowed, the first product of a key outside a graph
 *     capture asks for up to 16 candidates and runs each on the product's own
 *     operands into a scratch output: once against the heuristic's result, compared
 *     on the device (a candidate whose maximum difference exceeds a dtype's tolerance
 *     times the result's largest magnitude is refused), then timed with events: one
 *     warm-up run and as many runs as fit in the duration limit (30 ms, at most 100
 *     runs), as PyTorch's tuning does. The heuristic's own choice is timed the same way. The fastest candidate
 *     then runs again against the heuristic's choice, alternately, three timings each,
 *     and replaces it only if its median is at least 1% faster. On an H200 two timings
 *     of one algorithm differ by several percent, as much as the candidates do; the
 *     second look keeps that noise from swapping the heuristic's choice for an equal
 *     one. Products inside a capture take the heuristic's (or a stored) answer and are
 *     tuned at their next eager run.
 *   - What it buys (bench/tunableop, H200, GPT-2 124M B32 T1024 bf16): timed alone and
 *     alternately with the heuristic's, the step's 15 products take 37.4 ms against
 *     39.7 (1.06x; 10 of 15 changed, from 0.96x to 1.24x each, the head's forward
 *     4.34 to 3.70 ms). Inside the training step no gain shows: three runs with the
 *     file read 361-364k tokens/s, three without 363-365k. A product timed alone, on
 *     the same operands over and over, is not the product in the step.
 *   - cuBLASLt documents cublasLtMatmulAlgo_t as safe to store and reuse with the
 *     same library version, so the results file (src/api/tunable_api.c) holds its 64
 *     bytes as hex, with the library, runtime and device it was made on. A result read
 *     from a file passes cublasLtMatmulAlgoCheck against the product's descriptors
 *     before its first use, or the product goes back to the heuristic. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels.cuh"
#include "tunable.h"

#define LT_BUCKETS 1024
#define LT_MAX_ENTRIES 65536
#define LT_CANDIDATES 16

typedef struct lt_entry {
    struct lt_entry *next;
    uint64_t hash;
    char key[CT_TUNABLE_KEY_MAX];
    bool has_heur;
    cublasStatus_t heur_status;
    int heur_found;
    cublasLtMatmulAlgo_t heur;
    bool has_best, checked, tuned, read;
    cublasLtMatmulAlgo_t best;
    double ms, default_ms;
} lt_entry;

typedef struct {
    lt_entry *bucket[LT_BUCKETS];
    int64_t count;
    bool dirty;
    int64_t candidates, rejected;
    double tuning_ms;
    bool have_validators;
    ct_tunable_validators validators;
} lt_table;

static lt_table tables[CT_CUDA_MAX_DEVICES];
static pthread_mutex_t lt_lock = PTHREAD_MUTEX_INITIALIZER;

static uint64_t key_hash(const char *s) {
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (; *s; s++)
        h = (h ^ (uint8_t)*s) * 1099511628211ull;
    return h;
}

static lt_entry *find(lt_table *t, const char *key, uint64_t h) {
    for (lt_entry *e = t->bucket[h % LT_BUCKETS]; e; e = e->next)
        if (e->hash == h && strcmp(e->key, key) == 0)
            return e;
    return NULL;
}

/* NULL when the table is full or memory is short: the product then asks cuBLASLt. */
static lt_entry *insert(lt_table *t, const char *key, uint64_t h) {
    if (t->count >= LT_MAX_ENTRIES || strlen(key) >= CT_TUNABLE_KEY_MAX)
        return NULL;
    lt_entry *e = (lt_entry *)calloc(1, sizeof *e);
    if (!e)
        return NULL;
    strcpy(e->key, key);
    e->hash = h;
    e->next = t->bucket[h % LT_BUCKETS];
    t->bucket[h % LT_BUCKETS] = e;
    t->count++;
    return e;
}

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

static cublasStatus_t heuristic(const ct_lt_problem *p, int want, cublasLtMatmulHeuristicResult_t *res, int *found) {
    *found = 0;
    return cublasLtMatmulAlgoGetHeuristic(p->lt, p->desc, p->ll, p->lr, p->lc, p->lc, p->pref, want, res, found);
}

/* D = alpha L R + beta D into out (which holds C when beta is not 0). */
static cublasStatus_t run(const ct_lt_problem *p, const cublasLtMatmulAlgo_t *a, void *out) {
    return cublasLtMatmul(p->lt, p->desc, p->alpha, p->l, p->ll, p->r, p->lr, p->beta, out, p->lc, out, p->lc, a,
                          p->workspace, p->ws, p->stream);
}

static size_t elem_size(ct_dtype dt) {
    return dt == CT_DTYPE_FLOAT64 ? 8 : dt == CT_DTYPE_FLOAT32 ? 4 : 2;
}

static size_t span_bytes(const ct_lt_problem *p) {
    return (size_t)((p->nb - 1) * p->batch_stride + (p->cols - 1) * p->ldc + p->rows) * elem_size(p->dtype);
}

/* A product's element as a double. */
static __device__ double value_at(const void *p, int dtype, int64_t i) {
    switch (dtype) {
    case CT_DTYPE_FLOAT64: return ((const double *)p)[i];
    case CT_DTYPE_FLOAT32: return ((const float *)p)[i];
    case CT_DTYPE_FLOAT16: return ct_dev_h2f(((const uint16_t *)p)[i]);
    default: return ct_dev_b2f(((const uint16_t *)p)[i]);
    }
}

/* out[0] = max |got - ref| and out[1] = max |ref| over the finite elements (as the bits
 * of non-negative doubles, which order as integers); out[2] = 1 where a NaN or an
 * infinity of one is not the other's. */
static __global__ void compare_kernel(const void *ref, const void *got, int dtype, int64_t rows, int64_t cols,
                                      int64_t ldc, int64_t bs, int64_t total, unsigned long long *out) {
    double err = 0, scale = 0;
    bool bad = false;
    for (int64_t k = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; k < total; k += (int64_t)gridDim.x * blockDim.x) {
        int64_t b = k / (rows * cols), r = k % (rows * cols);
        int64_t at = b * bs + (r / rows) * ldc + r % rows;
        double x = value_at(ref, dtype, at), y = value_at(got, dtype, at);
        if (isnan(x) || isnan(y) || isinf(x) || isinf(y)) {
            bad |= !(isnan(x) && isnan(y)) && x != y;
            continue;
        }
        err = fmax(err, fabs(x - y));
        scale = fmax(scale, fabs(x));
    }
    atomicMax(&out[0], (unsigned long long)__double_as_longlong(err));
    atomicMax(&out[1], (unsigned long long)__double_as_longlong(scale));
    if (bad)
        out[2] = 1;
}

/* Whether got matches the heuristic's ref: NaNs and infinities where ref has them,
 * and max |got - ref| within the tolerance times max |ref|. The tolerances leave room
 * for another order of summation (split-k), not for another precision. scratch: three
 * words of device memory. */
static bool close_enough(const ct_lt_problem *p, const void *ref, const void *got, unsigned long long *scratch) {
    double tol = p->dtype == CT_DTYPE_FLOAT64    ? 1e-10
                 : p->dtype == CT_DTYPE_FLOAT16  ? 5e-3
                 : p->dtype == CT_DTYPE_BFLOAT16 ? 3e-2
                 : p->tf32                       ? 2e-3
                                                 : 1e-4;
    int64_t total = p->nb * p->rows * p->cols;
    unsigned long long h[3];
    if (cudaMemsetAsync(scratch, 0, 3 * sizeof *scratch, p->stream) != cudaSuccess)
        return false;
    compare_kernel<<<1024, 256, 0, p->stream>>>(ref, got, (int)p->dtype, p->rows, p->cols, p->ldc, p->batch_stride,
                                                 total, scratch);
    if (cudaMemcpyAsync(h, scratch, sizeof h, cudaMemcpyDeviceToHost, p->stream) != cudaSuccess ||
        cudaStreamSynchronize(p->stream) != cudaSuccess)
        return false;
    double err, scale;
    memcpy(&err, &h[0], sizeof err);
    memcpy(&scale, &h[1], sizeof scale);
    return !h[2] && err <= tol * scale;
}

/* Mean milliseconds of one run: a warm-up, one timed run to size the loop, then as many
 * runs as fit in the duration limit. */
static bool time_algo(const ct_lt_problem *p, const cublasLtMatmulAlgo_t *a, void *out, const ct_tunable_settings *s,
                      cudaEvent_t e0, cudaEvent_t e1, double *ms) {
    float one = 0, all = 0;
    if (run(p, a, out) != CUBLAS_STATUS_SUCCESS || cudaEventRecord(e0, p->stream) != cudaSuccess ||
        run(p, a, out) != CUBLAS_STATUS_SUCCESS || cudaEventRecord(e1, p->stream) != cudaSuccess ||
        cudaEventSynchronize(e1) != cudaSuccess || cudaEventElapsedTime(&one, e0, e1) != cudaSuccess)
        return false;
    int iters = s->max_iterations;
    if (one > 0 && (double)s->max_duration_ms / one < iters)
        iters = (int)((double)s->max_duration_ms / one);
    if (iters < 1)
        iters = 1;
    if (cudaEventRecord(e0, p->stream) != cudaSuccess)
        return false;
    for (int i = 0; i < iters; i++)
        if (run(p, a, out) != CUBLAS_STATUS_SUCCESS)
            return false;
    if (cudaEventRecord(e1, p->stream) != cudaSuccess || cudaEventSynchronize(e1) != cudaSuccess ||
        cudaEventElapsedTime(&all, e0, e1) != cudaSuccess)
        return false;
    *ms = (double)all / iters;
    return true;
}

/* Runs a into out, with C copied in first when beta is not 0. */
static bool run_into(const ct_lt_problem *p, const cublasLtMatmulAlgo_t *a, void *out, size_t bytes) {
    if (!p->beta_zero && cudaMemcpyAsync(out, p->c, bytes, cudaMemcpyDeviceToDevice, p->stream) != cudaSuccess)
        return false;
    return run(p, a, out) == CUBLAS_STATUS_SUCCESS;
}

static ct_status fill_validators(lt_table *t, int device) {
    if (t->have_validators)
        return CT_OK;
    int rt = 0;
    cudaDeviceProp prop;
    if (cudaRuntimeGetVersion(&rt) != cudaSuccess || cudaGetDeviceProperties(&prop, device) != cudaSuccess) {
        cudaError_t err = cudaGetLastError();
        return ct_error(CT_ERROR_RUNTIME, "TunableOp", "CUDA error: %s", cudaGetErrorString(err));
    }
    ct_tunable_validators *v = &t->validators;
    snprintf(v->cublaslt, sizeof v->cublaslt, "%zu", cublasLtGetVersion());
    snprintf(v->runtime, sizeof v->runtime, "%d", rt);
    snprintf(v->device, sizeof v->device, "%s sm_%d%d", prop.name, prop.major, prop.minor);
    for (char *c = v->device; *c; c++)
        if (*c == ',' || *c == '\n' || *c == '\r')
            *c = ' ';
    t->have_validators = true;
    return CT_OK;
}

static double median3(const double *v) {
    double a = v[0], b = v[1], c = v[2];
    return a > b ? (b > c ? b : a > c ? c : a) : (a > c ? a : b > c ? c : b);
}

/* Chooses e->best among the candidates (Note [TunableOp]). Whatever goes wrong leaves
 * the heuristic's choice, so tuning never turns a product into an error. */
static void tune(lt_table *t, lt_entry *e, const ct_lt_problem *p, const ct_tunable_settings *s) {
    double t0 = now_ms();
    e->has_best = e->checked = e->tuned = true;
    e->read = false;
    e->best = e->heur;
    e->ms = e->default_ms = 0;
    t->dirty = true;
    /* the file this result will be written to at exit names the device: read it now,
     * while the CUDA runtime is sure to be up; the write reports a failure */
    if (fill_validators(t, p->device) != CT_OK)
        ct_clear_error();
    cublasLtMatmulHeuristicResult_t res[LT_CANDIDATES];
    int n = 0;
    if (heuristic(p, LT_CANDIDATES, res, &n) != CUBLAS_STATUS_SUCCESS)
        n = 0;
    size_t bytes = span_bytes(p);
    void *ref = NULL, *out = NULL;
    unsigned long long *scratch = NULL;
    cudaEvent_t e0 = NULL, e1 = NULL;
    if (cudaMalloc(&ref, bytes) != cudaSuccess || cudaMalloc(&out, bytes) != cudaSuccess ||
        cudaMalloc(&scratch, 3 * sizeof *scratch) != cudaSuccess || cudaEventCreate(&e0) != cudaSuccess ||
        cudaEventCreate(&e1) != cudaSuccess)
        goto done;
    t->candidates++;
    if (!run_into(p, &e->heur, ref, bytes) || !time_algo(p, &e->heur, out, s, e0, e1, &e->default_ms))
        goto done;
    e->ms = e->default_ms;
    for (int i = 0; i < n; i++) {
        if (memcmp(&res[i].algo, &e->heur, sizeof e->heur) == 0)
            continue;
        t->candidates++;
        double ms;
        if (res[i].workspaceSize > p->ws || !run_into(p, &res[i].algo, out, bytes) ||
            !close_enough(p, ref, out, scratch) || !time_algo(p, &res[i].algo, out, s, e0, e1, &ms)) {
            (void)cudaGetLastError();
            t->rejected++;
            continue;
        }
        if (ms < e->ms) {
            e->ms = ms;
            e->best = res[i].algo;
        }
    }
    if (memcmp(&e->best, &e->heur, sizeof e->best) != 0) {
        /* The sweep times each candidate once, minutes apart in GPU time: the winner
         * and the heuristic's choice run again, alternately, three times each, and the
         * winner stays only if its median is 1% faster (Note [TunableOp]). */
        double d[3], w[3];
        bool ok = true;
        for (int r = 0; ok && r < 3; r++)
            ok = time_algo(p, &e->heur, out, s, e0, e1, &d[r]) && time_algo(p, &e->best, out, s, e0, e1, &w[r]);
        if (ok && median3(w) < 0.99 * median3(d)) {
            e->ms = median3(w);
            e->default_ms = median3(d);
        } else {
            e->best = e->heur;
            e->ms = e->default_ms = ok ? median3(d) : e->default_ms;
        }
    }
done:
    if (ref || out)
        cudaStreamSynchronize(p->stream);
    cudaFree(ref);
    cudaFree(out);
    cudaFree(scratch);
    if (e0)
        cudaEventDestroy(e0);
    if (e1)
        cudaEventDestroy(e1);
    (void)cudaGetLastError(); /* a failed scratch allocation is not the product's error */
    t->tuning_ms += now_ms() - t0;
}

static bool capturing(const ct_lt_problem *p) {
    cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
    return ct_cuda_capturing() || cudaStreamIsCapturing(p->stream, &cs) != cudaSuccess ||
           cs != cudaStreamCaptureStatusNone;
}

extern "C" cublasStatus_t ct_lt_algo(const ct_lt_problem *p, cublasLtMatmulAlgo_t *algo, int *found) {
    cublasLtMatmulHeuristicResult_t r;
    if (!p->key) { /* a key too long to keep: ask every time */
        cublasStatus_t s = heuristic(p, 1, &r, found);
        if (*found)
            *algo = r.algo;
        return s;
    }
    ct_tunable_settings s;
    ct_tunable_settings_get(&s);
    if (s.enabled)
        ct_tunable_load_device_file(p->device); /* once per device; takes lt_lock itself */
    uint64_t h = key_hash(p->key);
    pthread_mutex_lock(&lt_lock);
    lt_table *t = &tables[p->device];
    lt_entry *e = find(t, p->key, h);
    if (!e)
        e = insert(t, p->key, h);
    if (s.enabled && e && e->has_best && !e->checked) {
        e->checked = true;
        if (cublasLtMatmulAlgoCheck(p->lt, p->desc, p->ll, p->lr, p->lc, p->lc, &e->best, &r) !=
                CUBLAS_STATUS_SUCCESS ||
            r.workspaceSize > p->ws)
            e->has_best = e->read = false;
    }
    if (!e || !e->has_heur) {
        int n = 0;
        cublasStatus_t st = heuristic(p, 1, &r, &n);
        if (!e || (st != CUBLAS_STATUS_SUCCESS && st != CUBLAS_STATUS_NOT_SUPPORTED)) {
            pthread_mutex_unlock(&lt_lock);
            *found = n;
            if (n)
                *algo = r.algo;
            return st;
        }
        e->has_heur = true;
        e->heur_status = st;
        e->heur_found = st == CUBLAS_STATUS_SUCCESS ? n : 0;
        if (e->heur_found)
            e->heur = r.algo;
    }
    if (s.enabled && s.tuning && !e->has_best && e->heur_found && !capturing(p))
        tune(t, e, p, &s);
    cublasStatus_t st = e->heur_status;
    *found = e->heur_found;
    if (s.enabled && e->has_best) {
        *algo = e->best;
        *found = 1;
        st = CUBLAS_STATUS_SUCCESS;
    } else if (e->heur_found) {
        *algo = e->heur;
    }
    pthread_mutex_unlock(&lt_lock);
    return st;
}

/* ------------------------------------------------------------------ the runtime table */

static bool valid(int device) { return device >= 0 && device < CT_CUDA_MAX_DEVICES; }

extern "C" ct_status ct_lt_export(int device, ct_tunable_result **out, int64_t *n) {
    *out = NULL;
    *n = 0;
    if (!valid(device))
        return ct_error(CT_ERROR_DEVICE, "TunableOp", "invalid device %d", device);
    pthread_mutex_lock(&lt_lock);
    lt_table *t = &tables[device];
    ct_tunable_result *r = (ct_tunable_result *)malloc((size_t)(t->count ? t->count : 1) * sizeof *r);
    if (!r) {
        pthread_mutex_unlock(&lt_lock);
        return ct_error(CT_ERROR_OUT_OF_MEMORY, "TunableOp", "out of memory");
    }
    int64_t k = 0;
    for (int b = 0; b < LT_BUCKETS; b++)
        for (lt_entry *e = t->bucket[b]; e; e = e->next) {
            if (!e->has_best)
                continue;
            memset(&r[k], 0, sizeof r[k]);
            strcpy(r[k].key, e->key);
            memcpy(r[k].algo, &e->best, sizeof r[k].algo);
            r[k].ms = e->ms;
            r[k].default_ms = e->default_ms;
            k++;
        }
    t->dirty = false;
    pthread_mutex_unlock(&lt_lock);
    *out = r;
    *n = k;
    return CT_OK;
}

extern "C" ct_status ct_lt_import(int device, const ct_tunable_result *r, int64_t n) {
    if (!valid(device))
        return ct_error(CT_ERROR_DEVICE, "TunableOp", "invalid device %d", device);
    static_assert(sizeof(cublasLtMatmulAlgo_t) == sizeof r->algo, "cuBLASLt's algorithm is 64 bytes");
    pthread_mutex_lock(&lt_lock);
    lt_table *t = &tables[device];
    for (int64_t i = 0; i < n; i++) {
        uint64_t h = key_hash(r[i].key);
        lt_entry *e = find(t, r[i].key, h);
        if (!e)
            e = insert(t, r[i].key, h);
        if (!e || e->has_best)
            continue; /* what this process has wins */
        memcpy(&e->best, r[i].algo, sizeof e->best);
        e->has_best = e->read = true;
        e->checked = e->tuned = false;
        e->ms = r[i].ms;
        e->default_ms = r[i].default_ms;
    }
    pthread_mutex_unlock(&lt_lock);
    return CT_OK;
}

extern "C" void ct_lt_clear(int device) {
    if (!valid(device))
        return;
    pthread_mutex_lock(&lt_lock);
    lt_table *t = &tables[device];
    for (int b = 0; b < LT_BUCKETS; b++)
        while (t->bucket[b]) {
            lt_entry *e = t->bucket[b];
            t->bucket[b] = e->next;
            free(e);
        }
    t->count = t->candidates = t->rejected = 0;
    t->tuning_ms = 0;
    t->dirty = false;
    pthread_mutex_unlock(&lt_lock);
}

extern "C" void ct_lt_stats(int device, ct_cuda_tunable_stats *out) {
    memset(out, 0, sizeof *out);
    if (!valid(device))
        return;
    pthread_mutex_lock(&lt_lock);
    lt_table *t = &tables[device];
    for (int b = 0; b < LT_BUCKETS; b++)
        for (lt_entry *e = t->bucket[b]; e; e = e->next) {
            out->results += e->has_best;
            out->tuned += e->has_best && e->tuned;
            out->read += e->has_best && e->read;
            out->improved += e->has_best && e->tuned && memcmp(&e->best, &e->heur, sizeof e->best) != 0;
        }
    out->candidates = t->candidates;
    out->rejected = t->rejected;
    out->tuning_ms = t->tuning_ms;
    pthread_mutex_unlock(&lt_lock);
}

extern "C" bool ct_lt_dirty(int device) {
    if (!valid(device))
        return false;
    pthread_mutex_lock(&lt_lock);
    bool d = tables[device].dirty;
    pthread_mutex_unlock(&lt_lock);
    return d;
}

extern "C" ct_status ct_lt_validators(int device, ct_tunable_validators *out) {
    if (!valid(device))
        return ct_error(CT_ERROR_DEVICE, "TunableOp", "invalid device %d", device);
    pthread_mutex_lock(&lt_lock);
    ct_status st = fill_validators(&tables[device], device);
    if (st == CT_OK)
        *out = tables[device].validators;
    pthread_mutex_unlock(&lt_lock);
    return st;
}
