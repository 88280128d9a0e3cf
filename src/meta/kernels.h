/* The kernels of the op table that live in src/meta: the device-neutral ones that the
 * backends register at their keys (the elementwise, reduction, view/copy and structured
 * kernels: Note [Stubs] in stubs.h), and the META kernels of the CUSTOM ops. */
#ifndef CT_META_KERNELS_H
#define CT_META_KERNELS_H

#include "meta/op_info.h"
#include "core/backend_api.h"

CT_BACKEND_BEGIN

#define CT_OP(name, sig, family, flags) CT_META_DECL_##family(name)
#define CT_META_DECL_STRUCTURED(name) ct_status ct_kernel_##name(ct_keyset ks, ct_call *call, void *user_data);
#define CT_META_DECL_UNARY_FLOAT(name)
#define CT_META_DECL_UNARY_SAME(name)
#define CT_META_DECL_BINARY_ARITH(name)
#define CT_META_DECL_BINARY_FLOAT(name)
#define CT_META_DECL_COMPARE(name)
#define CT_META_DECL_CUSTOM(name) ct_status ct_meta_##name(ct_keyset ks, ct_call *call, void *user_data);
#define CT_META_DECL_COMPOSITE(name)
#define CT_META_DECL_BACKEND(name)
#define CT_META_DECL_REDUCE(name)
#define CT_META_DECL_SCAN(name)
#define CT_META_DECL_VIEW(name)
#define CT_META_DECL_COPY(name)
#define CT_META_DECL_UNARY_BOOL(name)
#define CT_META_DECL_UNARY_SQUARE(name)
#define CT_META_DECL_BINARY_DIV(name)
#define CT_META_DECL_TERNARY_ARITH(name)
#define CT_META_DECL_WHERE(name)
#define CT_META_DECL_FACTORY(name)
#define CT_META_DECL_RANDOM(name)
#include "ctorch/ops.def"
#undef CT_OP

/* The elementwise families (elementwise.c), reductions and scans (reduce.c), views and
 * copies (views.c: the core's functions as one kernel, to_device among them). */
ct_status ct_kernel_elementwise(ct_keyset ks, ct_call *call, void *user_data);
ct_status ct_reduce_kernel(ct_keyset ks, ct_call *call, void *user_data);
ct_status ct_core_kernel(ct_keyset ks, ct_call *call, void *user_data);
/* The factory, random and fill ops (factories.c: the core's functions as one kernel). */
ct_status ct_factory_kernel(ct_keyset ks, ct_call *call, void *user_data);

/* Every tensor of a call (inputs, list entries, in-place and out= outputs) on one
 * device, in[0]'s: a kernel picked for one backend cannot read another's memory (a
 * META index with a CPU self has no data). Every structured kernel starts with it
 * (stubs.c). */
ct_status ct_call_check_devices(const char *op, const ct_call *call);

/* Registers every op's META kernel (register.c). */
void ct_meta_register(void);

CT_BACKEND_END

#endif /* CT_META_KERNELS_H */
