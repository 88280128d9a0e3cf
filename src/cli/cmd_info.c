/* ctorch info: what this build is, and a short look at tensors. */
#include <stdio.h>

#include "commands.h"
#include "ctorch.h"

int ct_cmd_info(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fputs(ct_build_info(), stdout);
    printf("  threads:    %d\n", ct_get_num_threads());
    return 0;
}
