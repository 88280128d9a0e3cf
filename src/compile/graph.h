/* The compiler's graph: SSA values and the op calls that made them (docs/compile.md). */
#ifndef CT_COMPILE_GRAPH_H
#define CT_COMPILE_GRAPH_H

#include <stddef.h>
#include <stdint.h>

#include "ctorch/compile.h"
#include "dispatch/call.h"

/* Note [Graph values]
 * A value is one tensor as the capture saw it at one point of the function: a graph
 * input (the i-th argument of the call), a constant (a tensor the function reached
 * that no recorded op made: a parameter, an optimizer state, a gradient made before
 * the call; held by reference and used by identity, so in-place updates of it are
 * seen by the next call), or the output of a node. An in-place or out= node makes a
 * new value for the tensor it writes (SSA), whose run-time tensor is the written one
 * (target). Each value keeps the metadata the capture saw (dtype, device, sizes,
 * strides, storage offset) and, for the passes, its storage's identity at capture. */
typedef enum ct_gvalue_kind {
    CT_GV_INPUT = 0,
    CT_GV_CONST,
    CT_GV_NODE,
} ct_gvalue_kind;

typedef struct ct_gvalue {
    ct_gvalue_kind kind;
    int input;           /* CT_GV_INPUT: the argument's index */
    ct_tensor *constant; /* CT_GV_CONST: a reference */
    int node, out;       /* CT_GV_NODE: producer and its output index */
    uintptr_t storage;   /* the storage's identity at capture (passes compare them) */
    ct_dtype dtype;
    ct_device device;
    int ndim;
    bool requires_grad;
    int64_t offset;
    int64_t shape[CT_MAX_DIMS];
    int64_t strides[CT_MAX_DIMS];
    /* filled by ct_graph_analyse */
    int uses;     /* readers among the live nodes, plus one for the result or an epilogue */
    int last_use; /* the last live node that reads it; -1 for none */
} ct_gvalue;

/* Note [Host calls]
 * Library code whose state lives on the host (an optimizer's step count and learning
 * rate, gradient clipping's loops over .grad) is recorded as one node that calls the
 * code itself when the graph replays, instead of the ops it made at capture: a replay
 * reads the learning rate and counts the step as an eager call does. The node keeps a
 * copy of the call's context (ctorch/compile.h). Before the call, the gradients the
 * capture had stored by then are written to their leaves' .grad (the node's list holds
 * {leaf, gradient} value pairs), since the code reads .grad. The node writes, for the
 * passes, into the storage of every constant and of every value of its list. */
typedef struct ct_host_node {
    const char *name;
    ct_compile_host_fn fn;
    size_t size;
    _Alignas(max_align_t) unsigned char ctx[];
} ct_host_node;

typedef struct ct_gnode {
    ct_op op;
    ct_host_node *host; /* Note [Host calls]: not an op call; NULL for op calls */
    ct_call_mode mode;
    bool dead;
    int nin;
    int in[CT_CALL_MAX_IN]; /* value ids, -1 for an absent optional input */
    int nlist;
    int *list;
    int nscalars;
    ct_scalar s[CT_CALL_MAX_SCALARS];
    int nints;
    int64_t ints[CT_CALL_MAX_INTS];
    ct_dtype dtype;
    ct_device device;
    bool has_device;
    int nout;
    int out[CT_CALL_MAX_OUT];    /* value ids, -1 for an unset optional result */
    int target[CT_CALL_MAX_OUT]; /* in-place and out= calls: the value written into */
    /* the thread's functionality keys when the call was made (grad mode, autocast) */
    ct_keyset included, excluded;
    int group; /* the fused group running this node, -1 for its kernel */
} ct_gnode;

typedef struct ct_fused ct_fused; /* codegen.c */

typedef struct ct_graph {
    int nnodes, cap_nodes;
    ct_gnode *nodes;
    int nvalues, cap_values;
    ct_gvalue *values;
    int ninputs;
    int result; /* the function's result, -1 for none */
    /* epilogue: .grad of leaf values set to values of the graph (the backward's) */
    int nepi;
    int (*epi)[2]; /* {leaf, grad} */
    /* Note [Training steps]: the capture ran a backward pass, so the replay runs the
     * recorded formulas and must not build autograd history for the forward again */
    bool no_autograd;
    int captured_nodes;
    ct_fused *fused;
    int nfused_groups, nfused_nodes;
    int cache_hits, cache_misses;
    /* the structured log's envelope members of this capture's events (frame_id,
     * frame_compile_id, attempt; Note [Compile events] in capture.c) */
    char env[96];
} ct_graph;

void ct_graph_free(ct_graph *g);
/* Uses and last uses of every value over the live nodes. */
void ct_graph_analyse(ct_graph *g);
/* Passes (graph.c): dead-code elimination and common subexpressions. */
void ct_graph_dce(ct_graph *g);
void ct_graph_cse(ct_graph *g);
/* Note [Copies of dying values]: clones of values that die at the clone, in training
 * steps. */
void ct_graph_drop_copies(ct_graph *g);
/* One line per live node into buf (snprintf-style); returns the full length. */
int64_t ct_graph_print(const ct_graph *g, char *buf, size_t cap);
/* Runs the graph on inputs; returns the result (owned by the innermost scope), or NULL
 * with the error set (a graph without a result returns NULL and no error: *ok says). */
ct_tensor *ct_graph_run(ct_graph *g, ct_tensor *const *inputs, int ninputs, bool *ok);

/* Runs node i with its kernel; its results go to rt. */
ct_status ct_graph_run_node(ct_graph *g, int i, ct_tensor **rt);

/* The family of an op as ops.def names it ("UNARY_FLOAT", "VIEW", ...). */
const char *ct_graph_op_family(ct_op op);

/* codegen.c: finds groups of pointwise nodes, generates and loads their C; false (no
 * error kept) leaves every node to its kernel. */
bool ct_codegen_graph(ct_graph *g);
/* Runs fused group k with the run-time tensors of the graph's values. */
ct_status ct_codegen_run_group(ct_graph *g, int k, ct_tensor **rt);
void ct_codegen_free(ct_fused *f);
/* The first node of fused group k (where it runs). */
int ct_codegen_group_first(const ct_graph *g, int k);

#endif /* CT_COMPILE_GRAPH_H */
