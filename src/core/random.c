/* Random tensors: the default generator and the implementations of rand, randn,
 * randint, randperm, uniform_, normal_, bernoulli_ and bernoulli (factory.h; the
 * public functions dispatch: Note [Factories as ops] in src/meta/factories.c). */
#include <math.h>
#include <stdatomic.h>
#include <string.h>

#include "device.h"
#include "dtype.h"
#include "factory.h"
#include "random.h"
#include "tensor_impl.h"
#include "view.h"

/* Note [Random streams]
 * A generator is a (seed, offset) pair. Philox4x32-10 turns a 128-bit counter and the
 * 64-bit seed into four 32-bit words, and any counter can be computed on its own. A
 * call that needs C counters reserves [offset, offset + C) by advancing the offset
 * atomically, and element i of its output is a pure function of the seed, that first
 * counter and i:
 *
 *   uniform float32/float16/bfloat16  word i % 4 of counter offset + i / 4
 *   uniform float64, randint,          words (2(i % 2), 2(i % 2) + 1) of counter
 *   bernoulli                          offset + i / 2, as one 64-bit draw
 *   normal (all dtypes)                counter offset + i / 2 gives two 64-bit draws,
 *                                      Box-Muller turns them into two normals; i even
 *                                      takes the cosine one, i odd the sine one
 *   randperm                           swap k of Fisher-Yates draws like randint
 *
 * Elements are numbered in row-major order of the logical shape, whatever the strides.
 * Because nothing depends on which thread computes what, OpenMP can split a tensor
 * into chunks of counters freely and the result is the same for every thread count.
 * A call always starts on a fresh counter, so the words left over in a call's last
 * counter are never reused. Seeding resets the offset to 0. */

struct ct_generator {
    atomic_flag lock; /* guards seed and offset together; held for a few instructions */
    uint64_t seed;
    uint64_t offset;
};

static ct_generator default_generator = {ATOMIC_FLAG_INIT, CT_DEFAULT_SEED, 0};

ct_generator *ct_default_generator(void) { return &default_generator; }

static void gen_lock(ct_generator *g) {
    while (atomic_flag_test_and_set_explicit(&g->lock, memory_order_acquire)) {
    }
}
static void gen_unlock(ct_generator *g) { atomic_flag_clear_explicit(&g->lock, memory_order_release); }

void ct_generator_reserve(ct_generator *g, uint64_t n, uint64_t *seed, uint64_t *offset) {
    gen_lock(g);
    *seed = g->seed;
    *offset = g->offset;
    g->offset += n;
    gen_unlock(g);
}

void ct_generator_get_state(ct_generator *g, uint64_t *seed, uint64_t *offset) {
    gen_lock(g);
    *seed = g->seed;
    *offset = g->offset;
    gen_unlock(g);
}

void ct_generator_set_state(ct_generator *g, uint64_t seed, uint64_t offset) {
    gen_lock(g);
    g->seed = seed;
    g->offset = offset;
    gen_unlock(g);
}

/* Note [Seeding under capture] (random.h) */
static _Atomic(ct_seed_hook_fn) seed_hook;

void ct_core_set_seed_hook(ct_seed_hook_fn fn) { atomic_store(&seed_hook, fn); }

void ct_manual_seed(uint64_t seed) {
    ct_seed_hook_fn fn = atomic_load_explicit(&seed_hook, memory_order_acquire);
    if (fn && fn(seed))
        return;
    ct_generator_set_state(&default_generator, seed, 0);
}

uint64_t ct_initial_seed(void) {
    uint64_t seed, offset;
    ct_generator_get_state(&default_generator, &seed, &offset);
    return seed;
}

/* ------------------------------------------------------------------ jobs */

static inline uint64_t word64(const uint32_t r[4], int half) {
    return (uint64_t)r[2 * half] | ((uint64_t)r[2 * half + 1] << 32);
}

/* Reserves J's counters (the same ceil(n / epc) on every backend: Note [Same numbers
 * on CPU and GPU] in src/cuda/random.cu) and runs it on device's backend. */
static bool run_job_on(const char *op, ct_random_job *J, ct_device device) {
    const ct_device_iface *dev = ct_device_need(op, (ct_device_type)device.type);
    if (!dev)
        return false;
    int64_t ncounters = (J->n + J->epc - 1) / J->epc;
    ct_generator_reserve(&default_generator, (uint64_t)ncounters, &J->seed, &J->offset);
    return dev->random_fill(J, device.index) == CT_OK;
}

/* Runs J over t in place: straight into t when it is contiguous, else through a
 * contiguous buffer copied back (elements keep their logical order). Creates no
 * reference to t; false on error. bump: t was just made here (rand, randint, ...), and
 * its version counts this write; the dispatcher bumps the version of an in-place op's
 * tensor (uniform_, normal_, bernoulli_), once. */
static bool fill_tensor(const char *op, ct_tensor *t, ct_random_job *J, bool bump) {
    if (bump)
        ct_tensor_bump_version(t);
    if (t->device.type == CT_DEVICE_META || t->numel == 0)
        return true; /* no data: no counters reserved */
    J->dtype = t->dtype;
    J->n = t->numel;
    if (ct_tensor_is_contiguous(t)) {
        J->out = ct_tensor_ptr(t);
        return run_job_on(op, J, t->device);
    }
    ct_scope_begin();
    ct_tensor *tmp = ct_tensor_new(op, t->shape, NULL, t->ndim, t->dtype, t->device);
    bool ok = tmp != NULL;
    if (ok) {
        J->out = ct_tensor_ptr(tmp);
        ok = run_job_on(op, J, t->device) && ct_copy_impl(t, tmp) != NULL;
    }
    ct_scope_end();
    return ok;
}

/* What in-place ops return: a new reference to t, or NULL. */
static ct_tensor *ref_if(bool ok, ct_tensor *t) { return ok ? ct_tensor_ref(t) : NULL; }

static int uniform_digits(ct_dtype d) {
    switch (d) {
    case CT_DTYPE_FLOAT16: return 11;
    case CT_DTYPE_BFLOAT16: return 8;
    case CT_DTYPE_FLOAT32: return 24;
    default: return 53;
    }
}

/* The largest finite value of a floating dtype. */
static double dtype_max(ct_dtype d) {
    switch (d) {
    case CT_DTYPE_FLOAT16: return 65504.0;
    case CT_DTYPE_BFLOAT16: return 3.3895313892515355e38;
    case CT_DTYPE_FLOAT32: return 3.4028234663852886e38;
    default: return 1.7976931348623157e308;
    }
}

/* ------------------------------------------------------------------ uniform_ */

static bool uniform_into(ct_tensor *t, double from, double to, bool bump) {
    const char *op = "uniform_";
    if (!ct_dtype_is_floating(t->dtype)) {
        ct_error(CT_ERROR_TYPE, op, "\"check_uniform_bounds\" not implemented for '%s'", ct_dtype_pt_name(t->dtype));
        return false;
    }
    double mx = dtype_max(t->dtype);
    if (!(from >= -mx && from <= mx)) {
        ct_error(CT_ERROR_VALUE, op, "from is out of bounds for %s", ct_dtype_name(t->dtype));
        return false;
    }
    if (!(to >= -mx && to <= mx)) {
        ct_error(CT_ERROR_VALUE, op, "to is out of bounds for %s", ct_dtype_name(t->dtype));
        return false;
    }
    if (from > to) {
        ct_error(CT_ERROR_VALUE, op, "uniform_ expects to return a [from, to) range, but found from=%g > to=%g", from,
                 to);
        return false;
    }
    if (to - from > mx) {
        ct_error(CT_ERROR_VALUE, op,
                 "uniform_ expects to-from <= std::numeric_limits<%s>::max(), but found to=%g and from=%g which "
                 "result in to-from to exceed the limit",
                 ct_dtype_pt_name(t->dtype), to, from);
        return false;
    }
    ct_random_job J = {.kind = CT_RANDOM_UNIFORM, .a = from, .b = to, .digits = uniform_digits(t->dtype)};
    J.epc = J.digits == 53 ? 2 : 4;
    return fill_tensor(op, t, &J, bump);
}

ct_tensor *ct_uniform_impl(ct_tensor *t, double from, double to) {
    CT_CHECK_ARG("uniform_", t);
    return ref_if(uniform_into(t, from, to, false), t);
}

/* ------------------------------------------------------------------ normal_ */

static bool normal_into(ct_tensor *t, double mean, double std, bool bump) {
    const char *op = "normal_";
    if (!(std >= 0.0)) {
        ct_error(CT_ERROR_VALUE, op, "normal expects std >= 0.0, but found std %g", std);
        return false;
    }
    if (!ct_dtype_is_floating(t->dtype)) {
        ct_error(CT_ERROR_TYPE, op, "\"normal_kernel_cpu\" not implemented for '%s'", ct_dtype_pt_name(t->dtype));
        return false;
    }
    ct_random_job J = {.kind = CT_RANDOM_NORMAL, .a = mean, .b = std, .epc = 2};
    return fill_tensor(op, t, &J, bump);
}

ct_tensor *ct_normal_impl(ct_tensor *t, double mean, double std) {
    CT_CHECK_ARG("normal_", t);
    return ref_if(normal_into(t, mean, std, false), t);
}

/* ------------------------------------------------------------------ bernoulli */

ct_tensor *ct_bernoulli_scalar_impl(ct_tensor *t, double p) {
    const char *op = "bernoulli_";
    CT_CHECK_ARG(op, t);
    if (!(p >= 0.0 && p <= 1.0)) {
        ct_error(CT_ERROR_VALUE, op, "bernoulli_ expects p to be in [0, 1], but got p=%g", p);
        return NULL;
    }
    if (!ct_dtype_valid(t->dtype)) {
        ct_error(CT_ERROR_TYPE, op, "invalid dtype %d", (int)t->dtype);
        return NULL;
    }
    ct_random_job J = {.kind = CT_RANDOM_BERNOULLI, .a = p, .epc = 2};
    return ref_if(fill_tensor(op, t, &J, false), t);
}

/* The first element of probs (contiguous float64) outside [0, 1] (NaN included), or
 * -1, in *first; on a GPU one kernel and one value read back. */
static ct_status first_bad_probability(const ct_tensor *probs, int64_t *first) {
    *first = -1;
    const ct_device_iface *dev = ct_device_need("bernoulli", (ct_device_type)probs->device.type);
    if (!dev)
        return ct_last_status();
    return dev->first_outside_unit((const double *)ct_tensor_ptr(probs), probs->numel, first, probs->device.index);
}

ct_tensor *ct_bernoulli_impl(const ct_tensor *p) {
    const char *op = "bernoulli";
    CT_CHECK_ARG(op, p);
    if (!ct_dtype_is_floating(p->dtype)) {
        ct_error(CT_ERROR_TYPE, op, "\"bernoulli_tensor_cpu_p_\" not implemented for '%s'", ct_dtype_pt_name(p->dtype));
        return NULL;
    }
    if (p->device.type == CT_DEVICE_META || p->numel == 0)
        return ct_tensor_new(op, p->shape, NULL, p->ndim, p->dtype, p->device);
    /* Validate every probability before allocating the result, so an error leaves
     * nothing behind even without a scope. */
    ct_scope_begin();
    ct_tensor *probs = ct_contiguous_impl(ct_to_dtype_impl(p, CT_DTYPE_FLOAT64));
    int64_t bad = -1;
    if (!probs || first_bad_probability(probs, &bad)) {
        ct_scope_end();
        return NULL;
    }
    if (bad >= 0) {
        double v = 0;
        const ct_device_iface *dev = ct_device_iface_get((ct_device_type)probs->device.type);
        if (dev)
            dev->read_element(probs, bad, &v);
        ct_error(CT_ERROR_VALUE, op, "Expected p_in >= 0 && p_in <= 1 to be true, but got false (p[%lld] = %g)",
                 (long long)bad, v);
        ct_scope_end();
        return NULL;
    }
    const double *pp = (const double *)ct_tensor_ptr(probs);
    ct_tensor *out = ct_tensor_new(op, p->shape, NULL, p->ndim, p->dtype, p->device);
    ct_random_job J = {.kind = CT_RANDOM_BERNOULLI_TENSOR, .probs = pp, .epc = 2};
    if (out && !fill_tensor(op, out, &J, true))
        out = NULL;
    ct_keep(out);
    ct_scope_end();
    return out;
}

/* ------------------------------------------------------------------ factories */

static ct_tensor *new_float_tensor(const char *op, const int64_t *shape, int ndim, ct_dtype *dtype, ct_device device,
                                   const char *kernel) {
    if (*dtype == CT_DTYPE_UNDEFINED)
        *dtype = ct_get_default_dtype();
    if (ct_dtype_valid(*dtype) && !ct_dtype_is_floating(*dtype)) {
        ct_error(CT_ERROR_TYPE, op, "\"%s\" not implemented for '%s'", kernel, ct_dtype_pt_name(*dtype));
        return NULL;
    }
    return ct_tensor_new(op, shape, NULL, ndim, *dtype, device);
}

ct_tensor *ct_rand_impl(const int64_t *shape, int ndim, ct_dtype dtype, ct_device device) {
    ct_tensor *t = new_float_tensor("rand", shape, ndim, &dtype, device, "check_uniform_bounds");
    if (!t)
        return NULL;
    return uniform_into(t, 0.0, 1.0, true) ? t : NULL;
}

ct_tensor *ct_randn_impl(const int64_t *shape, int ndim, ct_dtype dtype, ct_device device) {
    ct_tensor *t = new_float_tensor("randn", shape, ndim, &dtype, device, "normal_kernel_cpu");
    if (!t)
        return NULL;
    return normal_into(t, 0.0, 1.0, true) ? t : NULL;
}

/* Inclusive range of integers a dtype holds exactly (floats: up to 2^digits). */
static void dtype_int_range(ct_dtype d, double *lo, double *hi) {
    switch (d) {
    case CT_DTYPE_BOOL: *lo = 0; *hi = 1; break;
    case CT_DTYPE_UINT8: *lo = 0; *hi = 255; break;
    case CT_DTYPE_INT8: *lo = -128; *hi = 127; break;
    case CT_DTYPE_INT16: *lo = -32768; *hi = 32767; break;
    case CT_DTYPE_INT32: *lo = -2147483648.0; *hi = 2147483647.0; break;
    case CT_DTYPE_UINT16: *lo = 0; *hi = 65535; break;
    case CT_DTYPE_UINT32: *lo = 0; *hi = 4294967295.0; break;
    case CT_DTYPE_UINT64: *lo = 0; *hi = 18446744073709551615.0; break;
    case CT_DTYPE_FLOAT16: *lo = -2048; *hi = 2048; break;
    case CT_DTYPE_BFLOAT16: *lo = -256; *hi = 256; break;
    case CT_DTYPE_FLOAT32: *lo = -16777216.0; *hi = 16777216.0; break;
    case CT_DTYPE_FLOAT64: *lo = -9007199254740992.0; *hi = 9007199254740992.0; break;
    default: *lo = -9223372036854775808.0; *hi = 9223372036854775807.0; break;
    }
}

/* randint and randperm on a GPU draw on the CPU and copy the result over: the same
 * numbers and the same generator advance as on the CPU. */
#define CT_RANDOM_VIA_CPU(op, device, call)                           \
    do {                                                              \
        if ((device).type != CT_DEVICE_CPU && (device).type != CT_DEVICE_META) { \
            if (!ct_check_device(op, device))                         \
                return NULL;                                          \
            ct_scope_begin();                                         \
            ct_tensor *cpu_ = (call);                                 \
            ct_tensor *r_ = cpu_ ? ct_to_device_impl(cpu_, device) : NULL; \
            ct_keep(r_);                                              \
            ct_scope_end();                                           \
            return r_;                                                \
        }                                                             \
    } while (0)

/* Note [randint bias]
 * randint maps a 64-bit draw x to low + x mod (high - low). The modulo favours the
 * first 2^64 mod range values by one count in 2^64 / range, so the relative bias is at
 * most range / 2^64: below 2^-32 for any range under 2^32, and never worse than 2^-1
 * only for ranges near 2^64. PyTorch does the same (with 32-bit draws for ranges below
 * 2^32). A rejection loop would remove it but would make the number of draws depend
 * on the values, which breaks the one-counter-per-pair layout of Note [Random streams]. */
ct_tensor *ct_randint_impl(int64_t low, int64_t high, const int64_t *shape, int ndim, ct_dtype dtype,
                           ct_device device) {
    const char *op = "randint";
    CT_RANDOM_VIA_CPU(op, device, ct_randint_impl(low, high, shape, ndim, dtype, CT_CPU));
    if (dtype == CT_DTYPE_UNDEFINED)
        dtype = CT_DTYPE_INT64;
    if (!ct_dtype_valid(dtype)) {
        ct_error(CT_ERROR_TYPE, op, "invalid dtype %d", (int)dtype);
        return NULL;
    }
    if (low >= high) {
        ct_error(CT_ERROR_VALUE, op, "random_ expects 'from' to be less than 'to', but got from=%lld >= to=%lld",
                 (long long)low, (long long)high);
        return NULL;
    }
    double lo, hi;
    dtype_int_range(dtype, &lo, &hi);
    if ((double)low < lo || (double)low > hi) {
        ct_error(CT_ERROR_VALUE, op, "from is out of bounds for %s", ct_dtype_name(dtype));
        return NULL;
    }
    if ((double)(high - 1) < lo || (double)(high - 1) > hi) {
        ct_error(CT_ERROR_VALUE, op, "to - 1 is out of bounds for %s", ct_dtype_name(dtype));
        return NULL;
    }
    ct_tensor *t = ct_tensor_new(op, shape, NULL, ndim, dtype, device);
    if (!t)
        return NULL;
    ct_random_job J = {.kind = CT_RANDOM_RANDINT, .low = low, .range = (uint64_t)high - (uint64_t)low, .epc = 2};
    return fill_tensor(op, t, &J, true) ? t : NULL;
}

ct_tensor *ct_randperm_impl(int64_t n, ct_dtype dtype, ct_device device) {
    const char *op = "randperm";
    CT_RANDOM_VIA_CPU(op, device, ct_randperm_impl(n, dtype, CT_CPU));
    if (dtype == CT_DTYPE_UNDEFINED)
        dtype = CT_DTYPE_INT64;
    if (n < 0) {
        ct_error(CT_ERROR_VALUE, op, "Trying to create tensor with negative dimension %lld: [%lld]", (long long)n,
                 (long long)n);
        return NULL;
    }
    if (!ct_dtype_valid(dtype)) {
        ct_error(CT_ERROR_TYPE, op, "invalid dtype %d", (int)dtype);
        return NULL;
    }
    if (dtype == CT_DTYPE_BOOL) {
        ct_error(CT_ERROR_TYPE, op, "\"randperm\" not implemented for 'Bool'");
        return NULL;
    }
    double lo, hi;
    dtype_int_range(dtype, &lo, &hi);
    if (n > 0 && (double)(n - 1) > hi) {
        ct_error(CT_ERROR_VALUE, op, "n cannot be greater than %.0f for %s type.", hi + 1, ct_dtype_pt_name(dtype));
        return NULL;
    }
    ct_tensor *t = ct_tensor_new(op, &n, NULL, 1, dtype, device);
    if (!t || device.type == CT_DEVICE_META || n == 0)
        return t;
    int64_t *perm = (int64_t *)ct_tensor_ptr(t);
    if (dtype != CT_DTYPE_INT64) {
        /* The work array is no larger than a tensor that was just allocated; failing
         * here is out of memory, and t stays owned by the scope (or is released). */
        perm = ct_xmalloc(op, (size_t)n * sizeof *perm);
        if (!perm) {
            if (ct_scope_depth() == 0)
                ct_release(t);
            return NULL;
        }
    }
    for (int64_t i = 0; i < n; i++)
        perm[i] = i;
    /* Fisher-Yates: swap k (k = 0 .. n-2) picks j uniformly in [k, n) from the 64-bit
     * draw k of the reserved counters (see Note [randint bias] for the modulo). */
    uint64_t seed, offset;
    ct_generator_reserve(&default_generator, (uint64_t)(n / 2), &seed, &offset);
    uint32_t r[4];
    for (int64_t k = 0; k + 1 < n; k++) {
        if (k % 2 == 0)
            ct_philox_block(seed, offset + (uint64_t)(k / 2), r);
        int64_t j = k + (int64_t)(word64(r, (int)(k % 2)) % (uint64_t)(n - k));
        int64_t tmp = perm[k];
        perm[k] = perm[j];
        perm[j] = tmp;
    }
    if ((void *)perm != ct_tensor_ptr(t)) {
        char *out = ct_tensor_ptr(t);
        size_t esz = ct_dtype_size(dtype);
        for (int64_t i = 0; i < n; i++)
            ct_store_int64(out + i * (int64_t)esz, dtype, perm[i]);
        free(perm);
    }
    return t;
}
