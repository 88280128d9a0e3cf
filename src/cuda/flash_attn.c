/* The host half of flash attention on CUDA (the kernels: flash_attn.cu, Note [Flash
 * attention kernels]). Argument checks are the CPU's (src/meta/nn_fused.c); the CUDA
 * kernels take float16 and bfloat16 with a head dim <= 128 that is a multiple of 8 and
 * refuse the rest. Inputs are read in place through their strides (a (B, T, H, E)
 * projection transposed to (B, H, T, E) needs no copy) when each row is dense and the
 * strides and base are 16-byte aligned; otherwise they are made contiguous first.
 * Outputs follow their input's layout (Note [Flash attention output layout] in
 * src/meta/nn_fused.c). */
#include <string.h>

#include "core/factory.h"
#include "core/random.h"
#include "core/view.h"
#include "ctorch/nn.h"
#include "cuda/cuda_ops.h"
#include "cuda/flash_attn.h"
#include "meta/nn_fused.h"

static ct_status need_kernel_dtype(const char *op, const ct_tensor *q, int64_t e) {
    if (q->dtype != CT_DTYPE_BFLOAT16 && q->dtype != CT_DTYPE_FLOAT16)
        return ct_error(CT_ERROR_NOT_IMPLEMENTED, op,
                        "flash attention on CUDA takes float16 or bfloat16 inputs, but got %s (the math path of "
                        "scaled_dot_product_attention takes the others)",
                        ct_dtype_name(q->dtype));
    if (e % 8 != 0 || e > CT_FLASH_MAX_HEAD_DIM)
        return ct_error(CT_ERROR_NOT_IMPLEMENTED, op,
                        "flash attention on CUDA takes a head dim that is a multiple of 8 and at most %d, but got %lld",
                        CT_FLASH_MAX_HEAD_DIM, (long long)e);
    return CT_OK;
}

/* t itself when the kernels can read it in place, else a contiguous copy; its strides
 * over (batch, head, row) in str. */
static const ct_tensor *readable(const ct_tensor *t, int64_t *str) {
    if (t->strides[3] == 1) {
        memcpy(str, t->strides, 3 * sizeof *str);
        if (ct_cuda_flash_fits(ct_tensor_ptr(t), str))
            return t;
    }
    ct_tensor *c = ct_contiguous_impl(ct_clone_impl(t));
    if (!c)
        return NULL;
    memcpy(str, c->strides, 3 * sizeof *str);
    return c;
}

/* An output in its input's layout (Note [Flash attention output layout] in
 * src/meta/nn_fused.c); w: its element strides over (batch, head, row). */
static ct_tensor *output_like(const ct_tensor *like, const int64_t *shape, int64_t *w) {
    ct_tensor *t = ct_flash_output_like(like, shape, like->device);
    if (t)
        memcpy(w, t->strides, 3 * sizeof *w);
    return t;
}

static ct_status flash_forward_kernel(ct_keyset ks, ct_call *call, void *ud) {
    (void)ks, (void)ud;
    const char *op = "_flash_attention_forward";
    const ct_tensor *q0 = call->in[0];
    ct_sdpa_geom sg;
    double dropout;
    ct_status st = ct_flash_forward_check(call, &sg, &dropout);
    if (st == CT_OK)
        st = need_kernel_dtype(op, q0, sg.e);
    if (st)
        return st;
    if (!ct_cuda_use_device(op, q0->device.index))
        return ct_last_status();
    ct_cuda_flash_geom g = {.b = q0->shape[0], .h = q0->shape[1], .lq = sg.l, .lk = sg.s, .d = sg.e,
                            .causal = call->ints[0] != 0, .scale = ct_scalar_to_double(call->s[0])};
    /* Note [Flash attention dropout] (flash_attn.cu): the counters of Note [Flash
     * attention dropout draws], read from the graph's words while capturing */
    const uint64_t n = ct_flash_dropout_counters(g.b * g.h * g.lq, g.lk);
    if (dropout > 0) {
        ct_flash_dropout_consts dc = ct_flash_dropout_consts_of(dropout);
        g.dropout = true;
        g.threshold = dc.threshold;
        g.drop_scale = dc.scale;
        if (n > 0) {
            ct_generator_reserve(ct_default_generator(), n, &g.seed, &g.offset);
            if (ct_cuda_capturing() && ct_cuda_capture_random(op, g.seed, g.offset, n, &g.state, &g.offset))
                return ct_last_status();
        }
    }
    ct_scope_begin();
    const ct_tensor *q = readable(q0, g.q_str), *k = readable(call->in[1], g.k_str),
                    *v = readable(call->in[2], g.v_str);
    ct_tensor *o = output_like(q0, q0->shape, g.out_w);
    ct_tensor *lse = ct_empty_impl(q0->shape, 3, CT_DTYPE_FLOAT32, q0->device);
    int64_t mshape[4];
    ct_flash_mask_shape(q0, g.lk, mshape);
    /* zeroed: the kernel writes the words of the tiles it visits */
    ct_tensor *mask = g.dropout ? ct_zeros_impl(mshape, 4, CT_DTYPE_UINT64, q0->device) : NULL;
    g.mask = mask ? (uint64_t *)ct_tensor_ptr(mask) : NULL;
    g.mask_words = mshape[3];
    st = q && k && v && o && lse && (mask || !g.dropout)
             ? ct_cuda_flash_fwd(q0->dtype, ct_tensor_ptr(q), ct_tensor_ptr(k), ct_tensor_ptr(v), ct_tensor_ptr(o),
                                 (float *)ct_tensor_ptr(lse), &g, q0->device.index)
             : ct_last_status();
    if (st == CT_OK)
        st = ct_call_set_output(call, 0, o);
    if (st == CT_OK)
        st = ct_call_set_output(call, 1, lse);
    if (st == CT_OK && mask)
        st = ct_call_set_output(call, 2, mask);
    ct_scope_end();
    return st;
}

static ct_status flash_backward_kernel(ct_keyset ks, ct_call *call, void *ud) {
    (void)ks, (void)ud;
    const char *op = "_flash_attention_backward";
    ct_sdpa_geom sg;
    double dropout;
    ct_status st = ct_flash_backward_check(call, &sg, &dropout);
    const ct_tensor *q0 = call->in[1], *k0 = call->in[2];
    if (st == CT_OK)
        st = need_kernel_dtype(op, q0, sg.e);
    if (st)
        return st;
    if (!ct_cuda_use_device(op, q0->device.index))
        return ct_last_status();
    ct_cuda_flash_geom g = {.b = q0->shape[0], .h = q0->shape[1], .lq = sg.l, .lk = sg.s, .d = sg.e,
                            .causal = call->ints[0] != 0, .scale = ct_scalar_to_double(call->s[0])};
    if (dropout > 0) { /* the forward's mask */
        g.dropout = true;
        g.drop_scale = ct_flash_dropout_consts_of(dropout).scale;
        g.mask = (uint64_t *)ct_tensor_ptr(call->list[2]);
        g.mask_words = call->list[2]->shape[3];
    }
    ct_device dev = q0->device;
    ct_scope_begin();
    const ct_tensor *go = readable(call->in[0], g.go_str), *q = readable(q0, g.q_str), *k = readable(k0, g.k_str),
                    *v = readable(call->in[3], g.v_str), *o = readable(call->list[0], g.o_str);
    const ct_tensor *lse = ct_contiguous_impl(call->list[1]);
    ct_tensor *gq = output_like(q0, q0->shape, g.gq_w), *gk = output_like(k0, k0->shape, g.gk_w),
              *gv = output_like(call->in[3], k0->shape, g.gv_w);
    ct_tensor *dq = ct_empty_impl(q0->shape, 4, CT_DTYPE_FLOAT32, dev);
    ct_tensor *delta = ct_empty_impl(q0->shape, 3, CT_DTYPE_FLOAT32, dev);
    st = go && q && k && v && o && lse && gq && gk && gv && dq && delta
             ? ct_cuda_flash_bwd(q0->dtype, ct_tensor_ptr(go), ct_tensor_ptr(q), ct_tensor_ptr(k), ct_tensor_ptr(v),
                                 ct_tensor_ptr(o), (const float *)ct_tensor_ptr(lse), ct_tensor_ptr(gq),
                                 ct_tensor_ptr(gk), ct_tensor_ptr(gv), (float *)ct_tensor_ptr(dq),
                                 (float *)ct_tensor_ptr(delta), &g, dev.index)
             : ct_last_status();
    if (st == CT_OK)
        st = ct_call_set_output(call, 0, gq);
    if (st == CT_OK)
        st = ct_call_set_output(call, 1, gk);
    if (st == CT_OK)
        st = ct_call_set_output(call, 2, gv);
    ct_scope_end();
    return st;
}

void ct_cuda_register_flash_attn(void) {
    ct_dispatch_register_default(CT_OP__flash_attention_forward, CT_KEY_CUDA, flash_forward_kernel, NULL);
    ct_dispatch_register_default(CT_OP__flash_attention_backward, CT_KEY_CUDA, flash_backward_kernel, NULL);
}
