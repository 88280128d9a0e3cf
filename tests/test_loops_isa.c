/* Note [Loops per ISA] (src/cpu/cpu_isa.h): every elementwise and cast loop is compiled
 * for the baseline, AVX2 and AVX-512, and all three must give the same bits. Each op runs
 * here at every ISA level this CPU has, over every dtype it takes, on contiguous,
 * strided and broadcast operands holding special values (NaN, infinities, signed
 * zeros, subnormals, huge and integer values), and the results are compared bit for
 * bit with the widest ISA's. Float32 results of ops built on the vector math (exp,
 * sin, sigmoid, ...; integer inputs promote to float32) are left out: they come from
 * libm on the baseline and from SLEEF's routines for each ISA, which may differ in the
 * last bit (SLEEF's AVX2 and AVX-512 sin do; exp has its own check in
 * test_reduce_f32). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "ctorch/nn.h"
#include "cpu/cpu_isa.h"
#include "cpu/stream.h"

typedef ct_tensor *(*un_fn)(const ct_tensor *);
typedef ct_tensor *(*bin_fn)(const ct_tensor *, const ct_tensor *);
typedef ct_tensor *(*ter_fn)(const ct_tensor *, const ct_tensor *, const ct_tensor *);

typedef struct {
    const char *name;
    un_fn u;
    bin_fn b;
    ter_fn t;
    bool vm; /* float32 goes through vector math */
} op_entry;

#define U(n) {#n, ct_##n, NULL, NULL, false}
#define UV(n) {#n, ct_##n, NULL, NULL, true}
#define B(n) {#n, NULL, ct_##n, NULL, false}

static ct_tensor *add_alpha(const ct_tensor *a, const ct_tensor *b) { return ct_add_alpha(a, b, ct_scalar_float(2.5)); }
static ct_tensor *sub_alpha(const ct_tensor *a, const ct_tensor *b) { return ct_sub_alpha(a, b, ct_scalar_float(-0.75)); }
static ct_tensor *leaky(const ct_tensor *a) { return ct_leaky_relu(a, 0.125); }
static ct_tensor *hardtanh(const ct_tensor *a) { return ct_hardtanh(a, -0.5, 2.0); }
static ct_tensor *clamp3(const ct_tensor *a, const ct_tensor *lo, const ct_tensor *hi) {
    return ct_clamp_tensor(a, lo, hi);
}
static ct_tensor *clamp_s(const ct_tensor *a) {
    ct_scalar lo = ct_scalar_float(-1.5), hi = ct_scalar_float(3.0);
    return ct_clamp(a, &lo, &hi);
}
static ct_tensor *addcmul3(const ct_tensor *a, const ct_tensor *b, const ct_tensor *c) {
    return ct_addcmul(a, b, c, ct_scalar_float(0.5));
}

static const op_entry ops[] = {
    U(neg), U(abs), U(sign), U(sgn), U(sqrt), U(rsqrt), U(floor), U(ceil), U(trunc), U(frac), U(reciprocal),
    U(square), U(relu), U(relu6), UV(selu), U(hardsigmoid), U(hardswish), U(logical_not), U(bitwise_not),
    U(isnan), U(isinf), U(isfinite), U(erfinv), {"leaky_relu", leaky, NULL, NULL, false},
    {"hardtanh", hardtanh, NULL, NULL, false}, {"clamp_scalar", clamp_s, NULL, NULL, false}, UV(exp), UV(exp2), UV(expm1), UV(log), UV(log2), UV(log10),
    UV(log1p), UV(sin), UV(cos), UV(tan), UV(asin), UV(acos), UV(atan), UV(sinh), UV(cosh), UV(tanh),
    UV(asinh), UV(acosh), UV(atanh), UV(erf), UV(erfc), UV(sigmoid), UV(silu), UV(mish),
    B(add), B(sub), B(mul), B(div), B(maximum), B(minimum), B(eq), B(ne), B(lt), B(le), B(gt), B(ge),
    B(floor_divide), B(remainder), B(fmod), B(pow), B(atan2), B(hypot), B(copysign), B(fmax), B(fmin),
    B(logical_and), B(logical_or), B(logical_xor), B(bitwise_and), B(bitwise_or), B(bitwise_xor),
    B(bitwise_left_shift), B(bitwise_right_shift), B(clamp_min), B(clamp_max),
    {"add_alpha", NULL, add_alpha, NULL, false}, {"sub_alpha", NULL, sub_alpha, NULL, false},
    {"clamp", NULL, NULL, clamp3, false}, {"lerp", NULL, NULL, ct_lerp, false},
    {"addcmul", NULL, NULL, addcmul3, false}, {"where", NULL, NULL, ct_where, false},
};

enum { N = 4133 };

static const ct_dtype all_dtypes[] = {CT_BOOL, CT_U8,  CT_I8,  CT_I16,  CT_I32, CT_I64, CT_U16,
                                      CT_U32,  CT_U64, CT_F16, CT_BF16, CT_F32, CT_F64}; /* past CT_PF_MIN (the prefetching path), no multiple of a vector width */

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static double unit(void) { return ct_test_unit(&rng); }

/* n values of dtype dt: for floats a mix of specials, small integers and random values
 * over many magnitudes; for integers values in [-100, 100] ([0, 100] unsigned). */
static ct_tensor *sample(ct_dtype dt, int64_t n) {
    static const double special[] = {NAN, INFINITY, -INFINITY, 0.0, -0.0, 1e-40, -1e-40, 3e38, -3e38,
                                     1e300, 0.5, -0.5, 1.0, -1.0, 2.0, 65504.0, 1e-8};
    const bool fl = ct_dtype_is_floating(dt), uns = dt == CT_U8 || dt == CT_BOOL;
    double *v = malloc((size_t)n * sizeof *v);
    assert_non_null(v);
    for (int64_t i = 0; i < n; i++) {
        double r = unit();
        if (!fl)
            v[i] = floor(r * 201.0) - (uns ? 0.0 : 100.0);
        else if (i % 7 == 3)
            v[i] = special[(size_t)(r * 1e6) % (sizeof special / sizeof special[0])];
        else if (i % 5 == 1)
            v[i] = floor(r * 21.0) - 10.0;
        else
            v[i] = (r - 0.5) * pow(10.0, floor(unit() * 8.0) - 3.0);
    }
    ct_scope_begin();
    ct_tensor *t = ct_keep(ct_to_dtype(ct_from_data(v, CT_SHAPE(n), CT_F64), dt));
    ct_scope_end();
    free(v);
    CT_ASSERT_OK(t);
    return t;
}

/* The result of op on args at ISA level, or NULL when the op refuses the dtypes. */
static ct_tensor *run(const op_entry *op, int level, ct_tensor *const *x) {
    ct_cpu_isa_set_level(level);
    ct_tensor *r = op->u ? op->u(x[0]) : op->b ? op->b(x[0], x[1]) : op->t(x[0], x[1], x[2]);
    if (!r)
        ct_clear_error();
    return r ? ct_contiguous(r) : NULL;
}

static void assert_same_bits(const op_entry *op, const char *layout, ct_dtype dt, int level, const ct_tensor *want,
                             const ct_tensor *got) {
    assert_int_equal(ct_tensor_dtype(want), ct_tensor_dtype(got));
    assert_int_equal(ct_tensor_numel(want), ct_tensor_numel(got));
    ct_dtype rd = ct_tensor_dtype(want);
    size_t es = ct_dtype_size(rd);
    const unsigned char *a = ct_tensor_data(want), *b = ct_tensor_data(got);
    for (int64_t i = 0; i < ct_tensor_numel(want); i++) {
        if (memcmp(a + (size_t)i * es, b + (size_t)i * es, es) == 0)
            continue;
        if (ct_dtype_is_floating(rd) && isnan(ct_test_at(want, i)) && isnan(ct_test_at(got, i)))
            continue; /* NaN payloads may differ */
        fail_msg("%s (%s, %s) at level %d: element %lld is %.17g, the widest ISA gives %.17g", op->name,
                 ct_dtype_name(dt), layout, level, (long long)i, ct_test_at(got, i), ct_test_at(want, i));
    }
}

static void test_every_isa_same_bits(void **state) {
    (void)state;
    static const ct_dtype dts[] = {CT_F32, CT_F64, CT_F16, CT_BF16, CT_I32, CT_I64, CT_I8, CT_U8, CT_BOOL};
    const int top = ct_cpu_isa_level();
    int compared = 0;
    for (size_t k = 0; k < sizeof ops / sizeof ops[0]; k++) {
        const op_entry *op = &ops[k];
        for (size_t j = 0; j < sizeof dts / sizeof dts[0]; j++) {
            ct_dtype dt = dts[j];
            ct_scope_begin();
            /* where's first operand is its bool condition */
            ct_tensor *base[3] = {op->t == ct_where ? sample(CT_BOOL, 2 * N) : sample(dt, 2 * N), sample(dt, 2 * N),
                                  sample(dt, 2 * N)};
            for (int layout = 0; layout < 3; layout++) {
                ct_tensor *x[3];
                for (int i = 0; i < 3; i++) {
                    if (layout == 0) /* contiguous */
                        x[i] = ct_narrow(base[i], 0, 0, N);
                    else if (layout == 1) /* every other element */
                        x[i] = ct_slice(base[i], 0, 1, 2 * N, 2);
                    else /* the later operands broadcast from one element */
                        x[i] = i == 0 ? ct_narrow(base[i], 0, 0, N) : ct_narrow(base[i], 0, 5, 1);
                }
                static const char *names[] = {"contiguous", "strided", "broadcast"};
                ct_tensor *want = run(op, top, x);
                if (!want)
                    continue;
                for (int level = top - 1; level >= 0; level--) {
                    if (op->vm && ct_tensor_dtype(want) == CT_F32)
                        continue;
                    ct_tensor *got = run(op, level, x);
                    assert_non_null(got);
                    assert_same_bits(op, names[layout], dt, level, want, got);
                    compared++;
                }
            }
            ct_scope_end();
        }
    }
    ct_cpu_isa_set_level(top);
    /* on a machine with more than the baseline, comparisons did happen */
    if (top > 0)
        assert_true(compared > 500);
}

/* Note [Streaming stores] (src/cpu/stream.h): long contiguous loops stream their
 * output a line at a time, and must give the same bits as the plain loop. Forced on,
 * every call streams, however short; NS elements span hundreds of lines of every dtype
 * and pass the SLEEF loops' prefetch minimum (4096). The reference runs with streaming
 * forced off. The
 * outputs here start on a 64-byte boundary; the _out calls
 * below write one element past it, so the plain head before the first boundary runs
 * too. */
enum { NS = 20011 };

static ct_tensor *run_streamed(const op_entry *op, bool on, ct_tensor *const *x) {
    ct_stream_force(on ? CT_STREAM_ALWAYS : CT_STREAM_NEVER);
    ct_tensor *r = run(op, ct_cpu_isa_level(), x);
    ct_stream_force(CT_STREAM_AUTO);
    return r;
}

static void test_streamed_same_bits(void **state) {
    (void)state;
    static const ct_dtype dts[] = {CT_F32, CT_F64, CT_F16, CT_I32, CT_U8, CT_BOOL};
    const int threads = ct_get_num_threads();
    ct_set_num_threads(1);
    int compared = 0;
    for (size_t j = 0; j < sizeof dts / sizeof dts[0]; j++) {
        ct_scope_begin();
        ct_tensor *x[3] = {sample(dts[j], NS), sample(dts[j], NS), sample(dts[j], NS)};
        ct_tensor *cond = sample(CT_BOOL, NS);
        for (size_t k = 0; k < sizeof ops / sizeof ops[0]; k++) {
            const op_entry *op = &ops[k];
            ct_tensor *args[3] = {op->t == ct_where ? cond : x[0], x[1], x[2]};
            ct_tensor *want = run_streamed(op, false, args);
            if (!want)
                continue;
            assert_same_bits(op, "streamed", dts[j], ct_cpu_isa_level(), want, run_streamed(op, true, args));
            compared++;
        }
        /* outputs one element past a 64-byte boundary: _out, copy_ and fill_ */
        ct_tensor *o = ct_empty(CT_SHAPE(NS + 1), dts[j], CT_CPU), *ov = ct_narrow(o, 0, 1, NS);
#define NAMED(n) {n, NULL, NULL, NULL, false}
        static const op_entry offset_ops[6] = {NAMED("exp_out"), NAMED("neg_out"), NAMED("add_out"),
                                               NAMED("mul_out"), NAMED("copy_"),   NAMED("fill_")};
#undef NAMED
        ct_tensor *got[2][6];
        for (int on = 0; on < 2; on++) {
            ct_stream_force(on ? CT_STREAM_ALWAYS : CT_STREAM_NEVER);
            ct_tensor **g = got[on];
            g[0] = ct_exp_out(x[0], ov) ? ct_clone(ov) : NULL;
            g[1] = ct_neg_out(x[0], ov) ? ct_clone(ov) : NULL;
            g[2] = ct_add_out(x[0], x[1], ov) ? ct_clone(ov) : NULL;
            g[3] = ct_mul_out(x[0], x[1], ov) ? ct_clone(ov) : NULL;
            g[4] = ct_copy_(ov, x[2]) ? ct_clone(ov) : NULL;
            g[5] = ct_fill_(ov, ct_scalar_float(1.5)) ? ct_clone(ov) : NULL;
            ct_stream_force(CT_STREAM_AUTO);
            ct_clear_error(); /* exp and neg refuse some dtypes */
        }
        for (int i = 0; i < 6; i++)
            if (got[0][i]) {
                assert_non_null(got[1][i]);
                assert_same_bits(&offset_ops[i], "streamed, offset output", dts[j], ct_cpu_isa_level(), got[0][i],
                                 got[1][i]);
                compared++;
            }
        /* casts to every dtype, into a fresh output and one element past a boundary */
        static const op_entry cast_op = {"cast", NULL, NULL, NULL, false};
        for (size_t t = 0; t < sizeof all_dtypes / sizeof all_dtypes[0]; t++) {
            ct_tensor *dst = ct_empty(CT_SHAPE(NS + 1), all_dtypes[t], CT_CPU), *dv = ct_narrow(dst, 0, 1, NS);
            ct_tensor *cast[2][2];
            for (int on = 0; on < 2; on++) {
                ct_stream_force(on ? CT_STREAM_ALWAYS : CT_STREAM_NEVER);
                cast[on][0] = ct_to_dtype(x[0], all_dtypes[t]);
                CT_ASSERT_OK(ct_copy_(dv, x[0]));
                cast[on][1] = ct_clone(dv);
                ct_stream_force(CT_STREAM_AUTO);
            }
            for (int k = 0; k < 2; k++) {
                char layout[64];
                snprintf(layout, sizeof layout, "%s to %s", k ? "streamed, offset" : "streamed",
                         ct_dtype_name(all_dtypes[t]));
                assert_same_bits(&cast_op, layout, dts[j], ct_cpu_isa_level(), cast[0][k], cast[1][k]);
                compared++;
            }
        }
        ct_scope_end();
    }
    ct_set_num_threads(threads);
    assert_true(compared > 400);
}

/* Casts between every pair of dtypes, contiguous and strided, from the same mixed
 * samples (specials and out-of-range values included). */
static ct_tensor *cast_at(int level, const ct_tensor *x, ct_dtype to, bool strided) {
    ct_cpu_isa_set_level(level);
    if (!strided)
        return ct_to_dtype(x, to);
    ct_tensor *o = ct_zeros(CT_SHAPE(2 * N), to, CT_CPU);
    CT_ASSERT_OK(ct_copy_(ct_slice(o, 0, 0, 2 * N, 2), x));
    return o;
}

static void test_casts_same_bits(void **state) {
    (void)state;
    const int top = ct_cpu_isa_level();
    static const op_entry cast_op = {"cast", NULL, NULL, NULL, false};
    for (size_t i = 0; i < sizeof all_dtypes / sizeof all_dtypes[0]; i++) {
        ct_scope_begin();
        /* floats keep their specials; integer sources take the integer samples */
        ct_tensor *x = sample(all_dtypes[i], N);
        for (size_t j = 0; j < sizeof all_dtypes / sizeof all_dtypes[0]; j++)
            for (int strided = 0; strided < 2; strided++) {
                ct_tensor *want = cast_at(top, x, all_dtypes[j], strided);
                for (int level = top - 1; level >= 0; level--)
                    assert_same_bits(&cast_op, strided ? "strided" : "contiguous", all_dtypes[i], level,
                                     want, cast_at(level, x, all_dtypes[j], strided));
            }
        ct_scope_end();
    }
    ct_cpu_isa_set_level(top);
}

/* The fused nn kernels (src/cpu/nn_fused.c, compiled per ISA in target regions) and
 * conv2d's column loops (src/cpu/conv.c): every output of layer_norm, rms_norm,
 * attention, the average pools, embedding's and nll_loss' backward and conv2d forward
 * and backward, at every level, in float32 and float64. */
enum { NFUSED = 25 };
static void fused_outputs(int level, ct_dtype dt, ct_tensor **out) {
    ct_cpu_isa_set_level(level);
    ct_manual_seed(7);
    ct_tensor *x = ct_to_dtype(ct_randn(CT_SHAPE(6, 5, 67), CT_F32, CT_CPU), dt);
    ct_tensor *g = ct_to_dtype(ct_randn(CT_SHAPE(6, 5, 67), CT_F32, CT_CPU), dt);
    ct_tensor *w = ct_to_dtype(ct_randn(CT_SHAPE(67), CT_F32, CT_CPU), dt);
    ct_tensor *b = ct_to_dtype(ct_randn(CT_SHAPE(67), CT_F32, CT_CPU), dt);
    const int64_t ns[1] = {67};
    out[0] = ct_layer_norm(x, ns, 1, w, b, 1e-5);
    assert_int_equal(CT_OK, ct_layer_norm_backward(g, x, ns, 1, w, b, 1e-5, &out[1], &out[2], &out[3]));
    out[4] = ct_rms_norm(x, ns, 1, w, 1e-6);
    assert_int_equal(CT_OK, ct_rms_norm_backward(g, x, ns, 1, w, 1e-6, &out[5], &out[6]));
    ct_tensor *q = ct_to_dtype(ct_randn(CT_SHAPE(2, 3, 37, 24), CT_F32, CT_CPU), dt);
    ct_tensor *k = ct_to_dtype(ct_randn(CT_SHAPE(2, 3, 41, 24), CT_F32, CT_CPU), dt);
    ct_tensor *v = ct_to_dtype(ct_randn(CT_SHAPE(2, 3, 41, 19), CT_F32, CT_CPU), dt);
    ct_tensor *gy = ct_to_dtype(ct_randn(CT_SHAPE(2, 3, 37, 19), CT_F32, CT_CPU), dt);
    out[7] = ct_scaled_dot_product_attention(q, k, v, NULL, 0.0, false, NULL);
    assert_int_equal(CT_OK, ct_scaled_dot_product_attention_backward(gy, q, k, v, NULL, false, NULL, &out[8], &out[9],
                                                                 &out[10]));
    ct_tensor *img = ct_to_dtype(ct_randn(CT_SHAPE(2, 3, 13, 11), CT_F32, CT_CPU), dt);
    const int64_t ker[2] = {3, 2}, str[2] = {2, 1}, pad[2] = {1, 0}, osz[2] = {5, 4};
    out[11] = ct_avg_pool2d(img, ker, str, pad, true, false, 0);
    out[12] = ct_avg_pool2d_backward(ct_ones_like(out[11], dt), img, ker, str, pad, true, false, 0);
    out[13] = ct_adaptive_avg_pool2d(img, osz);
    ct_tensor *idx = ct_remainder_scalar(ct_arange(ct_scalar_int(0), ct_scalar_int(91), ct_scalar_int(7), CT_I64, CT_CPU),
                                         ct_scalar_int(17));
    out[14] = ct_embedding_backward(ct_to_dtype(ct_randn(CT_SHAPE(13, 9), CT_F32, CT_CPU), dt), idx, 17, 3);
    ct_tensor *logits = ct_to_dtype(ct_randn(CT_SHAPE(13, 17), CT_F32, CT_CPU), dt);
    out[15] = ct_nll_loss(logits, idx, ct_narrow(w, 0, 0, 17), CT_REDUCTION_MEAN, 5);
    out[16] = ct_nll_loss_backward(ct_ones_like(out[15], dt), logits, idx, ct_narrow(w, 0, 0, 17),
                                   CT_REDUCTION_MEAN, 5);
    /* conv2d: the same-width 3x3 path, and strided, dilated, grouped columns */
    for (int c = 0; c < 2; c++) {
        const int64_t st[2][2] = {{1, 1}, {2, 1}}, pd[2][2] = {{1, 1}, {0, 2}}, dl[2][2] = {{1, 1}, {1, 2}};
        const int64_t groups = c == 0 ? 1 : 2;
        ct_tensor *xi = ct_to_dtype(ct_randn(CT_SHAPE(3, 4, 14, 13), CT_F32, CT_CPU), dt);
        ct_tensor *wt = ct_to_dtype(ct_randn(CT_SHAPE(6, 4 / groups, 3, 3), CT_F32, CT_CPU), dt);
        ct_tensor *bs = ct_to_dtype(ct_randn(CT_SHAPE(6), CT_F32, CT_CPU), dt);
        ct_tensor *y = out[17 + 4 * c] = ct_conv2d(xi, wt, bs, st[c], pd[c], dl[c], groups);
        CT_ASSERT_OK(y);
        ct_tensor *gyc = ct_to_dtype(ct_randn(ct_tensor_shape(y), ct_tensor_dim(y), CT_F32, CT_CPU), dt);
        assert_int_equal(CT_OK, ct_conv2d_backward(gyc, xi, wt, st[c], pd[c], dl[c], groups, &out[18 + 4 * c],
                                                   &out[19 + 4 * c], &out[20 + 4 * c]));
    }
    for (int i = 0; i < NFUSED; i++) {
        CT_ASSERT_OK(out[i]);
        out[i] = ct_contiguous(out[i]);
    }
}

static void test_fused_same_bits(void **state) {
    (void)state;
    const int top = ct_cpu_isa_level();
    static const ct_dtype dts[] = {CT_F32, CT_F64};
    for (int j = 0; j < 2; j++) {
        ct_scope_begin();
        ct_tensor *want[NFUSED], *got[NFUSED];
        fused_outputs(top, dts[j], want);
        for (int level = top - 1; level >= 0; level--) {
            fused_outputs(level, dts[j], got);
            for (int i = 0; i < NFUSED; i++) {
                /* attention's float32 softmax takes SLEEF's exp above the baseline */
                if (level == 0 && dts[j] == CT_F32 && i >= 7 && i <= 10)
                    continue;
                op_entry named = {"fused output", NULL, NULL, NULL, false};
                char buf[32];
                snprintf(buf, sizeof buf, "output %d", i);
                assert_same_bits(&named, buf, dts[j], level, want[i], got[i]);
            }
        }
        ct_scope_end();
    }
    ct_cpu_isa_set_level(top);
}

/* Note [Gate loops per ISA] (src/nn/rnn_fused.c): the fused recurrence's float32 gate
 * loops at each level give the same output and gradients, bit for bit. Hidden 160 and a
 * batch of 32: the loops run on several threads and over whole vectors and tails. */
enum { NRNN = 4 };

static void rnn_outputs(int level, int kind, ct_tensor **out) {
    ct_cpu_isa_set_level(level);
    ct_manual_seed(7);
    ct_module *m = kind == 0 ? ct_nn_lstm(6, 160, 2, true, false, 0.0, true, 0, CT_F32)
                   : kind == 1 ? ct_nn_gru(6, 160, 2, true, false, 0.0, true, CT_F32)
                               : ct_nn_rnn(6, 160, 2, "tanh", true, false, 0.0, true, CT_F32);
    assert_non_null(m);
    ct_tensor *x = ct_tensor_set_requires_grad(ct_mul_scalar(ct_randn(CT_SHAPE(9, 32, 6), CT_F32, CT_CPU),
                                                             ct_scalar_float(3.0)),
                                               true);
    ct_tensor *y = ct_module_forward(m, x);
    CT_ASSERT_OK(y);
    ct_tensor *w = ct_randn(ct_tensor_shape(y), 3, CT_F32, CT_CPU);
    assert_int_equal(ct_backward(ct_sum(ct_mul(y, w), NULL, 0, false, CT_DTYPE_UNDEFINED), NULL, false, false),
                     CT_OK);
    out[0] = ct_keep(y);
    out[1] = ct_keep(ct_tensor_grad(x));
    out[2] = ct_keep(ct_tensor_grad(ct_module_param(m, "weight_hh_l0")));
    out[3] = ct_keep(ct_tensor_grad(ct_module_param(m, "weight_ih_l1_reverse")));
    for (int i = 0; i < NRNN; i++)
        CT_ASSERT_OK(out[i]);
    ct_module_free(m);
}

static void test_rnn_gates_same_bits(void **state) {
    (void)state;
    const int top = ct_cpu_isa_level();
    for (int kind = 0; kind < 3; kind++) {
        ct_scope_begin();
        ct_tensor *want[NRNN], *got[NRNN];
        rnn_outputs(top, kind, want);
        for (int level = top - 1; level >= 0; level--) {
            rnn_outputs(level, kind, got);
            for (int i = 0; i < NRNN; i++) {
                op_entry named = {kind == 0 ? "lstm" : kind == 1 ? "gru" : "rnn", NULL, NULL, NULL, false};
                char buf[32];
                snprintf(buf, sizeof buf, "output %d", i);
                assert_same_bits(&named, buf, CT_F32, level, want[i], got[i]);
            }
        }
        ct_scope_end();
    }
    ct_cpu_isa_set_level(top);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rnn_gates_same_bits),
        cmocka_unit_test(test_every_isa_same_bits),
        cmocka_unit_test(test_casts_same_bits),
        cmocka_unit_test(test_fused_same_bits),
        cmocka_unit_test(test_streamed_same_bits),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
