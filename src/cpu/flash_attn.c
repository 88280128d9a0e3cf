/* The CPU kernels of _flash_attention_forward and _flash_attention_backward: the plain
 * formulas in float64, row by row, on contiguous copies. They are the reference the
 * CUDA kernels (src/cuda/flash_attn.cu) are checked against, and make the ops exist on
 * every backend; scaled_dot_product_attention on the CPU keeps its own blocked kernel
 * (src/cpu/nn_fused.c).
 *
 * With s_ij = scale q_i . k_j over the keys row i sees (j <= i when causal):
 *   lse_i = log sum_j exp(s_ij), p_ij = exp(s_ij - lse_i), o_i = sum_j p_ij v_j;
 *   delta_i = dO_i . o_i, ds_ij = p_ij (dO_i . v_j - delta_i),
 *   dq_i = scale sum_j ds_ij k_j, dk_j = scale sum_i ds_ij q_i, dv_j = sum_i p_ij dO_i.
 * With dropout, z_ij = keep_ij / (1 - p) (keep_ij from Note [Flash attention dropout
 * draws] in src/core/random.h, the CUDA kernels' layout; the forward draws it into
 * dropout_mask, the backward reads it there):
 *   o_i = sum_j z_ij p_ij v_j, ds_ij = p_ij (z_ij dO_i . v_j - delta_i),
 *   dv_j = sum_i z_ij p_ij dO_i, and lse and delta as without. */
#include <math.h>
#include <string.h>

#include "core/factory.h"
#include "core/random.h"
#include "core/view.h"
#include "cpu/cpu_backend.h"
#include "meta/nn_fused.h"

static double dot(const double *a, const double *b, int64_t n) {
    double s = 0;
    for (int64_t i = 0; i < n; i++)
        s += a[i] * b[i];
    return s;
}

/* The dropout mask of one call as dropout_mask's words (row r's word j / 64, bit
 * j % 64), and the factor of the kept: z = bit / (1 - p), or 1 without dropout. */
typedef struct {
    const uint64_t *bits; /* NULL without dropout */
    int64_t words;        /* per row */
    double scale;
} mask;

static double mask_at(const mask *m, int64_t row, int64_t j) {
    return !m->bits ? 1.0 : (m->bits[row * m->words + j / 64] >> (j % 64)) & 1 ? m->scale : 0.0;
}

/* The number of keys row i sees. */
static int64_t keys_seen(int64_t i, int64_t lk, bool causal) { return causal ? (i + 1 < lk ? i + 1 : lk) : lk; }

ct_status ct_cpu__flash_attention_forward(ct_keyset ks, ct_call *call, void *ud) {
    (void)ks, (void)ud;
    const ct_tensor *q0 = call->in[0];
    ct_sdpa_geom g;
    double dropout;
    ct_status st = ct_flash_forward_check(call, &g, &dropout);
    if (st)
        return st;
    bool causal = call->ints[0] != 0;
    double scale = ct_scalar_to_double(call->s[0]);
    int64_t bh = q0->shape[0] * q0->shape[1], lq = g.l, lk = g.s, d = g.e;
    ct_scope_begin();
    /* the mask (Note [Flash attention dropout draws] in src/core/random.h) */
    int64_t mshape[4];
    ct_flash_mask_shape(q0, lk, mshape);
    ct_tensor *bits = dropout > 0 ? ct_zeros_impl(mshape, 4, CT_DTYPE_UINT64, q0->device) : NULL;
    const ct_flash_dropout_consts dc = ct_flash_dropout_consts_of(dropout);
    mask z = {.words = mshape[3], .scale = dc.scale};
    if (bits && bh * lq * lk > 0) {
        uint64_t seed, offset, *w = ct_tensor_data(bits);
        const uint32_t thr = dc.threshold;
        ct_generator_reserve(ct_default_generator(), ct_flash_dropout_counters(bh * lq, lk), &seed, &offset);
        for (int64_t r = 0; r < bh * lq; r++) /* bits past a row's keys stay 0 (as the CUDA kernel's) */
            for (int64_t j = 0, n = keys_seen(r % lq, lk, causal); j < n; j++)
                if (ct_flash_dropout_keep(seed, offset, r, lk, j, thr))
                    w[r * z.words + j / 64] |= UINT64_C(1) << (j % 64);
    }
    z.bits = bits ? ct_tensor_data(bits) : NULL;
    ct_tensor *q = ct_nn_as_work(q0, CT_DTYPE_FLOAT64), *k = ct_nn_as_work(call->in[1], CT_DTYPE_FLOAT64),
              *v = ct_nn_as_work(call->in[2], CT_DTYPE_FLOAT64);
    ct_tensor *o = ct_zeros_impl(q0->shape, 4, CT_DTYPE_FLOAT64, q0->device);
    ct_tensor *lse = ct_empty_impl(q0->shape, 3, CT_DTYPE_FLOAT64, q0->device);
    int64_t ns = lk > 0 ? lk : 1;
    ct_tensor *sbuf = ct_empty_impl(&ns, 1, CT_DTYPE_FLOAT64, q0->device);
    st = q && k && v && o && lse && sbuf && (bits || dropout == 0) ? CT_OK : ct_last_status();
    if (st == CT_OK) {
        const double *qp = ct_tensor_data(q), *kp = ct_tensor_data(k), *vp = ct_tensor_data(v);
        double *op_ = ct_tensor_data(o), *lp = ct_tensor_data(lse), *s = ct_tensor_data(sbuf);
        for (int64_t b = 0; b < bh; b++)
            for (int64_t i = 0; i < lq; i++) {
                const double *qi = qp + (b * lq + i) * d;
                const double *kb = kp + b * lk * d, *vb = vp + b * lk * d;
                double *oi = op_ + (b * lq + i) * d;
                int64_t n = keys_seen(i, lk, causal);
                double m = -INFINITY, l = 0;
                for (int64_t j = 0; j < n; j++) {
                    s[j] = scale * dot(qi, kb + j * d, d);
                    m = s[j] > m ? s[j] : m;
                }
                for (int64_t j = 0; j < n; j++) {
                    double p = exp(s[j] - m), pz = p * mask_at(&z, b * lq + i, j);
                    l += p;
                    for (int64_t c = 0; c < d; c++)
                        oi[c] += pz * vb[j * d + c];
                }
                for (int64_t c = 0; n > 0 && c < d; c++)
                    oi[c] /= l;
                lp[b * lq + i] = n > 0 ? m + log(l) : -INFINITY;
            }
        st = ct_flash_set_out(call, 0, q0, o);
        if (st == CT_OK)
            st = ct_nn_set_out(call, 1, lse, ct_flash_lse_dtype(q0->dtype));
        if (st == CT_OK && bits)
            st = ct_call_set_output(call, 2, bits);
    }
    ct_scope_end();
    return st;
}

ct_status ct_cpu__flash_attention_backward(ct_keyset ks, ct_call *call, void *ud) {
    (void)ks, (void)ud;
    ct_sdpa_geom g;
    double dropout;
    ct_status st = ct_flash_backward_check(call, &g, &dropout);
    if (st)
        return st;
    const ct_tensor *q0 = call->in[1], *k0 = call->in[2];
    bool causal = call->ints[0] != 0;
    double scale = ct_scalar_to_double(call->s[0]);
    int64_t bh = q0->shape[0] * q0->shape[1], lq = g.l, lk = g.s, d = g.e;
    const mask z = {.bits = dropout > 0 ? (const uint64_t *)ct_tensor_ptr(call->list[2]) : NULL,
                    .words = dropout > 0 ? call->list[2]->shape[3] : 0,
                    .scale = ct_flash_dropout_consts_of(dropout).scale};
    ct_dtype wd = CT_DTYPE_FLOAT64;
    ct_scope_begin();
    ct_tensor *go = ct_nn_as_work(call->in[0], wd), *q = ct_nn_as_work(q0, wd), *k = ct_nn_as_work(k0, wd),
              *v = ct_nn_as_work(call->in[3], wd), *o = ct_nn_as_work(call->list[0], wd),
              *lse = ct_nn_as_work(call->list[1], wd);
    ct_tensor *gq = ct_zeros_impl(q0->shape, 4, wd, q0->device), *gk = ct_zeros_impl(k0->shape, 4, wd, q0->device),
              *gv = ct_zeros_impl(k0->shape, 4, wd, q0->device);
    st = go && q && k && v && o && lse && gq && gk && gv ? CT_OK : ct_last_status();
    if (st == CT_OK) {
        const double *gop = ct_tensor_data(go), *qp = ct_tensor_data(q), *kp = ct_tensor_data(k),
                     *vp = ct_tensor_data(v), *opp = ct_tensor_data(o), *lp = ct_tensor_data(lse);
        double *gqp = ct_tensor_data(gq), *gkp = ct_tensor_data(gk), *gvp = ct_tensor_data(gv);
        for (int64_t b = 0; b < bh; b++)
            for (int64_t i = 0; i < lq; i++) {
                int64_t r = b * lq + i;
                const double *qi = qp + r * d, *doi = gop + r * d;
                double *dqi = gqp + r * d, delta = dot(doi, opp + r * d, d), lse_i = lp[r];
                int64_t n = keys_seen(i, lk, causal);
                for (int64_t j = 0; j < n; j++) {
                    int64_t c0 = (b * lk + j) * d;
                    double p = exp(scale * dot(qi, kp + c0, d) - lse_i), zij = mask_at(&z, r, j);
                    double ds = p * (zij * dot(doi, vp + c0, d) - delta);
                    for (int64_t c = 0; c < d; c++) {
                        gvp[c0 + c] += zij * p * doi[c];
                        dqi[c] += scale * ds * kp[c0 + c];
                        gkp[c0 + c] += scale * ds * qi[c];
                    }
                }
            }
        st = ct_flash_set_out(call, 0, q0, gq);
        if (st == CT_OK)
            st = ct_flash_set_out(call, 1, k0, gk);
        if (st == CT_OK)
            st = ct_flash_set_out(call, 2, call->in[3], gv);
    }
    ct_scope_end();
    return st;
}
