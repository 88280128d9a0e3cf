/* Autograd internals: graph nodes, per-tensor autograd data, the derivative table. */
#ifndef CT_AUTOGRAD_NODE_H
#define CT_AUTOGRAD_NODE_H

#include <pthread.h>

#include "ctorch.h" /* derivative formulas are written with the public ops */
#include "dispatch/call.h"

typedef struct ct_node ct_node;

/* Where a gradient goes: input input_nr of fn (a strong reference), or nowhere. */
typedef struct ct_edge {
    ct_node *fn;
    int input_nr;
} ct_edge;

/* Note [Saved tensors]
 * A node keeps the tensors its formula needs and the version each had when saved. A
 * saved output of the node itself would make a cycle (tensor -> node -> tensor), so
 * outputs are kept as aliases without history and get the node back as their grad_fn
 * when unpacked for the formula (which matters for double backward). */
typedef struct ct_saved {
    ct_tensor *t;      /* strong; NULL when not saved or freed */
    int64_t version;   /* storage version at save time */
    bool is_output;    /* an output of the saving node */
    int output_nr;     /* which output, when is_output */
    bool requires_grad;
    const char *producer; /* grad_fn name of the saved tensor at save time (for errors) */
    int producer_nr;
} ct_saved;

/* What a backward function sees: the node's saved state and the incoming gradients,
 * one per forward output (NULL means zero). It writes one gradient per forward input
 * (NULL for none) as references owned by the current scope. */
typedef struct ct_node_ctx ct_node_ctx;
typedef ct_status (*ct_backward_fn)(ct_node_ctx *ctx, ct_tensor *const *grad_out, ct_tensor **grad_in);

/* Shape/dtype of each forward input, for checking and reducing gradients, and its
 * layout over its storage (for views). */
typedef struct ct_input_meta {
    int ndim;
    ct_dtype dtype;
    ct_device device;
    int64_t shape[CT_MAX_DIMS];
    int64_t strides[CT_MAX_DIMS];
    int64_t offset;
} ct_input_meta;

typedef struct ct_hook ct_hook;
typedef struct ct_autograd_ctx ct_autograd_ctx; /* custom functions (custom.c) */

typedef enum ct_node_kind {
    CT_NODE_OP,         /* made by the AUTOGRAD kernel from an op-table call */
    CT_NODE_ACCUMULATE, /* writes into a leaf's .grad */
    CT_NODE_INTERNAL,   /* a helper with its own backward (sum_to_size, expand, ...) */
} ct_node_kind;

#define CT_NODE_MAX_IN CT_CALL_MAX_IN
/* Outputs of one node: an op's (CT_CALL_MAX_OUT) or a custom function's. */
#define CT_NODE_MAX_OUT 8
_Static_assert(CT_NODE_MAX_OUT >= CT_CALL_MAX_OUT, "a node holds every output of an op");
/* Saved slots: the inputs, then output 1 (an index output), output 0, output 2. */
#define CT_NODE_MAX_SAVED (CT_CALL_MAX_IN + 3)
#define CT_SAVED_OUT1 CT_CALL_MAX_IN
#define CT_SAVED_OUT0 (CT_CALL_MAX_IN + 1)
#define CT_SAVED_OUT2 (CT_CALL_MAX_IN + 2)

struct ct_node {
    atomic_int refcount;
    ct_node_kind kind;
    ct_op op;             /* CT_NODE_OP: the forward op */
    char name[48];        /* "MulBackward0" */
    ct_backward_fn backward;
    int nin;              /* forward inputs (then list inputs) = edges */
    ct_edge *edges;       /* nin of each, allocated with the node */
    ct_input_meta *in_meta;
    ct_input_meta out_meta; /* output 0 (view ops map gradients between the two layouts) */
    int nout;             /* forward outputs = gradients this node receives */
    ct_saved saved[CT_NODE_MAX_SAVED];
    bool saved_freed;     /* saved tensors were released after a backward */
    /* Copies of the forward call's non-tensor arguments. */
    int nscalars, nints;
    ct_scalar s[CT_CALL_MAX_SCALARS];
    int64_t ints[CT_CALL_MAX_INTS];
    ct_dtype dtype;
    bool inplace;
    /* CT_NODE_ACCUMULATE: the leaf (strong). */
    ct_tensor *leaf;
    /* Hooks on the node's outputs (tensor hooks on non-leaf tensors), and tensors that
     * retain their gradient (weak: cleared when the tensor dies). Guarded by
     * ct_autograd_lock. */
    ct_hook *hooks;
    ct_tensor *retain[CT_NODE_MAX_OUT];
    ct_node *next_free; /* Note [Freeing graphs] */
    ct_node *wrapped;   /* CopySlices: the in-place op's node (strong) */
    /* CT_SAVE_LIST: the call's tensor list (index tensors; entries may be NULL). */
    ct_tensor **saved_list;
    int nsaved_list;
    /* Custom functions and checkpoints (custom.c): their context (owned). */
    ct_autograd_ctx *custom;
    /* The checkpoint forward that recorded this node (Note [Checkpoint]), or 0. */
    uint64_t tag;
};

struct ct_node_ctx {
    ct_node *node;
    bool create_graph;
    bool keep_graph; /* the saved tensors outlive this run (retain_graph or create_graph) */
};

/* Per-tensor autograd data, kept in ct_tensor.grad_fn (released with the tensor). */
typedef struct ct_ag_meta {
    ct_tensor *owner;      /* weak */
    ct_node *grad_fn;      /* strong or NULL */
    ct_node *accumulator;  /* weak; the leaf's accumulate node while one exists */
    ct_hook *hooks;        /* on leaves: tensor hooks and post-accumulate hooks */
    bool retains_grad;
} ct_ag_meta;

typedef enum { CT_HOOK_GRAD, CT_HOOK_POST_ACCUMULATE } ct_hook_type;

struct ct_hook {
    int64_t handle;
    ct_hook_type type;
    int output_nr; /* for hooks on nodes */
    ct_grad_hook_fn fn;
    ct_post_accumulate_hook_fn post_fn;
    void *user_data;
    bool removed;
    ct_hook *next;
};

/* One lock for the weak links (accumulators, retain_grad, hooks lists). */
extern pthread_mutex_t ct_autograd_lock;

/* ------------------------------------------------------------ nodes (node.c) */

/* A node with nin edges (all empty). */
ct_node *ct_node_new(ct_node_kind kind, const char *name, int nin);
void ct_node_ref(ct_node *n);
void ct_node_unref(ct_node *n);
/* The tensor's autograd data, created on demand (NULL only when out of memory). */
ct_ag_meta *ct_ag_meta_get(ct_tensor *t);
/* The tensor's autograd data if it has any. */
ct_ag_meta *ct_ag_meta_peek(const ct_tensor *t);
/* t's grad_fn (borrowed) or NULL. */
ct_node *ct_tensor_node(const ct_tensor *t);
/* The edge a gradient for t goes to: its grad_fn, or its leaf accumulator (created on
 * demand) when it requires grad; {NULL} when it does not. */
ct_status ct_edge_for(const ct_tensor *t, ct_edge *e);
/* Makes t an output of n: sets grad_fn (taking a reference), output_nr, requires_grad. */
ct_status ct_set_history(ct_tensor *t, ct_node *n, int output_nr);
/* Saves t into slot i of n (is_output: t is n's own output 0). */
ct_status ct_node_save(ct_node *n, int i, const ct_tensor *t, bool is_output, int64_t version);
/* Saves t into s for node n (output_nr >= 0: t is n's output output_nr). */
ct_status ct_saved_set(ct_node *n, ct_saved *s, const ct_tensor *t, int output_nr, int64_t version);
/* The tensor saved in s, as ct_node_saved does it. */
ct_tensor *ct_saved_unpack(ct_node *n, ct_saved *s, bool create_graph);
/* The saved tensor i for a formula, checking its version; NULL (no error) when the
 * slot is empty, NULL with an error when it was freed or modified. */
ct_tensor *ct_node_saved(ct_node_ctx *ctx, int i);
/* Whether the formula may write its result into the memory of saved input i (Note
 * [Reusing a saved input's memory]); `held`: the references to the saved tensor that
 * the formula holds itself (1 after ct_node_saved). */
bool ct_node_saved_reusable(const ct_node_ctx *ctx, int i, int held);
void ct_node_free_saved(ct_node *n);
/* Whether `from` holds `target` through strong references (itself, its base, .grad,
 * history, saved tensors, accumulators; Note [Gradients that hold their tensor]): 1 or
 * 0, or -1 with an error when out of memory. */
int ct_ag_holds(const ct_tensor *from, const ct_tensor *target);
/* Records that g was stored as a .grad (Note [Gradients that hold their tensor]). */
void ct_ag_note_grad(const ct_tensor *g);
/* After an in-place op gave x the node n: stores detached every .grad that n's graph
 * reaches and that holds x (the same Note). */
ct_status ct_ag_break_grad_cycles(ct_node *n, const ct_tensor *x);
void ct_input_meta_set(ct_input_meta *m, const ct_tensor *t);

/* ------------------------------------------------------------ custom functions (custom.c) */

void ct_custom_free(ct_autograd_ctx *c);
void ct_custom_free_saved(ct_autograd_ctx *c);
/* Note [Checkpoint]: inside a checkpointed forward, nodes are recorded with the
 * forward's tag and save nothing. */
uint64_t ct_checkpoint_tag(void);
bool ct_checkpoint_discards_saves(void);

/* ------------------------------------------------------------ engine (engine.c) */

/* The gradients arriving at the edges caps[0..ncaps) from outputs (grad_outputs, one
 * per output), without running the nodes of caps or anything behind them; grads[i]
 * is scope-owned or NULL when nothing arrived. */
ct_status ct_engine_grad_at_edges(const ct_tensor *const *outputs, int noutputs, const ct_tensor *const *grad_outputs,
                                  const ct_edge *caps, int ncaps, bool create_graph, ct_tensor **grads);

/* ------------------------------------------------------------ hooks (hooks.c) */

/* Takes a dying hook out of the handle registry. */
void ct_hook_unregister(ct_hook *h);
/* Runs the gradient hooks for output_nr in order; returns the replacement gradient
 * (scope-owned) when a hook replaced it, NULL otherwise or on error (error set). */
ct_tensor *ct_hooks_run_grad(ct_hook *list, int output_nr, ct_tensor *grad);
void ct_hooks_run_post(ct_hook *list, ct_tensor *leaf);

/* ------------------------------------------------------------ modes (grad_mode.c) */

bool ct_anomaly_enabled(void);

/* ------------------------------------------------------------ derivatives (derivatives.c) */

typedef struct ct_derivative {
    ct_backward_fn fn;
    uint32_t saves; /* CT_SAVE_* bits */
} ct_derivative;

enum {
    CT_SAVE_IN0 = 1u << 0,
    CT_SAVE_IN1 = 1u << 1,
    CT_SAVE_IN2 = 1u << 2,
    CT_SAVE_IN3 = 1u << 3,
    CT_SAVE_OUT = 1u << 4,  /* output 0, kept without history (Note [Saved tensors]) */
    CT_SAVE_OUT1 = 1u << 5, /* output 1 (indices of sort, topk, max_pool2d) */
    CT_SAVE_LIST = 1u << 6, /* the tensor list (advanced indexing's indices) */
    CT_SAVE_OUT2 = 1u << 7, /* output 2 when set (flash attention's dropout_mask) */
};

/* The derivative of op, or NULL for ops that have none (non-differentiable). */
const ct_derivative *ct_derivative_of(ct_op op);
/* Differentiable ops: not marked CT_OPF_NONDIFF, not comparisons, not composites. */
bool ct_op_is_differentiable(ct_op op);

/* g summed over the dims broadcasting added or stretched, down to shape (with ct_sum,
 * so differentiable). */
ct_tensor *ct_ag_sum_to(const ct_tensor *g, const int64_t *shape, int ndim);
/* Note [View gradients]: x laid out as `from` over a storage, rearranged into the
 * layout `to` over the same storage (elements at the same address correspond; several
 * elements of x at one address are summed, addresses x does not cover are zero). */
ct_tensor *ct_ag_regeom(const ct_tensor *x, const ct_input_meta *from, const ct_input_meta *to);

/* Note [In-place ops on views]: after an in-place op recorded node n on view, the
 * view's base takes a CopySlices node wrapping n and the view becomes a view of the
 * base's new history. */
ct_status ct_rebase_view(ct_tensor *view, ct_node *n);

/* ------------------------------------------------------------ kernel (function.c) */

/* Registers the AUTOGRAD kernel for every op of the table. */
void ct_autograd_register_kernels(void);

#endif /* CT_AUTOGRAD_NODE_H */
