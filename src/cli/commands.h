/* The ctorch CLI's subcommands: one function each, argv[0] is the subcommand. */
#ifndef CT_CLI_COMMANDS_H
#define CT_CLI_COMMANDS_H

#include "ctorch.h"

int ct_cmd_info(int argc, char **argv);
int ct_cmd_inspect(int argc, char **argv);
int ct_cmd_train(int argc, char **argv);
/* ctorch train char-gpt (argv[0] is "char-gpt"), src/cli/cmd_train_gpt.c */
int ct_cmd_train_char_gpt(int argc, char **argv);
/* ctorch train gpt2 (argv[0] is "gpt2"), the same file */
int ct_cmd_train_gpt2(int argc, char **argv);
int ct_cmd_memviz(int argc, char **argv);
/* src/cli/cmd_train.c: at steps 10, 100, 1000, ... prints the CPU allocator's peak,
 * what it reserves and the process's RSS (--memory-report of the train jobs). */
void ct_cli_memory_report(int64_t step);
int ct_cmd_trace_report(int argc, char **argv);
/* ctorch run -n N PROGRAM: src/cli/cmd_run.c */
int ct_cmd_run(int argc, char **argv);

/* src/cli/checkpoint.c: a dict of the parameters by name (for a checkpoint), and the
 * parameters copied back from such a dict read from path; a missing name or a shape
 * other than the parameter's is an error naming the file and the tensor. */
ct_value *ct_cli_params_dict(const char *const *names, ct_tensor *const *params, int n);
ct_status ct_cli_load_params(const ct_value *model, const char *const *names, ct_tensor *const *params, int n,
                             const char *path);

#endif
