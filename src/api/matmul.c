/* The composite matrix products (matmul, linear, outer): built from mm/bmm/dot and views,
 * so their gradients come from those ops'. */
#include <string.h>

#include "ctorch/ops.h"
#include "tensor_impl.h"
#include "dispatch/dispatch_internal.h"

/* Note [matmul]
 * matmul is a composite, as in PyTorch: it reshapes and calls dot, mm or bmm, so its
 * gradient comes from theirs. Batched operands are broadcast against each other,
 * then folded into one batch dimension for bmm; when only the left operand has batch
 * dims and the right one is a matrix, they fold into mm's rows instead (one big GEMM
 * rather than many small ones). */
ct_tensor *ct_matmul(const ct_tensor *a, const ct_tensor *b) {
    CT_CHECK_ARG("matmul", a);
    CT_CHECK_ARG("matmul", b);
    CT_AUTOCAST_COMPOSITE2(matmul, a, b);
    int da = a->ndim, db = b->ndim;
    if (da == 0 || db == 0) {
        ct_error(CT_ERROR_VALUE, "matmul", "both arguments to matmul need to be at least 1D, but they are %dD and %dD",
                 da, db);
        return NULL;
    }
    if (da == 1 && db == 1)
        return ct_dot(a, b);
    if (da == 2 && db == 2)
        return ct_mm(a, b);
    ct_scope_begin();
    ct_tensor *r = NULL;
    if (da == 2 && db == 1) {
        r = ct_squeeze_dim(ct_mm(a, ct_unsqueeze(b, 1)), 1);
    } else if (da == 1 && db == 2) {
        r = ct_squeeze_dim(ct_mm(ct_unsqueeze(a, 0), b), 0);
    } else if (da >= 3 && db <= 2) {
        /* (..., n, k) @ (k, m) or (k): fold the batch into rows. */
        const ct_tensor *bb = db == 1 ? ct_unsqueeze(b, 1) : b;
        int64_t k = a->shape[da - 1];
        ct_tensor *flat = ct_reshape(a, CT_SHAPE(-1, k));
        ct_tensor *prod = ct_mm(flat, bb);
        if (prod) {
            int64_t shape[CT_MAX_DIMS];
            memcpy(shape, a->shape, sizeof(int64_t) * (size_t)(da - 1));
            int nd = da - 1;
            if (db == 2)
                shape[nd++] = b->shape[1];
            r = ct_reshape(prod, shape, nd);
        }
    } else {
        /* General case: broadcast batch dims and use bmm. */
        const ct_tensor *aa = da == 1 ? ct_unsqueeze(a, 0) : a;
        const ct_tensor *bb = db == 1 ? ct_unsqueeze(b, 1) : b;
        if (aa && bb) {
            int na = aa->ndim - 2, nb = bb->ndim - 2;
            int nbatch = na > nb ? na : nb;
            int64_t batch[CT_MAX_DIMS];
            bool ok = true;
            for (int i = 0; i < nbatch; i++) {
                int ia = i - (nbatch - na), ib = i - (nbatch - nb);
                int64_t sa = ia >= 0 ? aa->shape[ia] : 1, sb = ib >= 0 ? bb->shape[ib] : 1;
                if (sa != sb && sa != 1 && sb != 1) {
                    ct_error(CT_ERROR_VALUE, "matmul",
                             "The size of tensor a (%lld) must match the size of tensor b (%lld) at non-singleton "
                             "dimension %d",
                             (long long)sa, (long long)sb, i);
                    ok = false;
                    break;
                }
                batch[i] = sa == 1 ? sb : sa;
            }
            if (ok) {
                int64_t n = aa->shape[aa->ndim - 2], k = aa->shape[aa->ndim - 1];
                int64_t k2 = bb->shape[bb->ndim - 2], m = bb->shape[bb->ndim - 1];
                int64_t ea[CT_MAX_DIMS], eb[CT_MAX_DIMS];
                memcpy(ea, batch, sizeof(int64_t) * (size_t)nbatch);
                memcpy(eb, batch, sizeof(int64_t) * (size_t)nbatch);
                ea[nbatch] = n, ea[nbatch + 1] = k;
                eb[nbatch] = k2, eb[nbatch + 1] = m;
                int64_t nb_total = ct_shape_numel(batch, nbatch);
                ct_tensor *a3 = ct_reshape(ct_expand(aa, ea, nbatch + 2), CT_SHAPE(nb_total, n, k));
                ct_tensor *b3 = ct_reshape(ct_expand(bb, eb, nbatch + 2), CT_SHAPE(nb_total, k2, m));
                ct_tensor *p = ct_bmm(a3, b3);
                if (p) {
                    int64_t shape[CT_MAX_DIMS];
                    memcpy(shape, batch, sizeof(int64_t) * (size_t)nbatch);
                    int nd = nbatch;
                    if (da > 1)
                        shape[nd++] = n;
                    if (db > 1)
                        shape[nd++] = m;
                    r = ct_reshape(p, shape, nd);
                }
            }
        }
    }
    ct_keep(r);
    ct_scope_end();
    return r;
}

ct_tensor *ct_linear(const ct_tensor *x, const ct_tensor *w, const ct_tensor *bias) {
    CT_CHECK_ARG("linear", x);
    CT_CHECK_ARG("linear", w);
    CT_AUTOCAST_COMPOSITE3(linear, x, w, bias);
    /* The product's shape error names linear, the call the user made, rather than the
     * mm or addmm it runs as (PyTorch's message, with linear for mm). */
    if (x->ndim >= 2 && w->ndim == 2 && x->shape[x->ndim - 1] != w->shape[1]) {
        int64_t rows = 1;
        for (int i = 0; i < x->ndim - 1 && rows >= 0; i++)
            if (__builtin_mul_overflow(rows, x->shape[i], &rows))
                rows = -1;
        ct_error(CT_ERROR_VALUE, "linear", "mat1 and mat2 shapes cannot be multiplied (%lldx%lld and %lldx%lld)",
                 (long long)rows, (long long)x->shape[x->ndim - 1], (long long)w->shape[1], (long long)w->shape[0]);
        return NULL;
    }
    ct_scope_begin();
    ct_tensor *r;
    if (x->ndim == 2 && bias)
        r = ct_addmm(bias, x, ct_t(w), ct_scalar_int(1), ct_scalar_int(1));
    else if (x->ndim > 2 && bias && w->ndim == 2 && ct_tensor_is_contiguous(x)) {
        /* Note [Linear over leading dims]: a contiguous (..., K) input is a (N, K) matrix,
         * so the bias rides in the product's epilogue (cuBLASLt's BIAS) instead of a
         * second pass over the output, and its gradient is one reduction, as PyTorch
         * folds it. */
        int64_t shape[CT_MAX_DIMS], rows = 1;
        memcpy(shape, x->shape, sizeof(int64_t) * (size_t)x->ndim);
        for (int i = 0; i < x->ndim - 1; i++)
            rows *= shape[i];
        shape[x->ndim - 1] = w->shape[0];
        r = ct_addmm(bias, ct_view(x, CT_SHAPE(rows, x->shape[x->ndim - 1])), ct_t(w), ct_scalar_int(1),
                     ct_scalar_int(1));
        r = r ? ct_view(r, shape, x->ndim) : NULL;
    } else {
        r = ct_matmul(x, ct_t(w));
        if (bias)
            r = ct_add(r, bias);
    }
    ct_keep(r);
    ct_scope_end();
    return r;
}

/* outer is a broadcast mul of a column by a row, as in PyTorch, so promotion, every
 * dtype, the devices and the gradient are mul's. */
ct_tensor *ct_outer(const ct_tensor *a, const ct_tensor *b) {
    CT_CHECK_ARG("outer", a);
    CT_CHECK_ARG("outer", b);
    const char *bad = a->ndim != 1 ? "self" : b->ndim != 1 ? "vec2" : NULL;
    if (bad) {
        ct_error(CT_ERROR_VALUE, "outer", "Expected 1-D argument %s, but got %d-D", bad,
                 a->ndim != 1 ? a->ndim : b->ndim);
        return NULL;
    }
    ct_scope_begin();
    ct_tensor *r = ct_mul(ct_unsqueeze(a, 1), b);
    ct_keep(r);
    ct_scope_end();
    return r;
}
