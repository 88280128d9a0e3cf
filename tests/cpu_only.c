/* A CPU program against the shared library, run by tests/cuda_plugin.sh with the CUDA
 * backend out of reach: it must load, compute, and report why CUDA is not there
 * (Note [Loadable backends] in src/registry.c). Plain public API, no test framework. */
#include <stdio.h>
#include <string.h>

#include "ctorch.h"

int main(void) {
    ct_scope_begin();
    ct_tensor *a = ct_arange(ct_scalar_int(0), ct_scalar_int(6), ct_scalar_int(1), CT_F32, CT_CPU);
    ct_tensor *s = ct_sum(ct_mul(a, a), NULL, 0, false, CT_DTYPE_UNDEFINED);
    double v = 0;
    if (!s || ct_item_double(s, &v) != CT_OK || v != 55.0) {
        fprintf(stderr, "cpu_only: wrong sum %g (%s)\n", v, ct_last_error());
        return 1;
    }
    const char *info = ct_backend_info();
    printf("%s", info);
    if (ct_cuda_is_available() || ct_cuda_device_count() != 0) {
        fprintf(stderr, "cpu_only: CUDA claims to be available\n");
        return 1;
    }
    if (!strstr(info, "cuda: not loaded")) {
        fprintf(stderr, "cpu_only: ct_backend_info does not say CUDA is not loaded\n");
        return 1;
    }
    /* a CUDA tensor is refused with the reason, never a crash */
    ct_tensor *g = ct_zeros(CT_SHAPE(2), CT_F32, CT_CUDA(0));
    if (g || !strstr(ct_last_error(), "no backend for device type cuda")) {
        fprintf(stderr, "cpu_only: a CUDA tensor gave %s\n", g ? "a tensor" : ct_last_error());
        return 1;
    }
    printf("cuda tensor refused: %s\n", ct_last_error());
    ct_clear_error();
    ct_scope_end();
    printf("cpu_only: ok\n");
    return 0;
}
