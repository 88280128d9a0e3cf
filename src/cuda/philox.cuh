/* Philox4x32-10 on the device (src/core/random.h's block function, with __umulhi) and
 * the graph's random state (Note [Random numbers in a graph] in random.cu), shared by
 * random.cu and the kernels that draw inside their loops (flash attention). */
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
        uint32_t hi0 = __umulhi(CT_PHILOX_M0, c0), lo0 = CT_PHILOX_M0 * c0;
        uint32_t hi1 = __umulhi(CT_PHILOX_M1, c2), lo1 = CT_PHILOX_M1 * c2;
        uint32_t n0 = hi1 ^ c1 ^ k0;
        uint32_t n2 = hi0 ^ c3 ^ k1;
        c1 = lo1;
        c3 = lo0;
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

#endif /* CT_CUDA_PHILOX_CUH */
