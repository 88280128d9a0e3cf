/* Linear, Conv2d, Embedding, Dropout, GELU, Flatten, and the containers
 * Sequential, ModuleList and ModuleDict. Each layer prints as PyTorch's
 * (its extra_repr). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctorch.h"
#include "ctorch/ext.h"
#include "nn/module_internal.h"

/* The arguments every convolution module checks first, in PyTorch's words. */
ct_status ct_nn_conv_check(const char *op, const int64_t *kernel, int64_t in_channels, int64_t out_channels,
                           int64_t groups) {
    if (!kernel)
        return ct_error(CT_ERROR_NULL_ARGUMENT, op, "kernel_size is NULL");
    if (groups <= 0)
        return ct_error(CT_ERROR_VALUE, op, "groups must be a positive integer");
    if (in_channels % groups)
        return ct_error(CT_ERROR_VALUE, op, "in_channels must be divisible by groups");
    if (out_channels % groups)
        return ct_error(CT_ERROR_VALUE, op, "out_channels must be divisible by groups");
    return CT_OK;
}

ct_status ct_nn_layer_dtype(const char *op, ct_dtype *dtype) {
    if (*dtype == CT_DTYPE_UNDEFINED)
        *dtype = ct_get_default_dtype();
    if (!ct_dtype_is_floating(*dtype))
        return ct_error(CT_ERROR_TYPE, op, "parameters must have a floating-point dtype, got %s",
                        ct_dtype_name(*dtype));
    return CT_OK;
}

ct_module *ct_nn_module_with_ctx(const char *type, ct_module_forward_fn forward, size_t size) {
    void *ctx = NULL;
    if (size) {
        ctx = calloc(1, size);
        if (!ctx) {
            ct_error(CT_ERROR_OUT_OF_MEMORY, type, "out of memory");
            return NULL;
        }
    }
    return ct_module_new(type, forward, ctx, free);
}

ct_tensor *ct_nn_new_param(ct_module *m, const char *name, const int64_t *shape, int ndim, ct_dtype dtype) {
    ct_scope_begin();
    ct_tensor *t = ct_empty(shape, ndim, dtype, ct_get_default_device()); /* Note [Default device] */
    ct_status st = t ? ct_module_register_parameter(m, name, t) : ct_last_status();
    ct_scope_end(); /* the module holds the only reference now */
    return st == CT_OK ? ct_module_param(m, name) : NULL;
}

/* kaiming_uniform_(a=sqrt(5)) for the weight and U(-1/sqrt(fan_in), 1/sqrt(fan_in))
 * for the bias: nn.Linear's and nn.Conv2d's reset_parameters. */
ct_status ct_nn_reset_weight_bias(ct_tensor *w, ct_tensor *b) {
    ct_scope_begin();
    bool ok = ct_init_kaiming_uniform_(w, sqrt(5.0), CT_FAN_IN, CT_NONLINEARITY_LEAKY_RELU) != NULL;
    if (ok && b) {
        int64_t fan_in = 0;
        ct_init_fans(w, &fan_in, NULL);
        double bound = fan_in > 0 ? 1 / sqrt((double)fan_in) : 0;
        ok = ct_init_uniform_(b, -bound, bound) != NULL;
    }
    ct_scope_end();
    return ok ? CT_OK : ct_last_status();
}

/* Frees m and returns NULL (constructor failure paths). */
static ct_module *fail(ct_module *m) {
    ct_module_free(m);
    return NULL;
}

/* ------------------------------------------------------------------ Linear */

static ct_tensor *linear_forward(ct_module *m, const ct_tensor *x) {
    return ct_linear(x, ct_module_param(m, "weight"), ct_module_param(m, "bias"));
}

static int linear_repr(const ct_module *m, char *buf, size_t cap) {
    ct_tensor *w = ct_module_param(m, "weight");
    return snprintf(buf, cap, "in_features=%lld, out_features=%lld, bias=%s", (long long)ct_tensor_size(w, 1),
                    (long long)ct_tensor_size(w, 0), ct_module_param(m, "bias") ? "True" : "False");
}

ct_module *ct_nn_linear(int64_t in_features, int64_t out_features, bool bias, ct_dtype dtype) {
    if (in_features < 0 || out_features < 0) {
        ct_error(CT_ERROR_VALUE, "Linear", "in_features and out_features must be non-negative, got %lld and %lld",
                 (long long)in_features, (long long)out_features);
        return NULL;
    }
    if (ct_nn_layer_dtype("Linear", &dtype))
        return NULL;
    ct_module *m = ct_module_new("Linear", linear_forward, NULL, NULL);
    if (!m)
        return NULL;
    ct_module_set_extra_repr(m, linear_repr);
    ct_tensor *w = ct_nn_new_param(m, "weight", CT_SHAPE(out_features, in_features), dtype);
    ct_tensor *b = w && bias ? ct_nn_new_param(m, "bias", CT_SHAPE(out_features), dtype) : NULL;
    if (!w || (bias && !b) || ct_nn_reset_weight_bias(w, b))
        return fail(m);
    return m;
}

/* ------------------------------------------------------------------ Conv2d */

typedef struct conv_ctx {
    int64_t stride[2], padding[2], dilation[2], groups;
} conv_ctx;

static ct_tensor *conv2d_forward(ct_module *m, const ct_tensor *x) {
    conv_ctx *c = ct_module_ctx(m);
    return ct_conv2d(x, ct_module_param(m, "weight"), ct_module_param(m, "bias"), c->stride, c->padding, c->dilation,
                     c->groups);
}

static int conv2d_repr(const ct_module *m, char *buf, size_t cap) {
    const conv_ctx *c = ct_module_ctx(m);
    ct_tensor *w = ct_module_param(m, "weight");
    char s[320];
    int o = snprintf(s, sizeof s, "%lld, %lld, kernel_size=(%lld, %lld), stride=(%lld, %lld)",
                     (long long)(ct_tensor_size(w, 1) * c->groups), (long long)ct_tensor_size(w, 0),
                     (long long)ct_tensor_size(w, 2), (long long)ct_tensor_size(w, 3), (long long)c->stride[0],
                     (long long)c->stride[1]);
    if (c->padding[0] || c->padding[1])
        o += snprintf(s + o, sizeof s - (size_t)o, ", padding=(%lld, %lld)", (long long)c->padding[0],
                      (long long)c->padding[1]);
    if (c->dilation[0] != 1 || c->dilation[1] != 1)
        o += snprintf(s + o, sizeof s - (size_t)o, ", dilation=(%lld, %lld)", (long long)c->dilation[0],
                      (long long)c->dilation[1]);
    if (c->groups != 1)
        o += snprintf(s + o, sizeof s - (size_t)o, ", groups=%lld", (long long)c->groups);
    if (!ct_module_param(m, "bias"))
        snprintf(s + o, sizeof s - (size_t)o, ", bias=False");
    return snprintf(buf, cap, "%s", s);
}

ct_module *ct_nn_conv2d(int64_t in_channels, int64_t out_channels, const int64_t kernel[2], const int64_t stride[2],
                        const int64_t padding[2], const int64_t dilation[2], int64_t groups, bool bias,
                        ct_dtype dtype) {
    const char *op = "Conv2d";
    if (ct_nn_conv_check(op, kernel, in_channels, out_channels, groups))
        return NULL;
    if (kernel[0] <= 0 || kernel[1] <= 0 || in_channels <= 0 || out_channels <= 0) {
        ct_error(CT_ERROR_VALUE, op, "channels and kernel sizes must be positive");
        return NULL;
    }
    if (ct_nn_layer_dtype(op, &dtype))
        return NULL;
    ct_module *m = ct_nn_module_with_ctx(op, conv2d_forward, sizeof(conv_ctx));
    if (!m)
        return NULL;
    ct_module_set_extra_repr(m, conv2d_repr);
    conv_ctx *c = ct_module_ctx(m);
    for (int i = 0; i < 2; i++) {
        c->stride[i] = stride ? stride[i] : 1;
        c->padding[i] = padding ? padding[i] : 0;
        c->dilation[i] = dilation ? dilation[i] : 1;
    }
    c->groups = groups;
    ct_tensor *w = ct_nn_new_param(m, "weight", CT_SHAPE(out_channels, in_channels / groups, kernel[0], kernel[1]),
                                   dtype);
    ct_tensor *b = w && bias ? ct_nn_new_param(m, "bias", CT_SHAPE(out_channels), dtype) : NULL;
    if (!w || (bias && !b) || ct_nn_reset_weight_bias(w, b))
        return fail(m);
    return m;
}

/* ------------------------------------------------------------------ Embedding */

typedef struct emb_ctx {
    int64_t padding_idx;
} emb_ctx;

static ct_tensor *embedding_forward(ct_module *m, const ct_tensor *x) {
    return ct_embedding(x, ct_module_param(m, "weight"), ((emb_ctx *)ct_module_ctx(m))->padding_idx);
}

static int embedding_repr(const ct_module *m, char *buf, size_t cap) {
    ct_tensor *w = ct_module_param(m, "weight");
    int64_t pad = ((emb_ctx *)ct_module_ctx(m))->padding_idx;
    char p[48] = "";
    if (pad != CT_NO_PADDING_IDX)
        snprintf(p, sizeof p, ", padding_idx=%lld", (long long)pad);
    return snprintf(buf, cap, "%lld, %lld%s", (long long)ct_tensor_size(w, 0), (long long)ct_tensor_size(w, 1), p);
}

ct_module *ct_nn_embedding(int64_t num_embeddings, int64_t embedding_dim, int64_t padding_idx, ct_dtype dtype) {
    const char *op = "Embedding";
    if (num_embeddings < 0 || embedding_dim < 0) {
        ct_error(CT_ERROR_VALUE, op, "num_embeddings and embedding_dim must be non-negative");
        return NULL;
    }
    if (padding_idx != CT_NO_PADDING_IDX) {
        if (padding_idx >= num_embeddings || padding_idx < -num_embeddings) {
            ct_error(CT_ERROR_VALUE, op, "Padding_idx must be within num_embeddings");
            return NULL;
        }
        if (padding_idx < 0)
            padding_idx += num_embeddings;
    }
    if (ct_nn_layer_dtype(op, &dtype))
        return NULL;
    ct_module *m = ct_nn_module_with_ctx(op, embedding_forward, sizeof(emb_ctx));
    if (!m)
        return NULL;
    ct_module_set_extra_repr(m, embedding_repr);
    ((emb_ctx *)ct_module_ctx(m))->padding_idx = padding_idx;
    ct_tensor *w = ct_nn_new_param(m, "weight", CT_SHAPE(num_embeddings, embedding_dim), dtype);
    ct_scope_begin();
    bool ok = w && ct_init_normal_(w, 0, 1);
    if (ok && padding_idx != CT_NO_PADDING_IDX)
        ok = ct_init_zeros_(ct_select(w, 0, padding_idx)) != NULL;
    ct_scope_end();
    return ok ? m : fail(m);
}

/* ------------------------------------------------------------------ Dropout, activations */

typedef struct dropout_ctx {
    double p;
} dropout_ctx;

static ct_tensor *dropout_forward(ct_module *m, const ct_tensor *x) {
    return ct_dropout(x, ((dropout_ctx *)ct_module_ctx(m))->p, ct_module_is_training(m));
}

static int dropout_repr(const ct_module *m, char *buf, size_t cap) {
    char p[40];
    ct_nn_float_repr(((dropout_ctx *)ct_module_ctx(m))->p, p, sizeof p);
    return snprintf(buf, cap, "p=%s, inplace=False", p);
}

ct_module *ct_nn_dropout(double p) {
    if (!(p >= 0 && p <= 1)) {
        ct_error(CT_ERROR_VALUE, "Dropout", "dropout probability has to be between 0 and 1, but got %g", p);
        return NULL;
    }
    ct_module *m = ct_nn_module_with_ctx("Dropout", dropout_forward, sizeof(dropout_ctx));
    if (m) {
        ((dropout_ctx *)ct_module_ctx(m))->p = p;
        ct_module_set_extra_repr(m, dropout_repr);
    }
    return m;
}

ct_module *ct_nn_relu(void) { return ct_nn_activation("ReLU"); }
ct_module *ct_nn_tanh(void) { return ct_nn_activation("Tanh"); }

typedef struct gelu_ctx {
    int64_t approximate;
} gelu_ctx;

static ct_tensor *gelu_forward(ct_module *m, const ct_tensor *x) {
    return ct_gelu(x, ((gelu_ctx *)ct_module_ctx(m))->approximate);
}

static int gelu_repr(const ct_module *m, char *buf, size_t cap) {
    bool tanh = ((gelu_ctx *)ct_module_ctx(m))->approximate == CT_GELU_APPROXIMATE_TANH;
    return snprintf(buf, cap, "approximate='%s'", tanh ? "tanh" : "none");
}

ct_module *ct_nn_gelu(const char *approximate) {
    int64_t a;
    if (!approximate || !strcmp(approximate, "none"))
        a = CT_GELU_APPROXIMATE_NONE;
    else if (!strcmp(approximate, "tanh"))
        a = CT_GELU_APPROXIMATE_TANH;
    else {
        ct_error(CT_ERROR_VALUE, "GELU", "approximate argument must be either none or tanh.");
        return NULL;
    }
    ct_module *m = ct_nn_module_with_ctx("GELU", gelu_forward, sizeof(gelu_ctx));
    if (m) {
        ((gelu_ctx *)ct_module_ctx(m))->approximate = a;
        ct_module_set_extra_repr(m, gelu_repr);
    }
    return m;
}

/* ------------------------------------------------------------------ Flatten */

typedef struct flatten_ctx {
    int start, end;
} flatten_ctx;

static ct_tensor *flatten_forward(ct_module *m, const ct_tensor *x) {
    flatten_ctx *c = ct_module_ctx(m);
    return ct_flatten(x, c->start, c->end);
}

static int flatten_repr(const ct_module *m, char *buf, size_t cap) {
    flatten_ctx *c = ct_module_ctx(m);
    return snprintf(buf, cap, "start_dim=%d, end_dim=%d", c->start, c->end);
}

ct_module *ct_nn_flatten(int start_dim, int end_dim) {
    ct_module *m = ct_nn_module_with_ctx("Flatten", flatten_forward, sizeof(flatten_ctx));
    if (m) {
        ((flatten_ctx *)ct_module_ctx(m))->start = start_dim;
        ((flatten_ctx *)ct_module_ctx(m))->end = end_dim;
        ct_module_set_extra_repr(m, flatten_repr);
    }
    return m;
}

/* ------------------------------------------------------------------ containers */

/* Each child's outputs are the next child's inputs; all of the last child's are the
 * Sequential's (Note [Forward kinds and hooks] in module.c). */
static ct_status sequential_forward(ct_module *m, const ct_tensor *const *in, int nin, ct_tensor **out, int cap,
                                    int *nout) {
    int n = ct_module_num_children(m);
    if (n == 0) { /* the identity, as an empty nn.Sequential */
        if (nin > cap)
            return ct_error(CT_ERROR_VALUE, "Sequential", "%d inputs pass through, but there is room for %d", nin, cap);
        for (int i = 0; i < nin; i++)
            out[i] = ct_tensor_ref(in[i]);
        *nout = nin;
        return CT_OK;
    }
    ct_tensor *between[2][CT_MODULE_IO_CAP];
    const ct_tensor *const *cur = in;
    int ncur = nin;
    ct_status st = CT_OK;
    ct_scope_begin();
    for (int i = 0; i < n && !st; i++) {
        bool last = i == n - 1;
        ct_tensor **dst = last ? out : between[i % 2];
        st = ct_module_forward_multi(ct_module_child_at(m, i, NULL), cur, ncur, dst, last ? cap : CT_MODULE_IO_CAP,
                                     &ncur);
        cur = (const ct_tensor *const *)dst;
    }
    for (int i = 0; i < ncur && !st; i++)
        ct_keep(out[i]);
    ct_scope_end();
    *nout = st ? 0 : ncur;
    return st;
}

/* Adds modules[i] to m under names[i], or "0", "1", ... when names is not wanted.
 * Takes ownership of every module, also on error: with no m (its constructor failed),
 * a NULL module (a failed constructor: its error stays) or a NULL name, all are freed. */
static ct_module *fill(const char *op, ct_module *m, ct_module *const *modules, bool named, const char *const *names,
                       int n) {
    const char *bad = n < 0                      ? "n is negative"
                      : n > 0 && !modules        ? "modules is NULL"
                      : n > 0 && named && !names ? "names is NULL"
                                                 : NULL;
    if (bad) {
        ct_error(CT_ERROR_NULL_ARGUMENT, op, "%s", bad);
        m = fail(m);
        if (n < 0 || !modules)
            return NULL;
    }
    for (int i = 0; i < n && m; i++) {
        if (!modules[i] && ct_last_status() == CT_OK)
            ct_error(CT_ERROR_NULL_ARGUMENT, op, "module %d is NULL", i);
        else if (modules[i] && named && !names[i])
            ct_error(CT_ERROR_NULL_ARGUMENT, op, "name %d is NULL", i);
        if (!modules[i] || (named && !names[i]))
            m = fail(m);
    }
    for (int i = 0; i < n; i++) {
        char num[16];
        snprintf(num, sizeof num, "%d", i);
        if (!m)
            ct_module_free(modules[i]);
        else if (ct_module_add_child(m, named ? names[i] : num, modules[i]))
            m = fail(m);
    }
    return m;
}

ct_module *ct_nn_sequential(ct_module *const *modules, int n) {
    return fill("Sequential", ct_module_new_multi("Sequential", sequential_forward, NULL, NULL), modules, false, NULL,
                n);
}

ct_module *ct_nn_module_list(ct_module *const *modules, int n) {
    ct_module *m = ct_module_new("ModuleList", NULL, NULL, NULL);
    if (m)
        ct_nn_module_set_list_repr(m);
    return fill("ModuleList", m, modules, false, NULL, n);
}

ct_module *ct_nn_module_dict(const char *const *names, ct_module *const *modules, int n) {
    return fill("ModuleDict", ct_module_new("ModuleDict", NULL, NULL, NULL), modules, true, names, n);
}
