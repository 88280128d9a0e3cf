/* The ctorch command-line tool. */
#include <stdio.h>
#include <string.h>

#include "ctorch.h"

static int cmd_info(void) {
    fputs(ct_build_info(), stdout);
    printf("  threads:    %d\n", ct_get_num_threads());
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 2 || strcmp(argv[1], "info") == 0)
        return cmd_info();
    fprintf(stderr, "ctorch: unknown command '%s'\n", argv[1]);
    return 2;
}
