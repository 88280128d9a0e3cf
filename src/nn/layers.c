/* Linear, Conv2d, Embedding, Dropout, activations, Flatten, MaxPool2d, Sequential. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ctorch.h"
#include "ctorch/ext.h"
#include "nn/module_internal.h"

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
static ct_status reset_weight_bias(ct_tensor *w, ct_tensor *b) {
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
    ct_tensor *w = ct_nn_new_param(m, "weight", CT_SHAPE(out_features, in_features), dtype);
    ct_tensor *b = w && bias ? ct_nn_new_param(m, "bias", CT_SHAPE(out_features), dtype) : NULL;
    if (!w || (bias && !b) || reset_weight_bias(w, b))
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

ct_module *ct_nn_conv2d(int64_t in_channels, int64_t out_channels, const int64_t kernel[2], const int64_t stride[2],
                        const int64_t padding[2], const int64_t dilation[2], int64_t groups, bool bias,
                        ct_dtype dtype) {
    const char *op = "Conv2d";
    if (!kernel) {
        ct_error(CT_ERROR_NULL_ARGUMENT, op, "kernel_size is NULL");
        return NULL;
    }
    if (groups <= 0) {
        ct_error(CT_ERROR_VALUE, op, "groups must be a positive integer");
        return NULL;
    }
    if (in_channels % groups) {
        ct_error(CT_ERROR_VALUE, op, "in_channels must be divisible by groups");
        return NULL;
    }
    if (out_channels % groups) {
        ct_error(CT_ERROR_VALUE, op, "out_channels must be divisible by groups");
        return NULL;
    }
    if (kernel[0] <= 0 || kernel[1] <= 0 || in_channels <= 0 || out_channels <= 0) {
        ct_error(CT_ERROR_VALUE, op, "channels and kernel sizes must be positive");
        return NULL;
    }
    if (ct_nn_layer_dtype(op, &dtype))
        return NULL;
    ct_module *m = ct_nn_module_with_ctx(op, conv2d_forward, sizeof(conv_ctx));
    if (!m)
        return NULL;
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
    if (!w || (bias && !b) || reset_weight_bias(w, b))
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

ct_module *ct_nn_dropout(double p) {
    if (!(p >= 0 && p <= 1)) {
        ct_error(CT_ERROR_VALUE, "Dropout", "dropout probability has to be between 0 and 1, but got %g", p);
        return NULL;
    }
    ct_module *m = ct_nn_module_with_ctx("Dropout", dropout_forward, sizeof(dropout_ctx));
    if (m)
        ((dropout_ctx *)ct_module_ctx(m))->p = p;
    return m;
}

static ct_tensor *relu_forward(ct_module *m, const ct_tensor *x) {
    (void)m;
    return ct_relu(x);
}
static ct_tensor *tanh_forward(ct_module *m, const ct_tensor *x) {
    (void)m;
    return ct_tanh(x);
}
ct_module *ct_nn_relu(void) { return ct_module_new("ReLU", relu_forward, NULL, NULL); }
ct_module *ct_nn_tanh(void) { return ct_module_new("Tanh", tanh_forward, NULL, NULL); }

typedef struct gelu_ctx {
    int64_t approximate;
} gelu_ctx;

static ct_tensor *gelu_forward(ct_module *m, const ct_tensor *x) {
    return ct_gelu(x, ((gelu_ctx *)ct_module_ctx(m))->approximate);
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
    if (m)
        ((gelu_ctx *)ct_module_ctx(m))->approximate = a;
    return m;
}

/* ------------------------------------------------------------------ Flatten, MaxPool2d */

typedef struct flatten_ctx {
    int start, end;
} flatten_ctx;

static ct_tensor *flatten_forward(ct_module *m, const ct_tensor *x) {
    flatten_ctx *c = ct_module_ctx(m);
    return ct_flatten(x, c->start, c->end);
}

ct_module *ct_nn_flatten(int start_dim, int end_dim) {
    ct_module *m = ct_nn_module_with_ctx("Flatten", flatten_forward, sizeof(flatten_ctx));
    if (m) {
        ((flatten_ctx *)ct_module_ctx(m))->start = start_dim;
        ((flatten_ctx *)ct_module_ctx(m))->end = end_dim;
    }
    return m;
}

typedef struct pool_ctx {
    int64_t kernel[2], stride[2], padding[2];
} pool_ctx;

static ct_tensor *maxpool_forward(ct_module *m, const ct_tensor *x) {
    pool_ctx *c = ct_module_ctx(m);
    return ct_max_pool2d(x, c->kernel, c->stride, c->padding, NULL, false, NULL);
}

ct_module *ct_nn_max_pool2d(const int64_t kernel[2], const int64_t stride[2], const int64_t padding[2]) {
    if (!kernel) {
        ct_error(CT_ERROR_NULL_ARGUMENT, "MaxPool2d", "kernel_size is NULL");
        return NULL;
    }
    ct_module *m = ct_nn_module_with_ctx("MaxPool2d", maxpool_forward, sizeof(pool_ctx));
    if (!m)
        return NULL;
    pool_ctx *c = ct_module_ctx(m);
    for (int i = 0; i < 2; i++) {
        c->kernel[i] = kernel[i];
        c->stride[i] = stride ? stride[i] : kernel[i];
        c->padding[i] = padding ? padding[i] : 0;
    }
    return m;
}

/* ------------------------------------------------------------------ Sequential */

typedef struct seq_ctx {
    int n;
} seq_ctx;

static ct_tensor *sequential_forward(ct_module *m, const ct_tensor *x) {
    int n = ((seq_ctx *)ct_module_ctx(m))->n;
    ct_scope_begin();
    const ct_tensor *h = x;
    char name[16];
    for (int i = 0; i < n && h; i++) {
        snprintf(name, sizeof name, "%d", i);
        h = ct_module_forward(ct_module_child(m, name), h);
    }
    ct_tensor *r = h == x ? ct_view_as(x, x) : (ct_tensor *)h;
    ct_keep(r);
    ct_scope_end();
    return r;
}

ct_module *ct_nn_sequential(ct_module *const *modules, int n) {
    if (n < 0 || (n > 0 && !modules)) {
        ct_error(CT_ERROR_NULL_ARGUMENT, "Sequential", "modules is NULL");
        return NULL;
    }
    for (int i = 0; i < n; i++)
        if (!modules[i]) {
            for (int j = 0; j < n; j++)
                ct_module_free(modules[j]);
            if (ct_last_status() == CT_OK)
                ct_error(CT_ERROR_NULL_ARGUMENT, "Sequential", "module %d is NULL", i);
            return NULL;
        }
    ct_module *m = ct_nn_module_with_ctx("Sequential", sequential_forward, sizeof(seq_ctx));
    if (!m) {
        for (int j = 0; j < n; j++)
            ct_module_free(modules[j]);
        return NULL;
    }
    ((seq_ctx *)ct_module_ctx(m))->n = n;
    for (int i = 0; i < n; i++) {
        char name[16];
        snprintf(name, sizeof name, "%d", i);
        if (ct_module_add_child(m, name, modules[i])) {
            for (int j = i + 1; j < n; j++)
                ct_module_free(modules[j]);
            return fail(m);
        }
    }
    return m;
}
