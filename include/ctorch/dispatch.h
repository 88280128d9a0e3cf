/* ctorch dispatcher: op ids, dispatch keys, run-time kernel overrides, op logging.
 *
 * Every operator call is packed into a ct_call and routed through the dispatch keys
 * present on its inputs (for a factory, on its device) and in this thread's include
 * set, highest first:
 *
 *   LOGGING -> TRACE -> AUTOCAST -> AUTOGRAD -> backend (CUDA | META | CPU)
 *
 * A kernel at one key does its part and redispatches below it. A user can put an
 * override kernel at any key of any op at run time (docs/dispatcher.md). */
#ifndef CTORCH_DISPATCH_H
#define CTORCH_DISPATCH_H

#include "core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Dispatch keys. Note [Key numbers and priorities]: a key's number is part of the ABI
 * and never changes; a new key takes the next free number, whatever its priority.
 * The priority (which key handles a call first) is a separate table inside the
 * library, read at run time through ct_dispatch_key_rank. Adding a key: append it
 * here, and put it in the priority list (CT_KEY_PRIORITY in src/dispatch/dispatch.c).
 * Highest priority first:
 *
 *   LOGGING > TRACE > AUTOCAST > AUTOGRAD > CUDA > META > CPU */
typedef enum ct_dispatch_key {
    CT_KEY_CPU = 0,
    CT_KEY_META = 1,
    CT_KEY_CUDA = 2,
    CT_KEY_AUTOGRAD = 3,
    CT_KEY_AUTOCAST = 4,
    CT_KEY_TRACE = 5,
    CT_KEY_LOGGING = 6,
    /* the next key is 7 */
    CT_KEY_COUNT /* one past the last key's number */
} ct_dispatch_key;

/* A set of keys: one bit per key, at the key's rank (its priority, 0 the lowest), so
 * that the highest key of a set is its highest bit. At most CT_KEY_CAPACITY keys. */
typedef uint32_t ct_keyset;
#define CT_KEY_CAPACITY 32

/* ct_dispatch_key_rank[key]: the rank of a key (entries past the last key are 0).
 * The inline helpers below read it at run time, so a program built against this
 * header keeps working with a library that has inserted a key between two others. */
CT_API extern const uint8_t ct_dispatch_key_rank[CT_KEY_CAPACITY];

/* The set holding just key (key must be a ct_dispatch_key). */
static inline ct_keyset ct_keyset_of(ct_dispatch_key key) {
    return (ct_keyset)1u << ct_dispatch_key_rank[(unsigned)key & (CT_KEY_CAPACITY - 1u)];
}
#define CT_KEYSET(key) ct_keyset_of(key)

static inline bool ct_keyset_has(ct_keyset ks, ct_dispatch_key key) { return (ks & ct_keyset_of(key)) != 0; }
/* The keys of ks strictly below key in priority (what a kernel at key redispatches to). */
static inline ct_keyset ct_keyset_below(ct_keyset ks, ct_dispatch_key key) { return ks & (ct_keyset_of(key) - 1u); }
/* Highest-priority key in ks, or CT_KEY_COUNT when ks is empty. */
CT_API ct_dispatch_key ct_keyset_highest(ct_keyset ks);
CT_API const char *ct_dispatch_key_name(ct_dispatch_key key);

/* Op ids: CT_OP_add, CT_OP_exp, ... one per line of ctorch/ops.def. */
typedef enum ct_op_id {
#define CT_OP(name, sig, family, flags) CT_OP_##name,
#include "ops.def"
#undef CT_OP
    CT_OP_COUNT
} ct_op_id;
typedef int32_t ct_op;

/* Look-up by name ("add", "exp"); -1 when there is no such op. */
CT_API ct_op ct_op_find(const char *name);
CT_API const char *ct_op_name(ct_op op);
/* The op's schema: its arguments and results by name and kind and, for an op that
 * dispatches, where each travels in its ct_call (docs/dispatcher.md, "Op schemas"):
 * "tril(Tensor self, int diagonal) -> Tensor" packs self as input 0 and diagonal as
 * int 0. Overloads are separated by "; ". NULL for an unknown op. */
CT_API const char *ct_op_schema(ct_op op);
/* Whether op has a built-in kernel at key (overrides aside): ct_op_has_kernel(CT_OP_sort,
 * CT_KEY_CUDA) says whether sort runs on CUDA tensors in this build. Composite ops
 * (made of other ops) have none at any key. */
CT_API bool ct_op_has_kernel(ct_op op, ct_dispatch_key key);

/* ------------------------------------------------------------ calls */

/* One boxed operator call: inputs, scalar and integer arguments, outputs. Kernels
 * read it through these accessors; pointers returned are borrowed from the call. */
typedef struct ct_call ct_call;

CT_API ct_op ct_call_op(const ct_call *call);
CT_API int ct_call_num_inputs(const ct_call *call);
/* Borrowed; NULL for an absent optional input. */
CT_API const ct_tensor *ct_call_input(const ct_call *call, int i);
CT_API int ct_call_num_scalars(const ct_call *call);
CT_API ct_scalar ct_call_scalar(const ct_call *call, int i);
/* Integer arguments (dims, sizes, flags) in the order the op's schema lists them. */
CT_API int ct_call_num_ints(const ct_call *call);
CT_API int64_t ct_call_int(const ct_call *call, int i);
/* The tensor-list argument (cat's tensors, index's indices): its length and entries
 * (borrowed; NULL for an absent entry). */
CT_API int ct_call_num_list(const ct_call *call);
CT_API const ct_tensor *ct_call_list_entry(const ct_call *call, int i);
/* The ScalarType argument (sum's dtype=, to_dtype's dtype); CT_DTYPE_UNDEFINED when
 * the op has none or the caller gave none. */
CT_API ct_dtype ct_call_dtype(const ct_call *call);
/* The Device argument, for the ops whose schema has one: the device a factory makes
 * its result on, a move's target. ct_call_has_device is false for the others, and
 * ct_call_device then gives type and index -1. The dispatcher takes a backend key from
 * it as from an input's device. */
CT_API bool ct_call_has_device(const ct_call *call);
CT_API ct_device ct_call_device(const ct_call *call);
/* True for in-place calls (ct_add_) and out= calls (ct_add_out): the outputs are given. */
CT_API bool ct_call_is_inplace(const ct_call *call);
CT_API bool ct_call_has_out(const ct_call *call);
CT_API int ct_call_num_outputs(const ct_call *call);
/* Borrowed; the given out=/self tensor, or what a kernel has set. */
CT_API ct_tensor *ct_call_output(const ct_call *call, int i);
/* A kernel hands over its result: the call takes a reference to t. For in-place and
 * out= calls the kernel writes into ct_call_output instead. */
CT_API ct_status ct_call_set_output(ct_call *call, int i, ct_tensor *t);

/* A kernel. ks holds the keys at and below the one being run. */
typedef ct_status (*ct_kernel_fn)(ct_keyset ks, ct_call *call, void *user_data);

/* Runs the call from the highest key in ks (a kernel passes ct_keyset_below(ks, its key)). */
CT_API ct_status ct_redispatch(ct_keyset ks, ct_call *call);

/* ------------------------------------------------------------ overrides */

enum {
    /* Allow stacking on top of an earlier override of the same op and key (the newest
     * runs first). Without it a second override at the same place is an error. */
    CT_OVERRIDE_ALLOW_MULTIPLE = 1u << 0,
};

/* Puts kernel in front of op's kernel at key. The kernel may handle a call itself or
 * pass it to what it replaced with ct_call_next (a conditional override, e.g. only for
 * large shapes). Returns a handle > 0, or -1 with the error set. */
CT_API int64_t ct_op_override(ct_op op, ct_dispatch_key key, ct_kernel_fn kernel, void *user_data, uint32_t flags);
/* Removes an override; the kernel below it (or the default) serves again. */
CT_API ct_status ct_op_override_remove(int64_t handle);
/* From inside an override: runs the kernel it replaced at the same key. */
CT_API ct_status ct_call_next(ct_keyset ks, ct_call *call);

/* ------------------------------------------------------------ logging */

/* Logs one line per op call (inputs' dtypes, shapes and devices, and the outputs) to
 * path, or stderr when path is NULL. The environment variable CT_LOG_OPS=1 (and
 * CT_LOG_OPS_FILE=path) turns it on at start-up. */
CT_API ct_status ct_set_op_logging(bool enabled, const char *path);
CT_API bool ct_op_logging_enabled(void);

#ifdef __cplusplus
}
#endif
#endif /* CTORCH_DISPATCH_H */
