/* ctorch memviz: a memory snapshot as one self-contained HTML page, written by
 * ct_memory_viz (src/observe/memviz.c). See docs/memory.md. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"

static void usage(FILE *f) {
    fprintf(f, "usage: ctorch memviz SNAPSHOT [-o PAGE.html]\n\n"
               "Writes one self-contained HTML page (no network needed) showing memory over time by op\n"
               "and the allocator's segment map. SNAPSHOT is a pickle or JSON file from\n"
               "ct_memory_snapshot, or a pickle from torch.cuda.memory._dump_snapshot.\n"
               "PAGE defaults to SNAPSHOT with .html appended.\n");
}

int ct_cmd_memviz(int argc, char **argv) {
    const char *in = NULL, *outpath = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            usage(stdout);
            return 0;
        } else if (strcmp(argv[i], "-o") == 0 || strcmp(argv[i], "--output") == 0) {
            if (++i >= argc) {
                fprintf(stderr, "ctorch memviz: %s needs a file name\n", argv[i - 1]);
                return 2;
            }
            outpath = argv[i];
        } else if (argv[i][0] == '-' && argv[i][1]) {
            fprintf(stderr, "ctorch memviz: unknown option '%s'\n\n", argv[i]);
            usage(stderr);
            return 2;
        } else if (!in) {
            in = argv[i];
        } else {
            fprintf(stderr, "ctorch memviz: more than one snapshot given ('%s')\n", argv[i]);
            return 2;
        }
    }
    if (!in) {
        usage(stderr);
        return 2;
    }
    char *defpath = NULL;
    if (!outpath) {
        defpath = malloc(strlen(in) + 6);
        if (!defpath) {
            fprintf(stderr, "ctorch memviz: out of memory\n");
            return 1;
        }
        sprintf(defpath, "%s.html", in);
        outpath = defpath;
    }
    int rc = 0;
    if (ct_memory_viz(in, outpath) == CT_OK) {
        printf("ctorch memviz: wrote %s\n", outpath);
    } else {
        const char *e = ct_last_error();
        fprintf(stderr, "ctorch memviz: %s\n", strncmp(e, "memviz: ", 8) == 0 ? e + 8 : e);
        rc = 1;
    }
    free(defpath);
    return rc;
}
