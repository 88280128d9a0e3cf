/* torch.nn.functional's normalize, cosine_similarity and pairwise_distance, built
 * from the op library (their gradients and devices come from the ops they call). */
#include <math.h>
#include <string.h>

#include "ctorch.h"
#include "ctorch/ext.h"

ct_tensor *ct_normalize(const ct_tensor *x, double p, int64_t dim, double eps) {
    CT_CHECK_ARG("normalize", x);
    /* x / max(||x||_p, eps), the norm kept as a size-1 dim and broadcast */
    ct_scope_begin();
    ct_tensor *n = ct_norm(x, p, &dim, 1, true, CT_DTYPE_UNDEFINED);
    ct_tensor *y = n ? ct_div(x, ct_clamp_min_scalar(n, ct_scalar_float(eps))) : NULL;
    ct_keep(y);
    ct_scope_end();
    return y;
}

/* The shape a and b broadcast to, with the message of PyTorch's expand. */
static int broadcast_shape(const char *op, const ct_tensor *a, const ct_tensor *b, int64_t *shape) {
    const int na = ct_tensor_dim(a), nb = ct_tensor_dim(b), n = na > nb ? na : nb;
    for (int i = 0; i < n; i++) {
        int ia = i - (n - na), ib = i - (n - nb);
        int64_t sa = ia >= 0 ? ct_tensor_shape(a)[ia] : 1, sb = ib >= 0 ? ct_tensor_shape(b)[ib] : 1;
        if (sa != sb && sa != 1 && sb != 1) {
            ct_error(CT_ERROR_VALUE, op,
                     "The size of tensor a (%lld) must match the size of tensor b (%lld) at non-singleton dimension %d",
                     (long long)sa, (long long)sb, i);
            return -1;
        }
        shape[i] = sa == 1 ? sb : sa;
    }
    return n;
}

/* Note [cosine_similarity's eps]
 * As PyTorch: each input is divided by its own 2-norm along dim, clamped below at
 * eps, and the products are summed over dim. PyTorch clamps the norms in place under
 * no_grad, so the values are the clamped ones while the gradient is that of the
 * unclamped norm; n + detach(max(n, eps) - n) gives those values and that gradient
 * without writing to a tensor autograd has saved (the golden gradients of a case with
 * norms below eps check it). */
static ct_tensor *clamped_norm(const ct_tensor *x, int64_t dim, double eps) {
    ct_tensor *n = ct_linalg_vector_norm(x, 2.0, &dim, 1, true, CT_DTYPE_UNDEFINED);
    if (!n)
        return NULL;
    ct_tensor *c = ct_clamp_min_scalar(n, ct_scalar_float(eps));
    if (!c)
        return NULL;
    ct_tensor *delta = ct_detach(ct_sub(c, n));
    return delta ? ct_add(n, delta) : NULL;
}

ct_tensor *ct_cosine_similarity(const ct_tensor *x1, const ct_tensor *x2, int64_t dim, double eps) {
    static const char *op = "cosine_similarity";
    CT_CHECK_ARG(op, x1);
    CT_CHECK_ARG(op, x2);
    const ct_tensor *const both[2] = {x1, x2};
    const ct_dtype dt = ct_result_type(both, 2);
    if (!ct_dtype_is_floating(dt)) {
        ct_error(CT_ERROR_TYPE, op, "expected common dtype to be floating point, yet common dtype is %s",
                 ct_dtype_name(dt));
        return NULL;
    }
    int64_t shape[CT_MAX_DIMS];
    int nd = broadcast_shape(op, x1, x2, shape);
    if (nd < 0)
        return NULL;
    ct_scope_begin();
    ct_tensor *a = ct_tensor_dtype(x1) == dt ? ct_tensor_ref(x1) : ct_to_dtype(x1, dt);
    ct_tensor *b = ct_tensor_dtype(x2) == dt ? ct_tensor_ref(x2) : ct_to_dtype(x2, dt);
    a = a ? ct_expand(a, shape, nd) : NULL;
    b = b ? ct_expand(b, shape, nd) : NULL;
    ct_tensor *y = NULL;
    if (a && b) {
        ct_tensor *na = clamped_norm(a, dim, eps), *nb = na ? clamped_norm(b, dim, eps) : NULL;
        ct_tensor *prod = nb ? ct_mul(ct_div(a, na), ct_div(b, nb)) : NULL;
        y = prod ? ct_sum(prod, &dim, 1, false, CT_DTYPE_UNDEFINED) : NULL;
    }
    ct_keep(y);
    ct_scope_end();
    return y;
}

ct_tensor *ct_pairwise_distance(const ct_tensor *x1, const ct_tensor *x2, double p, double eps, bool keepdim) {
    static const char *op = "pairwise_distance";
    CT_CHECK_ARG(op, x1);
    CT_CHECK_ARG(op, x2);
    /* ||x1 - x2 + eps||_p over the last dim of the broadcast shape (eps is added to
     * the difference, not to the norm, as PyTorch) */
    const int d1 = ct_tensor_dim(x1), d2 = ct_tensor_dim(x2);
    int64_t inner = (d1 > d2 ? d1 : d2) - 1;
    if (inner < 0)
        inner = 0;
    ct_scope_begin();
    ct_tensor *diff = ct_add_scalar(ct_sub(x1, x2), ct_scalar_float(eps));
    ct_tensor *y = diff ? ct_norm(diff, p, &inner, 1, keepdim, CT_DTYPE_UNDEFINED) : NULL;
    ct_keep(y);
    ct_scope_end();
    return y;
}
