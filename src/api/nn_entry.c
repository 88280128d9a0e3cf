/* The public entries of the fused layer_norm and scaled_dot_product_attention ops
 * (ctorch/nn.h) and the attention argument check (ctorch/ext.h), with the NULL checks
 * a public function owes its callers; nn builds its layers on these. */
#include <math.h>

#include "ctorch.h"
#include "ctorch/ext.h"
#include "meta/nn_fused.h"

ct_tensor *ct_fused_layer_norm(const ct_tensor *input, const int64_t *normalized_shape, int n,
                               const ct_tensor *weight, const ct_tensor *bias, double eps) {
    CT_CHECK_ARG("layer_norm", input);
    return ct_layer_norm_fused(input, normalized_shape, n, weight, bias, eps);
}

ct_tensor *ct_fused_scaled_dot_product_attention(const ct_tensor *query, const ct_tensor *key,
                                                 const ct_tensor *value, const ct_tensor *attn_mask, bool is_causal,
                                                 const double *scale) {
    const char *op = "scaled_dot_product_attention";
    CT_CHECK_ARG(op, query);
    CT_CHECK_ARG(op, key);
    CT_CHECK_ARG(op, value);
    int nd = ct_tensor_dim(query);
    int64_t e = nd > 0 ? ct_tensor_shape(query)[nd - 1] : 1;
    double sc = scale ? *scale : 1.0 / sqrt((double)(e > 0 ? e : 1));
    return ct_sdpa_fused(query, key, value, attn_mask, is_causal, sc);
}

ct_status ct_scaled_dot_product_attention_check(const ct_tensor *query, const ct_tensor *key, const ct_tensor *value,
                                                const ct_tensor *attn_mask, bool is_causal) {
    const char *op = "scaled_dot_product_attention";
    CT_CHECK_ARG_STATUS(op, query);
    CT_CHECK_ARG_STATUS(op, key);
    CT_CHECK_ARG_STATUS(op, value);
    ct_sdpa_geom g;
    return ct_sdpa_check(op, query, key, value, attn_mask, is_causal, &g);
}
