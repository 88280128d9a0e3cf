/* torch.nn.functional's one-dimensional pools and transposed convolution (the 2-D ops
 * on a unit height), pixel_shuffle / pixel_unshuffle (views and one copy),
 * instance_norm (batch_norm over the batch folded into the channels) and interpolate
 * (PyTorch's argument rules over the upsample op). All are made of
 * ops: their gradients and devices come with them. */
#include <math.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "ctorch.h"
#include "ctorch/ext.h"
#include "nn/module_internal.h"

/* Note [One-dimensional layers as two-dimensional ops]
 * (N, C, L) and unbatched (C, L) run as (N, C, 1, L) and (C, 1, L) through the 2-D op
 * with a kernel of height 1, and the unit dim is dropped again. The 2-D ops take both
 * batched and unbatched input, so inserting the dim at -2 serves both. */
static ct_status check_1d(const char *op, const ct_tensor *input, const char *style) {
    int nd = ct_tensor_dim(input);
    if (nd == 2 || nd == 3)
        return CT_OK;
    char s[96];
    ct_shape_str(ct_tensor_shape(input), nd, s, sizeof s);
    if (!strcmp(style, "conv"))
        return ct_error(CT_ERROR_VALUE, op,
                        "Expected 2D (unbatched) or 3D (batched) input to %s, but got input of size: %s", op, s);
    if (!strcmp(style, "max"))
        return ct_error(CT_ERROR_VALUE, op,
                        "max_pool1d: Expected 2D or 3D (batch mode) tensor with optional 0 dim batch size for input, "
                        "but got:%s",
                        s);
    return ct_error(CT_ERROR_VALUE, op,
                    "Expected 2 to 3 dimensions, but got %d-dimensional tensor for argument #1 'self' (while checking "
                    "arguments for %s)",
                    nd, op);
}

static ct_tensor *drop_unit(ct_tensor *y) {
    y = y ? ct_squeeze_dim(y, -2) : NULL;
    ct_keep(y);
    ct_scope_end();
    return y;
}

ct_tensor *ct_conv_transpose1d(const ct_tensor *input, const ct_tensor *weight, const ct_tensor *bias, int64_t stride,
                               int64_t padding, int64_t output_padding, int64_t groups, int64_t dilation) {
    const char *op = "conv_transpose1d";
    CT_CHECK_ARG(op, input);
    CT_CHECK_ARG(op, weight);
    if (check_1d(op, input, "conv"))
        return NULL;
    if (ct_tensor_dim(weight) != 3) {
        ct_error(CT_ERROR_VALUE, op, "weight should have 3 dimensions, got %d", ct_tensor_dim(weight));
        return NULL;
    }
    ct_scope_begin();
    int64_t s[2] = {1, stride}, p[2] = {0, padding}, op2[2] = {0, output_padding}, d[2] = {1, dilation};
    return drop_unit(ct_conv_transpose2d(ct_unsqueeze(input, -2), ct_unsqueeze(weight, 2), bias, s, p, op2, groups, d));
}

ct_tensor *ct_max_pool1d(const ct_tensor *input, int64_t kernel, int64_t stride, int64_t padding, int64_t dilation,
                         bool ceil_mode) {
    const char *op = "max_pool1d";
    CT_CHECK_ARG(op, input);
    if (check_1d(op, input, "max"))
        return NULL;
    ct_scope_begin();
    int64_t k[2] = {1, kernel}, s[2] = {1, stride ? stride : kernel}, p[2] = {0, padding}, d[2] = {1, dilation};
    return drop_unit(ct_max_pool2d(ct_unsqueeze(input, -2), k, s, p, d, ceil_mode, NULL));
}

ct_tensor *ct_avg_pool1d(const ct_tensor *input, int64_t kernel, int64_t stride, int64_t padding, bool ceil_mode,
                         bool count_include_pad) {
    const char *op = "avg_pool1d";
    CT_CHECK_ARG(op, input);
    if (check_1d(op, input, "avg"))
        return NULL;
    ct_scope_begin();
    int64_t k[2] = {1, kernel}, s[2] = {1, stride ? stride : kernel}, p[2] = {0, padding};
    return drop_unit(ct_avg_pool2d(ct_unsqueeze(input, -2), k, s, p, ceil_mode, count_include_pad, 0));
}

ct_tensor *ct_adaptive_avg_pool1d(const ct_tensor *input, int64_t output_size) {
    const char *op = "adaptive_avg_pool1d";
    CT_CHECK_ARG(op, input);
    if (check_1d(op, input, "avg"))
        return NULL;
    ct_scope_begin();
    int64_t o[2] = {1, output_size};
    return drop_unit(ct_adaptive_avg_pool2d(ct_unsqueeze(input, -2), o));
}

/* ------------------------------------------------------------------ pixel shuffle */

/* (*, C r^2, H, W) <-> (*, C, H r, W r): the leading dims are folded into one batch
 * dim, so six dims suffice whatever the input's rank. */
static ct_tensor *shuffle(const ct_tensor *input, int64_t r, bool up) {
    const char *op = up ? "pixel_shuffle" : "pixel_unshuffle";
    CT_CHECK_ARG(op, input);
    int nd = ct_tensor_dim(input);
    const int64_t *sh = ct_tensor_shape(input);
    if (nd < 3) {
        ct_error(CT_ERROR_VALUE, op, "%s expects input to have at least 3 dimensions, but got input with %d "
                 "dimension(s)", op, nd);
        return NULL;
    }
    if (r <= 0) {
        ct_error(CT_ERROR_VALUE, op, "%s expects a positive %s, but got %lld", op,
                 up ? "upscale_factor" : "downscale_factor", (long long)r);
        return NULL;
    }
    int64_t c = sh[nd - 3], h = sh[nd - 2], w = sh[nd - 1], b = 1;
    for (int i = 0; i < nd - 3; i++)
        b *= sh[i];
    if (up && c % (r * r)) {
        ct_error(CT_ERROR_VALUE, op, "pixel_shuffle expects its input's 'channel' dimension to be divisible by the "
                 "square of upscale_factor, but input.size(-3)=%lld is not divisible by %lld",
                 (long long)c, (long long)(r * r));
        return NULL;
    }
    if (!up && (h % r || w % r)) {
        bool height = h % r != 0;
        ct_error(CT_ERROR_VALUE, op, "pixel_unshuffle expects %s to be divisible by downscale_factor, but "
                 "input.size(%d)=%lld is not divisible by %lld",
                 height ? "height" : "width", height ? -2 : -1, (long long)(height ? h : w), (long long)r);
        return NULL;
    }
    int64_t shape[CT_MAX_DIMS];
    memcpy(shape, sh, sizeof(int64_t) * (size_t)nd);
    ct_scope_begin();
    ct_tensor *y;
    if (up) {
        int64_t oc = c / (r * r);
        y = ct_permute(ct_reshape(input, CT_SHAPE(b, oc, r, r, h, w)), CT_SHAPE(0, 1, 4, 2, 5, 3));
        shape[nd - 3] = oc, shape[nd - 2] = h * r, shape[nd - 1] = w * r;
    } else {
        y = ct_permute(ct_reshape(input, CT_SHAPE(b, c, h / r, r, w / r, r)), CT_SHAPE(0, 1, 3, 5, 2, 4));
        shape[nd - 3] = c * r * r, shape[nd - 2] = h / r, shape[nd - 1] = w / r;
    }
    y = y ? ct_reshape(y, shape, nd) : NULL;
    ct_keep(y);
    ct_scope_end();
    return y;
}

ct_tensor *ct_pixel_shuffle(const ct_tensor *input, int64_t upscale_factor) {
    return shuffle(input, upscale_factor, true);
}

ct_tensor *ct_pixel_unshuffle(const ct_tensor *input, int64_t downscale_factor) {
    return shuffle(input, downscale_factor, false);
}

/* ------------------------------------------------------------------ instance_norm */

/* t (C) repeated for each of b samples: (b C), sample-major as the folded input. */
static ct_tensor *per_sample(const ct_tensor *t, int64_t b) {
    return t ? ct_reshape(ct_expand(ct_unsqueeze(t, 0), CT_SHAPE(b, ct_tensor_numel(t))), CT_SHAPE(-1)) : NULL;
}

ct_tensor *ct_instance_norm(const ct_tensor *input, ct_tensor *running_mean, ct_tensor *running_var,
                            const ct_tensor *weight, const ct_tensor *bias, bool use_input_stats, double momentum,
                            double eps) {
    const char *op = "instance_norm";
    CT_CHECK_ARG(op, input);
    int nd = ct_tensor_dim(input);
    const int64_t *sh = ct_tensor_shape(input);
    if (nd < 2) {
        ct_error(CT_ERROR_VALUE, op, "Expected 2D or higher input (got %dD input)", nd);
        return NULL;
    }
    int64_t b = sh[0], c = sh[1], spatial = 1;
    for (int i = 2; i < nd; i++)
        spatial *= sh[i];
    if (use_input_stats && spatial <= 1) {
        char s[96];
        ct_error(CT_ERROR_VALUE, op, "Expected more than 1 spatial element when training, got input size %s",
                 ct_shape_str(sh, nd, s, sizeof s));
        return NULL;
    }
    const ct_tensor *vecs[4] = {running_mean, running_var, weight, bias};
    static const char *names[4] = {"running_mean", "running_var", "weight", "bias"};
    for (int i = 0; i < 4; i++)
        if (vecs[i] && ct_tensor_numel(vecs[i]) != c) {
            ct_error(CT_ERROR_VALUE, op, "%s should contain %lld elements not %lld", names[i], (long long)c,
                     (long long)ct_tensor_numel(vecs[i]));
            return NULL;
        }
    int64_t folded[CT_MAX_DIMS];
    memcpy(folded, sh, sizeof(int64_t) * (size_t)nd);
    folded[0] = 1;
    folded[1] = b * c;
    ct_scope_begin();
    /* the running statistics run per (sample, channel) and are averaged back over the
     * samples afterwards, as PyTorch's instance_norm does */
    ct_tensor *rm = running_mean ? ct_contiguous(per_sample(running_mean, b)) : NULL;
    ct_tensor *rv = running_var ? ct_contiguous(per_sample(running_var, b)) : NULL;
    ct_tensor *y = NULL;
    if ((!running_mean || rm) && (!running_var || rv))
        y = ct_batch_norm(ct_reshape(input, folded, nd), rm, rv, per_sample(weight, b), per_sample(bias, b),
                          use_input_stats, momentum, eps);
    if (y && use_input_stats && (running_mean || running_var)) {
        bool grad_was = ct_set_grad_enabled(false); /* Note [Statistics without a graph] in functional.c */
        int64_t zero = 0;
        bool ok = (!running_mean ||
                   ct_copy_(running_mean, ct_mean(ct_reshape(rm, CT_SHAPE(b, c)), &zero, 1, false,
                                                  CT_DTYPE_UNDEFINED))) &&
                  (!running_var ||
                   ct_copy_(running_var, ct_mean(ct_reshape(rv, CT_SHAPE(b, c)), &zero, 1, false,
                                                 CT_DTYPE_UNDEFINED)));
        ct_set_grad_enabled(grad_was);
        if (!ok)
            y = NULL;
    }
    y = y ? ct_reshape(y, sh, nd) : NULL;
    ct_keep(y);
    ct_scope_end();
    return y;
}

/* ------------------------------------------------------------------ interpolate */

static const char *const interp_modes[] = {"nearest", "linear", "bilinear", "bicubic", "nearest-exact", "trilinear"};

/* Note [5-D interpolate by dims]
 * trilinear weights are the product of one linear weight per dim, and the 3-D nearest
 * modes pick one source index per dim, so a 5-D interpolate is the 2-D one over
 * (H, W) (depths folded into the channels: bilinear, or the same nearest mode) and
 * then the 1-D one over D (the output's (H, W) positions folded into the channels),
 * each dim with its own size and scale as PyTorch computes them. The gradient is the
 * two upsample ops'. */
static ct_tensor *interpolate_5d(const ct_tensor *input, const int64_t out[3], const double scales[3],
                                 const char *mode, bool align_corners, bool have_scales) {
    bool tri = !strcmp(mode, "trilinear");
    const int64_t *sh = ct_tensor_shape(input);
    int64_t n = sh[0], c = sh[1], d = sh[2];
    ct_scope_begin();
    ct_tensor *t = ct_upsample(ct_reshape(input, CT_SHAPE(n, c * d, sh[3], sh[4])), out + 1, 2,
                               tri ? "bilinear" : mode, align_corners, have_scales ? scales + 1 : NULL);
    /* (N, C, D, oH, oW) -> (N, C * oH * oW, D) */
    t = t ? ct_reshape(ct_transpose(ct_reshape(t, CT_SHAPE(n, c, d, out[1] * out[2])), 2, 3),
                       CT_SHAPE(n, c * out[1] * out[2], d))
          : NULL;
    t = t ? ct_upsample(t, out, 1, tri ? "linear" : mode, align_corners, have_scales ? scales : NULL) : NULL;
    t = t ? ct_contiguous(ct_transpose(ct_reshape(t, CT_SHAPE(n, c, out[1] * out[2], out[0])), 2, 3)) : NULL;
    t = t ? ct_view(t, CT_SHAPE(n, c, out[0], out[1], out[2])) : NULL;
    ct_keep(t);
    ct_scope_end();
    return t;
}

ct_tensor *ct_interpolate(const ct_tensor *input, const int64_t *size, const double *scale_factor, int n,
                          const char *mode, bool align_corners) {
    const char *op = "interpolate";
    CT_CHECK_ARG(op, input);
    if (!mode)
        mode = "nearest";
    int nd = ct_tensor_dim(input), nsp = nd - 2;
    const int64_t *sh = ct_tensor_shape(input);
    if (size && scale_factor) {
        ct_error(CT_ERROR_VALUE, op, "only one of size or scale_factor should be defined");
        return NULL;
    }
    if (!size && !scale_factor) {
        ct_error(CT_ERROR_VALUE, op, "either size or scale_factor should be defined");
        return NULL;
    }
    bool known = false, interpolating = false;
    for (int i = 0; i < 6; i++)
        if (!strcmp(mode, interp_modes[i])) {
            known = true;
            interpolating = (i >= 1 && i <= 3) || i == 5;
        }
    if (align_corners && !interpolating) {
        ct_error(CT_ERROR_VALUE, op, "align_corners option can only be set with the interpolating modes: linear | "
                 "bilinear | bicubic | trilinear");
        return NULL;
    }
    char s[96];
    ct_shape_str(sh + (nd >= 2 ? 2 : 0), nd >= 2 ? nsp : 0, s, sizeof s);
    if (n != 1 && n != nsp) {
        char given[200];
        int o = snprintf(given, sizeof given, "(");
        for (int i = 0; i < n && o < (int)sizeof given - 40; i++) {
            if (size)
                o += snprintf(given + o, sizeof given - (size_t)o, i ? ", %lld" : "%lld", (long long)size[i]);
            else {
                char f[40];
                ct_nn_float_repr(scale_factor[i], f, sizeof f);
                o += snprintf(given + o, sizeof given - (size_t)o, i ? ", %s" : "%s", f);
            }
        }
        snprintf(given + o, sizeof given - (size_t)o, n == 1 ? ",)" : ")");
        ct_error(CT_ERROR_VALUE, op, "Input and %s must have the same number of spatial dimensions, but got input "
                 "with spatial dimensions of %s and %s %s. Please provide input tensor in (N, C, d1, d2, ...,dK) "
                 "format and %s in (%s1, %s2, ...,%sK) format.",
                 size ? "output" : "scale_factor", s, size ? "output size of" : "scale_factor of shape", given,
                 size ? "output size" : "scale_factor", size ? "o" : "s", size ? "o" : "s", size ? "o" : "s");
        return NULL;
    }
    bool rank_ok = known && (nd == 3 || nd == 4 || nd == 5) && !(nd != 4 && !strcmp(mode, "bicubic"));
    static const struct {
        const char *mode;
        int nd;
    } needs[] = {{"linear", 3}, {"bilinear", 4}, {"trilinear", 5}};
    for (int i = 0; known && nd >= 3 && nd <= 5 && i < 3; i++)
        if (!strcmp(mode, needs[i].mode) && nd != needs[i].nd) {
            ct_error(CT_ERROR_NOT_IMPLEMENTED, op, "Got %dD input, but %s mode needs %dD input", nd, mode,
                     needs[i].nd);
            return NULL;
        }
    if (!rank_ok) {
        ct_error(CT_ERROR_NOT_IMPLEMENTED, op, "Input Error: Only 3D, 4D and 5D input Tensors supported (got %dD) "
                 "for the modes: nearest | linear | bilinear | bicubic | trilinear | lanczos | area | nearest-exact "
                 "(got %s)", nd, mode);
        return NULL;
    }
    int64_t out[3];
    double scales[3] = {0, 0, 0};
    for (int i = 0; i < nsp; i++) {
        int j = n == 1 ? 0 : i;
        if (size) {
            out[i] = size[j];
        } else {
            scales[i] = scale_factor[j];
            /* PyTorch: floor(float(input size) * scale_factor), in double */
            double o = floor((double)sh[2 + i] * scale_factor[j]);
            if (!(o > -9223372036854775808.0 && o < 9223372036854775808.0)) { /* NaN, infinite, past int64 */
                ct_error(CT_ERROR_VALUE, op, "the output size of input size %lld times scale_factor %g is out of range",
                         (long long)sh[2 + i], scale_factor[j]);
                return NULL;
            }
            out[i] = (int64_t)o;
        }
    }
    if (nd == 5) {
        if (sh[2] <= 0 || sh[3] <= 0 || sh[4] <= 0 || out[0] <= 0 || out[1] <= 0 || out[2] <= 0) {
            ct_error(CT_ERROR_VALUE, op, "Input and output sizes should be greater than 0, but got input (D: %lld, H: "
                     "%lld, W: %lld) output (D: %lld, H: %lld, W: %lld)",
                     (long long)sh[2], (long long)sh[3], (long long)sh[4], (long long)out[0], (long long)out[1],
                     (long long)out[2]);
            return NULL;
        }
        return interpolate_5d(input, out, scales, mode, align_corners, !size);
    }
    return ct_upsample(input, out, nsp, mode, align_corners, size ? NULL : scales);
}

/* ------------------------------------------------------------------ conv3d */

/* Note [conv3d as conv2d]
 * There is no 3-D kernel: output depth od reads input depths od * sd + kd * dd - pd
 * for each kernel depth kd. For one kd those depths are a strided slice of the
 * depth-padded input, so each kd is one conv2d over every (sample, output depth)
 * image at once (the depths folded into the batch) with the kernel's slice kd, and
 * the kD results are summed. kD conv2d calls, gradients through conv2d, narrow and
 * pad. */
ct_tensor *ct_conv3d(const ct_tensor *input, const ct_tensor *weight, const ct_tensor *bias, const int64_t stride[3],
                     const int64_t padding[3], const int64_t dilation[3], int64_t groups) {
    const char *op = "conv3d";
    CT_CHECK_ARG(op, input);
    CT_CHECK_ARG(op, weight);
    int nd = ct_tensor_dim(input);
    if (nd != 4 && nd != 5) {
        char s[96];
        ct_error(CT_ERROR_VALUE, op,
                 "Expected 4D (unbatched) or 5D (batched) input to conv3d, but got input of size: %s",
                 ct_shape_str(ct_tensor_shape(input), nd, s, sizeof s));
        return NULL;
    }
    if (ct_tensor_dim(weight) != 5) {
        ct_error(CT_ERROR_VALUE, op, "weight should have 5 dimensions, got %d", ct_tensor_dim(weight));
        return NULL;
    }
    int64_t s[3], p[3], d[3];
    for (int i = 0; i < 3; i++) {
        s[i] = stride ? stride[i] : 1;
        p[i] = padding ? padding[i] : 0;
        d[i] = dilation ? dilation[i] : 1;
        if (s[i] <= 0 || p[i] < 0 || d[i] <= 0) {
            ct_error(CT_ERROR_VALUE, op, "stride and dilation must be positive and padding non-negative");
            return NULL;
        }
    }
    ct_scope_begin();
    const ct_tensor *x = nd == 4 ? ct_unsqueeze(input, 0) : input;
    int64_t kd = ct_tensor_size(weight, 2), n = x ? ct_tensor_size(x, 0) : 0, c = x ? ct_tensor_size(x, 1) : 0;
    int64_t depth = x ? ct_tensor_size(x, 2) + 2 * p[0] : 0, span = d[0] * (kd - 1) + 1;
    ct_tensor *y = NULL;
    if (x && ct_tensor_size(x, 1) != ct_tensor_size(weight, 1) * groups) {
        char a[96], b[96];
        ct_error(CT_ERROR_VALUE, op,
                 "Given groups=%lld, weight of size %s, expected input%s to have %lld channels, but got %lld channels "
                 "instead",
                 (long long)groups, ct_shape_str(ct_tensor_shape(weight), 5, a, sizeof a),
                 ct_shape_str(ct_tensor_shape(x), 5, b, sizeof b), (long long)(ct_tensor_size(weight, 1) * groups),
                 (long long)ct_tensor_size(x, 1));
        x = NULL;
    } else if (x && depth < span) {
        ct_error(CT_ERROR_VALUE, op,
                 "Calculated padded input size per channel: (%lld x %lld x %lld). Kernel size: (%lld x %lld x %lld). "
                 "Kernel size can't be greater than actual input size",
                 (long long)depth, (long long)(ct_tensor_size(x, 3) + 2 * p[1]),
                 (long long)(ct_tensor_size(x, 4) + 2 * p[2]), (long long)kd, (long long)ct_tensor_size(weight, 3),
                 (long long)ct_tensor_size(weight, 4));
        x = NULL;
    }
    if (x) {
        int64_t od = (depth - span) / s[0] + 1;
        const ct_tensor *xp = p[0] ? ct_pad(x, CT_INDEX(0, 0, 0, 0, p[0], p[0]), 6, "constant", 0) : x;
        for (int64_t k = 0; xp && k < kd; k++) {
            int64_t start = k * d[0];
            /* (N, C, od, H, W) -> (N * od, C, H, W) */
            ct_tensor *sl = ct_slice(xp, 2, start, start + (od - 1) * s[0] + 1, s[0]);
            ct_tensor *img = sl ? ct_reshape(ct_transpose(sl, 1, 2),
                                             CT_SHAPE(n * od, c, ct_tensor_size(sl, 3), ct_tensor_size(sl, 4)))
                                : NULL;
            ct_tensor *t = ct_conv2d(img, ct_select(weight, 2, k), k == 0 ? bias : NULL, s + 1, p + 1, d + 1, groups);
            y = !t ? NULL : y ? ct_add(y, t) : t;
            if (!y)
                break;
        }
        if (y) { /* (N * od, O, Ho, Wo) -> (N, O, od, Ho, Wo) */
            y = ct_transpose(ct_reshape(y, CT_SHAPE(n, od, ct_tensor_size(y, 1), ct_tensor_size(y, 2),
                                                    ct_tensor_size(y, 3))),
                             1, 2);
            y = y && nd == 4 ? ct_squeeze_dim(y, 0) : y;
            y = y ? ct_contiguous(y) : NULL;
        }
    }
    ct_keep(y);
    ct_scope_end();
    return y;
}

/* ------------------------------------------------------------------ adaptive max pooling */

/* Note [Adaptive max pooling by dims]
 * Bin i of a dim of size n cut into m bins covers [floor(i n / m), ceil((i + 1) n / m)),
 * and the maximum over a rectangle is the maximum over its rows of the maxima over its
 * columns, so the pool is one amax per bin of each dim (W first, then H), joined with
 * cat. The gradient goes through amax: to the largest element of each bin (split
 * evenly between equal ones, where PyTorch picks one). return_indices is not offered. */
static ct_tensor *max_bins(const ct_tensor *x, int dim, int64_t m) {
    int64_t n = ct_tensor_size(x, dim), d = dim;
    ct_tensor **bins = malloc(sizeof(ct_tensor *) * (size_t)m);
    if (!bins) {
        ct_error(CT_ERROR_OUT_OF_MEMORY, "adaptive_max_pool2d", "out of memory");
        return NULL;
    }
    bool ok = true;
    for (int64_t i = 0; ok && i < m; i++) {
        int64_t start = i * n / m, end = ((i + 1) * n + m - 1) / m;
        bins[i] = ct_amax(ct_narrow(x, dim, start, end - start), &d, 1, true);
        ok = bins[i] != NULL;
    }
    ct_tensor *r = ok ? ct_cat((const ct_tensor *const *)bins, (int)m, dim) : NULL;
    free(bins);
    return r;
}

ct_tensor *ct_adaptive_max_pool2d(const ct_tensor *input, const int64_t output_size[2]) {
    const char *op = "adaptive_max_pool2d";
    CT_CHECK_ARG(op, input);
    if (!output_size) {
        ct_error(CT_ERROR_NULL_ARGUMENT, op, "output_size is NULL");
        return NULL;
    }
    int nd = ct_tensor_dim(input);
    const int64_t *sh = ct_tensor_shape(input);
    char s[96];
    if (nd != 3 && nd != 4) {
        ct_error(CT_ERROR_VALUE, op, "adaptive_max_pool2d(): Expected 3D or 4D tensor, but got: %s",
                 ct_shape_str(sh, nd, s, sizeof s));
        return NULL;
    }
    for (int i = 1; i < nd; i++)
        if (sh[i] == 0) {
            ct_error(CT_ERROR_VALUE, op, "adaptive_max_pool2d(): Expected input to have non-zero size for non-batch "
                     "dimensions, but input has sizes %s with dimension %d being empty",
                     ct_shape_str(sh, nd, s, sizeof s), i);
            return NULL;
        }
    if (!ct_dtype_is_floating(ct_tensor_dtype(input))) {
        ct_error(CT_ERROR_TYPE, op, "\"adaptive_max_pool2d\" not implemented for '%s'",
                 ct_dtype_name(ct_tensor_dtype(input)));
        return NULL;
    }
    int64_t o[2];
    for (int i = 0; i < 2; i++) {
        o[i] = output_size[i] < 0 ? sh[nd - 2 + i] : output_size[i]; /* -1: None */
    }
    if (o[0] == 0 || o[1] == 0 || sh[0] == 0) {
        int64_t shape[4];
        memcpy(shape, sh, sizeof(int64_t) * (size_t)nd);
        shape[nd - 2] = o[0], shape[nd - 1] = o[1];
        return ct_zeros(shape, nd, ct_tensor_dtype(input), ct_tensor_device(input));
    }
    ct_scope_begin();
    ct_tensor *y = max_bins(input, nd - 1, o[1]);
    y = y ? max_bins(y, nd - 2, o[0]) : NULL;
    ct_keep(y);
    ct_scope_end();
    return y;
}

ct_tensor *ct_adaptive_max_pool1d(const ct_tensor *input, int64_t output_size) {
    const char *op = "adaptive_max_pool1d";
    CT_CHECK_ARG(op, input);
    if (check_1d(op, input, "avg"))
        return NULL;
    ct_scope_begin();
    int64_t o[2] = {1, output_size};
    return drop_unit(ct_adaptive_max_pool2d(ct_unsqueeze(input, -2), o));
}

/* ------------------------------------------------------------------ max_pool3d */

/* PyTorch's pooling output size (pooling_output_shape). */
static int64_t pool_out(int64_t in, int64_t k, int64_t pad, int64_t stride, int64_t dil, bool ceil_mode) {
    int64_t num = in + 2 * pad - dil * (k - 1) - 1 + (ceil_mode ? stride - 1 : 0);
    int64_t o = (num >= 0 ? num / stride : -((-num + stride - 1) / stride)) + 1;
    if (ceil_mode && (o - 1) * stride >= in + pad)
        o--;
    return o;
}

/* Note [max_pool3d as max_pool2d]
 * The maximum over a box is the maximum over its depth window of the maxima over its
 * (H, W) windows: max_pool2d pools every depth slice at once (depths folded into the
 * channels), then the depth windows are the element-wise maximum of kD strided slices
 * of the result, padded with -inf (the depth padding, and what ceil_mode's last window
 * reads past the end). The gradient reaches the input through maximum and
 * max_pool2d. */
ct_tensor *ct_max_pool3d(const ct_tensor *input, const int64_t kernel_size[3], const int64_t stride[3],
                         const int64_t padding[3], const int64_t dilation[3], bool ceil_mode) {
    const char *op = "max_pool3d";
    CT_CHECK_ARG(op, input);
    if (!kernel_size) {
        ct_error(CT_ERROR_NULL_ARGUMENT, op, "kernel_size is NULL");
        return NULL;
    }
    int nd = ct_tensor_dim(input);
    if ((nd != 4 && nd != 5) || ct_tensor_numel(input) == 0) {
        ct_error(CT_ERROR_VALUE, op, "non-empty 4D or 5D (batch mode) tensor expected for input");
        return NULL;
    }
    int64_t k[3], s[3], p[3], d[3], o[3];
    const int64_t *sh = ct_tensor_shape(input);
    for (int i = 0; i < 3; i++) {
        k[i] = kernel_size[i];
        s[i] = stride && stride[i] ? stride[i] : k[i];
        p[i] = padding ? padding[i] : 0;
        d[i] = dilation ? dilation[i] : 1;
        if (k[i] <= 0 || s[i] <= 0 || d[i] <= 0 || p[i] < 0) {
            ct_error(CT_ERROR_VALUE, op, "kernel_size, stride and dilation must be greater than zero, padding "
                     "non-negative");
            return NULL;
        }
        if (p[i] > (d[i] * (k[i] - 1) + 1) / 2) {
            ct_error(CT_ERROR_VALUE, op, "pad should be at most half of effective kernel size, but got pad=%lld, "
                     "kernel_size=%lld and dilation=%lld",
                     (long long)p[i], (long long)k[i], (long long)d[i]);
            return NULL;
        }
        o[i] = pool_out(sh[nd - 3 + i], k[i], p[i], s[i], d[i], ceil_mode);
    }
    if (o[0] < 1 || o[1] < 1 || o[2] < 1) {
        int64_t c = sh[nd - 4];
        ct_error(CT_ERROR_VALUE, op, "Given input size: (%lldx%lldx%lldx%lld). Calculated output size: "
                 "(%lldx%lldx%lldx%lld). Output size is too small",
                 (long long)c, (long long)sh[nd - 3], (long long)sh[nd - 2], (long long)sh[nd - 1], (long long)c,
                 (long long)o[0], (long long)o[1], (long long)o[2]);
        return NULL;
    }
    ct_scope_begin();
    const ct_tensor *x = nd == 4 ? ct_unsqueeze(input, 0) : input;
    int64_t n = ct_tensor_size(x, 0), c = ct_tensor_size(x, 1), depth = ct_tensor_size(x, 2);
    /* (N, C D, H, W) pooled over (H, W), back to (N, C, D, Ho, Wo) */
    ct_tensor *t = ct_max_pool2d(ct_reshape(x, CT_SHAPE(n, c * depth, sh[nd - 2], sh[nd - 1])), k + 1, s + 1, p + 1,
                                 d + 1, ceil_mode, NULL);
    t = t ? ct_reshape(t, CT_SHAPE(n, c, depth, o[1], o[2])) : NULL;
    int64_t need = (o[0] - 1) * s[0] + d[0] * (k[0] - 1) + 1, have = depth + 2 * p[0];
    int64_t extra = need > have ? need - have : 0;
    if (t && (p[0] || extra))
        t = ct_pad(t, CT_INDEX(0, 0, 0, 0, p[0], p[0] + extra), 6, "constant", -1.0 / 0.0);
    ct_tensor *y = NULL;
    for (int64_t j = 0; t && j < k[0]; j++) {
        ct_tensor *sl = ct_slice(t, 2, j * d[0], j * d[0] + (o[0] - 1) * s[0] + 1, s[0]);
        y = !sl ? NULL : y ? ct_maximum(y, sl) : sl;
        if (!y)
            break;
    }
    y = y && nd == 4 ? ct_squeeze_dim(y, 0) : y;
    y = y ? ct_contiguous(y) : NULL;
    ct_keep(y);
    ct_scope_end();
    return y;
}

/* F.max_unpool2d: a scatter of each plane's values into zeros of the output size, so
 * the gradient is the gather at the indices (scatter's). PyTorch's checks and
 * messages; an index outside its output plane is an error, as on PyTorch's CPU (the
 * check reads the indices' minimum and maximum). */
ct_tensor *ct_max_unpool2d(const ct_tensor *input, const ct_tensor *indices, const int64_t kernel_size[2],
                           const int64_t stride[2], const int64_t padding[2], const int64_t *output_size,
                           int n_output_size) {
    const char *op = "max_unpool2d";
    CT_CHECK_ARG(op, input);
    CT_CHECK_ARG(op, indices);
    if (!kernel_size) {
        ct_error(CT_ERROR_NULL_ARGUMENT, op, "kernel_size is NULL");
        return NULL;
    }
    int nd = ct_tensor_dim(input);
    if (nd != 3 && nd != 4) {
        ct_error(CT_ERROR_VALUE, op,
                 "Input to max_unpooling2d should be a 3d or 4d Tensor, but got a tensor with %d dimensions.", nd);
        return NULL;
    }
    if (ct_tensor_dtype(indices) != CT_I64) {
        ct_error(CT_ERROR_TYPE, op, "elements in indices should be type int64 but got: %s",
                 ct_dtype_name(ct_tensor_dtype(indices)));
        return NULL;
    }
    const int64_t *sh = ct_tensor_shape(input);
    bool same = ct_tensor_dim(indices) == nd;
    for (int i = 0; same && i < nd; i++)
        same = ct_tensor_size(indices, i) == sh[i];
    if (!same) {
        char a[96], b[96];
        ct_error(CT_ERROR_VALUE, op, "Expected shape of indices to be same as that of the input tensor (%s) but got "
                 "indices tensor with shape: %s",
                 ct_shape_str(sh, nd, a, sizeof a),
                 ct_shape_str(ct_tensor_shape(indices), ct_tensor_dim(indices), b, sizeof b));
        return NULL;
    }
    int64_t o[2];
    for (int i = 0; i < 2; i++) {
        int64_t k = kernel_size[i], st = stride && stride[i] ? stride[i] : k, p = padding ? padding[i] : 0;
        if (k <= 0 || st <= 0 || p < 0) {
            ct_error(CT_ERROR_VALUE, op, "kernel_size and stride must be greater than zero, padding non-negative");
            return NULL;
        }
        o[i] = (sh[nd - 2 + i] - 1) * st + k - 2 * p;
    }
    if (output_size) {
        if (n_output_size != 2 && n_output_size != 4) {
            ct_error(CT_ERROR_VALUE, op, "output_size should be a sequence containing 2 or 4 elements, but it has a "
                     "length of '%d'", n_output_size);
            return NULL;
        }
        const int64_t *want = output_size + n_output_size - 2;
        for (int i = 0; i < 2; i++) {
            int64_t st = stride && stride[i] ? stride[i] : kernel_size[i];
            if (!(o[i] - st < want[i] && want[i] < o[i] + st)) {
                ct_error(CT_ERROR_VALUE, op, "invalid output_size \"(%lld, %lld)\" (dim %d must be between %lld and "
                         "%lld)",
                         (long long)want[0], (long long)want[1], i, (long long)(o[i] - st), (long long)(o[i] + st));
                return NULL;
            }
        }
        o[0] = want[0], o[1] = want[1];
    }
    if (o[0] <= 0 || o[1] <= 0) {
        ct_error(CT_ERROR_VALUE, op, "the output size (%lld, %lld) is not positive", (long long)o[0], (long long)o[1]);
        return NULL;
    }
    ct_scope_begin();
    ct_tensor *y = NULL;
    int64_t n = nd == 4 ? sh[0] : 1, c = sh[nd - 3], plane = o[0] * o[1];
    bool ok = true;
    /* PyTorch's message for a bad index, read on the host; a ct_compile capture records
     * the scatter alone, whose kernel refuses an index out of the plane just the same */
    if (ct_tensor_numel(indices) > 0 && !ct_compile_is_capturing()) {
        int64_t lo = 0, hi = 0;
        ok = ct_item_int64(ct_amin(indices, NULL, 0, false), &lo) == CT_OK &&
             ct_item_int64(ct_amax(indices, NULL, 0, false), &hi) == CT_OK;
        if (ok && (lo < 0 || hi >= plane)) {
            ct_error(CT_ERROR_VALUE, op, "Found an invalid max index: %lld (output volumes are of size %lldx%lld)",
                     (long long)(lo < 0 ? lo : hi), (long long)o[0], (long long)o[1]);
            ok = false;
        }
    }
    if (ok) {
        ct_tensor *z = ct_zeros(CT_SHAPE(n, c, plane), ct_tensor_dtype(input), ct_tensor_device(input));
        ct_tensor *idx = ct_reshape(indices, CT_SHAPE(n, c, -1)), *src = ct_reshape(input, CT_SHAPE(n, c, -1));
        y = z && idx && src ? ct_scatter(z, 2, idx, src) : NULL;
        int64_t shape[4] = {n, c, o[0], o[1]};
        y = y ? ct_reshape(y, shape + (nd == 4 ? 0 : 1), nd) : NULL;
    }
    ct_keep(y);
    ct_scope_end();
    return y;
}

/* Note [conv_transpose3d as conv_transpose2d]
 * Input depth id and kernel depth kd write output depth id * sD + kd * dD - pD. For one
 * kd that is conv_transpose2d of every input depth slice (folded into the batch) with
 * the kernel's slice kd, placed at depths kd * dD + id * sD: the slices spread out
 * by sD (a pad of sD - 1 zeros after each, through unsqueeze, pad and reshape) and
 * shifted by kd * dD (a pad in front). The kD placements are summed, then the depth
 * padding is cropped from both ends (output_padding adds depths at the back) and the
 * bias added. Gradients through conv_transpose2d, pad and narrow. */
ct_tensor *ct_conv_transpose3d(const ct_tensor *input, const ct_tensor *weight, const ct_tensor *bias,
                               const int64_t stride[3], const int64_t padding[3], const int64_t output_padding[3],
                               int64_t groups, const int64_t dilation[3]) {
    const char *op = "conv_transpose3d";
    CT_CHECK_ARG(op, input);
    CT_CHECK_ARG(op, weight);
    int nd = ct_tensor_dim(input);
    if (nd != 4 && nd != 5) {
        char b[96];
        ct_error(CT_ERROR_VALUE, op,
                 "Expected 4D (unbatched) or 5D (batched) input to conv_transpose3d, but got input of size: %s",
                 ct_shape_str(ct_tensor_shape(input), nd, b, sizeof b));
        return NULL;
    }
    if (ct_tensor_dim(weight) != 5) {
        ct_error(CT_ERROR_VALUE, op, "weight should have 5 dimensions, got %d", ct_tensor_dim(weight));
        return NULL;
    }
    int64_t s[3], p[3], o[3], d[3];
    for (int i = 0; i < 3; i++) {
        s[i] = stride ? stride[i] : 1;
        p[i] = padding ? padding[i] : 0;
        o[i] = output_padding ? output_padding[i] : 0;
        d[i] = dilation ? dilation[i] : 1;
        if (s[i] <= 0 || p[i] < 0 || d[i] <= 0 || o[i] < 0) {
            ct_error(CT_ERROR_VALUE, op, "stride and dilation must be positive, padding and output_padding "
                     "non-negative");
            return NULL;
        }
        if (o[i] >= s[i] && o[i] >= d[i]) {
            ct_error(CT_ERROR_VALUE, op, "output padding must be smaller than either stride or dilation, but got "
                     "output_padding_depth: %lld output_padding_height: %lld output_padding_width: %lld "
                     "stride_depth: %lld stride_height: %lld stride_width: %lld dilation_depth: %lld "
                     "dilation_height: %lld dilation_width: %lld",
                     (long long)o[0], (long long)o[1], (long long)o[2], (long long)s[0], (long long)s[1],
                     (long long)s[2], (long long)d[0], (long long)d[1], (long long)d[2]);
            return NULL;
        }
    }
    if (groups <= 0) {
        ct_error(CT_ERROR_VALUE, op, "non-positive groups is not supported");
        return NULL;
    }
    ct_scope_begin();
    const ct_tensor *x = nd == 4 ? ct_unsqueeze(input, 0) : input;
    ct_tensor *y = NULL;
    int64_t n = x ? ct_tensor_size(x, 0) : 0, c = x ? ct_tensor_size(x, 1) : 0, id = x ? ct_tensor_size(x, 2) : 0;
    int64_t kd = ct_tensor_size(weight, 2), cout = ct_tensor_size(weight, 1) * groups;
    int64_t full = (id - 1) * s[0] + d[0] * (kd - 1) + 1 + o[0], od = full - 2 * p[0];
    if (x && c != ct_tensor_size(weight, 0)) {
        char a[96], b[96];
        ct_error(CT_ERROR_VALUE, op,
                 "Given transposed=1, weight of size %s, expected input%s to have %lld channels, but got %lld "
                 "channels instead",
                 ct_shape_str(ct_tensor_shape(weight), 5, a, sizeof a), ct_shape_str(ct_tensor_shape(x), 5, b, sizeof b),
                 (long long)ct_tensor_size(weight, 0), (long long)c);
        x = NULL;
    } else if (x && (id <= 0 || od <= 0)) {
        ct_error(CT_ERROR_VALUE, op, "the output depth %lld (input depth %lld) is not positive", (long long)od,
                 (long long)id);
        x = NULL;
    }
    /* (N, C, D, H, W) -> (N * D, C, H, W) */
    ct_tensor *img = x ? ct_reshape(ct_transpose(x, 1, 2), CT_SHAPE(n * id, c, ct_tensor_size(x, 3),
                                                                     ct_tensor_size(x, 4)))
                       : NULL;
    for (int64_t k = 0; img && k < kd; k++) {
        ct_tensor *t = ct_conv_transpose2d(img, ct_select(weight, 2, k), NULL, s + 1, p + 1, o + 1, groups, d + 1);
        if (!t) {
            y = NULL;
            break;
        }
        int64_t oh = ct_tensor_size(t, 2), ow = ct_tensor_size(t, 3), spread = (id - 1) * s[0] + 1;
        t = ct_transpose(ct_reshape(t, CT_SHAPE(n, id, cout, oh, ow)), 1, 2); /* (N, Cout, D, oh, ow) */
        if (t && s[0] > 1) {
            t = ct_pad(ct_unsqueeze(t, 3), CT_INDEX(0, 0, 0, 0, 0, s[0] - 1), 6, "constant", 0);
            t = t ? ct_narrow(ct_reshape(t, CT_SHAPE(n, cout, id * s[0], oh, ow)), 2, 0, spread) : NULL;
        }
        t = t ? ct_pad(t, CT_INDEX(0, 0, 0, 0, k * d[0], full - k * d[0] - spread), 6, "constant", 0) : NULL;
        y = !t ? NULL : y ? ct_add(y, t) : t;
        if (!y)
            break;
    }
    if (y)
        y = ct_narrow(y, 2, p[0], od);
    if (y && bias)
        y = ct_add(y, ct_view(bias, CT_SHAPE(1, cout, 1, 1, 1)));
    y = y && nd == 4 ? ct_squeeze_dim(y, 0) : y;
    y = y ? ct_contiguous(y) : NULL;
    ct_keep(y);
    ct_scope_end();
    return y;
}

/* Note [avg_pool3d as avg_pool2d]
 * PyTorch's divisor for a 3-D window is a product of one count per dim (the window's
 * extent clipped to the padded input with count_include_pad, to the input without
 * it), and avg_pool2d computes each of those counts the same way, so the average over
 * a box is avg_pool2d over its (H, W) windows (depths folded into the channels)
 * followed by avg_pool2d over (kD, 1) windows of (N, C, D, Ho * Wo), both with the
 * call's ceil_mode and count_include_pad. A divisor_override d makes the first pass
 * sum (override 1) and the second divide by d. The gradients are avg_pool2d's. */
ct_tensor *ct_avg_pool3d(const ct_tensor *input, const int64_t kernel_size[3], const int64_t stride[3],
                         const int64_t padding[3], bool ceil_mode, bool count_include_pad, int64_t divisor_override) {
    const char *op = "avg_pool3d";
    CT_CHECK_ARG(op, input);
    if (!kernel_size) {
        ct_error(CT_ERROR_NULL_ARGUMENT, op, "kernel_size is NULL");
        return NULL;
    }
    int nd = ct_tensor_dim(input);
    if (nd != 4 && nd != 5) {
        ct_error(CT_ERROR_VALUE, op, "non-empty 4D or 5D (batch mode) tensor expected for input");
        return NULL;
    }
    const int64_t *sh = ct_tensor_shape(input);
    for (int i = nd == 5 ? 1 : 0; i < nd; i++)
        if (sh[i] == 0) {
            char b[96];
            ct_error(CT_ERROR_VALUE, op, "avg_pool3d(): Expected input to have non-zero size for non-batch "
                     "dimensions, but input has sizes %s with dimension %d being empty",
                     ct_shape_str(sh, nd, b, sizeof b), i);
            return NULL;
        }
    int64_t k[3], s[3], p[3], o[3];
    for (int i = 0; i < 3; i++) {
        k[i] = kernel_size[i];
        s[i] = stride && stride[i] ? stride[i] : k[i];
        p[i] = padding ? padding[i] : 0;
        if (k[i] <= 0 || s[i] <= 0) {
            ct_error(CT_ERROR_VALUE, op, k[i] == 0 || s[i] == 0 ? "stride should not be zero"
                                                                : "kernel_size and stride must be greater than zero");
            return NULL;
        }
        if (p[i] < 0 || p[i] > k[i] / 2) {
            ct_error(CT_ERROR_VALUE, op, "pad should be at most half of effective kernel size, but got pad=%lld, "
                     "kernel_size=%lld and dilation=1",
                     (long long)p[i], (long long)k[i]);
            return NULL;
        }
        o[i] = pool_out(sh[nd - 3 + i], k[i], p[i], s[i], 1, ceil_mode);
    }
    if (o[0] < 1 || o[1] < 1 || o[2] < 1) {
        ct_error(CT_ERROR_VALUE, op, "input image (T: %lld H: %lld W: %lld) smaller than kernel size (kT: %lld kH: "
                 "%lld kW: %lld)",
                 (long long)sh[nd - 3], (long long)sh[nd - 2], (long long)sh[nd - 1], (long long)k[0],
                 (long long)k[1], (long long)k[2]);
        return NULL;
    }
    ct_scope_begin();
    const ct_tensor *x = nd == 4 ? ct_unsqueeze(input, 0) : input;
    ct_tensor *y = NULL;
    if (x) {
        int64_t n = ct_tensor_size(x, 0), c = ct_tensor_size(x, 1), depth = ct_tensor_size(x, 2);
        ct_tensor *t = ct_avg_pool2d(ct_reshape(x, CT_SHAPE(n, c * depth, sh[nd - 2], sh[nd - 1])), k + 1, s + 1,
                                     p + 1, ceil_mode, count_include_pad, divisor_override ? 1 : 0);
        t = t ? ct_reshape(t, CT_SHAPE(n, c, depth, o[1] * o[2])) : NULL;
        y = t ? ct_avg_pool2d(t, CT_INDEX(k[0], 1), CT_INDEX(s[0], 1), CT_INDEX(p[0], 0), ceil_mode,
                              count_include_pad, divisor_override)
              : NULL;
        y = y ? ct_reshape(y, CT_SHAPE(n, c, o[0], o[1], o[2])) : NULL;
        y = y && nd == 4 ? ct_squeeze_dim(y, 0) : y;
    }
    ct_keep(y);
    ct_scope_end();
    return y;
}
