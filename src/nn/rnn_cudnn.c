/* The recurrent layers on cuDNN: one autograd node over the _cudnn_rnn op for the whole
 * stack of layers and directions.
 *
 * Note [Recurrent layers on cuDNN]
 * For CUDA inputs ct_lstm, ct_gru, ct_rnn_tanh and ct_rnn_relu run the whole stack as
 * one call of cuDNN's recurrence (PyTorch's choice too) where it applies: the CUDA
 * backend found libcudnn (Note [cuDNN at run time] in src/cuda/rnn_cudnn.c),
 * ct_backends_cudnn_enabled(), float32, float16 or bfloat16, no LSTM projections, no
 * dropout between layers while training (cuDNN's dropout draws from its own
 * generator, which would give other numbers than the default generator), autocast off,
 * no ct_compile capture and no CUDA graph capture (each call copies the sequence
 * lengths from the host). Elsewhere the layers run from ops (Note [Recurrent layers
 * from ops] in rnn.c). One H200, LSTM 512/512, 2 layers, seq 128, batch 32, float32
 * (bench/rnn): the ops path took 93.4 ms a training step and 23.0 ms a forward, PyTorch
 * with cuDNN 17.8 and 7.1 ms (docs/nn.md has this path's figures).
 * The node's backward calls _cudnn_rnn_backward; under create_graph it runs the layers
 * again from ops and differentiates those (cuDNN's backward is not differentiable), so
 * double backward works as on the CPU. Float32 uses TF32 only when
 * ct_set_float32_matmul_precision allows it. */
#include <stdlib.h>
#include <string.h>

#include "ctorch.h"
#include "ctorch/ext.h"
#include "nn/rnn_internal.h"

bool ct_rnn_cudnn_applies(const ct_tensor *input, bool proj, int num_layers, double dropout, bool train) {
    ct_dtype dt = ct_tensor_dtype(input);
    return !proj && ct_tensor_device(input).type == CT_DEVICE_CUDA &&
           (dt == CT_F32 || dt == CT_F16 || dt == CT_BF16) && !(train && dropout > 0 && num_layers > 1) &&
           !ct_autocast_is_enabled(CT_DEVICE_CUDA) && !ct_compile_is_capturing() &&
           !ct_cuda_is_current_stream_capturing() && ct_backends_cudnn_enabled() && ct_backends_cudnn_is_available();
}

typedef struct {
    int kind, nparams;
    int64_t H, L;
    bool bidirectional, batch_first, biases, train;
} cudnn_state;

/* cuDNN's numbering of the cells (RELU 0, TANH 1), from the layers' (TANH 0, RELU 1). */
static ct_cudnn_rnn_mode mode_of(int kind) {
    return kind == CT_RNN_TANH ? CT_CUDNN_RNN_TANH
           : kind == CT_RNN_RELU ? CT_CUDNN_RNN_RELU
           : kind == CT_RNN_LSTM ? CT_CUDNN_RNN_LSTM
                                 : CT_CUDNN_RNN_GRU;
}

/* Inputs of the node: x, h0, c0 (LSTM, else NULL), the parameters, and last the
 * lengths (or NULL). Saved: the inputs, then the flat weights, the output and the
 * reserve. */
enum { IN_X, IN_H0, IN_C0, IN_P };

static ct_tensor *flat_weights(ct_tensor *const *p, int n) {
    ct_tensor **v = ct_xmalloc("_cudnn_rnn", (size_t)n * sizeof *v);
    if (!v)
        return NULL;
    bool ok = true;
    for (int i = 0; i < n && ok; i++)
        ok = (v[i] = ct_reshape(p[i], CT_SHAPE(-1))) != NULL;
    ct_tensor *w = ok ? ct_cat((const ct_tensor *const *)v, n, 0) : NULL;
    free(v);
    return w;
}

static ct_status cd_forward(ct_autograd_ctx *ctx, ct_tensor *const *in, int nin, ct_tensor **out, int nout,
                            void *ud) {
    (void)nout;
    const cudnn_state *s0 = ud;
    cudnn_state *s = ct_xmalloc("_cudnn_rnn", sizeof *s);
    if (!s)
        return ct_last_status();
    *s = *s0;
    ct_autograd_ctx_set_state(ctx, s, free);
    ct_tensor *lengths = in[nin - 1]; /* the last input: lengths or NULL */
    ct_tensor *w = flat_weights(in + IN_P, s->nparams);
    ct_tensor *reserve = NULL;
    if (!w || ct_cudnn_rnn(in[IN_X], w, in[IN_H0], in[IN_C0], lengths, mode_of(s->kind), s->H, s->L,
                           s->bidirectional, s->batch_first, s->biases, s->train, &out[0], &out[1],
                           s->kind == CT_RNN_LSTM ? &out[2] : NULL, &reserve) != CT_OK)
        return ct_last_status();
    if (!s->train)
        return CT_OK;
    ct_tensor **save = ct_xmalloc("_cudnn_rnn", (size_t)(nin + 3) * sizeof *save);
    if (!save)
        return ct_last_status();
    for (int i = 0; i < nin; i++)
        save[i] = in[i];
    save[nin] = w, save[nin + 1] = out[0], save[nin + 2] = reserve;
    ct_status st = ct_autograd_ctx_save_for_backward(ctx, save, nin + 3);
    free(save);
    return st;
}

/* Under create_graph: the layers again from ops, differentiated with grad mode on
 * (the lengths, the last input, take no gradient). */
static int cd_backward_ops(ct_autograd_ctx *ctx, const cudnn_state *s, ct_tensor *const *in, int nin,
                           ct_tensor *const *gout, ct_tensor **gin) {
    const bool lstm = s->kind == CT_RNN_LSTM;
    ct_tensor *o[3] = {NULL, NULL, NULL};
    if (ct_rnn_stack_ops(s->kind, in[IN_X], in[IN_H0], in[IN_C0], in[nin - 1], in + IN_P, s->nparams, s->biases,
                         (int)s->L, s->bidirectional, s->batch_first, &o[0], &o[1], lstm ? &o[2] : NULL) != CT_OK)
        return -1;
    return ct_rnn_grads_through_ops(ctx, o, lstm ? 3 : 2, in, nin - 1, gout, gin) < 0 ? -1 : nin;
}

static int cd_backward(ct_autograd_ctx *ctx, ct_tensor *const *gout, int nout, ct_tensor **gin, int nin, void *ud) {
    (void)nout, (void)ud;
    const cudnn_state *s = ct_autograd_ctx_state(ctx);
    for (int i = 0; i < nin; i++)
        gin[i] = NULL;
    ct_tensor **in = ct_xmalloc("_cudnn_rnn", (size_t)nin * sizeof *in);
    if (!in)
        return -1;
    for (int i = 0; i < nin; i++)
        in[i] = ct_autograd_ctx_saved(ctx, i);
    ct_tensor *w = ct_autograd_ctx_saved(ctx, nin), *y = ct_autograd_ctx_saved(ctx, nin + 1);
    ct_tensor *reserve = ct_autograd_ctx_saved(ctx, nin + 2);
    int rc = nin;
    if (ct_is_grad_enabled()) {
        rc = cd_backward_ops(ctx, s, in, nin, gout, gin);
        free(in);
        return rc;
    }
    const bool lstm = s->kind == CT_RNN_LSTM;
    ct_tensor *dx = NULL, *dh = NULL, *dc = NULL, *dw = NULL;
    if (!w || !y || !reserve ||
        ct_cudnn_rnn_backward(in[IN_X], w, in[IN_H0], in[IN_C0], in[nin - 1], y, gout[0], gout[1],
                              lstm ? gout[2] : NULL, reserve, mode_of(s->kind), s->H, s->L,
                              s->bidirectional, s->batch_first, s->biases, &dx, &dh, lstm ? &dc : NULL,
                              &dw) != CT_OK) {
        free(in);
        return -1;
    }
    gin[IN_X] = dx, gin[IN_H0] = dh, gin[IN_C0] = dc;
    int64_t off = 0;
    for (int i = 0; i < s->nparams && rc >= 0; i++) {
        ct_tensor *p = in[IN_P + i];
        int64_t n = ct_tensor_numel(p);
        if (ct_autograd_ctx_needs_input_grad(ctx, IN_P + i) &&
            !(gin[IN_P + i] = ct_view(ct_narrow(dw, 0, off, n), ct_tensor_shape(p), ct_tensor_dim(p))))
            rc = -1;
        off += n;
    }
    free(in);
    return rc;
}

static const ct_autograd_function_def cudnn_def = {"CudnnRNN", cd_forward, cd_backward};

ct_status ct_rnn_cudnn(int kind, ct_tensor *x, ct_tensor *h0, ct_tensor *c0, const int64_t *lens,
                       ct_tensor *const *params, int nparams, bool has_biases, int num_layers, bool bidirectional,
                       bool batch_first, ct_tensor **output, ct_tensor **hn, ct_tensor **cn) {
    const int64_t B = ct_tensor_size(h0, 1);
    cudnn_state s = {.kind = kind,
                     .nparams = nparams,
                     .H = ct_tensor_size(h0, 2),
                     .L = num_layers,
                     .bidirectional = bidirectional,
                     .batch_first = batch_first,
                     .biases = has_biases};
    const int n = IN_P + nparams + 1;
    ct_tensor **in = ct_xcalloc("_cudnn_rnn", (size_t)n, sizeof *in);
    if (!in)
        return ct_last_status();
    in[IN_X] = x, in[IN_H0] = h0, in[IN_C0] = kind == CT_RNN_LSTM ? c0 : NULL;
    for (int i = 0; i < nparams; i++) {
        in[IN_P + i] = params[i];
        s.train = s.train || ct_tensor_requires_grad(params[i]);
    }
    /* train: a node will be recorded, so the forward keeps cuDNN's reserve */
    s.train = ct_is_grad_enabled() && (s.train || ct_tensor_requires_grad(x) || ct_tensor_requires_grad(h0) ||
                                       (in[IN_C0] && ct_tensor_requires_grad(c0)));
    ct_status st = CT_OK;
    if (lens && !(in[n - 1] = ct_from_data(lens, CT_SHAPE(B), CT_I64)))
        st = ct_last_status();
    ct_tensor *out[3] = {NULL, NULL, NULL};
    if (st == CT_OK)
        st = ct_autograd_function_apply(&cudnn_def, in, n, out, kind == CT_RNN_LSTM ? 3 : 2, &s);
    free(in);
    if (st != CT_OK)
        return st;
    *output = out[0], *hn = out[1];
    if (cn)
        *cn = out[2];
    return CT_OK;
}
