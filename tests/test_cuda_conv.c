/* Convolution and pooling on CUDA against the CPU: conv2d (stride, padding, dilation,
 * groups, bias, unbatched and empty batches, non-contiguous inputs), conv1d and
 * conv_transpose2d, max_pool2d (indices, ceil_mode, padding, dilation, NaN),
 * avg_pool2d (count_include_pad, ceil_mode, divisor) and adaptive_avg_pool2d, forward
 * and backward (through autograd and the backward ops themselves), float16 to float64;
 * float64 gradcheck on the GPU; argument errors. Skipped (exit 77) without a GPU. */
#include <stdlib.h>
#include <string.h>

#include "cuda_testutil.h"
#include "ctorch/nn.h"

#define CUDA0 CT_CUDA(0)

static ct_tensor *g(const ct_tensor *t) { return t ? ct_test_to_device_as(t, CUDA0) : NULL; }

/* ------------------------------------------------------------------ conv2d */

typedef struct {
    const char *name;
    int64_t n, c, h, w, oc, kh, kw;
    int64_t stride[2], padding[2], dilation[2], groups;
    bool bias, channels_last, unbatched;
} conv_case;

/* in: x (stored (n, h, w, c) when channels_last), weight, bias. */
static ct_tensor *f_conv(ct_tensor *const *in, const void *ud) {
    const conv_case *k = ud;
    const ct_tensor *x = in[0];
    if (k->channels_last)
        x = ct_permute(in[0], (int64_t[]){0, 3, 1, 2}, 4);
    return ct_conv2d(x, in[1], in[2], k->stride, k->padding, k->dilation, k->groups);
}

static const conv_case conv_cases[] = {
    {"3x3 same padding", 2, 3, 9, 11, 4, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, true, false, false},
    {"strided dilated groups", 1, 4, 10, 7, 6, 3, 2, {2, 3}, {1, 0}, {2, 1}, 2, false, false, false},
    {"1x1 groups=3", 3, 6, 8, 8, 6, 1, 1, {1, 1}, {0, 0}, {1, 1}, 3, true, false, false},
    {"depthwise channels-last", 2, 4, 5, 6, 4, 3, 3, {2, 2}, {1, 1}, {1, 1}, 4, true, true, false},
    {"unbatched", 1, 2, 6, 6, 3, 2, 2, {1, 1}, {0, 0}, {1, 1}, 1, true, false, true},
    {"kernel fills the padded input", 2, 2, 3, 4, 3, 5, 4, {1, 2}, {1, 0}, {1, 1}, 1, true, false, false},
    {"empty batch", 0, 3, 5, 5, 2, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, true, false, false},
    {"stride larger than kernel", 2, 3, 12, 10, 5, 2, 3, {3, 4}, {0, 2}, {1, 2}, 1, false, false, false},
};

static void conv_inputs(const conv_case *k, ct_dtype dt, ct_tensor **in, uint64_t seed) {
    if (k->unbatched)
        in[0] = ct_test_values(CT_SHAPE(k->c, k->h, k->w), dt, -1, 1, seed);
    else if (k->channels_last)
        in[0] = ct_test_values(CT_SHAPE(k->n, k->h, k->w, k->c), dt, -1, 1, seed);
    else
        in[0] = ct_test_values(CT_SHAPE(k->n, k->c, k->h, k->w), dt, -1, 1, seed);
    in[1] = ct_test_values(CT_SHAPE(k->oc, k->c / k->groups, k->kh, k->kw), dt, -0.5, 0.5, seed + 1);
    in[2] = k->bias ? ct_test_values(CT_SHAPE(k->oc), dt, -1, 1, seed + 2) : NULL;
}

static void test_conv2d(void **state) {
    (void)state;
    ct_dtype dts[] = {CT_F32, CT_F64, CT_F16, CT_BF16};
    for (int d = 0; d < 4; d++)
        for (size_t i = 0; i < sizeof conv_cases / sizeof conv_cases[0]; i++) {
            const conv_case *k = &conv_cases[i];
            if (dts[d] == CT_F16 || dts[d] == CT_BF16) /* reduced precisions: a few cases */
                if (i != 0 && i != 3)
                    continue;
            ct_scope_begin();
            ct_tensor *in[3];
            conv_inputs(k, dts[d], in, 10 + i);
            char what[128];
            snprintf(what, sizeof what, "conv2d %s (%s)", k->name, ct_dtype_name(dts[d]));
            ct_test_agree_with_grads(what, f_conv, k, in, 3, dts[d] == CT_F64 ? 100 : 16, 40 + i);
            ct_scope_end();
        }
}

/* conv2d_backward called directly, with each subset of the gradients. */
static void test_conv2d_backward_op(void **state) {
    (void)state;
    const conv_case *k = &conv_cases[1];
    ct_scope_begin();
    ct_tensor *in[3];
    conv_inputs(k, CT_F32, in, 3);
    ct_tensor *y = ct_conv2d(in[0], in[1], NULL, k->stride, k->padding, k->dilation, k->groups);
    CT_ASSERT_OK(y);
    ct_tensor *go = ct_test_values(ct_tensor_shape(y), ct_tensor_dim(y), CT_F32, -1, 1, 4);
    for (int mask = 1; mask < 8; mask++) {
        ct_tensor *c[3] = {NULL, NULL, NULL}, *gg[3] = {NULL, NULL, NULL};
        assert_int_equal(ct_conv2d_backward(go, in[0], in[1], k->stride, k->padding, k->dilation, k->groups,
                                            mask & 1 ? &c[0] : NULL, mask & 2 ? &c[1] : NULL, mask & 4 ? &c[2] : NULL),
                         CT_OK);
        assert_int_equal(ct_conv2d_backward(g(go), g(in[0]), g(in[1]), k->stride, k->padding, k->dilation, k->groups,
                                            mask & 1 ? &gg[0] : NULL, mask & 2 ? &gg[1] : NULL,
                                            mask & 4 ? &gg[2] : NULL),
                         CT_OK);
        for (int j = 0; j < 3; j++)
            if (mask & (1 << j))
                CT_AGREE("conv2d_backward", c[j], gg[j], 16);
    }
    /* a grad_output of the wrong shape: the CPU's error */
    CT_ASSERT_ERR(ct_conv2d_backward(g(ct_narrow(go, 3, 0, 1)), g(in[0]), g(in[1]), k->stride, k->padding,
                                     k->dilation, k->groups, &(ct_tensor *){NULL}, NULL, NULL) == CT_OK,
                  CT_ERROR_VALUE, "grad_output has shape");
    ct_scope_end();
}

typedef struct {
    int64_t stride, padding, dilation, groups;
} conv1d_args;

static ct_tensor *f_conv1d(ct_tensor *const *in, const void *ud) {
    const conv1d_args *a = ud;
    return ct_conv1d(in[0], in[1], in[2], a->stride, a->padding, a->dilation, a->groups);
}

static void test_conv1d(void **state) {
    (void)state;
    ct_scope_begin();
    conv1d_args a = {2, 1, 2, 2};
    ct_tensor *in[3] = {ct_test_values(CT_SHAPE(3, 4, 17), CT_F32, -1, 1, 5),
                        ct_test_values(CT_SHAPE(6, 2, 3), CT_F32, -1, 1, 6), ct_test_values(CT_SHAPE(6), CT_F32, -1, 1, 7)};
    ct_test_agree_with_grads("conv1d", f_conv1d, &a, in, 3, 16, 8);
    ct_scope_end();
}

typedef struct {
    int64_t stride[2], padding[2], output_padding[2], dilation[2], groups;
} convt_args;

static ct_tensor *f_convt(ct_tensor *const *in, const void *ud) {
    const convt_args *a = ud;
    return ct_conv_transpose2d(in[0], in[1], in[2], a->stride, a->padding, a->output_padding, a->groups, a->dilation);
}

static void test_conv_transpose2d(void **state) {
    (void)state;
    ct_scope_begin();
    convt_args a = {{2, 2}, {1, 0}, {1, 0}, {1, 2}, 2};
    ct_tensor *in[3] = {ct_test_values(CT_SHAPE(2, 4, 5, 6), CT_F64, -1, 1, 9),
                        ct_test_values(CT_SHAPE(4, 3, 3, 2), CT_F64, -1, 1, 10),
                        ct_test_values(CT_SHAPE(6), CT_F64, -1, 1, 11)};
    ct_test_agree_with_grads("conv_transpose2d", f_convt, &a, in, 3, 100, 12);
    ct_scope_end();
}

static void test_conv2d_errors(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *x = ct_test_values(CT_SHAPE(2, 4, 6, 6), CT_F32, -1, 1, 1);
    ct_tensor *w = ct_test_values(CT_SHAPE(4, 2, 3, 3), CT_F32, -1, 1, 2);
    ct_tensor *big = ct_test_values(CT_SHAPE(4, 4, 9, 9), CT_F32, -1, 1, 3);
    ct_tensor *xi = ct_ones(CT_SHAPE(2, 4, 6, 6), CT_I32, CT_CPU), *wi = ct_ones(CT_SHAPE(4, 4, 3, 3), CT_I32, CT_CPU);
    ct_tensor *b5 = ct_ones(CT_SHAPE(5), CT_F32, CT_CPU);
    int64_t s0[2] = {0, 1}, pneg[2] = {-1, 0};
    CT_AGREE_ERR("conv2d groups", ct_conv2d(x, w, NULL, NULL, NULL, NULL, 1),
                 ct_conv2d(g(x), g(w), NULL, NULL, NULL, NULL, 1));
    CT_AGREE_ERR("conv2d stride 0", ct_conv2d(x, w, NULL, s0, NULL, NULL, 2), ct_conv2d(g(x), g(w), NULL, s0, NULL, NULL, 2));
    CT_AGREE_ERR("conv2d negative padding", ct_conv2d(x, w, NULL, NULL, pneg, NULL, 2),
                 ct_conv2d(g(x), g(w), NULL, NULL, pneg, NULL, 2));
    CT_AGREE_ERR("conv2d kernel too big", ct_conv2d(x, big, NULL, NULL, NULL, NULL, 1),
                 ct_conv2d(g(x), g(big), NULL, NULL, NULL, NULL, 1));
    /* integers run on the CPU only (Note [Integer convolution]), as in PyTorch */
    CT_ASSERT_OK(ct_conv2d(xi, wi, NULL, NULL, NULL, NULL, 1));
    CT_ASSERT_ERR(ct_conv2d(g(xi), g(wi), NULL, NULL, NULL, NULL, 1) != NULL, CT_ERROR_TYPE,
                  "not implemented for 'int32'");
    CT_AGREE_ERR("conv2d bias size", ct_conv2d(x, w, b5, NULL, NULL, NULL, 2), ct_conv2d(g(x), g(w), g(b5), NULL, NULL, NULL, 2));
    CT_AGREE_ERR("conv2d 2-d input", ct_conv2d(ct_view(x, CT_SHAPE(8, 36)), w, NULL, NULL, NULL, NULL, 2),
                 ct_conv2d(g(ct_view(x, CT_SHAPE(8, 36))), g(w), NULL, NULL, NULL, NULL, 2));
    CT_ASSERT_ERR(ct_conv2d(g(x), w, NULL, NULL, NULL, NULL, 2) != NULL, CT_ERROR_DEVICE, "device");
    ct_scope_end();
}

/* ------------------------------------------------------------------ max_pool2d */

typedef struct {
    const char *name;
    int64_t kernel[2], stride[2], padding[2], dilation[2];
    bool ceil_mode;
} pool_case;

static const pool_case max_cases[] = {
    {"2x2 stride 2", {2, 2}, {2, 2}, {0, 0}, {1, 1}, false},
    {"3x3 stride 2 ceil_mode padded", {3, 3}, {2, 2}, {1, 1}, {1, 1}, true},
    {"dilated rectangular", {3, 2}, {2, 1}, {1, 1}, {2, 1}, false},
    {"stride 1 overlapping ceil", {2, 3}, {1, 2}, {0, 1}, {1, 1}, true},
};

static ct_tensor *f_max(ct_tensor *const *in, const void *ud) {
    const pool_case *k = ud;
    return ct_max_pool2d(in[0], k->kernel, k->stride, k->padding, k->dilation, k->ceil_mode, NULL);
}

static void test_max_pool2d(void **state) {
    (void)state;
    ct_dtype dts[] = {CT_F32, CT_F64, CT_F16, CT_BF16, CT_I32, CT_U8, CT_I64};
    int64_t shapes[3][4] = {{2, 3, 9, 10}, {1, 2, 7, 5}, {0, 2, 6, 6}};
    for (size_t i = 0; i < sizeof max_cases / sizeof max_cases[0]; i++)
        for (int d = 0; d < 7; d++)
            for (int s = 0; s < 3; s++) {
                const pool_case *k = &max_cases[i];
                ct_scope_begin();
                /* NaN and infinities among the first elements */
                ct_tensor *x = ct_test_special(shapes[s], 4, dts[d], -50, 50, 20 + i);
                ct_tensor *idx, *gidx;
                ct_tensor *y = ct_max_pool2d(x, k->kernel, k->stride, k->padding, k->dilation, k->ceil_mode, &idx);
                ct_tensor *gy = ct_max_pool2d(g(x), k->kernel, k->stride, k->padding, k->dilation, k->ceil_mode, &gidx);
                char what[128];
                snprintf(what, sizeof what, "max_pool2d %s (%s)", k->name, ct_dtype_name(dts[d]));
                CT_AGREE(what, y, gy, 1);
                CT_AGREE(what, idx, gidx, 1);
                if (ct_dtype_is_floating(dts[d])) {
                    ct_tensor *go = ct_test_values(ct_tensor_shape(y), 4, dts[d], -1, 1, 30 + i);
                    CT_AGREE("max_pool2d_backward", ct_max_pool2d_backward(go, x, idx),
                             ct_max_pool2d_backward(g(go), g(x), gidx), 4);
                }
                ct_scope_end();
            }
    /* unbatched, non-contiguous (a transposed input), gradients through autograd */
    for (size_t i = 0; i < sizeof max_cases / sizeof max_cases[0]; i++) {
        ct_scope_begin();
        ct_tensor *x = ct_test_values(CT_SHAPE(3, 11, 8), CT_F64, -1, 1, 50 + i);
        ct_tensor *xt = ct_transpose(x, 1, 2);
        const pool_case *k = &max_cases[i];
        CT_AGREE("max_pool2d transposed", f_max(&xt, k), f_max((ct_tensor *[]){g(xt)}, k), 1);
        ct_test_agree_with_grads("max_pool2d autograd", f_max, k, &x, 1, 4, 60 + i);
        ct_scope_end();
    }
}

static void test_max_pool2d_errors(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *x = ct_test_values(CT_SHAPE(2, 3, 6, 6), CT_F32, -1, 1, 1);
    ct_tensor *xb = ct_ones(CT_SHAPE(1, 2, 4, 4), CT_BOOL, CT_CPU);
    int64_t k2[2] = {2, 2}, k0[2] = {0, 2}, p2[2] = {2, 2}, k9[2] = {9, 9};
    CT_AGREE_ERR("max_pool2d kernel 0", ct_max_pool2d(x, k0, NULL, NULL, NULL, false, NULL),
                 ct_max_pool2d(g(x), k0, NULL, NULL, NULL, false, NULL));
    CT_AGREE_ERR("max_pool2d padding", ct_max_pool2d(x, k2, NULL, p2, NULL, false, NULL),
                 ct_max_pool2d(g(x), k2, NULL, p2, NULL, false, NULL));
    CT_AGREE_ERR("max_pool2d output too small", ct_max_pool2d(x, k9, NULL, NULL, NULL, false, NULL),
                 ct_max_pool2d(g(x), k9, NULL, NULL, NULL, false, NULL));
    CT_AGREE_ERR("max_pool2d bool", ct_max_pool2d(xb, k2, NULL, NULL, NULL, false, NULL),
                 ct_max_pool2d(g(xb), k2, NULL, NULL, NULL, false, NULL));
    /* indices: wrong dtype, out of range (the CPU's message names the index) */
    ct_tensor *idx;
    ct_tensor *y = ct_max_pool2d(x, k2, NULL, NULL, NULL, false, &idx);
    CT_ASSERT_OK(y);
    ct_tensor *bad = ct_clone(idx);
    int64_t *pb = ct_tensor_data(bad);
    pb[5] = 36;
    ct_tensor *i32 = ct_to_dtype(idx, CT_I32);
    CT_AGREE_ERR("max_pool2d_backward int32 indices", ct_max_pool2d_backward(y, x, i32),
                 ct_max_pool2d_backward(g(y), g(x), g(i32)));
    CT_AGREE_ERR("max_pool2d_backward index out of range", ct_max_pool2d_backward(y, x, bad),
                 ct_max_pool2d_backward(g(y), g(x), g(bad)));
    CT_ASSERT_ERR(ct_max_pool2d_backward(g(y), g(x), g(bad)) != NULL, CT_ERROR_INDEX, "index 36 is out of bounds");
    CT_AGREE_ERR("max_pool2d_backward shapes", ct_max_pool2d_backward(x, x, idx),
                 ct_max_pool2d_backward(g(x), g(x), g(idx)));
    ct_scope_end();
}

/* ------------------------------------------------------------------ avg_pool2d */

typedef struct {
    const char *name;
    int64_t kernel[2], stride[2], padding[2];
    bool ceil_mode, count_include_pad;
    int64_t divisor;
} avg_case;

static const avg_case avg_cases[] = {
    {"2x2", {2, 2}, {2, 2}, {0, 0}, false, true, 0},
    {"3x3 ceil_mode without pad", {3, 3}, {2, 2}, {1, 1}, true, false, 0},
    {"3x2 with pad counted", {3, 2}, {1, 2}, {1, 1}, false, true, 0},
    {"ceil_mode pad counted", {4, 3}, {3, 2}, {2, 1}, true, true, 0},
    {"divisor override", {3, 3}, {2, 1}, {1, 0}, true, false, 5},
};

static ct_tensor *f_avg(ct_tensor *const *in, const void *ud) {
    const avg_case *k = ud;
    return ct_avg_pool2d(in[0], k->kernel, k->stride, k->padding, k->ceil_mode, k->count_include_pad, k->divisor);
}

static void test_avg_pool2d(void **state) {
    (void)state;
    ct_dtype dts[] = {CT_F32, CT_F64, CT_F16, CT_BF16};
    int64_t shapes[3][4] = {{2, 3, 9, 10}, {1, 1, 5, 7}, {0, 2, 6, 6}};
    for (size_t i = 0; i < sizeof avg_cases / sizeof avg_cases[0]; i++)
        for (int d = 0; d < 4; d++)
            for (int s = 0; s < 3; s++) {
                ct_scope_begin();
                ct_tensor *x = ct_test_values(shapes[s], 4, dts[d], -2, 2, 70 + i);
                char what[128];
                snprintf(what, sizeof what, "avg_pool2d %s (%s)", avg_cases[i].name, ct_dtype_name(dts[d]));
                ct_test_agree_with_grads(what, f_avg, &avg_cases[i], &x, 1, 4, 80 + i);
                ct_scope_end();
            }
    ct_scope_begin();
    ct_tensor *x = ct_test_values(CT_SHAPE(3, 8, 9), CT_F32, -1, 1, 90);
    ct_tensor *xt = ct_transpose(x, 1, 2);
    CT_AGREE("avg_pool2d unbatched transposed", f_avg(&xt, &avg_cases[1]), f_avg((ct_tensor *[]){g(xt)}, &avg_cases[1]),
             4);
    int64_t k2[2] = {2, 2}, k0[2] = {2, 0}, p2[2] = {2, 0};
    ct_tensor *xi = ct_ones(CT_SHAPE(1, 1, 4, 4), CT_I64, CT_CPU);
    CT_AGREE_ERR("avg_pool2d kernel 0", ct_avg_pool2d(x, k0, NULL, NULL, false, true, 0),
                 ct_avg_pool2d(g(x), k0, NULL, NULL, false, true, 0));
    CT_AGREE_ERR("avg_pool2d padding", ct_avg_pool2d(x, k2, NULL, p2, false, true, 0),
                 ct_avg_pool2d(g(x), k2, NULL, p2, false, true, 0));
    CT_ASSERT_OK(ct_avg_pool2d(xi, k2, NULL, NULL, false, true, 0));
    CT_ASSERT_ERR(ct_avg_pool2d(g(xi), k2, NULL, NULL, false, true, 0) != NULL, CT_ERROR_TYPE,
                  "not implemented for 'int64'");
    CT_AGREE_ERR("avg_pool2d negative divisor", ct_avg_pool2d(x, k2, NULL, NULL, false, true, -1),
                 ct_avg_pool2d(g(x), k2, NULL, NULL, false, true, -1));
    CT_AGREE_ERR("avg_pool2d_backward shape", ct_avg_pool2d_backward(x, x, k2, NULL, NULL, false, true, 0),
                 ct_avg_pool2d_backward(g(x), g(x), k2, NULL, NULL, false, true, 0));
    ct_scope_end();
}

/* ------------------------------------------------------------------ adaptive_avg_pool2d */

static ct_tensor *f_ada(ct_tensor *const *in, const void *ud) { return ct_adaptive_avg_pool2d(in[0], ud); }

static void test_adaptive_avg_pool2d(void **state) {
    (void)state;
    ct_dtype dts[] = {CT_F32, CT_F64, CT_F16, CT_BF16};
    int64_t outs[5][2] = {{3, 5}, {1, 1}, {10, 4}, {7, 9}, {4, 2}};
    int64_t shapes[3][4] = {{2, 3, 7, 9}, {1, 2, 5, 4}, {0, 2, 6, 6}};
    for (int o = 0; o < 5; o++)
        for (int d = 0; d < 4; d++)
            for (int s = 0; s < 3; s++) {
                ct_scope_begin();
                ct_tensor *x = ct_test_values(shapes[s], 4, dts[d], -2, 2, 100 + o);
                char what[128];
                snprintf(what, sizeof what, "adaptive_avg_pool2d to %lldx%lld (%s)", (long long)outs[o][0],
                         (long long)outs[o][1], ct_dtype_name(dts[d]));
                ct_test_agree_with_grads(what, f_ada, outs[o], &x, 1, 4, 110 + o);
                ct_scope_end();
            }
    ct_scope_begin();
    ct_tensor *x = ct_test_values(CT_SHAPE(3, 8, 9), CT_F32, -1, 1, 120);
    ct_tensor *xt = ct_transpose(x, 1, 2);
    int64_t o35[2] = {3, 5}, o0[2] = {0, 2}, neg[2] = {-1, 2};
    CT_AGREE("adaptive unbatched transposed", f_ada(&xt, o35), f_ada((ct_tensor *[]){g(xt)}, o35), 4);
    /* an empty output: the gradient is zero */
    CT_AGREE("adaptive empty output", ct_adaptive_avg_pool2d(x, o0), ct_adaptive_avg_pool2d(g(x), o0), 1);
    ct_tensor *go0 = ct_zeros(CT_SHAPE(3, 0, 2), CT_F32, CT_CPU);
    CT_AGREE("adaptive empty output backward", ct_adaptive_avg_pool2d_backward(go0, x),
             ct_adaptive_avg_pool2d_backward(g(go0), g(x)), 1);
    ct_tensor *x0 = ct_ones(CT_SHAPE(2, 0, 4), CT_F32, CT_CPU);
    CT_AGREE_ERR("adaptive empty plane", ct_adaptive_avg_pool2d(x0, o35), ct_adaptive_avg_pool2d(g(x0), o35));
    CT_AGREE_ERR("adaptive negative size", ct_adaptive_avg_pool2d(x, neg), ct_adaptive_avg_pool2d(g(x), neg));
    CT_AGREE_ERR("adaptive backward shape", ct_adaptive_avg_pool2d_backward(ct_view(x, CT_SHAPE(3, 72)), x),
                 ct_adaptive_avg_pool2d_backward(g(ct_view(x, CT_SHAPE(3, 72))), g(x)));
    ct_scope_end();
}

/* ------------------------------------------------------------------ gradcheck on the GPU */

static ct_tensor *gc_conv(ct_tensor *const *in, int n, void *ud) {
    (void)n, (void)ud;
    int64_t s[2] = {2, 1}, p[2] = {1, 1}, d[2] = {1, 2};
    return ct_conv2d(in[0], in[1], in[2], s, p, d, 2);
}

static ct_tensor *gc_max(ct_tensor *const *in, int n, void *ud) {
    (void)n, (void)ud;
    int64_t k[2] = {3, 2}, s[2] = {2, 1}, p[2] = {1, 1};
    return ct_max_pool2d(in[0], k, s, p, NULL, true, NULL);
}

static ct_tensor *gc_avg(ct_tensor *const *in, int n, void *ud) {
    (void)n, (void)ud;
    int64_t k[2] = {3, 3}, s[2] = {2, 2}, p[2] = {1, 1};
    return ct_add(ct_avg_pool2d(in[0], k, s, p, true, false, 0),
                  ct_adaptive_avg_pool2d(in[0], (int64_t[]){3, 4}));
}

static ct_tensor *gpu_input(const int64_t *shape, int ndim, uint64_t seed) {
    ct_tensor *t = ct_to_device(ct_test_values(shape, ndim, CT_F64, -1.5, 1.5, seed), CUDA0);
    if (t)
        ct_tensor_set_requires_grad(t, true);
    return t;
}

static void test_gradcheck(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *conv_in[3] = {gpu_input(CT_SHAPE(2, 4, 5, 6), 1), gpu_input(CT_SHAPE(4, 2, 3, 2), 2),
                             gpu_input(CT_SHAPE(4), 3)};
    ct_tensor *pool_in[1] = {gpu_input(CT_SHAPE(2, 2, 5, 6), 4)};
    struct {
        const char *name;
        ct_grad_fn_t fn;
        ct_tensor **in;
        int n;
    } cases[] = {{"conv2d", gc_conv, conv_in, 3}, {"max_pool2d", gc_max, pool_in, 1}, {"avg pools", gc_avg, pool_in, 1}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        for (int j = 0; j < cases[i].n; j++)
            CT_ASSERT_OK(cases[i].in[j]);
        if (ct_gradcheck(cases[i].fn, NULL, cases[i].in, cases[i].n, 1e-6, 1e-6, 1e-4) != CT_OK) {
            print_error("gradcheck on CUDA, %s: %s\n", cases[i].name, ct_last_error());
            fail();
        }
    }
    ct_scope_end();
}

int main(void) {
    int skip = ct_test_require_gpu("test_cuda_conv");
    if (skip)
        return skip;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_conv2d),
        cmocka_unit_test(test_conv2d_backward_op),
        cmocka_unit_test(test_conv1d),
        cmocka_unit_test(test_conv_transpose2d),
        cmocka_unit_test(test_conv2d_errors),
        cmocka_unit_test(test_max_pool2d),
        cmocka_unit_test(test_max_pool2d_errors),
        cmocka_unit_test(test_avg_pool2d),
        cmocka_unit_test(test_adaptive_avg_pool2d),
        cmocka_unit_test(test_gradcheck),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
