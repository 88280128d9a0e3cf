/* ct_gradcheck and ct_gradgradcheck: analytical Jacobians (one backward per output
 * element) against central finite differences, in float64, on any device. */
#include <math.h>
#include <stdio.h>

#include "autograd/node.h"

#define MAX_OUTS 16

/* A function of several tensors returning up to MAX_OUTS tensors (scope-owned). */
typedef ct_status (*multi_fn)(void *ud, ct_tensor *const *inputs, int n, ct_tensor **outs, int *nouts);

static void flat_index(const ct_tensor *t, int64_t k, int64_t *idx) {
    for (int d = t->ndim - 1; d >= 0; d--) {
        idx[d] = k % t->shape[d];
        k /= t->shape[d];
    }
}

/* Note [Gradcheck on any device]
 * CPU tensors are read and written element by element in place. Elsewhere (CUDA) an
 * element is a 0-d view: reading it copies one value to the host (ct_item_double),
 * writing it fills the view (ct_fill_, with gradients off so a leaf that requires grad
 * may be perturbed). Slow per element, but gradcheck runs on small inputs. */
static ct_tensor *element(const ct_tensor *t, int64_t k) {
    int64_t idx[CT_MAX_DIMS], off = t->offset;
    flat_index(t, k, idx);
    for (int d = 0; d < t->ndim; d++)
        off += idx[d] * t->strides[d];
    return ct_as_strided(t, NULL, NULL, 0, off);
}

static double flat_get(const ct_tensor *t, int64_t k) {
    double v = 0;
    if (t->device.type == CT_DEVICE_CPU) {
        int64_t idx[CT_MAX_DIMS];
        flat_index(t, k, idx);
        ct_tensor_get(t, idx, &v);
        return v;
    }
    ct_scope_begin();
    bool prev = ct_set_grad_enabled(false);
    ct_item_double(element(t, k), &v);
    ct_set_grad_enabled(prev);
    ct_scope_end();
    return v;
}

static void flat_set(ct_tensor *t, int64_t k, double v) {
    if (t->device.type == CT_DEVICE_CPU) {
        int64_t idx[CT_MAX_DIMS];
        flat_index(t, k, idx);
        ct_tensor_set(t, idx, v);
        return;
    }
    ct_scope_begin();
    bool prev = ct_set_grad_enabled(false);
    ct_fill_(element(t, k), ct_scalar_float(v));
    ct_set_grad_enabled(prev);
    ct_scope_end();
}

/* A host copy of t for reading many elements (t itself when on the CPU). */
static const ct_tensor *on_host(const ct_tensor *t) {
    return t->device.type == CT_DEVICE_CPU ? t : ct_to_device(t, CT_CPU);
}

static ct_status check_inputs(const char *op, ct_tensor *const *inputs, int n, double eps) {
    if (!inputs || n <= 0 || n > MAX_OUTS)
        return ct_error(CT_ERROR_VALUE, op, "expected 1 to %d input tensors, got %d", MAX_OUTS, n);
    if (!(eps > 0))
        return ct_error(CT_ERROR_VALUE, op, "eps must be positive, got %g", eps);
    bool any = false;
    for (int i = 0; i < n; i++) {
        if (!inputs[i])
            return ct_error(CT_ERROR_NULL_ARGUMENT, op, "input %d is NULL", i);
        if (inputs[i]->requires_grad) {
            any = true;
            if (inputs[i]->dtype != CT_F64)
                return ct_error(CT_ERROR_TYPE, op,
                                "input %d requires grad and is %s; gradcheck needs float64 inputs for precise "
                                "finite differences",
                                i, ct_dtype_name(inputs[i]->dtype));
            if (inputs[i]->device.type == CT_DEVICE_META)
                return ct_error(CT_ERROR_DEVICE, op, "input %d is a meta tensor; gradcheck needs values", i);
        }
    }
    if (!any)
        return ct_error(CT_ERROR_VALUE, op, "gradcheck expects at least one input tensor to require gradient");
    return CT_OK;
}

static ct_status eval(multi_fn f, void *ud, ct_tensor *const *inputs, int n, ct_tensor **outs, int *nouts,
                      const char *op) {
    *nouts = 0;
    ct_status st = f(ud, inputs, n, outs, nouts);
    if (st != CT_OK)
        return st;
    for (int o = 0; o < *nouts; o++) {
        if (!outs[o])
            return ct_error(CT_ERROR_RUNTIME, op, "the function returned NULL for output %d", o);
        if (outs[o]->dtype != CT_F64)
            return ct_error(CT_ERROR_TYPE, op, "output %d is %s; gradcheck needs float64 outputs", o,
                            ct_dtype_name(outs[o]->dtype));
    }
    return CT_OK;
}

static ct_status check(const char *op, multi_fn f, void *ud, ct_tensor *const *inputs, int n, double eps,
                       double atol, double rtol) {
    ct_status st = check_inputs(op, inputs, n, eps);
    if (st != CT_OK)
        return st;
    ct_tensor *diff[MAX_OUTS];
    int nd = 0, which[MAX_OUTS];
    for (int i = 0; i < n; i++)
        if (inputs[i]->requires_grad) {
            which[nd] = i;
            diff[nd++] = inputs[i];
        }
    ct_scope_begin();
    ct_tensor *outs[MAX_OUTS];
    int nouts = 0;
    double *jac[MAX_OUTS][MAX_OUTS] = {{0}}; /* [output][input]: numel(out) x numel(in) */
    st = eval(f, ud, inputs, n, outs, &nouts, op);
    for (int o = 0; o < nouts && st == CT_OK; o++)
        for (int j = 0; j < nd && st == CT_OK; j++) {
            size_t cnt = (size_t)(outs[o]->numel * diff[j]->numel);
            jac[o][j] = calloc(cnt ? cnt : 1, sizeof(double));
            if (!jac[o][j])
                st = ct_error(CT_ERROR_OUT_OF_MEMORY, op, "out of memory");
        }
    /* Analytical: one backward per output element. */
    for (int o = 0; o < nouts && st == CT_OK; o++) {
        ct_tensor *out = outs[o];
        if (!out->requires_grad)
            continue; /* constant output: its rows stay zero */
        for (int64_t k = 0; k < out->numel && st == CT_OK; k++) {
            ct_scope_begin();
            ct_tensor *go = ct_zeros_like(out, CT_DTYPE_UNDEFINED);
            ct_tensor *grads[MAX_OUTS] = {0};
            if (!go) {
                st = ct_last_status();
            } else {
                flat_set(go, k, 1.0);
                const ct_tensor *gos[1] = {go};
                const ct_tensor *oo[1] = {out};
                st = ct_autograd_grad(oo, 1, (const ct_tensor *const *)diff, nd, gos, true, false, true, grads);
            }
            for (int j = 0; j < nd && st == CT_OK; j++) {
                const ct_tensor *g = grads[j] ? on_host(grads[j]) : NULL;
                if (grads[j] && !g)
                    st = ct_last_status();
                for (int64_t e = 0; g && e < diff[j]->numel; e++)
                    jac[o][j][k * diff[j]->numel + e] = flat_get(g, e);
            }
            ct_scope_end();
        }
    }
    /* Numerical: central differences, one input element at a time. */
    for (int j = 0; j < nd && st == CT_OK; j++) {
        for (int64_t e = 0; e < diff[j]->numel && st == CT_OK; e++) {
            double x = flat_get(diff[j], e);
            ct_scope_begin();
            ct_tensor *plus[MAX_OUTS] = {0}, *minus[MAX_OUTS] = {0};
            int np = 0, nm = 0;
            flat_set(diff[j], e, x + eps);
            st = eval(f, ud, inputs, n, plus, &np, op);
            /* An output may alias an input (add's gradient is grad_output itself). */
            for (int o = 0; o < np && st == CT_OK; o++)
                if (!(plus[o] = plus[o]->device.type == CT_DEVICE_CPU ? ct_clone(plus[o])
                                                                       : ct_to_device(plus[o], CT_CPU)))
                    st = ct_last_status();
            flat_set(diff[j], e, x - eps);
            if (st == CT_OK)
                st = eval(f, ud, inputs, n, minus, &nm, op);
            for (int o = 0; o < nm && st == CT_OK; o++)
                if (!(minus[o] = minus[o]->device.type == CT_DEVICE_CPU ? ct_clone(minus[o])
                                                                         : ct_to_device(minus[o], CT_CPU)))
                    st = ct_last_status();
            flat_set(diff[j], e, x);
            for (int o = 0; o < nouts && st == CT_OK; o++) {
                for (int64_t k = 0; k < outs[o]->numel && st == CT_OK; k++) {
                    double num = (flat_get(plus[o], k) - flat_get(minus[o], k)) / (2 * eps);
                    double ana = jac[o][j][k * diff[j]->numel + e];
                    if (!(fabs(ana - num) <= atol + rtol * fabs(num)))
                        st = ct_error(CT_ERROR_VALUE, op,
                                      "Jacobian mismatch for output %d with respect to input %d: d out[%lld] / d "
                                      "in[%lld] is %.10g numerically but %.10g analytically",
                                      o, which[j], (long long)k, (long long)e, num, ana);
                }
            }
            ct_scope_end();
        }
    }
    for (int o = 0; o < MAX_OUTS; o++)
        for (int j = 0; j < MAX_OUTS; j++)
            free(jac[o][j]);
    ct_scope_end();
    return st;
}

/* ------------------------------------------------------------------ first order */

typedef struct {
    ct_grad_fn_t fn;
    void *ud;
} single;

static ct_status single_eval(void *ud, ct_tensor *const *inputs, int n, ct_tensor **outs, int *nouts) {
    single *s = ud;
    outs[0] = s->fn(inputs, n, s->ud);
    *nouts = 1;
    return outs[0] ? CT_OK : (ct_last_status() != CT_OK ? ct_last_status() : CT_ERROR_RUNTIME);
}

ct_status ct_gradcheck(ct_grad_fn_t fn, void *user_data, ct_tensor *const *inputs, int n, double eps, double atol,
                       double rtol) {
    if (!fn)
        return ct_error(CT_ERROR_NULL_ARGUMENT, "gradcheck", "fn is NULL");
    single s = {fn, user_data};
    return check("gradcheck", single_eval, &s, inputs, n, eps, atol, rtol);
}

/* ------------------------------------------------------------------ second order */

typedef struct {
    ct_grad_fn_t fn;
    void *ud;
    int n; /* the function's own inputs; the grad_output follows them */
} second;

/* (inputs..., grad_output) -> the gradients of fn w.r.t. its inputs that require grad,
 * computed with create_graph so they can be differentiated again. */
static ct_status second_eval(void *ud, ct_tensor *const *inputs, int n, ct_tensor **outs, int *nouts) {
    second *s = ud;
    (void)n;
    ct_tensor *y = s->fn(inputs, s->n, s->ud);
    if (!y)
        return ct_last_status() != CT_OK ? ct_last_status() : CT_ERROR_RUNTIME;
    const ct_tensor *diff[MAX_OUTS];
    int nd = 0;
    for (int i = 0; i < s->n; i++)
        if (inputs[i]->requires_grad)
            diff[nd++] = inputs[i];
    ct_tensor *grads[MAX_OUTS] = {0};
    const ct_tensor *ys[1] = {y};
    const ct_tensor *gos[1] = {inputs[s->n]};
    ct_status st = ct_autograd_grad(ys, 1, diff, nd, gos, true, true, true, grads);
    if (st != CT_OK)
        return st;
    for (int j = 0; j < nd; j++) {
        outs[j] = grads[j] ? grads[j] : ct_zeros_like(diff[j], CT_DTYPE_UNDEFINED);
        if (!outs[j])
            return ct_last_status();
    }
    *nouts = nd;
    return CT_OK;
}

ct_status ct_gradgradcheck(ct_grad_fn_t fn, void *user_data, ct_tensor *const *inputs, int n, double eps,
                           double atol, double rtol) {
    if (!fn)
        return ct_error(CT_ERROR_NULL_ARGUMENT, "gradgradcheck", "fn is NULL");
    ct_status st = check_inputs("gradgradcheck", inputs, n, eps);
    if (st != CT_OK)
        return st;
    if (n + 1 > MAX_OUTS)
        return ct_error(CT_ERROR_VALUE, "gradgradcheck", "at most %d inputs", MAX_OUTS - 1);
    ct_scope_begin();
    ct_tensor *y = fn(inputs, n, user_data);
    ct_tensor *go = y ? ct_empty(y->shape, y->ndim, CT_F64, y->device) : NULL;
    if (!go) {
        st = ct_last_status() != CT_OK ? ct_last_status() : CT_ERROR_RUNTIME;
        ct_scope_end();
        return st;
    }
    /* A fixed, varied grad_output: all ones would hide errors that cancel. */
    uint64_t state = 0x9e3779b97f4a7c15ULL;
    for (int64_t k = 0; k < go->numel; k++) {
        state = state * 6364136223846793005ULL + 1442695040888963407ULL;
        flat_set(go, k, 0.25 + (double)(state >> 40) / (double)(1ull << 24));
    }
    ct_tensor_set_requires_grad(go, true);
    ct_tensor *all[MAX_OUTS];
    for (int i = 0; i < n; i++)
        all[i] = inputs[i];
    all[n] = go;
    second s = {fn, user_data, n};
    st = check("gradgradcheck", second_eval, &s, all, n + 1, eps, atol, rtol);
    ct_scope_end();
    return st;
}
