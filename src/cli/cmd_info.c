/* ctorch info: what this build is, which devices it sees, and a short look at tensors
 * and views printed as PyTorch prints them. */
#include <stdint.h>
#include <stdio.h>

#include "commands.h"
#include "ctorch.h"

#ifdef CT_HAVE_CUDA
#include "cuda/probe.h"
#endif

static void print_devices(void) {
    printf("devices:\n  cpu:  %d threads\n", ct_get_num_threads());
#ifdef CT_HAVE_CUDA
    int n = ct_cuda_probe_device_count();
    int rt = ct_cuda_probe_runtime_version();
    printf("  cuda: %d device%s (runtime %d.%d, built for sm_%s", n, n == 1 ? "" : "s", rt / 1000, rt % 1000 / 10,
           ct_cuda_probe_archs());
    if (n > 0) {
        int arch = ct_cuda_probe_device_arch();
        if (arch > 0)
            printf("; device 0 runs the sm_%d image", arch / 10);
        else
            printf("; no compiled image runs on device 0");
    }
    printf(")\n");
#else
    printf("  cuda: not built\n");
#endif
}

/* Each tensor is printed under the C call that made it, as PyTorch's repr prints it. */
static int demo(void) {
    int rc = 0;
    ct_scope_begin();
    ct_tensor *x = ct_view(ct_arange(ct_scalar_int(0), ct_scalar_int(6), ct_scalar_int(1), CT_DTYPE_UNDEFINED, CT_CPU),
                           CT_SHAPE(2, 3));
    ct_tensor *xt = ct_transpose(x, 0, 1);
    ct_tensor *cols = ct_slice(x, 1, 1, INT64_MAX, 1);
    printf("\nx = ct_view(ct_arange(0, 6, 1), CT_SHAPE(2, 3))\n");
    rc |= ct_print(x) != CT_OK;
    printf("ct_transpose(x, 0, 1)            # view of x: %s\n", ct_tensor_shares_storage(x, xt) ? "same storage" : "a copy");
    rc |= ct_print(xt) != CT_OK;
    printf("ct_slice(x, 1, 1, INT64_MAX, 1)  # x[:, 1:], storage offset %lld\n",
           (long long)ct_tensor_storage_offset(cols));
    rc |= ct_print(cols) != CT_OK;
    if (rc)
        fprintf(stderr, "ctorch info: %s\n", ct_last_error());
    ct_scope_end();
    return rc;
}

int ct_cmd_info(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fputs(ct_build_info(), stdout);
    print_devices();
    return demo();
}
