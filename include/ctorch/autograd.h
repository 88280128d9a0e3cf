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
 * grads[0..ninputs) as new references (NULL for an unused input when allow_unused).
 * Leaves' .grad fields are not touched. grad_outputs may be NULL (all ones). */
CT_API ct_status ct_autograd_grad(const ct_tensor *const *outputs, int noutputs, const ct_tensor *const *inputs,
                                  int ninputs, const ct_tensor *const *grad_outputs, bool retain_graph,
                                  bool create_graph, bool allow_unused, ct_tensor **grads);

/* ------------------------------------------------------------ gradients */

/* A new reference to t's .grad, or NULL (no error) when it has none. */
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
