/* CPU kernels of the fused nn ops (shape rules in src/meta/nn_fused.c). They compute in
 * float32 or float64 (float16/bfloat16 convert on the way in and out, as conv2d), on
 * contiguous copies of their inputs. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/factory.h"
#include "core/view.h"
#include "cpu/cpu_backend.h"
#include "core/dtype.h"
#include "cpu/blas.h"
#include "cpu/conv_int.h"
#include "cpu/loops.h"
#include "cpu/vecmath.h"
#include "ctorch/nn.h"
#include "meta/nn_fused.h"

#include "core/parallel.h"

/* Queries per attention block: the kernel holds CT_SDPA_BLOCK x S scores per thread. */
#define CT_SDPA_BLOCK 64

/* The attention mask as the loops read it: element (b, i, j) is at
 * data + (boff[b] + i * sl + j * ss) * esz. */
typedef struct ct_sdpa_mask {
    const char *data; /* NULL: no mask */
    ct_dtype dtype;
    size_t esz;
    const int64_t *boff;
    int64_t sl, ss;
    bool causal;
    double scale;
} ct_sdpa_mask;

#define CT_CAT_(a, b) a##b
#define CT_CAT(a, b) CT_CAT_(a, b)

/* The loops for float and double (nn_fused_types.h includes nn_fused_impl.h once for
 * each), then again for AVX2 and AVX-512 (Note [Loops per ISA] in src/cpu/cpu_isa.h)
 * inside target regions, so that the OpenMP bodies the compiler outlines are built for
 * that ISA too. CT_ISA_PICK(f) is the variant of f for this CPU's level. */
#define CT_NN_SUFFIX
#include "cpu/conv_int.h"
#include "cpu/nn_fused_types.h"
#undef CT_NN_SUFFIX

#ifdef CT_ISA_VARIANTS
CT_TARGET_AVX2_BEGIN
#define CT_NN_SUFFIX _avx2
#include "cpu/nn_fused_types.h"
#undef CT_NN_SUFFIX
CT_TARGET_END
CT_TARGET_AVX512_BEGIN
#define CT_NN_SUFFIX _avx512
#include "cpu/nn_fused_types.h"
#undef CT_NN_SUFFIX
CT_TARGET_END
#endif

static int num_threads_for(int64_t tasks) {
    int nth = ct_get_num_threads();
    if (nth > tasks)
        nth = (int)(tasks > 0 ? tasks : 1);
    return nth;
}

/* ------------------------------------------------------------------ conv_transpose2d */

ct_status ct_cpu_conv_transpose2d(ct_keyset ks, ct_call *call, void *ud) {
    return ct_conv_transpose2d_kernel(ks, call, ud);
}

/* Note [GELU MLP]: the kernel every device runs. */
ct_status ct_cpu_gelu_mlp(ct_keyset ks, ct_call *call, void *ud) { return ct_gelu_mlp_kernel(ks, call, ud); }
ct_status ct_cpu_gelu_mlp_hidden_backward(ct_keyset ks, ct_call *call, void *ud) {
    return ct_gelu_mlp_hidden_backward_kernel(ks, call, ud);
}

/* ------------------------------------------------------------------ pooling */

ct_status ct_cpu_avg_pool2d(ct_keyset ks, ct_call *call, void *ud) {
    (void)ks, (void)ud;
    ct_avgpool_geom g;
    const ct_tensor *x0 = call->in[0];
    ct_status st = ct_avgpool_check(x0, call->ints, &g);
    if (st)
        return st;
    bool integer = !ct_dtype_is_floating(x0->dtype);
    ct_dtype wd = integer ? CT_DTYPE_INT64 : ct_nn_work_dtype(x0->dtype);
    int64_t shape[4] = {g.n, g.c, g.oh, g.ow};
    ct_scope_begin();
    ct_tensor *x = ct_nn_as_work(x0, wd);
    ct_tensor *y = ct_empty_impl(g.batched ? shape : shape + 1, g.batched ? 4 : 3, wd, CT_CPU);
    if (x && y) {
        if (integer)
            ct_avgpool_int_forward(&g, ct_tensor_data(x), ct_tensor_data(y));
        else if (wd == CT_DTYPE_FLOAT64)
            CT_ISA_PICK(avgpool_fwd_f64)(ct_tensor_data(x), ct_tensor_data(y), &g);
        else
            CT_ISA_PICK(avgpool_fwd_f32)(ct_tensor_data(x), ct_tensor_data(y), &g);
    }
    st = x && y ? ct_nn_set_out(call, 0, y, x0->dtype) : ct_last_status();
    ct_scope_end();
    return st;
}

ct_status ct_cpu_avg_pool2d_backward(ct_keyset ks, ct_call *call, void *ud) {
    (void)ks, (void)ud;
    ct_avgpool_geom g;
    const ct_tensor *gy0 = call->in[0], *x0 = call->in[1];
    ct_status st = ct_avgpool_backward_check(call, &g);
    if (st)
        return st;
    ct_dtype wd = ct_nn_work_dtype(x0->dtype);
    ct_scope_begin();
    ct_tensor *gy = ct_nn_as_work(gy0, wd);
    ct_tensor *gx = ct_zeros_impl(x0->shape, x0->ndim, wd, CT_CPU);
    if (gy && gx) {
        if (wd == CT_DTYPE_FLOAT64)
            CT_ISA_PICK(avgpool_bwd_f64)(ct_tensor_data(gy), ct_tensor_data(gx), &g);
        else
            CT_ISA_PICK(avgpool_bwd_f32)(ct_tensor_data(gy), ct_tensor_data(gx), &g);
    }
    st = gy && gx ? ct_nn_set_out(call, 0, gx, x0->dtype) : ct_last_status();
    ct_scope_end();
    return st;
}

ct_status ct_cpu_adaptive_avg_pool2d(ct_keyset ks, ct_call *call, void *ud) {
    (void)ks, (void)ud;
    ct_adapool_geom g;
    const ct_tensor *x0 = call->in[0];
    ct_status st = ct_adapool_check(x0, call->ints, &g);
    if (st)
        return st;
    ct_dtype wd = ct_nn_work_dtype(x0->dtype);
    int64_t shape[4] = {g.n, g.c, g.oh, g.ow};
    ct_scope_begin();
    ct_tensor *x = ct_nn_as_work(x0, wd);
    ct_tensor *y = ct_empty_impl(g.batched ? shape : shape + 1, g.batched ? 4 : 3, wd, CT_CPU);
    if (x && y && g.oh > 0 && g.ow > 0) {
        if (wd == CT_DTYPE_FLOAT64)
            CT_ISA_PICK(adapool_f64)(ct_tensor_data(x), ct_tensor_data(y), &g, false);
        else
            CT_ISA_PICK(adapool_f32)(ct_tensor_data(x), ct_tensor_data(y), &g, false);
    }
    st = x && y ? ct_nn_set_out(call, 0, y, x0->dtype) : ct_last_status();
    ct_scope_end();
    return st;
}

ct_status ct_cpu_adaptive_avg_pool2d_backward(ct_keyset ks, ct_call *call, void *ud) {
    (void)ks, (void)ud;
    ct_adapool_geom g;
    const ct_tensor *gy0 = call->in[0], *x0 = call->in[1];
    ct_status st = ct_adapool_backward_check(call, &g);
    if (st)
        return st;
    ct_dtype wd = ct_nn_work_dtype(x0->dtype);
    ct_scope_begin();
    ct_tensor *gy = ct_nn_as_work(gy0, wd);
    ct_tensor *gx = ct_zeros_impl(x0->shape, x0->ndim, wd, CT_CPU);
    if (gy && gx && g.oh > 0 && g.ow > 0) {
        if (wd == CT_DTYPE_FLOAT64)
            CT_ISA_PICK(adapool_f64)(ct_tensor_data(gy), ct_tensor_data(gx), &g, true);
        else
            CT_ISA_PICK(adapool_f32)(ct_tensor_data(gy), ct_tensor_data(gx), &g, true);
    }
    st = gy && gx ? ct_nn_set_out(call, 0, gx, x0->dtype) : ct_last_status();
    ct_scope_end();
    return st;
}

/* ------------------------------------------------------------------ rms_norm */

ct_status ct_cpu_rms_norm(ct_keyset ks, ct_call *call, void *ud) {
    (void)ks, (void)ud;
    ct_rmsnorm_geom g;
    const ct_tensor *x0 = call->in[0], *w0 = call->in[1];
    ct_status st = ct_rmsnorm_check(call, x0, w0, &g);
    if (st)
        return st;
    ct_dtype wd = ct_nn_work_dtype(x0->dtype);
    ct_scope_begin();
    ct_tensor *x = ct_nn_as_work(x0, wd), *w = ct_nn_as_work(w0, wd);
    ct_tensor *y = ct_empty_impl(x0->shape, x0->ndim, wd, CT_CPU);
    bool ok = x && y && (!w0 || w);
    if (ok) {
        if (wd == CT_DTYPE_FLOAT64)
            CT_ISA_PICK(rmsnorm_fwd_f64)(ct_tensor_data(x), w ? ct_tensor_data(w) : NULL, ct_tensor_data(y), g.rows, g.cols, g.eps);
        else
            CT_ISA_PICK(rmsnorm_fwd_f32)(ct_tensor_data(x), w ? ct_tensor_data(w) : NULL, ct_tensor_data(y), g.rows, g.cols, g.eps);
    }
    st = ok ? ct_nn_set_out(call, 0, y, x0->dtype) : ct_last_status();
    ct_scope_end();
    return st;
}

ct_status ct_cpu_rms_norm_backward(ct_keyset ks, ct_call *call, void *ud) {
    (void)ks, (void)ud;
    ct_rmsnorm_geom g;
    const ct_tensor *gy0 = call->in[0], *x0 = call->in[1], *w0 = call->in[2];
    ct_status st = ct_rmsnorm_backward_check(call, &g);
    if (st)
        return st;
    ct_dtype wd = ct_nn_work_dtype(x0->dtype);
    ct_scope_begin();
    ct_tensor *x = ct_nn_as_work(x0, wd), *w = ct_nn_as_work(w0, wd), *gy = ct_nn_as_work(gy0, wd);
    ct_tensor *gx = ct_empty_impl(x0->shape, x0->ndim, wd, CT_CPU);
    ct_tensor *gw = w0 ? ct_zeros_impl(w0->shape, w0->ndim, CT_DTYPE_FLOAT64, CT_CPU) : NULL;
    bool ok = x && gy && gx && (!w0 || (w && gw));
    if (ok) {
        double *pgw = gw ? ct_tensor_data(gw) : NULL;
        if (wd == CT_DTYPE_FLOAT64)
            CT_ISA_PICK(rmsnorm_bwd_f64)(ct_tensor_data(gy), ct_tensor_data(x), w ? ct_tensor_data(w) : NULL, ct_tensor_data(gx),
                            pgw, g.rows, g.cols, g.eps);
        else
            CT_ISA_PICK(rmsnorm_bwd_f32)(ct_tensor_data(gy), ct_tensor_data(x), w ? ct_tensor_data(w) : NULL, ct_tensor_data(gx),
                            pgw, g.rows, g.cols, g.eps);
    }
    st = ok ? ct_nn_set_out(call, 0, gx, x0->dtype) : ct_last_status();
    if (st == CT_OK && gw)
        st = ct_nn_set_out(call, 1, gw, w0->dtype);
    ct_scope_end();
    return st;
}

/* ------------------------------------------------------------------ layer_norm */

ct_status ct_cpu_layer_norm(ct_keyset ks, ct_call *call, void *ud) {
    (void)ks, (void)ud;
    ct_rmsnorm_geom g;
    const ct_tensor *x0 = call->in[0], *w0 = call->in[1], *b0 = call->in[2];
    ct_status st = ct_layernorm_check(call, x0, w0, b0, &g);
    if (st)
        return st;
    ct_dtype wd = ct_nn_work_dtype(x0->dtype);
    ct_scope_begin();
    ct_tensor *x = ct_nn_as_work(x0, wd), *w = ct_nn_as_work(w0, wd), *b = ct_nn_as_work(b0, wd);
    ct_tensor *y = ct_empty_impl(x0->shape, x0->ndim, wd, CT_CPU);
    bool ok = x && y && (!w0 || w) && (!b0 || b);
    if (ok && g.rows > 0 && g.cols > 0) {
        if (wd == CT_DTYPE_FLOAT64)
            CT_ISA_PICK(layernorm_fwd_f64)(ct_tensor_data(x), w ? ct_tensor_data(w) : NULL, b ? ct_tensor_data(b) : NULL,
                              ct_tensor_data(y), g.rows, g.cols, g.eps);
        else
            CT_ISA_PICK(layernorm_fwd_f32)(ct_tensor_data(x), w ? ct_tensor_data(w) : NULL, b ? ct_tensor_data(b) : NULL,
                              ct_tensor_data(y), g.rows, g.cols, g.eps);
    }
    st = ok ? ct_nn_set_out(call, 0, y, x0->dtype) : ct_last_status();
    ct_scope_end();
    return st;
}

ct_status ct_cpu_layer_norm_backward(ct_keyset ks, ct_call *call, void *ud) {
    (void)ks, (void)ud;
    ct_rmsnorm_geom g;
    const ct_tensor *gy0 = call->in[0], *x0 = call->in[1], *w0 = call->in[2], *b0 = call->in[3];
    ct_status st = ct_layernorm_backward_check(call, &g);
    if (st)
        return st;
    ct_dtype wd = ct_nn_work_dtype(x0->dtype);
    ct_scope_begin();
    ct_tensor *x = ct_nn_as_work(x0, wd), *w = ct_nn_as_work(w0, wd), *gy = ct_nn_as_work(gy0, wd);
    ct_tensor *gx = ct_empty_impl(x0->shape, x0->ndim, wd, CT_CPU);
    ct_tensor *stats = ct_empty_impl(CT_SHAPE(2 * g.rows), CT_DTYPE_FLOAT64, CT_CPU);
    ct_tensor *gw = w0 ? ct_zeros_impl(w0->shape, w0->ndim, CT_DTYPE_FLOAT64, CT_CPU) : NULL;
    ct_tensor *gb = b0 ? ct_zeros_impl(b0->shape, b0->ndim, CT_DTYPE_FLOAT64, CT_CPU) : NULL;
    bool ok = x && gy && gx && stats && (!w0 || (w && gw)) && (!b0 || gb);
    if (ok && g.rows > 0 && g.cols > 0) {
        double *pgw = gw ? ct_tensor_data(gw) : NULL, *pgb = gb ? ct_tensor_data(gb) : NULL;
        if (wd == CT_DTYPE_FLOAT64)
            CT_ISA_PICK(layernorm_bwd_f64)(ct_tensor_data(gy), ct_tensor_data(x), w ? ct_tensor_data(w) : NULL,
                              ct_tensor_data(gx), ct_tensor_data(stats), pgw, pgb, g.rows, g.cols, g.eps);
        else
            CT_ISA_PICK(layernorm_bwd_f32)(ct_tensor_data(gy), ct_tensor_data(x), w ? ct_tensor_data(w) : NULL,
                              ct_tensor_data(gx), ct_tensor_data(stats), pgw, pgb, g.rows, g.cols, g.eps);
    }
    st = ok ? ct_nn_set_out(call, 0, gx, x0->dtype) : ct_last_status();
    if (st == CT_OK && gw)
        st = ct_nn_set_out(call, 1, gw, w0->dtype);
    if (st == CT_OK && gb)
        st = ct_nn_set_out(call, 2, gb, b0->dtype);
    ct_scope_end();
    return st;
}

/* ------------------------------------------------------------------ gelu_backward */

#define CT_GELU_K 0.79788456080286535588 /* sqrt(2 / pi) */
#define CT_GELU_C 0.044715
#define CT_GELU_CHUNK 1024

/* d/dx gelu: the tanh form 0.5 (1 + t) + 0.5 x (1 - t^2) k (1 + 3 c x^2) with
 * t = tanh(k (x + c x^3)); the exact form Phi(x) + x phi(x). The float32 loop runs in
 * chunks so that exp / erf take SLEEF's vector routines. In float32 the tanh form goes
 * through e = exp(-2u) as the forward does (Note [GELU through exp] in activation.c):
 * with s = sigmoid(2u) = (1 + t) / 2 = 1 / (1 + e) and 1 - s = 1 / (1 + 1/e), neither
 * of which cancels and both right when e is 0 or infinite, the derivative is
 * s + 2 x s (1 - s) k (1 + 3 c x^2). */
typedef struct {
    const void *gy, *x;
    void *gx;
    int64_t n;
    bool tanh_form;
} gelu_bwd_job;

static void gelu_bwd_f32_chunks(void *ctx, int64_t c0, int64_t c1) {
    const gelu_bwd_job *j = ctx;
    const float *gy = j->gy, *x = j->x;
    float *gx = j->gx;
    int64_t n = j->n;
    bool tanh_form = j->tanh_form;
    ct_vm_f32_fn vt = tanh_form ? NULL : ct_vm_get(CT_VM_ERF), ve = ct_vm_get(CT_VM_EXP);
    for (int64_t c = c0; c < c1; c++) {
        float u[CT_GELU_CHUNK], e[CT_GELU_CHUNK];
        int64_t s = c * CT_GELU_CHUNK, len = n - s < CT_GELU_CHUNK ? n - s : CT_GELU_CHUNK;
        const float *xs = x + s, *gs = gy + s;
        float *os = gx + s;
        if (tanh_form) {
            const float k = (float)CT_GELU_K, cc = (float)CT_GELU_C;
            for (int64_t i = 0; i < len; i++)
                e[i] = -2.0f * k * (xs[i] + cc * xs[i] * xs[i] * xs[i]);
            if (ve)
                ve(e, e, len);
            else
                for (int64_t i = 0; i < len; i++)
                    e[i] = expf(e[i]);
            for (int64_t i = 0; i < len; i++) {
                float xv = xs[i], sg = 1.0f / (1.0f + e[i]), sc = 1.0f / (1.0f + 1.0f / e[i]);
                os[i] = gs[i] * (sg + 2.0f * xv * sg * sc * k * (1.0f + 3.0f * cc * xv * xv));
            }
        } else {
            for (int64_t i = 0; i < len; i++) {
                u[i] = xs[i] * (float)M_SQRT1_2;
                e[i] = -0.5f * xs[i] * xs[i];
            }
            if (vt && ve) {
                vt(u, u, len);
                ve(e, e, len);
            } else {
                for (int64_t i = 0; i < len; i++) {
                    u[i] = erff(u[i]);
                    e[i] = expf(e[i]);
                }
            }
            const float inv_sqrt_2pi = (float)(M_2_SQRTPI * M_SQRT1_2 * 0.5);
            for (int64_t i = 0; i < len; i++)
                os[i] = gs[i] * (0.5f * (1.0f + u[i]) + xs[i] * e[i] * inv_sqrt_2pi);
        }
    }
}

static void gelu_bwd_f32(const float *gy, const float *x, float *gx, int64_t n, bool tanh_form) {
    gelu_bwd_job j = {gy, x, gx, n, tanh_form};
    ct_parallel_range((n + CT_GELU_CHUNK - 1) / CT_GELU_CHUNK, n, 65536, gelu_bwd_f32_chunks, &j);
}

static void gelu_bwd_f64_range(void *ctx, int64_t i0, int64_t i1) {
    const gelu_bwd_job *j = ctx;
    const double *gy = j->gy, *x = j->x;
    double *gx = j->gx;
    bool tanh_form = j->tanh_form;
    for (int64_t i = i0; i < i1; i++) {
        double xv = x[i], d;
        if (tanh_form) {
            double t = tanh(CT_GELU_K * (xv + CT_GELU_C * xv * xv * xv));
            d = 0.5 * (1 + t) + 0.5 * xv * (1 - t * t) * CT_GELU_K * (1 + 3 * CT_GELU_C * xv * xv);
        } else {
            d = 0.5 * (1 + erf(xv * M_SQRT1_2)) + xv * exp(-0.5 * xv * xv) * (M_2_SQRTPI * M_SQRT1_2 * 0.5);
        }
        gx[i] = gy[i] * d;
    }
}

static void gelu_bwd_f64(const double *gy, const double *x, double *gx, int64_t n, bool tanh_form) {
    gelu_bwd_job j = {gy, x, gx, n, tanh_form};
    ct_parallel_range(n, n, 65536, gelu_bwd_f64_range, &j);
}

ct_status ct_cpu_gelu_backward(ct_keyset ks, ct_call *call, void *ud) {
    (void)ks, (void)ud;
    const ct_tensor *gy0 = call->in[0], *x0 = call->in[1];
    ct_status st = ct_gelu_backward_check(gy0, x0, call->ints[0]);
    if (st)
        return st;
    ct_dtype wd = ct_nn_work_dtype(x0->dtype);
    bool tanh_form = call->ints[0] == CT_GELU_APPROXIMATE_TANH;
    ct_scope_begin();
    ct_tensor *x = ct_nn_as_work(x0, wd), *gy = ct_nn_as_work(gy0, wd);
    ct_tensor *gx = ct_empty_impl(x0->shape, x0->ndim, wd, CT_CPU);
    bool ok = x && gy && gx;
    if (ok && x0->numel > 0) {
        if (wd == CT_DTYPE_FLOAT64)
            gelu_bwd_f64(ct_tensor_data(gy), ct_tensor_data(x), ct_tensor_data(gx), x0->numel, tanh_form);
        else
            gelu_bwd_f32(ct_tensor_data(gy), ct_tensor_data(x), ct_tensor_data(gx), x0->numel, tanh_form);
    }
    st = ok ? ct_nn_set_out(call, 0, gx, x0->dtype) : ct_last_status();
    ct_scope_end();
    return st;
}

/* ------------------------------------------------------------------ attention */

/* Per-batch offsets of the mask broadcast to (batch..., L, S). */
static ct_status sdpa_mask_setup(const ct_tensor *mask, const ct_sdpa_geom *g, ct_sdpa_mask *m, int64_t **boff) {
    *boff = NULL;
    m->data = NULL;
    if (!mask)
        return CT_OK;
    int nd = g->nbatch + 2;
    int64_t full[CT_MAX_DIMS];
    memcpy(full, g->batch, sizeof(int64_t) * (size_t)g->nbatch);
    full[g->nbatch] = g->l;
    full[g->nbatch + 1] = g->s;
    ct_tensor *e = ct_expand_impl(mask, full, nd);
    if (!e)
        return ct_last_status();
    int64_t *off = ct_xmalloc("scaled_dot_product_attention", sizeof(int64_t) * (size_t)(g->b > 0 ? g->b : 1));
    if (!off)
        return ct_last_status();
    for (int64_t b = 0; b < g->b; b++) {
        int64_t r = b, o = 0;
        for (int d = g->nbatch - 1; d >= 0; d--) {
            o += (r % g->batch[d]) * e->strides[d];
            r /= g->batch[d];
        }
        off[b] = o;
    }
    m->data = ct_tensor_data(e);
    m->dtype = e->dtype;
    m->esz = ct_dtype_size(e->dtype);
    m->sl = e->strides[nd - 2];
    m->ss = e->strides[nd - 1];
    m->boff = off;
    *boff = off;
    return CT_OK;
}

static void sdpa_out_shape(const ct_sdpa_geom *g, int64_t last, int64_t *shape) {
    memcpy(shape, g->batch, sizeof(int64_t) * (size_t)g->nbatch);
    shape[g->nbatch] = g->l;
    shape[g->nbatch + 1] = last;
}

ct_status ct_cpu_scaled_dot_product_attention(ct_keyset ks, ct_call *call, void *ud) {
    (void)ks, (void)ud;
    const char *op = "scaled_dot_product_attention";
    ct_sdpa_geom g;
    const ct_tensor *q0 = call->in[0];
    bool causal = call->ints[0] != 0;
    ct_status st = ct_sdpa_check(op, q0, call->in[1], call->in[2], call->in[3], causal, &g);
    if (st)
        return st;
    ct_dtype wd = ct_nn_work_dtype(q0->dtype);
    int64_t shape[CT_MAX_DIMS];
    sdpa_out_shape(&g, g.ev, shape);
    ct_scope_begin();
    ct_tensor *q = ct_nn_as_work(q0, wd), *k = ct_nn_as_work(call->in[1], wd), *v = ct_nn_as_work(call->in[2], wd);
    ct_tensor *y = ct_zeros_impl(shape, g.nbatch + 2, wd, CT_CPU);
    ct_sdpa_mask m = {.causal = causal, .scale = ct_scalar_to_double(call->s[0])};
    int64_t *boff = NULL;
    st = q && k && v && y ? sdpa_mask_setup(call->in[3], &g, &m, &boff) : ct_last_status();
    if (st == CT_OK && g.b > 0 && g.l > 0 && g.s > 0) {
        int nth = num_threads_for(g.b * ((g.l + CT_SDPA_BLOCK - 1) / CT_SDPA_BLOCK));
        size_t esz = ct_dtype_size(wd);
        void *bufs = ct_xmalloc(op, (size_t)nth * CT_SDPA_BLOCK * (size_t)g.s * esz);
        if (!bufs) {
            st = ct_last_status();
        } else {
            if (wd == CT_DTYPE_FLOAT64)
                CT_ISA_PICK(sdpa_fwd_f64)(ct_tensor_data(q), ct_tensor_data(k), ct_tensor_data(v), ct_tensor_data(y), &g, &m, bufs,
                             nth);
            else
                CT_ISA_PICK(sdpa_fwd_f32)(ct_tensor_data(q), ct_tensor_data(k), ct_tensor_data(v), ct_tensor_data(y), &g, &m, bufs,
                             nth);
            free(bufs);
        }
    } else if (st == CT_OK && g.s == 0 && g.l > 0 && g.ev > 0) {
        /* no keys: softmax over nothing, NaN as the reference formula */
        ct_fill_impl(y, ct_scalar_float(NAN));
    }
    free(boff);
    if (st == CT_OK)
        st = ct_nn_set_out(call, 0, y, q0->dtype);
    ct_scope_end();
    return st;
}

ct_status ct_cpu_scaled_dot_product_attention_backward(ct_keyset ks, ct_call *call, void *ud) {
    (void)ks, (void)ud;
    const char *op = "scaled_dot_product_attention_backward";
    ct_sdpa_geom g;
    const ct_tensor *gy0 = call->in[0], *q0 = call->in[1], *k0 = call->in[2], *v0 = call->in[3];
    const ct_tensor *mask = call->nlist > 0 ? call->list[0] : NULL;
    bool causal = call->ints[0] != 0;
    ct_status st = ct_sdpa_check(op, q0, k0, v0, mask, causal, &g);
    if (st)
        return st;
    int64_t shape[CT_MAX_DIMS];
    sdpa_out_shape(&g, g.ev, shape);
    if ((st = ct_nn_same_shape(op, gy0, shape, g.nbatch + 2)))
        return st;
    ct_dtype wd = ct_nn_work_dtype(q0->dtype);
    ct_scope_begin();
    ct_tensor *q = ct_nn_as_work(q0, wd), *k = ct_nn_as_work(k0, wd), *v = ct_nn_as_work(v0, wd), *gy = ct_nn_as_work(gy0, wd);
    ct_tensor *gq = ct_zeros_impl(q0->shape, q0->ndim, wd, CT_CPU), *gk = ct_zeros_impl(k0->shape, k0->ndim, wd, CT_CPU);
    ct_tensor *gv = ct_zeros_impl(v0->shape, v0->ndim, wd, CT_CPU);
    ct_sdpa_mask m = {.causal = causal, .scale = ct_scalar_to_double(call->s[0])};
    int64_t *boff = NULL;
    st = q && k && v && gy && gq && gk && gv ? sdpa_mask_setup(mask, &g, &m, &boff) : ct_last_status();
    if (st == CT_OK && g.b > 0 && g.l > 0 && g.s > 0) {
        int nth = num_threads_for(g.b);
        void *bufs = ct_xmalloc(op, (size_t)nth * 2 * CT_SDPA_BLOCK * (size_t)g.s * ct_dtype_size(wd));
        if (!bufs) {
            st = ct_last_status();
        } else {
            if (wd == CT_DTYPE_FLOAT64)
                CT_ISA_PICK(sdpa_bwd_f64)(ct_tensor_data(gy), ct_tensor_data(q), ct_tensor_data(k), ct_tensor_data(v),
                             ct_tensor_data(gq), ct_tensor_data(gk), ct_tensor_data(gv), &g, &m, bufs, nth);
            else
                CT_ISA_PICK(sdpa_bwd_f32)(ct_tensor_data(gy), ct_tensor_data(q), ct_tensor_data(k), ct_tensor_data(v),
                             ct_tensor_data(gq), ct_tensor_data(gk), ct_tensor_data(gv), &g, &m, bufs, nth);
            free(bufs);
        }
    }
    free(boff);
    if (st == CT_OK)
        st = ct_nn_set_out(call, 0, gq, q0->dtype);
    if (st == CT_OK)
        st = ct_nn_set_out(call, 1, gk, q0->dtype);
    if (st == CT_OK)
        st = ct_nn_set_out(call, 2, gv, q0->dtype);
    ct_scope_end();
    return st;
}

/* ------------------------------------------------------------------ embedding */

static int64_t index_at(const ct_tensor *idx, int64_t i) {
    const char *p = ct_tensor_data(idx);
    return idx->dtype == CT_DTYPE_INT64 ? ((const int64_t *)p)[i] : ((const int32_t *)p)[i];
}

ct_status ct_cpu_embedding(ct_keyset ks, ct_call *call, void *ud) {
    (void)ks, (void)ud;
    const ct_tensor *w0 = call->in[0], *idx0 = call->in[1];
    ct_status st = ct_embedding_check(w0, idx0);
    if (st)
        return st;
    int64_t shape[CT_MAX_DIMS];
    memcpy(shape, idx0->shape, sizeof(int64_t) * (size_t)idx0->ndim);
    int64_t num = w0->shape[0], dim = w0->shape[1];
    shape[idx0->ndim] = dim;
    ct_scope_begin();
    ct_tensor *w = ct_contiguous_impl(w0), *idx = ct_contiguous_impl(idx0);
    ct_tensor *y = ct_empty_impl(shape, idx0->ndim + 1, w0->dtype, CT_CPU);
    st = w && idx && y ? CT_OK : ct_last_status();
    size_t row = (size_t)dim * ct_dtype_size(w0->dtype);
    for (int64_t i = 0; st == CT_OK && i < idx0->numel; i++) {
        int64_t r = index_at(idx, i);
        if (r < 0 || r >= num)
            st = ct_error(CT_ERROR_INDEX, "embedding", "index out of range in self");
        else if (row)
            memcpy((char *)ct_tensor_data(y) + (size_t)i * row, (const char *)ct_tensor_data(w) + (size_t)r * row, row);
    }
    if (st == CT_OK)
        st = ct_call_set_output(call, 0, y);
    ct_scope_end();
    return st;
}

ct_status ct_cpu_embedding_backward(ct_keyset ks, ct_call *call, void *ud) {
    (void)ks, (void)ud;
    const char *op = "embedding_backward";
    const ct_tensor *gy0 = call->in[0], *idx0 = call->in[1];
    int64_t num = call->ints[0], pad = call->ints[1];
    ct_status bad_args = ct_embedding_backward_check(gy0, idx0, num);
    if (bad_args)
        return bad_args;
    if (pad != CT_NO_PADDING_IDX && pad < 0)
        pad += num;
    int64_t dim = gy0->shape[gy0->ndim - 1];
    ct_dtype wd = ct_nn_work_dtype(gy0->dtype);
    ct_scope_begin();
    ct_tensor *gy = ct_nn_as_work(gy0, wd), *idx = ct_contiguous_impl(idx0);
    ct_tensor *gw = ct_zeros_impl(CT_SHAPE(num, dim), wd, CT_CPU);
    ct_status st = gy && idx && gw ? CT_OK : ct_last_status();
    if (st == CT_OK) {
        int64_t bad = wd == CT_DTYPE_FLOAT64
                          ? CT_ISA_PICK(embedding_bwd_f64)(ct_tensor_data(gy), idx, ct_tensor_data(gw), num, dim, pad)
                          : CT_ISA_PICK(embedding_bwd_f32)(ct_tensor_data(gy), idx, ct_tensor_data(gw), num, dim, pad);
        if (bad >= 0)
            st = ct_error(CT_ERROR_INDEX, op, "index out of range in self");
    }
    if (st == CT_OK)
        st = ct_nn_set_out(call, 0, gw, gy0->dtype);
    ct_scope_end();
    return st;
}

/* ------------------------------------------------------------------ nll_loss */

static ct_status target_error(const ct_tensor *t, int64_t bad) {
    return ct_error(CT_ERROR_INDEX, "nll_loss", "Target %lld is out of bounds.", (long long)index_at(t, bad));
}

ct_status ct_cpu_nll_loss(ct_keyset ks, ct_call *call, void *ud) {
    (void)ks, (void)ud;
    ct_nll_geom g;
    const ct_tensor *x0 = call->in[0], *t0 = call->in[1], *w0 = call->in[2];
    ct_status st = ct_nll_check(x0, t0, w0, &g);
    if (st)
        return st;
    int red = (int)call->ints[0];
    int64_t ignore = call->ints[1];
    ct_dtype wd = ct_nn_work_dtype(x0->dtype);
    ct_scope_begin();
    ct_tensor *x = ct_nn_as_work(x0, wd), *t = ct_contiguous_impl(t0), *w = ct_nn_as_work(w0, wd);
    ct_tensor *y = red == CT_REDUCTION_NONE ? ct_empty_impl(t0->shape, t0->ndim, wd, CT_CPU) : ct_empty_impl(NULL, 0, wd, CT_CPU);
    st = x && t && y && (!w0 || w) ? CT_OK : ct_last_status();
    if (st == CT_OK) {
        double tw;
        const void *pw = w ? ct_tensor_data(w) : NULL;
        int64_t bad = wd == CT_DTYPE_FLOAT64 ? CT_ISA_PICK(nll_fwd_f64)(ct_tensor_data(x), ct_tensor_data(t), pw, ct_tensor_data(y),
                                                           &g, red, ignore, &tw)
                                             : CT_ISA_PICK(nll_fwd_f32)(ct_tensor_data(x), ct_tensor_data(t), pw, ct_tensor_data(y),
                                                           &g, red, ignore, &tw);
        if (bad >= 0)
            st = target_error(t, bad);
    }
    if (st == CT_OK)
        st = ct_nn_set_out(call, 0, y, x0->dtype);
    ct_scope_end();
    return st;
}

ct_status ct_cpu_nll_loss_backward(ct_keyset ks, ct_call *call, void *ud) {
    (void)ks, (void)ud;
    ct_nll_geom g;
    const ct_tensor *gy0 = call->in[0], *x0 = call->in[1], *t0 = call->in[2], *w0 = call->in[3];
    ct_status st = ct_nll_check(x0, t0, w0, &g);
    if (st)
        return st;
    int red = (int)call->ints[0];
    int64_t ignore = call->ints[1];
    if (red == CT_REDUCTION_NONE)
        st = ct_nn_same_shape("nll_loss_backward", gy0, t0->shape, t0->ndim);
    else if (gy0->numel != 1)
        st = ct_error(CT_ERROR_VALUE, "nll_loss_backward", "grad_output must have one element, got %lld",
                      (long long)gy0->numel);
    if (st)
        return st;
    ct_dtype wd = ct_nn_work_dtype(x0->dtype);
    ct_scope_begin();
    ct_tensor *gy = ct_nn_as_work(gy0, wd), *t = ct_contiguous_impl(t0), *w = ct_nn_as_work(w0, wd);
    ct_tensor *gx = ct_zeros_impl(x0->shape, x0->ndim, wd, CT_CPU);
    st = gy && t && gx && (!w0 || w) ? CT_OK : ct_last_status();
    if (st == CT_OK) {
        const void *pw = w ? ct_tensor_data(w) : NULL;
        int64_t bad = wd == CT_DTYPE_FLOAT64
                          ? CT_ISA_PICK(nll_bwd_f64)(ct_tensor_data(gy), ct_tensor_data(t), pw, ct_tensor_data(gx), &g, red, ignore)
                          : CT_ISA_PICK(nll_bwd_f32)(ct_tensor_data(gy), ct_tensor_data(t), pw, ct_tensor_data(gx), &g, red, ignore);
        if (bad >= 0)
            st = target_error(t, bad);
    }
    if (st == CT_OK)
        st = ct_nn_set_out(call, 0, gx, x0->dtype);
    ct_scope_end();
    return st;
}

/* ------------------------------------------------------------------ one_hot */

ct_status ct_cpu_one_hot(ct_keyset ks, ct_call *call, void *ud) {
    (void)ks, (void)ud;
    const ct_tensor *t0 = call->in[0];
    int64_t nc = call->ints[0];
    ct_status st = ct_one_hot_check(t0, nc);
    if (st)
        return st;
    ct_scope_begin();
    ct_tensor *t = ct_contiguous_impl(t0);
    const int64_t *p = t ? ct_tensor_data(t) : NULL;
    int64_t mn = 0, mx = -1;
    for (int64_t i = 0; t && i < t0->numel; i++) {
        mn = i == 0 || p[i] < mn ? p[i] : mn;
        mx = p[i] > mx ? p[i] : mx;
    }
    ct_tensor *y = t ? ct_one_hot_zeros(t0, mn, mx, &nc) : NULL;
    if (y) {
        int64_t *py = ct_tensor_data(y);
        for (int64_t i = 0; i < t0->numel; i++)
            py[i * nc + p[i]] = 1;
    }
    st = y ? ct_call_set_output(call, 0, y) : ct_last_status();
    ct_scope_end();
    return st;
}
