/* The boxed call every operator goes through (internal layout of ct_call). */
#ifndef CT_CALL_H
#define CT_CALL_H

#include "ctorch/dispatch.h"
#include "tensor_impl.h"
#include "core/backend_api.h"

CT_BACKEND_BEGIN

/* 5: the fused Adam ops' optional grad_scale, found_inf, clip_coef, step_t and lr_t */
#define CT_CALL_MAX_IN 5
#define CT_CALL_MAX_OUT 4
/* 5: the fused Adam ops' lr, betas, weight_decay and eps (include/ctorch/ops.def) */
#define CT_CALL_MAX_SCALARS 5
#define CT_CALL_MAX_INTS (2 * CT_MAX_DIMS + 4)

typedef enum ct_call_mode {
    CT_CALL_FUNCTIONAL = 0, /* outputs are made by the kernel */
    CT_CALL_INPLACE,        /* out[0] is in[0] */
    CT_CALL_OUT,            /* out[] were given by the caller (resized if empty) */
} ct_call_mode;

struct ct_call {
    ct_op op;
    ct_call_mode mode;
    int nin, nout, nscalars, nints;
    const ct_tensor *in[CT_CALL_MAX_IN];
    ct_tensor *out[CT_CALL_MAX_OUT]; /* references owned by the call until taken */
    ct_scalar s[CT_CALL_MAX_SCALARS];
    int64_t ints[CT_CALL_MAX_INTS];
    ct_dtype dtype; /* optional dtype= argument; CT_DTYPE_UNDEFINED when absent */
    const ct_tensor *const *list; /* tensor-list argument (cat, stack, foreach) */
    int nlist;
    /* The Device argument of an op whose schema has one (a factory's device), when
     * has_device: ct_call_keyset adds its backend key, as an input's. */
    ct_device device;
    bool has_device;
    /* Dispatcher bookkeeping for ct_call_next: the rank of the key running (Note [Key
     * numbers and priorities] in dispatch.c) and the kernel's place in its stack. */
    int cur_rank;
    int cur_pos;
};

/* Runs a call from the top: computes its key set, dispatches, and on success returns
 * out[0] (a new reference owned by the innermost scope); NULL on error. */
ct_tensor *ct_dispatch_1(ct_call *call);
/* Same, returning the status and leaving the outputs in call->out (the caller takes
 * them with ct_call_take_output). */
ct_status ct_dispatch(ct_call *call);
/* Moves output i to the innermost scope (or the caller) and returns it. */
ct_tensor *ct_call_take_output(ct_call *call, int i);
/* Releases every output reference still held by the call. */
void ct_call_clear_outputs(ct_call *call);
/* After a kernel ran a modified copy of call below it (other inputs, a dtype): the
 * outputs the copy holds become call's (references move, not copied). */
void ct_call_take_outputs_of(ct_call *call, ct_call *copy);
/* The key set a call gets from its inputs and this thread's include/exclude sets. */
ct_keyset ct_call_keyset(const ct_call *call);

/* Thread-local include/exclude sets (grad mode, inference mode, logging, tracing). */
ct_keyset ct_tls_included(void);
ct_keyset ct_tls_excluded(void);
void ct_tls_set_included(ct_keyset ks);
void ct_tls_set_excluded(ct_keyset ks);

/* Registers the default kernel of op at key (at start-up, from the op table). */
void ct_dispatch_register_default(ct_op op, ct_dispatch_key key, ct_kernel_fn fn, void *user_data);

CT_BACKEND_END

#endif /* CT_CALL_H */
