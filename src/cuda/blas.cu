/* Matrix products through cuBLASLt (mm, bmm, addmm, baddbmm) and dot through cuBLAS.
 *
 * Note [Row-major products in cuBLAS]
 * cuBLAS is column-major. A row-major n x m result C is the column-major m x n matrix
 * C^T = B^T A^T, so the kernel computes that product with the operands swapped. A
 * row-major operand with unit column stride is a column-major transposed matrix with
 * leading dimension = its row stride (no transpose needed on the swapped side); one
 * with unit row stride is a column-major matrix (transpose). The C side makes any
 * other layout contiguous before calling here.
 *
 * Note [Bias epilogue]
 * addmm with beta = 1 and a bias row (one value per output column, broadcast over the
 * rows) is what linear asks for. Instead of copying the broadcast bias into the whole
 * output and running the product with beta = 1, the product runs with beta = 0 and
 * cuBLASLt's CUBLASLT_EPILOGUE_BIAS adds the vector as it writes the result:
 * D = alpha * (A @ B) + bias, alpha not applied to the bias, as addmm's beta = 1 wants.
 * cuBLASLt's bias has one element per row of its column-major D, which after the swap
 * above is one per column of the row-major output: the bias row as stored (m packed
 * elements). Its type is D's for every (dtype, compute type) pair used here (float16
 * and bfloat16 included, with float32 compute); it is set explicitly all the same.
 * The plain bias epilogue needs no auxiliary buffer (the *_AUX ones have leading
 * dimension rules: multiples of 128 or 8); the heuristic sees the bias pointer and
 * picks algorithms for its alignment, and the bias must be 16-byte aligned here on top.
 * Where the heuristic finds no algorithm, or any epilogue attribute is refused, the
 * caller falls back to the copy and beta = 1, so the epilogue only ever saves work and
 * never turns into an error. addmm_activation asks for RELU_BIAS or GELU_BIAS (the
 * tanh form of GELU, as its CPU kernel) the same way, except GELU in float64 (the
 * epilogue's GELU is good to about 2e-10 relative only); on the fallback the
 * activation runs as a kernel of its own. */
#include <cublasLt.h>
#include <cublas_v2.h>
#include <pthread.h>
#include <string.h>

#include "kernels.cuh"
#include "tunable.h"

#define CT_CUBLAS_WORKSPACE ((size_t)32 << 20)

typedef struct {
    cublasLtHandle_t lt;
    cublasHandle_t blas;
    void *workspace;
    bool ready;
} device_blas;

static device_blas blas_state[CT_CUDA_MAX_DEVICES];
static pthread_mutex_t blas_lock = PTHREAD_MUTEX_INITIALIZER;

static ct_status lt_fail(cublasStatus_t s, const char *op, const char *what) {
    return ct_error(CT_ERROR_RUNTIME, op, "CUDA error: %s failed: %s (%s)", what, cublasGetStatusString(s),
                    cublasGetStatusName(s));
}

/* The status that sends the caller from the bias epilogue back to the plain product
 * (Note [Bias epilogue]); the caller clears the message. */
static ct_status no_epilogue(const char *op) {
    return ct_error(CT_ERROR_NOT_IMPLEMENTED, op, "cuBLASLt has no bias epilogue for this product");
}

static device_blas *get_blas(int device, const char *op) {
    pthread_mutex_lock(&blas_lock);
    device_blas *b = &blas_state[device];
    if (!b->ready && ct_cuda_capturing()) {
        /* Note [Capture guard]: handles and the workspace are made outside captures */
        pthread_mutex_unlock(&blas_lock);
        ct_cuda_capture_refuse(op, "it would create the cuBLAS handles and the cuBLASLt workspace of the device, "
                                   "which happens at the first product: run the work once eagerly before capturing "
                                   "it (warm-up)");
        return NULL;
    }
    if (!b->ready) {
        cublasStatus_t s = cublasLtCreate(&b->lt);
        if (s != CUBLAS_STATUS_SUCCESS) {
            pthread_mutex_unlock(&blas_lock);
            lt_fail(s, op, "cublasLtCreate");
            return NULL;
        }
        s = cublasCreate(&b->blas);
        if (s != CUBLAS_STATUS_SUCCESS) {
            cublasLtDestroy(b->lt);
            pthread_mutex_unlock(&blas_lock);
            lt_fail(s, op, "cublasCreate");
            return NULL;
        }
        cublasSetPointerMode(b->blas, CUBLAS_POINTER_MODE_DEVICE);
        /* The workspace lives as long as the process, like cuBLAS's own handle. */
        if (cudaMalloc(&b->workspace, CT_CUBLAS_WORKSPACE) != cudaSuccess) {
            (void)cudaGetLastError();
            b->workspace = NULL; /* heuristics then pick algorithms without workspace */
        }
        b->ready = true;
    }
    pthread_mutex_unlock(&blas_lock);
    return b;
}

/* Column-major view of a row-major operand (rows x cols, element strides s0, s1). */
static bool col_layout(int64_t rows, int64_t cols, int64_t s0, int64_t s1, cublasOperation_t *op, int64_t *ld) {
    /* Size-1 dims may carry any stride: normalise first. */
    int64_t r0 = rows == 1 ? (cols > 1 ? cols : 1) : s0, r1 = cols == 1 ? 1 : s1;
    if (r1 == 1 && r0 >= (cols > 1 ? cols : 1)) {
        *op = CUBLAS_OP_N; /* the stored matrix is the transpose we want */
        *ld = r0;
        return true;
    }
    r0 = rows == 1 ? 1 : s0;
    r1 = cols == 1 ? (rows > 1 ? rows : 1) : s1;
    if (r0 == 1 && r1 >= (rows > 1 ? rows : 1)) {
        *op = CUBLAS_OP_T;
        *ld = r1;
        return true;
    }
    return false;
}

/* The largest power of two (up to 256) dividing the address: cuBLASLt assumes 256-byte
 * aligned operands unless told otherwise, and views may start anywhere. */
static uint32_t alignment_of(const void *p) {
    uint32_t a = 1;
    while (a < 256 && ((uintptr_t)p % (2 * a)) == 0)
        a *= 2;
    return a;
}

extern "C" ct_status ct_cuda_gemm_run(const ct_cuda_gemm *g, int device, const char *op) {
    cudaDataType_t dt, scale_dt;
    cublasComputeType_t ct;
    switch (g->dtype) {
    case CT_DTYPE_FLOAT32:
        dt = CUDA_R_32F;
        ct = ct_cuda_allow_tf32() ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
        scale_dt = CUDA_R_32F;
        break;
    case CT_DTYPE_FLOAT64:
        dt = CUDA_R_64F;
        ct = CUBLAS_COMPUTE_64F;
        scale_dt = CUDA_R_64F;
        break;
    case CT_DTYPE_FLOAT16:
        dt = CUDA_R_16F;
        ct = CUBLAS_COMPUTE_32F;
        scale_dt = CUDA_R_32F;
        break;
    case CT_DTYPE_BFLOAT16:
        dt = CUDA_R_16BF;
        ct = CUBLAS_COMPUTE_32F;
        scale_dt = CUDA_R_32F;
        break;
    default:
        return ct_error(CT_ERROR_TYPE, op, "\"%s_cuda\" not implemented for '%s'", op, ct_dtype_name(g->dtype));
    }
    /* Swapped operands (Note [Row-major products in cuBLAS]): L = B^T is m x k, R = A^T is k x n. */
    cublasOperation_t opl, opr;
    int64_t ldl, ldr;
    if (!col_layout(g->k, g->m, g->b_s0, g->b_s1, &opl, &ldl) || !col_layout(g->n, g->k, g->a_s0, g->a_s1, &opr, &ldr))
        return ct_error(CT_ERROR_NOT_IMPLEMENTED, op, "operand layout has no BLAS form (internal)");
    device_blas *b = get_blas(device, op);
    if (!b)
        return ct_last_status();

    const bool epi_on = g->bias || g->act == CT_CUDA_ACT_GELU_AUX || g->act == CT_CUDA_ACT_DGELU;
    cublasLtMatmulDesc_t desc = NULL;
    cublasLtMatrixLayout_t ll = NULL, lr = NULL, lc = NULL;
    cublasLtMatmulPreference_t pref = NULL;
    ct_status st = CT_OK;
    cublasStatus_t s;
#define LT(call, what)                         \
    do {                                       \
        s = (call);                            \
        if (s != CUBLAS_STATUS_SUCCESS) {      \
            st = lt_fail(s, op, what);         \
            goto done;                         \
        }                                      \
    } while (0)
    {
        LT(cublasLtMatmulDescCreate(&desc, ct, scale_dt), "cublasLtMatmulDescCreate");
        LT(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &opl, sizeof opl), "set TRANSA");
        LT(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &opr, sizeof opr), "set TRANSB");
        if (epi_on) { /* Note [Bias epilogue], Note [GELU epilogues] */
            if (g->nb != 1 || g->beta != 0) {
                st = ct_error(CT_ERROR_RUNTIME, op, "the bias epilogue takes one product with beta = 0 (internal)");
                goto done;
            }
            /* Not every cuBLASLt release lets the heuristic filter for the bias
             * pointer's alignment; a fresh allocation is 512-byte aligned, so asking
             * for 16 costs the usual bias nothing and keeps odd views off the path.
             * The auxiliary matrix's leading dimension must be a multiple of 8. */
            if ((uintptr_t)g->bias % 16 != 0 || (g->aux && ((uintptr_t)g->aux % 16 != 0 || g->ldaux % 8 != 0))) {
                st = no_epilogue(op);
                goto done;
            }
            uint32_t epi = g->act == CT_CUDA_ACT_RELU       ? CUBLASLT_EPILOGUE_RELU_BIAS
                           : g->act == CT_CUDA_ACT_GELU     ? CUBLASLT_EPILOGUE_GELU_BIAS
                           : g->act == CT_CUDA_ACT_GELU_AUX ? (g->bias ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS
                                                                       : CUBLASLT_EPILOGUE_GELU_AUX)
                           : g->act == CT_CUDA_ACT_DGELU ? (g->bias ? CUBLASLT_EPILOGUE_DGELU_BGRAD : CUBLASLT_EPILOGUE_DGELU)
                                                         : CUBLASLT_EPILOGUE_BIAS;
            int32_t bias_dt = (int32_t)dt;
            int64_t ldaux = g->ldaux;
            s = cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi);
            if (s == CUBLAS_STATUS_SUCCESS && g->bias)
                s = cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &g->bias, sizeof g->bias);
            if (s == CUBLAS_STATUS_SUCCESS && g->bias)
                s = cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_dt, sizeof bias_dt);
            if (s == CUBLAS_STATUS_SUCCESS && g->aux)
                s = cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &g->aux,
                                                   sizeof g->aux);
            if (s == CUBLAS_STATUS_SUCCESS && g->aux)
                s = cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &ldaux, sizeof ldaux);
            if (s != CUBLAS_STATUS_SUCCESS) {
                st = no_epilogue(op);
                goto done;
            }
        }
        /* Stored shapes: before the op is applied. */
        uint64_t lrows = opl == CUBLAS_OP_N ? (uint64_t)g->m : (uint64_t)g->k;
        uint64_t lcols = opl == CUBLAS_OP_N ? (uint64_t)g->k : (uint64_t)g->m;
        uint64_t rrows = opr == CUBLAS_OP_N ? (uint64_t)g->k : (uint64_t)g->n;
        uint64_t rcols = opr == CUBLAS_OP_N ? (uint64_t)g->n : (uint64_t)g->k;
        /* cuBLASLt before 12.1 computed wrong 16-bit products with an epilogue when an
         * operand's leading dimension exceeded its rows (a slice of a larger matrix):
         * there, only tight operands take it. */
        if (epi_on && (g->dtype == CT_DTYPE_FLOAT16 || g->dtype == CT_DTYPE_BFLOAT16) &&
            cublasLtGetVersion() < 120100 && ((uint64_t)ldl != lrows || (uint64_t)ldr != rrows)) {
            st = no_epilogue(op);
            goto done;
        }
        LT(cublasLtMatrixLayoutCreate(&ll, dt, lrows, lcols, ldl), "layout");
        LT(cublasLtMatrixLayoutCreate(&lr, dt, rrows, rcols, ldr), "layout");
        LT(cublasLtMatrixLayoutCreate(&lc, dt, (uint64_t)g->m, (uint64_t)g->n, g->ldc), "layout");
        if (g->nb > 1) {
            int32_t nb = (int32_t)g->nb;
            int64_t sl = g->b_sb, sr = g->a_sb, sc = g->c_sb;
            LT(cublasLtMatrixLayoutSetAttribute(ll, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &nb, sizeof nb), "batch");
            LT(cublasLtMatrixLayoutSetAttribute(lr, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &nb, sizeof nb), "batch");
            LT(cublasLtMatrixLayoutSetAttribute(lc, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &nb, sizeof nb), "batch");
            LT(cublasLtMatrixLayoutSetAttribute(ll, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &sl, sizeof sl), "batch");
            LT(cublasLtMatrixLayoutSetAttribute(lr, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &sr, sizeof sr), "batch");
            LT(cublasLtMatrixLayoutSetAttribute(lc, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &sc, sizeof sc), "batch");
        }
        LT(cublasLtMatmulPreferenceCreate(&pref), "cublasLtMatmulPreferenceCreate");
        size_t ws = b->workspace ? CT_CUBLAS_WORKSPACE : 0;
        LT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws),
           "workspace preference");
        uint32_t al = alignment_of(g->b), ar = alignment_of(g->a), ac = alignment_of(g->c);
        LT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &al, sizeof al),
           "alignment preference");
        LT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &ar, sizeof ar),
           "alignment preference");
        LT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &ac, sizeof ac),
           "alignment preference");
        LT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &ac, sizeof ac),
           "alignment preference");
        float af = (float)g->alpha, bf = (float)g->beta;
        const void *alpha = g->dtype == CT_DTYPE_FLOAT64 ? (const void *)&g->alpha : (const void *)&af;
        const void *beta = g->dtype == CT_DTYPE_FLOAT64 ? (const void *)&g->beta : (const void *)&bf;
        /* The algorithm: cached by the product's key, or TunableOp's (Note [TunableOp]). */
        static const char *const epi_names[] = {"bias",     "relu_bias",     "gelu_bias",
                                                "gelu_aux", "dgelu",         "",
                                                "",         "gelu_aux_bias", "dgelu_bgrad"};
        const int epi_i = g->act + (g->bias && g->act >= CT_CUDA_ACT_GELU_AUX ? 4 : 0);
        char key[CT_TUNABLE_KEY_MAX];
        int kl = snprintf(key, sizeof key,
                          "GemmLt_%s_%s_%c%c,m%lld_n%lld_k%lld_ldl%lld_ldr%lld_ldc%lld_nb%lld_sl%lld_sr%lld_sc%lld_"
                          "beta%d_%s_al%u_%u_%u_ws%zu",
                          ct_dtype_name(g->dtype),
                          ct == CUBLAS_COMPUTE_64F ? "f64" : ct == CUBLAS_COMPUTE_32F_FAST_TF32 ? "tf32" : "f32",
                          opl == CUBLAS_OP_N ? 'N' : 'T', opr == CUBLAS_OP_N ? 'N' : 'T', (long long)g->m,
                          (long long)g->n, (long long)g->k, (long long)ldl, (long long)ldr, (long long)g->ldc,
                          (long long)g->nb, (long long)(g->nb > 1 ? g->b_sb : 0),
                          (long long)(g->nb > 1 ? g->a_sb : 0), (long long)(g->nb > 1 ? g->c_sb : 0),
                          g->beta != 0, !epi_on ? "plain" : epi_names[epi_i], al, ar, ac, ws);
        ct_lt_problem pr;
        memset(&pr, 0, sizeof pr);
        pr.lt = b->lt;
        pr.desc = desc;
        pr.ll = ll;
        pr.lr = lr;
        pr.lc = lc;
        pr.pref = pref;
        pr.alpha = alpha;
        pr.beta = beta;
        pr.beta_zero = g->beta == 0;
        pr.l = g->b;
        pr.r = g->a;
        pr.c = g->c;
        pr.rows = g->m;
        pr.cols = g->n;
        pr.ldc = g->ldc;
        pr.nb = g->nb;
        pr.batch_stride = g->nb > 1 ? g->c_sb : 0;
        pr.dtype = g->dtype;
        pr.tf32 = ct == CUBLAS_COMPUTE_32F_FAST_TF32;
        pr.workspace = b->workspace;
        pr.ws = ws;
        pr.stream = ct_stream_of(device);
        pr.device = device;
        pr.key = kl > 0 && (size_t)kl < sizeof key ? key : NULL;
        cublasLtMatmulAlgo_t algo;
        int found = 0;
        s = ct_lt_algo(&pr, &algo, &found);
        if (epi_on && (s != CUBLAS_STATUS_SUCCESS || found == 0)) {
            /* Some shapes are refused with INVALID_VALUE rather than NOT_SUPPORTED
             * once an epilogue is set: the plain product still serves them. */
            st = no_epilogue(op);
            goto done;
        }
        if (s == CUBLAS_STATUS_NOT_SUPPORTED || (s == CUBLAS_STATUS_SUCCESS && found == 0)) {
            /* The caller retries with fresh, aligned, contiguous operands. */
            st = ct_error(CT_ERROR_NOT_IMPLEMENTED, op, "cuBLASLt has no algorithm for this layout");
            goto done;
        }
        if (s != CUBLAS_STATUS_SUCCESS) {
            st = lt_fail(s, op, "cublasLtMatmulAlgoGetHeuristic");
            goto done;
        }
        s = cublasLtMatmul(b->lt, desc, alpha, g->b, ll, g->a, lr, beta, g->c, lc, g->c, lc, &algo, b->workspace, ws,
                           pr.stream);
        if (epi_on && s == CUBLAS_STATUS_NOT_SUPPORTED) {
            st = no_epilogue(op);
            goto done;
        }
        if (s != CUBLAS_STATUS_SUCCESS) {
            st = lt_fail(s, op, "cublasLtMatmul");
            goto done;
        }
        ct_cuda_note_op(op);
    }
#undef LT
done:
    if (pref)
        cublasLtMatmulPreferenceDestroy(pref);
    if (lc)
        cublasLtMatrixLayoutDestroy(lc);
    if (lr)
        cublasLtMatrixLayoutDestroy(lr);
    if (ll)
        cublasLtMatrixLayoutDestroy(ll);
    if (desc)
        cublasLtMatmulDescDestroy(desc);
    return st;
}

extern "C" ct_status ct_cuda_dot_run(ct_dtype dtype, int64_t n, const void *a, int64_t sa, const void *b, int64_t sb,
                                     void *out, int device) {
    const char *op = "dot";
    cudaDataType_t dt;
    switch (dtype) {
    case CT_DTYPE_FLOAT32: dt = CUDA_R_32F; break;
    case CT_DTYPE_FLOAT64: dt = CUDA_R_64F; break;
    case CT_DTYPE_FLOAT16: dt = CUDA_R_16F; break;
    case CT_DTYPE_BFLOAT16: dt = CUDA_R_16BF; break;
    default: return ct_error(CT_ERROR_TYPE, op, "\"dot\" not implemented for '%s'", ct_dtype_name(dtype));
    }
    device_blas *bl = get_blas(device, op);
    if (!bl)
        return ct_last_status();
    /* Callers serialise per device through the stream; the handle is shared. */
    pthread_mutex_lock(&blas_lock);
    cublasStatus_t s = cublasSetStream(bl->blas, ct_stream_of(device));
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cublasDotEx(bl->blas, (int)n, a, dt, (int)sa, b, dt, (int)sb, out, dt,
                        dtype == CT_DTYPE_FLOAT64 ? CUDA_R_64F : CUDA_R_32F);
    pthread_mutex_unlock(&blas_lock);
    if (s != CUBLAS_STATUS_SUCCESS)
        return lt_fail(s, op, "cublasDotEx");
    ct_cuda_note_op(op);
    return CT_OK;
}
