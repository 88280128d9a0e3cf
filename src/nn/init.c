/* torch.nn.init: in-place initialisers drawing from the default generator. Each runs
 * without recording a graph, as PyTorch's run under no_grad. */
#include <math.h>

#include "ctorch.h"
#include "ctorch/ext.h"

static ct_status check_init(const char *op, const ct_tensor *t) {
    if (!t)
        return ct_error_null(op);
    if (!ct_dtype_is_floating(ct_tensor_dtype(t)))
        return ct_error(CT_ERROR_TYPE, op, "expected a floating-point tensor, got %s",
                        ct_dtype_name(ct_tensor_dtype(t)));
    return CT_OK;
}

double ct_init_calculate_gain(ct_nonlinearity nonlinearity, double param) {
    switch (nonlinearity) {
    case CT_NONLINEARITY_LINEAR: return 1.0;
    case CT_NONLINEARITY_RELU: return sqrt(2.0);
    case CT_NONLINEARITY_LEAKY_RELU: return sqrt(2.0 / (1 + param * param));
    case CT_NONLINEARITY_TANH: return 5.0 / 3;
    case CT_NONLINEARITY_SELU: return 3.0 / 4;
    }
    ct_error(CT_ERROR_VALUE, "calculate_gain", "Unsupported nonlinearity %d", (int)nonlinearity);
    return NAN;
}

ct_status ct_init_fans(const ct_tensor *t, int64_t *fan_in, int64_t *fan_out) {
    if (!t)
        return ct_error_null("_calculate_fan_in_and_fan_out");
    const int nd = ct_tensor_dim(t);
    const int64_t *shape = ct_tensor_shape(t);
    if (nd < 2)
        return ct_error(CT_ERROR_VALUE, "_calculate_fan_in_and_fan_out",
                        "Fan in and fan out can not be computed for tensor with fewer than 2 dimensions");
    int64_t rf = 1;
    for (int d = 2; d < nd; d++)
        rf *= shape[d];
    if (fan_in)
        *fan_in = shape[1] * rf;
    if (fan_out)
        *fan_out = shape[0] * rf;
    return CT_OK;
}

/* Runs an in-place fill with grad mode off (Note [Statistics without a graph] in
 * functional.c). */
#define NO_GRAD(expr)                                          \
    do {                                                       \
        bool grad_was_ = ct_set_grad_enabled(false);           \
        ct_tensor *r_ = (expr);                                \
        ct_set_grad_enabled(grad_was_);                        \
        if (!r_)                                               \
            return NULL;                                       \
    } while (0)

ct_tensor *ct_init_uniform_(ct_tensor *t, double a, double b) {
    if (check_init("uniform_", t))
        return NULL;
    NO_GRAD(ct_uniform_(t, a, b));
    return ct_tensor_ref(t);
}

ct_tensor *ct_init_normal_(ct_tensor *t, double mean, double std) {
    if (check_init("normal_", t))
        return NULL;
    NO_GRAD(ct_normal_(t, mean, std));
    return ct_tensor_ref(t);
}

ct_tensor *ct_init_constant_(ct_tensor *t, double value) {
    if (check_init("constant_", t))
        return NULL;
    NO_GRAD(ct_fill_(t, ct_scalar_float(value)));
    return ct_tensor_ref(t);
}

ct_tensor *ct_init_zeros_(ct_tensor *t) { return ct_init_constant_(t, 0); }
ct_tensor *ct_init_ones_(ct_tensor *t) { return ct_init_constant_(t, 1); }

ct_tensor *ct_init_xavier_uniform_(ct_tensor *t, double gain) {
    int64_t fi = 0, fo = 0;
    if (check_init("xavier_uniform_", t) || ct_init_fans(t, &fi, &fo))
        return NULL;
    double a = sqrt(3.0) * gain * sqrt(2.0 / (double)(fi + fo));
    return ct_init_uniform_(t, -a, a);
}

ct_tensor *ct_init_xavier_normal_(ct_tensor *t, double gain) {
    int64_t fi = 0, fo = 0;
    if (check_init("xavier_normal_", t) || ct_init_fans(t, &fi, &fo))
        return NULL;
    return ct_init_normal_(t, 0, gain * sqrt(2.0 / (double)(fi + fo)));
}

static bool kaiming_std(const char *op, const ct_tensor *t, double a, ct_fan_mode mode, ct_nonlinearity nl,
                        double *std) {
    int64_t fi = 0, fo = 0;
    if (check_init(op, t) || ct_init_fans(t, &fi, &fo))
        return false;
    if (mode != CT_FAN_IN && mode != CT_FAN_OUT) {
        ct_error(CT_ERROR_VALUE, op, "Mode %d not supported, please use one of fan_in, fan_out", (int)mode);
        return false;
    }
    int64_t fan = mode == CT_FAN_IN ? fi : fo;
    if (fan == 0) {
        ct_error(CT_ERROR_VALUE, op, "Initializing zero-element tensors is a no-op");
        return false;
    }
    double gain = ct_init_calculate_gain(nl, a);
    if (isnan(gain))
        return false;
    *std = gain / sqrt((double)fan);
    return true;
}

ct_tensor *ct_init_kaiming_uniform_(ct_tensor *t, double a, ct_fan_mode mode, ct_nonlinearity nonlinearity) {
    double std;
    if (!kaiming_std("kaiming_uniform_", t, a, mode, nonlinearity, &std))
        return NULL;
    double bound = sqrt(3.0) * std;
    return ct_init_uniform_(t, -bound, bound);
}

ct_tensor *ct_init_kaiming_normal_(ct_tensor *t, double a, ct_fan_mode mode, ct_nonlinearity nonlinearity) {
    double std;
    if (!kaiming_std("kaiming_normal_", t, a, mode, nonlinearity, &std))
        return NULL;
    return ct_init_normal_(t, 0, std);
}

static double norm_cdf(double x) { return (1.0 + erf(x / sqrt(2.0))) / 2.0; }

/* Uniform in [cdf(a), cdf(b)], mapped back through the inverse normal CDF. */
ct_tensor *ct_init_trunc_normal_(ct_tensor *t, double mean, double std, double a, double b) {
    if (check_init("trunc_normal_", t))
        return NULL;
    if (!(std > 0) || !(a < b)) {
        ct_error(CT_ERROR_VALUE, "trunc_normal_", "expected std > 0 and a < b, got std=%g, a=%g, b=%g", std, a, b);
        return NULL;
    }
    double l = norm_cdf((a - mean) / std), u = norm_cdf((b - mean) / std);
    ct_scalar lo = ct_scalar_float(a), hi = ct_scalar_float(b);
    bool grad_was = ct_set_grad_enabled(false);
    ct_scope_begin();
    bool ok = ct_uniform_(t, 2 * l - 1, 2 * u - 1) && ct_erfinv_(t) &&
              ct_mul_scalar_(t, ct_scalar_float(std * sqrt(2.0))) && ct_add_scalar_(t, ct_scalar_float(mean)) &&
              ct_clamp_(t, &lo, &hi);
    ct_scope_end();
    ct_set_grad_enabled(grad_was);
    return ok ? ct_tensor_ref(t) : NULL;
}
