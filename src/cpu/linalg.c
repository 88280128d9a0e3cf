/* CPU matrix products: oneDNN's sgemm for float32 where it is installed (Note [oneDNN
 * sgemm]), OpenBLAS for float64 (and float32 without oneDNN), float16/bfloat16 through
 * float32, plain loops for integers. */
#include <string.h>

#include "core/factory.h"
#include "core/parallel.h"
#include "core/view.h"
#include "cpu/cpu_backend.h"
#include "core/dtype.h"
#include "cpu/loop.h"
#include "cpu/loops.h"
#include "cpu/blas.h"
#include "cpu/cpu_isa.h"
#include "observe/trace_log.h"
#include "meta/linalg.h"

#ifdef CT_HAVE_OPENBLAS
#include <cblas.h>
#endif
#ifdef CT_HAVE_DNNL
#include <dnnl.h>
#include <stdlib.h>
#endif

/* Note [oneDNN sgemm]
 * On two cores of the GPU machine's Xeon, OpenBLAS (Debian's 0.3.21, its Cooperlake
 * kernels) reached 205-218 GFLOP/s for a 256^3 float32 product and oneDNN's dnnl_sgemm
 * (Debian's libdnnl 2.6.3, which JIT-compiles its kernels for the CPU it runs on and
 * shares OpenMP's thread pool) 300-311; 232-297 against 254-294 at 1024, 257-309
 * against 270-317 at 2048 (three rounds, alternating). PyTorch, whose CPU GEMMs come
 * from MKL and oneDNN, reached 177-211 at 256 in bench/ops on the same machine. So
 * float32 products go to dnnl_sgemm when the library was built with it (CMake option
 * CT_DNNL, on by default), and to OpenBLAS when oneDNN reports an error or
 * CT_SGEMM=openblas is set in the environment. Its results may differ from OpenBLAS' in the last bits (another order of
 * the k sums), as OpenBLAS' differ between its own kernels. float64 stays on OpenBLAS:
 * oneDNN has no dgemm.
 * One core each, GFLOP/s over 22 products as Note [GEMM chunks] cuts them (the LSTM's,
 * the transformer's, a convolution's weight gradient): on the GPU machine's Xeon oneDNN
 * ran 70-160 and OpenBLAS 19-30 for every one, OpenBLAS with the kernels it picks by
 * itself there (the program did not call ct_runtime_tune_and_reexec, which sets
 * OPENBLAS_CORETYPE: docs/building.md), so that figure is not OpenBLAS at its best. On
 * AMD's cores some products are slow in oneDNN and go to OpenBLAS (Note [Row strides of
 * 2 KiB on AMD]). */
bool ct_cpu_sgemm_onednn(void) {
#ifdef CT_HAVE_DNNL
    static int use = -1; /* every thread reads the same environment, so a race only repeats it */
    int u = __atomic_load_n(&use, __ATOMIC_RELAXED);
    if (u < 0) {
        const char *e = getenv("CT_SGEMM");
        u = !(e && strcmp(e, "openblas") == 0);
        __atomic_store_n(&use, u, __ATOMIC_RELAXED);
    }
    return u;
#else
    return false;
#endif
}

#ifdef CT_HAVE_DNNL
static bool sgemm_dnnl(bool ta, bool tb, int64_t n, int64_t m, int64_t k, float alpha, const float *a, int64_t lda,
                       const float *b, int64_t ldb, float beta, float *c, int64_t ldc) {
    return ct_cpu_sgemm_onednn() &&
           dnnl_sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', n, m, k, alpha, a, lda, b, ldb, beta, c, ldc) == dnnl_success;
}
#endif

/* A matrix operand: base pointer and element strides of its two dims. */
typedef struct {
    const char *p;
    int64_t s0, s1;
} mat;

static int64_t max1(int64_t x) { return x > 1 ? x : 1; }

/* Can BLAS read m (rows x cols) directly, as row-major or as a transposed row-major
 * matrix? Sets trans and the leading dimension. Size-1 dims may carry any stride, so
 * they are normalised first. */
static bool blas_layout(mat m, int64_t rows, int64_t cols, bool *trans, int64_t *ld) {
    int64_t s0 = rows == 1 ? max1(cols) : m.s0, s1 = cols == 1 ? 1 : m.s1;
    if (s1 == 1 && s0 >= max1(cols)) {
        *trans = false;
        *ld = s0;
        return true;
    }
    s0 = rows == 1 ? 1 : m.s0;
    s1 = cols == 1 ? max1(rows) : m.s1;
    if (s0 == 1 && s1 >= max1(rows)) {
        *trans = true;
        *ld = s1;
        return true;
    }
    return false;
}

/* C (n x m, contiguous rows, row stride ldc) = alpha * A (n x k) @ B (k x m) + beta * C.
 * When beta is 0, C's old contents are ignored (NaN included), as BLAS does. */
static void gemm_generic(ct_dtype dt, int64_t n, int64_t m, int64_t k, mat A, mat B, char *C, int64_t ldc,
                         double alpha, double beta) {
    size_t esz = ct_dtype_size(dt);
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < m; j++) {
            char *cp = C + (size_t)(i * ldc + j) * esz;
            if (ct_dtype_is_floating(dt)) {
                double acc = 0;
                for (int64_t p = 0; p < k; p++)
                    acc += ct_load_double(A.p + (size_t)(i * A.s0 + p * A.s1) * esz, dt) *
                           ct_load_double(B.p + (size_t)(p * B.s0 + j * B.s1) * esz, dt);
                double old = beta != 0 ? ct_load_double(cp, dt) * beta : 0;
                ct_store_double(cp, dt, alpha * acc + old);
            } else {
                uint64_t acc = 0; /* wraps like the element type would */
                for (int64_t p = 0; p < k; p++)
                    acc += (uint64_t)ct_load_int64(A.p + (size_t)(i * A.s0 + p * A.s1) * esz, dt) *
                           (uint64_t)ct_load_int64(B.p + (size_t)(p * B.s0 + j * B.s1) * esz, dt);
                int64_t ia = ct_cpu_wrap_int(alpha), ib = ct_cpu_wrap_int(beta);
                uint64_t old = ib != 0 ? (uint64_t)ct_load_int64(cp, dt) * (uint64_t)ib : 0;
                ct_store_int64(cp, dt, (int64_t)(acc * (uint64_t)ia + old));
            }
        }
}

#ifdef CT_HAVE_OPENBLAS
/* One BLAS (or oneDNN, unless no_dnnl) call, on the calling thread's OpenMP setting. */
static void gemm_blas(ct_dtype dt, int64_t n, int64_t m, int64_t k, mat A, mat B, char *C, int64_t ldc, double alpha,
                      double beta, bool ta, int64_t lda, bool tb, int64_t ldb, bool no_dnnl) {
#ifdef CT_HAVE_DNNL
    if (dt == CT_DTYPE_FLOAT32 && !no_dnnl && sgemm_dnnl(ta, tb, n, m, k, (float)alpha, (const float *)A.p, lda,
                                             (const float *)B.p, ldb, (float)beta, (float *)C, ldc)) {
        if (CT_TRACE_LOG_ON())
            ct_trace_log_kernel_choice(__FILE__, __LINE__, "gemm", "onednn", dt, n, m, k);
        return;
    }
#else
    (void)no_dnnl;
#endif
    if (dt == CT_DTYPE_FLOAT32)
        cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, (int)n, (int)m,
                    (int)k, (float)alpha, (const float *)A.p, (int)lda, (const float *)B.p, (int)ldb, (float)beta,
                    (float *)C, (int)ldc);
    else
        cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, (int)n, (int)m,
                    (int)k, alpha, (const double *)A.p, (int)lda, (const double *)B.p, (int)ldb, beta, (double *)C,
                    (int)ldc);
    if (CT_TRACE_LOG_ON())
        ct_trace_log_kernel_choice(__FILE__, __LINE__, "gemm", "blas", dt, n, m, k);
}
#endif

/* Note [GEMM chunks]
 * A BLAS-sized product is cut into blocks of rows of C (or of columns, when C is wider
 * than tall), each one single-threaded BLAS call, and the blocks are the chunks of a
 * ctorch region (Note [Threads on a busy machine] in core/parallel.c): OpenMP's
 * static split inside oneDNN and OpenBLAS waits for its slowest thread at every
 * product, and a thread that shares its core with another process is very slow. The
 * block size depends on the shape alone (a block is at least GEMM_MIN_FLOPS of work,
 * a multiple of 16 rows or columns, at most GEMM_MAX_CHUNKS blocks), so a product gives
 * the same bits for any thread count; a product too small for two blocks is one call
 * on the calling thread. Each block is a call of its own, with its own overhead: with
 * blocks of 2 MFLOP the char model's one-thread step took about 12% more process CPU
 * than before the split, with 8 MFLOP 4-8%, with 16 MFLOP 1-2% (two or three
 * alternating runs each, 92-103 ms a step). */
#define GEMM_MIN_FLOPS ((int64_t)1 << 24)
#define GEMM_MAX_CHUNKS 16

int64_t ct_cpu_gemm_block(int64_t n, int64_t m, int64_t k, int64_t dim) {
    int64_t chunks = 2 * n * m * k / GEMM_MIN_FLOPS;
    if (chunks > GEMM_MAX_CHUNKS)
        chunks = GEMM_MAX_CHUNKS;
    if (chunks > dim / 16)
        chunks = dim / 16;
    if (chunks < 1)
        chunks = 1;
    return ((dim + chunks - 1) / chunks + 15) / 16 * 16;
}

#ifdef CT_HAVE_OPENBLAS

/* Note [Row strides of 2 KiB on AMD]
 * On AMD's cores oneDNN 2.6's sgemm slows down 1.5-2.6x when it reads an operand across
 * rows that are a multiple of 512 floats (2 KiB) apart: a transposed A (the weight
 * gradient dY^T X of a linear layer whose output width is 512, 1024, 1536, 2048...) or a
 * B that is not transposed (X W with W's rows that long, and dY^T X with such an input
 * width). The rows then fall into the same cache sets; OpenBLAS, which copies its
 * panels first, does not slow down. One core of the 2-core EPYC (AVX2), blocks as
 * above, GFLOP/s oneDNN against OpenBLAS: dY (2048 x 1000)^T X (2048 x 1000): 82 / 78,
 * with X 2048 wide 38 / 77, with dY 1024 wide 32 / 78, 1536 wide 60 / 81; X (2048 x
 * 1000) W (1000 x 1000) 86 / 83, with W 1024 wide 39 / 83; X W^T the same 83 / 80 at
 * every width; the LSTM's A^T (2048 x 4096) @ (4096 x 512) 33 / 77. So on a CPU that is
 * not Intel's, such products go to OpenBLAS. On the GPU machine's Xeon oneDNN ran every
 * shape measured at 70-160 (Note [oneDNN sgemm]): Intel's cores keep oneDNN. The choice
 * depends on the layout and the CPU alone, so a product's bits do not depend on the
 * thread count. On the EPYC, one thread, three alternating rounds: char-gpt's step
 * 88.9-90.3 ms against 91.7-93.0 without this, the LSTM's (bench/rnn) 1316-1374 against
 * 1504-1615 ms, the CNN's 29.1-29.7 against 28.9-29.1 ms (before this the whole LSTM
 * step took 2075 ms, and 1410 ms with CT_SGEMM=openblas; the CNN's 29.0 and 33.2 ms). */
static bool gemm_skip_dnnl(ct_dtype dt, bool ta, int64_t lda, bool tb, int64_t ldb) {
    return dt == CT_DTYPE_FLOAT32 && ((ta && lda % 512 == 0) || (!tb && ldb % 512 == 0)) && !ct_cpu_is_intel();
}

typedef struct {
    ct_dtype dt;
    int64_t n, m, k, bs, ldc, lda, ldb;
    bool rows, ta, tb, no_dnnl;
    mat A, B;
    char *C;
    double alpha, beta;
} gemm_job;

static void gemm_chunk(void *ctx, int64_t c) {
    const gemm_job *j = ctx;
    size_t esz = ct_dtype_size(j->dt);
    int64_t b = c * j->bs, dim = j->rows ? j->n : j->m;
    int64_t len = dim - b < j->bs ? dim - b : j->bs;
    mat A = j->A, B = j->B;
    if (j->rows) {
        A.p += (size_t)(b * A.s0) * esz;
        gemm_blas(j->dt, len, j->m, j->k, A, B, j->C + (size_t)(b * j->ldc) * esz, j->ldc, j->alpha, j->beta, j->ta,
                  j->lda, j->tb, j->ldb, j->no_dnnl);
    } else {
        B.p += (size_t)(b * B.s1) * esz;
        gemm_blas(j->dt, j->n, len, j->k, A, B, j->C + (size_t)b * esz, j->ldc, j->alpha, j->beta, j->ta, j->lda,
                  j->tb, j->ldb, j->no_dnnl);
    }
}
#endif

static void gemm(ct_dtype dt, int64_t n, int64_t m, int64_t k, mat A, mat B, char *C, int64_t ldc, double alpha,
                 double beta) {
    if (n == 0 || m == 0)
        return;
#ifdef CT_HAVE_OPENBLAS
    bool ta, tb;
    int64_t lda, ldb;
    if ((dt == CT_DTYPE_FLOAT32 || dt == CT_DTYPE_FLOAT64) && k > 0 && blas_layout(A, n, k, &ta, &lda) &&
        blas_layout(B, k, m, &tb, &ldb)) {
        gemm_job j = {dt, n, m, k, 0, ldc, lda, ldb, n >= m, ta, tb, gemm_skip_dnnl(dt, ta, lda, tb, ldb), A, B, C,
                      alpha, beta};
        int64_t dim = j.rows ? n : m;
        j.bs = ct_cpu_gemm_block(n, m, k, dim);
        ct_parallel_for((dim + j.bs - 1) / j.bs, ct_get_num_threads(), gemm_chunk, &j);
        return;
    }
#endif
    if (CT_TRACE_LOG_ON())
        ct_trace_log_kernel_choice(__FILE__, __LINE__, "gemm", "generic", dt, n, m, k);
    gemm_generic(dt, n, m, k, A, B, C, ldc, alpha, beta);
}

/* out (contiguous) = beta * out + alpha * a @ b over a batch (ndim 2 or 3). */
static ct_status batched_product(const ct_tensor *a, const ct_tensor *b, ct_tensor *out, double alpha, double beta) {
    if (out->numel == 0) /* nothing to write: no loop over the batches of an empty result */
        return CT_OK;
    ct_scope_begin();
    ct_dtype dt = a->dtype;
    bool low = dt == CT_DTYPE_FLOAT16 || dt == CT_DTYPE_BFLOAT16;
    /* Note [Reduced-precision GEMM]: float16/bfloat16 products accumulate in float32
     * (OpenBLAS sgemm) and round once, which is what PyTorch's CPU path does too. */
    const ct_tensor *A = low ? ct_to_dtype_impl(a, CT_DTYPE_FLOAT32) : a;
    const ct_tensor *B = low ? ct_to_dtype_impl(b, CT_DTYPE_FLOAT32) : b;
    ct_tensor *C = low ? ct_to_dtype_impl(out, CT_DTYPE_FLOAT32) : out;
    if (!A || !B || !C) {
        ct_scope_end();
        return ct_last_status();
    }
    ct_dtype cdt = C->dtype;
    size_t esz = ct_dtype_size(cdt);
    bool batched = out->ndim == 3;
    int64_t nb = batched ? out->shape[0] : 1;
    int64_t n = out->shape[batched], m = out->shape[batched + 1], k = A->shape[A->ndim - 1];
    for (int64_t i = 0; i < nb; i++) {
        mat ma = {ct_tensor_ptr(A) + (batched ? i * A->strides[0] : 0) * (int64_t)esz, A->strides[batched],
                  A->strides[batched + 1]};
        mat mb = {ct_tensor_ptr(B) + (batched ? i * B->strides[0] : 0) * (int64_t)esz, B->strides[batched],
                  B->strides[batched + 1]};
        char *pc = ct_tensor_ptr(C) + (batched ? i * C->strides[0] : 0) * (int64_t)esz;
        if (k == 0) { /* an empty sum: C = beta * C (an integer C with beta as an integer, wrapping) */
            bool fl = ct_dtype_is_floating(cdt);
            int64_t ib = fl ? 0 : ct_cpu_wrap_int(beta);
            for (int64_t r = 0; r < n * m; r++) {
                char *cp = pc + (size_t)r * esz;
                if (fl)
                    ct_store_double(cp, cdt, beta != 0 ? beta * ct_load_double(cp, cdt) : 0.0);
                else
                    ct_store_int64(cp, cdt, (int64_t)((uint64_t)ct_load_int64(cp, cdt) * (uint64_t)ib));
            }
            continue;
        }
        gemm(cdt, n, m, k, ma, mb, pc, m, alpha, beta);
    }
    if (low && !ct_copy_impl(out, C)) {
        ct_scope_end();
        return ct_last_status();
    }
    ct_scope_end();
    return CT_OK;
}

/* Runs a product into call->out[0], through a contiguous temporary when the given
 * output is not contiguous. c (addmm's input) is copied in first when beta != 0. */
static ct_status product_kernel(ct_call *call, const ct_tensor *c, const ct_tensor *a, const ct_tensor *b,
                                double alpha, double beta) {
    ct_status st = ct_linalg_prepare_out(call, CT_CPU);
    if (st)
        return st;
    ct_tensor *out = call->out[0];
    ct_scope_begin();
    ct_tensor *work = ct_tensor_is_contiguous(out) ? out : ct_empty_impl(out->shape, out->ndim, out->dtype, CT_CPU);
    if (work && c && beta != 0 && !ct_copy_impl(work, c))
        work = NULL;
    st = work ? batched_product(a, b, work, alpha, c ? beta : 0.0) : ct_last_status();
    if (st == CT_OK && work != out && !ct_copy_impl(out, work))
        st = ct_last_status();
    ct_scope_end();
    return st;
}

ct_status ct_cpu_mm(ct_keyset ks, ct_call *call, void *ud) {
    (void)ks, (void)ud;
    return product_kernel(call, NULL, call->in[0], call->in[1], 1.0, 0.0);
}

ct_status ct_cpu_bmm(ct_keyset ks, ct_call *call, void *ud) { return ct_cpu_mm(ks, call, ud); }

ct_status ct_cpu_addmm(ct_keyset ks, ct_call *call, void *ud) {
    (void)ks, (void)ud;
    return product_kernel(call, call->in[0], call->in[1], call->in[2], ct_scalar_to_double(call->s[1]),
                          ct_scalar_to_double(call->s[0]));
}

ct_status ct_cpu_baddbmm(ct_keyset ks, ct_call *call, void *ud) { return ct_cpu_addmm(ks, call, ud); }

ct_status ct_cpu_addmm_activation(ct_keyset ks, ct_call *call, void *ud) {
    ct_status st = ct_cpu_addmm(ks, call, ud);
    return st ? st : ct_linalg_activation_(call->out[0], call->ints[0] != 0);
}

ct_status ct_cpu_dot(ct_keyset ks, ct_call *call, void *ud) {
    (void)ks, (void)ud;
    ct_status st = ct_linalg_prepare_out(call, CT_CPU);
    if (st)
        return st;
    const ct_tensor *a = call->in[0], *b = call->in[1];
    ct_dtype dt = a->dtype;
    int64_t n = a->shape[0];
    const char *pa = ct_tensor_ptr(a), *pb = ct_tensor_ptr(b);
    char *po = ct_tensor_ptr(call->out[0]);
    if (n == 0) {
        ct_store_int64(po, dt, 0);
        return CT_OK;
    }
#ifdef CT_HAVE_OPENBLAS
    if (dt == CT_DTYPE_FLOAT32) {
        *(float *)po = cblas_sdot((int)n, (const float *)pa, (int)a->strides[0], (const float *)pb, (int)b->strides[0]);
        return CT_OK;
    }
    if (dt == CT_DTYPE_FLOAT64) {
        *(double *)po = cblas_ddot((int)n, (const double *)pa, (int)a->strides[0], (const double *)pb, (int)b->strides[0]);
        return CT_OK;
    }
#endif
    mat ma = {pa, 0, a->strides[0]}, mb = {pb, b->strides[0], 0};
    gemm_generic(dt, 1, 1, n, ma, mb, po, 1, 1.0, 0.0);
    return CT_OK;
}

void ct_cpu_gemm(ct_dtype dtype, bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha, const void *a,
                 int64_t lda, const void *b, int64_t ldb, double beta, void *c, int64_t ldc) {
    mat A = {a, ta ? 1 : lda, ta ? lda : 1};
    mat B = {b, tb ? 1 : ldb, tb ? ldb : 1};
    gemm(dtype, m, n, k, A, B, c, ldc, alpha, beta);
}
