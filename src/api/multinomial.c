/* torch.multinomial, made of ops: inverse-CDF sampling with replacement, the
 * exponential race (top-k of p / Exp(1)) without, so it runs wherever rand, cumsum,
 * searchsorted and topk run. */
#include <math.h>
#include <string.h>

#include "ctorch.h"
#include "ctorch/ext.h"

/* Note [multinomial]
 * The draws come from the default generator (ct_rand), so ct_manual_seed fixes them;
 * the numbers are not PyTorch's (docs/random.md). With replacement each sample is the
 * first category whose normalized running sum exceeds a float64 uniform u in [0, 1):
 * the last running sum is divided by itself, so it is exactly 1 and a category of
 * probability 0 (equal running sum to the one before it) is never chosen. Without
 * replacement, as PyTorch: the num_samples largest p_i / E_i with E_i ~ Exp(1)
 * (-log1p(-u)), a draw of the categories in order without replacement; categories of
 * probability 0 come only after all others. The values are checked on the host before
 * any draw (one copy of the probabilities, as PyTorch's CPU kernel reads them), with
 * PyTorch's messages. No gradient flows: the result is an index tensor. */
ct_tensor *ct_multinomial(const ct_tensor *probs, int64_t num_samples, bool replacement) {
    static const char *op = "multinomial";
    if (!probs) {
        ct_error(CT_ERROR_NULL_ARGUMENT, op, "probs is NULL");
        return NULL;
    }
    const int nd = ct_tensor_dim(probs);
    const ct_dtype dt = ct_tensor_dtype(probs);
    if (!ct_dtype_is_floating(dt)) {
        ct_error(CT_ERROR_TYPE, op, "multinomial only supports floating-point dtypes for input, got: %s",
                 ct_dtype_name(dt));
        return NULL;
    }
    if (nd != 1 && nd != 2) {
        ct_error(CT_ERROR_VALUE, op, "prob_dist must be 1 or 2 dim");
        return NULL;
    }
    if (num_samples <= 0) {
        ct_error(CT_ERROR_VALUE, op, "cannot sample n_sample <= 0 samples");
        return NULL;
    }
    const int64_t ncat = ct_tensor_shape(probs)[nd - 1], rows = nd == 2 ? ct_tensor_shape(probs)[0] : 1;
    if (!replacement && num_samples > ncat) {
        ct_error(CT_ERROR_VALUE, op, "cannot sample n_sample > prob_dist.size(-1) samples without replacement");
        return NULL;
    }
    if (ncat > ((int64_t)1 << 24)) {
        ct_error(CT_ERROR_VALUE, op, "number of categories cannot exceed 2^24");
        return NULL;
    }
    const ct_device dev = ct_tensor_device(probs);
    const bool prev = ct_set_grad_enabled(false);
    ct_scope_begin();
    ct_tensor *r = NULL;
    if (rows == 0) {
        r = ct_empty(CT_SHAPE(0, num_samples), CT_I64, dev);
        goto done;
    }
    ct_tensor *p = ct_reshape(ct_to_dtype(ct_detach(probs), CT_F64), CT_SHAPE(rows, ncat));
    if (!p)
        goto done;
    if (dev.type != CT_DEVICE_META) {
        ct_tensor *host = ct_contiguous(ct_to_device(p, CT_CPU));
        if (!host)
            goto done;
        const double *v = ct_tensor_data(host);
        for (int64_t i = 0; i < rows; i++) {
            double sum = 0;
            for (int64_t j = 0; j < ncat; j++) {
                double x = v[i * ncat + j];
                if (!(x >= 0) || isinf(x)) {
                    ct_error(CT_ERROR_RUNTIME, op, "probability tensor contains either `inf`, `nan` or element < 0");
                    goto done;
                }
                sum += x;
            }
            if (!(sum > 0)) {
                ct_error(CT_ERROR_RUNTIME, op, "invalid multinomial distribution (sum of probabilities <= 0)");
                goto done;
            }
        }
    }
    if (replacement) {
        ct_tensor *cdf = ct_cumsum(p, 1, CT_DTYPE_UNDEFINED);
        ct_tensor *total = cdf ? ct_narrow(cdf, 1, ncat - 1, 1) : NULL;
        ct_tensor *norm = total ? ct_div(cdf, total) : NULL;
        ct_tensor *u = norm ? ct_rand(CT_SHAPE(rows, num_samples), CT_F64, dev) : NULL;
        ct_tensor *idx = u ? ct_searchsorted(norm, u, true, false) : NULL;
        r = idx ? ct_clamp_max_scalar(idx, ct_scalar_int(ncat - 1)) : NULL;
    } else {
        ct_tensor *u = ct_rand(CT_SHAPE(rows, ncat), CT_F64, dev);
        ct_tensor *e = u ? ct_neg(ct_log1p(ct_neg(u))) : NULL;
        ct_tensor *keys = e ? ct_div(p, e) : NULL;
        ct_tensor *idx = NULL;
        if (keys && !ct_topk(keys, num_samples, 1, true, &idx))
            idx = NULL;
        r = idx;
    }
    if (r && nd == 1)
        r = ct_reshape(r, CT_SHAPE(num_samples));
done:
    ct_keep(r);
    ct_scope_end();
    ct_set_grad_enabled(prev);
    return r;
}
