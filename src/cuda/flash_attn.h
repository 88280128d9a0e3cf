/* C interface of the flash attention kernels (flash_attn.cu) and the registration of
 * their host half (flash_attn.c). Plain C types only, as cuda_rt.h. */
#ifndef CT_CUDA_FLASH_ATTN_H
#define CT_CUDA_FLASH_ATTN_H

#include "cuda/cuda_rt.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One attention problem: q (b, h, lq, d), k and v (b, h, lk, d). Each of q, k, v, out
 * and grad_out has its own element strides over (batch, head, row); its last dim is
 * dense. The kernels need d % 8 == 0, d <= CT_FLASH_MAX_HEAD_DIM, every stride a
 * multiple of 8 and every base pointer 16-byte aligned (ct_cuda_flash_fits). */
#define CT_FLASH_MAX_HEAD_DIM 128
typedef struct ct_cuda_flash_geom {
    int64_t b, h, lq, lk, d;
    int64_t q_str[3], k_str[3], v_str[3], o_str[3], go_str[3];
    /* where the outputs are written: out and gq (b, h, lq, d), gk and gv (b, h, lk, d),
     * element strides over (batch, head, row), the last dim dense (Note [Flash
     * attention output layout] in flash_attn.c) */
    int64_t out_w[3], gq_w[3], gk_w[3], gv_w[3];
    bool causal;
    double scale;
    /* Dropout (Note [Flash attention dropout draws] in src/core/random.h): key j of row
     * bh L + i is kept when its 16-bit draw is below threshold, and scaled by
     * drop_scale. Forward: draws at (seed, offset) by value, or at the graph's words in
     * state (Note [Random numbers in a graph]), into mask, zeroed by the caller:
     * (bh L + i) mask_words + j / 64, bit j % 64. Backward: reads mask. */
    bool dropout;
    uint32_t threshold;
    double drop_scale;
    uint64_t seed, offset;
    const uint64_t *state;
    uint64_t *mask;
    int64_t mask_words;
} ct_cuda_flash_geom;

/* Whether a tensor of this base pointer and (batch, head, row) strides can be read by
 * the kernels in place. */
bool ct_cuda_flash_fits(const void *p, const int64_t *str);

/* Forward: out (b, h, lq, d) written through out_w in the inputs' dtype (float16 or
 * bfloat16), lse (b, h, lq) float32 contiguous, the natural log of each row's sum of exp(scores). */
ct_status ct_cuda_flash_fwd(ct_dtype dt, const void *q, const void *k, const void *v, void *out, float *lse,
                            const ct_cuda_flash_geom *g, int device);
/* Backward: gq (b, h, lq, d), gk and gv (b, h, lk, d), written through gq_w, gk_w
 * and gv_w. Scratch: dq_acc
 * (b, h, lq, d) and delta (b, h, lq) float32, overwritten. out is read with o_str,
 * go with go_str. */
ct_status ct_cuda_flash_bwd(ct_dtype dt, const void *go, const void *q, const void *k, const void *v,
                            const void *out, const float *lse, void *gq, void *gk, void *gv, float *dq_acc,
                            float *delta, const ct_cuda_flash_geom *g, int device);

/* Host half: registers _flash_attention_forward and _flash_attention_backward. */
void ct_cuda_register_flash_attn(void);

#ifdef __cplusplus
}
#endif

#endif
