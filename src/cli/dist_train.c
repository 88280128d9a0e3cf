/* The training jobs' distributed options: --ddp, --zero1, --diloco H (docs/distributed.md). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "ctorch.h"
#include "ctorch/ext.h"

/* Note [Distributed training jobs]
 * The options are taken out of argv before a job parses its own, so each job needs
 * only a few calls: ct_cli_dist_start once the model and optimizer exist,
 * ct_cli_dist_zero_grad and ct_cli_dist_step around the backward, the batch index of
 * ct_cli_dist_batch_index (step * world_size + rank, so the ranks draw different
 * batches from the same seed and the global batch is world_size times --batch-size),
 * and ct_cli_dist_is_main to save and print on rank 0 only (the other ranks' stdout
 * goes to /dev/null). The group comes from the torchrun variables (ctorch run or
 * torchrun --no-python), on the tcp backend for CPU runs and nccl for CUDA ones. */

int ct_cli_dist_take_args(ct_cli_dist *d, const char *prog, int *argc, char **argv) {
    memset(d, 0, sizeof *d);
    d->world = 1;
    d->outer_lr = 0.7;
    int out = 1;
    for (int i = 1; i < *argc; i++) {
        const char *k = argv[i];
        int mode = strcmp(k, "--ddp") == 0 ? CT_CLI_DDP : strcmp(k, "--zero1") == 0 ? CT_CLI_ZERO1
                                                       : strcmp(k, "--diloco") == 0 ? CT_CLI_DILOCO
                                                                                     : 0;
        if (strcmp(k, "--diloco-bf16") == 0) {
            d->bf16 = true;
            continue;
        }
        if (strcmp(k, "--diloco-outer-lr") == 0) {
            char *end = NULL;
            d->outer_lr = i + 1 < *argc ? strtod(argv[i + 1], &end) : 0;
            if (!end || *end || !(d->outer_lr > 0)) {
                fprintf(stderr, "%s: --diloco-outer-lr needs a positive number\n", prog);
                return 2;
            }
            i++;
            continue;
        }
        if (!mode) {
            argv[out++] = argv[i];
            continue;
        }
        if (d->mode) {
            fprintf(stderr, "%s: --ddp, --zero1 and --diloco exclude each other\n", prog);
            return 2;
        }
        d->mode = mode;
        if (mode == CT_CLI_DILOCO) {
            char *end = NULL;
            long h = i + 1 < *argc ? strtol(argv[i + 1], &end, 10) : 0;
            if (!end || *end || h < 1 || h > 1000000) {
                fprintf(stderr, "%s: --diloco needs the inner steps per outer step H (1 to 1000000)\n", prog);
                return 2;
            }
            d->h = (int)h;
            i++;
        }
    }
    if (d->bf16 && d->mode != CT_CLI_DILOCO) {
        fprintf(stderr, "%s: --diloco-bf16 goes with --diloco H\n", prog);
        return 2;
    }
    *argc = out;
    argv[out] = NULL;
    /* Rank 0 alone speaks, from the first line on. */
    const char *rank = getenv("RANK");
    if (d->mode && rank && atoi(rank) != 0 && !freopen("/dev/null", "w", stdout)) {
        fprintf(stderr, "%s: cannot silence rank %s's output\n", prog, rank);
        return 1;
    }
    return 0;
}

void ct_cli_dist_pick_device(const ct_cli_dist *d, ct_device *device) {
    const char *lr = getenv("LOCAL_RANK");
    if (!d->mode || device->type != CT_DEVICE_CUDA || !lr || !*lr)
        return;
    device->index = atoi(lr); /* one GPU per rank of a machine, as torchrun's users do */
    if (ct_cuda_set_device(device->index) != CT_OK)
        ct_clear_error(); /* the job's own device checks report it */
}

ct_status ct_cli_dist_start(ct_cli_dist *d, ct_tensor **params, int n, ct_optimizer *opt, double lr, double beta2,
                            double weight_decay, bool amp_scaler) {
    if (!d->mode)
        return CT_OK;
    if (amp_scaler)
        return ct_error(CT_ERROR_NOT_IMPLEMENTED, "train",
                        "--ddp, --zero1 and --diloco do not take --amp float16 (its gradient scaler) yet");
    bool cuda = n > 0 && ct_tensor_device(params[0]).type == CT_DEVICE_CUDA;
    d->pg = ct_process_group_from_env(cuda ? "nccl" : "tcp", 300000);
    if (!d->pg)
        return ct_last_status();
    d->rank = ct_process_group_rank(d->pg);
    d->world = ct_process_group_size(d->pg);
    if (d->mode == CT_CLI_DDP) {
        ct_ddp_options o = ct_ddp_defaults();
        d->ddp = ct_ddp_new_params(d->pg, params, n, &o);
        if (!d->ddp)
            return ct_last_status();
    } else if (d->mode == CT_CLI_ZERO1) {
        d->zero = ct_zero1_new(d->pg, params, n, lr, 0.9, beta2, 1e-8, weight_decay);
        if (!d->zero)
            return ct_last_status();
    } else {
        d->diloco = ct_diloco_new(d->pg, params, n, opt, d->h, d->outer_lr, 0.9, d->bf16);
        if (!d->diloco)
            return ct_last_status();
    }
    printf("distributed: %s on %d ranks (%s backend)", d->mode == CT_CLI_DDP     ? "DDP"
                                                      : d->mode == CT_CLI_ZERO1 ? "ZeRO-1"
                                                                                : "DiLoCo",
           d->world, ct_process_group_backend(d->pg));
    if (d->mode == CT_CLI_DILOCO)
        printf(", outer step every %d steps (lr %g, Nesterov 0.9%s)", d->h, d->outer_lr,
               d->bf16 ? ", bfloat16 pseudo-gradients" : "");
    printf("; global batch = %d x --batch-size\n", d->world);
    return CT_OK;
}

ct_status ct_cli_dist_zero_grad(ct_cli_dist *d, ct_optimizer *opt) {
    if (d->ddp)
        return ct_ddp_zero_grad(d->ddp);
    if (d->zero)
        return ct_zero1_zero_grad(d->zero);
    return ct_optimizer_zero_grad(opt, true);
}

ct_status ct_cli_dist_step(ct_cli_dist *d, ct_optimizer *opt, ct_tensor **params, int n, double grad_clip) {
    if (d->zero)
        return ct_zero1_step(d->zero, grad_clip, NULL);
    if (d->ddp && ct_ddp_finish(d->ddp) != CT_OK)
        return ct_last_status();
    if (grad_clip > 0 && ct_clip_grad_norm_(params, n, grad_clip, 2.0, false, NULL) != CT_OK)
        return ct_last_status();
    if (d->diloco)
        return ct_diloco_step(d->diloco);
    return ct_optimizer_step(opt);
}

uint64_t ct_cli_dist_batch_index(const ct_cli_dist *d, int64_t step) {
    return (uint64_t)step * (uint64_t)d->world + (uint64_t)d->rank;
}

bool ct_cli_dist_is_main(const ct_cli_dist *d) { return d->rank == 0; }

int ct_cli_dist_next_batch(const ct_cli_dist *d, ct_dataloader *dl, ct_tensor **batch) {
    /* Every rank walks the same shuffled order and keeps batch rank of each group of
     * world_size (DistributedSampler's split, by batches). */
    for (int k = 0; k < d->world; k++) {
        ct_tensor *b[8];
        int got = ct_dataloader_next(dl, k == d->rank ? batch : b);
        if (got != 1)
            return got;
    }
    return 1;
}

void ct_cli_dist_end(ct_cli_dist *d) {
    if (d->pg && ct_barrier(d->pg) != CT_OK) /* rank 0 may serve the store */
        ct_clear_error();
    if (d->pg)
        printf("distributed: %.1f MB sent by rank 0\n", (double)ct_process_group_bytes_sent(d->pg) / 1e6);
    ct_ddp_free(d->ddp);
    ct_zero1_free(d->zero);
    ct_diloco_free(d->diloco);
    ct_process_group_free(d->pg);
    memset(d, 0, sizeof *d);
    d->world = 1;
}
