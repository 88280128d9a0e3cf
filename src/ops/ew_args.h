/* Op-specific parts of the elementwise family kernel (family.c): argument checks,
 * parameters, and the loop table an op's arguments select. */
#ifndef CT_OPS_EW_ARGS_H
#define CT_OPS_EW_ARGS_H

#include "cpu/loops.h"

/* Before the iterator is built: checks what depends only on the inputs, drops absent
 * optional inputs (clamp), sets family options the call's arguments decide (div's
 * rounding mode, where's condition), and may switch *loops. */
ct_status ct_ew_prepare(const ct_call *call, ct_iter_config *cfg, const ct_cpu_loop **loops);
/* After: fills the parameters of the op's loops for the compute dtype, checks what
 * depends on it, may switch *loops, and scans integer divisors for zeros. */
ct_status ct_ew_setup(const ct_call *call, const ct_iter *it, ct_loop_params *p, const ct_cpu_loop **loops);

/* The fast lane of the elementwise family kernel (family.c, Note [Fast lane]): the
 * result of a functional call of op on a (and b for binary ops), or NULL (no error set)
 * when the call must take the boxed route. */
ct_tensor *ct_ew_tiny(ct_op op, const ct_tensor *a, const ct_tensor *b);

/* True for ops the two functions above treat specially (see ew_args.c). */
bool ct_ew_has_args(ct_op op);

#endif /* CT_OPS_EW_ARGS_H */
