/* ctorch train: the main job. Trains the Fashion-MNIST CNN of bench/train_cnn (and
 * PyTorch's reference script) with SGD + momentum, showing a progress bar, and
 * reports test accuracy after each epoch.
 *
 *   conv 1->32 3x3 pad 1, ReLU, maxpool 2, conv 32->64 3x3 pad 1, ReLU, maxpool 2,
 *   linear 3136->128, ReLU, linear 128->10 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cnn.h"
#include "commands.h"
#include "ctorch.h"

typedef struct {
    const char *data_dir;
    const char *out;
    const char *resume;
    const char *memory_snapshot; /* allocator snapshot after training (pickle, or JSON for *.json) */
    const char *profile;         /* Chrome trace of the whole run */
    const char *schedule;        /* learning rate per step: constant, cosine, onecycle */
    int epochs;
    int64_t max_steps;
    int64_t eval_limit; /* test images to evaluate on (0: all) */
    int64_t batch_size;
    double lr;
    int threads;
    uint64_t seed;
    bool quiet;
    bool memory_report; /* allocator peak and RSS at steps 10, 100, 1000, ... */
    bool compile;       /* forward and backward through ct_compile (docs/compile.md) */
    int64_t synthetic;  /* > 0: that many random training images instead of the data set */
    ct_device device;   /* where the model trains */
    ct_cli_dist *dist;  /* --ddp, --diloco H (src/cli/dist_train.c) */
} train_args;

/* Resident set size in kB from /proc/self/statm; -1 where there is none. */
static int64_t rss_kb(void) {
    FILE *f = fopen("/proc/self/statm", "r");
    long long pages = -1, res = -1;
    if (f) {
        if (fscanf(f, "%lld %lld", &pages, &res) != 2)
            res = -1;
        fclose(f);
    }
    return res < 0 ? -1 : res * (sysconf(_SC_PAGESIZE) / 1024);
}

void ct_cli_memory_report(int64_t step) {
    int64_t p = 10;
    while (p < step && p <= INT64_MAX / 10)
        p *= 10;
    if (p != step)
        return;
    printf("memory at step %lld: peak allocated %lld bytes, reserved %lld bytes, RSS %lld kB\n", (long long)step,
           (long long)ct_max_memory_allocated(CT_CPU), (long long)ct_memory_reserved(CT_CPU), (long long)rss_kb());
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* uint8 images (B, 28, 28) -> float32 (B, 1, 28, 28), scaled to [0, 1] and normalised
 * with the training set's mean and standard deviation (0.2860, 0.3530). */
/* uint8 images (B, 784) on the host -> normalised float32 (B, 1, 28, 28) on device: the
 * bytes cross to a GPU before they are widened, a quarter of the traffic. */
static ct_tensor *prepare(const ct_tensor *images, ct_device device) {
    int64_t b = ct_tensor_size(images, 0);
    ct_tensor *x = ct_view(ct_to_dtype(ct_to_device(images, device), CT_F32), CT_SHAPE(b, 1, 28, 28));
    return ct_mul_scalar(ct_sub_scalar(x, ct_scalar_float(0.2860 * 255)), ct_scalar_float(1.0 / (0.3530 * 255)));
}

static void progress(const train_args *a, int epoch, int64_t step, int64_t steps, double loss, double acc,
                     double rate, double eta) {
    if (a->quiet)
        return;
    int width = 24, done = steps ? (int)(width * step / steps) : width;
    char bar[32];
    for (int i = 0; i < width; i++)
        bar[i] = i < done ? '=' : i == done ? '>' : ' ';
    bar[width] = 0;
    fprintf(stdout, "\repoch %d/%d [%s] %3d%% loss %.4f acc %5.1f%% %6.0f img/s ETA %2d:%02d ", epoch + 1, a->epochs,
            bar, steps ? (int)(100 * step / steps) : 100, loss, 100 * acc, rate, (int)eta / 60, (int)eta % 60);
    fflush(stdout);
}

static double evaluate(const ct_fashion_cnn *m, const ct_tensor *images, const ct_tensor *labels, int64_t limit,
                       ct_device device) {
    bool prev = ct_set_grad_enabled(false);
    int64_t n = ct_tensor_size(images, 0), correct = 0;
    if (limit > 0 && limit < n)
        n = limit;
    for (int64_t s = 0; s < n; s += 1000) {
        ct_scope_begin();
        int64_t len = n - s < 1000 ? n - s : 1000;
        int64_t c = 0;
        if (ct_fashion_cnn_loss(m, prepare(ct_narrow(images, 0, s, len), device),
                                ct_to_device(ct_narrow(labels, 0, s, len), device), &c))
            correct += c;
        ct_scope_end();
    }
    ct_set_grad_enabled(prev);
    return n ? (double)correct / (double)n : 0;
}

/* The learning-rate schedule, stepped once per batch over the whole run (PyTorch's
 * CosineAnnealingLR / OneCycleLR with the same arguments). NULL for "constant". */
static bool known_schedule(const char *s) {
    return strcmp(s, "constant") == 0 || strcmp(s, "cosine") == 0 || strcmp(s, "onecycle") == 0;
}

static ct_status make_schedule(const train_args *a, ct_optimizer *opt, int64_t total_steps, ct_lr_scheduler **out) {
    *out = NULL;
    if (strcmp(a->schedule, "cosine") == 0) {
        *out = ct_cosineannealinglr_new(opt, total_steps, 0.0);
    } else if (strcmp(a->schedule, "onecycle") == 0) {
        ct_onecycle_options o = ct_onecycle_defaults(a->lr, total_steps);
        *out = ct_onecyclelr_new(opt, &o);
    } else {
        return CT_OK;
    }
    return *out ? CT_OK : ct_last_status();
}

static ct_status save_checkpoint(const ct_fashion_cnn *m, ct_optimizer *opt, const ct_lr_scheduler *sched, int epoch,
                                 const char *path) {
    ct_value *model = ct_cli_params_dict(ct_fashion_cnn_param_names, m->p, CT_FASHION_CNN_NPARAMS);
    char weights[1024];
    snprintf(weights, sizeof weights, "%s.safetensors", path);
    ct_status st = ct_save_safetensors(weights, model, NULL);
    if (st == CT_OK) {
        ct_value *ckpt = ct_value_new_dict();
        ct_value_set(ckpt, "model", model);
        model = NULL;
        ct_value_set(ckpt, "optimizer", ct_optimizer_state_dict(opt));
        if (sched)
            ct_value_set(ckpt, "scheduler", ct_lr_scheduler_state_dict(sched));
        ct_value_set(ckpt, "epoch", ct_value_new_int(epoch));
        char full[1024];
        snprintf(full, sizeof full, "%s.pt", path);
        st = ct_save_pt(full, ckpt);
        ct_value_free(ckpt);
    }
    ct_value_free(model);
    return st;
}

static ct_status load_checkpoint(ct_fashion_cnn *m, ct_optimizer *opt, ct_lr_scheduler *sched, const char *path,
                                 int *epoch) {
    ct_value *ckpt = ct_load(path);
    if (!ckpt)
        return ct_last_status();
    ct_status st = ct_cli_load_params(ct_value_get(ckpt, "model"), ct_fashion_cnn_param_names, m->p,
                                      CT_FASHION_CNN_NPARAMS, path);
    if (st == CT_OK) {
        ct_value *os = ct_value_get(ckpt, "optimizer"), *ss = ct_value_get(ckpt, "scheduler");
        ct_value *ep = ct_value_get(ckpt, "epoch");
        ct_clear_error(); /* the keys are optional: an absent one leaves an error behind */
        if (os)
            st = ct_optimizer_load_state_dict(opt, os);
        if (st == CT_OK && sched && ss)
            st = ct_lr_scheduler_load_state_dict(sched, ss);
        *epoch = ep ? (int)ct_value_int(ep) : 0;
    }
    ct_value_free(ckpt);
    return st;
}

static int usage_to(FILE *f, int rc) {
    fprintf(f,
            "usage: ctorch train fashion-mnist [--epochs N] [--max-steps N] [--batch-size N] [--lr X]\n"
            "                                  [--threads N] [--seed N] [--data DIR] [--out PATH]\n"
            "                                  [--resume FILE.pt] [--eval-limit N] [--device cpu|cuda[:N]] [--quiet]\n"
            "                                  [--schedule constant|cosine|onecycle]\n"
            "                                  [--memory-snapshot FILE[.json]] [--profile TRACE.json]\n"
            "                                  [--synthetic N] [--memory-report] [--compile]\n"
            "                                  [--ddp | --diloco H]  (under ctorch run -n N or torchrun)\n"
            "       ctorch train char-gpt --text FILE [--preset cpu|shakespeare] [--steps N] [options]\n"
            "       ctorch train gpt2 (--train FILE | --synthetic) [--preset 124m|small|tiny] [options]\n"
            "\n"
            "jobs:\n"
            "  fashion-mnist  the CNN on Fashion-MNIST with SGD (data from Debian's\n"
            "                 dataset-fashion-mnist package)\n"
            "  char-gpt       a character-level GPT on any text file with AdamW, then samples\n"
            "                 from it (no bundled text; `ctorch train char-gpt --help` lists\n"
            "                 its options)\n"
            "  gpt2           GPT-2 (124M and smaller presets) on llm.c's token shards, any\n"
            "                 file as bytes, or random tokens (`ctorch train gpt2 --help`)\n");
    return rc;
}

static int usage(void) {
    return usage_to(stderr, 2);
}

static bool ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

/* Writes the memory snapshot (while the model, its gradients and the optimizer state
 * are still alive, so the segment map shows them) and closes the profiler trace. */
static ct_status finish_diagnostics(const train_args *a) {
    ct_status st = CT_OK;
    if (a->memory_snapshot) {
        ct_snapshot_format f = ends_with(a->memory_snapshot, ".json") ? CT_SNAPSHOT_JSON : CT_SNAPSHOT_PICKLE;
        st = ct_memory_snapshot(a->device, a->memory_snapshot, f);
        if (st == CT_OK)
            printf("memory snapshot: %s (view it with `ctorch memviz %s`)\n", a->memory_snapshot, a->memory_snapshot);
        ct_memory_record_history(false, 0);
    }
    if (a->profile && st == CT_OK) {
        st = ct_profiler_stop();
        if (st == CT_OK)
            printf("profile: %s (open it in Perfetto or chrome://tracing)\n", a->profile);
    }
    if (st != CT_OK)
        fprintf(stderr, "ctorch train: %s\n", ct_last_error());
    return st;
}

/* --compile: one whole step (zero_grad, forward, backward, optimizer step) as a
 * compiled function, returning {loss, correct predictions}; zero_grad and the step are
 * host-call nodes, so a replay reads the rate the scheduler set (docs/compile.md). */
typedef struct cnn_compiled {
    ct_fashion_cnn *m;
    ct_optimizer *opt;
} cnn_compiled;

static ct_tensor *cnn_step(ct_tensor *const *in, int n, void *ud) {
    (void)n;
    const cnn_compiled *s = ud;
    ct_tensor *hits = NULL;
    if (ct_optimizer_zero_grad(s->opt, true) != CT_OK)
        return NULL;
    ct_tensor *loss = ct_fashion_cnn_loss_hits(s->m, in[0], in[1], &hits);
    if (!loss || ct_backward(loss, NULL, false, false) != CT_OK || ct_optimizer_step(s->opt) != CT_OK)
        return NULL;
    const ct_tensor *both[2] = {ct_detach(loss), ct_to_dtype(hits, ct_tensor_dtype(loss))};
    return ct_stack(both, 2, 0);
}

static int train_fashion_mnist(const train_args *a) {
    setvbuf(stdout, NULL, _IOLBF, 0); /* epoch lines appear as they happen, also in a pipe */
    if (a->threads > 0)
        ct_set_num_threads(a->threads);
    ct_manual_seed(a->seed);
    if ((a->memory_snapshot && ct_memory_record_history(true, 200000)) || (a->profile && ct_profiler_start(a->profile))) {
        fprintf(stderr, "ctorch train: %s\n", ct_last_error());
        return 1;
    }
    ct_scope_begin();
    ct_tensor *xtr, *ytr, *xte, *yte;
    if (a->synthetic > 0) { /* random images and labels: the run's costs without the data set */
        int64_t nte = a->synthetic / 4 > 0 ? a->synthetic / 4 : 1;
        xtr = ct_randint(0, 256, CT_SHAPE(a->synthetic, 28, 28), CT_U8, CT_CPU);
        ytr = ct_randint(0, 10, CT_SHAPE(a->synthetic), CT_I64, CT_CPU);
        xte = ct_randint(0, 256, CT_SHAPE(nte, 28, 28), CT_U8, CT_CPU);
        yte = ct_randint(0, 10, CT_SHAPE(nte), CT_I64, CT_CPU);
        if (!xtr || !ytr || !xte || !yte) {
            fprintf(stderr, "ctorch train: %s\n", ct_last_error());
            ct_scope_end();
            return 1;
        }
    } else if (ct_mnist_load(a->data_dir, true, &xtr, &ytr) || ct_mnist_load(a->data_dir, false, &xte, &yte)) {
        fprintf(stderr, "ctorch train: %s\n(the data set comes with Debian's dataset-fashion-mnist package: "
                        "`make run` installs it)\n", ct_last_error());
        ct_scope_end();
        return 1;
    }
    char dev[32];
    printf("Fashion-MNIST: %lld training and %lld test images, %s", (long long)ct_tensor_size(xtr, 0),
           (long long)ct_tensor_size(xte, 0), ct_device_str(a->device, dev, sizeof dev));
    if (a->device.type == CT_DEVICE_CPU)
        printf(", %d threads", ct_get_num_threads());
    printf("\n");
    ct_fashion_cnn m = {0};
    ct_optimizer *opt = NULL;
    ct_optim_options o = ct_sgd_options(a->lr);
    o.momentum = 0.9;
    int start_epoch = 0;
    int64_t ntrain = ct_tensor_size(xtr, 0);
    int64_t planned_steps = (int64_t)a->epochs * ((ntrain + a->batch_size - 1) / a->batch_size);
    ct_lr_scheduler *sched = NULL;
    if (ct_fashion_cnn_init(&m) != CT_OK || ct_fashion_cnn_to(&m, a->device) || !(opt = ct_optimizer_new(CT_OPTIM_SGD, m.p, CT_FASHION_CNN_NPARAMS, &o)) ||
        make_schedule(a, opt, planned_steps, &sched) ||
        (a->resume && load_checkpoint(&m, opt, sched, a->resume, &start_epoch)) ||
        ct_cli_dist_start(a->dist, m.p, CT_FASHION_CNN_NPARAMS, opt, a->lr, 0.999, 0, false)) {
        ct_cli_dist_end(a->dist);
        fprintf(stderr, "ctorch train: %s\n", ct_last_error());
        ct_lr_scheduler_free(sched);
        ct_optimizer_free(opt);
        ct_fashion_cnn_free(&m);
        ct_scope_end();
        return 1;
    }
    if (a->resume)
        printf("resumed from %s after epoch %d\n", a->resume, start_epoch);
    const ct_tensor *fields_in[2] = {xtr, ytr};
    ct_dataset *ds = ct_tensor_dataset_new((ct_tensor *const *)fields_in, 2);
    ct_dataloader_options lo = ct_dataloader_defaults(a->batch_size);
    lo.shuffle = true;
    lo.seed = a->seed;
    lo.num_workers = 1;
    ct_dataloader *dl = ds ? ct_dataloader_new(ds, &lo) : NULL;
    int rc = 0;
    if (!dl) {
        fprintf(stderr, "ctorch train: %s\n", ct_last_error());
        rc = 1;
    }
    if (dl)
        ct_dataloader_set_epoch(dl, start_epoch);
    int64_t steps_per_epoch = dl ? ct_dataloader_len(dl) / a->dist->world : 0, total_steps = 0;
    int done_epochs = start_epoch; /* epochs fully trained: a resume starts after them */
    double final_acc = 0;
    ct_compiled *cstep = NULL;
    cnn_compiled cc = {&m, opt};
    if (rc == 0 && a->compile && !(cstep = ct_compile(cnn_step, &cc, 0))) {
        fprintf(stderr, "ctorch train: %s\n", ct_last_error());
        rc = 1;
    }
    for (int epoch = start_epoch; rc == 0 && epoch < a->epochs; epoch++) {
        double t0 = now_s(), loss_avg = 0;
        int64_t seen = 0, correct = 0, step = 0;
        ct_tensor *batch[2];
        int got;
        /* The step's scope is open before the batch is taken, so the batch dies with the
         * step (docs/data.md, "Keeping memory flat"): taken outside it, every batch of the
         * epoch stayed alive until the run's scope ended. */
        for (;;) {
            ct_scope_begin();
            if ((got = ct_cli_dist_next_batch(a->dist, dl, batch)) != 1) {
                ct_scope_end();
                break;
            }
            int64_t hits = 0;
            ct_tensor *loss = NULL;
            if (cstep) {
                /* the compiled forward and backward give {loss, hits} */
                ct_tensor *xy[2] = {prepare(batch[0], a->device), ct_to_device(batch[1], a->device)};
                ct_tensor *lh = ct_compiled_call(cstep, xy, 2);
                double h = 0;
                loss = lh && ct_item_double(ct_select(lh, 0, 1), &h) == CT_OK ? ct_select(lh, 0, 0) : NULL;
                hits = (int64_t)h;
            } else {
                loss = ct_fashion_cnn_loss(&m, prepare(batch[0], a->device), ct_to_device(batch[1], a->device), &hits);
            }
            double lv = NAN;
            if (!loss ||
                (!cstep && (ct_cli_dist_zero_grad(a->dist, opt) || ct_backward(loss, NULL, false, false) ||
                            (a->dist->mode ? ct_cli_dist_step(a->dist, opt, m.p, CT_FASHION_CNN_NPARAMS, 0)
                                           : ct_optimizer_step(opt)))) ||
                (sched && ct_lr_scheduler_step(sched)) || ct_item_double(loss, &lv)) {
                fprintf(stderr, "\nctorch train: %s\n", ct_last_error());
                rc = 1;
            } else {
                int64_t bsz = ct_tensor_size(batch[0], 0);
                correct += hits;
                seen += bsz;
                loss_avg = step == 0 ? lv : 0.98 * loss_avg + 0.02 * lv;
            }
            ct_scope_end();
            step++;
            total_steps++;
            if (a->memory_report)
                ct_cli_memory_report(total_steps);
            double el = now_s() - t0;
            int64_t limit = a->max_steps > 0 && a->max_steps - (total_steps - step) < steps_per_epoch
                                ? a->max_steps - (total_steps - step)
                                : steps_per_epoch;
            if (step % 10 == 0 || step == limit)
                progress(a, epoch, step, limit, loss_avg, seen ? (double)correct / (double)seen : 0, seen / el,
                         el / (double)step * (double)(limit - step));
            if (rc || (a->max_steps > 0 && total_steps >= a->max_steps))
                break;
        }
        if (got < 0) {
            fprintf(stderr, "\nctorch train: %s\n", ct_last_error());
            rc = 1;
        }
        if (rc)
            break;
        final_acc = evaluate(&m, xte, yte, a->eval_limit, a->device);
        if (!(a->max_steps > 0 && total_steps >= a->max_steps && step < steps_per_epoch))
            done_epochs = epoch + 1;
        if (!a->quiet)
            printf("\n");
        printf("epoch %d: train loss %.4f, test accuracy %.2f%% (%.1f s)\n", epoch + 1, loss_avg, 100 * final_acc,
               now_s() - t0);
        if (a->max_steps > 0 && total_steps >= a->max_steps)
            break;
        ct_dataloader_set_epoch(dl, epoch + 1);
    }
    if (rc == 0 && finish_diagnostics(a))
        rc = 1;
    ct_cli_dist_end(a->dist);
    if (rc == 0 && a->out && ct_cli_dist_is_main(a->dist)) {
        if (save_checkpoint(&m, opt, sched, done_epochs, a->out) == CT_OK)
            printf("saved %s.safetensors (weights) and %s.pt (weights, optimizer, epoch)\n", a->out, a->out);
        else {
            fprintf(stderr, "ctorch train: %s\n", ct_last_error());
            rc = 1;
        }
    }
    if (rc == 0)
        printf("test accuracy: %.2f%%\n", 100 * final_acc);
    ct_compiled_free(cstep);
    ct_dataloader_free(dl);
    ct_dataset_free(ds);
    ct_lr_scheduler_free(sched);
    ct_optimizer_free(opt);
    ct_fashion_cnn_free(&m);
    ct_scope_end();
    return rc;
}

int ct_cmd_train(int argc, char **argv) {
    train_args a = {.data_dir = "/usr/share/datasets/fashion-mnist", .out = "fashion_mnist_cnn", .epochs = 2,
                    .batch_size = 64, .lr = 0.05, .seed = 0, .schedule = "cosine", .device = CT_CPU};
    if (argc < 2)
        return usage();
    const char *job = argv[1];
    ct_cli_dist dist = {.world = 1};
    a.dist = &dist;
    if (strcmp(job, "fashion-mnist") == 0) {
        int rc = ct_cli_dist_take_args(&dist, "ctorch train", &argc, argv);
        if (rc)
            return rc;
        if (dist.mode == CT_CLI_ZERO1) {
            fprintf(stderr, "ctorch train: --zero1 runs AdamW; the fashion-mnist job trains with SGD (use --ddp)\n");
            return 2;
        }
    }
    if (strcmp(job, "-h") == 0 || strcmp(job, "--help") == 0)
        return usage_to(stdout, 0);
    if (strcmp(job, "char-gpt") == 0)
        return ct_cmd_train_char_gpt(argc - 1, argv + 1);
    if (strcmp(job, "gpt2") == 0)
        return ct_cmd_train_gpt2(argc - 1, argv + 1);
    for (int i = 2; i < argc; i++) {
        const char *k = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(k, "--quiet") == 0) {
            a.quiet = true;
            continue;
        }
        if (strcmp(k, "--memory-report") == 0) {
            a.memory_report = true;
            continue;
        }
        if (strcmp(k, "--compile") == 0) {
            a.compile = true;
            continue;
        }
        if (!v)
            return usage();
        i++;
        if (strcmp(k, "--epochs") == 0)
            a.epochs = atoi(v);
        else if (strcmp(k, "--max-steps") == 0)
            a.max_steps = atoll(v);
        else if (strcmp(k, "--eval-limit") == 0)
            a.eval_limit = atoll(v);
        else if (strcmp(k, "--batch-size") == 0)
            a.batch_size = atoll(v);
        else if (strcmp(k, "--lr") == 0)
            a.lr = atof(v);
        else if (strcmp(k, "--threads") == 0)
            a.threads = atoi(v);
        else if (strcmp(k, "--seed") == 0)
            a.seed = strtoull(v, NULL, 10);
        else if (strcmp(k, "--synthetic") == 0)
            a.synthetic = atoll(v);
        else if (strcmp(k, "--data") == 0)
            a.data_dir = v;
        else if (strcmp(k, "--out") == 0)
            a.out = *v ? v : NULL; /* --out "": no checkpoint */
        else if (strcmp(k, "--resume") == 0)
            a.resume = v;
        else if (strcmp(k, "--memory-snapshot") == 0)
            a.memory_snapshot = v;
        else if (strcmp(k, "--profile") == 0)
            a.profile = v;
        else if (strcmp(k, "--schedule") == 0)
            a.schedule = v;
        else if (strcmp(k, "--device") == 0) {
            if (ct_device_parse(v, &a.device) || a.device.type == CT_DEVICE_META) {
                fprintf(stderr, "ctorch train: unknown device '%s' (cpu, cuda or cuda:N)\n", v);
                return 2;
            }
        } else
            return usage();
    }
    if (a.epochs < 1 || a.batch_size < 1 || !(a.lr > 0) || !known_schedule(a.schedule))
        return usage();
    if (a.compile && a.dist->mode) {
        fprintf(stderr, "ctorch train: --compile does not combine with --ddp or --diloco yet\n");
        return 2;
    }
    if (strcmp(job, "fashion-mnist") == 0) {
        ct_cli_dist_pick_device(a.dist, &a.device);
        return train_fashion_mnist(&a);
    }
    fprintf(stderr, "ctorch train: unknown job '%s' (available: fashion-mnist, char-gpt, gpt2)\n", job);
    return 2;
}
