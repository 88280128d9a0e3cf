/* Conv1d, Conv3d, ConvTranspose1d/2d/3d, the pooling modules, the upsampling
 * modules (MaxPool1d/2d/3d, MaxPool2d with indices, MaxUnpool2d,
 * AvgPool1d/2d/3d, AdaptiveAvgPool1d/2d), PixelShuffle, PixelUnshuffle, Identity and
 * Unflatten. Each prints as PyTorch's (its extra_repr). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctorch.h"
#include "ctorch/ext.h"
#include "nn/module_internal.h"

/* Writes v (n numbers) as a Python tuple: "(3,)" or "(3, 2)". */
static int tuple_repr(const int64_t *v, int n, char *buf, size_t cap) {
    int o = snprintf(buf, cap, "(");
    for (int i = 0; i < n; i++)
        o += snprintf(buf + o, cap > (size_t)o ? cap - (size_t)o : 0, i ? ", %lld" : "%lld", (long long)v[i]);
    return o + snprintf(buf + o, cap > (size_t)o ? cap - (size_t)o : 0, n == 1 ? ",)" : ")");
}

/* A 2-D size as nn.MaxPool2d prints it: one number when both are equal. */
static int pair_or_int(const int64_t v[2], char *buf, size_t cap) {
    return v[0] == v[1] ? snprintf(buf, cap, "%lld", (long long)v[0]) : tuple_repr(v, 2, buf, cap);
}

static bool all_eq(const int64_t *v, int n, int64_t x) {
    for (int i = 0; i < n; i++)
        if (v[i] != x)
            return false;
    return true;
}

/* ------------------------------------------------------------------ convolutions */

static const char *const padding_modes[] = {"zeros", "reflect", "replicate", "circular"};

typedef struct conv_ctx {
    int nd; /* spatial dims: 1, 2 or 3 */
    bool transposed;
    int padding_mode; /* index into padding_modes */
    int64_t stride[3], padding[3], dilation[3], output_padding[3], groups;
} conv_ctx;

static ct_tensor *conv_forward(ct_module *m, const ct_tensor *x) {
    const conv_ctx *c = ct_module_ctx(m);
    ct_tensor *w = ct_module_param(m, "weight"), *b = ct_module_param(m, "bias");
    if (c->transposed)
        return c->nd == 1 ? ct_conv_transpose1d(x, w, b, c->stride[0], c->padding[0], c->output_padding[0], c->groups,
                                                c->dilation[0])
               : c->nd == 2 ? ct_conv_transpose2d(x, w, b, c->stride, c->padding, c->output_padding, c->groups,
                                                  c->dilation)
                            : ct_conv_transpose3d(x, w, b, c->stride, c->padding, c->output_padding, c->groups,
                                                  c->dilation);
    if (c->padding_mode == 0)
        return c->nd == 1 ? ct_conv1d(x, w, b, c->stride[0], c->padding[0], c->dilation[0], c->groups)
                          : ct_conv3d(x, w, b, c->stride, c->padding, c->dilation, c->groups);
    /* padding_mode other than zeros: F.pad in that mode, then no padding (as PyTorch) */
    ct_scope_begin();
    int64_t pad[6], zero[3] = {0, 0, 0};
    for (int i = 0; i < c->nd; i++)
        pad[2 * i] = pad[2 * i + 1] = c->padding[c->nd - 1 - i];
    const ct_tensor *xp = ct_pad(x, pad, 2 * c->nd, padding_modes[c->padding_mode], 0);
    ct_tensor *y = c->nd == 1 ? ct_conv1d(xp, w, b, c->stride[0], 0, c->dilation[0], c->groups)
                              : ct_conv3d(xp, w, b, c->stride, zero, c->dilation, c->groups);
    ct_keep(y);
    ct_scope_end();
    return y;
}

static int conv_repr(const ct_module *m, char *buf, size_t cap) {
    const conv_ctx *c = ct_module_ctx(m);
    ct_tensor *w = ct_module_param(m, "weight");
    int64_t in = ct_tensor_size(w, c->transposed ? 0 : 1) * (c->transposed ? 1 : c->groups);
    int64_t out = ct_tensor_size(w, c->transposed ? 1 : 0) * (c->transposed ? c->groups : 1);
    int64_t k[3] = {ct_tensor_size(w, 2), c->nd >= 2 ? ct_tensor_size(w, 3) : 0, c->nd == 3 ? ct_tensor_size(w, 4) : 0};
    char s[400], t[64];
    int o = snprintf(s, sizeof s, "%lld, %lld, kernel_size=", (long long)in, (long long)out);
    tuple_repr(k, c->nd, t, sizeof t);
    o += snprintf(s + o, sizeof s - (size_t)o, "%s, stride=", t);
    tuple_repr(c->stride, c->nd, t, sizeof t);
    o += snprintf(s + o, sizeof s - (size_t)o, "%s", t);
    const struct {
        const char *name;
        const int64_t *v;
        int64_t dflt;
    } opt[] = {{"padding", c->padding, 0}, {"dilation", c->dilation, 1}, {"output_padding", c->output_padding, 0}};
    for (int i = 0; i < 3; i++)
        if (!all_eq(opt[i].v, c->nd, opt[i].dflt)) {
            tuple_repr(opt[i].v, c->nd, t, sizeof t);
            o += snprintf(s + o, sizeof s - (size_t)o, ", %s=%s", opt[i].name, t);
        }
    if (c->groups != 1)
        o += snprintf(s + o, sizeof s - (size_t)o, ", groups=%lld", (long long)c->groups);
    if (!ct_module_param(m, "bias"))
        o += snprintf(s + o, sizeof s - (size_t)o, ", bias=False");
    if (c->padding_mode)
        snprintf(s + o, sizeof s - (size_t)o, ", padding_mode=%s", padding_modes[c->padding_mode]);
    return snprintf(buf, cap, "%s", s);
}

/* The shared constructor: arrays of nd numbers, NULL for the defaults. */
static ct_module *conv_module(const char *op, int nd, bool transposed, int64_t in_channels, int64_t out_channels,
                              const int64_t *kernel, const int64_t *stride, const int64_t *padding,
                              const int64_t *output_padding, const int64_t *dilation, int64_t groups, bool bias,
                              const char *padding_mode, ct_dtype dtype) {
    if (ct_nn_conv_check(op, kernel, in_channels, out_channels, groups))
        return NULL;
    bool pos = in_channels > 0 && out_channels > 0;
    for (int i = 0; i < nd; i++)
        pos = pos && kernel[i] > 0 && (!stride || stride[i] > 0) && (!dilation || dilation[i] > 0) &&
              (!padding || padding[i] >= 0) && (!output_padding || output_padding[i] >= 0);
    if (!pos) {
        ct_error(CT_ERROR_VALUE, op, "channels, kernel sizes, strides and dilations must be positive, paddings "
                 "non-negative");
        return NULL;
    }
    int mode = -1;
    for (int i = 0; i < 4; i++)
        if (!strcmp(padding_mode ? padding_mode : "zeros", padding_modes[i]))
            mode = i;
    if (mode < 0) {
        ct_error(CT_ERROR_VALUE, op, "padding_mode must be one of {'reflect', 'zeros', 'replicate', 'circular'}, "
                 "but got padding_mode='%s'", padding_mode);
        return NULL;
    }
    if (transposed && mode) {
        ct_error(CT_ERROR_VALUE, op, "Only \"zeros\" padding mode is supported for %s", op);
        return NULL;
    }
    if (ct_nn_layer_dtype(op, &dtype))
        return NULL;
    ct_module *m = ct_nn_module_with_ctx(op, conv_forward, sizeof(conv_ctx));
    if (!m)
        return NULL;
    ct_module_set_extra_repr(m, conv_repr);
    conv_ctx *c = ct_module_ctx(m);
    c->nd = nd;
    c->transposed = transposed;
    c->padding_mode = mode;
    c->groups = groups;
    int64_t shape[5];
    shape[0] = transposed ? in_channels : out_channels;
    shape[1] = transposed ? out_channels / groups : in_channels / groups;
    for (int i = 0; i < 3; i++) {
        c->stride[i] = stride && i < nd ? stride[i] : 1;
        c->padding[i] = padding && i < nd ? padding[i] : 0;
        c->output_padding[i] = output_padding && i < nd ? output_padding[i] : 0;
        c->dilation[i] = dilation && i < nd ? dilation[i] : 1;
        if (i < nd)
            shape[2 + i] = kernel[i];
    }
    ct_tensor *w = ct_nn_new_param(m, "weight", shape, 2 + nd, dtype);
    ct_tensor *b = w && bias ? ct_nn_new_param(m, "bias", CT_SHAPE(out_channels), dtype) : NULL;
    if (!w || (bias && !b) || ct_nn_reset_weight_bias(w, b)) {
        ct_module_free(m);
        return NULL;
    }
    return m;
}

ct_module *ct_nn_conv1d(int64_t in_channels, int64_t out_channels, int64_t kernel_size, int64_t stride,
                        int64_t padding, int64_t dilation, int64_t groups, bool bias, const char *padding_mode,
                        ct_dtype dtype) {
    return conv_module("Conv1d", 1, false, in_channels, out_channels, &kernel_size, &stride, &padding, NULL,
                       &dilation, groups, bias, padding_mode, dtype);
}

ct_module *ct_nn_conv3d(int64_t in_channels, int64_t out_channels, const int64_t kernel_size[3],
                        const int64_t stride[3], const int64_t padding[3], const int64_t dilation[3], int64_t groups,
                        bool bias, const char *padding_mode, ct_dtype dtype) {
    return conv_module("Conv3d", 3, false, in_channels, out_channels, kernel_size, stride, padding, NULL, dilation,
                       groups, bias, padding_mode, dtype);
}

ct_module *ct_nn_conv_transpose1d(int64_t in_channels, int64_t out_channels, int64_t kernel_size, int64_t stride,
                                  int64_t padding, int64_t output_padding, int64_t groups, bool bias,
                                  int64_t dilation, ct_dtype dtype) {
    return conv_module("ConvTranspose1d", 1, true, in_channels, out_channels, &kernel_size, &stride, &padding,
                       &output_padding, &dilation, groups, bias, NULL, dtype);
}

ct_module *ct_nn_conv_transpose3d(int64_t in_channels, int64_t out_channels, const int64_t kernel_size[3],
                                  const int64_t stride[3], const int64_t padding[3], const int64_t output_padding[3],
                                  int64_t groups, bool bias, const int64_t dilation[3], ct_dtype dtype) {
    return conv_module("ConvTranspose3d", 3, true, in_channels, out_channels, kernel_size, stride, padding,
                       output_padding, dilation, groups, bias, NULL, dtype);
}

ct_module *ct_nn_conv_transpose2d(int64_t in_channels, int64_t out_channels, const int64_t kernel_size[2],
                                  const int64_t stride[2], const int64_t padding[2], const int64_t output_padding[2],
                                  int64_t groups, bool bias, const int64_t dilation[2], ct_dtype dtype) {
    return conv_module("ConvTranspose2d", 2, true, in_channels, out_channels, kernel_size, stride, padding,
                       output_padding, dilation, groups, bias, NULL, dtype);
}

/* ------------------------------------------------------------------ pooling */

enum { P_MAX, P_AVG, P_ADAPTIVE_AVG, P_ADAPTIVE_MAX };

typedef struct pool_ctx {
    int kind, nd;
    int64_t kernel[2], stride[2], padding[2], dilation[2], divisor_override;
    bool ceil_mode, count_include_pad;
} pool_ctx;

static ct_tensor *pool_forward(ct_module *m, const ct_tensor *x) {
    const pool_ctx *c = ct_module_ctx(m);
    if (c->nd == 1)
        switch (c->kind) {
        case P_MAX: return ct_max_pool1d(x, c->kernel[0], c->stride[0], c->padding[0], c->dilation[0], c->ceil_mode);
        case P_AVG:
            return ct_avg_pool1d(x, c->kernel[0], c->stride[0], c->padding[0], c->ceil_mode, c->count_include_pad);
        case P_ADAPTIVE_AVG: return ct_adaptive_avg_pool1d(x, c->kernel[0]);
        default: return ct_adaptive_max_pool1d(x, c->kernel[0]);
        }
    switch (c->kind) {
    case P_MAX: return ct_max_pool2d(x, c->kernel, c->stride, c->padding, c->dilation, c->ceil_mode, NULL);
    case P_AVG:
        return ct_avg_pool2d(x, c->kernel, c->stride, c->padding, c->ceil_mode, c->count_include_pad,
                             c->divisor_override);
    case P_ADAPTIVE_MAX: return ct_adaptive_max_pool2d(x, c->kernel); /* -1 (None) handled there */
    default: {
        /* AdaptiveAvgPool2d((None, 4)): None keeps the input's size */
        int64_t o[2] = {c->kernel[0], c->kernel[1]};
        int nd = x ? ct_tensor_dim(x) : 0;
        for (int i = 0; i < 2 && nd >= 2; i++)
            if (o[i] < 0)
                o[i] = ct_tensor_size(x, nd - 2 + i);
        return ct_adaptive_avg_pool2d(x, o);
    }
    }
}

static int pool_repr(const ct_module *m, char *buf, size_t cap) {
    const pool_ctx *c = ct_module_ctx(m);
    char k[48], s[48], p[48], d[48];
    if (c->kind >= P_ADAPTIVE_AVG) {
        if (c->nd == 1 || c->kernel[0] == c->kernel[1])
            return snprintf(buf, cap, "output_size=%lld", (long long)c->kernel[0]);
        char a[24], b[24];
        snprintf(a, sizeof a, c->kernel[0] < 0 ? "None" : "%lld", (long long)c->kernel[0]);
        snprintf(b, sizeof b, c->kernel[1] < 0 ? "None" : "%lld", (long long)c->kernel[1]);
        return snprintf(buf, cap, "output_size=(%s, %s)", a, b);
    }
    if (c->kind == P_AVG && c->nd == 1) { /* AvgPool1d keeps its sizes as 1-tuples */
        tuple_repr(c->kernel, 1, k, sizeof k);
        tuple_repr(c->stride, 1, s, sizeof s);
        tuple_repr(c->padding, 1, p, sizeof p);
        return snprintf(buf, cap, "kernel_size=%s, stride=%s, padding=%s", k, s, p);
    }
    if (c->nd == 1) {
        snprintf(k, sizeof k, "%lld", (long long)c->kernel[0]);
        snprintf(s, sizeof s, "%lld", (long long)c->stride[0]);
        snprintf(p, sizeof p, "%lld", (long long)c->padding[0]);
        snprintf(d, sizeof d, "%lld", (long long)c->dilation[0]);
    } else {
        pair_or_int(c->kernel, k, sizeof k);
        pair_or_int(c->stride, s, sizeof s);
        pair_or_int(c->padding, p, sizeof p);
        pair_or_int(c->dilation, d, sizeof d);
    }
    if (c->kind == P_AVG)
        return snprintf(buf, cap, "kernel_size=%s, stride=%s, padding=%s", k, s, p);
    return snprintf(buf, cap, "kernel_size=%s, stride=%s, padding=%s, dilation=%s, ceil_mode=%s", k, s, p, d,
                    c->ceil_mode ? "True" : "False");
}

static const char *const pool_names[2][4] = {
    {"MaxPool1d", "AvgPool1d", "AdaptiveAvgPool1d", "AdaptiveMaxPool1d"},
    {"MaxPool2d", "AvgPool2d", "AdaptiveAvgPool2d", "AdaptiveMaxPool2d"},
};

/* A pool's kernel_size of nd sizes: given, each above zero. */
static ct_status kernel_check(const char *op, const int64_t *kernel_size, int nd) {
    if (!kernel_size)
        return ct_error(CT_ERROR_NULL_ARGUMENT, op, "kernel_size is NULL");
    for (int i = 0; i < nd; i++)
        if (kernel_size[i] <= 0)
            return ct_error(CT_ERROR_VALUE, op, "kernel_size must be greater than zero");
    return CT_OK;
}

/* kernel: nd sizes (the output size for the adaptive pools); stride NULL means the
 * kernel, padding NULL zeros, dilation NULL ones. */
static ct_module *pool_module(int kind, int nd, const int64_t *kernel, const int64_t *stride, const int64_t *padding,
                              const int64_t *dilation, bool ceil_mode, bool count_include_pad,
                              int64_t divisor_override) {
    const char *op = pool_names[nd - 1][kind];
    if (!kernel) {
        ct_error(CT_ERROR_NULL_ARGUMENT, op, kind >= P_ADAPTIVE_AVG ? "output_size is NULL" : "kernel_size is NULL");
        return NULL;
    }
    for (int i = 0; i < nd; i++)
        if (kind >= P_ADAPTIVE_AVG ? kernel[i] < -1 : kernel[i] <= 0) {
            ct_error(CT_ERROR_VALUE, op, kind >= P_ADAPTIVE_AVG ? "output_size must be non-negative (-1: None)"
                                                                 : "kernel_size must be greater than zero");
            return NULL;
        }
    ct_module *m = ct_nn_module_with_ctx(op, pool_forward, sizeof(pool_ctx));
    if (!m)
        return NULL;
    ct_module_set_extra_repr(m, pool_repr);
    pool_ctx *c = ct_module_ctx(m);
    c->kind = kind;
    c->nd = nd;
    c->ceil_mode = ceil_mode;
    c->count_include_pad = count_include_pad;
    c->divisor_override = divisor_override;
    for (int i = 0; i < nd; i++) {
        c->kernel[i] = kernel[i];
        c->stride[i] = stride && stride[i] ? stride[i] : kernel[i];
        c->padding[i] = padding ? padding[i] : 0;
        c->dilation[i] = dilation ? dilation[i] : 1;
    }
    return m;
}

ct_module *ct_nn_max_pool1d(int64_t kernel_size, int64_t stride, int64_t padding, int64_t dilation, bool ceil_mode) {
    return pool_module(P_MAX, 1, &kernel_size, &stride, &padding, &dilation, ceil_mode, false, 0);
}

ct_module *ct_nn_max_pool2d(const int64_t kernel[2], const int64_t stride[2], const int64_t padding[2]) {
    return pool_module(P_MAX, 2, kernel, stride, padding, NULL, false, false, 0);
}

ct_module *ct_nn_max_pool2d_ex(const int64_t kernel_size[2], const int64_t stride[2], const int64_t padding[2],
                               const int64_t dilation[2], bool ceil_mode) {
    return pool_module(P_MAX, 2, kernel_size, stride, padding, dilation, ceil_mode, false, 0);
}

ct_module *ct_nn_avg_pool1d(int64_t kernel_size, int64_t stride, int64_t padding, bool ceil_mode,
                            bool count_include_pad) {
    return pool_module(P_AVG, 1, &kernel_size, &stride, &padding, NULL, ceil_mode, count_include_pad, 0);
}

ct_module *ct_nn_avg_pool2d(const int64_t kernel_size[2], const int64_t stride[2], const int64_t padding[2],
                            bool ceil_mode, bool count_include_pad, int64_t divisor_override) {
    return pool_module(P_AVG, 2, kernel_size, stride, padding, NULL, ceil_mode, count_include_pad, divisor_override);
}

ct_module *ct_nn_adaptive_avg_pool1d(int64_t output_size) {
    return pool_module(P_ADAPTIVE_AVG, 1, &output_size, NULL, NULL, NULL, false, false, 0);
}

ct_module *ct_nn_adaptive_avg_pool2d(const int64_t output_size[2]) {
    return pool_module(P_ADAPTIVE_AVG, 2, output_size, NULL, NULL, NULL, false, false, 0);
}

ct_module *ct_nn_adaptive_max_pool1d(int64_t output_size) {
    return pool_module(P_ADAPTIVE_MAX, 1, &output_size, NULL, NULL, NULL, false, false, 0);
}

ct_module *ct_nn_adaptive_max_pool2d(const int64_t output_size[2]) {
    return pool_module(P_ADAPTIVE_MAX, 2, output_size, NULL, NULL, NULL, false, false, 0);
}

/* nn.MaxPool3d: its own context, sizes printed as one number when all three are equal */
typedef struct pool3_ctx {
    int64_t kernel[3], stride[3], padding[3], dilation[3];
    bool ceil_mode;
} pool3_ctx;

static ct_tensor *maxpool3d_forward(ct_module *m, const ct_tensor *x) {
    const pool3_ctx *c = ct_module_ctx(m);
    return ct_max_pool3d(x, c->kernel, c->stride, c->padding, c->dilation, c->ceil_mode);
}

static int triple_or_int(const int64_t v[3], char *buf, size_t cap) {
    return v[0] == v[1] && v[1] == v[2] ? snprintf(buf, cap, "%lld", (long long)v[0]) : tuple_repr(v, 3, buf, cap);
}

static int maxpool3d_repr(const ct_module *m, char *buf, size_t cap) {
    const pool3_ctx *c = ct_module_ctx(m);
    char k[64], s[64], p[64], d[64];
    triple_or_int(c->kernel, k, sizeof k);
    triple_or_int(c->stride, s, sizeof s);
    triple_or_int(c->padding, p, sizeof p);
    triple_or_int(c->dilation, d, sizeof d);
    return snprintf(buf, cap, "kernel_size=%s, stride=%s, padding=%s, dilation=%s, ceil_mode=%s", k, s, p, d,
                    c->ceil_mode ? "True" : "False");
}

/* A 3-d pool module whose context starts with a pool3_ctx (ctx_size bytes in all):
 * kernel_size checked, stride 0 or NULL meaning the kernel, padding NULL 0, dilation
 * NULL 1. */
static ct_module *pool3_module(const char *op, ct_module_forward_fn forward, size_t ctx_size,
                               ct_module_extra_repr_fn repr, const int64_t kernel_size[3],
                               const int64_t stride[3], const int64_t padding[3], const int64_t dilation[3],
                               bool ceil_mode) {
    if (kernel_check(op, kernel_size, 3))
        return NULL;
    ct_module *m = ct_nn_module_with_ctx(op, forward, ctx_size);
    if (!m)
        return NULL;
    ct_module_set_extra_repr(m, repr);
    pool3_ctx *c = ct_module_ctx(m);
    c->ceil_mode = ceil_mode;
    for (int i = 0; i < 3; i++) {
        c->kernel[i] = kernel_size[i];
        c->stride[i] = stride && stride[i] ? stride[i] : kernel_size[i];
        c->padding[i] = padding ? padding[i] : 0;
        c->dilation[i] = dilation ? dilation[i] : 1;
    }
    return m;
}

ct_module *ct_nn_max_pool3d(const int64_t kernel_size[3], const int64_t stride[3], const int64_t padding[3],
                            const int64_t dilation[3], bool ceil_mode) {
    return pool3_module("MaxPool3d", maxpool3d_forward, sizeof(pool3_ctx), maxpool3d_repr, kernel_size, stride,
                        padding, dilation, ceil_mode);
}

/* nn.MaxPool2d(return_indices=True): a multi module over pool_ctx. */
static ct_status maxpool2d_indices_forward(ct_module *m, const ct_tensor *const *in, int nin, ct_tensor **out,
                                           int cap, int *nout) {
    const pool_ctx *c = ct_module_ctx(m);
    if (nin != 1)
        return ct_error(CT_ERROR_VALUE, "MaxPool2d", "forward takes 1 input, got %d", nin);
    ct_tensor *idx = NULL, *y = ct_max_pool2d(in[0], c->kernel, c->stride, c->padding, c->dilation, c->ceil_mode, &idx);
    if (!y)
        return ct_last_status();
    out[0] = y, out[1] = idx;
    *nout = 2;
    return CT_OK;
}

ct_module *ct_nn_max_pool2d_with_indices(const int64_t kernel_size[2], const int64_t stride[2],
                                         const int64_t padding[2], const int64_t dilation[2], bool ceil_mode) {
    const char *op = "MaxPool2d";
    if (kernel_check(op, kernel_size, 2))
        return NULL;
    pool_ctx *c = calloc(1, sizeof *c);
    if (!c) {
        ct_error(CT_ERROR_OUT_OF_MEMORY, op, "out of memory");
        return NULL;
    }
    ct_module *m = ct_module_new_multi(op, maxpool2d_indices_forward, c, free); /* frees c on failure */
    if (!m)
        return NULL;
    ct_module_set_extra_repr(m, pool_repr);
    c->kind = P_MAX;
    c->nd = 2;
    c->ceil_mode = ceil_mode;
    for (int i = 0; i < 2; i++) {
        c->kernel[i] = kernel_size[i];
        c->stride[i] = stride && stride[i] ? stride[i] : kernel_size[i];
        c->padding[i] = padding ? padding[i] : 0;
        c->dilation[i] = dilation ? dilation[i] : 1;
    }
    return m;
}

/* nn.MaxUnpool2d: a multi module (input, indices) -> output over pool_ctx's sizes. */
#define UNPOOL_MAGIC 0x556e706f6f6c3264ULL

typedef struct unpool_ctx {
    uint64_t magic;
    int64_t kernel[2], stride[2], padding[2];
} unpool_ctx;

static ct_status unpool_forward(ct_module *m, const ct_tensor *const *in, int nin, ct_tensor **out, int cap,
                                int *nout) {
    const unpool_ctx *c = ct_module_ctx(m);
    if (nin != 2)
        return ct_error(CT_ERROR_VALUE, "MaxUnpool2d", "forward takes 2 inputs (input, indices), got %d", nin);
    if (!(out[0] = ct_max_unpool2d(in[0], in[1], c->kernel, c->stride, c->padding, NULL, 0)))
        return ct_last_status();
    *nout = 1;
    return CT_OK;
}

static int unpool_repr(const ct_module *m, char *buf, size_t cap) {
    const unpool_ctx *c = ct_module_ctx(m);
    char k[48], s[48], p[48];
    tuple_repr(c->kernel, 2, k, sizeof k);
    tuple_repr(c->stride, 2, s, sizeof s);
    tuple_repr(c->padding, 2, p, sizeof p);
    return snprintf(buf, cap, "kernel_size=%s, stride=%s, padding=%s", k, s, p);
}

ct_module *ct_nn_max_unpool2d(const int64_t kernel_size[2], const int64_t stride[2], const int64_t padding[2]) {
    const char *op = "MaxUnpool2d";
    if (!kernel_size) {
        ct_error(CT_ERROR_NULL_ARGUMENT, op, "kernel_size is NULL");
        return NULL;
    }
    for (int i = 0; i < 2; i++)
        if (kernel_size[i] <= 0 || (stride && stride[i] < 0) || (padding && padding[i] < 0)) {
            ct_error(CT_ERROR_VALUE, op, "kernel_size must be greater than zero, stride and padding non-negative");
            return NULL;
        }
    unpool_ctx *c = calloc(1, sizeof *c);
    if (!c) {
        ct_error(CT_ERROR_OUT_OF_MEMORY, op, "out of memory");
        return NULL;
    }
    ct_module *m = ct_module_new_multi(op, unpool_forward, c, free); /* frees c on failure */
    if (!m)
        return NULL;
    ct_module_set_extra_repr(m, unpool_repr);
    c->magic = UNPOOL_MAGIC;
    for (int i = 0; i < 2; i++) {
        c->kernel[i] = kernel_size[i];
        c->stride[i] = stride && stride[i] ? stride[i] : kernel_size[i];
        c->padding[i] = padding ? padding[i] : 0;
    }
    return m;
}

ct_tensor *ct_nn_max_unpool2d_forward(ct_module *m, const ct_tensor *input, const ct_tensor *indices,
                                      const int64_t *output_size, int n_output_size) {
    const char *fn = "max_unpool2d_forward";
    if (!m) {
        ct_error(CT_ERROR_NULL_ARGUMENT, fn, "module is NULL");
        return NULL;
    }
    const unpool_ctx *c = strcmp(ct_module_type(m), "MaxUnpool2d") ? NULL : ct_module_ctx(m);
    if (!c || c->magic != UNPOOL_MAGIC) {
        ct_error(CT_ERROR_VALUE, fn, "expected a MaxUnpool2d module made by ct_nn_max_unpool2d, got %s",
                 ct_module_type(m));
        return NULL;
    }
    if (!output_size) { /* hooks run as for any call */
        ct_tensor *out[CT_MODULE_IO_CAP];
        int n = 0;
        const ct_tensor *in[2] = {input, indices};
        if (!input || !indices) {
            ct_error(CT_ERROR_NULL_ARGUMENT, fn, "input and indices must not be NULL");
            return NULL;
        }
        return ct_module_forward_multi(m, in, 2, out, CT_MODULE_IO_CAP, &n) == CT_OK ? out[0] : NULL;
    }
    return ct_max_unpool2d(input, indices, c->kernel, c->stride, c->padding, output_size, n_output_size);
}

/* nn.AvgPool3d: pool3_ctx's sizes (dilation unused) and its own flags. */
typedef struct avgpool3_ctx {
    pool3_ctx p;
    bool count_include_pad;
    int64_t divisor_override;
} avgpool3_ctx;

static ct_tensor *avgpool3d_forward(ct_module *m, const ct_tensor *x) {
    const avgpool3_ctx *c = ct_module_ctx(m);
    return ct_avg_pool3d(x, c->p.kernel, c->p.stride, c->p.padding, c->p.ceil_mode, c->count_include_pad,
                         c->divisor_override);
}

static int avgpool3d_repr(const ct_module *m, char *buf, size_t cap) {
    const avgpool3_ctx *c = ct_module_ctx(m);
    char k[64], s[64], p[64];
    triple_or_int(c->p.kernel, k, sizeof k);
    triple_or_int(c->p.stride, s, sizeof s);
    triple_or_int(c->p.padding, p, sizeof p);
    return snprintf(buf, cap, "kernel_size=%s, stride=%s, padding=%s", k, s, p);
}

ct_module *ct_nn_avg_pool3d(const int64_t kernel_size[3], const int64_t stride[3], const int64_t padding[3],
                            bool ceil_mode, bool count_include_pad, int64_t divisor_override) {
    ct_module *m = pool3_module("AvgPool3d", avgpool3d_forward, sizeof(avgpool3_ctx), avgpool3d_repr, kernel_size,
                                stride, padding, NULL, ceil_mode);
    if (!m)
        return NULL;
    avgpool3_ctx *c = ct_module_ctx(m);
    c->count_include_pad = count_include_pad;
    c->divisor_override = divisor_override;
    return m;
}

/* ------------------------------------------------------------------ PixelShuffle, Identity, Unflatten */

typedef struct shape_ctx {
    int64_t factor;
    int dim, n;
    int64_t sizes[CT_MAX_DIMS];
} shape_ctx;

static ct_tensor *pixel_shuffle_forward(ct_module *m, const ct_tensor *x) {
    return ct_pixel_shuffle(x, ((shape_ctx *)ct_module_ctx(m))->factor);
}
static ct_tensor *pixel_unshuffle_forward(ct_module *m, const ct_tensor *x) {
    return ct_pixel_unshuffle(x, ((shape_ctx *)ct_module_ctx(m))->factor);
}
static int pixel_shuffle_repr(const ct_module *m, char *buf, size_t cap) {
    return snprintf(buf, cap, "upscale_factor=%lld", (long long)((shape_ctx *)ct_module_ctx(m))->factor);
}
static int pixel_unshuffle_repr(const ct_module *m, char *buf, size_t cap) {
    return snprintf(buf, cap, "downscale_factor=%lld", (long long)((shape_ctx *)ct_module_ctx(m))->factor);
}

static ct_module *shuffle_module(bool up, int64_t factor) {
    ct_module *m = ct_nn_module_with_ctx(up ? "PixelShuffle" : "PixelUnshuffle",
                                         up ? pixel_shuffle_forward : pixel_unshuffle_forward, sizeof(shape_ctx));
    if (m) {
        ((shape_ctx *)ct_module_ctx(m))->factor = factor;
        ct_module_set_extra_repr(m, up ? pixel_shuffle_repr : pixel_unshuffle_repr);
    }
    return m;
}

ct_module *ct_nn_pixel_shuffle(int64_t upscale_factor) { return shuffle_module(true, upscale_factor); }
ct_module *ct_nn_pixel_unshuffle(int64_t downscale_factor) { return shuffle_module(false, downscale_factor); }

/* nn.Identity: its input, as a new reference (any number of inputs pass through). */
static ct_status identity_forward(ct_module *m, const ct_tensor *const *in, int nin, ct_tensor **out, int cap,
                                  int *nout) {
    (void)m;
    if (nin > cap)
        return ct_error(CT_ERROR_VALUE, "Identity", "%d inputs pass through, but there is room for %d", nin, cap);
    for (int i = 0; i < nin; i++)
        out[i] = ct_tensor_ref(in[i]);
    *nout = nin;
    return CT_OK;
}

ct_module *ct_nn_identity(void) { return ct_module_new_multi("Identity", identity_forward, NULL, NULL); }

static ct_tensor *unflatten_forward(ct_module *m, const ct_tensor *x) {
    const shape_ctx *c = ct_module_ctx(m);
    return ct_unflatten(x, c->dim, c->sizes, c->n);
}

static int unflatten_repr(const ct_module *m, char *buf, size_t cap) {
    const shape_ctx *c = ct_module_ctx(m);
    char t[200];
    tuple_repr(c->sizes, c->n, t, sizeof t);
    return snprintf(buf, cap, "dim=%d, unflattened_size=%s", c->dim, t);
}

ct_module *ct_nn_unflatten(int dim, const int64_t *unflattened_size, int n) {
    if (!unflattened_size || n < 1 || n > CT_MAX_DIMS) {
        ct_error(CT_ERROR_VALUE, "Unflatten", "unflattened_size must have between 1 and %d sizes", CT_MAX_DIMS);
        return NULL;
    }
    ct_module *m = ct_nn_module_with_ctx("Unflatten", unflatten_forward, sizeof(shape_ctx));
    if (m) {
        shape_ctx *c = ct_module_ctx(m);
        c->dim = dim;
        c->n = n;
        memcpy(c->sizes, unflattened_size, sizeof(int64_t) * (size_t)n);
        ct_module_set_extra_repr(m, unflatten_repr);
    }
    return m;
}

/* ------------------------------------------------------------------ Upsample */

typedef struct upsample_ctx {
    int n;
    bool has_size, align_corners;
    int64_t size[3];
    double scale[3];
    char mode[16];
} upsample_ctx;

static ct_tensor *upsample_forward(ct_module *m, const ct_tensor *x) {
    const upsample_ctx *c = ct_module_ctx(m);
    return ct_interpolate(x, c->has_size ? c->size : NULL, c->has_size ? NULL : c->scale, c->n, c->mode,
                          c->align_corners);
}

/* "scale_factor=2.0, mode='nearest'" or "size=(3, 4), mode='bilinear'": one number when
 * it was given as one (n = 1), as PyTorch prints an int or float argument. */
static int upsample_repr(const ct_module *m, char *buf, size_t cap) {
    const upsample_ctx *c = ct_module_ctx(m);
    char v[120];
    if (c->has_size) {
        if (c->n == 1)
            snprintf(v, sizeof v, "%lld", (long long)c->size[0]);
        else
            tuple_repr(c->size, c->n, v, sizeof v);
    } else {
        size_t k = 0;
        for (int i = 0; i < c->n; i++) {
            char a[40];
            ct_nn_float_repr(c->scale[i], a, sizeof a);
            k += (size_t)snprintf(v + k, sizeof v - k, "%s%s%s", c->n > 1 && i == 0 ? "(" : "", i ? ", " : "", a);
            if (k >= sizeof v)
                break;
        }
        if (c->n > 1 && k < sizeof v)
            snprintf(v + k, sizeof v - k, ")");
    }
    return snprintf(buf, cap, "%s=%s, mode='%s'", c->has_size ? "size" : "scale_factor", v, c->mode);
}

static ct_module *upsample_module(const char *op, const int64_t *size, const double *scale_factor, int n,
                                  const char *mode, bool align_corners) {
    if (!mode)
        mode = "nearest";
    static const char *const modes[] = {"nearest", "linear", "bilinear", "bicubic", "nearest-exact", "trilinear"};
    bool known = false;
    for (int i = 0; i < 6; i++)
        known = known || !strcmp(mode, modes[i]);
    if (!known) {
        ct_error(CT_ERROR_NOT_IMPLEMENTED, op, "unknown mode '%s' (nearest, linear, bilinear, bicubic, trilinear or "
                 "nearest-exact)", mode);
        return NULL;
    }
    if ((size != NULL) == (scale_factor != NULL)) {
        ct_error(CT_ERROR_VALUE, op, size ? "only one of size or scale_factor should be defined"
                                          : "either size or scale_factor should be defined");
        return NULL;
    }
    if (n < 1 || n > 3) {
        ct_error(CT_ERROR_VALUE, op, "size or scale_factor must have 1 to 3 values, got %d", n);
        return NULL;
    }
    ct_module *m = ct_nn_module_with_ctx(op, upsample_forward, sizeof(upsample_ctx));
    if (!m)
        return NULL;
    upsample_ctx *c = ct_module_ctx(m);
    c->n = n;
    c->has_size = size != NULL;
    c->align_corners = align_corners;
    snprintf(c->mode, sizeof c->mode, "%s", mode);
    for (int i = 0; i < n; i++) {
        if (size)
            c->size[i] = size[i];
        else
            c->scale[i] = scale_factor[i];
    }
    ct_module_set_extra_repr(m, upsample_repr);
    return m;
}

ct_module *ct_nn_upsample(const int64_t *size, const double *scale_factor, int n, const char *mode,
                          bool align_corners) {
    return upsample_module("Upsample", size, scale_factor, n, mode, align_corners);
}

/* nn.UpsamplingNearest2d and nn.UpsamplingBilinear2d: Upsample with mode nearest, and
 * bilinear with align_corners=True. */
ct_module *ct_nn_upsampling_nearest2d(const int64_t *size, const double *scale_factor, int n) {
    return upsample_module("UpsamplingNearest2d", size, scale_factor, n, "nearest", false);
}

ct_module *ct_nn_upsampling_bilinear2d(const int64_t *size, const double *scale_factor, int n) {
    return upsample_module("UpsamplingBilinear2d", size, scale_factor, n, "bilinear", true);
}
