/* The CUDA backend's registration (Note [Registry] in src/registry.c): its device
 * interface, the elementwise backend, the device-neutral kernels at CT_KEY_CUDA, and
 * its own kernels and stubs (blas.c, indexing_cuda.c, nn_cuda.c). */
#include "cuda/cuda_ops.h"
#include "dispatch/dispatch_internal.h"
#include "meta/kernels.h"
#include "meta/stubs.h"

/* Note [CUDA registration]
 * Every elementwise family op gets the elementwise kernel at the CUDA key (it launches
 * the family's CUDA kernel, or says the op has none); reductions and scans, views and
 * copies get their device-neutral kernels; CUSTOM and STRUCTURED ops are registered by
 * the files that have their CUDA kernels or stubs. Ops without a CUDA kernel keep an
 * empty slot, so a CUDA call fails with the dispatcher's "no kernel for this op at
 * dispatch key CUDA". */
#define CUDA_REG(name, fn) ct_dispatch_register_default(CT_OP_##name, CT_KEY_CUDA, fn, NULL);
#define CUDA_UNARY_FLOAT(name) CUDA_REG(name, ct_kernel_elementwise)
#define CUDA_UNARY_SAME(name) CUDA_REG(name, ct_kernel_elementwise)
#define CUDA_BINARY_ARITH(name) CUDA_REG(name, ct_kernel_elementwise)
#define CUDA_BINARY_FLOAT(name) CUDA_REG(name, ct_kernel_elementwise)
#define CUDA_COMPARE(name) CUDA_REG(name, ct_kernel_elementwise)
#define CUDA_UNARY_BOOL(name) CUDA_REG(name, ct_kernel_elementwise)
#define CUDA_UNARY_SQUARE(name) CUDA_REG(name, ct_kernel_elementwise)
#define CUDA_BINARY_DIV(name) CUDA_REG(name, ct_kernel_elementwise)
#define CUDA_TERNARY_ARITH(name) CUDA_REG(name, ct_kernel_elementwise)
#define CUDA_WHERE(name) CUDA_REG(name, ct_kernel_elementwise)
#define CUDA_CUSTOM(name)
#define CUDA_STRUCTURED(name)
#define CUDA_COMPOSITE(name)
#define CUDA_BACKEND(name) /* cuda/rnn_cudnn.c registers its own */
#define CUDA_REDUCE(name) CUDA_REG(name, ct_reduce_kernel)
#define CUDA_SCAN(name) CUDA_REG(name, ct_reduce_kernel)
#define CUDA_VIEW(name) CUDA_REG(name, ct_core_kernel)
#define CUDA_COPY(name) CUDA_REG(name, ct_core_kernel)
#define CUDA_FACTORY(name) CUDA_REG(name, ct_factory_kernel)
#define CUDA_RANDOM(name) CUDA_REG(name, ct_factory_kernel)

void ct_cuda_register(void) {
    ct_cuda_register_device();
    ct_cuda_register_elementwise();
    ct_cuda_register_reduce();
#define CT_OP(name, sig, family, flags) CUDA_##family(name)
#include "ctorch/ops.def"
#undef CT_OP
    ct_cuda_register_kernels();
    ct_cuda_register_fused_optim();
    ct_cuda_register_cudnn_rnn();
}

/* The backend's one exported symbol, which src/registry.c finds with dlsym (or, in a
 * static program, through a weak reference): Note [Loadable backends]. */
CT_API ct_status ct_cuda_backend_entry(void);

ct_status ct_cuda_backend_entry(void) {
    ct_cuda_register();
    return CT_OK;
}
