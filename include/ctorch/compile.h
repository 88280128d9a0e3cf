/* ctorch compiler: capture a function of tensors once, replay it after (docs/compile.md).
 *
 *   static ct_tensor *step(ct_tensor *const *in, int n, void *ud) { ... return loss; }
 *
 *   ct_compiled *c = ct_compile(step, model, 0);
 *   for (...) {
 *       ct_scope_begin();
 *       ct_tensor *loss = ct_compiled_call(c, batch, 2);   // call 1 eager, 2 captures, then replays
 *       ct_scope_end();
 *   }
 *   ct_compiled_free(c);
 *
 * The second call runs the function with the dispatcher's TRACE key on and records every
 * outermost op call (the forward, the backward's formulas when the function calls
 * ct_backward, in-place updates) into a graph of SSA values; later calls whose guard key
 * matches (inputs' dtype, device, sizes, strides, requires_grad; grad mode, autocast,
 * default dtype, the dispatcher's override generation) run the graph instead of the
 * function: chains of pointwise ops as generated C, every other op with its kernel. */
#ifndef CTORCH_COMPILE_H
#define CTORCH_COMPILE_H

#include "core.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ct_compiled ct_compiled;

/* The function compiled (the shape of ct_grad_fn_t): returns its result, owned by the
 * innermost scope, or NULL with the error set. */
typedef ct_tensor *(*ct_compile_fn)(ct_tensor *const *inputs, int ninputs, void *user_data);

enum {
    /* What cannot be captured (ct_item, printing, data-dependent shapes, an optimizer
     * step) runs the function eagerly for that guard key instead of failing. */
    CT_COMPILE_EAGER_FALLBACK = 1u << 0,
    /* No generated code: every node of the graph runs its kernel. */
    CT_COMPILE_NO_CODEGEN = 1u << 1,
    /* Keep every node: no dead-code elimination or common subexpressions. */
    CT_COMPILE_NO_PASSES = 1u << 2,
};

/* NULL with the error set when fn is NULL or flags has unknown bits. */
CT_API ct_compiled *ct_compile(ct_compile_fn fn, void *user_data, uint32_t flags);
/* Runs the function (eagerly, capturing, or replaying; see above). */
CT_API ct_tensor *ct_compiled_call(ct_compiled *c, ct_tensor *const *inputs, int ninputs);
CT_API void ct_compiled_free(ct_compiled *c);

/* The graph of the entry the last call used, as text (one line per node), snprintf-style:
 * at most cap bytes, NUL-terminated; returns the full length, -1 with the error set when
 * nothing was captured yet. */
CT_API int64_t ct_compiled_print(const ct_compiled *c, char *buf, size_t cap);

typedef enum ct_compile_stat {
    CT_COMPILE_STAT_CALLS = 0,       /* calls of ct_compiled_call */
    CT_COMPILE_STAT_EAGER,           /* calls that ran the function eagerly (warm-up, fallback) */
    CT_COMPILE_STAT_CAPTURES,        /* calls that captured a graph */
    CT_COMPILE_STAT_REPLAYS,         /* calls that ran a captured graph */
    CT_COMPILE_STAT_ENTRIES,         /* guard entries (at most 8) */
    CT_COMPILE_STAT_NODES,           /* nodes of the last call's graph, after the passes */
    CT_COMPILE_STAT_CAPTURED_NODES,  /* nodes recorded by its capture, before the passes */
    CT_COMPILE_STAT_FUSED_GROUPS,    /* its groups of nodes running as generated code */
    CT_COMPILE_STAT_FUSED_NODES,     /* the nodes inside those groups */
    CT_COMPILE_STAT_CACHE_HITS,      /* generated objects found in the disk cache */
    CT_COMPILE_STAT_CACHE_MISSES,    /* generated objects built by the C compiler */
    CT_COMPILE_STAT_COMPILE_US,      /* microseconds its last capture spent after the function ran */
} ct_compile_stat;
/* -1 with the error set for a NULL c or an unknown stat. */
CT_API int64_t ct_compiled_stat(const ct_compiled *c, ct_compile_stat which);

/* True while this thread captures a function (what host-side code that cannot be
 * captured checks, to refuse with an error naming itself). */
CT_API bool ct_compile_is_capturing(void);
/* Called by code that cannot be captured (it reads or writes tensors on the host):
 * outside a capture it returns CT_OK; inside one it fails the capture with an error
 * naming op and why (or, with CT_COMPILE_EAGER_FALLBACK, marks the function eager). */
CT_API ct_status ct_compile_refuse(const char *op, const char *why);

/* Host calls (docs/compile.md, "Optimizer steps and gradient clipping"): code that
 * keeps state on the host but can simply be run again on each replay (an optimizer
 * step, gradient clipping) runs through ct_compile_host_call. Outside a capture it
 * calls fn(ctx, result). Under a capture it calls fn with the capture off (its op
 * calls are not recorded) and records one node that calls fn again, with a copy of
 * the ctx_size bytes at ctx, on every replay; before each such call the gradients the
 * graph made so far are written into their leaves' .grad. ctx must hold what the call
 * needs by value (a tensor list as a flexible array member, not a pointer into the
 * caller's stack); what it points to (an optimizer, parameters) must outlive the
 * compiled function. result, when not NULL, gets fn's tensor result (owned by the
 * innermost scope; the node's result on a replay), or NULL. name names the node. An
 * error of fn is returned (and fails the capture); NULL fn, or NULL ctx with a
 * nonzero ctx_size, is an error. */
typedef ct_status (*ct_compile_host_fn)(void *ctx, ct_tensor **result);
CT_API ct_status ct_compile_host_call(const char *name, ct_compile_host_fn fn, const void *ctx, size_t ctx_size,
                                      ct_tensor **result);
/* Called by a host call that sets the .grad of ts[0..n) to None (zero_grad): a leaf the
 * capture first sees after it needs no gradient guard, since the function drops
 * whatever .grad it had on entry. Does nothing outside a capture (or for NULL ts). */
CT_API void ct_compile_note_grads_reset(ct_tensor *const *ts, int n);

#ifdef __cplusplus
}
#endif
#endif /* CTORCH_COMPILE_H */
