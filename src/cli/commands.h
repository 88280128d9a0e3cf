/* The ctorch CLI's subcommands: one function each, argv[0] is the subcommand. */
#ifndef CT_CLI_COMMANDS_H
#define CT_CLI_COMMANDS_H

int ct_cmd_info(int argc, char **argv);
int ct_cmd_inspect(int argc, char **argv);
int ct_cmd_train(int argc, char **argv);
/* ctorch train char-gpt (argv[0] is "char-gpt"), src/cli/cmd_train_gpt.c */
int ct_cmd_train_char_gpt(int argc, char **argv);
int ct_cmd_memviz(int argc, char **argv);
int ct_cmd_trace_report(int argc, char **argv);

#endif
