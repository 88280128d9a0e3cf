/* The CPU backend's registration (Note [Registry] in src/registry.c): its device
 * interface, its kernel at CT_KEY_CPU for every op with one, the elementwise backend
 * and the stubs of the structured kernels. */
#include "cpu/cpu_backend.h"
#include "dispatch/dispatch_internal.h"
#include "meta/kernels.h"

#define CPU_REG(name, fn) ct_dispatch_register_default(CT_OP_##name, CT_KEY_CPU, fn, NULL);
#define CPU_UNARY_FLOAT(name) CPU_REG(name, ct_kernel_elementwise)
#define CPU_UNARY_SAME(name) CPU_REG(name, ct_kernel_elementwise)
#define CPU_BINARY_ARITH(name) CPU_REG(name, ct_kernel_elementwise)
#define CPU_BINARY_FLOAT(name) CPU_REG(name, ct_kernel_elementwise)
#define CPU_COMPARE(name) CPU_REG(name, ct_kernel_elementwise)
#define CPU_UNARY_BOOL(name) CPU_REG(name, ct_kernel_elementwise)
#define CPU_UNARY_SQUARE(name) CPU_REG(name, ct_kernel_elementwise)
#define CPU_BINARY_DIV(name) CPU_REG(name, ct_kernel_elementwise)
#define CPU_TERNARY_ARITH(name) CPU_REG(name, ct_kernel_elementwise)
#define CPU_WHERE(name) CPU_REG(name, ct_kernel_elementwise)
#define CPU_CUSTOM(name) CPU_REG(name, ct_cpu_##name)
#define CPU_STRUCTURED(name) CPU_REG(name, ct_kernel_##name)
#define CPU_COMPOSITE(name)
#define CPU_BACKEND(name)
#define CPU_REDUCE(name) CPU_REG(name, ct_reduce_kernel)
#define CPU_SCAN(name) CPU_REG(name, ct_reduce_kernel)
#define CPU_VIEW(name) CPU_REG(name, ct_core_kernel)
#define CPU_COPY(name) CPU_REG(name, ct_core_kernel)
#define CPU_FACTORY(name) CPU_REG(name, ct_factory_kernel)
#define CPU_RANDOM(name) CPU_REG(name, ct_factory_kernel)

void ct_cpu_register(void) {
    ct_cpu_register_device();
    ct_cpu_register_info();
#define CT_OP(name, sig, family, flags) CPU_##family(name)
#include "ctorch/ops.def"
#undef CT_OP
    ct_cpu_register_elementwise();
    ct_cpu_register_shape();
    ct_cpu_register_reduce();
    ct_cpu_register_pad();
    ct_cpu_register_upsample();
    ct_cpu_register_advindex();
    ct_cpu_register_indexing();
}
