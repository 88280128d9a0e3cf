#include "opinfo.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_testutil.h"

#include "core/dtype.h"
#include "tensor_impl.h"
#include "ctorch/ops.h"

/* A small deterministic generator, independent of the library's RNG. */
static uint64_t lcg_state = 88172645463325252ull;
static double lcg_unit(void) {
    lcg_state ^= lcg_state << 13;
    lcg_state ^= lcg_state >> 7;
    lcg_state ^= lcg_state << 17;
    return (double)(lcg_state >> 11) / 9007199254740992.0;
}

/* The row-major index of flat element i of shape. */
static void unravel(int64_t i, const int64_t *shape, int nd, int64_t *idx) {
    for (int k = nd - 1; k >= 0; k--) {
        idx[k] = i % shape[k];
        i /= shape[k];
    }
}

static int arity(const ct_opinfo *info) { return info->t ? 3 : info->b ? 2 : 1; }

static double draw(const ct_opinfo *info, int which, ct_dtype d) {
    double lo = info->lo, hi = info->hi;
    if (which == 1 && info->hi_b > info->lo_b)
        lo = info->lo_b, hi = info->hi_b;
    if (which == 2 && info->hi_c > info->lo_c)
        lo = info->lo_c, hi = info->hi_c;
    if (d == CT_BOOL)
        return lcg_unit() < 0.5 ? 0.0 : 1.0;
    if (!ct_dtype_is_signed(d) && lo < 0)
        lo = 0;
    for (;;) {
        double v = lo + (hi - lo) * lcg_unit();
        if (!ct_dtype_is_floating(d) || info->integer_inputs)
            v = floor(v);
        if (which == 1 && info->nonzero_b && v == 0)
            continue;
        return v;
    }
}

/* A tensor of shape with random values; non-contiguous (a strided window into a
 * bigger buffer, innermost stride 2) when strided is set. */
static ct_tensor *sample(const ct_opinfo *info, int which, const int64_t *shape, int ndim, ct_dtype d,
                         bool strided) {
    ct_tensor *t;
    if (strided && ndim > 0) {
        int64_t big[CT_MAX_DIMS];
        for (int i = 0; i < ndim; i++)
            big[i] = shape[i];
        big[ndim - 1] = shape[ndim - 1] * 2;
        ct_tensor *base = ct_zeros(big, ndim, d, CT_CPU);
        int64_t strides[CT_MAX_DIMS];
        int64_t s = 1;
        for (int i = ndim - 1; i >= 0; i--) {
            strides[i] = i == ndim - 1 ? 2 : s;
            s *= big[i];
        }
        /* A view over base's bytes; base stays alive through the scope. */
        t = ct_from_blob(ct_tensor_data(base), shape, strides, ndim, d, NULL, NULL);
    } else {
        t = ct_empty(shape, ndim, d, CT_CPU);
    }
    int64_t n = ct_tensor_numel(t);
    for (int64_t i = 0; i < n; i++) {
        int64_t idx[CT_MAX_DIMS];
        unravel(i, shape, ndim, idx);
        ct_tensor_set(t, idx, draw(info, which, d));
    }
    return t;
}

/* The dtype the op computes in: the promoted type of the value inputs. */
static ct_dtype compute_dtype(const ct_opinfo *info, const ct_tensor *const *in, int n) {
    const ct_tensor *ops[3] = {NULL, NULL, NULL};
    for (int i = info->condition ? 1 : 0; i < n; i++)
        ops[i] = in[i];
    ct_dtype r = ct_result_type(ops, n);
    if (info->out == CT_OPINFO_OUT_FLOAT && !ct_dtype_is_floating(r))
        r = ct_get_default_dtype();
    return r;
}

static ct_dtype expected_dtype(const ct_opinfo *info, const ct_tensor *const *in, int n) {
    return info->out == CT_OPINFO_OUT_BOOL ? CT_BOOL : compute_dtype(info, in, n);
}

static double tolerance(const ct_opinfo *info, ct_dtype d) {
    double t;
    switch (d) {
    case CT_F16: t = 2e-3; break;
    case CT_BF16: t = 1.6e-2; break;
    case CT_F32: t = 2e-6; break;
    case CT_F64: t = 1e-13; break;
    default: return 0;
    }
    return info->tol > t ? info->tol : t;
}

static ct_tensor *call_fn(const ct_opinfo *info, const ct_tensor *const *in) {
    return info->t ? info->t(in[0], in[1], in[2]) : info->b ? info->b(in[0], in[1]) : info->u(in[0]);
}

/* Compares got against the reference applied to the inputs' values (converted to the
 * compute dtype first, the way the kernel sees them). */
static void check_values(const ct_opinfo *info, const ct_tensor *got, const ct_tensor *const *in, int nin,
                         const char *what) {
    ct_dtype compute = compute_dtype(info, in, nin);
    ct_dtype od = ct_tensor_dtype(got);
    int nd = ct_tensor_dim(got);
    const int64_t *shape = ct_tensor_shape(got);
    int64_t n = ct_tensor_numel(got);
    for (int64_t i = 0; i < n; i++) {
        int64_t idx[CT_MAX_DIMS];
        unravel(i, shape, nd, idx);
        double x[3] = {0, 0, 0};
        for (int j = 0; j < nin; j++) {
            const ct_tensor *t = in[j];
            int tnd = ct_tensor_dim(t);
            int64_t tidx[CT_MAX_DIMS];
            for (int k = 0; k < tnd; k++) {
                int64_t s = ct_tensor_shape(t)[k];
                tidx[k] = s == 1 ? 0 : idx[nd - tnd + k];
            }
            double v;
            ct_tensor_get(t, tidx, &v);
            if (j == 0 && info->condition) {
                x[j] = v;
                continue;
            }
            char buf[16];
            ct_store_double(buf, compute, v); /* round to the compute dtype */
            x[j] = ct_load_double(buf, compute);
        }
        double want = info->t ? info->ref3(x[0], x[1], x[2]) : info->ref(x[0], x[1]);
        char ob[16];
        ct_store_double(ob, od, want);
        double want_rounded = ct_load_double(ob, od);
        double v;
        ct_tensor_get(got, idx, &v);
        bool ok;
        if (isnan(want_rounded))
            ok = isnan(v);
        else if (isinf(want_rounded))
            ok = v == want_rounded;
        else {
            double tol = tolerance(info, od);
            ok = fabs(v - want_rounded) <= tol * (1 + fabs(want_rounded));
        }
        if (!ok)
            fail_msg("%s %s [%s]: element %lld: got %.17g, want %.17g (inputs %.17g, %.17g, %.17g)", info->name, what,
                     ct_dtype_name(od), (long long)i, v, want_rounded, x[0], x[1], x[2]);
    }
}

static void check_meta(const ct_opinfo *info, const ct_tensor *got, const ct_tensor *const *in, int nin) {
    const ct_tensor *m[3] = {NULL, NULL, NULL};
    for (int i = 0; i < nin; i++)
        m[i] = ct_empty(ct_tensor_shape(in[i]), ct_tensor_dim(in[i]), ct_tensor_dtype(in[i]), CT_META);
    ct_tensor *r = call_fn(info, m);
    if (!r)
        fail_msg("%s on META failed: %s", info->name, ct_last_error());
    assert_true(ct_tensor_device(r).type == CT_DEVICE_META);
    assert_int_equal(ct_tensor_dtype(r), ct_tensor_dtype(got));
    assert_int_equal(ct_tensor_dim(r), ct_tensor_dim(got));
    for (int k = 0; k < ct_tensor_dim(r); k++)
        assert_int_equal(ct_tensor_shape(r)[k], ct_tensor_shape(got)[k]);
}

static void check_variants(const ct_opinfo *info, const ct_tensor *got, const ct_tensor *const *in, int nin) {
    const ct_tensor *a = in[0], *b = in[1], *c = in[2];
    /* out= into a fresh tensor of the result's dtype and shape. */
    bool has_out = info->t ? info->t_out != NULL : info->b ? info->b_out != NULL : info->u_out != NULL;
    if (has_out) {
        ct_tensor *out = ct_empty(ct_tensor_shape(got), ct_tensor_dim(got), ct_tensor_dtype(got), CT_CPU);
        ct_tensor *r = info->t ? info->t_out(a, b, c, out) : info->b ? info->b_out(a, b, out) : info->u_out(a, out);
        if (!r)
            fail_msg("%s_out failed: %s", info->name, ct_last_error());
        check_values(info, out, in, nin, "out=");
    }
    /* In place, when the result fits in a. */
    bool has_inplace = info->t ? info->t_ != NULL : info->b ? info->b_ != NULL : info->u_ != NULL;
    if (!has_inplace)
        return;
    bool fits = ct_tensor_dtype(got) == ct_tensor_dtype(a) && ct_tensor_dim(got) == ct_tensor_dim(a);
    for (int k = 0; fits && k < ct_tensor_dim(a); k++)
        fits = ct_tensor_shape(got)[k] == ct_tensor_shape(a)[k];
    ct_tensor *self = ct_clone(a);
    int64_t v0 = ct_tensor_version(self);
    ct_tensor *r = info->t ? info->t_(self, b, c) : info->b ? info->b_(self, b) : info->u_(self);
    if (fits) {
        if (!r)
            fail_msg("%s_ failed: %s", info->name, ct_last_error());
        assert_ptr_equal(ct_tensor_data(r), ct_tensor_data(self));
        assert_true(ct_tensor_version(self) > v0);
        const ct_tensor *orig[3] = {a, b, c};
        check_values(info, self, orig, nin, "in-place");
    } else if (r) {
        /* Allowed only when the result dtype can be cast back into self (e.g. int + bool). */
        assert_true(ct_can_cast(ct_tensor_dtype(got), ct_tensor_dtype(self)) || ct_tensor_dim(got) != ct_tensor_dim(a));
    } else {
        ct_clear_error();
    }
}

/* ------------------------------------------------------------------ the CUDA pass
 *
 * Where a GPU is present, every sample also runs on CUDA (inputs copied with their
 * layouts) and must agree with the CPU result: exactly for integer and bool results,
 * within a few times the dtype's tolerance for floats (the two math libraries round
 * differently in the last place), and a second GPU run must give the first's bits; the
 * gradchecks run again on the GPU in float64.
 * CT_OPINFO_NO_CUDA=1 turns it off. */
static bool cuda_pass(void) {
    static int on = -1;
    if (on < 0)
        on = ct_cuda_is_available() && !getenv("CT_OPINFO_NO_CUDA");
    return on != 0;
}

static void cuda_compare(const char *name, const char *what, const ct_tensor *gpu, const ct_tensor *cpu, double tol) {
    if (!gpu)
        fail_msg("%s %s on CUDA failed: %s", name, what, ct_last_error());
    if (ct_tensor_device(gpu).type != CT_DEVICE_CUDA)
        fail_msg("%s %s on CUDA: the result is not on the GPU", name, what);
    if (ct_tensor_dtype(gpu) != ct_tensor_dtype(cpu) || ct_tensor_dim(gpu) != ct_tensor_dim(cpu))
        fail_msg("%s %s on CUDA: dtype %s/%d dims, CPU %s/%d", name, what, ct_dtype_name(ct_tensor_dtype(gpu)),
                 ct_tensor_dim(gpu), ct_dtype_name(ct_tensor_dtype(cpu)), ct_tensor_dim(cpu));
    for (int k = 0; k < ct_tensor_dim(cpu); k++)
        if (ct_tensor_shape(gpu)[k] != ct_tensor_shape(cpu)[k])
            fail_msg("%s %s on CUDA: shapes differ at dim %d", name, what, k);
    ct_tensor *g = ct_to_device(gpu, CT_CPU);
    if (!g)
        fail_msg("%s %s: could not copy the CUDA result back: %s", name, what, ct_last_error());
    int64_t n = ct_tensor_numel(cpu);
    for (int64_t i = 0; i < n; i++) {
        double x = ct_test_at(g, i), y = ct_test_at(cpu, i);
        bool ok = (isnan(x) && isnan(y)) || x == y || (isfinite(y) && fabs(x - y) <= tol * (1 + fabs(y)));
        if (!ok)
            fail_msg("%s %s [%s]: element %lld: CUDA %.17g, CPU %.17g", name, what, ct_dtype_name(ct_tensor_dtype(cpu)),
                     (long long)i, x, y);
    }
}

/* Deterministic mode's promise (docs/core.md, "Deterministic algorithms"): a second
 * run of the same call on the GPU gives the first run's bits. Every op of these tables
 * (elementwise and reductions, which never add with atomics) keeps it, with the mode
 * on or off. */
static void cuda_same_twice(const char *name, const char *what, const ct_tensor *first, const ct_tensor *second) {
    if (!first || !second)
        fail_msg("%s %s on CUDA failed: %s", name, what, ct_last_error());
    if (!ct_test_same_bits(ct_to_device(first, CT_CPU), ct_to_device(second, CT_CPU)))
        fail_msg("%s %s on CUDA: two runs give different bits", name, what);
}

static void check_cuda(const ct_opinfo *info, const ct_tensor *got, const ct_tensor *const *in, int nin) {
    const ct_tensor *g[3] = {NULL, NULL, NULL};
    for (int i = 0; i < nin; i++) {
        g[i] = ct_test_to_device_as(in[i], CT_CUDA(0));
        if (!g[i])
            fail_msg("%s: could not copy an input to CUDA: %s", info->name, ct_last_error());
    }
    double tol = 4 * tolerance(info, ct_tensor_dtype(got));
    ct_tensor *first = call_fn(info, g);
    cuda_compare(info->name, "functional", first, got, tol);
    cuda_same_twice(info->name, "functional", first, call_fn(info, g));
    bool has_out = info->t ? info->t_out != NULL : info->b ? info->b_out != NULL : info->u_out != NULL;
    if (has_out) {
        ct_tensor *out = ct_empty(ct_tensor_shape(got), ct_tensor_dim(got), ct_tensor_dtype(got), CT_CUDA(0));
        ct_tensor *r = info->t ? info->t_out(g[0], g[1], g[2], out) : info->b ? info->b_out(g[0], g[1], out)
                                                                          : info->u_out(g[0], out);
        cuda_compare(info->name, "out=", r ? out : NULL, got, tol);
    }
}

typedef struct shape_case {
    int nd[3];
    int64_t s[3][3];
} shape_case;

static ct_tensor *compiled_fn(ct_tensor *const *in, int n, void *ud) {
    (void)n;
    return call_fn(ud, (const ct_tensor *const *)in);
}

/* The op through ct_compile: eager, captured, then replayed twice (the second time on
 * new input tensors of the same guard key): each result equals the eager one. */
static void check_compiled(const ct_opinfo *info, const ct_tensor *got, const ct_tensor *const *in, int nin) {
    ct_compiled *c = ct_compile(compiled_fn, (void *)info, 0);
    CT_ASSERT_OK(c);
    ct_tensor *ins[3] = {(ct_tensor *)in[0], (ct_tensor *)in[1], (ct_tensor *)in[2]};
    for (int k = 0; k < 4; k++) {
        ct_scope_begin();
        ct_tensor *copies[3] = {NULL, NULL, NULL};
        if (k == 3)
            for (int i = 0; i < nin; i++) {
                bool expanded = false; /* an expanded input cannot be written: it is passed as it is */
                for (int d = 0; d < ct_tensor_dim(in[i]); d++)
                    expanded |= ct_tensor_strides(in[i])[d] == 0 && ct_tensor_shape(in[i])[d] > 1;
                if (expanded) {
                    copies[i] = ins[i];
                    continue;
                }
                copies[i] = ct_copy_(ct_empty_strided(ct_tensor_shape(in[i]), ct_tensor_strides(in[i]),
                                                      ct_tensor_dim(in[i]), ct_tensor_dtype(in[i]), CT_CPU),
                                     in[i]);
            }
        ct_tensor *r = ct_compiled_call(c, k == 3 ? copies : ins, nin);
        if (!r)
            fail_msg("%s through ct_compile (call %d) failed: %s", info->name, k + 1, ct_last_error());
        if (!ct_test_same_bits(r, got))
            fail_msg("%s through ct_compile (call %d): result differs from the eager call", info->name, k + 1);
        ct_scope_end();
    }
    if (ct_compiled_stat(c, CT_COMPILE_STAT_REPLAYS) < 1)
        fail_msg("%s through ct_compile: no replay", info->name);
    ct_compiled_free(c);
}

static void run_one(const ct_opinfo *info, const shape_case *sc, const ct_dtype *dts, bool strided) {
    ct_scope_begin();
    int nin = arity(info);
    const ct_tensor *in[3] = {NULL, NULL, NULL};
    for (int i = 0; i < nin; i++) {
        ct_dtype d = i == 0 && info->condition ? CT_BOOL : dts[i];
        in[i] = sample(info, i, sc->s[i], sc->nd[i], d, strided);
    }
    ct_tensor *got = call_fn(info, in);
    if (!got)
        fail_msg("%s(%s, %s, %s) failed: %s", info->name, ct_dtype_name(dts[0]), nin > 1 ? ct_dtype_name(dts[1]) : "",
                 nin > 2 ? ct_dtype_name(dts[2]) : "", ct_last_error());
    ct_dtype want = expected_dtype(info, in, nin);
    if (ct_tensor_dtype(got) != want)
        fail_msg("%s: result dtype %s, expected %s", info->name, ct_dtype_name(ct_tensor_dtype(got)),
                 ct_dtype_name(want));
    check_values(info, got, in, nin, "functional");
    check_meta(info, got, in, nin);
    check_variants(info, got, in, nin);
    check_compiled(info, got, in, nin);
    if (cuda_pass())
        check_cuda(info, got, in, nin);
    ct_scope_end();
}

static bool promotable(ct_dtype a, ct_dtype b) {
    ct_dtype r = ct_promote_types(a, b);
    ct_clear_error();
    return r != CT_DTYPE_UNDEFINED;
}

static void run_errors(const ct_opinfo *info) {
    ct_clear_error();
    ct_scope_begin();
    const char *op = info->op ? info->op : info->name;
    ct_dtype d = (info->dtypes & CT_DT(CT_F32)) ? CT_F32 : CT_I64;
    ct_tensor *a = ct_zeros(CT_SHAPE(2, 3), d, CT_CPU);
    ct_tensor *bad = ct_zeros(CT_SHAPE(4), d, CT_CPU);
    ct_tensor *cond = ct_zeros(CT_SHAPE(2, 3), CT_BOOL, CT_CPU);
    const ct_tensor *first = info->condition ? cond : a;
    if (info->t) {
        CT_ASSERT_ERR(info->t(first, a, bad) != NULL, CT_ERROR_VALUE, "must match the size of tensor");
        CT_ASSERT_ERR(info->t(NULL, a, a) != NULL, CT_ERROR_NULL_ARGUMENT, op);
        if (!info->optional)
            CT_ASSERT_ERR(info->t(first, NULL, a) != NULL, CT_ERROR_NULL_ARGUMENT, op);
        if (info->t_out)
            CT_ASSERT_ERR(info->t_out(first, a, a, bad) != NULL, CT_ERROR_VALUE, "shape");
        if (info->t_) {
            ct_tensor *small = ct_zeros(CT_SHAPE(3), d, CT_CPU);
            CT_ASSERT_ERR(info->t_(small, a, a) != NULL, CT_ERROR_VALUE, "doesn't match the broadcast shape");
        }
    } else if (info->b) {
        CT_ASSERT_ERR(info->b(a, bad) != NULL, CT_ERROR_VALUE, "must match the size of tensor");
        CT_ASSERT_ERR(info->b(NULL, a) != NULL, CT_ERROR_NULL_ARGUMENT, op);
        CT_ASSERT_ERR(info->b(a, NULL) != NULL, CT_ERROR_NULL_ARGUMENT, op);
        if (info->b_out)
            CT_ASSERT_ERR(info->b_out(a, a, bad) != NULL, CT_ERROR_VALUE, "shape");
        if (info->b_) {
            ct_tensor *small = ct_zeros(CT_SHAPE(3), d, CT_CPU);
            CT_ASSERT_ERR(info->b_(small, a) != NULL, CT_ERROR_VALUE, "doesn't match the broadcast shape");
        }
    } else {
        CT_ASSERT_ERR(info->u(NULL) != NULL, CT_ERROR_NULL_ARGUMENT, op);
        if (info->u_out)
            CT_ASSERT_ERR(info->u_out(a, bad) != NULL, CT_ERROR_VALUE, "shape");
        if (info->u_)
            CT_ASSERT_ERR(info->u_(NULL) != NULL, CT_ERROR_NULL_ARGUMENT, op);
    }
    /* A dtype the op does not support is refused with an error. */
    for (int u = 0; u < CT_DTYPE_COUNT; u++) {
        if (!(info->refused & CT_DT(u)))
            continue;
        const ct_tensor *x = ct_ones(CT_SHAPE(2), (ct_dtype)u, CT_CPU);
        const ct_tensor *c = info->condition ? ct_ones(CT_SHAPE(2), CT_BOOL, CT_CPU) : x;
        const ct_tensor *in[3] = {c, x, x};
        ct_tensor *r = call_fn(info, in);
        if (r)
            fail_msg("%s accepted unsupported dtype %s", info->name, ct_dtype_name((ct_dtype)u));
        if (ct_last_status() == CT_OK || strlen(ct_last_error()) == 0)
            fail_msg("%s: no error for dtype %s", info->name, ct_dtype_name((ct_dtype)u));
        ct_clear_error();
    }
    ct_scope_end();
}

void ct_opinfo_run(const ct_opinfo *info) {
    ct_clear_error();
    static const shape_case shapes[] = {
        {{2, 2, 2}, {{3, 4}, {3, 4}, {3, 4}}},
        {{2, 1, 0}, {{3, 4}, {4}, {0}}},
        {{2, 2, 1}, {{3, 1}, {1, 4}, {4}}},
        {{3, 2, 1}, {{2, 3, 4}, {3, 1}, {1}}},
        {{0, 1, 0}, {{0}, {3}, {0}}},
        {{1, 0, 1}, {{5}, {0}, {5}}},
        {{0, 0, 0}, {{0}, {0}, {0}}},
        {{2, 1, 2}, {{0, 3}, {3}, {1, 3}}},
        {{1, 1, 1}, {{37}, {37}, {37}}},
    };
    int nin = arity(info);
    for (int d = 0; d < CT_DTYPE_COUNT; d++) {
        if (!(info->dtypes & CT_DT(d)))
            continue;
        ct_dtype dts[3] = {(ct_dtype)d, (ct_dtype)d, (ct_dtype)d};
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
            for (int strided = 0; strided < 2; strided++)
                run_one(info, &shapes[s], dts, strided);
    }
    /* Mixed dtypes (binary, and the two values of where): every supported pair that
     * promotes. */
    if (nin >= 2 && (nin == 2 || info->condition))
        for (int da = 0; da < CT_DTYPE_COUNT; da++)
            for (int db = 0; db < CT_DTYPE_COUNT; db++) {
                if (da == db || !(info->dtypes & CT_DT(da)) || !(info->dtypes & CT_DT(db)) ||
                    !promotable((ct_dtype)da, (ct_dtype)db))
                    continue;
                const ct_tensor *probe[2];
                ct_scope_begin();
                probe[0] = ct_zeros(CT_SHAPE(1), (ct_dtype)da, CT_CPU);
                probe[1] = ct_zeros(CT_SHAPE(1), (ct_dtype)db, CT_CPU);
                ct_dtype r = ct_result_type(probe, 2);
                ct_scope_end();
                if (!(info->dtypes & CT_DT(r)) && info->out != CT_OPINFO_OUT_FLOAT)
                    continue;
                ct_dtype dts[3] = {(ct_dtype)da, (ct_dtype)db, (ct_dtype)db};
                if (info->condition)
                    dts[1] = (ct_dtype)da;
                run_one(info, &shapes[2], dts, false);
            }

    if (info->out != CT_OPINFO_OUT_BOOL && (info->dtypes & CT_DT(CT_F64)))
        ct_opinfo_gradcheck(info, true);
    run_errors(info);
}

/* ------------------------------------------------------------------ gradients */

static ct_tensor *grad_fn_of(ct_tensor *const *in, int n, void *ud) {
    (void)n;
    return call_fn(ud, (const ct_tensor *const *)in);
}

/* The in-place variant on a copy of the input (a leaf cannot be modified in place). */
static ct_tensor *grad_fn_inplace(ct_tensor *const *in, int n, void *ud) {
    const ct_opinfo *info = ud;
    (void)n;
    ct_tensor *x = ct_clone(in[0]);
    return info->t ? info->t_(x, in[1], in[2]) : info->b ? info->b_(x, in[1]) : info->u_(x);
}

/* Note [OpInfo gradcheck]
 * Samples are drawn as continuous values even for entries that ask for integer-valued
 * ones: finite differences across the jumps of floor, remainder and friends would be
 * meaningless, and random reals miss the jumps. An op whose result does not require
 * grad from inputs that do is one the derivative table marks NONDIFF; it is skipped. */
void ct_opinfo_gradcheck(const ct_opinfo *info, bool gradgrad) {
    static const shape_case shapes[] = {
        {{1, 1, 1}, {{4}, {4}, {4}}},
        {{2, 1, 0}, {{2, 3}, {3}, {0}}},
        {{1, 2, 2}, {{3}, {2, 3}, {2, 1}}},
        {{1, 2, 1}, {{0}, {2, 1}, {1}}},
    };
    ct_opinfo g = *info;
    g.integer_inputs = false;
    /* Keep finite differences away from singularities (and pow's negative bases). */
    if (g.lo <= 0 && g.hi > 0 &&
        (strcmp(g.name, "sqrt") == 0 || strcmp(g.name, "rsqrt") == 0 || strcmp(g.name, "pow") == 0))
        g.lo = 0.5;
    int n = arity(info);
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        ct_scope_begin();
        ct_tensor *in[3] = {NULL, NULL, NULL};
        bool strided = s == 2;
        for (int i = 0; i < n; i++) {
            bool cond = i == 0 && info->condition;
            in[i] = sample(&g, i, shapes[s].s[i], shapes[s].nd[i], cond ? CT_BOOL : CT_F64, strided && i == 0);
            if (!cond)
                ct_tensor_set_requires_grad(in[i], true);
        }
        ct_tensor *probe = grad_fn_of(in, n, &g);
        if (!probe)
            fail_msg("%s: failed on gradcheck sample %zu: %s", info->name, s, ct_last_error());
        if (!ct_tensor_requires_grad(probe)) {
            ct_scope_end();
            return; /* NONDIFF */
        }
        if (ct_gradcheck(grad_fn_of, &g, in, n, 1e-6, 1e-5, 1e-3) != CT_OK)
            fail_msg("%s: gradcheck failed on sample %zu: %s", info->name, s, ct_last_error());
        if (gradgrad && ct_gradgradcheck(grad_fn_of, &g, in, n, 1e-6, 1e-5, 1e-3) != CT_OK)
            fail_msg("%s: gradgradcheck failed on sample %zu: %s", info->name, s, ct_last_error());
        /* In place: only when the result keeps self's shape and dtype. */
        bool same_shape = !info->condition && (info->t ? info->t_ != NULL : info->b ? info->b_ != NULL : info->u_ != NULL);
        for (int i = 1; i < n; i++)
            if (shapes[s].nd[i] > shapes[s].nd[0])
                same_shape = false;
        if (same_shape && ct_gradcheck(grad_fn_inplace, &g, in, n, 1e-6, 1e-5, 1e-3) != CT_OK)
            fail_msg("%s_: gradcheck failed on sample %zu: %s", info->name, s, ct_last_error());
        if (cuda_pass()) {
            /* The same sample on the GPU: its kernels' derivatives, in float64. */
            ct_tensor *gin[3] = {NULL, NULL, NULL};
            for (int i = 0; i < n; i++) {
                gin[i] = ct_test_to_device_as(ct_detach(in[i]), CT_CUDA(0));
                if (!(i == 0 && info->condition))
                    ct_tensor_set_requires_grad(gin[i], true);
            }
            if (ct_gradcheck(grad_fn_of, &g, gin, n, 1e-6, 1e-5, 1e-3) != CT_OK)
                fail_msg("%s: gradcheck on CUDA failed on sample %zu: %s", info->name, s, ct_last_error());
            if (gradgrad && ct_gradgradcheck(grad_fn_of, &g, gin, n, 1e-6, 1e-5, 1e-3) != CT_OK)
                fail_msg("%s: gradgradcheck on CUDA failed on sample %zu: %s", info->name, s, ct_last_error());
        }
        ct_scope_end();
    }
}
/* ================================================================ reductions */

static double red_draw(const ct_opinfo_red *info, ct_dtype d) {
    if (d == CT_BOOL)
        return lcg_unit() < 0.5 ? 0.0 : 1.0;
    double lo = info->lo, hi = info->hi;
    if (!ct_dtype_is_signed(d) && lo < 0)
        lo = 0;
    if (ct_dtype_is_floating(d) && info->nan_fraction > 0 && lcg_unit() < info->nan_fraction)
        return NAN;
    double v = lo + (hi - lo) * lcg_unit();
    if (!ct_dtype_is_floating(d) || info->integer_inputs)
        v = floor(v + 0.5);
    return v;
}

typedef enum { LAYOUT_CONTIG, LAYOUT_STRIDED, LAYOUT_TRANSPOSED, LAYOUT_EXPANDED, LAYOUT_COUNT } red_layout;

/* A sample of shape in the given memory layout, filled with random values. */
static ct_tensor *red_sample(const ct_opinfo_red *info, const int64_t *shape, int nd, ct_dtype d, red_layout lay) {
    int64_t st[CT_MAX_DIMS], big[CT_MAX_DIMS];
    ct_tensor *t;
    if (lay == LAYOUT_CONTIG || nd == 0) {
        t = ct_empty(shape, nd, d, CT_CPU);
    } else if (lay == LAYOUT_EXPANDED) {
        /* The last dim is a broadcast (stride 0) of one column. */
        int64_t one[CT_MAX_DIMS];
        memcpy(one, shape, sizeof(int64_t) * (size_t)nd);
        one[nd - 1] = 1;
        ct_tensor *base = ct_empty(one, nd, d, CT_CPU);
        int64_t n = ct_tensor_numel(base);
        for (int64_t i = 0; i < n; i++)
            ct_store_double((char *)ct_tensor_data(base) + i * (int64_t)ct_dtype_size(d), d, red_draw(info, d));
        ct_contiguous_strides(one, nd, st);
        st[nd - 1] = 0;
        return ct_from_blob(ct_tensor_data(base), shape, st, nd, d, NULL, NULL);
    } else {
        /* strided: every other element of the last dim; transposed: column-major. */
        memcpy(big, shape, sizeof(int64_t) * (size_t)nd);
        if (lay == LAYOUT_STRIDED)
            big[nd - 1] *= 2;
        int64_t n = ct_shape_numel(big, nd);
        ct_tensor *base = ct_zeros(CT_SHAPE(n > 0 ? n : 1), d, CT_CPU);
        int64_t s = 1;
        if (lay == LAYOUT_STRIDED) {
            for (int i = nd - 1; i >= 0; i--) {
                st[i] = i == nd - 1 ? 2 : s;
                s *= big[i];
            }
        } else {
            for (int i = 0; i < nd; i++) {
                st[i] = s;
                s *= shape[i] > 0 ? shape[i] : 1;
            }
        }
        t = ct_from_blob(ct_tensor_data(base), shape, st, nd, d, NULL, NULL);
    }
    int64_t n = ct_tensor_numel(t);
    for (int64_t i = 0; i < n; i++) {
        int64_t idx[CT_MAX_DIMS];
        unravel(i, shape, nd, idx);
        ct_tensor_set(t, idx, red_draw(info, d));
    }
    return t;
}

static ct_dtype red_expected_dtype(const ct_opinfo_red *info, ct_dtype in, ct_dtype requested) {
    switch (info->out) {
    case CT_RED_OUT_INT64: return CT_I64;
    case CT_RED_OUT_BOOL: return in == CT_U8 ? CT_U8 : CT_BOOL;
    case CT_RED_OUT_LONG:
        if (requested != CT_DTYPE_UNDEFINED)
            return requested;
        return ct_dtype_is_floating(in) ? in : CT_I64;
    case CT_RED_OUT_FLOAT:
        return ct_dtype_is_floating(in) ? in : ct_get_default_dtype();
    default: return requested != CT_DTYPE_UNDEFINED ? requested : in;
    }
}

static double red_tol(const ct_opinfo_red *info, ct_dtype d) {
    double s = info->tol_scale > 0 ? info->tol_scale : 1;
    switch (d) {
    case CT_F16: return 2e-3 * s;
    case CT_BF16: return 1.6e-2 * s;
    case CT_F32: return 4e-6 * s;
    case CT_F64: return 1e-12 * s;
    default: return 0;
    }
}

static void red_compare(const ct_opinfo_red *info, const char *what, double got, double want, ct_dtype od,
                        int64_t i) {
    char buf[16];
    ct_store_double(buf, od, want);
    double w = ct_load_double(buf, od);
    bool ok;
    if (isnan(w))
        ok = isnan(got);
    else if (isinf(w))
        ok = got == w;
    else
        ok = fabs(got - w) <= red_tol(info, od) * (1 + fabs(w));
    if (!ok)
        fail_msg("%s %s [%s]: element %lld: got %.17g, want %.17g", info->name, what, ct_dtype_name(od),
                 (long long)i, got, w);
}

/* Checks a reduction result against the reference over the input's values (in the
 * dtype the op computes in: the dtype= argument when given). */
static void red_check_values(const ct_opinfo_red *info, const ct_tensor *got, const ct_tensor *a, uint32_t mask,
                             ct_dtype requested, const char *what) {
    int nd = ct_tensor_dim(a);
    const int64_t *shape = ct_tensor_shape(a);
    int64_t n_in = ct_tensor_numel(a), n_out = ct_tensor_numel(got);
    int64_t n_red = 1;
    for (int d = 0; d < nd; d++)
        if ((mask >> d) & 1u)
            n_red *= shape[d];
    double *vals = malloc(sizeof(double) * (size_t)(n_in > 0 ? n_in : 1));
    int64_t *fill = calloc((size_t)(n_out > 0 ? n_out : 1), sizeof(int64_t));
    for (int64_t i = 0; i < n_in; i++) {
        int64_t idx[CT_MAX_DIMS], o = 0;
        unravel(i, shape, nd, idx);
        for (int k = 0; k < nd; k++)
            if (!((mask >> k) & 1u))
                o = o * shape[k] + idx[k];
        double v;
        ct_tensor_get(a, idx, &v);
        if (requested != CT_DTYPE_UNDEFINED) {
            char buf[16];
            ct_store_double(buf, requested, v);
            v = ct_load_double(buf, requested);
        }
        vals[o * n_red + fill[o]++] = v;
    }
    for (int64_t o = 0; o < n_out; o++)
        red_compare(info, what, ct_test_at(got, o), info->ref(vals + o * n_red, n_red, info->param),
                    ct_tensor_dtype(got), o);
    free(vals);
    free(fill);
}

static void scan_check_values(const ct_opinfo_red *info, const ct_tensor *got, const ct_tensor *a, int dim,
                              ct_dtype requested, const char *what) {
    int nd = ct_tensor_dim(a);
    const int64_t *shape = ct_tensor_shape(a);
    int64_t len = nd ? shape[dim] : 1, n = ct_tensor_numel(a);
    if (n == 0)
        return;
    double *row = malloc(sizeof(double) * (size_t)len), *res = malloc(sizeof(double) * (size_t)len);
    for (int64_t i = 0; i < n; i++) {
        int64_t idx[CT_MAX_DIMS];
        unravel(i, shape, nd, idx);
        if (nd && idx[dim] != 0)
            continue; /* one visit per row */
        for (int64_t j = 0; j < len; j++) {
            if (nd)
                idx[dim] = j;
            ct_tensor_get(a, idx, &row[j]);
            if (requested != CT_DTYPE_UNDEFINED) {
                char buf[16];
                ct_store_double(buf, requested, row[j]);
                row[j] = ct_load_double(buf, requested);
            }
        }
        info->ref_scan(row, len, res);
        for (int64_t j = 0; j < len; j++) {
            if (nd)
                idx[dim] = j;
            double g;
            ct_tensor_get(got, idx, &g);
            red_compare(info, what, g, res[j], ct_tensor_dtype(got), i + j);
        }
    }
    free(row);
    free(res);
}

static void red_check_meta(const ct_opinfo_red *info, const ct_tensor *got, const ct_tensor *a, const int64_t *dims,
                           int ndims, bool keepdim, ct_dtype requested) {
    ct_tensor *m = info->call(ct_empty(ct_tensor_shape(a), ct_tensor_dim(a), ct_tensor_dtype(a), CT_META), dims,
                              ndims, keepdim, requested, NULL);
    if (!m)
        fail_msg("%s on META failed: %s", info->name, ct_last_error());
    assert_true(ct_tensor_device(m).type == CT_DEVICE_META);
    assert_int_equal(ct_tensor_dtype(m), ct_tensor_dtype(got));
    assert_int_equal(ct_tensor_dim(m), ct_tensor_dim(got));
    for (int k = 0; k < ct_tensor_dim(m); k++)
        assert_int_equal(ct_tensor_shape(m)[k], ct_tensor_shape(got)[k]);
}

static bool red_has_empty_reduction(const ct_tensor *a, uint32_t mask) {
    for (int d = 0; d < ct_tensor_dim(a); d++)
        if (((mask >> d) & 1u) && ct_tensor_shape(a)[d] == 0)
            return true;
    return false;
}

typedef struct red_call {
    const ct_opinfo_red *info;
    const int64_t *dims;
    int ndims;
    bool keepdim;
    ct_dtype requested;
} red_call;

static ct_tensor *red_compiled_fn(ct_tensor *const *in, int n, void *ud) {
    (void)n;
    const red_call *r = ud;
    return r->info->call(in[0], r->dims, r->ndims, r->keepdim, r->requested, NULL);
}

/* The reduction through ct_compile: eager, captured, replayed; each equals got. */
static void red_check_compiled(const ct_opinfo_red *info, const ct_tensor *got, ct_tensor *a, const int64_t *dims,
                               int ndims, bool keepdim, ct_dtype requested) {
    red_call rc = {info, dims, ndims, keepdim, requested};
    ct_compiled *c = ct_compile(red_compiled_fn, &rc, 0);
    CT_ASSERT_OK(c);
    for (int k = 0; k < 3; k++) {
        ct_scope_begin();
        ct_tensor *r = ct_compiled_call(c, &a, 1);
        if (!r)
            fail_msg("%s through ct_compile (call %d) failed: %s", info->name, k + 1, ct_last_error());
        if (!ct_test_same_bits(r, got))
            fail_msg("%s through ct_compile (call %d): result differs from the eager call", info->name, k + 1);
        ct_scope_end();
    }
    assert_int_equal(ct_compiled_stat(c, CT_COMPILE_STAT_REPLAYS), 1);
    ct_compiled_free(c);
}

static void red_run_one(const ct_opinfo_red *info, const int64_t *shape, int nd, ct_dtype d, red_layout lay,
                        const int64_t *dims, int ndims, bool keepdim, ct_dtype requested) {
    ct_scope_begin();
    ct_tensor *a = red_sample(info, shape, nd, d, lay);
    uint32_t mask = 0;
    if (ndims == 0 || !dims) {
        mask = nd ? (1u << nd) - 1 : 0;
    } else {
        for (int i = 0; i < ndims; i++)
            mask |= 1u << (dims[i] < 0 ? dims[i] + (nd ? nd : 1) : dims[i]);
        if (nd == 0)
            mask = 0;
    }
    ct_tensor *got = info->call(a, dims, ndims, keepdim, requested, NULL);
    bool empty_err = !info->ref_scan && info->no_identity &&
                     ((ndims == 0 && ct_tensor_numel(a) == 0) || (ndims > 0 && red_has_empty_reduction(a, mask)));
    if (empty_err) {
        if (got)
            fail_msg("%s: reducing an empty dim without an identity succeeded", info->name);
        assert_true(strstr(ct_last_error(), "non-zero size") || strstr(ct_last_error(), "numel() == 0") ||
                    strstr(ct_last_error(), "does not have an identity"));
        ct_clear_error();
        ct_scope_end();
        return;
    }
    if (!got)
        fail_msg("%s(%s, ndims %d, keepdim %d) failed: %s", info->name, ct_dtype_name(d), ndims, keepdim,
                 ct_last_error());
    ct_dtype want = red_expected_dtype(info, d, requested);
    if (ct_tensor_dtype(got) != want)
        fail_msg("%s(%s): result dtype %s, expected %s", info->name, ct_dtype_name(d),
                 ct_dtype_name(ct_tensor_dtype(got)), ct_dtype_name(want));
    /* Shape: the input's without the reduced dims (size 1 with keepdim). */
    int k = 0;
    for (int i = 0; i < nd; i++) {
        bool red = !info->ref_scan && ((mask >> i) & 1u);
        if (red && !keepdim)
            continue;
        assert_int_equal(ct_tensor_shape(got)[k], red ? 1 : shape[i]);
        k++;
    }
    assert_int_equal(ct_tensor_dim(got), k);
    if (info->ref_scan) {
        int dim = nd ? (int)(dims[0] < 0 ? dims[0] + nd : dims[0]) : 0;
        scan_check_values(info, got, a, dim, requested, "functional");
    } else {
        red_check_values(info, got, a, mask, requested, "functional");
    }
    red_check_meta(info, got, a, dims, ndims, keepdim, requested);
    red_check_compiled(info, got, a, dims, ndims, keepdim, requested);
    if (cuda_pass()) {
        ct_tensor *ga = ct_test_to_device_as(a, CT_CUDA(0));
        if (!ga)
            fail_msg("%s: could not copy the input to CUDA: %s", info->name, ct_last_error());
        double tol = 4 * red_tol(info, ct_tensor_dtype(got));
        ct_tensor *first = info->call(ga, dims, ndims, keepdim, requested, NULL);
        cuda_compare(info->name, "functional", first, got, tol);
        cuda_same_twice(info->name, "functional", first, info->call(ga, dims, ndims, keepdim, requested, NULL));
        if (info->has_out) {
            ct_tensor *out = ct_empty(ct_tensor_shape(got), ct_tensor_dim(got), ct_tensor_dtype(got), CT_CUDA(0));
            ct_tensor *r = info->call(ga, dims, ndims, keepdim, requested, out);
            cuda_compare(info->name, "out=", r ? out : NULL, got, tol);
        }
    }
    if (info->has_out) {
        ct_tensor *out = ct_empty(ct_tensor_shape(got), ct_tensor_dim(got), ct_tensor_dtype(got), CT_CPU);
        int64_t v0 = ct_tensor_version(out);
        ct_tensor *r = info->call(a, dims, ndims, keepdim, requested, out);
        if (!r)
            fail_msg("%s out= failed: %s", info->name, ct_last_error());
        assert_ptr_equal(ct_tensor_data(r), ct_tensor_data(out));
        assert_true(ct_tensor_version(out) > v0);
        int64_t n = ct_tensor_numel(got);
        for (int64_t i = 0; i < n; i++) {
            double x = ct_test_at(got, i), y = ct_test_at(out, i);
            if (!(x == y || (isnan(x) && isnan(y))))
                fail_msg("%s out= differs at %lld: %.17g vs %.17g", info->name, (long long)i, y, x);
        }
    }
    ct_scope_end();
}

/* ------------------------------------------------------------------ reduction gradients */

typedef struct {
    const ct_opinfo_red *info;
    const int64_t *dims;
    int ndims;
    bool keepdim;
} red_grad_args;

static ct_tensor *red_grad_fn(ct_tensor *const *in, int n, void *ud) {
    (void)n;
    const red_grad_args *a = ud;
    return a->info->call(in[0], a->dims, a->ndims, a->keepdim, CT_DTYPE_UNDEFINED, NULL);
}

void ct_opinfo_reduce_gradcheck(const ct_opinfo_red *info, bool gradgrad) {
    int second = 0;
    static const struct {
        int nd;
        int64_t shape[3];
        int ndims;
        int64_t dims[2];
        bool keepdim, transposed;
    } cases[] = {
        {2, {3, 4}, 1, {1}, false, true}, {2, {3, 4}, 0, {0}, false, false}, {2, {3, 4}, 1, {0}, true, false},
        {3, {2, 3, 2}, 2, {0, 2}, false, false}, {3, {2, 3, 2}, 1, {-1}, true, true}, {0, {0}, 0, {0}, false, false},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        bool all = cases[c].ndims == 0;
        if (info->full_only && !all)
            continue;
        if ((info->single_dim || info->ref_scan) && cases[c].ndims != 1)
            continue;
        if ((info->full_only || info->ref_scan || info->no_keepdim) && cases[c].keepdim)
            continue;
        /* var/std are not finite when no more elements are reduced than the correction. */
        int64_t count = 1;
        for (int k = 0; k < cases[c].nd; k++) {
            bool red = all;
            for (int j = 0; j < cases[c].ndims; j++)
                red = red || cases[c].dims[j] == k || cases[c].dims[j] + cases[c].nd == k;
            count *= red ? cases[c].shape[k] : 1;
        }
        if ((strncmp(info->name, "var", 3) == 0 || strncmp(info->name, "std", 3) == 0) && count <= info->param)
            continue;
        ct_scope_begin();
        int nd = cases[c].nd;
        int64_t shape[3];
        for (int k = 0; k < nd; k++)
            shape[k] = cases[c].shape[k];
        if (cases[c].transposed && nd >= 2) { /* a non-contiguous input */
            int64_t t = shape[nd - 1];
            shape[nd - 1] = shape[nd - 2];
            shape[nd - 2] = t;
        }
        ct_tensor *x = ct_empty(shape, nd, CT_F64, CT_CPU);
        double *p = ct_tensor_data(x);
        for (int64_t k = 0; k < ct_tensor_numel(x); k++)
            p[k] = info->lo + (info->hi - info->lo) * lcg_unit();
        if (cases[c].transposed && nd >= 2)
            x = ct_transpose(x, -1, -2);
        ct_tensor_set_requires_grad(x, true);
        red_grad_args args = {info, cases[c].dims, cases[c].ndims, cases[c].keepdim};
        ct_tensor *in[1] = {x};
        if (ct_gradcheck(red_grad_fn, &args, in, 1, 1e-6, 1e-5, 1e-3) != CT_OK)
            fail_msg("%s: gradcheck failed on case %zu: %s", info->name, c, ct_last_error());
        /* Second order on the first two cases only: the suite must stay fast. */
        if (gradgrad && second++ < 2 && ct_gradgradcheck(red_grad_fn, &args, in, 1, 1e-6, 1e-5, 1e-3) != CT_OK)
            fail_msg("%s: gradgradcheck failed on case %zu: %s", info->name, c, ct_last_error());
        ct_scope_end();
    }
}

void ct_opinfo_reduce_run(const ct_opinfo_red *info) {
    static const struct {
        int nd;
        int64_t shape[3];
        int ndims;
        int64_t dims[3];
    } cases[] = {
        {3, {3, 4, 5}, 0, {0}},      {3, {3, 4, 5}, 1, {0}},     {3, {3, 4, 5}, 1, {-1}},
        {3, {3, 4, 5}, 1, {1}},      {3, {3, 4, 5}, 2, {1, 2}},  {3, {3, 4, 5}, 2, {2, 0}},
        {3, {3, 4, 5}, 3, {0, 1, 2}}, {2, {0, 4}, 1, {0}},       {2, {0, 4}, 1, {1}},
        {2, {0, 4}, 0, {0}},         {0, {0}, 0, {0}},           {0, {0}, 1, {0}},
        {0, {0}, 1, {-1}},           {1, {1}, 1, {0}},           {2, {1, 300}, 1, {1}},
        {1, {1000}, 0, {0}},
    };
    for (int d = 0; d < CT_DTYPE_COUNT; d++) {
        if (!(info->dtypes & CT_DT(d)))
            continue;
        for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
            bool all = cases[c].ndims == 0;
            if (info->full_only && !all)
                continue;
            if ((info->single_dim || info->ref_scan) && cases[c].ndims != 1)
                continue;
            /* To keep the suite fast, the long cases (last two) run contiguous only, and
             * the other layouts run for one dtype of each storage kind. */
            bool layout_dtype = d == CT_F16 || d == CT_F32 || d == CT_F64 || d == CT_I32 || d == CT_BOOL;
            int nlay = c + 2 >= sizeof cases / sizeof cases[0] || !layout_dtype ? 1 : LAYOUT_COUNT;
            for (int lay = 0; lay < nlay; lay++)
                for (int keep = 0; keep < 2; keep++) {
                    if ((info->full_only || info->ref_scan || info->no_keepdim) && keep)
                        continue;
                    red_run_one(info, cases[c].shape, cases[c].nd, (ct_dtype)d, (red_layout)lay, cases[c].dims,
                                cases[c].ndims, keep != 0, CT_DTYPE_UNDEFINED);
                    if (info->dtype_arg != CT_DTYPE_BOOL && lay == 0)
                        red_run_one(info, cases[c].shape, cases[c].nd, (ct_dtype)d, (red_layout)lay, cases[c].dims,
                                    cases[c].ndims, keep != 0, info->dtype_arg);
                }
        }
    }

    if ((info->dtypes & CT_DT(CT_F64)) && info->out != CT_RED_OUT_INT64 && info->out != CT_RED_OUT_BOOL)
        ct_opinfo_reduce_gradcheck(info, true);

    /* Error inputs shared by every reduction. */
    ct_scope_begin();
    ct_tensor *a = ct_zeros(CT_SHAPE(2, 3), CT_F32, CT_CPU);
    CT_ASSERT_ERR(info->call(NULL, NULL, 0, false, CT_DTYPE_UNDEFINED, NULL) != NULL, CT_ERROR_NULL_ARGUMENT, NULL);
    if (!info->full_only) {
        CT_ASSERT_ERR(info->call(a, CT_INDEX(2), 1, false, CT_DTYPE_UNDEFINED, NULL) != NULL, CT_ERROR_INDEX,
                      "Dimension out of range (expected to be in range of [-2, 1], but got 2)");
        CT_ASSERT_ERR(info->call(a, CT_INDEX(-3), 1, false, CT_DTYPE_UNDEFINED, NULL) != NULL, CT_ERROR_INDEX,
                      "Dimension out of range");
        if (!info->single_dim && !info->ref_scan)
            CT_ASSERT_ERR(info->call(a, CT_INDEX(1, -1), 2, false, CT_DTYPE_UNDEFINED, NULL) != NULL,
                          CT_ERROR_VALUE, "dim 1 appears multiple times in the list of dims");
    }
    if (info->has_out) {
        ct_tensor *bad = ct_zeros(CT_SHAPE(7), CT_F32, CT_CPU);
        const int64_t *dims = info->full_only ? NULL : CT_INDEX(0);
        CT_ASSERT_ERR(info->call(a, dims, info->full_only ? 0 : 1, false, CT_DTYPE_UNDEFINED, bad) != NULL,
                      CT_ERROR_VALUE, "shape");
    }
    ct_scope_end();
}
