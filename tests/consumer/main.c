/* An out-of-tree program using only the installed ctorch: the install test builds it
 * through find_package(ctorch) and through pkg-config, then runs it. */
#include <ctorch.h>
#include <stdio.h>
#include <string.h>

int main(void) {
    if (strcmp(ct_version(), CT_VERSION_STRING) != 0) {
        fprintf(stderr, "header %s but library %s\n", CT_VERSION_STRING, ct_version());
        return 1;
    }
    ct_scope_begin();
    ct_tensor *t = ct_full(CT_SHAPE(2, 3), ct_scalar_float(1.5), CT_F32, CT_CPU);
    double v = 0;
    if (!t || ct_tensor_get(t, CT_INDEX(1, 2), &v) != CT_OK || v != 1.5) {
        fprintf(stderr, "ct_full/ct_tensor_get failed: %s\n", ct_last_error());
        ct_scope_end();
        return 1;
    }
    /* Errors come back as values with a message, never as a crash. */
    if (ct_zeros(CT_SHAPE(-1), CT_F32, CT_CPU) != NULL || ct_last_status() == CT_OK) {
        fprintf(stderr, "a negative size was accepted\n");
        ct_scope_end();
        return 1;
    }
    ct_clear_error();
    /* ct_build_info and the thread count pull in the OpenMP-using parts of a static link. */
    if (strstr(ct_build_info(), CT_VERSION_STRING) == NULL || ct_get_num_threads() < 1) {
        fprintf(stderr, "unexpected build info:\n%s", ct_build_info());
        ct_scope_end();
        return 1;
    }
    printf("ctorch %s: t[1][2] = %g, numel %lld, %d threads\n", ct_version(), v, (long long)ct_tensor_numel(t),
           ct_get_num_threads());
    ct_scope_end();
    return 0;
}
