/* The CPU backend's random fills: Philox blocks turned into uniform, normal, randint
 * and Bernoulli values in the layout of Note [Random streams] (src/core/random.c). The
 * core reserves the counters; element i is a pure function of (seed, offset, i), so
 * the split over threads never changes a value. */
#include <math.h>

#include "cpu/cpu_backend.h"
#include "core/dtype.h"
#include "core/parallel.h"
#include "core/random.h"

static inline void store(char *out, ct_dtype d, int64_t i, double v) {
    switch (d) {
    case CT_DTYPE_FLOAT32: ((float *)out)[i] = (float)v; break;
    case CT_DTYPE_FLOAT64: ((double *)out)[i] = v; break;
    default: ct_store_double(out + i * (int64_t)ct_dtype_size(d), d, v); break;
    }
}

static inline uint64_t word64(const uint32_t r[4], int half) {
    return (uint64_t)r[2 * half] | ((uint64_t)r[2 * half + 1] << 32);
}

static void run_counters(const ct_random_job *job, int64_t c_begin, int64_t c_end) {
    /* A local copy: stores through the char* output may alias anything reachable
     * through a pointer, which would reload every field per element. */
    const ct_random_job J = *job;
    const double two_pi = 6.283185307179586476925286766559;
    const int64_t esz = (int64_t)ct_dtype_size(J.dtype);
    const bool is_float = ct_dtype_is_floating(J.dtype);
    const float ffrom = (float)J.a, fspan = (float)J.b - (float)J.a;
    for (int64_t c = c_begin; c < c_end; c++) {
        uint32_t r[4];
        ct_philox_block(J.seed, J.offset + (uint64_t)c, r);
        int64_t i0 = c * J.epc;
        int m = (int)(J.n - i0 < J.epc ? J.n - i0 : J.epc);
        switch (J.kind) {
        case CT_RANDOM_UNIFORM:
            if (J.digits == 53) {
                for (int e = 0; e < m; e++)
                    store(J.out, J.dtype, i0 + e, ct_uniform_from_bits(word64(r, e), 53) * (J.b - J.a) + J.a);
            } else if (J.dtype == CT_DTYPE_FLOAT32) {
                for (int e = 0; e < m; e++)
                    ((float *)J.out)[i0 + e] = (float)ct_uniform_from_bits(r[e], 24) * fspan + ffrom;
            } else { /* float accumulate type, as PyTorch */
                for (int e = 0; e < m; e++)
                    store(J.out, J.dtype, i0 + e, (float)ct_uniform_from_bits(r[e], J.digits) * fspan + ffrom);
            }
            break;
        case CT_RANDOM_NORMAL: {
            /* Box-Muller; 1 - u lies in (0, 1], so the log is finite. */
            double u1 = 1.0 - ct_uniform_from_bits(word64(r, 0), 53);
            double u2 = ct_uniform_from_bits(word64(r, 1), 53);
            double radius = sqrt(-2.0 * log(u1));
            store(J.out, J.dtype, i0, J.a + J.b * radius * cos(two_pi * u2));
            if (m > 1)
                store(J.out, J.dtype, i0 + 1, J.a + J.b * radius * sin(two_pi * u2));
            break;
        }
        case CT_RANDOM_RANDINT:
            /* Modulo of a 64-bit draw: see Note [randint bias]. */
            for (int e = 0; e < m; e++) {
                int64_t v = (int64_t)((uint64_t)J.low + word64(r, e) % J.range);
                if (is_float)
                    store(J.out, J.dtype, i0 + e, (double)v);
                else
                    ct_store_int64(J.out + (i0 + e) * esz, J.dtype, v);
            }
            break;
        case CT_RANDOM_BERNOULLI:
        case CT_RANDOM_BERNOULLI_TENSOR:
            for (int e = 0; e < m; e++) {
                double p = J.kind == CT_RANDOM_BERNOULLI ? J.a : J.probs[i0 + e];
                double u = ct_uniform_from_bits(word64(r, e), 53);
                ct_store_int64(J.out + (i0 + e) * esz, J.dtype, u < p ? 1 : 0);
            }
            break;
        }
    }
}

/* Counters per chunk: big enough that a chunk outweighs scheduling. */
#define CT_RNG_GRAIN 8192

typedef struct {
    const ct_random_job *J;
    int64_t ncounters;
} rng_job;

static void rng_chunk(void *ctx, int64_t ch) {
    const rng_job *j = ctx;
    int64_t end = (ch + 1) * CT_RNG_GRAIN;
    run_counters(j->J, ch * CT_RNG_GRAIN, end < j->ncounters ? end : j->ncounters);
}

ct_status ct_cpu_random_fill(const ct_random_job *J, int device_index) {
    (void)device_index;
    int64_t ncounters = (J->n + J->epc - 1) / J->epc;
    int64_t nchunks = (ncounters + CT_RNG_GRAIN - 1) / CT_RNG_GRAIN;
    int threads = ct_get_num_threads();
    if (nchunks > 1 && threads > 1) {
        rng_job j = {J, ncounters};
        ct_parallel_for(nchunks, threads, rng_chunk, &j);
        return CT_OK;
    }
    run_counters(J, 0, ncounters);
    return CT_OK;
}
