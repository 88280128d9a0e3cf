/* The shape kernels on the GPU (shape.cu) against the CPU: flip, tril / triu and pad
 * (constant, reflect, replicate, circular, negative amounts cropping) for every dtype,
 * transposed and strided inputs, 0-d and empty tensors; argument errors with the CPU's
 * messages. Skipped (exit code 77) without a GPU. */
#include "cuda_testutil.h"

#define CUDA0 CT_CUDA(0)

static const ct_dtype dtypes[] = {CT_BOOL, CT_U8, CT_I8, CT_I16, CT_U16, CT_I32, CT_U32,
                                  CT_I64,  CT_U64, CT_F16, CT_BF16, CT_F32, CT_F64};
#define NDT ((int)(sizeof dtypes / sizeof dtypes[0]))

static ct_tensor *g(const ct_tensor *t) { return ct_test_to_device_as(t, CUDA0); }

/* Both devices refuse with status st and a message holding needle. */
#define BOTH_ERR(cpu_expr, gpu_expr, st, needle)             \
    do {                                                     \
        ct_clear_error();                                    \
        CT_ASSERT_ERR((cpu_expr) != NULL, (st), (needle));   \
        CT_ASSERT_ERR((gpu_expr) != NULL, (st), (needle));   \
    } while (0)

static void test_flip_tri(void **state) {
    (void)state;
    static const int64_t dims_sets[][3] = {{0, 0, 0}, {2, 0, 0}, {0, -1, 0}, {1, 0, 0}, {0, 1, 2}};
    static const int ndims[] = {0, 1, 2, 1, 3};
    for (int d = 0; d < NDT; d++) {
        ct_dtype dt = dtypes[d];
        ct_scope_begin();
        ct_tensor *a = ct_test_special(CT_SHAPE(4, 5, 6), dt, -50, 50, 1), *ga = g(a);
        ct_tensor *at = ct_transpose(a, 0, 2), *s = ct_slice(a, 2, 1, 6, 2);
        for (int k = 0; k < 5; k++) {
            char what[64];
            snprintf(what, sizeof what, "flip set %d %s", k, ct_dtype_name(dt));
            CT_AGREE(what, ct_flip(a, dims_sets[k], ndims[k]), ct_flip(ga, dims_sets[k], ndims[k]), 0);
            CT_AGREE(what, ct_flip(at, dims_sets[k], ndims[k]), ct_flip(g(at), dims_sets[k], ndims[k]), 0);
            CT_AGREE(what, ct_flip(s, dims_sets[k], ndims[k]), ct_flip(g(s), dims_sets[k], ndims[k]), 0);
        }
        ct_tensor *s0 = ct_test_special(NULL, 0, dt, -3, 3, 2);
        CT_AGREE("flip 0-d", ct_flip(s0, NULL, 0), ct_flip(g(s0), NULL, 0), 0);
        ct_tensor *e = ct_zeros(CT_SHAPE(3, 0), dt, CT_CPU);
        CT_AGREE("flip empty", ct_flip(e, CT_INDEX(0, 1), 2), ct_flip(g(e), CT_INDEX(0, 1), 2), 0);
        for (int64_t k = -6; k <= 7; k++) {
            char what[64];
            snprintf(what, sizeof what, "tril/triu k %lld %s", (long long)k, ct_dtype_name(dt));
            CT_AGREE(what, ct_tril(a, k), ct_tril(ga, k), 0);
            CT_AGREE(what, ct_triu(a, k), ct_triu(ga, k), 0);
            CT_AGREE(what, ct_tril(at, k), ct_tril(g(at), k), 0);
            CT_AGREE(what, ct_triu(s, k), ct_triu(g(s), k), 0);
        }
        CT_AGREE("tril empty", ct_tril(ct_zeros(CT_SHAPE(2, 0, 3), dt, CT_CPU), 0),
                 ct_tril(g(ct_zeros(CT_SHAPE(2, 0, 3), dt, CT_CPU)), 0), 0);
        ct_scope_end();
    }
    ct_scope_begin();
    ct_tensor *ga = g(ct_ones(CT_SHAPE(3, 4), CT_F32, CT_CPU)), *a = ct_ones(CT_SHAPE(3, 4), CT_F32, CT_CPU);
    BOTH_ERR(ct_flip(a, CT_INDEX(0, 0), 2), ct_flip(ga, CT_INDEX(0, 0), 2), CT_ERROR_VALUE,
             "dim 0 appears multiple times in the list of dims");
    BOTH_ERR(ct_flip(a, CT_INDEX(2), 1), ct_flip(ga, CT_INDEX(2), 1), CT_ERROR_INDEX, "Dimension out of range");
    BOTH_ERR(ct_tril(ct_ones(CT_SHAPE(3), CT_F32, CT_CPU), 0), ct_tril(g(ct_ones(CT_SHAPE(3), CT_F32, CT_CPU)), 0),
             CT_ERROR_VALUE, "tril: input tensor must have at least 2 dimensions");
    ct_scope_end();
}

typedef struct {
    int64_t pad[6];
    int npad;
} pad_case;

static void test_pad(void **state) {
    (void)state;
    static const char *const modes[] = {"constant", "reflect", "replicate", "circular"};
    static const pad_case cases[] = {
        {{1, 2}, 2},          {{0, 0}, 2},         {{-1, 2}, 2},          {{2, -3}, 2},          {{3, 3, 1, 0}, 4},
        {{-2, 1, 2, -1}, 4},  {{1, 1, 2, 2, 1, 3}, 6}, {{-1, -2, 0, 1, 2, -1}, 6}, {{4, 4}, 2},
    };
    for (int d = 0; d < NDT; d++) {
        ct_dtype dt = dtypes[d];
        ct_scope_begin();
        /* every mode takes 2 and 4 pads of a 3-d input, 6 pads of a 4-d one */
        ct_tensor *a4 = ct_test_special(CT_SHAPE(2, 3, 4, 5), dt, -50, 50, 3), *ga4 = g(a4);
        ct_tensor *a3 = ct_test_special(CT_SHAPE(3, 4, 5), dt, -50, 50, 5), *ga3 = g(a3);
        double value = dt == CT_BOOL ? 1 : 7;
        for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
            for (int m = 0; m < 4; m++) {
                ct_tensor *a = cases[c].npad == 6 ? a4 : a3, *ga = cases[c].npad == 6 ? ga4 : ga3;
                ct_tensor *at = ct_transpose(a, 0, 2);
                char what[96];
                snprintf(what, sizeof what, "pad %s case %zu %s", modes[m], c, ct_dtype_name(dt));
                double v = m == 0 ? value : 0;
                /* out-of-range amounts (reflect past the edge, circular wrapping twice)
                 * must be refused by both */
                CT_AGREE_ERR(what, ct_pad(a, cases[c].pad, cases[c].npad, modes[m], v),
                             ct_pad(ga, cases[c].pad, cases[c].npad, modes[m], v));
                CT_AGREE_ERR(what, ct_pad(at, cases[c].pad, cases[c].npad, modes[m], v),
                             ct_pad(g(at), cases[c].pad, cases[c].npad, modes[m], v));
            }
        /* constant padding of any rank, empty inputs */
        ct_tensor *e = ct_zeros(CT_SHAPE(0, 3), dt, CT_CPU);
        CT_AGREE("pad empty", ct_pad(e, CT_INDEX(1, 1, 2, 0), 4, "constant", value),
                 ct_pad(g(e), CT_INDEX(1, 1, 2, 0), 4, "constant", value), 0);
        ct_tensor *v1 = ct_test_special(CT_SHAPE(9), dt, -5, 5, 4);
        CT_AGREE("pad 1-d", ct_pad(v1, CT_INDEX(3, -2), 2, "constant", value),
                 ct_pad(g(v1), CT_INDEX(3, -2), 2, "constant", value), 0);
        CT_AGREE("pad to nothing", ct_pad(v1, CT_INDEX(-4, -5), 2, "constant", value),
                 ct_pad(g(v1), CT_INDEX(-4, -5), 2, "constant", value), 0);
        ct_scope_end();
    }
    ct_scope_begin();
    ct_tensor *a = ct_ones(CT_SHAPE(2, 3, 4), CT_F32, CT_CPU), *ga = g(a);
    BOTH_ERR(ct_pad(a, CT_INDEX(1, 2, 3), 3, "constant", 0), ct_pad(ga, CT_INDEX(1, 2, 3), 3, "constant", 0),
             CT_ERROR_VALUE, "Padding length must be divisible by 2");
    BOTH_ERR(ct_pad(a, CT_INDEX(4, 0), 2, "reflect", 0), ct_pad(ga, CT_INDEX(4, 0), 2, "reflect", 0), CT_ERROR_VALUE,
             "Padding size should be less than the corresponding input dimension");
    BOTH_ERR(ct_pad(a, CT_INDEX(5, 0), 2, "circular", 0), ct_pad(ga, CT_INDEX(5, 0), 2, "circular", 0),
             CT_ERROR_VALUE, "Padding value causes wrapping around more than once.");
    BOTH_ERR(ct_pad(a, CT_INDEX(-3, -2), 2, "constant", 0), ct_pad(ga, CT_INDEX(-3, -2), 2, "constant", 0),
             CT_ERROR_VALUE, "resulted in a negative output size");
    BOTH_ERR(ct_pad(ct_ones(CT_SHAPE(4), CT_F32, CT_CPU), CT_INDEX(1, 1), 2, "reflect", 0),
             ct_pad(g(ct_ones(CT_SHAPE(4), CT_F32, CT_CPU)), CT_INDEX(1, 1), 2, "reflect", 0), CT_ERROR_NOT_IMPLEMENTED,
             "Padding size 2 is not supported for 1D input tensor.");
    BOTH_ERR(ct_pad(ct_ones(CT_SHAPE(2, 3), CT_U8, CT_CPU), CT_INDEX(1, 1), 2, "constant", 300),
             ct_pad(g(ct_ones(CT_SHAPE(2, 3), CT_U8, CT_CPU)), CT_INDEX(1, 1), 2, "constant", 300), CT_ERROR_VALUE,
             "without overflow");
    ct_scope_end();
}

int main(void) {
    int skip = ct_test_require_gpu("test_cuda_shape");
    if (skip)
        return skip;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_flip_tri),
        cmocka_unit_test(test_pad),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
