/* The ctorch command-line tool. */
#include <stdio.h>
#include <string.h>

#include "commands.h"
#include "ctorch.h"

static const struct {
    const char *name;
    int (*fn)(int, char **);
    const char *help;
} commands[] = {
    {"info", ct_cmd_info, "build configuration, devices, threads and a short tensor demo"},
    {"train", ct_cmd_train, "fashion-mnist|char-gpt [options]: train the CNN (the main job) or a character GPT"},
    {"run", ct_cmd_run, "-n N PROGRAM [ARGS]: N processes of PROGRAM with torchrun's environment (docs/distributed.md)"},
    {"inspect", ct_cmd_inspect, "FILE: names, dtypes, shapes and sizes in a checkpoint"},
    {"memviz", ct_cmd_memviz, "SNAPSHOT [-o PAGE.html]: a memory snapshot as a self-contained HTML page"},
    {"trace-report", ct_cmd_trace_report, "DIR [-o OUT] [--strict]: structured logs (CT_TRACE) as an HTML report"},
};

static void usage(FILE *f) {
    fprintf(f, "usage: ctorch <command> [args]\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %-13s %s\n", commands[i].name, commands[i].help);
}

int main(int argc, char **argv) {
    ct_runtime_tune_and_reexec(argv); /* Note [Runtime environment] in src/cpu/runtime.c */
    if (argc < 2)
        return ct_cmd_info(argc - 1, argv + 1); /* the default job */
    if (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "help") == 0) {
        usage(stdout);
        return 0;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (strcmp(argv[1], commands[i].name) == 0)
            return commands[i].fn(argc - 1, argv + 1);
    fprintf(stderr, "ctorch: unknown command '%s'\n\n", argv[1]);
    usage(stderr);
    return 2;
}
