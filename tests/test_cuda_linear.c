/* addmm and linear on CUDA against the CPU, with an eye on cuBLASLt's bias epilogue
 * (Note [Bias epilogue] in src/cuda/blas.cu): 1-D, (1, m) and expanded bias rows take
 * it, full (n, m) biases, beta != 1, batched products, degenerate sizes, strided or
 * misaligned biases do not; alpha != 1 keeps it. float32, float64, float16, bfloat16;
 * odd sizes, transposed and strided operands, out= into a transposed output, argument
 * errors, and linear's gradients through autograd. Skipped (exit 77) without a GPU. */
#include <stdlib.h>
#include <string.h>

#include "cuda_testutil.h"
#include "cuda/cuda_ops.h"
#include "dispatch/call.h"

/* A build without CUDA has no blas.c: the reference stays unresolved (NULL) there,
 * and main skips before any test could call it. */
#pragma weak ct_cuda_bias_epilogue_count
#pragma weak ct_cuda_gelu_epilogue_count

#define CUDA0 CT_CUDA(0)

static const ct_dtype float_dtypes[] = {CT_F32, CT_F64, CT_F16, CT_BF16};

static void product_tol(ct_dtype dt, int64_t k, double *rtol, double *atol) {
    double kk = (double)(k > 1 ? k : 1);
    switch (dt) {
    case CT_F16: *rtol = 5e-3, *atol = 2e-3 * kk; break;
    case CT_BF16: *rtol = 2e-2, *atol = 1e-2 * kk; break;
    case CT_F32: *rtol = 1e-5, *atol = 1e-5 * kk; break;
    default: *rtol = 1e-12, *atol = 1e-12 * kk; break;
    }
}

/* ------------------------------------------------------------------ layouts */

/* x (n x k): stored as is, or as the transpose of a (k, n) tensor. */
enum { X_CONTIG, X_TRANSPOSED };
/* mat2 (k x m): w^T of a (m, k) weight as linear passes it, a plain (k, m) tensor, or
 * every other column of a (k, 2m) one (no BLAS layout: copied first). */
enum { B_WT, B_PLAIN, B_STRIDED };
/* c: (m), (1, m), (m) expanded to (n, m), a full (n, m), (m) starting one element into
 * its storage (not 16-byte aligned), (m) with stride 2, a 0-d scalar. */
enum { C_VEC, C_ROW, C_EXPANDED, C_FULL, C_MISALIGNED, C_STRIDED, C_SCALAR };
/* out: a fresh result, out= into a contiguous tensor, out= into a transposed one. */
enum { OUT_NEW, OUT_CONTIG, OUT_TRANSPOSED };
/* Whether the GPU product must take the epilogue, must not, or may (eligible, but
 * whether cuBLASLt has an algorithm for odd leading dimensions is its own business). */
enum { EPI_NO, EPI_YES, EPI_MAYBE };

typedef struct {
    const char *name;
    int64_t n, k, m;
    int x, b, c, out;
    double beta, alpha;
    int epi;
} addmm_case;

static const addmm_case addmm_cases[] = {
    {"1-d bias", 32, 64, 48, X_CONTIG, B_WT, C_VEC, OUT_NEW, 1, 1, EPI_YES},
    {"(1, m) bias", 32, 64, 48, X_CONTIG, B_WT, C_ROW, OUT_NEW, 1, 1, EPI_YES},
    {"expanded bias", 32, 64, 48, X_CONTIG, B_PLAIN, C_EXPANDED, OUT_NEW, 1, 1, EPI_YES},
    {"alpha -1.5", 32, 64, 48, X_CONTIG, B_WT, C_VEC, OUT_NEW, 1, -1.5, EPI_YES},
    {"transposed x", 32, 64, 48, X_TRANSPOSED, B_WT, C_VEC, OUT_NEW, 1, 1, EPI_YES},
    {"strided mat2", 32, 64, 48, X_CONTIG, B_STRIDED, C_VEC, OUT_NEW, 1, 0.5, EPI_YES},
    {"out= contiguous", 32, 64, 48, X_CONTIG, B_WT, C_VEC, OUT_CONTIG, 1, 1, EPI_YES},
    {"out= transposed", 32, 64, 48, X_CONTIG, B_WT, C_ROW, OUT_TRANSPOSED, 1, 2, EPI_YES},
    {"full bias", 32, 64, 48, X_CONTIG, B_WT, C_FULL, OUT_NEW, 1, 1, EPI_NO},
    {"beta 0.5", 32, 64, 48, X_CONTIG, B_WT, C_VEC, OUT_NEW, 0.5, 1, EPI_NO},
    {"beta 0", 32, 64, 48, X_CONTIG, B_WT, C_VEC, OUT_NEW, 0, 1, EPI_NO},
    {"beta -1", 32, 64, 48, X_CONTIG, B_WT, C_ROW, OUT_NEW, -1, 1, EPI_NO},
    {"misaligned bias", 32, 64, 48, X_CONTIG, B_WT, C_MISALIGNED, OUT_NEW, 1, 1, EPI_NO},
    {"strided bias", 32, 64, 48, X_CONTIG, B_WT, C_STRIDED, OUT_NEW, 1, 1, EPI_NO},
    {"scalar bias", 32, 64, 48, X_CONTIG, B_WT, C_SCALAR, OUT_NEW, 1, 1, EPI_NO},
    {"odd 5x7x17", 5, 7, 17, X_CONTIG, B_WT, C_VEC, OUT_NEW, 1, 1, EPI_MAYBE},
    {"odd 9x13x3 (1, m) bias", 9, 13, 3, X_CONTIG, B_PLAIN, C_ROW, OUT_NEW, 1, -1, EPI_MAYBE},
    {"odd transposed x into transposed out=", 7, 5, 17, X_TRANSPOSED, B_WT, C_VEC, OUT_TRANSPOSED, 1, 1, EPI_MAYBE},
    {"m = 1", 6, 5, 1, X_CONTIG, B_WT, C_VEC, OUT_NEW, 1, 1, EPI_NO},
    {"n = 1", 1, 9, 17, X_CONTIG, B_WT, C_VEC, OUT_NEW, 1, 1, EPI_NO},
    {"k = 1", 4, 1, 6, X_CONTIG, B_PLAIN, C_VEC, OUT_NEW, 1, 1, EPI_NO},
    {"n = 1, m = 3, full bias", 1, 4, 3, X_CONTIG, B_WT, C_FULL, OUT_NEW, 0.5, 3, EPI_NO},
};

/* The case's operand from a base tensor (CPU or GPU: the same view on both sides, so
 * the GPU sees the layout itself and not a contiguous copy of it). */
static ct_tensor *view_x(const addmm_case *k, const ct_tensor *base) {
    return k->x == X_TRANSPOSED ? ct_t(base) : ct_alias(base);
}
static ct_tensor *view_b(const addmm_case *k, const ct_tensor *base) {
    switch (k->b) {
    case B_WT: return ct_t(base);
    case B_STRIDED: return ct_slice(base, 1, 0, 2 * k->m, 2);
    default: return ct_alias(base);
    }
}
static ct_tensor *view_c(const addmm_case *k, const ct_tensor *base) {
    switch (k->c) {
    case C_EXPANDED: return ct_expand(base, CT_SHAPE(k->n, k->m));
    case C_MISALIGNED: return ct_slice(base, 0, 1, k->m + 1, 1);
    case C_STRIDED: return ct_slice(base, 0, 0, 2 * k->m, 2);
    default: return ct_alias(base);
    }
}

static ct_tensor *base_x(const addmm_case *k, ct_dtype dt, uint64_t seed) {
    if (k->x == X_TRANSPOSED)
        return ct_test_values(CT_SHAPE(k->k, k->n), dt, -1, 1, seed);
    return ct_test_values(CT_SHAPE(k->n, k->k), dt, -1, 1, seed);
}
static ct_tensor *base_b(const addmm_case *k, ct_dtype dt, uint64_t seed) {
    switch (k->b) {
    case B_WT: return ct_test_values(CT_SHAPE(k->m, k->k), dt, -1, 1, seed);
    case B_STRIDED: return ct_test_values(CT_SHAPE(k->k, 2 * k->m), dt, -1, 1, seed);
    default: return ct_test_values(CT_SHAPE(k->k, k->m), dt, -1, 1, seed);
    }
}
static ct_tensor *base_c(const addmm_case *k, ct_dtype dt, uint64_t seed) {
    switch (k->c) {
    case C_ROW: return ct_test_values(CT_SHAPE(1, k->m), dt, -2, 2, seed);
    case C_FULL: return ct_test_values(CT_SHAPE(k->n, k->m), dt, -2, 2, seed);
    case C_MISALIGNED: return ct_test_values(CT_SHAPE(k->m + 1), dt, -2, 2, seed);
    case C_STRIDED: return ct_test_values(CT_SHAPE(2 * k->m), dt, -2, 2, seed);
    case C_SCALAR: return ct_test_values(NULL, 0, dt, -2, 2, seed);
    default: return ct_test_values(CT_SHAPE(k->m), dt, -2, 2, seed);
    }
}

/* addmm with out= (the op library has no public addmm_out): the boxed call with the
 * caller's output, as the generated _out wrappers make it. */
static ct_tensor *addmm_out(const ct_tensor *c, const ct_tensor *a, const ct_tensor *b, double beta, double alpha,
                            ct_tensor *out) {
    ct_call call = {.op = CT_OP_addmm,
                    .mode = CT_CALL_OUT,
                    .nin = 3,
                    .in = {c, a, b},
                    .nscalars = 2,
                    .s = {ct_scalar_float(beta), ct_scalar_float(alpha)},
                    .dtype = CT_DTYPE_UNDEFINED};
    call.out[0] = ct_retain(out);
    call.nout = 1;
    return ct_dispatch_1(&call);
}

static void check_epilogue_count(const char *what, int epi, uint64_t before, uint64_t after) {
    uint64_t ran = after - before;
    bool ok = epi == EPI_YES ? ran == 1 : epi == EPI_NO ? ran == 0 : ran <= 1;
    if (!ok) {
        print_error("%s: %llu products took the bias epilogue, expected %s\n", what, (unsigned long long)ran,
                    epi == EPI_YES ? "1" : epi == EPI_NO ? "0" : "at most 1");
        fail();
    }
}

static void run_addmm_case(const addmm_case *k, ct_dtype dt, uint64_t seed) {
    ct_scope_begin();
    char what[160];
    snprintf(what, sizeof what, "addmm %s (%s)", k->name, ct_dtype_name(dt));
    ct_tensor *bx = base_x(k, dt, seed), *bb = base_b(k, dt, seed + 1), *bc = base_c(k, dt, seed + 2);
    CT_ASSERT_OK(bx);
    CT_ASSERT_OK(bb);
    CT_ASSERT_OK(bc);
    ct_tensor *x = view_x(k, bx), *b = view_b(k, bb), *c = view_c(k, bc);
    ct_tensor *gx = view_x(k, ct_to_device(bx, CUDA0)), *gb = view_b(k, ct_to_device(bb, CUDA0));
    ct_tensor *gc = view_c(k, ct_to_device(bc, CUDA0));
    CT_ASSERT_OK(gx);
    CT_ASSERT_OK(gb);
    CT_ASSERT_OK(gc);
    /* The layouts the case is about reach the GPU as they are. */
    if (k->c == C_EXPANDED)
        assert_int_equal(ct_tensor_strides(gc)[0], 0);
    if (k->c == C_MISALIGNED)
        assert_int_not_equal((uintptr_t)ct_tensor_data(gc) % 16, 0);
    if (k->x == X_TRANSPOSED && k->n > 1 && k->k > 1)
        assert_false(ct_tensor_is_contiguous(gx));

    ct_tensor *want = ct_addmm(c, x, b, ct_scalar_float(k->beta), ct_scalar_float(k->alpha));
    CT_ASSERT_OK(want);
    uint64_t before = ct_cuda_bias_epilogue_count();
    ct_tensor *got;
    if (k->out == OUT_NEW) {
        got = ct_addmm(gc, gx, gb, ct_scalar_float(k->beta), ct_scalar_float(k->alpha));
    } else {
        ct_tensor *o = k->out == OUT_TRANSPOSED ? ct_t(ct_full(CT_SHAPE(k->m, k->n), ct_scalar_float(7), dt, CUDA0))
                                                : ct_full(CT_SHAPE(k->n, k->m), ct_scalar_float(7), dt, CUDA0);
        CT_ASSERT_OK(o);
        if (k->out == OUT_TRANSPOSED && k->n > 1 && k->m > 1)
            assert_false(ct_tensor_is_contiguous(o));
        got = addmm_out(gc, gx, gb, k->beta, k->alpha, o);
        CT_ASSERT_OK(got);
        assert_ptr_equal(ct_tensor_data(got), ct_tensor_data(o));
        got = o; /* what was written into the caller's tensor */
    }
    uint64_t after = ct_cuda_bias_epilogue_count();
    if (!got) {
        print_error("%s: GPU failed: %s\n", what, ct_last_error());
        fail();
    }
    double rtol, atol;
    product_tol(dt, k->k, &rtol, &atol);
    CT_ASSERT_CLOSE(got, want, rtol, 2 * atol, what);
    check_epilogue_count(what, k->epi, before, after);
    ct_scope_end();
}

static void test_addmm_bias_epilogue(void **state) {
    (void)state;
    for (int d = 0; d < 4; d++)
        for (size_t i = 0; i < sizeof addmm_cases / sizeof addmm_cases[0]; i++)
            run_addmm_case(&addmm_cases[i], float_dtypes[d], 100 + 10 * i);
}

/* ------------------------------------------------------------------ linear */

static void test_linear(void **state) {
    (void)state;
    for (int d = 0; d < 4; d++) {
        ct_dtype dt = float_dtypes[d];
        ct_scope_begin();
        double rtol, atol;
        product_tol(dt, 40, &rtol, &atol);
        ct_tensor *x = ct_test_values(CT_SHAPE(24, 40), dt, -1, 1, 11);
        ct_tensor *w = ct_test_values(CT_SHAPE(56, 40), dt, -1, 1, 12);
        ct_tensor *bias = ct_test_values(CT_SHAPE(56), dt, -1, 1, 13);
        ct_tensor *gx = ct_to_device(x, CUDA0), *gw = ct_to_device(w, CUDA0), *gbias = ct_to_device(bias, CUDA0);
        char what[96];

        /* 2-d input with a bias: addmm with beta = 1, the epilogue. */
        uint64_t before = ct_cuda_bias_epilogue_count();
        ct_tensor *got = ct_linear(gx, gw, gbias);
        snprintf(what, sizeof what, "linear (%s)", ct_dtype_name(dt));
        check_epilogue_count(what, EPI_YES, before, ct_cuda_bias_epilogue_count());
        CT_ASSERT_CLOSE(got, ct_linear(x, w, bias), rtol, 2 * atol, what);

        /* No bias: no epilogue. */
        before = ct_cuda_bias_epilogue_count();
        snprintf(what, sizeof what, "linear without bias (%s)", ct_dtype_name(dt));
        CT_ASSERT_CLOSE(ct_linear(gx, gw, NULL), ct_linear(x, w, NULL), rtol, atol, what);
        check_epilogue_count(what, EPI_NO, before, ct_cuda_bias_epilogue_count());
        /* A contiguous 3-d input is one (15, 40) product with the bias in its epilogue
         * (Note [Linear over leading dims]); a transposed one is matmul, then add. */
        ct_tensor *x3 = ct_test_values(CT_SHAPE(3, 5, 40), dt, -1, 1, 14);
        before = ct_cuda_bias_epilogue_count();
        snprintf(what, sizeof what, "linear 3-d (%s)", ct_dtype_name(dt));
        CT_ASSERT_CLOSE(ct_linear(ct_to_device(x3, CUDA0), gw, gbias), ct_linear(x3, w, bias), rtol, 2 * atol, what);
        check_epilogue_count(what, EPI_YES, before, ct_cuda_bias_epilogue_count());
        ct_tensor *x53 = ct_test_values(CT_SHAPE(5, 3, 40), dt, -1, 1, 16);
        ct_tensor *gx3t = ct_transpose(ct_to_device(x53, CUDA0), 0, 1);
        assert_false(ct_tensor_is_contiguous(gx3t));
        before = ct_cuda_bias_epilogue_count();
        snprintf(what, sizeof what, "linear 3-d transposed (%s)", ct_dtype_name(dt));
        CT_ASSERT_CLOSE(ct_linear(gx3t, gw, gbias), ct_linear(ct_transpose(x53, 0, 1), w, bias), rtol, 2 * atol, what);
        check_epilogue_count(what, EPI_NO, before, ct_cuda_bias_epilogue_count());

        /* A weight sliced out of a larger one (rows 8 apart in memory, as a transposed
         * operand with a leading dimension larger than k) and a sliced input. */
        ct_tensor *wbig = ct_test_values(CT_SHAPE(56, 48), dt, -1, 1, 15);
        ct_tensor *ws = ct_slice(wbig, 1, 8, 48, 1), *gws = ct_slice(ct_to_device(wbig, CUDA0), 1, 8, 48, 1);
        ct_tensor *xs = ct_slice(x, 0, 0, 24, 2), *gxs = ct_slice(gx, 0, 0, 24, 2);
        snprintf(what, sizeof what, "linear sliced operands (%s)", ct_dtype_name(dt));
        CT_ASSERT_CLOSE(ct_linear(gxs, gws, gbias), ct_linear(xs, ws, bias), rtol, 2 * atol, what);
        ct_scope_end();
    }
}

/* ------------------------------------------------------------------ errors */

/* The epilogue does not bypass the argument checks: GPU errors are the CPU's. */
static void test_errors(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *x = ct_test_values(CT_SHAPE(8, 16), CT_F32, -1, 1, 21);
    ct_tensor *w = ct_test_values(CT_SHAPE(12, 16), CT_F32, -1, 1, 22);
    ct_tensor *gx = ct_to_device(x, CUDA0), *gw = ct_to_device(w, CUDA0);
    ct_tensor *bad_len = ct_test_values(CT_SHAPE(13), CT_F32, -1, 1, 23);
    ct_tensor *bad_dt = ct_test_values(CT_SHAPE(12), CT_F64, -1, 1, 24);
    ct_tensor *bad_nd = ct_test_values(CT_SHAPE(2, 8, 12), CT_F32, -1, 1, 25);
    CT_AGREE_ERR("linear bias of the wrong length", ct_linear(x, w, bad_len),
                 ct_linear(gx, gw, ct_to_device(bad_len, CUDA0)));
    CT_AGREE_ERR("linear bias of another dtype", ct_linear(x, w, bad_dt),
                 ct_linear(gx, gw, ct_to_device(bad_dt, CUDA0)));
    CT_AGREE_ERR("addmm bias of 3 dims", ct_addmm(bad_nd, x, ct_t(w), ct_scalar_int(1), ct_scalar_int(1)),
                 ct_addmm(ct_to_device(bad_nd, CUDA0), gx, ct_t(gw), ct_scalar_int(1), ct_scalar_int(1)));
    /* A CPU bias with CUDA operands is refused, not read from the wrong memory. */
    CT_ASSERT_ERR(ct_linear(gx, gw, ct_test_values(CT_SHAPE(12), CT_F32, -1, 1, 26)) != NULL, CT_ERROR_DEVICE,
                  "same device");
    /* out= of the wrong shape. */
    ct_tensor *o = ct_empty(CT_SHAPE(8, 13), CT_F32, CUDA0);
    CT_ASSERT_ERR(addmm_out(ct_to_device(ct_test_values(CT_SHAPE(12), CT_F32, -1, 1, 27), CUDA0), gx, ct_t(gw), 1, 1,
                            o) != NULL,
                  CT_ERROR_VALUE, "out=");
    CT_ASSERT_ERR(ct_linear(NULL, gw, gw) != NULL, CT_ERROR_NULL_ARGUMENT, "NULL");
    ct_scope_end();
}

/* ------------------------------------------------------------------ autograd */

/* in: x, w, bias (bias may be NULL). */
static ct_tensor *f_linear(ct_tensor *const *in, const void *ud) {
    (void)ud;
    return ct_linear(in[0], in[1], in[2]);
}

static void test_linear_grads(void **state) {
    (void)state;
    static const int64_t sizes[][3] = {{16, 32, 24}, {5, 7, 17}, {1, 9, 3}};
    for (int d = 0; d < 4; d++)
        for (int s = 0; s < 3; s++) {
            ct_dtype dt = float_dtypes[d];
            const int64_t *z = sizes[s];
            ct_scope_begin();
            ct_tensor *in[3] = {ct_test_values(CT_SHAPE(z[0], z[1]), dt, -1, 1, 30 + s),
                                ct_test_values(CT_SHAPE(z[2], z[1]), dt, -1, 1, 31 + s),
                                ct_test_values(CT_SHAPE(z[2]), dt, -1, 1, 32 + s)};
            char what[128];
            snprintf(what, sizeof what, "linear %lldx%lldx%lld grads (%s)", (long long)z[0], (long long)z[1],
                     (long long)z[2], ct_dtype_name(dt));
            uint64_t before = ct_cuda_bias_epilogue_count();
            ct_test_agree_with_grads(what, f_linear, NULL, in, 3, dt == CT_F64 ? 100 : 16, 60 + s);
            /* The forward of the aligned size ran through the epilogue with autograd on. */
            if (s == 0)
                check_epilogue_count(what, EPI_YES, before, ct_cuda_bias_epilogue_count());
            in[2] = NULL;
            snprintf(what, sizeof what, "linear %lldx%lldx%lld grads without bias (%s)", (long long)z[0],
                     (long long)z[1], (long long)z[2], ct_dtype_name(dt));
            ct_test_agree_with_grads(what, f_linear, NULL, in, 3, dt == CT_F64 ? 100 : 16, 70 + s);
            ct_scope_end();
        }
}

/* ------------------------------------------------------------------ activations */

/* in: c, a, b; ud: non-NULL for GELU. */
static ct_tensor *f_addmm_act(ct_tensor *const *in, const void *ud) {
    return ct_addmm_activation(in[0], in[1], in[2], ct_scalar_int(1), ct_scalar_int(1), ud != NULL);
}

/* addmm_activation: a bias row with beta = 1 may take RELU_BIAS / GELU_BIAS (cuBLASLt
 * decides per dtype); a full input or beta != 1 runs the product, then the activation.
 * Either way the CPU's result, and its gradients. */
static void test_addmm_activation(void **state) {
    (void)state;
    for (int d = 0; d < 4; d++)
        for (int gelu = 0; gelu < 2; gelu++) {
            ct_dtype dt = float_dtypes[d];
            ct_scope_begin();
            char what[128];
            double rtol, atol;
            product_tol(dt, 64, &rtol, &atol);
            ct_tensor *x = ct_test_values(CT_SHAPE(32, 64), dt, -1, 1, 80), *w = ct_test_values(CT_SHAPE(48, 64), dt, -1, 1, 81);
            ct_tensor *row = ct_test_values(CT_SHAPE(48), dt, -2, 2, 82), *full = ct_test_values(CT_SHAPE(32, 48), dt, -2, 2, 83);
            ct_tensor *gx = ct_to_device(x, CUDA0), *gw = ct_to_device(w, CUDA0);
            const ct_tensor *cs[2] = {row, full};
            for (int c = 0; c < 2; c++)
                for (int beta2 = 0; beta2 < 2; beta2++) {
                    ct_scalar beta = ct_scalar_float(beta2 ? 0.5 : 1.0), alpha = ct_scalar_float(-1.5);
                    snprintf(what, sizeof what, "addmm_activation %s, %s bias, beta %s (%s)", gelu ? "gelu" : "relu",
                             c ? "full" : "row", beta2 ? "0.5" : "1", ct_dtype_name(dt));
                    uint64_t before = ct_cuda_bias_epilogue_count();
                    ct_tensor *got = ct_addmm_activation(ct_to_device(cs[c], CUDA0), gx, ct_t(gw), beta, alpha, gelu);
                    check_epilogue_count(what, c || beta2 ? EPI_NO : EPI_MAYBE, before, ct_cuda_bias_epilogue_count());
                    CT_ASSERT_CLOSE(got, ct_addmm_activation(cs[c], x, ct_t(w), beta, alpha, gelu), rtol, 2 * atol, what);
                }
            ct_tensor *in[3] = {ct_test_values(CT_SHAPE(24), dt, -1, 1, 84), ct_test_values(CT_SHAPE(16, 32), dt, -1, 1, 85),
                                ct_test_values(CT_SHAPE(32, 24), dt, -1, 1, 86)};
            snprintf(what, sizeof what, "addmm_activation %s grads (%s)", gelu ? "gelu" : "relu", ct_dtype_name(dt));
            ct_test_agree_with_grads(what, f_addmm_act, gelu ? (void *)1 : NULL, in, 3, dt == CT_F64 ? 100 : 16, 87);
            ct_scope_end();
        }
}

/* in: input, fc_weight, fc_bias, proj_weight (no proj_bias: four inputs at most here). */
static ct_tensor *f_gelu_mlp(ct_tensor *const *in, const void *ud) {
    (void)ud;
    return ct_gelu_mlp(in[0], in[1], in[2], in[3], NULL, CT_GELU_APPROXIMATE_TANH);
}

/* Note [GELU MLP]: the op's output on the GPU (3-D input, both biases) is the CPU's, and
 * so are its gradients, which recompute the GELU's output from the saved hidden; with
 * CT_CUDA_GELU_EPILOGUE=1 through cuBLASLt's GELU epilogues (Note [GELU epilogues]). */
static void test_gelu_mlp(void **state) {
    (void)state;
    /* the epilogues are off by default; this test runs them (the first gelu_mlp of the
     * process reads the switch) */
    setenv("CT_CUDA_GELU_EPILOGUE", "1", 1);
    for (int d = 0; d < 4; d++) {
        ct_dtype dt = float_dtypes[d];
        ct_scope_begin();
        double rtol, atol;
        product_tol(dt, 96, &rtol, &atol);
        ct_tensor *x = ct_test_values(CT_SHAPE(4, 8, 32), dt, -1, 1, 90), *w1 = ct_test_values(CT_SHAPE(96, 32), dt, -1, 1, 91);
        ct_tensor *b1 = ct_test_values(CT_SHAPE(96), dt, -1, 1, 92), *w2 = ct_test_values(CT_SHAPE(24, 96), dt, -1, 1, 93);
        ct_tensor *b2 = ct_test_values(CT_SHAPE(24), dt, -1, 1, 94);
        char what[96];
        snprintf(what, sizeof what, "gelu_mlp (%s)", ct_dtype_name(dt));
        uint64_t before = ct_cuda_gelu_epilogue_count();
        ct_tensor *got = ct_gelu_mlp(ct_to_device(x, CUDA0), ct_to_device(w1, CUDA0), ct_to_device(b1, CUDA0),
                                     ct_to_device(w2, CUDA0), ct_to_device(b2, CUDA0), CT_GELU_APPROXIMATE_TANH);
        CT_ASSERT_CLOSE(got, ct_gelu_mlp(x, w1, b1, w2, b2, CT_GELU_APPROXIMATE_TANH), 2 * rtol, 4 * atol, what);
        /* the middle of the backward, with fc's bias gradient */
        ct_tensor *g = ct_test_values(CT_SHAPE(32, 24), dt, -1, 1, 97), *hid = ct_test_values(CT_SHAPE(32, 96), dt, -2, 2, 98);
        ct_tensor *ch, *cb, *gh, *gb;
        assert_int_equal(ct_gelu_mlp_hidden_backward(g, w2, hid, CT_GELU_APPROXIMATE_TANH, &ch, &cb), CT_OK);
        assert_int_equal(ct_gelu_mlp_hidden_backward(ct_to_device(g, CUDA0), ct_to_device(w2, CUDA0),
                                                     ct_to_device(hid, CUDA0), CT_GELU_APPROXIMATE_TANH, &gh, &gb),
                         CT_OK);
        CT_ASSERT_CLOSE(gh, ch, 2 * rtol, 4 * atol, what);
        CT_ASSERT_CLOSE(gb, cb, 2 * rtol, 32 * 4 * atol, what);
        /* cuBLASLt's GELU epilogues ran both (float64 keeps the ops) */
        uint64_t ran = ct_cuda_gelu_epilogue_count() - before;
        print_message("gelu_mlp %s: %llu of 2 products in a GELU epilogue\n", ct_dtype_name(dt), (unsigned long long)ran);
        if (dt == CT_BF16)
            assert_int_equal(ran, 2);
        if (dt == CT_F64)
            assert_int_equal(ran, 0);
        ct_tensor *in[4] = {ct_test_values(CT_SHAPE(16, 32), dt, -1, 1, 95), w1, b1, w2};
        snprintf(what, sizeof what, "gelu_mlp grads (%s)", ct_dtype_name(dt));
        ct_test_agree_with_grads(what, f_gelu_mlp, NULL, in, 4, dt == CT_F64 ? 100 : 32, 96);
        ct_scope_end();
    }
}

int main(void) {
    int skip = ct_test_require_gpu("test_cuda_linear");
    if (skip)
        return skip;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_addmm_bias_epilogue),
        cmocka_unit_test(test_linear),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_linear_grads),
        cmocka_unit_test(test_addmm_activation),
        cmocka_unit_test(test_gelu_mlp),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
