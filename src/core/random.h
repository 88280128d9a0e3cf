/* Internal random number generation: the Philox4x32-10 block function and the
 * generator state behind ct_manual_seed. See Note [Random streams] in random.c.
 *
 * Everything here is plain C with no CPU-only state, so a CUDA kernel (or dropout)
 * can reproduce the CPU stream: reserve counters on the host with
 * ct_generator_reserve, then compute block (seed, offset + j) wherever element j is
 * produced. */
#ifndef CT_RANDOM_H
#define CT_RANDOM_H

#include <stdint.h>
#include "core/backend_api.h"

CT_BACKEND_BEGIN

/* Philox4x32 constants (Salmon et al., "Parallel Random Numbers: As Easy as 1, 2, 3",
 * SC'11): round multipliers and the Weyl sequence that bumps the key (golden ratio
 * and sqrt(3) - 1, scaled to 32 bits). */
#define CT_PHILOX_M0 0xD2511F53u
#define CT_PHILOX_M1 0xCD9E8D57u
#define CT_PHILOX_W0 0x9E3779B9u
#define CT_PHILOX_W1 0xBB67AE85u
#define CT_PHILOX_ROUNDS 10

/* One Philox4x32-10 block: 4 random words from a 128-bit counter and a 64-bit key. */
static inline void ct_philox4x32_10(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4]) {
    uint32_t c0 = ctr[0], c1 = ctr[1], c2 = ctr[2], c3 = ctr[3];
    uint32_t k0 = key[0], k1 = key[1];
    for (int r = 0; r < CT_PHILOX_ROUNDS; r++) {
        if (r > 0) {
            k0 += CT_PHILOX_W0;
            k1 += CT_PHILOX_W1;
        }
        uint64_t p0 = (uint64_t)CT_PHILOX_M0 * c0;
        uint64_t p1 = (uint64_t)CT_PHILOX_M1 * c2;
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

/* Block `counter` of the stream of `seed`: key = seed (low word first), counter words
 * = (counter low, counter high, 0, 0). The last two counter words are left at zero
 * for CPU ops; a device backend that wants independent substreams may use them. */
static inline void ct_philox_block(uint64_t seed, uint64_t counter, uint32_t out[4]) {
    const uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)};
    const uint32_t ctr[4] = {(uint32_t)counter, (uint32_t)(counter >> 32), 0u, 0u};
    ct_philox4x32_10(ctr, key, out);
}

/* Uniform in [0, 1) from the low `digits` bits of x (24 for float32, 11 for float16,
 * 8 for bfloat16, 53 for float64), as PyTorch's uniform_real_distribution. */
static inline double ct_uniform_from_bits(uint64_t x, int digits) {
    return (double)(x & ((UINT64_C(1) << digits) - 1)) * (1.0 / (double)(UINT64_C(1) << digits));
}

/* Note [Flash attention dropout draws]
 * Flash attention drops the probabilities inside its kernels, where each thread holds
 * 16 keys of a row in a 64-key tile (Note [Flash attention kernels]), so its draws are
 * laid out for that: 16-bit uniforms, eight from one Philox block, a thread's 16 from
 * two blocks it computes alone. For row r of the (B H L) query rows and key j, with
 * tiles = ceil(S / 64), c = j % 64 = 8 nt + 2 t + e (nt < 8, t < 4, e < 2):
 *   counter = offset + (r tiles + j / 64) 8 + 2 t + nt / 4, 16-bit half e of word
 *   nt % 4 (low half first), and the key is kept when that half is below
 *   ceil((1 - p) 65536).
 * A call reserves B H L tiles 8 counters. The keep probability is thus a multiple of
 * 2^-16 (PyTorch's flash kernels round it to 2^-8); one Philox block per 8 elements
 * instead of dropout's one per 2 (53-bit draws) made the forward's draws 4 times
 * cheaper. The CPU reference op uses the same layout, so both draw the same mask from
 * one generator state. */
static inline uint32_t ct_flash_dropout_threshold(double keep) {
    double t = keep * 65536.0; /* exact: a power of two */
    uint32_t i = (uint32_t)t;
    return (double)i < t ? i + 1 : i;
}
static inline uint64_t ct_flash_dropout_counters(int64_t rows, int64_t keys) {
    return (uint64_t)rows * (uint64_t)((keys + 63) / 64) * 8;
}
/* Whether key j of row r is kept. */
static inline int ct_flash_dropout_keep(uint64_t seed, uint64_t offset, int64_t r, int64_t keys, int64_t j,
                                        uint32_t threshold) {
    const int64_t tiles = (keys + 63) / 64, c = j % 64, nt = c / 8, t = (c % 8) / 2, e = c % 2;
    uint32_t w[4];
    ct_philox_block(seed, offset + (uint64_t)((r * tiles + j / 64) * 8 + 2 * t + nt / 4), w);
    return ((w[nt % 4] >> (16 * e)) & 0xffffu) < threshold;
}

/* PyTorch's default seed (torch.initial_seed() before any manual_seed). */
#define CT_DEFAULT_SEED UINT64_C(67280421310721)

typedef struct ct_generator ct_generator;

/* The process-wide default generator (what ct_manual_seed resets). */
ct_generator *ct_default_generator(void);
/* Atomically reserves n counters: *seed and *offset (the first reserved counter) are
 * read together with the advance, so concurrent callers get disjoint ranges. */
void ct_generator_reserve(ct_generator *g, uint64_t n, uint64_t *seed, uint64_t *offset);
/* Current (seed, offset), e.g. to save and restore a state. */
void ct_generator_get_state(ct_generator *g, uint64_t *seed, uint64_t *offset);
void ct_generator_set_state(ct_generator *g, uint64_t seed, uint64_t offset);

CT_BACKEND_END

/* Note [Seeding under capture]
 * ct_manual_seed inside a function that ct_compile captures must happen again on every
 * replay, or the replay's random ops would draw from wherever the generator stands
 * (torch.compile leaves torch.manual_seed to run eagerly on each call). The compiler
 * (src/compile) installs one hook that ct_manual_seed asks first; while its thread
 * captures, the hook records the seeding as a host call (which also seeds now) and
 * returns true. Without a hook, or outside a capture, the seed is set directly. */
typedef bool (*ct_seed_hook_fn)(uint64_t seed);
void ct_core_set_seed_hook(ct_seed_hook_fn fn);

#endif /* CT_RANDOM_H */
