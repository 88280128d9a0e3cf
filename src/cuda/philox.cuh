/* Philox4x32-10 on the device (src/core/random.h's block function, with __umulhi), the
 * graph's random state (Note [Random numbers in a graph] in random.cu) and the dropout
 * keep-test of Note [Dropout masks], shared by random.cu and the kernels that draw
 * inside their loops (flash attention). */
#ifndef CT_CUDA_PHILOX_CUH
#define CT_CUDA_PHILOX_CUH

#include <stdint.h>

extern "C" {
#include "core/random.h"
}

static __device__ __forceinline__ void philox_block(uint64_t seed, uint64_t counter, uint32_t out[4]) {
    uint32_t c0 = (uint32_t)counter, c1 = (uint32_t)(counter >> 32), c2 = 0, c3 = 0;
    uint32_t k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32);
#pragma unroll
    for (int r = 0; r < CT_PHILOX_ROUNDS; r++) {
        if (r > 0) {
            k0 += CT_PHILOX_W0;
            k1 += CT_PHILOX_W1;
        }
        /* one 32 x 32 -> 64-bit product each (IMAD.WIDE) rather than __umulhi and a
         * separate low product */
        const uint64_t p0 = (uint64_t)CT_PHILOX_M0 * c0, p1 = (uint64_t)CT_PHILOX_M1 * c2;
        uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0;
        uint32_t n2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1;
        c1 = (uint32_t)p1;
        c3 = (uint32_t)p0;
        c0 = n0;
        c2 = n2;
    }
    out[0] = c0;
    out[1] = c1;
    out[2] = c2;
    out[3] = c3;
}

/* Note [Random numbers in a graph]: inside a capture, the graph's seed and start. */
static __device__ __forceinline__ void graph_state(const uint64_t *state, uint64_t *seed, uint64_t *offset) {
    if (state) {
        *seed = state[0];
        *offset += state[1];
    }
}

/* The 53 low bits of 64-bit word h (0 or 1) of a block. */
static __device__ __forceinline__ uint64_t philox_word53(const uint32_t r[4], int h) {
    return ((uint64_t)r[2 * h] | ((uint64_t)r[2 * h + 1] << 32)) & ((1ull << 53) - 1);
}

/* Note [Dropout masks]: whether element n is kept. */
static __device__ __forceinline__ bool dropout_keep(uint64_t seed, uint64_t offset, uint64_t n, uint64_t threshold) {
    uint32_t r[4];
    philox_block(seed, offset + n / 2, r);
    return philox_word53(r, (int)(n & 1)) < threshold;
}

/* Elements n and n + 1 together: one block when n is even. */
static __device__ __forceinline__ void dropout_keep2(uint64_t seed, uint64_t offset, uint64_t n, uint64_t threshold,
                                                     bool *k0, bool *k1) {
    uint32_t r[4];
    philox_block(seed, offset + n / 2, r);
    if ((n & 1) == 0) {
        *k0 = philox_word53(r, 0) < threshold;
        *k1 = philox_word53(r, 1) < threshold;
    } else {
        *k0 = philox_word53(r, 1) < threshold;
        *k1 = dropout_keep(seed, offset, n + 1, threshold);
    }
}

#endif /* CT_CUDA_PHILOX_CUH */
