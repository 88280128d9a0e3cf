/* The recurrence of one layer and direction of an RNN, LSTM or GRU as one custom
 * autograd function with fused pointwise kernels, for CPU tensors of float32 and
 * float64 (src/nn/rnn.c calls it; docs/nn.md, "Recurrent layers").
 *
 * Note [Fused recurrence]
 * The composite path (Note [Recurrent layers from ops] in rnn.c) records about ten
 * nodes per time step: the gates' sigmoid and tanh, the cell update, the slices, each
 * a pass over memory with a tensor of its own, and in backward T small GEMMs (B, G) x
 * (B, P) accumulating W_hh's gradient one step at a time. Here the whole loop over
 * time is one node (ct_autograd_function_apply). Its inputs are the layer's input x
 * (T * B rows, or B * T with batch_first), W_ih and the bias (b_ih + b_hh; b_ih alone
 * for the GRU, whose b_hh's n part sits inside r * (...)), W_hh, b_hh (GRU), h0 and c0,
 * as in PyTorch's mkldnn_rnn_layer: the node makes the input projection xp (T, B, G)
 * for all steps in one GEMM and lets it go, and keeps x, as the projection's own node
 * would have. Each step is one GEMM h_prev @ W_hh^T written into a (T, B, G) buffer,
 * then one pass that adds the projection, applies the gates' activations in place and
 * updates the state, so forward keeps the activated gates, the cell states and tanh(c)
 * (LSTM) or the n gate's recurrent part (GRU) for the backward instead of recomputing
 * them. The backward is the same loop reversed: one pass per step that turns dh and dc
 * into the gates' gradients, then one GEMM dgates @ W_hh for the step before; W_hh's
 * gradient is one GEMM over all steps at the end, dgates (G, T * B) @ h_prev
 * (T * B, H), and b_hh's (GRU) one sum; x, W_ih and the bias get dxp @ W_ih,
 * dxp^T @ x and dxp's column sums. Steps past a sequence's length (lengths given) copy
 * the state over and pass the gradient straight through, which is what the
 * composite's where() does.
 *
 * What it bought (bench/rnn against bench/torch_rnn_peer.py: LSTM 512-512, 2 layers,
 * sequence 128, batch 32, float32; CPU time of one thread, medians of 3, ranges over 3
 * rounds on a shared, loaded 2-core machine; docs/nn.md has the table): a training
 * step took 2557-2563 ms on the composite path and takes 1448-1473 ms here, against
 * PyTorch's 1543-1574 ms (oneDNN's fused LSTM) in the same rounds; the forward alone
 * went from 548-567 to 525-529 ms, PyTorch 498-558 ms. GEMMs are over 80% of a step.
 *
 * Note [Double backward through the fused recurrence]
 * The backward above is not made of ops. Under create_graph (a gradient penalty, a
 * Hessian-vector product) the node instead runs the layer again from its saved inputs
 * as ops (ct_rnn_recurrence_ops, Note [Recurrent layers from ops] in rnn.c) and takes
 * the gradients of that graph with create_graph, so they are functions of the inputs
 * that autograd can differentiate again. That is why the node's inputs reach back to x
 * and W_ih: the recomputation's graph must start at the tensors the node was given.
 * The first backward pays a forward of the composite path on top; a plain backward is
 * unchanged. */
/* The float32 gate loops are vectorized only when comparisons do not count as
 * floating-point traps (the selects in rf_expf and rf_tanhf); nothing here reads the
 * exception flags. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-trapping-math")
#endif

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ctorch.h"
#include "ctorch/ext.h"
#include "nn/rnn_internal.h"

/* Below this many state elements per step the pointwise passes run on one thread. */
#define RF_PAR_MIN 4096

typedef struct rf_step {
    int64_t B, H;
    const void *xp;
    int64_t xs_b; /* elements between two batch rows of xp */
    void *a;
    const void *hp, *cp, *bhh;
    void *h, *c, *tc, *ghn;
    const bool *mask;
    bool relu;
} rf_step;

typedef struct rf_bstep {
    int64_t B, H;
    const void *a, *hp, *cp, *h, *tc, *ghn;
    const void *dh_out, *dc_out, *dhrec;
    void *carry, *dc, *dg, *dx;
    int64_t ldg; /* elements between two batch rows of dg and dx */
    const bool *mask;
    bool relu;
} rf_bstep;

/* exp and tanh for the float32 kernels, branch-free so that the gate loops vectorize
 * (libm's tanhf, through expm1f, took a sixth of the LSTM benchmark, and a call per
 * element keeps a loop scalar). rf_expf is Cephes' expf with the argument clamped to
 * [-87, 88], so that 2^n stays a normal number (sigmoid and tanh then differ from
 * their limits by under 1e-37 beyond it); within 1e-7 relative. rf_tanhf is
 * 1 - 2 / (exp(2|x|) + 1), which loses relative precision near 0, so |x| < 0.25 takes
 * the Taylor series to x^9 (the next term is under 1e-8 of x there): a few ulp in all
 * (3e-7 relative at most, measured over [-20, 20] against tanh in double), +-1 at the
 * infinities, NaN for NaN. */
static inline float rf_expf(float x) {
    /* clamped so that NaN becomes 88 too (its int conversion below would be undefined);
     * the NaN comes back at the end */
    float xc = x < 88.0f ? x : 88.0f;
    xc = xc > -87.0f ? xc : -87.0f;
    float n = (xc * 1.44269504088896341f + 12582912.0f) - 12582912.0f; /* round(xc / ln 2) */
    float r = xc - n * 0.693359375f;
    r = r + n * 2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    uint32_t bits = (uint32_t)((int32_t)n + 127) << 23;
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    return x == x ? p * scale : x;
}

static inline float rf_tanhf(float x) {
    float a = fabsf(x), x2 = x * x;
    float small = x * (1.0f + x2 * (-1.0f / 3 + x2 * (2.0f / 15 + x2 * (-17.0f / 315 + x2 * (62.0f / 2835)))));
    float t = 1.0f - 2.0f / (rf_expf(2.0f * a) + 1.0f);
    t = x < 0 ? -t : t;
    return a < 0.25f ? small : t;
}

/* Note [Gate loops per ISA]
 * The float32 gate loops are compiled three times, for the baseline (SSE2), AVX2 and
 * AVX-512 (the extension header's target regions), and each step runs the widest this
 * CPU has (ct_cpu_vector_level): the same operations in the same order, so the same
 * bits (the ISO C build contracts nothing into an FMA). One thread of the 2-core EPYC, bench/rnn:
 * the forward took 489-490 ms with the AVX2 loops against 533-534 ms with SSE2's
 * (PyTorch 478-479 ms in the same rounds). */
#define RF_T float
#define RF_EXP rf_expf
#define RF_TANH rf_tanhf
#define RF_SFX f32
#include "nn/rnn_fused_impl.h"
#undef RF_SFX
#ifdef CT_ISA_VARIANTS
CT_TARGET_AVX2_BEGIN
#define RF_SFX f32_avx2
#include "nn/rnn_fused_impl.h"
#undef RF_SFX
CT_TARGET_END
CT_TARGET_AVX512_BEGIN
#define RF_SFX f32_avx512
#include "nn/rnn_fused_impl.h"
#undef RF_SFX
CT_TARGET_END
#endif
#undef RF_T
#undef RF_EXP
#undef RF_TANH

/* The variant of a float32 gate loop for this CPU (Note [Gate loops per ISA]). */
#ifdef CT_ISA_VARIANTS
#define RF_PICK(f) \
    (ct_cpu_vector_level() == CT_ISA_AVX512 ? f##_avx512 : ct_cpu_vector_level() == CT_ISA_AVX2 ? f##_avx2 : f)
#else
#define RF_PICK(f) f
#endif
#define RF_T double
#define RF_SFX f64
#define RF_EXP exp
#define RF_TANH tanh
#include "nn/rnn_fused_impl.h"
#undef RF_T
#undef RF_SFX
#undef RF_EXP
#undef RF_TANH

/* What the node keeps besides its saved tensors. */
typedef struct rf_state {
    int kind; /* ct_rnn_kind */
    bool reverse;
    int tdim; /* x's rows: time-major (0) or batch-major (1) */
    int64_t T, B, H, G;
    bool *mask; /* (T, B): step t is past b's length; NULL without lengths */
} rf_state;

static void rf_state_free(void *p) {
    rf_state *s = p;
    if (s)
        free(s->mask);
    free(s);
}

static const char *rf_name(int kind) {
    return kind == CT_RNN_LSTM ? "lstm" : kind == CT_RNN_GRU ? "gru" : kind == CT_RNN_RELU ? "rnn_relu" : "rnn_tanh";
}

/* Under ct_compile's capture the layer is ops (Note [Recurrent layers from ops]): the
 * fused passes write through data pointers, which a capture does not record, and as
 * ops the recurrence's pointwise work is the compiler's to fuse. The compiled
 * function's results then differ from eager's in rounding (the gates' sums and
 * activations are computed in another order), as torch.compile's do from eager's
 * oneDNN LSTM. */
bool ct_rnn_fused_applies(const ct_tensor *input, bool proj) {
    ct_dtype dt = ct_tensor_dtype(input);
    return !proj && ct_tensor_device(input).type == CT_DEVICE_CPU && (dt == CT_F32 || dt == CT_F64) &&
           !ct_autocast_is_enabled(CT_DEVICE_CPU) && !ct_compile_is_capturing();
}

/* The node's inputs, and what forward saves. */
enum { IN_X, IN_WIH, IN_B, IN_WHH, IN_BHH, IN_H0, IN_C0, N_IN };
enum { SV_WHH, SV_H0, SV_C0, SV_ACTS, SV_AUX, SV_HALL, SV_CALL, SV_X, SV_WIH, SV_B, SV_BHH, SV_H0_IN, SV_C0_IN, N_SV };

/* Time step of the s-th step taken. */
static int64_t step_t(const rf_state *st, int64_t s) { return st->reverse ? st->T - 1 - s : s; }

static char *row(const ct_tensor *t, int64_t i, int64_t n) {
    return (char *)ct_tensor_data(t) + (size_t)(i * n) * ct_tensor_element_size(t);
}

/* Note [Padded gate gradients]
 * The weights' gradients are products over all steps with the gates' gradients
 * transposed (dW_ih = dG^T x, dW_hh = dG^T h), and dG's rows are G = 4 * hidden long:
 * with hidden 512 that is 2048 floats, a multiple of 2 KiB, where oneDNN's sgemm reads
 * a transposed operand 2.4x slower on the EPYC (Note [oneDNN sgemm] in
 * src/cpu/linalg.c). So dG's rows are 64 bytes longer when G * element size is a
 * multiple of 2 KiB: the products read the same numbers from rows that no longer fall
 * into the same cache sets. One thread of the 2-core EPYC, bench/rnn: a training step
 * took 1549-1572 ms against 2075 ms before (PyTorch 1513-1517 ms in the same rounds),
 * two threads 862-871 ms (PyTorch 823-825 ms). Those products now go to OpenBLAS on
 * AMD's cores anyway (Note [Row strides of 2 KiB on AMD] in src/cpu/linalg.c); on the GPU
 * machine's Xeon, where oneDNN keeps them, three alternating rounds on cores 2,3 with
 * the padding and without it gave 628, 519, 556 against 609, 642, 546 ms a step with
 * two threads and 892, 999, 821 against 971, 978, 887 ms with one (medians 556 / 609
 * and 892 / 971, PyTorch 635 and 1005 in the same rounds), so it stays. An empty
 * (T, B, G) of the gradients' rows padded so; the view has G columns. */
static ct_tensor *padded_rows(int64_t T, int64_t B, int64_t G, ct_dtype dt) {
    int64_t esz = (int64_t)ct_dtype_size(dt), pad = (G * esz) % 2048 == 0 ? 64 / esz : 0;
    ct_tensor *full = ct_empty(CT_SHAPE(T, B, G + pad), dt, CT_CPU);
    return full && pad ? ct_narrow(full, 2, 0, G) : full;
}

/* inputs: x (T * B, I), W_ih (G, I), the bias (G) or NULL, W_hh (G, H), b_hh (GRU, may
 * be NULL), h0 (B, H), c0 (LSTM); outputs: every step's h (T, B, H) and, LSTM, every
 * step's c (T, B, H). */
static ct_status rf_forward(ct_autograd_ctx *ctx, ct_tensor *const *in, int nin, ct_tensor **out, int nout,
                            void *ud) {
    (void)nin, (void)nout;
    const rf_state *st0 = ud;
    rf_state *st = ct_xmalloc(rf_name(st0->kind), sizeof *st);
    if (!st)
        return ct_last_status();
    *st = *st0;
    st->mask = NULL;
    if (st0->mask) {
        size_t n = (size_t)(st->T * st->B);
        if (!(st->mask = ct_xmalloc(rf_name(st->kind), n ? n : 1))) {
            free(st);
            return ct_last_status();
        }
        memcpy(st->mask, st0->mask, n);
    }
    ct_autograd_ctx_set_state(ctx, st, rf_state_free);
    const int64_t T = st->T, B = st->B, H = st->H, G = st->G;
    const bool f32 = ct_tensor_dtype(in[IN_X]) == CT_F32, lstm = st->kind == CT_RNN_LSTM, gru = st->kind == CT_RNN_GRU;
    ct_dtype dt = ct_tensor_dtype(in[IN_X]);
    ct_tensor *whh = in[IN_WHH];
    ct_status rc = CT_OK;
    ct_scope_begin();
    ct_tensor *xp = ct_rnn_projection(in[IN_X], in[IN_WIH], in[IN_B], st->T, st->B, st->tdim);
    ct_tensor *whh_t = ct_t(whh);
    ct_tensor *bhh = !gru ? NULL : in[IN_BHH] ? ct_contiguous(in[IN_BHH]) : ct_zeros(CT_SHAPE(G), dt, CT_CPU);
    ct_tensor *h0 = ct_contiguous(in[IN_H0]), *c0 = lstm ? ct_contiguous(in[IN_C0]) : NULL;
    ct_tensor *hall = ct_empty(CT_SHAPE(T, B, H), dt, CT_CPU);
    ct_tensor *acts = st->kind == CT_RNN_TANH || st->kind == CT_RNN_RELU ? NULL : ct_empty(CT_SHAPE(T, B, G), dt, CT_CPU);
    ct_tensor *call = lstm ? ct_empty(CT_SHAPE(T, B, H), dt, CT_CPU) : NULL;
    ct_tensor *aux = lstm || gru ? ct_empty(CT_SHAPE(T, B, H), dt, CT_CPU) : NULL; /* tanh(c) or ghn */
    if (!xp || !whh_t || (gru && !bhh) || !h0 || (lstm && !c0) || !hall || ((lstm || gru) && (!acts || !aux)) ||
        (lstm && !call))
        rc = ct_last_status();
    const int64_t xs_t = xp ? ct_tensor_stride(xp, 0) : 0, xs_b = xp ? ct_tensor_stride(xp, 1) : 0;
    /* Note [Prepacked recurrent weights] in src/cpu/packed_mm.c */
    ct_packed_mm *pw = rc == CT_OK ? ct_packed_mm_new(whh_t, B) : NULL;
    if (!pw)
        rc = ct_last_status();
    for (int64_t s = 0; s < T && rc == CT_OK; s++) {
        int64_t t = step_t(st, s), tp = st->reverse ? t + 1 : t - 1;
        ct_scope_begin();
        ct_tensor *hp = s == 0 ? h0 : ct_select(hall, 0, tp);
        ct_tensor *dst = ct_select(acts ? acts : hall, 0, t);
        if (!hp || !dst || !ct_packed_mm_out(pw, hp, dst))
            rc = ct_last_status();
        ct_scope_end();
        if (rc != CT_OK)
            break;
        rf_step k = {.B = B,
                     .H = H,
                     .xp = (const char *)ct_tensor_data(xp) + (size_t)(t * xs_t) * ct_tensor_element_size(xp),
                     .xs_b = xs_b,
                     .a = acts ? row(acts, t, B * G) : NULL,
                     .hp = s == 0 ? ct_tensor_data(h0) : row(hall, tp, B * H),
                     .cp = lstm ? (s == 0 ? ct_tensor_data(c0) : row(call, tp, B * H)) : NULL,
                     .bhh = bhh ? ct_tensor_data(bhh) : NULL,
                     .h = row(hall, t, B * H),
                     .c = lstm ? row(call, t, B * H) : NULL,
                     .tc = lstm ? row(aux, t, B * H) : NULL,
                     .ghn = gru ? row(aux, t, B * H) : NULL,
                     .mask = st->mask ? st->mask + t * B : NULL,
                     .relu = st->kind == CT_RNN_RELU};
        if (lstm)
            f32 ? RF_PICK(lstm_fwd_f32)(&k) : lstm_fwd_f64(&k);
        else if (gru)
            f32 ? RF_PICK(gru_fwd_f32)(&k) : gru_fwd_f64(&k);
        else
            f32 ? RF_PICK(rnn_fwd_f32)(&k) : rnn_fwd_f64(&k);
    }
    ct_packed_mm_free(pw);
    if (rc == CT_OK) {
        /* the SV_ order; the inputs as given are for a backward under create_graph */
        ct_tensor *save[N_SV] = {whh, ct_keep(h0), c0 ? ct_keep(c0) : NULL, acts ? ct_keep(acts) : NULL,
                                 aux ? ct_keep(aux) : NULL, hall, call, in[IN_X], in[IN_WIH], in[IN_B],
                                 in[IN_BHH], in[IN_H0], in[IN_C0]};
        out[0] = ct_keep(hall);
        if (lstm)
            out[1] = ct_keep(call);
        rc = ct_autograd_ctx_save_for_backward(ctx, save, N_SV);
    }
    ct_scope_end();
    return rc;
}

/* Note [Double backward through the fused recurrence]: the gradients of the layer run
 * again as ops, from the inputs the node was given. */
static int rf_backward_ops(ct_autograd_ctx *ctx, const rf_state *st, ct_tensor *const *gout, ct_tensor **gin) {
    const bool lstm = st->kind == CT_RNN_LSTM;
    static const int slot[N_IN] = {SV_X, SV_WIH, SV_B, SV_WHH, SV_BHH, SV_H0_IN, SV_C0_IN};
    ct_tensor *in[N_IN];
    for (int i = 0; i < N_IN; i++)
        in[i] = ct_autograd_ctx_saved(ctx, slot[i]);
    ct_tensor *xp = ct_rnn_projection(in[IN_X], in[IN_WIH], in[IN_B], st->T, st->B, st->tdim);
    ct_tensor *hall = NULL, *call = NULL;
    if (!xp || ct_rnn_recurrence_ops(st->kind, st->reverse, st->mask, xp, in[IN_WHH], in[IN_BHH], NULL, in[IN_H0],
                                     in[IN_C0], &hall, lstm ? &call : NULL) != CT_OK)
        return -1;
    ct_tensor *outs[2] = {hall, call};
    return ct_rnn_grads_through_ops(ctx, outs, lstm ? 2 : 1, in, N_IN, gout, gin);
}

static int rf_backward(ct_autograd_ctx *ctx, ct_tensor *const *gout, int nout, ct_tensor **gin, int nin, void *ud) {
    (void)nout, (void)ud;
    const rf_state *st = ct_autograd_ctx_state(ctx);
    for (int i = 0; i < nin; i++)
        gin[i] = NULL;
    if (ct_is_grad_enabled())
        return rf_backward_ops(ctx, st, gout, gin);
    const int64_t T = st->T, B = st->B, H = st->H, G = st->G;
    const bool lstm = st->kind == CT_RNN_LSTM, gru = st->kind == CT_RNN_GRU;
    ct_tensor *whh = ct_autograd_ctx_saved(ctx, SV_WHH), *h0 = ct_autograd_ctx_saved(ctx, SV_H0);
    ct_tensor *c0 = ct_autograd_ctx_saved(ctx, SV_C0), *acts = ct_autograd_ctx_saved(ctx, SV_ACTS);
    ct_tensor *aux = ct_autograd_ctx_saved(ctx, SV_AUX), *hall = ct_autograd_ctx_saved(ctx, SV_HALL);
    ct_tensor *call = ct_autograd_ctx_saved(ctx, SV_CALL);
    if (!whh || !h0 || !hall || (lstm && (!c0 || !call)) || ((lstm || gru) && (!acts || !aux)))
        return -1;
    ct_dtype dt = ct_tensor_dtype(hall);
    const bool f32 = dt == CT_F32;
    ct_tensor *dho = ct_contiguous(gout[0]), *dco = lstm ? ct_contiguous(gout[1]) : NULL;
    ct_tensor *dg = padded_rows(T, B, G, dt); /* Note [Padded gate gradients] */
    ct_tensor *dx = gru ? padded_rows(T, B, G, dt) : dg;
    const int64_t ldg = dg ? ct_tensor_stride(dg, 1) : 0;
    ct_tensor *dhrec = ct_zeros(CT_SHAPE(B, H), dt, CT_CPU), *carry = ct_zeros(CT_SHAPE(B, H), dt, CT_CPU);
    ct_tensor *dc = lstm ? ct_zeros(CT_SHAPE(B, H), dt, CT_CPU) : NULL;
    ct_packed_mm *pw = ct_packed_mm_new(whh, B); /* Note [Prepacked recurrent weights] */
    if (!dho || (lstm && !dco) || !dg || !dx || !dhrec || !carry || (lstm && !dc) || !pw) {
        ct_packed_mm_free(pw);
        return -1;
    }
    for (int64_t s = T - 1; s >= 0; s--) {
        int64_t t = step_t(st, s), tp = st->reverse ? t + 1 : t - 1;
        rf_bstep k = {.B = B,
                      .H = H,
                      .a = acts ? row(acts, t, B * G) : NULL,
                      .hp = s == 0 ? ct_tensor_data(h0) : row(hall, tp, B * H),
                      .cp = lstm ? (s == 0 ? ct_tensor_data(c0) : row(call, tp, B * H)) : NULL,
                      .h = row(hall, t, B * H),
                      .tc = lstm ? row(aux, t, B * H) : NULL,
                      .ghn = gru ? row(aux, t, B * H) : NULL,
                      .dh_out = row(dho, t, B * H),
                      .dc_out = lstm ? row(dco, t, B * H) : NULL,
                      .dhrec = ct_tensor_data(dhrec),
                      .carry = ct_tensor_data(carry),
                      .dc = dc ? ct_tensor_data(dc) : NULL,
                      .dg = row(dg, t, B * ldg),
                      .dx = row(dx, t, B * ldg),
                      .ldg = ldg,
                      .mask = st->mask ? st->mask + t * B : NULL,
                      .relu = st->kind == CT_RNN_RELU};
        if (lstm)
            f32 ? RF_PICK(lstm_bwd_f32)(&k) : lstm_bwd_f64(&k);
        else if (gru)
            f32 ? RF_PICK(gru_bwd_f32)(&k) : gru_bwd_f64(&k);
        else
            f32 ? RF_PICK(rnn_bwd_f32)(&k) : rnn_bwd_f64(&k);
        ct_scope_begin();
        bool ok = ct_packed_mm_out(pw, ct_select(dg, 0, t), dhrec) != NULL;
        ct_scope_end();
        if (!ok) {
            ct_packed_mm_free(pw);
            return -1;
        }
    }
    ct_packed_mm_free(pw);
    if (ct_autograd_ctx_needs_input_grad(ctx, IN_X) || ct_autograd_ctx_needs_input_grad(ctx, IN_WIH) ||
        ct_autograd_ctx_needs_input_grad(ctx, IN_B)) {
        /* the projection's gradients, over x's rows (batch-major with batch_first) */
        ct_tensor *dxr = st->tdim ? ct_copy_(padded_rows(B, T, G, dt), ct_transpose(dx, 0, 1))
                                  : dx;
        dxr = dxr ? ct_reshape(dxr, CT_SHAPE(T * B, G)) : NULL; /* a view: T and B rows are one stride apart */
        ct_tensor *x = ct_autograd_ctx_saved(ctx, SV_X), *wih = ct_autograd_ctx_saved(ctx, SV_WIH);
        if (!dxr || !x || !wih)
            return -1;
        if (ct_autograd_ctx_needs_input_grad(ctx, IN_X) && !(gin[IN_X] = ct_mm(dxr, wih)))
            return -1;
        if (ct_autograd_ctx_needs_input_grad(ctx, IN_WIH) && !(gin[IN_WIH] = ct_mm(ct_t(dxr), x)))
            return -1;
        if (ct_autograd_ctx_needs_input_grad(ctx, IN_B) &&
            !(gin[IN_B] = ct_sum(dxr, (int64_t[]){0}, 1, false, CT_DTYPE_UNDEFINED)))
            return -1;
    }
    if (ct_autograd_ctx_needs_input_grad(ctx, IN_WHH)) {
        /* every step's dgates against the state it was computed from, in one GEMM, plus
         * the first step's against h0 */
        int64_t first = step_t(st, 0), rest0 = st->reverse ? 0 : 1, hrest0 = st->reverse ? 1 : 0;
        ct_tensor *g0t = ct_t(ct_select(dg, 0, first));
        ct_tensor *gw = ct_mm(g0t, h0);
        if (gw && T > 1) {
            ct_tensor *gr = ct_reshape(ct_narrow(dg, 0, rest0, T - 1), CT_SHAPE((T - 1) * B, G));
            ct_tensor *hr = ct_view(ct_narrow(hall, 0, hrest0, T - 1), CT_SHAPE((T - 1) * B, H));
            gw = gr && hr ? ct_addmm(gw, ct_t(gr), hr, ct_scalar_int(1), ct_scalar_int(1)) : NULL;
        }
        if (!(gin[IN_WHH] = gw))
            return -1;
    }
    if (gru && ct_autograd_ctx_needs_input_grad(ctx, IN_BHH) &&
        !(gin[IN_BHH] = ct_sum(dg, (int64_t[]){0, 1}, 2, false, CT_DTYPE_UNDEFINED)))
        return -1;
    if (ct_autograd_ctx_needs_input_grad(ctx, IN_H0) && !(gin[IN_H0] = ct_add(dhrec, carry)))
        return -1;
    if (lstm)
        gin[IN_C0] = dc;
    return nin;
}

static const ct_autograd_function_def rf_def = {"FusedRNN", rf_forward, rf_backward};

ct_status ct_rnn_fused(int kind, bool reverse, const bool *mask, int tdim, ct_tensor *x, ct_tensor *wih, ct_tensor *b,
                       ct_tensor *whh, ct_tensor *bhh, ct_tensor *h0, ct_tensor *c0, ct_tensor **hall,
                       ct_tensor **call) {
    const int64_t G = ct_tensor_size(wih, 0), rows = ct_tensor_size(x, 0), B = ct_tensor_size(h0, 0);
    rf_state st = {.kind = kind,
                   .reverse = reverse,
                   .tdim = tdim,
                   .T = B > 0 ? rows / B : 0,
                   .B = B,
                   .G = G,
                   .H = ct_tensor_size(whh, 1),
                   .mask = (bool *)mask};
    ct_tensor *in[N_IN] = {x, wih, b, whh, kind == CT_RNN_GRU ? bhh : NULL, h0, kind == CT_RNN_LSTM ? c0 : NULL};
    ct_tensor *out[2] = {NULL, NULL};
    ct_status rc = ct_autograd_function_apply(&rf_def, in, N_IN, out, kind == CT_RNN_LSTM ? 2 : 1, &st);
    if (rc != CT_OK)
        return rc;
    *hall = out[0];
    if (call)
        *call = out[1];
    return CT_OK;
}
