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
/* The training jobs' --ddp, --zero1 and --diloco H (src/cli/dist_train.c, Note
 * [Distributed training jobs]). */
enum { CT_CLI_DDP = 1, CT_CLI_ZERO1, CT_CLI_DILOCO };
typedef struct {
    int mode; /* 0: one process */
    int h;
    double outer_lr;
    bool bf16;
    int rank, world;
    ct_process_group *pg;
    ct_ddp *ddp;
    ct_zero1 *zero;
    ct_diloco *diloco;
} ct_cli_dist;
/* Takes the distributed options out of argv (argc shrinks); 2 after a usage error. */
int ct_cli_dist_take_args(ct_cli_dist *d, const char *prog, int *argc, char **argv);
/* With a distributed option and --device cuda: cuda:LOCAL_RANK. */
void ct_cli_dist_pick_device(const ct_cli_dist *d, ct_device *device);
ct_status ct_cli_dist_start(ct_cli_dist *d, ct_tensor **params, int n, ct_optimizer *opt, double lr, double beta2,
                            double weight_decay, bool amp_scaler);
ct_status ct_cli_dist_zero_grad(ct_cli_dist *d, ct_optimizer *opt);
/* After backward: reduce, clip (grad_clip > 0), step. */
ct_status ct_cli_dist_step(ct_cli_dist *d, ct_optimizer *opt, ct_tensor **params, int n, double grad_clip);
uint64_t ct_cli_dist_batch_index(const ct_cli_dist *d, int64_t step);
bool ct_cli_dist_is_main(const ct_cli_dist *d);
/* The next batch of this rank: batch `rank` of each group of world_size the loader
 * gives (1, 0 at the end, -1 on error, as ct_dataloader_next). */
int ct_cli_dist_next_batch(const ct_cli_dist *d, ct_dataloader *dl, ct_tensor **batch);
void ct_cli_dist_end(ct_cli_dist *d);

/* ctorch run -n N PROGRAM: src/cli/cmd_run.c */
int ct_cmd_run(int argc, char **argv);

/* src/cli/checkpoint.c: a dict of the parameters by name (for a checkpoint), and the
 * parameters copied back from such a dict read from path; a missing name or a shape
 * other than the parameter's is an error naming the file and the tensor. */
ct_value *ct_cli_params_dict(const char *const *names, ct_tensor *const *params, int n);
ct_status ct_cli_load_params(const ct_value *model, const char *const *names, ct_tensor *const *params, int n,
                             const char *path);

#endif
