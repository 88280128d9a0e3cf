/* The CPU backend's registration (Note [Registry] in src/registry.c): its device
 * interface and the stubs of the structured kernels. */
#include "cpu/cpu_backend.h"

void ct_cpu_register(void) {
    ct_cpu_register_device();
    ct_cpu_register_shape();
    ct_cpu_register_pad();
    ct_cpu_register_advindex();
    ct_cpu_register_indexing();
}
