/* Between the recurrent layers (src/nn/rnn.c) and their fused CPU recurrence
 * (src/nn/rnn_fused.c, Note [Fused recurrence]). */
#ifndef CT_NN_RNN_INTERNAL_H
#define CT_NN_RNN_INTERNAL_H

#include "ctorch.h"

enum { CT_RNN_TANH = 0, CT_RNN_RELU, CT_RNN_LSTM, CT_RNN_GRU };

/* Whether the fused recurrence runs a call on input: CPU, float32 or float64, no LSTM
 * projections, autocast off, no ct_compile capture. */
bool ct_rnn_fused_applies(const ct_tensor *input, bool proj);
/* One layer and direction as one node (Note [Fused recurrence]): x (T * B, I) the
 * layer's input rows, time-major (tdim 0) or batch-major (tdim 1); W_ih (G, I); b (G)
 * the bias of the projection (b_ih + b_hh; b_ih alone for the GRU, whose b_hh comes as
 * bhh) or NULL; W_hh (G, H); h0 and c0 (LSTM) (B, H); mask (T, B) or NULL: step t is
 * past sequence b's length. Writes every step's h (T, B, H) and, LSTM, every step's c
 * to *call. */
ct_status ct_rnn_fused(int kind, bool reverse, const bool *mask, int tdim, ct_tensor *x, ct_tensor *wih, ct_tensor *b,
                       ct_tensor *whh, ct_tensor *bhh, ct_tensor *h0, ct_tensor *c0, ct_tensor **hall,
                       ct_tensor **call);

/* The input projection of every step of one layer and direction, (T, B, G): x (T * B,
 * I) @ W_ih^T + b (b may be NULL), a view of batch-major rows when tdim is 1. */
ct_tensor *ct_rnn_projection(ct_tensor *x, ct_tensor *wih, ct_tensor *b, int64_t T, int64_t B, int tdim);

/* The same recurrence from ops, step by step (Note [Recurrent layers from ops] in
 * rnn.c), on any device and dtype: xp (T, B, G) the input projection with its bias;
 * whr (P, H) the LSTM's projection or NULL (h then has P columns). Results are owned
 * by the caller's scope. */
ct_status ct_rnn_recurrence_ops(int kind, bool reverse, const bool *mask, ct_tensor *xp, ct_tensor *whh,
                                ct_tensor *bhh, ct_tensor *whr, ct_tensor *h0, ct_tensor *c0, ct_tensor **hall,
                                ct_tensor **call);

/* For a node's backward under create_graph, from outputs recomputed with ops: the
 * gradients gout of outs (nouts) with respect to each input in[i] (i < nin) that needs
 * one, into gin[i] (the others keep their value). nin, or -1 after an error. */
int ct_rnn_grads_through_ops(ct_autograd_ctx *ctx, ct_tensor *const *outs, int nouts, ct_tensor *const *in, int nin,
                             ct_tensor *const *gout, ct_tensor **gin);

/* Note [Recurrent layers on cuDNN] (rnn_cudnn.c): whether a call on input runs the
 * whole stack on cuDNN, and the call: x (T, B, I) or batch-first, h0 and c0 (LSTM)
 * (L * D, B, hidden) given, lens NULL or B lengths (copied). */
bool ct_rnn_cudnn_applies(const ct_tensor *input, bool proj, int num_layers, double dropout, bool train);
ct_status ct_rnn_cudnn(int kind, ct_tensor *x, ct_tensor *h0, ct_tensor *c0, const int64_t *lens,
                       ct_tensor *const *params, int nparams, bool has_biases, int num_layers, bool bidirectional,
                       bool batch_first, ct_tensor **output, ct_tensor **hn, ct_tensor **cn);
/* The layers from ops alone, never cuDNN, without dropout (rnn.c): ct_lstm's arguments
 * with a batched input; for the cuDNN node's backward under create_graph. */
ct_status ct_rnn_stack_ops(int kind, const ct_tensor *input, const ct_tensor *h0, const ct_tensor *c0,
                           const ct_tensor *lengths, ct_tensor *const *params, int nparams, bool has_biases,
                           int num_layers, bool bidirectional, bool batch_first, ct_tensor **output, ct_tensor **hn,
                           ct_tensor **cn);

#endif
