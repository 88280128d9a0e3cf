/* The activation modules: one table of those without arguments (ct_nn_activation),
 * one of those with numeric arguments (LeakyReLU, ELU, Softplus, Softmax, ...), and
 * PReLU, which holds a parameter. Each prints as PyTorch's (its extra_repr). */
#include <stdio.h>
#include <string.h>

#include "ctorch.h"
#include "ctorch/ext.h"
#include "nn/module_internal.h"

/* ------------------------------------------------------------------ no arguments */

/* Note [Activation tables]
 * An activation module is its forward and its repr. Those without arguments are one
 * row each (name, op); those with arguments keep up to three doubles in the module's
 * context, and the row says how many, their names in extra_repr and how forward uses
 * them. Integer arguments (a dim) are kept as doubles too: they print through %lld. */
typedef ct_tensor *(*unary_fn)(const ct_tensor *);

static const struct {
    const char *name;
    unary_fn fn;
} plain[] = {
    {"ReLU", ct_relu},         {"Tanh", ct_tanh},           {"Sigmoid", ct_sigmoid},       {"SiLU", ct_silu},
    {"Mish", ct_mish},         {"SELU", ct_selu},           {"ReLU6", ct_relu6},           {"Hardswish", ct_hardswish},
    {"Hardsigmoid", ct_hardsigmoid}, {"LogSigmoid", ct_logsigmoid}, {"Softsign", ct_softsign},
    {"Tanhshrink", ct_tanhshrink},
};
#define NPLAIN (int)(sizeof plain / sizeof plain[0])

typedef struct act_ctx {
    int row;
    double p[3];
} act_ctx;

static ct_tensor *plain_forward(ct_module *m, const ct_tensor *x) {
    return plain[((act_ctx *)ct_module_ctx(m))->row].fn(x);
}

ct_module *ct_nn_activation(const char *name) {
    for (int i = 0; name && i < NPLAIN; i++)
        if (!strcmp(name, plain[i].name)) {
            ct_module *m = ct_nn_module_with_ctx(plain[i].name, plain_forward, sizeof(act_ctx));
            if (m)
                ((act_ctx *)ct_module_ctx(m))->row = i;
            return m;
        }
    ct_error(name ? CT_ERROR_VALUE : CT_ERROR_NULL_ARGUMENT, "activation", "no activation module without arguments "
             "is named %s",
             name ? name : "NULL");
    return NULL;
}

/* ------------------------------------------------------------------ numeric arguments */

enum { A_LEAKY, A_ELU, A_CELU, A_SOFTPLUS, A_HARDTANH, A_HARDSHRINK, A_SOFTSHRINK, A_SOFTMAX, A_LOG_SOFTMAX, A_GLU };

static const struct {
    const char *name;
    int nargs;
    const char *fmt; /* extra_repr: each "%s" takes one argument, "%lld" an integer one */
} args_rows[] = {
    [A_LEAKY] = {"LeakyReLU", 1, "negative_slope=%s"},
    [A_ELU] = {"ELU", 1, "alpha=%s"},
    [A_CELU] = {"CELU", 1, "alpha=%s"},
    [A_SOFTPLUS] = {"Softplus", 2, "beta=%s, threshold=%s"},
    [A_HARDTANH] = {"Hardtanh", 2, "min_val=%s, max_val=%s"},
    [A_HARDSHRINK] = {"Hardshrink", 1, "%s"},
    [A_SOFTSHRINK] = {"Softshrink", 1, "%s"},
    [A_SOFTMAX] = {"Softmax", 1, "dim=%lld"},
    [A_LOG_SOFTMAX] = {"LogSoftmax", 1, "dim=%lld"},
    [A_GLU] = {"GLU", 1, "dim=%lld"},
};

static ct_tensor *args_forward(ct_module *m, const ct_tensor *x) {
    const act_ctx *c = ct_module_ctx(m);
    const double *p = c->p;
    switch (c->row) {
    case A_LEAKY: return ct_leaky_relu(x, p[0]);
    case A_ELU: return ct_elu(x, p[0], 1.0, 1.0);
    case A_CELU: return ct_celu(x, p[0]);
    case A_SOFTPLUS: return ct_softplus(x, p[0], p[1]);
    case A_HARDTANH: return ct_hardtanh(x, p[0], p[1]);
    case A_HARDSHRINK: return ct_hardshrink(x, p[0]);
    case A_SOFTSHRINK: return ct_softshrink(x, p[0]);
    case A_SOFTMAX: return ct_softmax(x, (int64_t)p[0], CT_DTYPE_UNDEFINED);
    case A_LOG_SOFTMAX: return ct_log_softmax(x, (int64_t)p[0], CT_DTYPE_UNDEFINED);
    default: return ct_glu(x, (int64_t)p[0]);
    }
}

static int args_repr(const ct_module *m, char *buf, size_t cap) {
    const act_ctx *c = ct_module_ctx(m);
    const char *fmt = args_rows[c->row].fmt;
    if (strstr(fmt, "%lld"))
        return snprintf(buf, cap, fmt, (long long)c->p[0]);
    char a[40], b[40];
    ct_nn_float_repr(c->p[0], a, sizeof a);
    ct_nn_float_repr(c->p[1], b, sizeof b);
    return snprintf(buf, cap, fmt, a, b);
}

static ct_module *args_module(int row, double p0, double p1) {
    ct_module *m = ct_nn_module_with_ctx(args_rows[row].name, args_forward, sizeof(act_ctx));
    if (m) {
        act_ctx *c = ct_module_ctx(m);
        c->row = row;
        c->p[0] = p0;
        c->p[1] = p1;
        ct_module_set_extra_repr(m, args_repr);
    }
    return m;
}

ct_module *ct_nn_leaky_relu(double negative_slope) { return args_module(A_LEAKY, negative_slope, 0); }
ct_module *ct_nn_elu(double alpha) { return args_module(A_ELU, alpha, 0); }
ct_module *ct_nn_celu(double alpha) { return args_module(A_CELU, alpha, 0); }
ct_module *ct_nn_softplus(double beta, double threshold) { return args_module(A_SOFTPLUS, beta, threshold); }
ct_module *ct_nn_hardshrink(double lambd) { return args_module(A_HARDSHRINK, lambd, 0); }
ct_module *ct_nn_softshrink(double lambd) { return args_module(A_SOFTSHRINK, lambd, 0); }
ct_module *ct_nn_softmax(int64_t dim) { return args_module(A_SOFTMAX, (double)dim, 0); }
ct_module *ct_nn_log_softmax(int64_t dim) { return args_module(A_LOG_SOFTMAX, (double)dim, 0); }
ct_module *ct_nn_glu(int64_t dim) { return args_module(A_GLU, (double)dim, 0); }

ct_module *ct_nn_hardtanh(double min_val, double max_val) {
    if (!(max_val > min_val)) {
        ct_error(CT_ERROR_VALUE, "Hardtanh", "max_val must be greater than min_val");
        return NULL;
    }
    return args_module(A_HARDTANH, min_val, max_val);
}

/* ------------------------------------------------------------------ PReLU */

static ct_tensor *prelu_forward(ct_module *m, const ct_tensor *x) { return ct_prelu(x, ct_module_param(m, "weight")); }

static int prelu_repr(const ct_module *m, char *buf, size_t cap) {
    return snprintf(buf, cap, "num_parameters=%lld", (long long)ct_tensor_numel(ct_module_param(m, "weight")));
}

ct_module *ct_nn_prelu(int64_t num_parameters, double init, ct_dtype dtype) {
    if (num_parameters <= 0) {
        ct_error(CT_ERROR_VALUE, "PReLU", "num_parameters must be positive, got %lld", (long long)num_parameters);
        return NULL;
    }
    if (ct_nn_layer_dtype("PReLU", &dtype))
        return NULL;
    ct_module *m = ct_module_new("PReLU", prelu_forward, NULL, NULL);
    if (!m)
        return NULL;
    ct_module_set_extra_repr(m, prelu_repr);
    ct_tensor *w = ct_nn_new_param(m, "weight", CT_SHAPE(num_parameters), dtype);
    ct_scope_begin();
    bool ok = w && ct_init_constant_(w, init);
    ct_scope_end();
    if (!ok) {
        ct_module_free(m);
        return NULL;
    }
    return m;
}
