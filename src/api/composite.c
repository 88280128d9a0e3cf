/* Composite ops: functions PyTorch users reach for that are built entirely from other
 * ops (elementwise math, activations, products, order statistics). Having no kernel of
 * their own, they run on every backend, META included, and take their gradients from
 * the ops they are made of (docs/ops.md, "Composites"). Each is written so that
 * its gradient is PyTorch's too: branches that would divide by zero get a safe operand
 * before the `where` that discards them, so no NaN flows back through the unused side. */
#include <math.h>
#include <string.h>

#include "ctorch/nn.h"
#include "ctorch/ops.h"
#include "meta/nn_fused.h"
#include "tensor_impl.h"
#include "core/checks.h"
#include "core/error.h"
#include "dispatch/dispatch_internal.h"

#define PI 3.14159265358979323846

/* Runs the body (which sets r) in a scope and returns r kept into the caller's. */
#define COMPOSITE(...)         \
    ct_scope_begin();          \
    ct_tensor *r = NULL;       \
    __VA_ARGS__;               \
    ct_keep(r);                \
    ct_scope_end();            \
    return r

static ct_dtype promoted(const ct_tensor *a, const ct_tensor *b) {
    const ct_tensor *ts[2] = {a, b};
    return ct_result_type(ts, b ? 2 : 1);
}

/* ------------------------------------------------------------------ elementwise */

/* log(exp(a) + exp(b)) = max + log1p(exp(-|a - b|)); equal infinities give themselves
 * (their difference would be NaN). */
static ct_tensor *logaddexp_impl(const char *op, const ct_tensor *a, const ct_tensor *b, bool base2) {
    CT_CHECK_ARG(op, a);
    CT_CHECK_ARG(op, b);
    if (ct_nn_need_float_dtype(op, promoted(a, b)))
        return NULL;
    COMPOSITE({
        ct_tensor *m = ct_maximum(a, b);
        ct_tensor *d = ct_neg(ct_abs(ct_sub(a, b)));
        ct_tensor *tail = base2 ? ct_div_scalar(ct_log1p(ct_exp2(d)), ct_scalar_float(log(2.0))) : ct_log1p(ct_exp(d));
        r = ct_where(ct_logical_and(ct_eq(a, b), ct_isinf(m)), m, ct_add(m, tail));
    });
}
ct_tensor *ct_logaddexp(const ct_tensor *a, const ct_tensor *b) { return logaddexp_impl("logaddexp", a, b, false); }
ct_tensor *ct_logaddexp2(const ct_tensor *a, const ct_tensor *b) { return logaddexp_impl("logaddexp2", a, b, true); }

/* x * log(y) (x * log1p(y) with one_plus), 0 where x == 0 unless y is NaN. */
static ct_tensor *xlog_impl(const char *op, const ct_tensor *x, const ct_tensor *y, bool one_plus) {
    CT_CHECK_ARG(op, x);
    CT_CHECK_ARG(op, y);
    COMPOSITE({
        ct_tensor *zero = ct_logical_and(ct_eq_scalar(x, ct_scalar_int(0)), ct_logical_not(ct_isnan(y)));
        /* the log where it is discarded gets the operand whose log is 0: no -inf * 0 on
         * the gradient's path */
        ct_tensor *safe = ct_where_scalar_other(ct_logical_not(zero), y, ct_scalar_int(one_plus ? 0 : 1));
        ct_tensor *p = ct_mul(x, one_plus ? ct_log1p(safe) : ct_log(safe));
        r = ct_where_scalar_self(zero, ct_scalar_int(0), p);
    });
}
ct_tensor *ct_xlogy(const ct_tensor *x, const ct_tensor *y) { return xlog_impl("xlogy", x, y, false); }
ct_tensor *ct_xlog1py(const ct_tensor *x, const ct_tensor *y) { return xlog_impl("xlog1py", x, y, true); }

/* -x log x for x > 0, 0 at 0, -inf below (NaN stays NaN); integers in the default
 * float dtype. */
ct_tensor *ct_entr(const ct_tensor *x) {
    CT_CHECK_ARG("entr", x);
    COMPOSITE({
        const ct_tensor *f = ct_dtype_is_floating(x->dtype) ? x : ct_to_dtype(x, ct_get_default_dtype());
        ct_tensor *pos = ct_gt_scalar(f, ct_scalar_int(0));
        ct_tensor *safe = ct_where_scalar_other(pos, f, ct_scalar_int(1));
        ct_tensor *neg_inf = ct_full_like(f, ct_scalar_float(-INFINITY), CT_DTYPE_UNDEFINED);
        ct_tensor *rest = ct_where_scalar_self(ct_eq_scalar(f, ct_scalar_int(0)), ct_scalar_int(0),
                                               ct_where_scalar_self(ct_isnan(f), ct_scalar_float(NAN), neg_inf));
        r = ct_where(pos, ct_neg(ct_mul(f, ct_log(safe))), rest);
    });
}

/* x * 2^e (torch.ldexp: x * pow(2, e), so integer exponents give the default float
 * dtype). */
ct_tensor *ct_ldexp(const ct_tensor *x, const ct_tensor *e) {
    CT_CHECK_ARG("ldexp", x);
    CT_CHECK_ARG("ldexp", e);
    COMPOSITE({ r = ct_mul(x, ct_exp2(e)); });
}

/* sin(pi x) / (pi x), 1 at 0. */
ct_tensor *ct_sinc(const ct_tensor *x) {
    CT_CHECK_ARG("sinc", x);
    COMPOSITE({
        ct_tensor *z = ct_eq_scalar(x, ct_scalar_int(0));
        ct_tensor *px = ct_mul_scalar(ct_where_scalar_self(z, ct_scalar_int(1), x), ct_scalar_float(PI));
        r = ct_where_scalar_self(z, ct_scalar_int(1), ct_div(ct_sin(px), px));
    });
}

/* Integers and bool convert to the default float dtype first, as PyTorch. */
static ct_tensor *scale_float(const char *op, const ct_tensor *x, double k) {
    CT_CHECK_ARG(op, x);
    COMPOSITE({
        const ct_tensor *f = ct_dtype_is_floating(x->dtype) ? x : ct_to_dtype(x, ct_get_default_dtype());
        r = ct_mul_scalar(f, ct_scalar_float(k));
    });
}
ct_tensor *ct_deg2rad(const ct_tensor *x) { return scale_float("deg2rad", x, PI / 180.0); }
ct_tensor *ct_rad2deg(const ct_tensor *x) { return scale_float("rad2deg", x, 180.0 / PI); }

/* values where x == 0, else x > 0, in x's dtype (both operands of one dtype). */
ct_tensor *ct_heaviside(const ct_tensor *x, const ct_tensor *values) {
    CT_CHECK_ARG("heaviside", x);
    CT_CHECK_ARG("heaviside", values);
    if (x->dtype != values->dtype) {
        ct_error(CT_ERROR_TYPE, "heaviside", "heaviside is not yet implemented for tensors with different dtypes.");
        return NULL;
    }
    COMPOSITE(r = ct_where(ct_eq_scalar(x, ct_scalar_int(0)), values, ct_to_dtype(ct_gt_scalar(x, ct_scalar_int(0)), x->dtype)));
}

/* The sign bit: -0.0 and negative NaNs included (copysign reads it). */
ct_tensor *ct_signbit(const ct_tensor *x) {
    CT_CHECK_ARG("signbit", x);
    COMPOSITE({
        if (x->dtype == CT_DTYPE_BOOL)
            r = ct_zeros_like(x, CT_DTYPE_BOOL);
        else if (ct_dtype_is_floating(x->dtype))
            r = ct_lt_scalar(ct_copysign(ct_ones_like(x, CT_DTYPE_UNDEFINED), x), ct_scalar_int(0));
        else
            r = ct_lt_scalar(x, ct_scalar_int(0));
    });
}

/* pow in float64. */
ct_tensor *ct_float_power(const ct_tensor *a, const ct_tensor *b) {
    CT_CHECK_ARG("float_power", a);
    CT_CHECK_ARG("float_power", b);
    COMPOSITE(r = ct_pow(ct_to_dtype(a, CT_DTYPE_FLOAT64), ct_to_dtype(b, CT_DTYPE_FLOAT64)));
}

/* ------------------------------------------------------------------ activations */

/* log(sigmoid(x)) = min(x, 0) - log1p(exp(-|x|)). */
ct_tensor *ct_logsigmoid(const ct_tensor *x) {
    CT_CHECK_ARG("log_sigmoid", x);
    if (ct_nn_need_float_dtype("log_sigmoid", x->dtype))
        return NULL;
    COMPOSITE({
        ct_scalar zero = ct_scalar_int(0);
        r = ct_sub(ct_clamp(x, NULL, &zero), ct_log1p(ct_exp(ct_neg(ct_abs(x)))));
    });
}

ct_tensor *ct_softsign(const ct_tensor *x) {
    CT_CHECK_ARG("softsign", x);
    COMPOSITE(r = ct_div(x, ct_add_scalar(ct_abs(x), ct_scalar_int(1))));
}

ct_tensor *ct_tanhshrink(const ct_tensor *x) {
    CT_CHECK_ARG("tanhshrink", x);
    COMPOSITE(r = ct_sub(x, ct_tanh(x)));
}

/* 0 inside [-lambd, lambd], x elsewhere (NaN stays NaN). */
ct_tensor *ct_hardshrink(const ct_tensor *x, double lambd) {
    CT_CHECK_ARG("hardshrink", x);
    if (ct_nn_need_float_dtype("hardshrink", x->dtype))
        return NULL;
    COMPOSITE({
        ct_tensor *inside = ct_logical_and(ct_ge_scalar(x, ct_scalar_float(-lambd)), ct_le_scalar(x, ct_scalar_float(lambd)));
        r = ct_where_scalar_self(inside, ct_scalar_int(0), x);
    });
}

/* x - lambd above lambd, x + lambd below -lambd, 0 between (NaN stays NaN). */
ct_tensor *ct_softshrink(const ct_tensor *x, double lambd) {
    CT_CHECK_ARG("softshrink", x);
    if (ct_nn_need_float_dtype("softshrink", x->dtype))
        return NULL;
    if (lambd < 0) {
        ct_error(CT_ERROR_VALUE, "softshrink",
                 "lambda must be greater or equal to 0, but found to be %g.", lambd);
        return NULL;
    }
    COMPOSITE({
        ct_tensor *hi = ct_gt_scalar(x, ct_scalar_float(lambd)), *lo = ct_lt_scalar(x, ct_scalar_float(-lambd));
        ct_tensor *mid = ct_mul_scalar(x, ct_scalar_int(0)); /* keeps NaN */
        r = ct_where(hi, ct_sub_scalar(x, ct_scalar_float(lambd)),
                     ct_where(lo, ct_add_scalar(x, ct_scalar_float(lambd)), mid));
    });
}

/* a * sigmoid(b) for the two halves of x along dim. */
ct_tensor *ct_glu(const ct_tensor *x, int64_t dim) {
    CT_CHECK_ARG("glu", x);
    if (x->ndim == 0) {
        ct_error(CT_ERROR_VALUE, "glu", "glu does not support scalars because halving size must be even");
        return NULL;
    }
    int d;
    if (ct_wrap_dim("glu", dim, x->ndim, &d))
        return NULL;
    if (x->shape[d] % 2) {
        ct_error(CT_ERROR_VALUE, "glu", "Halving dimension must be even, but dimension %d is size %lld", d,
                 (long long)x->shape[d]);
        return NULL;
    }
    int64_t h = x->shape[d] / 2;
    COMPOSITE(r = ct_mul(ct_narrow(x, d, 0, h), ct_sigmoid(ct_narrow(x, d, h, h))));
}

/* x where x > 0, else weight * x; weight has one value or one per channel (dim 1). */
ct_tensor *ct_prelu(const ct_tensor *x, const ct_tensor *weight) {
    CT_CHECK_ARG("prelu", x);
    CT_CHECK_ARG("prelu", weight);
    CT_AUTOCAST_COMPOSITE2(prelu, x, weight);
    int64_t channels = x->ndim >= 2 ? x->shape[1] : 1;
    if (weight->ndim > 1 || (weight->numel != 1 && weight->numel != channels)) {
        ct_error(CT_ERROR_VALUE, "prelu",
                 "Mismatch of parameter numbers and input channel size. Found parameter numbers = %lld and channel "
                 "size = %lld.",
                 (long long)weight->numel, (long long)channels);
        return NULL;
    }
    COMPOSITE({
        const ct_tensor *w = weight;
        if (weight->numel > 1 || x->ndim >= 2) {
            int64_t shape[CT_MAX_DIMS];
            for (int i = 0; i < x->ndim; i++)
                shape[i] = i == 1 ? weight->numel : 1;
            w = ct_reshape(weight, shape, x->ndim);
        }
        r = ct_where(ct_gt_scalar(x, ct_scalar_int(0)), x, ct_mul(w, x));
    });
}

/* ------------------------------------------------------------------ products */

ct_tensor *ct_mv(const ct_tensor *m, const ct_tensor *v) {
    CT_CHECK_ARG("mv", m);
    CT_CHECK_ARG("mv", v);
    CT_AUTOCAST_COMPOSITE2(mv, m, v);
    if (m->ndim != 2 || v->ndim != 1) {
        ct_error(CT_ERROR_VALUE, "mv", "vector + matrix @ vector expected, got %d, %d", m->ndim, v->ndim);
        return NULL;
    }
    return ct_matmul(m, v);
}

/* beta * c + alpha * (m @ v); beta 0 ignores c's values (NaN included), as PyTorch. */
static ct_tensor *scaled_sum(const ct_tensor *c, const ct_tensor *p, ct_scalar beta, ct_scalar alpha) {
    bool beta0 = beta.type == CT_SCALAR_FLOAT ? beta.v.f == 0 : beta.v.i == 0;
    ct_tensor *ap = ct_mul_scalar(p, alpha);
    if (beta0)
        return ct_add(ct_zeros_like(c, CT_DTYPE_UNDEFINED), ap); /* c's shape and dtype, not its values */
    return ct_add(ct_mul_scalar(c, beta), ap);
}

ct_tensor *ct_addmv(const ct_tensor *c, const ct_tensor *m, const ct_tensor *v, ct_scalar beta, ct_scalar alpha) {
    CT_CHECK_ARG("addmv", c);
    CT_AUTOCAST_COMPOSITE3(addmv, c, m, v);
    COMPOSITE({
        ct_tensor *p = ct_mv(m, v);
        r = p ? scaled_sum(c, p, beta, alpha) : NULL;
    });
}

ct_tensor *ct_addr(const ct_tensor *c, const ct_tensor *a, const ct_tensor *b, ct_scalar beta, ct_scalar alpha) {
    CT_CHECK_ARG("addr", c);
    CT_AUTOCAST_COMPOSITE3(addr, c, a, b);
    COMPOSITE({
        ct_tensor *p = ct_outer(a, b);
        r = p ? scaled_sum(c, p, beta, alpha) : NULL;
    });
}

/* Sum over the last dims of both: shape a[:-1] + b[:-1]; a 0-d operand multiplies. */
ct_tensor *ct_inner(const ct_tensor *a, const ct_tensor *b) {
    CT_CHECK_ARG("inner", a);
    CT_CHECK_ARG("inner", b);
    if (a->ndim == 0 || b->ndim == 0)
        return ct_mul(a, b);
    int64_t k = a->shape[a->ndim - 1];
    if (b->shape[b->ndim - 1] != k) {
        char sa[96], sb[96];
        ct_error(CT_ERROR_VALUE, "inner",
                 "inner() the last dimension must match on both input tensors but got shapes %s and %s",
                 ct_shape_str(a->shape, a->ndim, sa, sizeof sa), ct_shape_str(b->shape, b->ndim, sb, sizeof sb));
        return NULL;
    }
    int64_t dims[2] = {a->ndim - 1, b->ndim - 1};
    return ct_tensordot(a, b, &dims[0], &dims[1], 1);
}

ct_tensor *ct_vdot(const ct_tensor *a, const ct_tensor *b) {
    CT_CHECK_ARG("vdot", a);
    CT_CHECK_ARG("vdot", b);
    if (a->ndim != 1 || b->ndim != 1) {
        ct_error(CT_ERROR_VALUE, "vdot", "1D tensors expected, but got %dD and %dD tensors", a->ndim, b->ndim);
        return NULL;
    }
    return ct_dot(a, b);
}

/* Contracts dims_a[i] of a with dims_b[i] of b: a's free dims, then b's. */
ct_tensor *ct_tensordot(const ct_tensor *a, const ct_tensor *b, const int64_t *dims_a, const int64_t *dims_b,
                        int n) {
    const char *op = "tensordot";
    CT_CHECK_ARG(op, a);
    CT_CHECK_ARG(op, b);
    CT_AUTOCAST_COMPOSITE2(tensordot, a, b);
    if (n < 0 || n > a->ndim || n > b->ndim || (n > 0 && (!dims_a || !dims_b))) {
        ct_error(CT_ERROR_VALUE, op, "tensordot expects as many dims to contract in both tensors, got %d", n);
        return NULL;
    }
    bool ca[CT_MAX_DIMS] = {false}, cb[CT_MAX_DIMS] = {false};
    int da[CT_MAX_DIMS], db[CT_MAX_DIMS];
    for (int i = 0; i < n; i++) {
        if (ct_wrap_dim(op, dims_a[i], a->ndim, &da[i]) || ct_wrap_dim(op, dims_b[i], b->ndim, &db[i]))
            return NULL;
        if (ca[da[i]] || cb[db[i]]) {
            ct_error(CT_ERROR_VALUE, op, "dim %d appears multiple times in the list of dims", ca[da[i]] ? da[i] : db[i]);
            return NULL;
        }
        ca[da[i]] = cb[db[i]] = true;
        if (a->shape[da[i]] != b->shape[db[i]]) {
            ct_error(CT_ERROR_VALUE, op, "contracted dimensions need to match, but first has size %lld in dim %d and "
                     "second has size %lld in dim %d",
                     (long long)a->shape[da[i]], da[i], (long long)b->shape[db[i]], db[i]);
            return NULL;
        }
    }
    /* a -> (free_a..., contracted...), b -> (contracted..., free_b...) */
    int64_t pa[CT_MAX_DIMS], pb[CT_MAX_DIMS], shape[2 * CT_MAX_DIMS];
    int na = 0, nb = 0, ns = 0;
    int64_t m = 1, k = 1, p = 1;
    for (int i = 0; i < a->ndim; i++)
        if (!ca[i]) {
            pa[na++] = i;
            shape[ns++] = a->shape[i];
            m *= a->shape[i];
        }
    for (int i = 0; i < n; i++) {
        pa[na++] = da[i];
        pb[nb++] = db[i];
        k *= a->shape[da[i]];
    }
    for (int i = 0; i < b->ndim; i++)
        if (!cb[i]) {
            pb[nb++] = i;
            shape[ns++] = b->shape[i];
            p *= b->shape[i];
        }
    if (ns > CT_MAX_DIMS) {
        ct_error(CT_ERROR_VALUE, op, "the result would have %d dims, more than %d", ns, CT_MAX_DIMS);
        return NULL;
    }
    COMPOSITE({
        ct_tensor *am = ct_reshape(ct_permute(a, pa, a->ndim), CT_SHAPE(m, k));
        ct_tensor *bm = ct_reshape(ct_permute(b, pb, b->ndim), CT_SHAPE(k, p));
        ct_tensor *prod = ct_mm(am, bm);
        r = prod ? ct_reshape(prod, shape, ns) : NULL;
    });
}

/* The Kronecker product: dims line up from the right, result size a_i * b_i. */
ct_tensor *ct_kron(const ct_tensor *a, const ct_tensor *b) {
    CT_CHECK_ARG("kron", a);
    CT_CHECK_ARG("kron", b);
    int nd = a->ndim > b->ndim ? a->ndim : b->ndim;
    if (2 * nd > CT_MAX_DIMS) {
        ct_error(CT_ERROR_VALUE, "kron", "inputs with %d dims are not supported", nd);
        return NULL;
    }
    int64_t sa[2 * CT_MAX_DIMS], sb[2 * CT_MAX_DIMS], out[CT_MAX_DIMS];
    for (int i = 0; i < nd; i++) {
        int ia = i - (nd - a->ndim), ib = i - (nd - b->ndim);
        int64_t x = ia >= 0 ? a->shape[ia] : 1, y = ib >= 0 ? b->shape[ib] : 1;
        sa[2 * i] = x, sa[2 * i + 1] = 1;
        sb[2 * i] = 1, sb[2 * i + 1] = y;
        if (!ct_size_mul(x, y, &out[i])) { /* Note [Checked sizes] */
            ct_error(CT_ERROR_VALUE, "kron", "the size of the result overflows int64 at dim %d (%lld * %lld)", i,
                     (long long)x, (long long)y);
            return NULL;
        }
    }
    COMPOSITE(r = ct_reshape(ct_mul(ct_reshape(a, sa, 2 * nd), ct_reshape(b, sb, 2 * nd)), out, nd));
}

/* torch.linalg.cross: the cross product along dim (size 3), operands broadcast. */
ct_tensor *ct_linalg_cross(const ct_tensor *a, const ct_tensor *b, int64_t dim) {
    const char *op = "linalg_cross";
    CT_CHECK_ARG(op, a);
    CT_CHECK_ARG(op, b);
    CT_AUTOCAST_COMPOSITE2(linalg_cross, a, b);
    if (a->ndim != b->ndim) {
        ct_error(CT_ERROR_VALUE, op, "linalg.cross: inputs must have the same number of dimensions.");
        return NULL;
    }
    int d;
    if (ct_wrap_dim(op, dim, a->ndim, &d))
        return NULL;
    if (a->shape[d] != 3 || b->shape[d] != 3) {
        ct_error(CT_ERROR_VALUE, op, "linalg.cross: inputs dimension %d must have length 3. Got %lld and %lld", d,
                 (long long)a->shape[d], (long long)b->shape[d]);
        return NULL;
    }
    COMPOSITE({
        ct_tensor *ac[3], *bc[3], *c[3];
        for (int i = 0; i < 3; i++) {
            ac[i] = ct_narrow(a, d, i, 1);
            bc[i] = ct_narrow(b, d, i, 1);
        }
        for (int i = 0; i < 3; i++)
            c[i] = ct_sub(ct_mul(ac[(i + 1) % 3], bc[(i + 2) % 3]), ct_mul(ac[(i + 2) % 3], bc[(i + 1) % 3]));
        r = ct_cat((const ct_tensor *const *)c, 3, d);
    });
}

/* 1-D: a matrix with x on diagonal k; 2-D: a copy of diagonal k. */
ct_tensor *ct_diag(const ct_tensor *x, int64_t k) {
    CT_CHECK_ARG("diag", x);
    if (x->ndim == 2)
        return ct_clone(ct_diagonal(x, k, 0, 1));
    if (x->ndim != 1) {
        ct_error(CT_ERROR_VALUE, "diag", "diag(): Supports 1D or 2D tensors. Got %dD", x->ndim);
        return NULL;
    }
    if (k == INT64_MIN) { /* |k| is no int64; the result's size would overflow anyway */
        ct_error(CT_ERROR_VALUE, "diag", "the size of the result overflows int64 (diagonal %lld)", (long long)k);
        return NULL;
    }
    int64_t n = x->shape[0], a = k >= 0 ? k : -k;
    COMPOSITE({
        ct_tensor *eye = ct_eye(n, n, x->dtype, x->device);
        ct_tensor *m = ct_mul(ct_unsqueeze(x, 1), eye);
        /* shift onto diagonal k: columns on the left and rows at the bottom for k > 0 */
        int64_t pad[4] = {k >= 0 ? a : 0, k >= 0 ? 0 : a, k >= 0 ? 0 : a, k >= 0 ? a : 0};
        r = a ? ct_pad(m, pad, 4, "constant", 0) : m;
    });
}

/* The sum of the main diagonal of a matrix (integers give int64, as sum). */
ct_tensor *ct_trace(const ct_tensor *x) {
    CT_CHECK_ARG("trace", x);
    if (x->ndim != 2) {
        ct_error(CT_ERROR_VALUE, "trace", "trace: expected a matrix, but got tensor with dim %d", x->ndim);
        return NULL;
    }
    return ct_sum(ct_diagonal(x, 0, 0, 1), NULL, 0, false, CT_DTYPE_UNDEFINED);
}

/* ------------------------------------------------------------------ order statistics */

ct_status ct_aminmax(const ct_tensor *x, const int64_t *dim, bool keepdim, ct_tensor **min, ct_tensor **max) {
    CT_CHECK_ARG_STATUS("aminmax", x);
    if (!min || !max)
        return ct_error(CT_ERROR_NULL_ARGUMENT, "aminmax", "min and max must not be NULL");
    *min = *max = NULL;
    ct_scope_begin();
    ct_tensor *lo = ct_amin(x, dim, dim ? 1 : 0, keepdim), *hi = lo ? ct_amax(x, dim, dim ? 1 : 0, keepdim) : NULL;
    ct_status st = hi ? CT_OK : ct_last_status();
    if (st == CT_OK) {
        *min = ct_keep(lo);
        *max = ct_keep(hi);
    }
    ct_scope_end();
    return st;
}

/* Note [Median by sorting]
 * The lower median of a row of n is its element (n - 1) / 2 in a stable ascending
 * sort, which puts NaNs last in their original order. median returns NaN, with the
 * index of the row's first NaN, when the row has one; nanmedian takes the lower median
 * of the k non-NaN values, element (k - 1) / 2, and NaN only for an all-NaN row (with
 * the index of the row's middle, as PyTorch). Ties give the index that position holds
 * in the stable order. */
static ct_status median_impl(const char *op, const ct_tensor *x, int64_t dim, bool keepdim, bool skip_nan,
                             ct_tensor **values, ct_tensor **indices) {
    CT_CHECK_ARG_STATUS(op, x);
    if (!values)
        return ct_error(CT_ERROR_NULL_ARGUMENT, op, "values must not be NULL");
    *values = NULL;
    if (indices)
        *indices = NULL;
    if (x->dtype == CT_DTYPE_BOOL)
        return ct_error(CT_ERROR_TYPE, op, "\"%s_cpu\" not implemented for 'bool'", op);
    int d = 0;
    if (x->ndim && ct_wrap_dim(op, dim, x->ndim, &d))
        return ct_last_status();
    int64_t n = x->ndim ? x->shape[d] : 1;
    if (n == 0)
        return ct_error(CT_ERROR_INDEX, op, "%s(): Expected reduction dim %d to have non-zero size.", op, d);
    ct_scope_begin();
    ct_tensor *si = NULL;
    ct_tensor *sv = ct_sort(x, d, false, &si);
    ct_tensor *pos = NULL;
    if (sv && ct_dtype_is_floating(x->dtype)) {
        ct_tensor *nans = ct_sum(ct_isnan(x), (int64_t[]){d}, x->ndim ? 1 : 0, true, CT_DTYPE_INT64);
        ct_tensor *k = ct_add_scalar(ct_neg(nans), ct_scalar_int(n)); /* non-NaN count */
        ct_tensor *mid = ct_full_like(k, ct_scalar_int((n - 1) / 2), CT_DTYPE_UNDEFINED);
        if (skip_nan) /* (k - 1) / 2, or the whole row's middle for an all-NaN row */
            pos = ct_where(ct_gt_scalar(k, ct_scalar_int(0)),
                           ct_div_scalar_mode(ct_sub_scalar(k, ct_scalar_int(1)), ct_scalar_int(2), CT_ROUNDING_MODE_FLOOR),
                           mid);
        else /* the first NaN where there is one */
            pos = ct_where(ct_gt_scalar(nans, ct_scalar_int(0)), k, mid);
    } else if (sv) {
        int64_t shape[CT_MAX_DIMS];
        memcpy(shape, x->shape, sizeof(int64_t) * (size_t)x->ndim);
        if (x->ndim)
            shape[d] = 1;
        pos = ct_full(shape, x->ndim, ct_scalar_int((n - 1) / 2), CT_DTYPE_INT64, x->device);
    }
    ct_tensor *v = pos ? ct_gather(sv, d, pos) : NULL, *i = v ? ct_gather(si, d, pos) : NULL;
    if (i && !keepdim && x->ndim) {
        v = ct_squeeze_dim(v, d);
        i = ct_squeeze_dim(i, d);
    }
    ct_status st = i ? CT_OK : ct_last_status();
    if (st == CT_OK) {
        *values = ct_keep(v);
        if (indices)
            *indices = ct_keep(i);
    }
    ct_scope_end();
    return st;
}

ct_status ct_median_dim(const ct_tensor *x, int64_t dim, bool keepdim, ct_tensor **values, ct_tensor **indices) {
    return median_impl("median", x, dim, keepdim, false, values, indices);
}
ct_status ct_nanmedian_dim(const ct_tensor *x, int64_t dim, bool keepdim, ct_tensor **values, ct_tensor **indices) {
    return median_impl("nanmedian", x, dim, keepdim, true, values, indices);
}

static ct_tensor *median_all(const char *op, const ct_tensor *x, bool skip_nan) {
    CT_CHECK_ARG(op, x);
    if (x->numel == 0) { /* PyTorch gives NaN for an empty input */
        if (!ct_dtype_is_floating(x->dtype)) {
            ct_error(CT_ERROR_INDEX, op, "%s() input tensor cannot be empty", op);
            return NULL;
        }
        return ct_full(NULL, 0, ct_scalar_float(NAN), x->dtype, x->device);
    }
    COMPOSITE({
        ct_tensor *v = NULL;
        if (median_impl(op, ct_reshape(x, CT_SHAPE(-1)), 0, false, skip_nan, &v, NULL) == CT_OK)
            r = v;
    });
}
ct_tensor *ct_median(const ct_tensor *x) { return median_all("median", x, false); }
ct_tensor *ct_nanmedian(const ct_tensor *x) { return median_all("nanmedian", x, true); }

/* Sorted values along dim 0. */
ct_tensor *ct_msort(const ct_tensor *x) {
    CT_CHECK_ARG("msort", x);
    return ct_sort(x, 0, false, NULL);
}

/* Note [Quantile]
 * As PyTorch: the input sorted along dim (NaNs last), q's position (n - 1) * q between
 * two neighbours, then linear interpolation, the lower or higher neighbour, their
 * midpoint, or the nearest one (halves to even, as torch.round). A row holding a NaN
 * gives NaN. nanquantile uses (k - 1) * q over the row's k non-NaN values instead (which
 * the sort put first), and gives NaN only for a row of NaNs. q is a 0-d or 1-d tensor;
 * a 1-d q puts its dimension first. dim NULL flattens the input. */
static ct_tensor *quantile_impl(const char *op, const ct_tensor *x, const ct_tensor *q, const int64_t *dim,
                                bool keepdim, const char *interpolation, bool skip_nan) {
    CT_CHECK_ARG(op, x);
    CT_CHECK_ARG(op, q);
    const char *modes[] = {"linear", "lower", "higher", "midpoint", "nearest"};
    int mode = -1;
    for (int i = 0; i < 5; i++)
        if (interpolation && !strcmp(interpolation, modes[i]))
            mode = i;
    if (mode < 0) {
        ct_error(CT_ERROR_VALUE, op,
                 "quantile() interpolation must be one of linear, lower, higher, midpoint or nearest. Found '%s'",
                 interpolation ? interpolation : "(null)");
        return NULL;
    }
    if (x->dtype != CT_DTYPE_FLOAT32 && x->dtype != CT_DTYPE_FLOAT64) {
        ct_error(CT_ERROR_TYPE, op, "quantile() input tensor must be either float or double dtype");
        return NULL;
    }
    if (q->dtype != x->dtype) {
        ct_error(CT_ERROR_TYPE, op, "quantile() q tensor must be same dtype as the input tensor");
        return NULL;
    }
    if (q->ndim > 1) {
        ct_error(CT_ERROR_VALUE, op, "quantile() q must be a scalar or 1D tensor");
        return NULL;
    }
    if (x->numel == 0 && !dim) {
        ct_error(CT_ERROR_INDEX, op, "quantile() input tensor must be non-empty");
        return NULL;
    }
    double qmin = 0, qmax = 0;
    /* the range check reads q on the host: under a capture the error names this op */
    if (q->numel > 0 && q->device.type != CT_DEVICE_META &&
        (ct_core_host_read(op) || ct_item_double(ct_amin(q, NULL, 0, false), &qmin) ||
         ct_item_double(ct_amax(q, NULL, 0, false), &qmax)))
        return NULL;
    if (!(qmin >= 0 && qmax <= 1)) {
        ct_error(CT_ERROR_VALUE, op, "quantile() q values must be in the range [0, 1]");
        return NULL;
    }
    int d = 0;
    if (dim && ct_wrap_dim(op, *dim, x->ndim, &d))
        return NULL;
    ct_scope_begin();
    /* rows along the last dim: (..., n) */
    const ct_tensor *src = dim ? ct_movedim(x, d, -1) : ct_reshape(x, CT_SHAPE(-1));
    ct_tensor *r = NULL;
    if (src) {
        int nd = src->ndim;
        int64_t n = nd ? src->shape[nd - 1] : 1, nq = q->numel;
        ct_tensor *sorted = ct_sort(src, -1, false, NULL); /* NaNs last */
        ct_tensor *nans = ct_sum(ct_isnan(src), (int64_t[]){-1}, 1, true, x->dtype);
        ct_tensor *k = ct_add_scalar(ct_neg(nans), ct_scalar_int(n)); /* values that count, (..., 1) */
        /* rows whose answer is NaN: any NaN (quantile), no value at all (nanquantile) */
        ct_tensor *invalid = skip_nan ? ct_eq_scalar(k, ct_scalar_int(0)) : ct_gt_scalar(nans, ct_scalar_int(0));
        /* positions (nq, ..., 1): q (k - 1), q (n - 1) when NaN rows give NaN anyway */
        int64_t qshape[CT_MAX_DIMS + 1], ishape[CT_MAX_DIMS + 1], bshape[CT_MAX_DIMS + 1];
        qshape[0] = ishape[0] = bshape[0] = nq;
        for (int i = 1; i <= nd; i++) {
            qshape[i] = 1;
            ishape[i] = bshape[i] = i < nd ? src->shape[i - 1] : 1;
        }
        bshape[nd] = n;
        ct_tensor *qc = ct_reshape(q, qshape, nd + 1);
        ct_tensor *last = skip_nan ? ct_unsqueeze(ct_sub_scalar(k, ct_scalar_int(1)), 0)
                                   : ct_full(NULL, 0, ct_scalar_int(n - 1), x->dtype, x->device);
        ct_scalar zero = ct_scalar_int(0);
        ct_tensor *pos = ct_expand(ct_clamp(ct_mul(qc, last), &zero, NULL), ishape, nd + 1);
        ct_tensor *lo = mode == 4 ? ct_round(pos) : ct_floor(pos), *hi = mode == 4 ? lo : ct_ceil(pos);
        ct_tensor *rows = ct_expand(ct_unsqueeze(sorted, 0), bshape, nd + 1); /* (nq, ..., n) */
        ct_tensor *vlo = ct_gather(rows, nd, ct_to_dtype(lo, CT_DTYPE_INT64));
        ct_tensor *vhi = ct_gather(rows, nd, ct_to_dtype(hi, CT_DTYPE_INT64));
        ct_tensor *v = NULL;
        switch (mode) {
        case 0: v = ct_lerp(vlo, vhi, ct_sub(pos, lo)); break;
        case 1: case 4: v = vlo; break;
        case 2: v = vhi; break;
        default: v = ct_mul_scalar(ct_add(vlo, vhi), ct_scalar_float(0.5)); break;
        }
        v = ct_where_scalar_self(ct_unsqueeze(invalid, 0), ct_scalar_float(NAN), v); /* (nq, ..., 1) */
        v = v ? ct_squeeze_dim(v, nd) : NULL;                                         /* (nq, ...) */
        if (v && keepdim) {
            if (dim) {
                v = ct_unsqueeze(v, d + 1);
            } else {
                int64_t ks[CT_MAX_DIMS + 1];
                ks[0] = nq;
                for (int i = 0; i < x->ndim; i++)
                    ks[i + 1] = 1;
                v = ct_reshape(v, ks, x->ndim + 1);
            }
        }
        if (v && q->ndim == 0)
            v = ct_squeeze_dim(v, 0);
        r = v;
    }
    ct_keep(r);
    ct_scope_end();
    return r;
}

ct_tensor *ct_quantile(const ct_tensor *x, const ct_tensor *q, const int64_t *dim, bool keepdim,
                       const char *interpolation) {
    return quantile_impl("quantile", x, q, dim, keepdim, interpolation, false);
}

/* quantile over the values that are not NaN; NaN for a row of NaNs only. */
ct_tensor *ct_nanquantile(const ct_tensor *x, const ct_tensor *q, const int64_t *dim, bool keepdim,
                          const char *interpolation) {
    return quantile_impl("nanquantile", x, q, dim, keepdim, interpolation, true);
}

/* The n-th forward difference along dim, with optional tensors joined before and after
 * (NULL: none). bool differences are logical xor. */
ct_tensor *ct_diff(const ct_tensor *x, int64_t n, int64_t dim, const ct_tensor *prepend, const ct_tensor *append) {
    const char *op = "diff";
    CT_CHECK_ARG(op, x);
    if (x->ndim == 0) {
        ct_error(CT_ERROR_VALUE, op, "diff expects input to be at least one-dimensional");
        return NULL;
    }
    if (n < 0) {
        ct_error(CT_ERROR_VALUE, op, "order must be non-negative but got %lld", (long long)n);
        return NULL;
    }
    int d;
    if (ct_wrap_dim(op, dim, x->ndim, &d))
        return NULL;
    COMPOSITE({
        const ct_tensor *parts[3];
        int np = 0;
        if (prepend)
            parts[np++] = prepend;
        parts[np++] = x;
        if (append)
            parts[np++] = append;
        ct_tensor *cur = np > 1 ? ct_cat(parts, np, d) : ct_alias(x);
        for (int64_t i = 0; i < n && cur; i++) {
            int64_t len = cur->shape[d];
            if (len == 0)
                break;
            ct_tensor *hi = ct_narrow(cur, d, 1, len - 1), *lo = ct_narrow(cur, d, 0, len - 1);
            cur = cur->dtype == CT_DTYPE_BOOL ? ct_logical_xor(hi, lo) : ct_sub(hi, lo);
        }
        r = cur;
    });
}

/* The number of (i, j), 0 <= i < rows, 0 <= j < cols, with j - i <= offset: row i
 * holds clamp(i + offset + 1, 0, cols) of them. */
static __int128 tril_count(int64_t rows, int64_t cols, __int128 offset) {
    __int128 ia = -offset, ib = (__int128)cols - offset - 1; /* rows from ia hold some, from ib all */
    if (ia < 0)
        ia = 0;
    if (ia > rows)
        ia = rows;
    if (ib < ia)
        ib = ia;
    if (ib > rows)
        ib = rows;
    __int128 n = ib - ia; /* rows ia..ib-1 hold i + offset + 1 each */
    return n * (offset + 1) + (ia + ib - 1) * n / 2 + (rows - ib) * cols;
}

/* The (row, col) indices of a lower or upper triangle, as a (2, N) int64 tensor in
 * row-major order. */
static ct_tensor *tri_indices(const char *op, int64_t rows, int64_t cols, int64_t offset, bool lower, ct_dtype dtype,
                              ct_device device) {
    if (rows < 0 || cols < 0) {
        ct_error(CT_ERROR_VALUE, op, "row must be non-negative, got %lld", (long long)(rows < 0 ? rows : cols));
        return NULL;
    }
    if (dtype == CT_DTYPE_UNDEFINED)
        dtype = CT_DTYPE_INT64;
    if (dtype != CT_DTYPE_INT64 && dtype != CT_DTYPE_INT32) {
        ct_error(CT_ERROR_TYPE, op, "\"%s\" not implemented for '%s'", op, ct_dtype_name(dtype));
        return NULL;
    }
    /* The count in closed form (PyTorch's get_tril_size), in 128 bits: counting cell by
     * cell took rows * cols steps before any check (2^80 for a 2^40 x 2^40 triangle). */
    __int128 count = lower ? tril_count(rows, cols, offset)
                           : (__int128)rows * cols - tril_count(rows, cols, (__int128)offset - 1);
    if (count > INT64_MAX / 2) {
        ct_error(CT_ERROR_VALUE, op, "the number of indices of a %lld x %lld triangle overflows int64",
                 (long long)rows, (long long)cols);
        return NULL;
    }
    int64_t n = (int64_t)count;
    if (device.type == CT_DEVICE_META) /* no data: only the shape */
        return ct_empty(CT_SHAPE(2, n), dtype, device);
    /* Note [Indices written on the host]: the indices are written through the data
     * pointer, which a ct_compile capture does not see. So h is made by the core, not by
     * a dispatched factory (a replay would run that factory again and return its
     * uninitialized memory): a capture holds h as a constant, and the result is always a
     * recorded copy of it, new on every call. */
    COMPOSITE({
        ct_tensor *h = ct_tensor_new(op, (int64_t[]){2, n}, NULL, 2, CT_DTYPE_INT64, CT_CPU);
        if (h) {
            int64_t *p = ct_tensor_data(h), k = 0;
            /* row i holds columns [max(0, i + offset), cols) (upper) or [0, min(cols, i +
             * offset + 1)) (lower): only the rows that hold some are visited */
            for (int64_t i = 0; i < rows && k < n; i++) {
                __int128 a = lower ? 0 : (__int128)i + offset, b = lower ? (__int128)i + offset + 1 : cols;
                if (a < 0)
                    a = 0;
                if (b > cols)
                    b = cols;
                if (lower && b <= 0) { /* the first row with an entry is -offset */
                    __int128 before = -(__int128)offset - 1;
                    if (before >= rows)
                        break;
                    i = (int64_t)before;
                    continue;
                }
                for (__int128 j = a; j < b; j++, k++) {
                    p[k] = i;
                    p[n + k] = (int64_t)j;
                }
            }
            r = ct_to_device(ct_to_dtype(h, dtype), device);
            if (r == h)
                r = ct_clone(h);
        }
    });
}
ct_tensor *ct_tril_indices(int64_t rows, int64_t cols, int64_t offset, ct_dtype dtype, ct_device device) {
    return tri_indices("tril_indices", rows, cols, offset, true, dtype, device);
}
ct_tensor *ct_triu_indices(int64_t rows, int64_t cols, int64_t offset, ct_dtype dtype, ct_device device) {
    return tri_indices("triu_indices", rows, cols, offset, false, dtype, device);
}

/* p-norm distances between the rows of x1 (..., P, M) and x2 (..., R, M): (..., P, R),
 * from the differences themselves (exact; PyTorch may use a matrix-product form for
 * p = 2 on large inputs). */
ct_tensor *ct_cdist(const ct_tensor *x1, const ct_tensor *x2, double p) {
    const char *op = "cdist";
    CT_CHECK_ARG(op, x1);
    CT_CHECK_ARG(op, x2);
    CT_AUTOCAST_COMPOSITE2(cdist, x1, x2);
    if (x1->ndim < 2 || x2->ndim < 2) {
        ct_error(CT_ERROR_VALUE, op, "cdist only supports at least 2D tensors, X1 got: %dD, X2 got: %dD", x1->ndim,
                 x2->ndim);
        return NULL;
    }
    if (x1->shape[x1->ndim - 1] != x2->shape[x2->ndim - 1]) {
        ct_error(CT_ERROR_VALUE, op, "X1 and X2 must have the same number of columns. X1: %lld X2: %lld",
                 (long long)x1->shape[x1->ndim - 1], (long long)x2->shape[x2->ndim - 1]);
        return NULL;
    }
    if (!(p >= 0)) {
        ct_error(CT_ERROR_VALUE, op, "cdist only supports non-negative p values");
        return NULL;
    }
    if (ct_nn_need_float_dtype(op, promoted(x1, x2)))
        return NULL;
    COMPOSITE({
        ct_tensor *dif = ct_sub(ct_unsqueeze(x1, -2), ct_unsqueeze(x2, -3)); /* (..., P, R, M) */
        r = ct_linalg_vector_norm(dif, p, (int64_t[]){-1}, 1, false, CT_DTYPE_UNDEFINED);
    });
}

/* ------------------------------------------------------------------ binning */

/* Note [Bucketize by comparison]
 * The index binary search finds is a count: for side left, the boundaries b with
 * !(b >= v), for side right those with !(b > v) (so a NaN value lands after every
 * boundary, as PyTorch's search). Broadcasting the comparison gives it in one pass
 * over a (values x boundaries) grid; that costs memory proportional to both sizes,
 * which suits the modest boundary lists these functions usually get. */
static ct_tensor *count_below(const ct_tensor *seq, const ct_tensor *v, bool right, bool out_int32) {
    /* seq (..., M), v (..., N) -> (..., N) */
    ct_tensor *s = ct_unsqueeze(seq, -2), *x = ct_unsqueeze(v, -1);
    ct_tensor *after = ct_logical_not(right ? ct_gt(s, x) : ct_ge(s, x));
    return ct_sum(after, (int64_t[]){-1}, 1, false, out_int32 ? CT_DTYPE_INT32 : CT_DTYPE_INT64);
}

ct_tensor *ct_bucketize(const ct_tensor *x, const ct_tensor *boundaries, bool right, bool out_int32) {
    CT_CHECK_ARG("bucketize", x);
    CT_CHECK_ARG("bucketize", boundaries);
    if (boundaries->ndim != 1) {
        ct_error(CT_ERROR_VALUE, "bucketize", "boundaries tensor must be 1 dimension, but got dim(%d)", boundaries->ndim);
        return NULL;
    }
    if (x->dtype == CT_DTYPE_BOOL || boundaries->dtype == CT_DTYPE_BOOL) {
        ct_error(CT_ERROR_TYPE, "bucketize", "\"bucketize\" not implemented for 'bool'");
        return NULL;
    }
    COMPOSITE({
        ct_tensor *flat = ct_reshape(x, CT_SHAPE(-1));
        ct_tensor *c = flat ? count_below(boundaries, flat, right, out_int32) : NULL;
        r = c ? ct_reshape(c, x->shape, x->ndim) : NULL;
    });
}

ct_tensor *ct_searchsorted(const ct_tensor *sorted, const ct_tensor *values, bool right, bool out_int32) {
    const char *op = "searchsorted";
    CT_CHECK_ARG(op, sorted);
    CT_CHECK_ARG(op, values);
    if (sorted->ndim == 0) {
        ct_error(CT_ERROR_VALUE, op, "torch.searchsorted(): input value can be a scalar only when boundaries tensor "
                 "dimension is 1, but we got boundaries tensor dim(0) and input value's dim(%d) numbers of dimensions",
                 values->ndim);
        return NULL;
    }
    if (sorted->dtype == CT_DTYPE_BOOL || values->dtype == CT_DTYPE_BOOL) {
        ct_error(CT_ERROR_TYPE, op, "\"searchsorted\" not implemented for 'bool'");
        return NULL;
    }
    if (sorted->ndim == 1)
        return ct_bucketize(values, sorted, right, out_int32);
    bool same = values->ndim == sorted->ndim;
    for (int i = 0; same && i < sorted->ndim - 1; i++)
        same = values->shape[i] == sorted->shape[i];
    if (!same) {
        ct_error(CT_ERROR_VALUE, op, "torch.searchsorted(): boundaries tensor should be 1 dimension or the first N-1 "
                 "dimensions of boundaries tensor and input value tensor must match");
        return NULL;
    }
    COMPOSITE(r = count_below(sorted, values, right, out_int32));
}

/* Counts of each value of a 1-D non-negative integer tensor (or sums of weights), of
 * length max(x) + 1 and at least minlength. The length depends on the data: one sync
 * on a GPU, and no META form. */
ct_tensor *ct_bincount(const ct_tensor *x, const ct_tensor *weights, int64_t minlength) {
    const char *op = "bincount";
    CT_CHECK_ARG(op, x);
    if (x->ndim != 1 || !ct_dtype_is_integral(x->dtype, false)) {
        ct_error(CT_ERROR_VALUE, op, "bincount only supports 1-d non-negative integral inputs.");
        return NULL;
    }
    if (minlength < 0) {
        ct_error(CT_ERROR_VALUE, op, "minlength should be >= 0");
        return NULL;
    }
    if (weights && (weights->ndim != 1 || weights->shape[0] != x->shape[0])) {
        ct_error(CT_ERROR_VALUE, op, "weights should be 1-d and have the same length as input");
        return NULL;
    }
    if (x->device.type == CT_DEVICE_META) {
        ct_error(CT_ERROR_NOT_IMPLEMENTED, op, "the length of bincount's result depends on the data; META has none");
        return NULL;
    }
    COMPOSITE({
        double lo = 0, hi = -1;
        if (x->numel == 0 || (ct_core_host_read(op) == CT_OK && ct_item_double(ct_amin(x, NULL, 0, false), &lo) == CT_OK &&
                              ct_item_double(ct_amax(x, NULL, 0, false), &hi) == CT_OK)) {
            if (lo < 0) {
                ct_error(CT_ERROR_VALUE, op, "bincount only supports 1-d non-negative integral inputs.");
            } else {
                int64_t n = (int64_t)hi + 1 > minlength ? (int64_t)hi + 1 : minlength;
                /* float weights keep their dtype; other weights count in float64, as PyTorch */
                ct_dtype dt = !weights ? CT_DTYPE_INT64
                              : weights->dtype == CT_DTYPE_FLOAT32 || weights->dtype == CT_DTYPE_FLOAT64 ? weights->dtype
                                                                                                        : CT_DTYPE_FLOAT64;
                ct_tensor *src = weights ? ct_to_dtype(weights, dt) : ct_ones_like(x, CT_DTYPE_INT64);
                ct_tensor *zeros = ct_zeros(CT_SHAPE(n), dt, x->device);
                r = src && zeros ? ct_index_add(zeros, 0, ct_to_dtype(x, CT_DTYPE_INT64), src, ct_scalar_int(1)) : NULL;
            }
        }
    });
}

/* A histogram of bins equal bins over [min, max] (both 0: the data's range, widened by
 * 1 each side when it is a single value); values outside, and NaN, are not counted. */
ct_tensor *ct_histc(const ct_tensor *x, int64_t bins, double min, double max) {
    const char *op = "histc";
    CT_CHECK_ARG(op, x);
    if (!ct_dtype_is_floating(x->dtype)) {
        ct_error(CT_ERROR_TYPE, op, "\"histogram_cpu\" not implemented for '%s'", ct_dtype_name(x->dtype));
        return NULL;
    }
    if (bins <= 0) {
        ct_error(CT_ERROR_VALUE, op, "torch.histc(): bins must be > 0, but got %lld for dim 0", (long long)bins);
        return NULL;
    }
    if (x->device.type == CT_DEVICE_META && min == max) {
        ct_error(CT_ERROR_NOT_IMPLEMENTED, op, "histc's range depends on the data here; META has none");
        return NULL;
    }
    COMPOSITE({
        double lo = min, hi = max;
        bool ok = true;
        if (lo == hi && x->numel > 0)
            ok = ct_core_host_read(op) == CT_OK && ct_item_double(ct_amin(x, NULL, 0, false), &lo) == CT_OK &&
                 ct_item_double(ct_amax(x, NULL, 0, false), &hi) == CT_OK;
        if (ok && lo == hi) {
            lo -= 1;
            hi += 1;
        }
        if (ok && (!(lo <= hi) || isinf(lo) || isinf(hi) || isnan(lo) || isnan(hi))) {
            ct_error(CT_ERROR_VALUE, op, "torch.histc(): range of [%g, %g] is not finite", lo, hi);
            ok = false;
        }
        if (ok) {
            /* bin = (x - lo) * bins / (hi - lo), the top edge falling in the last bin */
            ct_tensor *in = ct_logical_and(ct_ge_scalar(x, ct_scalar_float(lo)), ct_le_scalar(x, ct_scalar_float(hi)));
            ct_tensor *pos = ct_div_scalar(ct_mul_scalar(ct_sub_scalar(ct_to_dtype(x, CT_DTYPE_FLOAT64), ct_scalar_float(lo)),
                                                         ct_scalar_int(bins)),
                                           ct_scalar_float(hi - lo));
            ct_scalar top = ct_scalar_int(bins - 1);
            ct_tensor *idx = ct_clamp(ct_to_dtype(ct_where_scalar_other(in, pos, ct_scalar_int(0)), CT_DTYPE_INT64), NULL, &top);
            ct_tensor *w = ct_to_dtype(in, x->dtype);
            ct_tensor *zeros = ct_zeros(CT_SHAPE(bins), x->dtype, x->device);
            r = ct_index_add(zeros, 0, ct_reshape(idx, CT_SHAPE(-1)), ct_reshape(w, CT_SHAPE(-1)), ct_scalar_int(1));
        }
    });
}

/* Note [logcumsumexp as a scan]
 * log(cumsum(exp(x))) along dim, by log2(n) rounds of r = logaddexp(r, r shifted by
 * 2^k) with -inf shifted in (a Hillis-Steele scan). Every step is logaddexp's stable
 * form, so no element underflows however far it lies below the row's maximum (a
 * single shift by the maximum would lose the early elements), and the gradient comes
 * through logaddexp's. */
ct_tensor *ct_logcumsumexp(const ct_tensor *x, int64_t dim) {
    const char *op = "logcumsumexp";
    CT_CHECK_ARG(op, x);
    if (ct_nn_need_float_dtype(op, x->dtype))
        return NULL;
    int d = 0;
    if (x->ndim && ct_wrap_dim(op, dim, x->ndim, &d))
        return NULL;
    int64_t n = x->ndim ? x->shape[d] : 1;
    COMPOSITE({
        r = ct_alias(x);
        for (int64_t s = 1; s < n && r; s *= 2) {
            int64_t shape[CT_MAX_DIMS];
            memcpy(shape, x->shape, sizeof(int64_t) * (size_t)x->ndim);
            shape[d] = s;
            const ct_tensor *parts[2] = {ct_full(shape, x->ndim, ct_scalar_float(-INFINITY), x->dtype, x->device),
                                         ct_narrow(r, d, 0, n - s)};
            ct_tensor *shifted = parts[0] && parts[1] ? ct_cat(parts, 2, d) : NULL;
            r = shifted ? ct_logaddexp(r, shifted) : NULL;
        }
    });
}

/* ------------------------------------------------------------------ arrangement */

/* Rotates by k quarter turns in the plane of dims[0] -> dims[1]. */
ct_tensor *ct_rot90(const ct_tensor *x, int64_t k, const int64_t *dims, int ndims) {
    const char *op = "rot90";
    CT_CHECK_ARG(op, x);
    int64_t dflt[2] = {0, 1};
    if (!dims) {
        dims = dflt;
        ndims = 2;
    }
    if (ndims != 2) {
        ct_error(CT_ERROR_VALUE, op, "expected total rotation dims == 2, but got dims = %d", ndims);
        return NULL;
    }
    if (x->ndim < 2) {
        ct_error(CT_ERROR_VALUE, op, "expected total dims >= 2, but got total dims = %d", x->ndim);
        return NULL;
    }
    int d0, d1;
    if (ct_wrap_dim(op, dims[0], x->ndim, &d0) || ct_wrap_dim(op, dims[1], x->ndim, &d1))
        return NULL;
    if (d0 == d1) {
        ct_error(CT_ERROR_VALUE, op, "expected rotation dims to be different, but got dim0 = %d and dim1 = %d", d0, d1);
        return NULL;
    }
    int64_t turns = ((k % 4) + 4) % 4;
    COMPOSITE({
        if (turns == 0)
            r = ct_clone(x);
        else if (turns == 1)
            r = ct_contiguous(ct_transpose(ct_flip(x, (int64_t[]){d1}, 1), d0, d1));
        else if (turns == 2)
            r = ct_flip(x, (int64_t[]){d0, d1}, 2);
        else
            r = ct_contiguous(ct_transpose(ct_flip(x, (int64_t[]){d0}, 1), d0, d1));
    });
}

/* The last dim of x laid on diagonal offset of a new (dim1, dim2) plane (default the
 * last two dims of the result). */
ct_tensor *ct_diag_embed(const ct_tensor *x, int64_t offset, int64_t dim1, int64_t dim2) {
    const char *op = "diag_embed";
    CT_CHECK_ARG(op, x);
    if (x->ndim < 1) {
        ct_error(CT_ERROR_VALUE, op, "diag_embed(): input must be at least 1-dimensional");
        return NULL;
    }
    int nd = x->ndim + 1, d1, d2;
    if (ct_wrap_dim(op, dim1, nd, &d1) || ct_wrap_dim(op, dim2, nd, &d2))
        return NULL;
    if (d1 == d2) {
        ct_error(CT_ERROR_VALUE, op, "diagonal dimensions cannot be identical %lld, %lld", (long long)dim1,
                 (long long)dim2);
        return NULL;
    }
    if (offset == INT64_MIN) { /* |offset| is no int64; the result's size would overflow anyway */
        ct_error(CT_ERROR_VALUE, op, "the size of the result overflows int64 (offset %lld)", (long long)offset);
        return NULL;
    }
    int64_t n = x->shape[x->ndim - 1], a = offset >= 0 ? offset : -offset;
    COMPOSITE({
        /* (..., n, n) with x on the main diagonal, shifted like diag, then the two new
         * dims moved where they were asked for */
        ct_tensor *m = ct_mul(ct_unsqueeze(x, -1), ct_eye(n, n, x->dtype, x->device));
        int64_t pad[4] = {offset >= 0 ? a : 0, offset >= 0 ? 0 : a, offset >= 0 ? 0 : a, offset >= 0 ? a : 0};
        if (a && m)
            m = ct_pad(m, pad, 4, "constant", 0);
        if (m) {
            /* m is (batch..., row, col): row goes to dim1, col to dim2, batch dims keep
             * their order in the other places */
            int64_t perm[CT_MAX_DIMS];
            int b = 0;
            for (int j = 0; j < nd; j++)
                perm[j] = j == d1 ? nd - 2 : j == d2 ? nd - 1 : b++;
            r = ct_permute(m, perm, nd);
        }
    });
}

/* A block-diagonal matrix of 0-, 1- (one row) and 2-D tensors, in their promoted dtype. */
ct_tensor *ct_block_diag(const ct_tensor *const *tensors, int n) {
    const char *op = "block_diag";
    if (n < 0 || (n > 0 && !tensors)) {
        ct_error(CT_ERROR_NULL_ARGUMENT, op, "tensors must not be NULL");
        return NULL;
    }
    int64_t cols = 0;
    for (int i = 0; i < n; i++) {
        CT_CHECK_ARG(op, tensors[i]);
        if (tensors[i]->ndim > 2) {
            ct_error(CT_ERROR_VALUE, op,
                     "torch.block_diag: Input tensors must have 2 or fewer dimensions. Input %d has %d dimensions", i,
                     tensors[i]->ndim);
            return NULL;
        }
    }
    ct_dtype dt = n ? ct_result_type(tensors, n) : ct_get_default_dtype();
    ct_device dev = n ? tensors[0]->device : CT_CPU;
    COMPOSITE({
        ct_tensor *blocks[64];
        int nb = 0;
        bool ok = n <= 64;
        if (!ok)
            ct_error(CT_ERROR_VALUE, op, "at most 64 tensors are supported, got %d", n);
        for (int i = 0; ok && i < n; i++) {
            const ct_tensor *t = tensors[i];
            int64_t shape[2] = {t->ndim == 2 ? t->shape[0] : 1, t->ndim == 2 ? t->shape[1] : t->ndim == 1 ? t->shape[0] : 1};
            blocks[nb] = ct_reshape(ct_to_dtype(t, dt), shape, 2);
            ok = blocks[nb] != NULL;
            cols += shape[1];
            nb++;
        }
        if (ok && nb == 0) {
            r = ct_zeros(CT_SHAPE(0, 0), dt, dev);
        } else if (ok) {
            const ct_tensor *strips[64];
            int64_t c0 = 0;
            for (int i = 0; ok && i < nb; i++) {
                int64_t w = ct_tensor_shape(blocks[i])[1];
                int64_t pad[2] = {c0, cols - c0 - w};
                strips[i] = ct_pad(blocks[i], pad, 2, "constant", 0);
                ok = strips[i] != NULL;
                c0 += w;
            }
            r = ok ? ct_cat(strips, nb, 0) : NULL;
        }
    });
}

/* Every combination of the elements of n 1-D tensors, one per row (n columns); a single
 * tensor is returned as it is. */
ct_tensor *ct_cartesian_prod(const ct_tensor *const *tensors, int n) {
    const char *op = "cartesian_prod";
    if (n <= 0 || !tensors) {
        ct_error(CT_ERROR_VALUE, op, "cartesian_prod expects at least one tensor");
        return NULL;
    }
    for (int i = 0; i < n; i++) {
        CT_CHECK_ARG(op, tensors[i]);
        if (tensors[i]->ndim != 1) {
            ct_error(CT_ERROR_VALUE, op, "Expect a 1D vector, but got shape [%d dims]", tensors[i]->ndim);
            return NULL;
        }
    }
    if (n == 1)
        return ct_alias(tensors[0]);
    if (n > CT_MAX_DIMS) {
        ct_error(CT_ERROR_VALUE, op, "at most %d tensors are supported, got %d", CT_MAX_DIMS, n);
        return NULL;
    }
    COMPOSITE({
        ct_tensor *grids[CT_MAX_DIMS];
        if (ct_meshgrid(tensors, n, "ij", grids) == CT_OK) {
            const ct_tensor *cols[CT_MAX_DIMS];
            bool ok = true;
            for (int i = 0; i < n && ok; i++)
                ok = (cols[i] = ct_reshape(grids[i], CT_SHAPE(-1))) != NULL;
            r = ok ? ct_stack(cols, n, 1) : NULL;
        }
    });
}

/* The covariance of the rows of x (variables x observations; a 1-D x is one variable),
 * dividing by max(0, N - correction); integers in the default float dtype. */
ct_tensor *ct_cov(const ct_tensor *x, int64_t correction) {
    const char *op = "cov";
    CT_CHECK_ARG(op, x);
    if (x->ndim > 2) {
        ct_error(CT_ERROR_VALUE, op, "cov(): expected input to have two or fewer dimensions but got an input with %d dimensions",
                 x->ndim);
        return NULL;
    }
    COMPOSITE({
        const ct_tensor *f = ct_dtype_is_floating(x->dtype) ? x : ct_to_dtype(x, ct_get_default_dtype());
        ct_tensor *m = f ? (x->ndim < 2 ? ct_reshape(f, CT_SHAPE(1, -1)) : ct_alias(f)) : NULL;
        if (m) {
            int64_t nobs = ct_tensor_shape(m)[1];
            ct_tensor *c = ct_sub(m, ct_mean(m, (int64_t[]){1}, 1, true, CT_DTYPE_UNDEFINED));
            ct_tensor *p = ct_mm(c, ct_t(c));
            double dn = (double)nobs - (double)correction; /* in double: correction may be any int64 */
            double denom = dn > 0 ? dn : 0.0;
            ct_tensor *v = p ? ct_div_scalar(p, ct_scalar_float(denom)) : NULL;
            r = v && x->ndim < 2 ? ct_reshape(v, NULL, 0) : v;
        }
    });
}

/* Pearson correlation coefficients of the rows of x: cov / (std_i std_j), clipped to
 * [-1, 1]. */
ct_tensor *ct_corrcoef(const ct_tensor *x) {
    CT_CHECK_ARG("corrcoef", x);
    COMPOSITE({
        ct_tensor *c = ct_cov(x, 1);
        if (c && ct_tensor_dim(c) == 0) {
            r = ct_div(c, c);
        } else if (c) {
            ct_tensor *sd = ct_sqrt(ct_diagonal(c, 0, 0, 1));
            ct_scalar lo = ct_scalar_int(-1), hi = ct_scalar_int(1);
            r = ct_clamp(ct_div(ct_div(c, ct_unsqueeze(sd, 1)), ct_unsqueeze(sd, 0)), &lo, &hi);
        }
    });
}

/* ------------------------------------------------------------------ closeness, lookup */

/* PyTorch's isclose: equal values are close (infinities of one sign included), NaNs
 * only with equal_nan; otherwise |a - b| <= atol + |rtol * b|, in a's dtype (bool as the
 * default float dtype, integers promoting through the float rtol), and finite. */
ct_tensor *ct_isclose(const ct_tensor *a, const ct_tensor *b, double rtol, double atol, bool equal_nan) {
    const char *op = "isclose";
    CT_CHECK_ARG(op, a);
    CT_CHECK_ARG(op, b);
    if (a->dtype != b->dtype) {
        ct_error(CT_ERROR_TYPE, op, "%s did not match %s", ct_dtype_name(a->dtype), ct_dtype_name(b->dtype));
        return NULL;
    }
    if (!(rtol >= 0) || !(atol >= 0)) {
        ct_error(CT_ERROR_VALUE, op, "%s must be greater than or equal to zero, but got %g", rtol >= 0 ? "atol" : "rtol",
                 rtol >= 0 ? atol : rtol);
        return NULL;
    }
    COMPOSITE({
        r = ct_eq(a, b);
        if (equal_nan && ct_dtype_is_floating(a->dtype))
            r = ct_logical_or(r, ct_logical_and(ct_isnan(a), ct_isnan(b)));
        if (rtol != 0 || atol != 0) {
            const bool to_float = a->dtype == CT_DTYPE_BOOL;
            const ct_tensor *fa = to_float ? ct_to_dtype(a, ct_get_default_dtype()) : a;
            const ct_tensor *fb = to_float ? ct_to_dtype(b, ct_get_default_dtype()) : b;
            ct_tensor *allowed = ct_add_scalar(ct_abs(ct_mul_scalar(fb, ct_scalar_float(rtol))), ct_scalar_float(atol));
            ct_tensor *err = ct_abs(ct_sub(fa, fb));
            r = ct_logical_or(r, ct_logical_and(ct_isfinite(err), ct_le(err, allowed)));
        }
    });
}

/* Whether every element of the bool tensor t (NULL: the error that made it) is true,
 * into *out (a host read: one sync on a GPU, refused on META). The caller's scope holds
 * the temporaries. */
static ct_status all_true(const char *op, const ct_tensor *t, bool *out) {
    int64_t v = 0;
    const ct_tensor *all = t ? ct_all(t, NULL, 0, false) : NULL;
    ct_status st = all ? ct_core_host_read(op) : ct_last_status(); /* under a capture: refused, naming op */
    if (st == CT_OK)
        st = ct_item_int64(all, &v);
    if (st == CT_OK)
        *out = v != 0;
    return st;
}

ct_status ct_allclose(const ct_tensor *a, const ct_tensor *b, double rtol, double atol, bool equal_nan, bool *out) {
    if (!out)
        return ct_error(CT_ERROR_NULL_ARGUMENT, "allclose", "out must not be NULL");
    ct_scope_begin();
    ct_status st = all_true("allclose", ct_isclose(a, b, rtol, atol, equal_nan), out);
    ct_scope_end();
    return st;
}

/* torch.equal: same shape and equal elements in the promoted dtype (NaN is unequal). */
ct_status ct_equal(const ct_tensor *a, const ct_tensor *b, bool *out) {
    const char *op = "equal";
    CT_CHECK_ARG_STATUS(op, a);
    CT_CHECK_ARG_STATUS(op, b);
    if (!out)
        return ct_error(CT_ERROR_NULL_ARGUMENT, op, "out must not be NULL");
    if (!ct_device_equal(a->device, b->device)) {
        char da[32], db[32];
        return ct_error(CT_ERROR_DEVICE, op, "Cannot compare two tensors on different devices. Got: %s and %s",
                        ct_device_str(a->device, da, sizeof da), ct_device_str(b->device, db, sizeof db));
    }
    if (a->ndim != b->ndim || memcmp(a->shape, b->shape, sizeof(int64_t) * (size_t)a->ndim)) {
        *out = false;
        return CT_OK;
    }
    ct_scope_begin();
    ct_status st = all_true(op, ct_eq(a, b), out);
    ct_scope_end();
    return st;
}

/* torch.argwhere: the (count, ndim) int64 indices of the nonzero elements. */
ct_tensor *ct_argwhere(const ct_tensor *x) {
    CT_CHECK_ARG("argwhere", x);
    return ct_nonzero(x);
}

/* torch.take_along_dim: with a dim, x and indices broadcast against each other except
 * along dim, then gather; without one (dim NULL), the flattened x at the flattened
 * indices. */
ct_tensor *ct_take_along_dim(const ct_tensor *x, const ct_tensor *indices, const int64_t *dim) {
    const char *op = "take_along_dim";
    CT_CHECK_ARG(op, x);
    CT_CHECK_ARG(op, indices);
    if (indices->dtype != CT_DTYPE_INT64) {
        ct_error(CT_ERROR_TYPE, op, "torch.take_along_dim(): dtype of indices should be Long but got %s",
                 ct_dtype_name(indices->dtype));
        return NULL;
    }
    if (!dim) {
        COMPOSITE({ r = ct_gather(ct_reshape(x, CT_SHAPE(-1)), 0, ct_reshape(indices, CT_SHAPE(-1))); });
    }
    if (x->ndim != indices->ndim) {
        ct_error(CT_ERROR_VALUE, op,
                 "torch.take_along_dim(): input and indices should have the same number of dimensions, but got %d "
                 "dimensions for input, and %d dimensions for indices",
                 x->ndim, indices->ndim);
        return NULL;
    }
    int d;
    if (ct_wrap_dim(op, *dim, x->ndim, &d))
        return NULL;
    int64_t ishape[CT_MAX_DIMS], xshape[CT_MAX_DIMS];
    for (int i = 0; i < x->ndim; i++) {
        int64_t s = i == d ? indices->shape[i] : x->shape[i], t = indices->shape[i];
        if (s != t && s != 1 && t != 1) {
            ct_error(CT_ERROR_VALUE, op,
                     "The size of tensor a (%lld) must match the size of tensor b (%lld) at non-singleton dimension %d",
                     (long long)s, (long long)t, i);
            return NULL;
        }
        ishape[i] = s == 1 ? t : s;
        xshape[i] = i == d ? x->shape[i] : ishape[i];
    }
    COMPOSITE({ r = ct_gather(ct_expand(x, xshape, x->ndim), d, ct_expand(indices, ishape, x->ndim)); });
}

/* torch.dist: the p-norm of a - b. */
ct_tensor *ct_dist(const ct_tensor *a, const ct_tensor *b, double p) {
    CT_CHECK_ARG("dist", a);
    CT_CHECK_ARG("dist", b);
    CT_AUTOCAST_COMPOSITE2(dist, a, b);
    COMPOSITE({ r = ct_linalg_vector_norm(ct_sub(a, b), p, NULL, 0, false, CT_DTYPE_UNDEFINED); });
}
