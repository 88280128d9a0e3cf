/* ctorch inspect FILE */
#include <stdio.h>

#include "commands.h"
#include "ctorch.h"

int ct_cmd_inspect(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "ctorch inspect: not available in this build yet\n");
    return 1;
}
