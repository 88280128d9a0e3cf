/* ctorch autograd: reverse-mode differentiation over the op table.
 *
 *   ct_tensor_set_requires_grad(w, true);
 *   ct_tensor *loss = ...;                       // ops record a graph
 *   ct_backward(loss, NULL, false, false);       // fills w's .grad
 *   ct_tensor *g = ct_tensor_grad(w);
 *
 * Backward formulas are written with ctorch ops, so with create_graph the backward
 * pass is itself recorded and can be differentiated again (docs/autograd.md). */
#ifndef CTORCH_AUTOGRAD_H
#define CTORCH_AUTOGRAD_H

#include "core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------ running backward */

/* Accumulates d(output)/d(leaf) into every leaf's .grad. grad_output may be NULL only
 * for a one-element output (it is then 1). */
CT_API ct_status ct_backward(const ct_tensor *output, const ct_tensor *grad_output, bool retain_graph,
                             bool create_graph);
/* torch.autograd.grad: the gradients of outputs with respect to inputs, written to
 * grads[0..ninputs) as new references owned by the innermost scope, as op results are
 * (NULL for an unused input when allow_unused).
 * Leaves' .grad fields are not touched. grad_outputs may be NULL (all ones). */
CT_API ct_status ct_autograd_grad(const ct_tensor *const *outputs, int noutputs, const ct_tensor *const *inputs,
                                  int ninputs, const ct_tensor *const *grad_outputs, bool retain_graph,
                                  bool create_graph, bool allow_unused, ct_tensor **grads);

/* ------------------------------------------------------------ gradients */

/* t's .grad as a new reference registered with the innermost scope (as an op's result:
 * not released by the caller inside a scope), or NULL (no error) when it has none. */
CT_API ct_tensor *ct_tensor_grad(const ct_tensor *t);
/* Replaces t's .grad (NULL clears it, as zero_grad(set_to_none=True)). */
CT_API ct_status ct_tensor_set_grad(ct_tensor *t, const ct_tensor *grad);
/* True for tensors that autograd does not record (requires_grad off or created by a
 * user) and for tensors that require grad but were not made by a recorded op. */
CT_API bool ct_tensor_is_leaf(const ct_tensor *t);
/* The name of the node that made t ("MulBackward0"), or NULL for leaves. */
CT_API const char *ct_tensor_grad_fn_name(const ct_tensor *t);
/* Keep .grad on a non-leaf tensor during backward (retain_grad). */
CT_API ct_status ct_tensor_retain_grad(ct_tensor *t);

/* A tensor sharing t's data that autograd does not track. */
CT_API ct_tensor *ct_detach(const ct_tensor *t);
/* Detaches t in place (t becomes a leaf). Returns a new reference to t. */
CT_API ct_tensor *ct_detach_(ct_tensor *t);

/* ------------------------------------------------------------ grad modes */

/* Thread-local; each returns the previous setting, so a block reads
 *   bool prev = ct_set_grad_enabled(false); ...; ct_set_grad_enabled(prev); */
CT_API bool ct_set_grad_enabled(bool enabled);
CT_API bool ct_is_grad_enabled(void);
/* Inference mode: no graph and no version counting; tensors made inside can never
 * enter autograd later. Nestable. */
CT_API void ct_inference_mode_begin(void);
CT_API void ct_inference_mode_end(void);
CT_API bool ct_is_inference_mode_enabled(void);
/* Anomaly mode: a NaN or infinity produced in backward is an error naming the forward
 * op that created the node. Process-wide. */
CT_API void ct_set_anomaly_enabled(bool enabled);

/* ------------------------------------------------------------ hooks */

/* Called with the gradient flowing into t; may return a replacement (a new
 * reference) or NULL to keep it. */
typedef ct_tensor *(*ct_grad_hook_fn)(const ct_tensor *grad, void *user_data);
CT_API int64_t ct_tensor_register_hook(ct_tensor *t, ct_grad_hook_fn fn, void *user_data);
/* Called on a leaf after its .grad has been accumulated (DDP, optimizer in backward). */
typedef void (*ct_post_accumulate_hook_fn)(ct_tensor *leaf, void *user_data);
CT_API int64_t ct_tensor_register_post_accumulate_grad_hook(ct_tensor *t, ct_post_accumulate_hook_fn fn,
                                                            void *user_data);
CT_API ct_status ct_remove_hook(int64_t handle);

/* ------------------------------------------------------------ custom functions */

/* torch.autograd.Function from C callbacks (docs/autograd.md, "Custom functions").
 *
 *   static ct_status exp_fwd(ct_autograd_ctx *ctx, ct_tensor *const *in, int nin, ct_tensor **out,
 *                            int nout, void *ud) {
 *       out[0] = ct_exp(in[0]);                      // runs without recording
 *       return ct_autograd_ctx_save_for_backward(ctx, out, 1);
 *   }
 *   static int exp_bwd(ct_autograd_ctx *ctx, ct_tensor *const *gout, int nout, ct_tensor **gin, int nin,
 *                      void *ud) {
 *       gin[0] = ct_mul(gout[0], ct_autograd_ctx_saved(ctx, 0));
 *       return 1;                                    // the number of gradients written
 *   }
 *   static const ct_autograd_function_def MyExp = {"MyExp", exp_fwd, exp_bwd};
 *   ct_autograd_function_apply(&MyExp, &x, 1, &y, 1, NULL);   // y's grad_fn: "MyExpBackward"
 */
typedef struct ct_autograd_ctx ct_autograd_ctx;

/* Writes outputs[0..noutputs): tensors made by ops (owned as every op's result is),
 * an input returned as it is becomes an alias of it. Runs with grad mode off. */
typedef ct_status (*ct_autograd_forward_fn)(ct_autograd_ctx *ctx, ct_tensor *const *inputs, int ninputs,
                                            ct_tensor **outputs, int noutputs, void *user_data);
/* grad_outputs[k]: the gradient of output k (NULL when none reached it and
 * materialize_grads was turned off). Writes grad_inputs[0..ninputs) (NULL for none;
 * tensors made by ops, or a grad_outputs entry itself) and returns how many it wrote
 * (ninputs), or a negative number after a ct_error. Runs with grad mode on under
 * create_graph, so a backward written with ops can be differentiated again. */
typedef int (*ct_autograd_backward_fn)(ct_autograd_ctx *ctx, ct_tensor *const *grad_outputs, int noutputs,
                                       ct_tensor **grad_inputs, int ninputs, void *user_data);

typedef struct ct_autograd_function_def {
    const char *name; /* the outputs' grad_fn is "<name>Backward" */
    ct_autograd_forward_fn forward;
    ct_autograd_backward_fn backward;
} ct_autograd_function_def;

/* Runs def->forward on inputs (entries may be NULL) and, when grad mode is on and an
 * input requires grad, records one node for it. user_data is passed to both callbacks
 * and must live as long as the graph. At most 8 outputs. */
CT_API ct_status ct_autograd_function_apply(const ct_autograd_function_def *def, ct_tensor *const *inputs,
                                            int ninputs, ct_tensor **outputs, int noutputs, void *user_data);

/* In forward: the tensors backward needs (inputs, outputs or others; NULL entries
 * allowed). A later call replaces the earlier list. Saved tensors are freed with the
 * graph, or after a backward without retain_graph. */
CT_API ct_status ct_autograd_ctx_save_for_backward(ct_autograd_ctx *ctx, ct_tensor *const *tensors, int n);
/* In backward: saved tensor i (owned by the current scope), checked against in-place
 * modification and use after free; NULL with an error then, NULL without one for a
 * saved NULL. */
CT_API ct_tensor *ct_autograd_ctx_saved(ct_autograd_ctx *ctx, int i);
CT_API int ct_autograd_ctx_saved_count(const ct_autograd_ctx *ctx);
/* Whether input i requires a gradient (fixed when forward ran). */
CT_API bool ct_autograd_ctx_needs_input_grad(const ct_autograd_ctx *ctx, int i);
/* In forward: output (a tensor forward writes to outputs) gets no gradient and does
 * not require grad. */
CT_API ct_status ct_autograd_ctx_mark_non_differentiable(ct_autograd_ctx *ctx, const ct_tensor *output);
/* Whether missing output gradients reach backward as zeros (the default) or NULL. */
CT_API void ct_autograd_ctx_set_materialize_grads(ct_autograd_ctx *ctx, bool value);
/* Non-tensor state for backward (ctx.attr = ...); free_fn (may be NULL) runs when the
 * context dies or the state is replaced. */
CT_API void ct_autograd_ctx_set_state(ct_autograd_ctx *ctx, void *state, void (*free_fn)(void *));
CT_API void *ct_autograd_ctx_state(const ct_autograd_ctx *ctx);

/* ------------------------------------------------------------ checkpointing */

/* A function of tensors for ct_checkpoint: writes outputs[0..noutputs) as ops return
 * them. It runs twice (forward, then again in backward), so it must compute the same
 * thing both times; random draws repeat because the generator's state is restored. */
typedef ct_status (*ct_checkpoint_fn)(ct_tensor *const *inputs, int ninputs, ct_tensor **outputs, int noutputs,
                                      void *user_data);
/* torch.utils.checkpoint.checkpoint (use_reentrant=False): runs fn without keeping
 * the tensors its backward would need, and recomputes it in backward with the
 * default generator's forward state restored. Gradients reach everything fn uses
 * (inputs and tensors it reaches through user_data), with ct_backward and
 * ct_autograd_grad, and under create_graph. outputs are owned like an op's result. */
CT_API ct_status ct_checkpoint(ct_checkpoint_fn fn, ct_tensor *const *inputs, int ninputs, ct_tensor **outputs,
                               int noutputs, void *user_data);

/* ------------------------------------------------------------ checking */

/* A differentiable function of several tensors returning one tensor. */
typedef ct_tensor *(*ct_grad_fn_t)(ct_tensor *const *inputs, int n, void *user_data);

/* Compares analytical gradients with central finite differences (inputs must be
 * float64). Returns CT_OK, or an error describing the first mismatch. */
CT_API ct_status ct_gradcheck(ct_grad_fn_t fn, void *user_data, ct_tensor *const *inputs, int n, double eps,
                              double atol, double rtol);
/* The same for second derivatives (backward of backward). */
CT_API ct_status ct_gradgradcheck(ct_grad_fn_t fn, void *user_data, ct_tensor *const *inputs, int n, double eps,
                                  double atol, double rtol);

#ifdef __cplusplus
}
#endif
#endif /* CTORCH_AUTOGRAD_H */
