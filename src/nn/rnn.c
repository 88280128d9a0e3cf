/* Recurrent layers: torch.lstm, torch.gru, torch.rnn_tanh and torch.rnn_relu as
 * composites of the op library (so autograd, CUDA and META come with the ops), and the
 * nn.RNN, nn.LSTM and nn.GRU modules over them (docs/nn.md, "Recurrent layers").
 *
 * Note [Recurrent layers from ops]
 * Each layer and direction projects its whole input sequence in one GEMM,
 * x @ W_ih^T + b over (T * B, G * hidden) rows, then runs one (B, P) x (P, G * hidden)
 * product per time step on a slice of that projection, followed by the gates'
 * pointwise ops. PyTorch's CPU path does the same (its per-step slices come from
 * unbind). The slices' gradients reach the projection through the engine's in-place
 * accumulation of view gradients (Note [Slice gradients in place] in
 * src/autograd/engine.c), so backward costs O(T) and not O(T^2) in the projection's
 * size. Steps past a sequence's length (lengths given) keep the state with where() and
 * write zeros to the output: the result equals PyTorch's packed sequences.
 *
 * On the CPU in float32 and float64 (no projections, no autocast) each layer and
 * direction, its input projection included, is instead one fused node (Note [Fused
 * recurrence] in rnn_fused.c); dropout, the directions' concatenation and the output
 * mask stay ops. The path described here (ct_rnn_recurrence_ops) runs on CUDA, META,
 * float16 and bfloat16, and inside the fused node's backward under create_graph (Note
 * [Double backward through the fused recurrence]). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctorch.h"
#include "ctorch/ext.h"
#include "nn/module_internal.h"
#include "nn/rnn_internal.h"

typedef enum rnn_kind {
    RNN_TANH = CT_RNN_TANH,
    RNN_RELU = CT_RNN_RELU,
    RNN_LSTM = CT_RNN_LSTM,
    RNN_GRU = CT_RNN_GRU
} rnn_kind;

static int gate_count(rnn_kind k) { return k == RNN_LSTM ? 4 : k == RNN_GRU ? 3 : 1; }

/* What a call computes, from its arguments. */
typedef struct rnn_cfg {
    rnn_kind kind;
    const char *op;
    int L, D;   /* layers, directions */
    int per;    /* parameters per layer and direction */
    bool bias, proj, batch_first, train, batched;
    double dropout;
    int64_t T, B, I, H, P, G; /* steps, batch, input size, hidden, output size, G * hidden */
} rnn_cfg;

enum { W_IH = 0, W_HH = 1, B_IH = 2, B_HH = 3, W_HR = 4 };

static ct_tensor *param(const rnn_cfg *c, ct_tensor *const *params, int layer, int dir, int which) {
    int base = (layer * c->D + dir) * c->per;
    switch (which) {
    case W_IH: return params[base];
    case W_HH: return params[base + 1];
    case B_IH: return c->bias ? params[base + 2] : NULL;
    case B_HH: return c->bias ? params[base + 3] : NULL;
    default: return c->proj ? params[base + (c->bias ? 4 : 2)] : NULL;
    }
}

static const char *param_name(int which, int layer, int dir, char *buf, size_t cap) {
    static const char *names[] = {"weight_ih", "weight_hh", "bias_ih", "bias_hh", "weight_hr"};
    snprintf(buf, cap, "%s_l%d%s", names[which], layer, dir ? "_reverse" : "");
    return buf;
}

/* "(2, 3, 20)", as Python prints a tuple of sizes. */
static const char *tuple_str(const int64_t *s, int n, char *buf, size_t cap) {
    size_t k = (size_t)snprintf(buf, cap, "(");
    for (int i = 0; i < n && k < cap; i++)
        k += (size_t)snprintf(buf + k, cap - k, i ? ", %lld" : "%lld", (long long)s[i]);
    if (k < cap)
        snprintf(buf + k, cap - k, ")");
    return buf;
}

static ct_status check_param(const rnn_cfg *c, const ct_tensor *input, ct_tensor *const *params, int layer, int dir,
                             int which, const int64_t *shape, int ndim) {
    char name[48], a[96], b[96];
    ct_tensor *t = param(c, params, layer, dir, which);
    param_name(which, layer, dir, name, sizeof name);
    if (!t)
        return ct_error(CT_ERROR_NULL_ARGUMENT, c->op, "parameter %s is NULL", name);
    if (ct_tensor_dtype(t) != ct_tensor_dtype(input) && !ct_autocast_is_enabled(ct_tensor_device(input).type))
        return ct_error(CT_ERROR_TYPE, c->op, "input dtype (%s) does not match the dtype of %s (%s)",
                        ct_dtype_name(ct_tensor_dtype(input)), name, ct_dtype_name(ct_tensor_dtype(t)));
    if (!ct_device_equal(ct_tensor_device(t), ct_tensor_device(input)))
        return ct_error(CT_ERROR_DEVICE, c->op, "input is on %s but %s is on %s",
                        ct_device_str(ct_tensor_device(input), a, sizeof a), name,
                        ct_device_str(ct_tensor_device(t), b, sizeof b));
    bool same = ct_tensor_dim(t) == ndim;
    for (int i = 0; same && i < ndim; i++)
        same = ct_tensor_size(t, i) == shape[i];
    if (!same) {
        if (which == W_IH && layer == 0 && ct_tensor_dim(t) == 2 && ct_tensor_size(t, 0) == shape[0])
            return ct_error(CT_ERROR_VALUE, c->op, "input.size(-1) must be equal to input_size. Expected %lld, got %lld",
                            (long long)ct_tensor_size(t, 1), (long long)c->I);
        return ct_error(CT_ERROR_VALUE, c->op, "%s has shape %s, expected %s", name,
                        ct_shape_str(ct_tensor_shape(t), ct_tensor_dim(t), a, sizeof a),
                        ct_shape_str(shape, ndim, b, sizeof b));
    }
    return CT_OK;
}

/* An initial state: NULL or (L * D, B, size) ((L * D, size) unbatched). */
static ct_status check_state(const rnn_cfg *c, const ct_tensor *input, const ct_tensor *s, int64_t size,
                             const char *label) {
    if (!s)
        return CT_OK;
    char a[96], b[96];
    int want = c->batched ? 3 : 2;
    if (ct_tensor_dim(s) != want)
        return ct_error(CT_ERROR_VALUE, c->op, "For %s input, hx should also be %d-D but got %d-D tensor",
                        c->batched ? "batched 3-D" : "unbatched 2-D", want, ct_tensor_dim(s));
    int64_t shape[3] = {(int64_t)c->L * c->D, c->B, size};
    if (!c->batched)
        shape[1] = size;
    bool same = true;
    for (int i = 0; i < want; i++)
        same = same && ct_tensor_size(s, i) == shape[i];
    if (!same)
        return ct_error(CT_ERROR_VALUE, c->op, "Expected %s size %s, got %s", label, tuple_str(shape, want, a, sizeof a),
                        ct_shape_str(ct_tensor_shape(s), ct_tensor_dim(s), b, sizeof b));
    if (ct_tensor_dtype(s) != ct_tensor_dtype(input))
        return ct_error(CT_ERROR_TYPE, c->op, "input dtype (%s) does not match the dtype of %s (%s)",
                        ct_dtype_name(ct_tensor_dtype(input)), label, ct_dtype_name(ct_tensor_dtype(s)));
    if (!ct_device_equal(ct_tensor_device(s), ct_tensor_device(input)))
        return ct_error(CT_ERROR_DEVICE, c->op, "input is on %s but %s is on %s",
                        ct_device_str(ct_tensor_device(input), a, sizeof a), label,
                        ct_device_str(ct_tensor_device(s), b, sizeof b));
    return CT_OK;
}

static ct_status check_args(rnn_cfg *c, const ct_tensor *input, const ct_tensor *h0, const ct_tensor *c0,
                            ct_tensor *const *params, int nparams) {
    if (!input)
        return ct_error_null(c->op);
    int nd = ct_tensor_dim(input);
    if (nd != 2 && nd != 3)
        return ct_error(CT_ERROR_VALUE, c->op, "Expected input to be 2D or 3D, got %dD instead", nd);
    if (!ct_dtype_is_floating(ct_tensor_dtype(input)))
        return ct_error(CT_ERROR_TYPE, c->op, "expected a floating-point input, got %s",
                        ct_dtype_name(ct_tensor_dtype(input)));
    if (c->L <= 0)
        return ct_error(CT_ERROR_VALUE, c->op, "num_layers must be greater than zero");
    if (!(c->dropout >= 0 && c->dropout <= 1))
        return ct_error(CT_ERROR_VALUE, c->op,
                        "dropout should be a number in range [0, 1] representing the probability of an element "
                        "being zeroed");
    c->batched = nd == 3;
    c->T = ct_tensor_size(input, c->batched && c->batch_first ? 1 : 0);
    c->B = c->batched ? ct_tensor_size(input, c->batch_first ? 0 : 1) : 1;
    c->I = ct_tensor_size(input, -1);
    if (c->T == 0)
        return ct_error(CT_ERROR_VALUE, c->op, "Expected sequence length to be larger than 0 in RNN");
    int base = 2 + (c->bias ? 2 : 0);
    if (!params && nparams > 0)
        return ct_error(CT_ERROR_NULL_ARGUMENT, c->op, "params is NULL");
    int groups = c->L * c->D;
    if (c->kind == RNN_LSTM && nparams == groups * (base + 1))
        c->proj = true;
    else if (nparams != groups * base)
        return ct_error(CT_ERROR_VALUE, c->op,
                        "expected %d parameters (%d per layer and direction%s), got %d", groups * base, base,
                        c->kind == RNN_LSTM ? ", one more with projections" : "", nparams);
    c->per = base + (c->proj ? 1 : 0);
    for (int i = 0; i < nparams; i++)
        if (!params[i])
            return ct_error(CT_ERROR_NULL_ARGUMENT, c->op, "parameter %d is NULL", i);
    /* The sizes come from layer 0's weight_hh (G * hidden, P). */
    ct_tensor *whh = param(c, params, 0, 0, W_HH);
    int64_t g = gate_count(c->kind);
    if (ct_tensor_dim(whh) != 2 || ct_tensor_size(whh, 0) % g || ct_tensor_size(whh, 0) == 0 ||
        ct_tensor_size(whh, 1) == 0) {
        char a[96];
        return ct_error(CT_ERROR_VALUE, c->op,
                        "weight_hh_l0 has shape %s, expected (%lld * hidden_size, hidden_size) with hidden_size > 0",
                        ct_shape_str(ct_tensor_shape(whh), ct_tensor_dim(whh), a, sizeof a), (long long)g);
    }
    c->H = ct_tensor_size(whh, 0) / g;
    c->G = g * c->H;
    c->P = c->proj ? ct_tensor_size(whh, 1) : c->H;
    for (int l = 0; l < c->L; l++)
        for (int d = 0; d < c->D; d++) {
            int64_t in = l == 0 ? c->I : c->D * c->P;
            ct_status st;
            if ((st = check_param(c, input, params, l, d, W_IH, CT_SHAPE(c->G, in))) ||
                (st = check_param(c, input, params, l, d, W_HH, CT_SHAPE(c->G, c->P))))
                return st;
            if (c->bias && ((st = check_param(c, input, params, l, d, B_IH, CT_SHAPE(c->G))) ||
                            (st = check_param(c, input, params, l, d, B_HH, CT_SHAPE(c->G)))))
                return st;
            if (c->proj && (st = check_param(c, input, params, l, d, W_HR, CT_SHAPE(c->P, c->H))))
                return st;
        }
    ct_status st = check_state(c, input, h0, c->P, c->kind == RNN_LSTM ? "hidden[0]" : "hidden");
    if (st == CT_OK && c->kind == RNN_LSTM)
        st = check_state(c, input, c0, c->H, "hidden[1]");
    return st;
}

/* Reads lengths into a new array (free()), checking them against the input. */
static int64_t *read_lengths(const rnn_cfg *c, const ct_tensor *lengths) {
    if (!c->batched) {
        ct_error(CT_ERROR_VALUE, c->op, "lengths need batched (3-D) input");
        return NULL;
    }
    ct_dtype dt = ct_tensor_dtype(lengths);
    if (ct_dtype_is_floating(dt) || dt == CT_BOOL) {
        ct_error(CT_ERROR_TYPE, c->op, "lengths must be an integer tensor, got %s", ct_dtype_name(dt));
        return NULL;
    }
    if (ct_tensor_dim(lengths) != 1 || ct_tensor_size(lengths, 0) != c->B) {
        char a[96];
        ct_error(CT_ERROR_VALUE, c->op, "Expected `len(lengths)` to be equal to batch_size, but got lengths of shape %s "
                 "(batch_size=%lld)", ct_shape_str(ct_tensor_shape(lengths), ct_tensor_dim(lengths), a, sizeof a),
                 (long long)c->B);
        return NULL;
    }
    int64_t *out = ct_xmalloc(c->op, sizeof(int64_t) * (size_t)(c->B ? c->B : 1));
    if (!out)
        return NULL;
    ct_scope_begin();
    ct_tensor *h = ct_contiguous(ct_to_dtype(ct_to_device(lengths, CT_CPU), CT_I64));
    const int64_t *v = h ? ct_tensor_data(h) : NULL;
    bool ok = v || (h && c->B == 0);
    if (h && !ok)
        ct_error(CT_ERROR_VALUE, c->op, "lengths have no data (a meta tensor)");
    for (int64_t b = 0; ok && b < c->B; b++) {
        out[b] = v[b];
        if (v[b] <= 0) {
            ct_error(CT_ERROR_VALUE, c->op, "Length of all samples has to be greater than 0, but found an element in "
                     "'lengths' that is <= 0");
            ok = false;
        } else if (v[b] > c->T) {
            ct_error(CT_ERROR_VALUE, c->op, "lengths[%lld] is %lld, more than the input's %lld time steps",
                     (long long)b, (long long)v[b], (long long)c->T);
            ok = false;
        }
    }
    ct_scope_end();
    if (!ok) {
        free(out);
        return NULL;
    }
    return out;
}

/* Per-layer-and-direction operands. */
typedef struct dir_ops {
    ct_tensor *xp;    /* the input projection, (T, B, G) */
    ct_tensor *whh_t; /* (P, G) */
    ct_tensor *bhh;   /* GRU: (G) or NULL */
    ct_tensor *whr_t; /* (H, P) or NULL */
} dir_ops;

/* One step: the new hidden state (and *c_out, LSTM). Scope-owned results. */
static ct_tensor *cell(const rnn_cfg *c, const dir_ops *o, ct_tensor *xt, ct_tensor *h, ct_tensor *cs,
                       ct_tensor **c_out) {
    const ct_scalar one = ct_scalar_int(1);
    int64_t H = c->H;
    switch (c->kind) {
    case RNN_LSTM: {
        ct_tensor *gates = ct_addmm(xt, h, o->whh_t, one, one); /* (B, 4H): i, f, g, o */
        ct_tensor *sif = gates ? ct_sigmoid(ct_narrow(gates, 1, 0, 2 * H)) : NULL;
        ct_tensor *gg = gates ? ct_tanh(ct_narrow(gates, 1, 2 * H, H)) : NULL;
        ct_tensor *og = gates ? ct_sigmoid(ct_narrow(gates, 1, 3 * H, H)) : NULL;
        if (!sif || !gg || !og)
            return NULL;
        ct_tensor *c2 = ct_addcmul(ct_mul(ct_narrow(sif, 1, H, H), cs), ct_narrow(sif, 1, 0, H), gg, one);
        ct_tensor *h2 = c2 ? ct_mul(og, ct_tanh(c2)) : NULL;
        if (h2 && o->whr_t)
            h2 = ct_mm(h2, o->whr_t);
        *c_out = c2;
        return h2;
    }
    case RNN_GRU: {
        ct_tensor *gh = o->bhh ? ct_addmm(o->bhh, h, o->whh_t, one, one) : ct_mm(h, o->whh_t); /* (B, 3H) */
        if (!gh)
            return NULL;
        ct_tensor *rz = ct_sigmoid(ct_add(ct_narrow(xt, 1, 0, 2 * H), ct_narrow(gh, 1, 0, 2 * H)));
        ct_tensor *n = rz ? ct_tanh(ct_addcmul(ct_narrow(xt, 1, 2 * H, H), ct_narrow(rz, 1, 0, H),
                                               ct_narrow(gh, 1, 2 * H, H), one))
                          : NULL;
        return n ? ct_lerp(n, h, ct_narrow(rz, 1, H, H)) : NULL; /* n + z (h - n) */
    }
    default: {
        ct_tensor *pre = ct_addmm(xt, h, o->whh_t, one, one);
        return c->kind == RNN_TANH ? ct_tanh(pre) : ct_relu(pre);
    }
    }
}

/* The bias of one layer and direction's input projection: b_ih + b_hh (b_ih alone for
 * the GRU, whose b_hh acts inside the n gate). NULL without biases or on error. */
static ct_tensor *proj_bias(const rnn_cfg *c, ct_tensor *const *params, int l, int d) {
    if (!c->bias)
        return NULL;
    return c->kind == RNN_GRU ? ct_tensor_ref(param(c, params, l, d, B_IH))
                              : ct_add(param(c, params, l, d, B_IH), param(c, params, l, d, B_HH));
}

ct_tensor *ct_rnn_projection(ct_tensor *x, ct_tensor *wih, ct_tensor *b, int64_t T, int64_t B, int tdim) {
    ct_tensor *xp = b ? ct_addmm(b, x, ct_t(wih), ct_scalar_int(1), ct_scalar_int(1)) : ct_mm(x, ct_t(wih));
    if (!xp)
        return NULL;
    int64_t G = ct_tensor_size(wih, 0);
    return tdim ? ct_transpose(ct_view(xp, CT_SHAPE(B, T, G)), 0, 1) : ct_view(xp, CT_SHAPE(T, B, G));
}

ct_status ct_rnn_recurrence_ops(int kind, bool reverse, const bool *mask, ct_tensor *xp, ct_tensor *whh,
                                ct_tensor *bhh, ct_tensor *whr, ct_tensor *h0, ct_tensor *c0, ct_tensor **hall,
                                ct_tensor **call) {
    const int64_t T = ct_tensor_size(xp, 0), B = ct_tensor_size(xp, 1);
    rnn_cfg c = {.kind = (rnn_kind)kind, .H = ct_tensor_size(xp, 2) / gate_count((rnn_kind)kind)};
    dir_ops o = {.xp = xp, .whh_t = ct_t(whh), .bhh = bhh, .whr_t = whr ? ct_t(whr) : NULL};
    const ct_tensor **hs = ct_xcalloc("rnn", (size_t)(T > 0 ? 2 * T : 1), sizeof *hs);
    ct_tensor *valid = NULL;
    if (hs && mask) { /* valid[t, b] = step t is within sequence b, (T, B, 1) */
        ct_tensor *m = ct_from_data(mask, CT_SHAPE(T, B, 1), CT_BOOL);
        valid = m ? ct_logical_not(ct_to_device(m, ct_tensor_device(xp))) : NULL;
    }
    ct_status st = hs && o.whh_t && (!whr || o.whr_t) && (!mask || valid) ? CT_OK : ct_last_status();
    const ct_tensor **cs = hs + T;
    ct_tensor *h = h0, *cst = c0;
    for (int64_t s = 0; s < T && st == CT_OK; s++) {
        int64_t t = reverse ? T - 1 - s : s;
        bool partial = false;
        for (int64_t b = 0; mask && b < B; b++)
            partial = partial || mask[t * B + b];
        ct_tensor *c2 = NULL;
        ct_tensor *h2 = cell(&c, &o, ct_select(xp, 0, t), h, cst, &c2);
        if (h2 && partial) {
            ct_tensor *v = ct_select(valid, 0, t); /* (B, 1) */
            h2 = ct_where(v, h2, h);
            if (kind == RNN_LSTM)
                c2 = c2 ? ct_where(v, c2, cst) : NULL;
        }
        if (!h2 || (kind == RNN_LSTM && !c2))
            st = ct_last_status();
        hs[t] = h = h2;
        cs[t] = cst = c2;
    }
    if (st == CT_OK) {
        *hall = ct_stack(hs, (int)T, 0);
        if (call)
            *call = ct_stack(cs, (int)T, 0);
        if (!*hall || (call && !*call))
            st = ct_last_status();
    }
    free(hs);
    return st;
}

/* The input and initial states as a batch (an unbatched call is a batch of one): *x
 * (T, B, I) or batch-first, *h (L * D, B, P), *cs (L * D, B, hidden; LSTM only, else
 * NULL), zeros for a state not given; owned by the current scope. */
static ct_status as_batch(const rnn_cfg *c, const ct_tensor *input, const ct_tensor *h0, const ct_tensor *c0,
                          ct_tensor **x, ct_tensor **h, ct_tensor **cs) {
    const int nstate = c->L * c->D;
    ct_dtype dt = ct_tensor_dtype(input);
    ct_device dev = ct_tensor_device(input);
    *x = c->batched ? ct_tensor_ref(input) : ct_unsqueeze(input, 1);
    *h = h0 ? (c->batched ? ct_tensor_ref(h0) : ct_unsqueeze(h0, 1))
            : ct_zeros(CT_SHAPE(nstate, c->B, c->P), dt, dev);
    *cs = c->kind != RNN_LSTM ? NULL
          : c0                ? (c->batched ? ct_tensor_ref(c0) : ct_unsqueeze(c0, 1))
                              : ct_zeros(CT_SHAPE(nstate, c->B, c->H), dt, dev);
    return *x && *h && (c->kind != RNN_LSTM || *cs) ? CT_OK : ct_last_status();
}

/* The whole computation, in a scope of its own; results are kept into the caller's. */
static ct_status run(const rnn_cfg *c, const ct_tensor *input, const ct_tensor *h0, const ct_tensor *c0,
                     const int64_t *lens, ct_tensor *const *params, ct_tensor **output, ct_tensor **hn,
                     ct_tensor **cn) {
    const int64_t T = c->T, B = c->B;
    const int nstate = c->L * c->D;
    ct_tensor **hs = ct_xcalloc(c->op, (size_t)nstate * 2, sizeof *hs);
    /* mask[t * B + b]: step t is past sequence b's length */
    bool *mask = lens ? ct_xmalloc(c->op, (size_t)(T * B > 0 ? T * B : 1)) : NULL;
    if (!hs || (lens && !mask)) {
        free(hs);
        free(mask);
        return ct_last_status();
    }
    ct_tensor **cs = hs + nstate;
    ct_scope_begin();
    ct_device dev = ct_tensor_device(input);
    /* Time-major views of input and states: (T, B, I) or, batch_first, (B, T, I). */
    ct_tensor *x, *h0b, *c0b;
    ct_status st = as_batch(c, input, h0, c0, &x, &h0b, &c0b);
    int tdim = c->batched && c->batch_first ? 1 : 0;
    ct_tensor *invalid = NULL; /* the mask as a (T, B, 1) tensor, for the output's zeros */
    if (lens) {
        for (int64_t t = 0; t < T; t++)
            for (int64_t b = 0; b < B; b++)
                mask[t * B + b] = t >= lens[b];
        invalid = ct_to_device(ct_from_data(mask, CT_SHAPE(T, B, 1), CT_BOOL), dev);
        if (!invalid)
            st = ct_last_status();
    }
    /* Note [Fused recurrence] in rnn_fused.c: where it applies, each layer and direction
     * is one node, its input projection included. */
    const bool fused = B > 0 && ct_rnn_fused_applies(input, c->proj);

    ct_tensor *layer_in = x;
    for (int l = 0; l < c->L && st == CT_OK; l++) {
        int64_t in = ct_tensor_size(layer_in, 2);
        ct_tensor *x2d = ct_reshape(layer_in, CT_SHAPE(T * B, in));
        ct_tensor *dir_out[2] = {NULL, NULL};
        for (int d = 0; d < c->D && st == CT_OK; d++) {
            ct_tensor *wih = param(c, params, l, d, W_IH), *whh = param(c, params, l, d, W_HH);
            ct_tensor *bhh = c->kind == RNN_GRU ? param(c, params, l, d, B_HH) : NULL;
            ct_tensor *b = proj_bias(c, params, l, d);
            int k = l * c->D + d;
            ct_tensor *h = ct_select(h0b, 0, k);
            ct_tensor *cst = c->kind == RNN_LSTM ? ct_select(c0b, 0, k) : NULL;
            if (!x2d || (c->bias && !b) || !h || (c->kind == RNN_LSTM && !cst)) {
                st = ct_last_status();
                break;
            }
            ct_tensor *hall = NULL, *call = NULL, *cn_k = NULL;
            /* Note [LSTM inference on oneDNN] in src/cpu/rnn_onednn.c; a training forward
             * (weights that record gradients) does not ask, so makes no error to clear */
            if (fused && c->kind == RNN_LSTM && !mask && !(ct_is_grad_enabled() && ct_tensor_requires_grad(wih))) {
                st = ct_lstm_layer_onednn(x2d, tdim, T, B, wih, b, whh, h, cst, d == 1, &hall, &cn_k);
                if (st == CT_ERROR_NOT_IMPLEMENTED) {
                    ct_clear_error();
                    st = CT_OK;
                }
            }
            if (st == CT_OK && !hall && fused) {
                st = ct_rnn_fused(c->kind, d == 1, mask, tdim, x2d, wih, b, whh, bhh, h, cst, &hall,
                                  c->kind == RNN_LSTM ? &call : NULL);
            } else if (st == CT_OK && !hall) {
                ct_tensor *xp = ct_rnn_projection(x2d, wih, b, T, B, tdim);
                st = xp ? ct_rnn_recurrence_ops(c->kind, d == 1, mask, xp, whh, bhh, param(c, params, l, d, W_HR), h,
                                                cst, &hall, c->kind == RNN_LSTM ? &call : NULL)
                        : ct_last_status();
            }
            if (st != CT_OK)
                break;
            hs[k] = ct_select(hall, 0, d == 0 ? T - 1 : 0);
            cs[k] = call ? ct_select(call, 0, d == 0 ? T - 1 : 0) : cn_k;
            dir_out[d] = invalid ? ct_masked_fill(hall, invalid, ct_scalar_int(0)) : hall;
            if (!hs[k] || ((call || cn_k) && !cs[k]) || !dir_out[d])
                st = ct_last_status();
        }
        if (st != CT_OK)
            break;
        ct_tensor *lo = c->D == 1 ? dir_out[0] : ct_cat((const ct_tensor *[]){dir_out[0], dir_out[1]}, 2, 2);
        if (lo && l < c->L - 1 && c->train && c->dropout > 0)
            lo = ct_dropout(lo, c->dropout, true);
        if (!lo)
            st = ct_last_status();
        layer_in = lo;
        tdim = 0;
    }

    ct_tensor *out = NULL, *hn_t = NULL, *cn_t = NULL;
    if (st == CT_OK) {
        out = c->batched ? (c->batch_first ? ct_transpose(layer_in, 0, 1) : layer_in) : ct_squeeze_dim(layer_in, 1);
        hn_t = ct_stack((const ct_tensor *const *)hs, nstate, 0);
        if (hn_t && !c->batched)
            hn_t = ct_squeeze_dim(hn_t, 1);
        if (c->kind == RNN_LSTM) {
            cn_t = ct_stack((const ct_tensor *const *)cs, nstate, 0);
            if (cn_t && !c->batched)
                cn_t = ct_squeeze_dim(cn_t, 1);
        }
        if (!out || !hn_t || (c->kind == RNN_LSTM && !cn_t))
            st = ct_last_status();
    }
    if (st == CT_OK) {
        *output = ct_keep(out);
        *hn = ct_keep(hn_t);
        if (cn)
            *cn = ct_keep(cn_t);
    }
    ct_scope_end();
    free(mask);
    free(hs);
    return st;
}

/* Note [Recurrent layers on cuDNN] in rnn_cudnn.c: the whole stack as one call on
 * as_batch's batch, the results squeezed back for an unbatched call. */
static ct_status run_cudnn(const rnn_cfg *c, const ct_tensor *input, const ct_tensor *h0, const ct_tensor *c0,
                           const int64_t *lens, ct_tensor *const *params, int nparams, ct_tensor **output,
                           ct_tensor **hn, ct_tensor **cn) {
    const bool lstm = c->kind == RNN_LSTM;
    ct_scope_begin();
    ct_tensor *x, *h, *cs, *o = NULL, *hn_t = NULL, *cn_t = NULL;
    ct_status st = as_batch(c, input, h0, c0, &x, &h, &cs);
    if (st == CT_OK)
        st = ct_rnn_cudnn(c->kind, x, h, cs, lens, params, nparams, c->bias, c->L, c->D == 2,
                          c->batched && c->batch_first, &o, &hn_t, lstm ? &cn_t : NULL);
    if (st == CT_OK && !c->batched) {
        o = ct_squeeze_dim(o, 1);
        hn_t = ct_squeeze_dim(hn_t, 1);
        cn_t = lstm ? ct_squeeze_dim(cn_t, 1) : NULL;
        if (!o || !hn_t || (lstm && !cn_t))
            st = ct_last_status();
    }
    if (st == CT_OK) {
        *output = ct_keep(o);
        *hn = ct_keep(hn_t);
        if (cn)
            *cn = ct_keep(cn_t);
    }
    ct_scope_end();
    return st;
}

static ct_status rnn_call(rnn_kind kind, const char *op, const ct_tensor *input, const ct_tensor *h0,
                          const ct_tensor *c0, const ct_tensor *lengths, ct_tensor *const *params, int nparams,
                          bool has_biases, int num_layers, double dropout, bool train, bool bidirectional,
                          bool batch_first, bool ops_only, ct_tensor **output, ct_tensor **hn, ct_tensor **cn) {
    if (output)
        *output = NULL;
    if (hn)
        *hn = NULL;
    if (cn)
        *cn = NULL;
    rnn_cfg c = {.kind = kind,
                 .op = op,
                 .L = num_layers,
                 .D = bidirectional ? 2 : 1,
                 .bias = has_biases,
                 .batch_first = batch_first,
                 .train = train,
                 .dropout = dropout};
    ct_status st = check_args(&c, input, h0, c0, params, nparams);
    if (st != CT_OK)
        return st;
    int64_t *lens = NULL;
    if (lengths && !(lens = read_lengths(&c, lengths)))
        return ct_last_status();
    ct_tensor *o = NULL, *h = NULL, *cc = NULL;
    if (!ops_only && c.B > 0 && ct_rnn_cudnn_applies(input, c.proj, num_layers, dropout, train))
        st = run_cudnn(&c, input, h0, c0, lens, params, nparams, &o, &h, kind == RNN_LSTM ? &cc : NULL);
    else
        st = run(&c, input, h0, c0, lens, params, &o, &h, kind == RNN_LSTM ? &cc : NULL);
    free(lens);
    if (st != CT_OK)
        return st;
    /* Results not asked for are released with the caller's scope (or here without one). */
    ct_tensor *res[3] = {o, h, cc};
    ct_tensor **dst[3] = {output, hn, cn};
    for (int i = 0; i < 3; i++) {
        if (dst[i])
            *dst[i] = res[i];
        else if (res[i] && ct_scope_depth() == 0)
            ct_release(res[i]);
    }
    return CT_OK;
}

int ct_rnn_grads_through_ops(ct_autograd_ctx *ctx, ct_tensor *const *outs, int nouts, ct_tensor *const *in, int nin,
                             ct_tensor *const *gout, ct_tensor **gin) {
    const ct_tensor **wrt = ct_xmalloc("rnn", (size_t)nin * sizeof *wrt);
    int *which = ct_xmalloc("rnn", (size_t)nin * sizeof *which);
    ct_tensor **grads = ct_xmalloc("rnn", (size_t)nin * sizeof *grads);
    int n = 0, rc = wrt && which && grads ? nin : -1;
    for (int i = 0; rc >= 0 && i < nin; i++)
        if (in[i] && ct_autograd_ctx_needs_input_grad(ctx, i)) {
            which[n] = i;
            wrt[n++] = in[i];
        }
    if (rc >= 0 && n > 0 &&
        ct_autograd_grad((const ct_tensor *const *)outs, nouts, wrt, n, (const ct_tensor *const *)gout, true, true,
                         true, grads) != CT_OK)
        rc = -1;
    for (int j = 0; rc >= 0 && j < n; j++)
        gin[which[j]] = grads[j];
    free(wrt), free(which), free(grads);
    return rc;
}

ct_status ct_rnn_stack_ops(int kind, const ct_tensor *input, const ct_tensor *h0, const ct_tensor *c0,
                           const ct_tensor *lengths, ct_tensor *const *params, int nparams, bool has_biases,
                           int num_layers, bool bidirectional, bool batch_first, ct_tensor **output, ct_tensor **hn,
                           ct_tensor **cn) {
    static const char *ops[] = {"rnn_tanh", "rnn_relu", "lstm", "gru"};
    return rnn_call((rnn_kind)kind, ops[kind], input, h0, c0, lengths, params, nparams, has_biases, num_layers, 0.0,
                    false, bidirectional, batch_first, true, output, hn, cn);
}

ct_status ct_lstm(const ct_tensor *input, const ct_tensor *h0, const ct_tensor *c0, const ct_tensor *lengths,
                  ct_tensor *const *params, int nparams, bool has_biases, int num_layers, double dropout, bool train,
                  bool bidirectional, bool batch_first, ct_tensor **output, ct_tensor **hn, ct_tensor **cn) {
    return rnn_call(RNN_LSTM, "lstm", input, h0, c0, lengths, params, nparams, has_biases, num_layers, dropout, train,
                    bidirectional, batch_first, false, output, hn, cn);
}

ct_status ct_gru(const ct_tensor *input, const ct_tensor *h0, const ct_tensor *lengths, ct_tensor *const *params,
                 int nparams, bool has_biases, int num_layers, double dropout, bool train, bool bidirectional,
                 bool batch_first, ct_tensor **output, ct_tensor **hn) {
    return rnn_call(RNN_GRU, "gru", input, h0, NULL, lengths, params, nparams, has_biases, num_layers, dropout, train,
                    bidirectional, batch_first, false, output, hn, NULL);
}

ct_status ct_rnn_tanh(const ct_tensor *input, const ct_tensor *h0, const ct_tensor *lengths, ct_tensor *const *params,
                      int nparams, bool has_biases, int num_layers, double dropout, bool train, bool bidirectional,
                      bool batch_first, ct_tensor **output, ct_tensor **hn) {
    return rnn_call(RNN_TANH, "rnn_tanh", input, h0, NULL, lengths, params, nparams, has_biases, num_layers, dropout,
                    train, bidirectional, batch_first, false, output, hn, NULL);
}

ct_status ct_rnn_relu(const ct_tensor *input, const ct_tensor *h0, const ct_tensor *lengths, ct_tensor *const *params,
                      int nparams, bool has_biases, int num_layers, double dropout, bool train, bool bidirectional,
                      bool batch_first, ct_tensor **output, ct_tensor **hn) {
    return rnn_call(RNN_RELU, "rnn_relu", input, h0, NULL, lengths, params, nparams, has_biases, num_layers, dropout,
                    train, bidirectional, batch_first, false, output, hn, NULL);
}

/* ------------------------------------------------------------------ modules */

typedef struct rnn_module_ctx {
    uint64_t magic; /* RNN_CTX_MAGIC */
    rnn_kind kind;
    int64_t input_size, hidden_size, num_layers, proj_size;
    bool bias, batch_first, bidirectional;
    double dropout;
} rnn_module_ctx;

#define RNN_MAX_PARAMS_STACK 64

/* The module's flat weight list in PyTorch's order, from its named parameters (a
 * parameter replaced with ct_module_set_param is picked up). */
static ct_status module_params(const char *op, ct_module *m, const rnn_module_ctx *x, ct_tensor **out, int cap,
                               int *n) {
    int D = x->bidirectional ? 2 : 1, k = 0;
    for (int l = 0; l < x->num_layers; l++)
        for (int d = 0; d < D; d++)
            for (int w = W_IH; w <= W_HR; w++) {
                if ((w == B_IH || w == B_HH) && !x->bias)
                    continue;
                if (w == W_HR && x->proj_size == 0)
                    continue;
                char name[48];
                param_name(w, l, d, name, sizeof name);
                if (k >= cap)
                    return ct_error(CT_ERROR_VALUE, op, "too many parameters");
                if (!(out[k++] = ct_module_param(m, name)))
                    return ct_error(CT_ERROR_VALUE, op, "the module has no parameter %s", name);
            }
    *n = k;
    return CT_OK;
}

static const char *module_op(rnn_kind k) { return k == RNN_LSTM ? "LSTM" : k == RNN_GRU ? "GRU" : "RNN"; }

/* The module's ctx, when m is one of this file's modules of the family of kind (the
 * plain RNN family is RNN_TANH); NULL with an error otherwise. */
#define RNN_CTX_MAGIC 0x524e4e4374780001ULL

static rnn_module_ctx *rnn_ctx(ct_module *m, rnn_kind family, const char *fn) {
    const char *want = module_op(family);
    if (!m) {
        ct_error(CT_ERROR_NULL_ARGUMENT, fn, "module is NULL");
        return NULL;
    }
    const char *type = ct_module_type(m);
    rnn_module_ctx *x = strcmp(type, want) == 0 ? ct_module_ctx(m) : NULL;
    if (!x || x->magic != RNN_CTX_MAGIC) {
        ct_error(CT_ERROR_VALUE, fn, "expected a %s module made by ct_nn_%s, got %s", want,
                 family == RNN_LSTM ? "lstm" : family == RNN_GRU ? "gru" : "rnn", type);
        return NULL;
    }
    return x;
}

static ct_status module_run(ct_module *m, rnn_kind family, const char *fn, const ct_tensor *input,
                            const ct_tensor *h0, const ct_tensor *c0, const ct_tensor *lengths, ct_tensor **output,
                            ct_tensor **hn, ct_tensor **cn) {
    if (output)
        *output = NULL;
    if (hn)
        *hn = NULL;
    if (cn)
        *cn = NULL;
    rnn_module_ctx *x = rnn_ctx(m, family, fn);
    if (!x)
        return ct_last_status();
    const char *op = module_op(x->kind);
    if (!input)
        return ct_error_null(op);
    int D = x->bidirectional ? 2 : 1;
    int64_t count = x->num_layers * D * (2 + (x->bias ? 2 : 0) + (x->proj_size ? 1 : 0));
    ct_tensor *stack_params[RNN_MAX_PARAMS_STACK];
    ct_tensor **params = count <= RNN_MAX_PARAMS_STACK ? stack_params : ct_xmalloc(op, sizeof *params * (size_t)count);
    if (!params)
        return ct_last_status();
    int n = 0;
    ct_status st = module_params(op, m, x, params, (int)count, &n);
    if (st == CT_OK && ct_tensor_dtype(input) != ct_tensor_dtype(params[0]) &&
        !ct_autocast_is_enabled(ct_tensor_device(input).type))
        st = ct_error(CT_ERROR_TYPE, op,
                      "RNN input dtype (%s) does not match weight dtype (%s). Convert input: input.to(%s), or "
                      "convert model: model.to(%s)",
                      ct_dtype_name(ct_tensor_dtype(input)), ct_dtype_name(ct_tensor_dtype(params[0])),
                      ct_dtype_name(ct_tensor_dtype(params[0])), ct_dtype_name(ct_tensor_dtype(input)));
    if (st == CT_OK)
        st = rnn_call(x->kind, op, input, h0, c0, lengths, params, n, x->bias, (int)x->num_layers, x->dropout,
                      ct_module_is_training(m), x->bidirectional, x->batch_first, false, output, hn, cn);
    if (params != stack_params)
        free(params);
    return st;
}

static ct_tensor *rnn_module_forward(ct_module *m, const ct_tensor *input) {
    rnn_module_ctx *x = ct_module_ctx(m);
    ct_tensor *out = NULL;
    rnn_kind family = x->kind == RNN_RELU ? RNN_TANH : x->kind;
    module_run(m, family, module_op(x->kind), input, NULL, NULL, NULL, &out, NULL, NULL);
    return out;
}

ct_status ct_nn_rnn_forward(ct_module *m, const ct_tensor *input, const ct_tensor *h0, const ct_tensor *lengths,
                            ct_tensor **output, ct_tensor **hn) {
    return module_run(m, RNN_TANH, "rnn_forward", input, h0, NULL, lengths, output, hn, NULL);
}

ct_status ct_nn_lstm_forward(ct_module *m, const ct_tensor *input, const ct_tensor *h0, const ct_tensor *c0,
                             const ct_tensor *lengths, ct_tensor **output, ct_tensor **hn, ct_tensor **cn) {
    return module_run(m, RNN_LSTM, "lstm_forward", input, h0, c0, lengths, output, hn, cn);
}

ct_status ct_nn_gru_forward(ct_module *m, const ct_tensor *input, const ct_tensor *h0, const ct_tensor *lengths,
                            ct_tensor **output, ct_tensor **hn) {
    return module_run(m, RNN_GRU, "gru_forward", input, h0, NULL, lengths, output, hn, NULL);
}

/* RNNBase.__init__'s checks and parameters, then reset_parameters: every parameter
 * U(-1/sqrt(hidden_size), 1/sqrt(hidden_size)). */
static ct_module *make_rnn(rnn_kind kind, int64_t input_size, int64_t hidden_size, int64_t num_layers, bool bias,
                           bool batch_first, double dropout, bool bidirectional, int64_t proj_size, ct_dtype dtype) {
    const char *op = module_op(kind);
    if (!(dropout >= 0 && dropout <= 1)) {
        ct_error(CT_ERROR_VALUE, op, "dropout should be a number in range [0, 1] representing the probability of an "
                 "element being zeroed");
        return NULL;
    }
    if (input_size <= 0) {
        ct_error(CT_ERROR_VALUE, op, "input_size must be greater than zero");
        return NULL;
    }
    if (hidden_size <= 0) {
        ct_error(CT_ERROR_VALUE, op, "hidden_size must be greater than zero");
        return NULL;
    }
    if (num_layers <= 0) {
        ct_error(CT_ERROR_VALUE, op, "num_layers must be greater than zero");
        return NULL;
    }
    if (num_layers > 1 << 20) {
        ct_error(CT_ERROR_VALUE, op, "num_layers %lld is too large", (long long)num_layers);
        return NULL;
    }
    if (proj_size < 0) {
        ct_error(CT_ERROR_VALUE, op, "proj_size should be a positive integer or zero to disable projections");
        return NULL;
    }
    if (proj_size >= hidden_size) {
        ct_error(CT_ERROR_VALUE, op, "proj_size has to be smaller than hidden_size");
        return NULL;
    }
    if (ct_nn_layer_dtype(op, &dtype))
        return NULL;
    ct_module *m = ct_nn_module_with_ctx(op, rnn_module_forward, sizeof(rnn_module_ctx));
    if (!m)
        return NULL;
    rnn_module_ctx *x = ct_module_ctx(m);
    *x = (rnn_module_ctx){.magic = RNN_CTX_MAGIC,
                          .kind = kind,
                          .input_size = input_size,
                          .hidden_size = hidden_size,
                          .num_layers = num_layers,
                          .proj_size = proj_size,
                          .bias = bias,
                          .batch_first = batch_first,
                          .bidirectional = bidirectional,
                          .dropout = dropout};
    int64_t G = gate_count(kind) * hidden_size, P = proj_size ? proj_size : hidden_size;
    int D = bidirectional ? 2 : 1;
    double bound = 1.0 / sqrt((double)hidden_size);
    bool ok = true;
    ct_scope_begin();
    for (int64_t l = 0; l < num_layers && ok; l++)
        for (int d = 0; d < D && ok; d++) {
            int64_t in = l == 0 ? input_size : P * D;
            char name[48];
            ct_tensor *w[5] = {NULL};
            w[W_IH] = ct_nn_new_param(m, param_name(W_IH, (int)l, d, name, sizeof name), CT_SHAPE(G, in), dtype);
            w[W_HH] = w[W_IH] ? ct_nn_new_param(m, param_name(W_HH, (int)l, d, name, sizeof name), CT_SHAPE(G, P),
                                                dtype)
                              : NULL;
            ok = w[W_HH] != NULL;
            if (ok && bias) {
                w[B_IH] = ct_nn_new_param(m, param_name(B_IH, (int)l, d, name, sizeof name), CT_SHAPE(G), dtype);
                w[B_HH] = w[B_IH] ? ct_nn_new_param(m, param_name(B_HH, (int)l, d, name, sizeof name), CT_SHAPE(G),
                                                    dtype)
                                  : NULL;
                ok = w[B_HH] != NULL;
            }
            if (ok && proj_size)
                ok = (w[W_HR] = ct_nn_new_param(m, param_name(W_HR, (int)l, d, name, sizeof name),
                                                CT_SHAPE(proj_size, hidden_size), dtype)) != NULL;
            for (int i = 0; i < 5 && ok; i++)
                if (w[i])
                    ok = ct_init_uniform_(w[i], -bound, bound) != NULL;
        }
    ct_scope_end();
    if (!ok) {
        ct_module_free(m);
        return NULL;
    }
    return m;
}

ct_module *ct_nn_rnn(int64_t input_size, int64_t hidden_size, int64_t num_layers, const char *nonlinearity, bool bias,
                     bool batch_first, double dropout, bool bidirectional, ct_dtype dtype) {
    rnn_kind kind;
    if (!nonlinearity || strcmp(nonlinearity, "tanh") == 0)
        kind = RNN_TANH;
    else if (strcmp(nonlinearity, "relu") == 0)
        kind = RNN_RELU;
    else {
        ct_error(CT_ERROR_VALUE, "RNN", "Unknown nonlinearity '%s'. Select from 'tanh' or 'relu'.", nonlinearity);
        return NULL;
    }
    return make_rnn(kind, input_size, hidden_size, num_layers, bias, batch_first, dropout, bidirectional, 0, dtype);
}

ct_module *ct_nn_lstm(int64_t input_size, int64_t hidden_size, int64_t num_layers, bool bias, bool batch_first,
                      double dropout, bool bidirectional, int64_t proj_size, ct_dtype dtype) {
    return make_rnn(RNN_LSTM, input_size, hidden_size, num_layers, bias, batch_first, dropout, bidirectional,
                    proj_size, dtype);
}

ct_module *ct_nn_gru(int64_t input_size, int64_t hidden_size, int64_t num_layers, bool bias, bool batch_first,
                     double dropout, bool bidirectional, ct_dtype dtype) {
    return make_rnn(RNN_GRU, input_size, hidden_size, num_layers, bias, batch_first, dropout, bidirectional, 0, dtype);
}
