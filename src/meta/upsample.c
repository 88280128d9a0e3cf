/* The structured kernels of upsample and upsample_backward (torch.nn.functional.
 * interpolate's nearest, nearest-exact, linear, bilinear and bicubic modes): checks,
 * the plan, the output, then the device's stub (Note [Stubs] in stubs.h); the loops
 * are src/cpu/upsample.c.
 *
 * Note [upsample]
 * Every mode is separable: output coordinate o of a spatial dim reads a few input
 * coordinates of that dim with weights (nearest one with weight 1, linear two, bicubic
 * four, clamped to the edges), and a 2-D output element is the weighted sum over the
 * product of its two dims' taps. The plan holds those taps per dim; the stub runs the
 * sums forward and, for the gradient, adds each output gradient back along the same
 * taps. The taps are computed as PyTorch's CPU kernels compute them (UpSample.h):
 * nearest in float, the others in the input's accumulation type (float, or double for
 * float64 input), so the same input coordinates are picked. scale (the scale_factor
 * the caller passed, <= 0 for none) sets the ratio when given, as in PyTorch, else
 * input size / output size. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "meta/indexing.h"
#include "meta/stubs.h"

/* Note [compute_scales_value] of PyTorch: 1 / scale when given, else in / out. */
static double scales_value(double scale, int64_t in, int64_t out, bool as_float) {
    if (as_float)
        return scale > 0 ? (float)(1.0 / scale) : (float)in / (float)out;
    return scale > 0 ? 1.0 / scale : (double)in / (double)out;
}

static double area_scale(int64_t in, int64_t out, bool align_corners, double scale, bool as_float) {
    if (align_corners) {
        if (out <= 1)
            return 0;
        return as_float ? (double)((float)(in - 1) / (float)(out - 1)) : (double)(in - 1) / (double)(out - 1);
    }
    return scales_value(scale, in, out, as_float);
}

static double source_index(double ratio, int64_t o, bool align_corners, bool cubic, bool as_float) {
    if (as_float) {
        float r = (float)ratio, s = align_corners ? r * (float)o : r * ((float)o + 0.5f) - 0.5f;
        return !cubic && s < 0 ? 0 : s;
    }
    double s = align_corners ? ratio * (double)o : ratio * ((double)o + 0.5) - 0.5;
    return !cubic && s < 0 ? 0 : s;
}

/* guard_index_and_lambda: the floor (in float, as PyTorch's floorf), at most in - 1,
 * and the fraction in [0, 1]. */
static void index_and_lambda(double real, int64_t in, bool as_float, int64_t *index, double *lambda) {
    int64_t i = (int64_t)floorf((float)real);
    *index = i < in - 1 ? i : in - 1;
    double l = real - (double)*index;
    if (as_float)
        l = (float)real - (float)*index;
    *lambda = l < 0 ? 0 : l > 1 ? 1 : l;
}

static double cubic1(double x, double a) { return ((a + 2) * x - (a + 3)) * x * x + 1; }
static double cubic2(double x, double a) { return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a; }
static float cubic1f(float x, float a) { return ((a + 2) * x - (a + 3)) * x * x + 1; }
static float cubic2f(float x, float a) { return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a; }

/* The taps of one dim: out * ntaps entries of idx and w. */
static void dim_taps(int mode, int64_t in, int64_t out, bool align_corners, double scale, bool as_float, int ntaps,
                     int64_t *idx, double *w) {
    for (int64_t o = 0; o < out; o++) {
        int64_t *ix = idx + o * ntaps;
        double *wt = w + o * ntaps;
        for (int t = 0; t < ntaps; t++)
            ix[t] = 0, wt[t] = 0;
        if (mode == CT_UPSAMPLE_NEAREST || mode == CT_UPSAMPLE_NEAREST_EXACT) {
            float s = (float)scales_value(scale, in, out, true);
            int64_t i;
            if (mode == CT_UPSAMPLE_NEAREST_EXACT)
                i = (int64_t)floorf((float)(((double)o + 0.5) * (double)s));
            else if (out == in)
                i = o;
            else if (out == 2 * in)
                i = o >> 1;
            else
                i = (int64_t)floorf((float)o * s);
            ix[0] = i < in - 1 ? i : in - 1;
            wt[0] = 1;
        } else if (mode == CT_UPSAMPLE_LINEAR) {
            if (out == in) {
                ix[0] = ix[1] = o;
                wt[0] = 1;
                continue;
            }
            double ratio = area_scale(in, out, align_corners, scale, as_float), l1;
            index_and_lambda(source_index(ratio, o, align_corners, false, as_float), in, as_float, &ix[0], &l1);
            ix[1] = ix[0] + (ix[0] < in - 1 ? 1 : 0);
            wt[0] = as_float ? (double)(1.0f - (float)l1) : 1.0 - l1;
            wt[1] = l1;
        } else {
            double ratio = area_scale(in, out, align_corners, scale, as_float), t;
            int64_t i0;
            index_and_lambda(source_index(ratio, o, align_corners, true, as_float), in, as_float, &i0, &t);
            for (int k = 0; k < 4; k++) {
                int64_t i = i0 - 1 + k;
                ix[k] = i < 0 ? 0 : i > in - 1 ? in - 1 : i;
            }
            if (as_float) {
                float a = -0.75f, x1 = (float)t, x2 = 1.0f - x1;
                wt[0] = cubic2f(x1 + 1.0f, a), wt[1] = cubic1f(x1, a), wt[2] = cubic1f(x2, a);
                wt[3] = cubic2f(x2 + 1.0f, a);
            } else {
                double a = -0.75, x1 = t, x2 = 1.0 - t;
                wt[0] = cubic2(x1 + 1.0, a), wt[1] = cubic1(x1, a), wt[2] = cubic1(x2, a), wt[3] = cubic2(x2 + 1.0, a);
            }
        }
    }
}

static void plan_free(ct_upsample_plan *p) {
    for (int d = 0; d < 2; d++) {
        free(p->idx[d]);
        free(p->w[d]);
    }
}

/* The plan of an input of nd dims (3 or 4) with spatial sizes in[] and out[]. */
static ct_status plan_make(const char *op, ct_upsample_plan *p, int mode, bool align_corners, const int64_t *shape,
                           int nd, const int64_t *out, const double *scales, bool as_float) {
    memset(p, 0, sizeof *p);
    int nsp = nd - 2;
    p->ntaps = mode == CT_UPSAMPLE_CUBIC ? 4 : mode == CT_UPSAMPLE_LINEAR ? 2 : 1;
    p->planes = shape[0] * shape[1];
    p->in[0] = p->out[0] = 1;
    for (int i = 0; i < nsp; i++) {
        p->in[2 - nsp + i] = shape[2 + i];
        p->out[2 - nsp + i] = out[i];
    }
    for (int d = 0; d < 2; d++) {
        p->idx[d] = malloc(sizeof(int64_t) * (size_t)(p->out[d] * p->ntaps));
        p->w[d] = malloc(sizeof(double) * (size_t)(p->out[d] * p->ntaps));
        if (!p->idx[d] || !p->w[d]) {
            plan_free(p);
            return ct_error(CT_ERROR_OUT_OF_MEMORY, op, "out of memory");
        }
        if (d == 0 && nsp == 1) { /* the unit dim of a 1-D plan: one tap of weight 1 */
            memset(p->idx[0], 0, sizeof(int64_t) * (size_t)p->ntaps);
            memset(p->w[0], 0, sizeof(double) * (size_t)p->ntaps);
            p->w[0][0] = 1;
            continue;
        }
        dim_taps(mode, p->in[d], p->out[d], align_corners, scales[d - (2 - nsp)], as_float, p->ntaps, p->idx[d],
                 p->w[d]);
    }
    return CT_OK;
}

/* Checks shared by both kernels: mode, rank, dtype, sizes (PyTorch's messages). */
static ct_status check(const char *op, int mode, bool align_corners, const int64_t *shape, int nd, const int64_t *out,
                       ct_dtype dt) {
    if (mode < 0 || mode >= CT_UPSAMPLE_MODE_COUNT)
        return ct_error(CT_ERROR_VALUE, op, "unknown mode %d", mode);
    if (align_corners && mode < CT_UPSAMPLE_LINEAR)
        return ct_error(CT_ERROR_VALUE, op,
                        "align_corners option can only be set with the interpolating modes: linear | bilinear | "
                        "bicubic | trilinear");
    if (nd != 3 && nd != 4)
        return ct_error(CT_ERROR_NOT_IMPLEMENTED, op, "upsample takes 3-D or 4-D input, got %dD", nd);
    if (!ct_dtype_is_floating(dt))
        return ct_error(CT_ERROR_TYPE, op, "\"%s\" not implemented for '%s'", op, ct_dtype_name(dt));
    bool ok = true;
    for (int i = 2; i < nd; i++)
        ok = ok && shape[i] > 0 && out[i - 2] > 0;
    if (!ok) {
        if (nd == 3)
            return ct_error(CT_ERROR_VALUE, op,
                            "Input and output sizes should be greater than 0, but got input (W: %lld) output (W: "
                            "%lld)",
                            (long long)shape[2], (long long)out[0]);
        return ct_error(CT_ERROR_VALUE, op,
                        "Input and output sizes should be greater than 0, but got input (H: %lld, W: %lld) output "
                        "(H: %lld, W: %lld)",
                        (long long)shape[2], (long long)shape[3], (long long)out[0], (long long)out[1]);
    }
    return CT_OK;
}

/* ints: mode, align_corners, nsize, the output sizes; s: scale0, scale1. */
ct_status ct_kernel_upsample(ct_keyset ks, ct_call *call, void *ud) {
    (void)ks, (void)ud;
    const char *op = "upsample";
    const ct_tensor *t = call->in[0];
    if (ct_ix_check_devices(op, call))
        return ct_last_status();
    int mode = (int)call->ints[0], nsize = call->nints >= 3 ? (int)call->ints[2] : -1;
    bool align = call->ints[1] != 0;
    if (nsize != t->ndim - 2 || call->nints != 3 + nsize)
        return ct_error(CT_ERROR_VALUE, op, "output_size must have %d sizes for a %dD input, got %d", t->ndim - 2,
                        t->ndim, nsize);
    const int64_t *out_size = call->ints + 3;
    if (check(op, mode, align, t->shape, t->ndim, out_size, t->dtype))
        return ct_last_status();
    int64_t shape[4] = {t->shape[0], t->shape[1], out_size[0], nsize == 2 ? out_size[1] : 0};
    ct_tensor *out = ct_empty_impl(shape, t->ndim, t->dtype, t->device);
    ct_status st = ct_ix_set_out(call, 0, out);
    if (st || ct_ix_is_meta(out) || out->numel == 0)
        return st;
    double scales[2] = {ct_scalar_to_double(call->s[0]), ct_scalar_to_double(call->s[1])};
    ct_upsample_plan plan;
    if (plan_make(op, &plan, mode, align, t->shape, t->ndim, out_size, scales, t->dtype != CT_DTYPE_FLOAT64))
        return ct_last_status();
    ct_scope_begin();
    const ct_tensor *in = ct_contiguous_impl(t);
    st = in ? CT_CALL_STUB(upsample, op, out->device, out, in, &plan) : ct_last_status();
    ct_scope_end();
    plan_free(&plan);
    return st;
}

/* ints: mode, align_corners, ndim, the input's sizes; s: scale0, scale1. */
ct_status ct_kernel_upsample_backward(ct_keyset ks, ct_call *call, void *ud) {
    (void)ks, (void)ud;
    const char *op = "upsample_backward";
    const ct_tensor *g = call->in[0];
    if (ct_ix_check_devices(op, call))
        return ct_last_status();
    int mode = (int)call->ints[0], nd = call->nints >= 3 ? (int)call->ints[2] : -1;
    bool align = call->ints[1] != 0;
    if (nd < 0 || nd > CT_MAX_DIMS || call->nints != 3 + nd)
        return ct_error(CT_ERROR_VALUE, op, "malformed call: ndim %d, %d ints", nd, call->nints);
    const int64_t *ishape = call->ints + 3;
    bool same = g->ndim == nd && (nd == 3 || nd == 4) && g->shape[0] == ishape[0] && g->shape[1] == ishape[1];
    if (!same) {
        char a[96], b[96];
        return ct_error(CT_ERROR_VALUE, op, "grad_output of shape %s does not fit an input of shape %s",
                        ct_shape_str(g->shape, g->ndim, a, sizeof a), ct_shape_str(ishape, nd, b, sizeof b));
    }
    if (check(op, mode, align, ishape, nd, g->shape + 2, g->dtype))
        return ct_last_status();
    ct_tensor *gin = ct_empty_impl(ishape, nd, g->dtype, g->device);
    ct_status st = ct_ix_set_out(call, 0, gin);
    if (st || ct_ix_is_meta(gin) || gin->numel == 0)
        return st;
    double scales[2] = {ct_scalar_to_double(call->s[0]), ct_scalar_to_double(call->s[1])};
    ct_upsample_plan plan;
    if (plan_make(op, &plan, mode, align, ishape, nd, g->shape + 2, scales, g->dtype != CT_DTYPE_FLOAT64))
        return ct_last_status();
    ct_scope_begin();
    const ct_tensor *gc = ct_contiguous_impl(g);
    st = gc ? CT_CALL_STUB(upsample_backward, op, gin->device, gin, gc, &plan) : ct_last_status();
    ct_scope_end();
    plan_free(&plan);
    return st;
}
