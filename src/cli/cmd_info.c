/* ctorch info: what this build is, which devices it sees, and a short look at tensors
 * and views printed as PyTorch prints them. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "commands.h"
#include "ctorch.h"

static void print_devices(void) {
    /* one line per backend: loaded or not (and why), devices, runtime */
    printf("devices:\n");
    const char *info = ct_backend_info();
    for (const char *line = info; *line;) {
        const char *end = strchr(line, '\n');
        int len = end ? (int)(end - line) : (int)strlen(line);
        printf("  %.*s\n", len, line);
        line += len + (end != NULL);
    }
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
