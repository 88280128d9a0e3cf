/* The META backend's registration: every op with a kernel gets its META kernel, which
 * computes the outputs' shapes and dtypes and touches no data. */
#include "dispatch/dispatch_internal.h"
#include "meta/kernels.h"

#define META_REG(name, fn) ct_dispatch_register_default(CT_OP_##name, CT_KEY_META, fn, NULL);
#define META_UNARY_FLOAT(name) META_REG(name, ct_kernel_elementwise)
#define META_UNARY_SAME(name) META_REG(name, ct_kernel_elementwise)
#define META_BINARY_ARITH(name) META_REG(name, ct_kernel_elementwise)
#define META_BINARY_FLOAT(name) META_REG(name, ct_kernel_elementwise)
#define META_COMPARE(name) META_REG(name, ct_kernel_elementwise)
#define META_UNARY_BOOL(name) META_REG(name, ct_kernel_elementwise)
#define META_UNARY_SQUARE(name) META_REG(name, ct_kernel_elementwise)
#define META_BINARY_DIV(name) META_REG(name, ct_kernel_elementwise)
#define META_TERNARY_ARITH(name) META_REG(name, ct_kernel_elementwise)
#define META_WHERE(name) META_REG(name, ct_kernel_elementwise)
#define META_CUSTOM(name) META_REG(name, ct_meta_##name)
#define META_STRUCTURED(name) META_REG(name, ct_kernel_##name)
#define META_COMPOSITE(name)
#define META_BACKEND(name)
#define META_REDUCE(name) META_REG(name, ct_reduce_kernel)
#define META_SCAN(name) META_REG(name, ct_reduce_kernel)
#define META_VIEW(name) META_REG(name, ct_core_kernel)
#define META_COPY(name) META_REG(name, ct_core_kernel)
#define META_FACTORY(name) META_REG(name, ct_factory_kernel)
#define META_RANDOM(name) META_REG(name, ct_factory_kernel)

void ct_meta_register(void) {
#define CT_OP(name, sig, family, flags) META_##family(name)
#include "ctorch/ops.def"
#undef CT_OP
}
