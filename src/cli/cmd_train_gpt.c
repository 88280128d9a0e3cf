/* ctorch train char-gpt and ctorch train gpt2: nanoGPT's GPT (src/cli/gpt.h) trained
 * with AdamW, on the CPU or a GPU.
 *
 *   char-gpt  a character-level model on a text file, nanoGPT's shakespeare_char
 *             recipe: the vocabulary is the text's bytes, split 90/10 into training
 *             and validation tokens;
 *   gpt2      GPT-2 (124M and smaller presets) on llm.c's token shards, on any file
 *             read as bytes, or on random tokens (--synthetic, for benchmarks).
 *
 * Both show a progress bar (loss, tokens/s and, on a GPU, model FLOP utilisation),
 * estimate the validation loss at intervals, save the weights as safetensors and the
 * training state as a PyTorch checkpoint (--resume continues from it), and sample
 * from the trained model. --dtype bf16|fp16 trains under autocast (fp16 with a
 * gradient scaler), --tf32 lets float32 products use TF32. */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "commands.h"
#include "ctorch.h"
#include "ctorch/ext.h"
#include "gpt.h"

typedef enum { JOB_CHAR, JOB_GPT2 } gpt_job;

typedef struct {
    gpt_job job;
    const char *prog;                    /* "ctorch train char-gpt" or "ctorch train gpt2" */
    const char *text;                    /* char-gpt */
    const char *train, *val, *tokenizer; /* gpt2 */
    bool synthetic;                      /* gpt2: random tokens, for benchmarks */
    const char *out, *sample_out, *prompt, *resume;
    const char *profile; /* Chrome trace of the training steps */
    const char *preset;
    ct_char_gpt_config cfg;
    int64_t steps, batch, eval_interval, eval_iters, sample_tokens, top_k;
    double lr, beta2, weight_decay, grad_clip, temperature, peak_tflops;
    /* Note [Learning-rate schedule]: warm-up steps, then constant or cosine decay to
     * min_lr at step lr_decay_steps */
    bool lr_cosine;
    int64_t warmup_steps, lr_decay_steps;
    double min_lr;
    int threads;
    uint64_t seed;
    bool quiet, tf32;
    bool memory_report; /* allocator peak and RSS at steps 10, 100, 1000, ... */
    bool compile;       /* forward and backward through ct_compile (docs/compile.md) */
    bool cuda_graphs;   /* the training step captured once and replayed (docs/cuda-graphs.md) */
    ct_device device;
    ct_dtype amp; /* CT_F32: no autocast; CT_BF16 or CT_F16 */
    ct_cli_dist dist; /* --ddp, --zero1, --diloco H */
} gpt_args;

/* Where the tokens come from: a character dataset (char-gpt), token datasets (gpt2;
 * val may be train itself, split 90/10), or one fixed random batch (--synthetic). */
typedef struct {
    ct_char_dataset *chars;
    ct_token_dataset *train, *val;
    ct_tokenizer *tokenizer;
    ct_tensor *sx, *sy;
    int64_t vocab; /* ids the data holds: sampling draws among these */
} gpt_data;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void help(const gpt_args *a, FILE *f) {
    if (a->job == JOB_CHAR)
        fprintf(f,
                "usage: ctorch train char-gpt --text FILE [--preset cpu|shakespeare] [--steps N]\n"
                "         [--batch-size B] [--block-size T] [--layers L] [--heads H] [--embd D]\n"
                "         [--dropout P] [--lr X] [--threads N] [--seed N] [--eval-interval N]\n"
                "         [--eval-iters N] [--sample-tokens N] [--temperature X] [--top-k K]\n"
                "         [--prompt TEXT] [--sample-out FILE] [--out CKPT.safetensors] [--quiet]\n"
                "         [--profile TRACE.json] [--resume STATE.pt] [--cuda-graphs]\n"
                "         [--device cpu|cuda[:N]] [--dtype fp32|bf16|fp16] [--tf32] [--memory-report]\n"
                "         [--compile] [--lr-schedule constant|cosine] [--warmup-steps N] [--min-lr X]\n"
                "         [--lr-decay-steps N]\n"
                "\n"
                "Trains a character-level GPT (pre-LN blocks, causal attention, tanh-GELU MLP,\n"
                "head tied to the token embedding) on FILE with AdamW, then samples text from it.\n"
                "The vocabulary is the set of bytes in FILE; the first 90%% of it trains, the last\n"
                "10%% gives the validation loss. There is no bundled text: pass any plain text file,\n"
                "e.g. the tiny-shakespeare input.txt of nanoGPT's shakespeare_char (nothing is\n"
                "downloaded).\n"
                "\n"
                "presets (options given explicitly override them):\n"
                "  cpu (default)  block 64, 4 layers, 4 heads, embd 128, batch 16, dropout 0,\n"
                "                 lr 3e-4, 2000 steps (bench/train_char_gpt's model)\n"
                "  shakespeare    nanoGPT's shakespeare-char: block 256, 6 layers, 6 heads,\n"
                "                 embd 384, batch 64, dropout 0.2, lr 1e-3, beta2 0.99,\n"
                "                 gradient clipping at 1.0, 5000 steps\n");
    else
        fprintf(f,
                "usage: ctorch train gpt2 (--train FILE [--val FILE] | --synthetic)\n"
                "         [--preset 124m|small|tiny] [--steps N] [--batch-size B] [--block-size T]\n"
                "         [--layers L] [--heads H] [--embd D] [--dropout P] [--lr X]\n"
                "         [--weight-decay X] [--grad-clip X] [--threads N] [--seed N]\n"
                "         [--eval-interval N] [--eval-iters N] [--sample-tokens N] [--temperature X]\n"
                "         [--top-k K] [--prompt TEXT] [--tokenizer FILE] [--sample-out FILE]\n"
                "         [--out CKPT.safetensors] [--resume STATE.pt] [--profile TRACE.json]\n"
                "         [--device cpu|cuda[:N]] [--dtype fp32|bf16|fp16] [--tf32]\n"
                "         [--peak-tflops X] [--quiet] [--memory-report] [--cuda-graphs]\n"
                "         [--lr-schedule constant|cosine] [--warmup-steps N] [--min-lr X]\n"
                "         [--lr-decay-steps N]\n"
                "\n"
                "Trains GPT-2 (nanoGPT's model: pre-LN blocks, causal attention, tanh-GELU MLP,\n"
                "head tied to the token embedding, GPT-2's initialisation) with AdamW (weight\n"
                "decay on the matrices only), then samples from it.\n"
                "\n"
                "data:\n"
                "  --train FILE   llm.c's token shard format (a 1024-byte header with magic\n"
                "                 20240520, then uint16 GPT-2 ids; vocabulary padded to 50304),\n"
                "                 or any other file read as bytes (vocabulary 256)\n"
                "  --val FILE     validation tokens (default: the last 10%% of --train)\n"
                "  --synthetic    one fixed batch of random tokens (vocabulary 50304): for\n"
                "                 measuring speed, as shared/bench/torch_peer.py does\n"
                "  --tokenizer F  llm.c's gpt2_tokenizer.bin, to print samples of a shard's\n"
                "                 model as text (else they print as token ids)\n"
                "\n"
                "presets (options given explicitly override them):\n"
                "  124m (default) GPT-2 small: block 1024, 12 layers, 12 heads, embd 768,\n"
                "                 batch 8, lr 6e-4, beta2 0.95, weight decay 0.1, clip 1.0\n"
                "  small          block 512, 6 layers, 6 heads, embd 384, batch 16, lr 1e-3\n"
                "  tiny           block 64, 2 layers, 2 heads, embd 64, batch 8, lr 1e-3\n"
                "                 (for trying the command out on a CPU)\n");
    fprintf(f,
            "\n"
            "  --device D         cpu (default) or cuda, cuda:N\n"
            "  --dtype fp32|bf16|fp16  fp32 (default); bf16 or fp16 run the forward pass\n"
            "                     under autocast (matrix products and attention in the low\n"
            "                     precision, norms, softmax and the loss in float32); fp16\n"
            "                     scales the loss with a gradient scaler\n"
            "  --tf32             float32 matrix products may use TF32 on the GPU\n"
            "                     (ct_set_float32_matmul_precision(\"high\"))\n"
            "  --cuda-graphs      capture the training step (forward, backward, clipping,\n"
            "                     AdamW) as a CUDA graph after one eager step and replay it;\n"
            "                     dropout draws fresh numbers at every replay (docs/cuda-graphs.md)\n"
            "  --lr-schedule S    constant (default: --lr at every step) or cosine (nanoGPT's:\n"
            "                     from --lr down to --min-lr at --lr-decay-steps, then flat)\n"
            "  --warmup-steps N   first raise the rate linearly, lr * (step + 1) / (N + 1) for\n"
            "                     steps 0 to N - 1 (default 0: no warm-up)\n"
            "  --min-lr X         cosine: the final rate (default --lr / 10)\n"
            "  --lr-decay-steps N\n"
            "                     cosine: the step where the decay ends (default --steps)\n"
            "  --peak-tflops X    the device's peak for the MFU figure (default: the\n"
            "                     datasheet figure of known GPUs for the precision in use)\n"
            "  --eval-interval N  steps between validation losses (default steps / 10)\n"
            "  --eval-iters N     validation batches per estimate (default 20)\n"
            "  --sample-tokens N  tokens sampled after training (default 300, 0: none)\n"
            "  --temperature X    sampling temperature (default 1.0; 0 picks the likeliest)\n"
            "  --top-k K          sample among the K likeliest tokens (default 0: all)\n"
            "  --prompt TEXT      text the sample continues (default a newline; gpt2 on a\n"
            "                     token shard starts from the end-of-text token)\n"
            "  --sample-out FILE  also write the sample to FILE\n"
            "  --out PATH         checkpoint (default %s; \"\": none); the training\n"
            "                     state (weights, AdamW state, step, seed) goes beside it as\n"
            "                     PATH without .safetensors plus .pt\n"
            "  --resume FILE      continue from a training state up to --steps (same model\n"
            "                     options; dropout draws restart from the seed)\n"
            "  --profile FILE     Chrome trace of the training steps (chrome://tracing, Perfetto)\n"
            "  --ddp | --zero1 | --diloco H  under ctorch run -n N or torchrun: DDP, ZeRO-1\n"
            "                     or DiLoCo (outer step every H steps; --diloco-bf16,\n"
            "                     --diloco-outer-lr X); each rank draws its own batches\n"
            "                     (docs/distributed.md)\n",
            a->job == JOB_CHAR ? "char_gpt.safetensors" : "gpt2.safetensors");
}

static int usage_error(const gpt_args *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int usage_error(const gpt_args *a, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s: ", a->prog);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n(see %s --help)\n", a->prog);
    va_end(ap);
    return 2;
}

static bool parse_int(const char *v, int64_t lo, int64_t hi, int64_t *out) {
    char *end;
    errno = 0;
    long long x = strtoll(v, &end, 10);
    if (errno || end == v || *end || x < lo || x > hi)
        return false;
    *out = x;
    return true;
}

static bool parse_double(const char *v, double lo, double hi, double *out) {
    char *end;
    errno = 0;
    double x = strtod(v, &end);
    if (errno || end == v || *end || !(x >= lo && x <= hi))
        return false;
    *out = x;
    return true;
}

typedef struct {
    const char *name;
    int64_t block, layers, heads, embd, batch, steps;
    double dropout, lr, beta2, weight_decay, grad_clip;
} gpt_preset;

/* char-gpt keeps torch.optim.AdamW's default weight decay (0.01, on every parameter);
 * gpt2 follows nanoGPT's GPT-2 recipe (0.1 on the matrices, none on biases and norms). */
static const gpt_preset CHAR_PRESETS[] = {
    {"cpu", 64, 4, 4, 128, 16, 2000, 0, 3e-4, 0.999, 0.01, 0},
    {"shakespeare", 256, 6, 6, 384, 64, 5000, 0.2, 1e-3, 0.99, 0.01, 1.0},
};
static const gpt_preset GPT2_PRESETS[] = {
    {"124m", 1024, 12, 12, 768, 8, 1000, 0, 6e-4, 0.95, 0.1, 1.0},
    {"small", 512, 6, 6, 384, 16, 1000, 0, 1e-3, 0.95, 0.1, 1.0},
    {"tiny", 64, 2, 2, 64, 8, 200, 0, 1e-3, 0.95, 0.1, 1.0},
};

static const gpt_preset *find_preset(const gpt_args *a, const char *name) {
    const gpt_preset *p = a->job == JOB_CHAR ? CHAR_PRESETS : GPT2_PRESETS;
    size_t n = a->job == JOB_CHAR ? sizeof CHAR_PRESETS / sizeof *p : sizeof GPT2_PRESETS / sizeof *p;
    for (size_t i = 0; i < n; i++)
        if (strcmp(p[i].name, name) == 0)
            return &p[i];
    return NULL;
}

static void apply_preset(gpt_args *a, const gpt_preset *p) {
    a->preset = p->name;
    a->cfg = (ct_char_gpt_config){.block = p->block, .n_layer = p->layers, .n_head = p->heads, .n_embd = p->embd,
                                  .dropout = p->dropout, .gpt2_init = true};
    a->batch = p->batch;
    a->steps = p->steps;
    a->lr = p->lr;
    a->beta2 = p->beta2;
    a->weight_decay = p->weight_decay;
    a->grad_clip = p->grad_clip;
}

static bool parse_dtype(const char *v, ct_dtype *out) {
    if (strcmp(v, "fp32") == 0 || strcmp(v, "float32") == 0)
        *out = CT_F32;
    else if (strcmp(v, "bf16") == 0 || strcmp(v, "bfloat16") == 0)
        *out = CT_BF16;
    else if (strcmp(v, "fp16") == 0 || strcmp(v, "float16") == 0)
        *out = CT_F16;
    else
        return false;
    return true;
}

/* Parses argv (argv[0] is the job): 0 when training should go on, else the exit code. */
static int parse_args(gpt_args *a, int argc, char **argv, bool *done) {
    *done = false;
    const char *preset = a->job == JOB_CHAR ? "cpu" : "124m";
    for (int i = 1; i < argc; i++) { /* the preset first: explicit options override it */
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            help(a, stdout);
            *done = true;
            return 0;
        }
        if (strcmp(argv[i], "--preset") == 0 && i + 1 < argc)
            preset = argv[i + 1];
    }
    const gpt_preset *p = find_preset(a, preset);
    if (!p)
        return usage_error(a, "unknown preset '%s' (available: %s)", preset,
                           a->job == JOB_CHAR ? "cpu, shakespeare" : "124m, small, tiny");
    apply_preset(a, p);
    a->out = a->job == JOB_CHAR ? "char_gpt.safetensors" : "gpt2.safetensors";
    a->eval_iters = 20;
    a->sample_tokens = 300;
    a->temperature = 1.0;
    a->prompt = NULL;
    a->device = CT_CPU;
    a->amp = CT_F32;
    int64_t eval_interval = -1;
    const char *schedule = "constant";
    a->min_lr = -1;         /* default: lr / 10, once lr is known */
    a->lr_decay_steps = -1; /* default: steps */
    for (int i = 1; i < argc; i++) {
        const char *k = argv[i];
        bool *flag = strcmp(k, "--quiet") == 0                                 ? &a->quiet
                     : strcmp(k, "--tf32") == 0                                ? &a->tf32
                     : strcmp(k, "--memory-report") == 0                       ? &a->memory_report
                     : strcmp(k, "--cuda-graphs") == 0                         ? &a->cuda_graphs
                     : a->job == JOB_GPT2 && strcmp(k, "--synthetic") == 0 ? &a->synthetic
                     : a->job == JOB_CHAR && strcmp(k, "--compile") == 0   ? &a->compile
                                                                               : NULL;
        if (flag) { /* options without a value */
            *flag = true;
            continue;
        }
        if (strncmp(k, "--", 2) != 0)
            return usage_error(a, "unexpected argument '%s'", k);
        if (i + 1 >= argc)
            return usage_error(a, "%s needs a value", k);
        const char *v = argv[++i];
        int64_t n = 0;
        bool ok = true;
        if (strcmp(k, "--preset") == 0)
            continue;
        else if (a->job == JOB_CHAR && strcmp(k, "--text") == 0)
            a->text = v;
        else if (a->job == JOB_GPT2 && strcmp(k, "--train") == 0)
            a->train = v;
        else if (a->job == JOB_GPT2 && strcmp(k, "--val") == 0)
            a->val = v;
        else if (a->job == JOB_GPT2 && strcmp(k, "--tokenizer") == 0)
            a->tokenizer = v;
        else if (strcmp(k, "--out") == 0)
            a->out = v;
        else if (strcmp(k, "--sample-out") == 0)
            a->sample_out = v;
        else if (strcmp(k, "--profile") == 0)
            a->profile = v;
        else if (strcmp(k, "--resume") == 0)
            a->resume = v;
        else if (strcmp(k, "--prompt") == 0)
            a->prompt = v;
        else if (strcmp(k, "--steps") == 0)
            ok = parse_int(v, 1, INT64_C(1) << 40, &a->steps);
        else if (strcmp(k, "--batch-size") == 0)
            ok = parse_int(v, 1, 1 << 20, &a->batch);
        else if (strcmp(k, "--block-size") == 0)
            ok = parse_int(v, 1, 1 << 20, &a->cfg.block);
        else if (strcmp(k, "--layers") == 0)
            ok = parse_int(v, 1, 1024, &a->cfg.n_layer);
        else if (strcmp(k, "--heads") == 0)
            ok = parse_int(v, 1, 1024, &a->cfg.n_head);
        else if (strcmp(k, "--embd") == 0)
            ok = parse_int(v, 1, 1 << 16, &a->cfg.n_embd);
        else if (strcmp(k, "--dropout") == 0)
            ok = parse_double(v, 0, 0.999, &a->cfg.dropout);
        else if (strcmp(k, "--lr") == 0)
            ok = parse_double(v, 1e-12, 10, &a->lr) && a->lr > 0;
        else if (strcmp(k, "--lr-schedule") == 0)
            schedule = v;
        else if (strcmp(k, "--warmup-steps") == 0)
            ok = parse_int(v, INT64_MIN, INT64_C(1) << 40, &a->warmup_steps);
        else if (strcmp(k, "--lr-decay-steps") == 0)
            ok = parse_int(v, 1, INT64_C(1) << 40, &a->lr_decay_steps);
        else if (strcmp(k, "--min-lr") == 0)
            ok = parse_double(v, 0, 10, &a->min_lr);
        else if (strcmp(k, "--weight-decay") == 0)
            ok = parse_double(v, 0, 10, &a->weight_decay);
        else if (strcmp(k, "--grad-clip") == 0)
            ok = parse_double(v, 0, 1e9, &a->grad_clip);
        else if (strcmp(k, "--peak-tflops") == 0)
            ok = parse_double(v, 1e-6, 1e9, &a->peak_tflops);
        else if (strcmp(k, "--threads") == 0) {
            ok = parse_int(v, 1, 4096, &n);
            a->threads = (int)n;
        } else if (strcmp(k, "--seed") == 0) {
            ok = parse_int(v, 0, INT64_MAX, &n);
            a->seed = (uint64_t)n;
        } else if (strcmp(k, "--eval-interval") == 0)
            ok = parse_int(v, 1, INT64_C(1) << 40, &eval_interval);
        else if (strcmp(k, "--eval-iters") == 0)
            ok = parse_int(v, 1, 1 << 20, &a->eval_iters);
        else if (strcmp(k, "--sample-tokens") == 0)
            ok = parse_int(v, 0, 1 << 24, &a->sample_tokens);
        else if (strcmp(k, "--top-k") == 0)
            ok = parse_int(v, 0, 1 << 24, &a->top_k);
        else if (strcmp(k, "--temperature") == 0)
            ok = parse_double(v, 0, 1e6, &a->temperature);
        else if (strcmp(k, "--dtype") == 0)
            ok = parse_dtype(v, &a->amp);
        else if (strcmp(k, "--device") == 0) {
            if (ct_device_parse(v, &a->device) || a->device.type == CT_DEVICE_META) {
                ct_clear_error();
                return usage_error(a, "unknown device '%s' (cpu, cuda or cuda:N)", v);
            }
        } else
            return usage_error(a, "unknown option '%s'", k);
        if (!ok)
            return usage_error(a, "invalid value '%s' for %s", v, k);
    }
    if (a->job == JOB_CHAR && !a->text)
        return usage_error(a, "--text FILE is required (there is no bundled text; any plain text file will do)");
    if (a->job == JOB_GPT2 && !a->train == !a->synthetic)
        return usage_error(a, "give either --train FILE (an llm.c token shard or any file as bytes) or --synthetic");
    if (a->job == JOB_GPT2 && a->val && !a->train)
        return usage_error(a, "--val needs --train");
    if (a->cfg.n_embd % a->cfg.n_head) {
        fprintf(stderr, "%s: --embd (%lld) must be a multiple of --heads (%lld)\n", a->prog,
                (long long)a->cfg.n_embd, (long long)a->cfg.n_head);
        return 2;
    }
    if (a->amp == CT_F16 && a->device.type != CT_DEVICE_CUDA)
        return usage_error(a, "--dtype fp16 needs --device cuda (on the CPU, use bf16)");
    if (a->compile && a->amp == CT_F16)
        return usage_error(a, "--compile does not take --dtype fp16 (the gradient scaler reads its scale on the host); "
                              "use bf16");
    if (a->cuda_graphs && a->device.type != CT_DEVICE_CUDA)
        return usage_error(a, "--cuda-graphs needs --device cuda");
    if (a->cuda_graphs && a->amp == CT_F16)
        return usage_error(a, "--cuda-graphs does not take --dtype fp16 (the gradient scaler reads its scale on "
                              "the host); use bf16");
    if ((a->cuda_graphs || a->compile) && a->dist.mode)
        return usage_error(a, "--cuda-graphs and --compile do not combine with --ddp, --zero1 or --diloco yet");
    if (a->cuda_graphs && a->compile)
        return usage_error(a, "--cuda-graphs and --compile do not combine yet");
    if (strcmp(schedule, "cosine") == 0)
        a->lr_cosine = true;
    else if (strcmp(schedule, "constant") != 0)
        return usage_error(a, "unknown --lr-schedule '%s' (constant or cosine)", schedule);
    if (a->warmup_steps < 0)
        return usage_error(a, "--warmup-steps must be >= 0, got %lld", (long long)a->warmup_steps);
    if (!a->lr_cosine && (a->min_lr >= 0 || a->lr_decay_steps > 0))
        return usage_error(a, "--min-lr and --lr-decay-steps go with --lr-schedule cosine");
    if (a->min_lr > a->lr)
        return usage_error(a, "--min-lr (%g) must not exceed --lr (%g)", a->min_lr, a->lr);
    if (a->min_lr < 0)
        a->min_lr = a->lr / 10; /* nanoGPT's advice: about a tenth of the peak */
    if (a->lr_decay_steps < 0)
        a->lr_decay_steps = a->steps;
    if (a->lr_cosine && a->lr_decay_steps <= a->warmup_steps)
        return usage_error(a, "--lr-decay-steps (%lld) must be greater than --warmup-steps (%lld)",
                           (long long)a->lr_decay_steps, (long long)a->warmup_steps);
    a->eval_interval = eval_interval > 0 ? eval_interval : (a->steps >= 10 ? a->steps / 10 : a->steps);
    return 0;
}

/* ------------------------------------------------------------ data */

static ct_status open_data(const gpt_args *a, gpt_data *d) {
    if (a->job == JOB_CHAR) {
        d->chars = ct_char_dataset_from_file(a->text, 0.1);
        if (!d->chars)
            return ct_last_status();
        d->vocab = ct_char_dataset_vocab_size(d->chars);
        return CT_OK;
    }
    if (a->synthetic) {
        d->vocab = 50304; /* GPT-2's 50257 padded to a multiple of 64, as nanoGPT does */
        return CT_OK;
    }
    d->train = ct_token_dataset_open(a->train, a->val ? 0.0 : 0.1);
    d->val = d->train && a->val ? ct_token_dataset_open(a->val, 0.0) : NULL;
    if (!d->train || (a->val && !d->val))
        return ct_last_status();
    if (a->val && ct_token_dataset_format(d->val) != ct_token_dataset_format(d->train))
        return ct_error(CT_ERROR_VALUE, "gpt2", "%s and %s hold different kinds of tokens (a shard and bytes)",
                        a->train, a->val);
    d->vocab = ct_token_dataset_vocab_size(d->train);
    if (a->tokenizer) {
        d->tokenizer = ct_tokenizer_load(a->tokenizer);
        if (!d->tokenizer)
            return ct_last_status();
        if (ct_tokenizer_vocab_size(d->tokenizer) < d->vocab)
            return ct_error(CT_ERROR_VALUE, "gpt2", "%s has %lld tokens, fewer than the data's vocabulary (%lld)",
                            a->tokenizer, (long long)ct_tokenizer_vocab_size(d->tokenizer), (long long)d->vocab);
    }
    return CT_OK;
}

static void close_data(gpt_data *d) {
    ct_char_dataset_free(d->chars);
    if (d->val != d->train)
        ct_token_dataset_free(d->val);
    ct_token_dataset_free(d->train);
    ct_tokenizer_free(d->tokenizer);
    ct_release(d->sx);
    ct_release(d->sy);
    *d = (gpt_data){0};
}

/* The model's vocabulary: the data's, padded to a multiple of 64 for a GPT-2 shard
 * (50257 -> 50304, nanoGPT's padding: faster products, the extra logits learn to stay
 * low since no target uses them). */
static int64_t model_vocab(const gpt_args *a, const gpt_data *d) {
    if (a->job == JOB_GPT2 && d->vocab > 256)
        return (d->vocab + 63) / 64 * 64;
    return d->vocab;
}

/* Tokens the split holds, for the size checks; the synthetic batch repeats forever. */
static int64_t split_len(const gpt_data *d, ct_text_split split) {
    if (d->chars)
        return ct_char_dataset_len(d->chars, split);
    if (!d->train)
        return INT64_MAX;
    if (d->val)
        return ct_token_dataset_len(split == CT_SPLIT_VAL ? d->val : d->train, CT_SPLIT_TRAIN);
    return ct_token_dataset_len(d->train, split);
}

/* Batch `index` of a split (x, y of shape (batch, block)) on the training device, in
 * the current scope. */
static ct_status get_batch(const gpt_args *a, gpt_data *d, ct_text_split split, uint64_t seed, uint64_t index,
                           ct_tensor **x, ct_tensor **y) {
    ct_status st;
    if (d->chars) {
        st = ct_char_dataset_batch(d->chars, split, a->batch, a->cfg.block, seed, index, x, y);
    } else if (d->train) {
        bool sep = d->val && split == CT_SPLIT_VAL;
        st = ct_token_dataset_batch(sep ? d->val : d->train, d->val ? CT_SPLIT_TRAIN : split, a->batch, a->cfg.block,
                                    seed, index, x, y);
    } else { /* --synthetic: one batch drawn once, on the device, reused (torch_peer.py's benchmark) */
        if (!d->sx) { /* held by d past the caller's scope (close_data releases them) */
            d->sx = ct_retain(ct_randint(0, d->vocab, CT_SHAPE(a->batch, a->cfg.block), CT_I64, a->device));
            d->sy = ct_retain(ct_randint(0, d->vocab, CT_SHAPE(a->batch, a->cfg.block), CT_I64, a->device));
            if (!d->sx || !d->sy)
                return ct_last_status();
        }
        *x = d->sx;
        *y = d->sy;
        return CT_OK;
    }
    if (st == CT_OK && a->device.type != CT_DEVICE_CPU) {
        *x = ct_to_device(*x, a->device);
        *y = *x ? ct_to_device(*y, a->device) : NULL;
        st = *y ? CT_OK : ct_last_status();
    }
    return st;
}

/* ------------------------------------------------------------ precision */

/* Model FLOP utilisation's denominator: the datasheet's dense peak of known GPUs for the
 * precision in use (H100/H200 SXM: 989 TFLOP/s bf16/fp16, 495 TF32, 67 fp32; A100: 312,
 * 156, 19.5), or --peak-tflops; 0 when unknown (no MFU shown). */
static double peak_flops(const gpt_args *a) {
    if (a->peak_tflops > 0)
        return a->peak_tflops * 1e12;
    ct_cuda_device_properties p;
    if (a->device.type != CT_DEVICE_CUDA || ct_cuda_get_device_properties(a->device.index, &p)) {
        ct_clear_error();
        return 0;
    }
    static const struct {
        const char *name;
        double half, tf32, fp32;
    } known[] = {{"H100", 989e12, 495e12, 67e12}, {"H200", 989e12, 495e12, 67e12}, {"A100", 312e12, 156e12, 19.5e12}};
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        if (strstr(p.name, known[i].name))
            return a->amp != CT_F32 ? known[i].half : a->tf32 ? known[i].tf32 : known[i].fp32;
    return 0;
}

/* nanoGPT's estimate of a training token's FLOPs: 6 per parameter, plus attention's
 * 12 * layers * embd * block. */
static double flops_per_token(const gpt_args *a, int64_t nparams) {
    return 6.0 * (double)nparams + 12.0 * (double)(a->cfg.n_layer * a->cfg.n_embd * a->cfg.block);
}

static ct_status autocast_begin(const gpt_args *a) {
    return a->amp == CT_F32 ? CT_OK : ct_autocast_begin((ct_device_type)a->device.type, a->amp);
}

static void autocast_end(const gpt_args *a) {
    if (a->amp != CT_F32)
        ct_autocast_end();
}

/* The mean loss of the model on idx against targets, under autocast when asked. */
static ct_tensor *model_loss(const gpt_args *a, const ct_char_gpt *m, const ct_tensor *x, const ct_tensor *y) {
    if (autocast_begin(a))
        return NULL;
    ct_tensor *loss = ct_char_gpt_loss(m, x, y);
    autocast_end(a);
    return loss;
}

/* ------------------------------------------------------------ progress and evaluation */

static void progress(const gpt_args *a, int64_t step, double loss, double rate, double mfu, double eta) {
    if (a->quiet)
        return;
    int width = 24, done = (int)(width * step / a->steps);
    char bar[32], util[24] = "";
    for (int i = 0; i < width; i++)
        bar[i] = i < done ? '=' : i == done ? '>' : ' ';
    bar[width] = 0;
    if (mfu > 0)
        snprintf(util, sizeof util, " MFU %4.1f%%", 100 * mfu);
    fprintf(stdout, "\rstep %lld/%lld [%s] %3d%% loss %.4f %7.0f tok/s%s ETA %2d:%02d ", (long long)step,
            (long long)a->steps, bar, (int)(100 * step / a->steps), loss, rate, util, (int)eta / 60, (int)eta % 60);
    fflush(stdout);
}

typedef struct graph_state graph_state;
static ct_tensor *graph_eval_loss(const gpt_args *a, const ct_char_gpt *m, graph_state *g, const ct_tensor *x,
                                  const ct_tensor *y);

/* Mean loss over eval_iters fixed batches of a split (the same batches every time, so
 * successive estimates compare), with dropout off; with --cuda-graphs through the
 * evaluation graph (Note [Graphed training step]), else eagerly. */
static ct_status estimate_loss(ct_char_gpt *m, gpt_data *d, ct_text_split split, const gpt_args *a, graph_state *gs,
                               double *out) {
    bool prev = ct_set_grad_enabled(false);
    ct_char_gpt_train(m, false);
    double sum = 0;
    ct_status st = CT_OK;
    for (int64_t i = 0; i < a->eval_iters && !st; i++) {
        ct_scope_begin();
        ct_tensor *x, *y;
        double v = 0;
        st = get_batch(a, d, split, a->seed + 0x5eed, (uint64_t)i, &x, &y);
        if (!st) {
            ct_tensor *loss = gs ? graph_eval_loss(a, m, gs, x, y) : model_loss(a, m, x, y);
            st = loss ? ct_item_double(loss, &v) : ct_last_status();
        }
        sum += v;
        ct_scope_end();
    }
    ct_char_gpt_train(m, true);
    ct_set_grad_enabled(prev);
    *out = sum / (double)a->eval_iters;
    return st;
}

/* ------------------------------------------------------------ checkpoints */

static void hex(char *dst, const unsigned char *src, int n) {
    static const char digits[] = "0123456789abcdef";
    for (int i = 0; i < n; i++) {
        dst[2 * i] = digits[src[i] >> 4];
        dst[2 * i + 1] = digits[src[i] & 15];
    }
    dst[2 * n] = 0;
}

/* The parameters (the tied head.weight once, as wte.weight) and, as metadata, what a
 * reader needs to rebuild the model and, for char-gpt, its vocabulary. */
static ct_status save_checkpoint(const gpt_args *a, const ct_char_gpt *m, const gpt_data *d, const char *path) {
    ct_value *sd = ct_cli_params_dict((const char *const *)m->names, m->params, m->nparams),
             *meta = ct_value_new_dict();
    char num[32];
    if (d->chars) {
        unsigned char vocab[256];
        char vhex[513];
        int nv = ct_char_dataset_vocab_size(d->chars);
        for (int i = 0; i < nv; i++)
            vocab[i] = (unsigned char)ct_char_dataset_byte(d->chars, i);
        hex(vhex, vocab, nv);
        ct_value_set(meta, "format", ct_value_new_str("ctorch char-gpt"));
        ct_value_set(meta, "vocab_bytes_hex", ct_value_new_str(vhex));
    } else {
        ct_value_set(meta, "format", ct_value_new_str("ctorch gpt2"));
        ct_value_set(meta, "tokens", ct_value_new_str(a->synthetic               ? "synthetic"
                                                      : d->vocab == 256          ? "bytes"
                                                                                 : "gpt2"));
    }
    ct_value_set(meta, "tied", ct_value_new_str("head.weight=wte.weight"));
    const struct {
        const char *key;
        int64_t v;
    } ints[] = {{"vocab_size", m->cfg.vocab},
                {"block_size", m->cfg.block},
                {"n_layer", m->cfg.n_layer},
                {"n_head", m->cfg.n_head},
                {"n_embd", m->cfg.n_embd}};
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) {
        snprintf(num, sizeof num, "%lld", (long long)ints[i].v);
        ct_value_set(meta, ints[i].key, ct_value_new_str(num));
    }
    ct_status st = ct_save_safetensors(path, sd, meta);
    ct_value_free(sd);
    ct_value_free(meta);
    return st;
}

/* Note [GPT training state]
 * Beside the weights, `--out` writes the training state as a PyTorch checkpoint: the
 * parameters by name, the AdamW state dict, the number of steps done and the seed
 * (host tensors, whatever device trained). Batches are drawn from (seed, step), so
 * `--resume` continues with exactly the batches an uninterrupted run would have used,
 * and with dropout 0 the weights come out bit for bit the same on the CPU
 * (tests/train/check_gpt.sh). The global generator (dropout, sampling) is not saved:
 * it restarts from the seed. A state saved on one device resumes on another. */
static void state_path(const char *out, char *buf, size_t cap) {
    size_t n = strlen(out), ext = strlen(".safetensors");
    if (n > ext && strcmp(out + n - ext, ".safetensors") == 0)
        n -= ext;
    snprintf(buf, cap, "%.*s.pt", (int)n, out);
}

static ct_status save_state(const ct_char_gpt *m, ct_optimizer *opt, int64_t step, uint64_t seed, const char *path) {
    ct_value *ckpt = ct_value_new_dict();
    ct_value_set(ckpt, "model", ct_cli_params_dict((const char *const *)m->names, m->params, m->nparams));
    ct_value_set(ckpt, "optimizer", ct_optimizer_state_dict(opt));
    ct_value_set(ckpt, "step", ct_value_new_int(step));
    ct_value_set(ckpt, "seed", ct_value_new_int((int64_t)seed));
    ct_status st = ct_save_pt(path, ckpt);
    ct_value_free(ckpt);
    return st;
}

/* Loads a training state into m and opt; *step gets the steps it had done. */
static ct_status load_state(const gpt_args *a, ct_char_gpt *m, ct_optimizer *opt, const char *path, int64_t *step,
                            uint64_t *seed) {
    ct_value *ckpt = ct_load(path);
    if (!ckpt)
        return ct_last_status();
    ct_status st = CT_OK;
    ct_value *model = ct_value_get(ckpt, "model"), *os = ct_value_get(ckpt, "optimizer");
    ct_value *sv = ct_value_get(ckpt, "step"), *seedv = ct_value_get(ckpt, "seed");
    if (!model || !os || !sv || !seedv)
        st = ct_error(CT_ERROR_FORMAT, a->job == JOB_CHAR ? "char-gpt" : "gpt2",
                      "%s is not a %s training state (it needs model, optimizer, step and seed)", path,
                      a->job == JOB_CHAR ? "char-gpt" : "gpt2");
    if (st == CT_OK)
        st = ct_cli_load_params(model, (const char *const *)m->names, m->params, m->nparams, path);
    if (st == CT_OK)
        st = ct_optimizer_load_state_dict(opt, os);
    if (st == CT_OK) {
        *step = ct_value_int(sv);
        *seed = (uint64_t)ct_value_int(seedv);
    }
    ct_value_free(ckpt);
    return st;
}

/* ------------------------------------------------------------ sampling */

typedef struct {
    double *p, *sorted;
} pick_buf;

static int cmp_desc(const void *x, const void *y) {
    double a = *(const double *)x, b = *(const double *)y;
    return (a < b) - (a > b);
}

/* The next token from the first vocab logits of the last position: temperature,
 * optional top-k, then one draw of the default generator (argmax at temperature 0). */
static ct_status pick(const float *logits, int64_t vocab, const gpt_args *a, pick_buf *buf, int64_t *tok) {
    double best = -INFINITY;
    int64_t arg = 0;
    for (int64_t i = 0; i < vocab; i++)
        if (logits[i] > best)
            best = logits[i], arg = i;
    if (a->temperature == 0) {
        *tok = arg;
        return CT_OK;
    }
    double cut = -INFINITY;
    if (a->top_k > 0 && a->top_k < vocab) { /* the k-th largest logit */
        for (int64_t i = 0; i < vocab; i++)
            buf->sorted[i] = logits[i];
        qsort(buf->sorted, (size_t)vocab, sizeof *buf->sorted, cmp_desc);
        cut = buf->sorted[a->top_k - 1];
    }
    double sum = 0;
    for (int64_t i = 0; i < vocab; i++) {
        buf->p[i] = logits[i] < cut ? 0 : exp((logits[i] - best) / a->temperature);
        sum += buf->p[i];
    }
    ct_scope_begin();
    double u = 0;
    ct_status st = ct_item_double(ct_rand(CT_SHAPE(1), CT_F64, CT_CPU), &u);
    ct_scope_end();
    if (st)
        return st;
    double acc = 0, target = u * sum;
    *tok = arg;
    for (int64_t i = 0; i < vocab; i++) {
        acc += buf->p[i];
        if (buf->p[i] > 0 && target < acc) {
            *tok = i;
            break;
        }
    }
    return CT_OK;
}

/* Samples a->sample_tokens tokens after the prompt into out (sample_tokens ids). */
static ct_status sample(ct_char_gpt *m, const gpt_data *d, const gpt_args *a, int64_t nprompt, const int64_t *prompt,
                        int64_t *out) {
    int64_t total = nprompt + a->sample_tokens;
    int64_t *ctx = malloc((size_t)total * sizeof *ctx);
    pick_buf buf = {malloc((size_t)d->vocab * sizeof(double)), malloc((size_t)d->vocab * sizeof(double))};
    if (!ctx || !buf.p || !buf.sorted) {
        free(ctx);
        free(buf.p);
        free(buf.sorted);
        return ct_error(CT_ERROR_OUT_OF_MEMORY, a->prog, "out of memory for the sample");
    }
    memcpy(ctx, prompt, (size_t)nprompt * sizeof *ctx);
    bool prev = ct_set_grad_enabled(false);
    ct_char_gpt_train(m, false);
    ct_status st = CT_OK;
    for (int64_t len = nprompt; len < total && !st; len++) {
        ct_scope_begin();
        int64_t t = len < m->cfg.block ? len : m->cfg.block;
        ct_tensor *idx = ct_to_device(ct_from_data(ctx + len - t, CT_SHAPE(1, t), CT_I64), a->device);
        ct_tensor *logits = NULL;
        if (idx && !autocast_begin(a)) {
            logits = ct_char_gpt_forward(m, idx);
            autocast_end(a);
        }
        ct_tensor *last = logits ? ct_select(ct_select(logits, 0, 0), 0, t - 1) : NULL;
        last = last ? ct_contiguous(ct_to_device(ct_to_dtype(last, CT_F32), CT_CPU)) : NULL;
        st = last ? pick(ct_tensor_data(last), d->vocab, a, &buf, &ctx[len]) : ct_last_status();
        ct_scope_end();
        if (!st)
            out[len - nprompt] = ctx[len];
    }
    ct_char_gpt_train(m, true);
    ct_set_grad_enabled(prev);
    free(ctx);
    free(buf.p);
    free(buf.sorted);
    return st;
}

/* The prompt's token ids (malloc'ed, *n of them), or NULL with the error set. char-gpt:
 * the prompt's characters, which must be in the vocabulary (the default newline falls
 * back to the first character when the text has none); gpt2 on bytes: its bytes; gpt2
 * on a shard or synthetic tokens: the end-of-text token 50256 (there is no encoder). */
static int64_t *encode_prompt(const gpt_args *a, const gpt_data *d, int64_t *n) {
    const char *text = a->prompt ? a->prompt : "\n";
    size_t len = strlen(text);
    *n = 0;
    if (len == 0) {
        ct_error(CT_ERROR_VALUE, "--prompt", "the prompt is empty");
        return NULL;
    }
    if (!d->chars && d->vocab > 256 && a->prompt) {
        ct_error(CT_ERROR_VALUE, "--prompt", "text prompts need byte tokens; a GPT-2 token model starts "
                 "from the end-of-text token");
        return NULL;
    }
    int64_t *ids = malloc((len + 1) * sizeof *ids);
    if (!ids) {
        ct_error(CT_ERROR_OUT_OF_MEMORY, a->prog, "out of memory");
        return NULL;
    }
    if (d->chars) {
        ct_scope_begin();
        ct_tensor *enc = ct_char_dataset_encode(d->chars, text, len);
        if (enc)
            memcpy(ids, ct_tensor_data(enc), len * sizeof *ids);
        ct_scope_end();
        if (!enc && !a->prompt) {
            ct_clear_error();
            ids[0] = 0;
            len = 1;
        } else if (!enc) {
            free(ids);
            return NULL;
        }
    } else if (d->vocab <= 256) {
        for (size_t i = 0; i < len; i++)
            ids[i] = (unsigned char)text[i];
    } else {
        ids[0] = 50256; /* GPT-2's <|endoftext|> */
        len = 1;
    }
    *n = (int64_t)len;
    return ids;
}

/* Writes the sample as text: bytes for char-gpt and byte tokens, through the tokenizer
 * when there is one, else as space-separated token ids. */
static ct_status write_sample(const gpt_data *d, const int64_t *ids, int64_t n, FILE *f) {
    for (int64_t i = 0; i < n; i++) {
        if (d->chars) {
            fputc(ct_char_dataset_byte(d->chars, (int)ids[i]), f);
        } else if (d->vocab <= 256) {
            fputc((int)ids[i], f);
        } else if (d->tokenizer) {
            size_t len = 0;
            const char *s = ct_tokenizer_decode(d->tokenizer, ids[i], &len);
            if (!s)
                return ct_last_status();
            fwrite(s, 1, len, f);
        } else {
            fprintf(f, "%s%lld", i ? " " : "", (long long)ids[i]);
        }
    }
    return ferror(f) ? ct_error(CT_ERROR_IO, "sample", "write error: %s", strerror(errno)) : CT_OK;
}

/* ------------------------------------------------------------ training */

static int fail(const gpt_args *a, const char *what) {
    fprintf(stderr, "\n%s: %s%s\n", a->prog, what ? what : "", what ? "" : ct_last_error());
    return 1;
}

/* AdamW over the model: char-gpt one group (torch.optim.AdamW's defaults but for lr and
 * beta2); gpt2 nanoGPT's two groups, weight decay on the matrices and embeddings only. */
static ct_optimizer *make_optimizer(const gpt_args *a, const ct_char_gpt *m) {
    ct_optim_options o = ct_adamw_options(a->lr);
    o.beta2 = a->beta2;
    o.weight_decay = a->weight_decay;
    o.capturable = a->cuda_graphs; /* the step number on the device (Note [Graphed training step]) */
    if (a->job == JOB_CHAR)
        return ct_optimizer_new(CT_OPTIM_ADAMW, m->params, m->nparams, &o);
    ct_tensor **decay = malloc((size_t)m->nparams * sizeof *decay), **rest = malloc((size_t)m->nparams * sizeof *rest);
    ct_optimizer *opt = NULL;
    if (decay && rest) {
        int nd = 0, nr = 0;
        for (int i = 0; i < m->nparams; i++) {
            if (ct_tensor_dim(m->params[i]) >= 2)
                decay[nd++] = m->params[i];
            else
                rest[nr++] = m->params[i];
        }
        ct_optim_options o0 = o;
        o0.weight_decay = 0;
        opt = ct_optimizer_new(CT_OPTIM_ADAMW, decay, nd, &o);
        if (opt && nr && ct_optimizer_add_param_group(opt, rest, nr, &o0)) {
            ct_optimizer_free(opt);
            opt = NULL;
        }
    } else {
        ct_error(CT_ERROR_OUT_OF_MEMORY, a->prog, "out of memory");
    }
    free(decay);
    free(rest);
    return opt;
}

/* Note [Learning-rate schedule]
 * nanoGPT's get_lr: for steps 0 to warmup_steps - 1 the rate rises linearly, lr * (step
 * + 1) / (warmup_steps + 1); then the constant schedule keeps lr, and the cosine one
 * decays from lr to min_lr, min_lr + (1 + cos(pi * r)) / 2 * (lr - min_lr) with r the
 * fraction of the steps from warmup_steps to lr_decay_steps gone by, and keeps min_lr
 * after that. The rate is a function of the step number alone, written into every
 * group with ct_optimizer_set_lr before each step, so --resume goes on with the
 * schedule where the saved run left it; --compile's step reads it at each call (the
 * update is a host call), and --cuda-graphs's replays read it from the device (the
 * capturable AdamW keeps it there: Note [Device learning rate] in
 * src/optim/optimizer.c). It is written before the captured step begins, never inside
 * the capture, which would record the write and repeat it at every replay. The
 * constant schedule without warm-up writes nothing: the runs of before are unchanged. */
static bool lr_scheduled(const gpt_args *a) {
    return a->lr_cosine || a->warmup_steps > 0;
}

static double lr_at(const gpt_args *a, int64_t step) {
    if (step < a->warmup_steps)
        return a->lr * (double)(step + 1) / (double)(a->warmup_steps + 1);
    if (!a->lr_cosine)
        return a->lr;
    if (step > a->lr_decay_steps)
        return a->min_lr;
    const double r = (double)(step - a->warmup_steps) / (double)(a->lr_decay_steps - a->warmup_steps);
    const double coeff = 0.5 * (1.0 + cos(M_PI * r));
    return a->min_lr + coeff * (a->lr - a->min_lr);
}

/* Note [Learning-rate schedule]: the rate of step `step` into every group (and into
 * ZeRO-1's optimizer, which holds the shards' state). */
static ct_status set_step_lr(const gpt_args *a, ct_optimizer *opt, int64_t step) {
    if (!lr_scheduled(a))
        return CT_OK;
    const double lr = lr_at(a, step);
    for (int g = 0; g < ct_optimizer_num_groups(opt); g++)
        if (ct_optimizer_set_lr(opt, g, lr))
            return ct_last_status();
    if (a->dist.zero && ct_zero1_set_lr(a->dist.zero, lr))
        return ct_last_status();
    return CT_OK;
}

/* Note [Graphed training step]
 * --cuda-graphs: the whole step (forward, backward, clipping folded into the fused
 * AdamW, the update) is captured once as a CUDA graph and replayed (docs/cuda-graphs.md).
 * Training runs on a stream of its own (a graph is captured on one). The first step runs
 * eagerly on static copies of its batch: the warm-up that makes the gradients, the
 * optimizer state with its step number on the device (the capturable option), and
 * cuBLAS's handles. The second is captured into a private pool and replayed; from then
 * on each step copies its batch into the static inputs and replays. The step's loss is
 * the graph's static output, cloned before the next replay overwrites it. The learning
 * rate is not a constant of the graph: AdamW reads it from the device, where each
 * step's rate is written before the step (Note [Learning-rate schedule]).
 *
 * The evaluation forward (eval mode, no gradients) is a second graph in the same pool,
 * reading the same static inputs: its first batch runs eagerly, its second is captured
 * from the pool as the training graph left it (its temporaries free) and replayed, so
 * the two graphs share their temporaries (a graph tree of two branches, docs/
 * cuda-graphs.md). They run one after the other on one stream, and the evaluation's
 * loss is read before the next training replay can overwrite it. The pool's reserved
 * bytes after each capture are reported at the end. */
struct graph_state {
    int device;
    ct_cuda_stream *stream;
    ct_cuda_mempool *pool;
    ct_cuda_graph *graph, *eval_graph;
    ct_tensor *x, *y, *loss; /* static inputs and output (own references) */
    ct_tensor *eval_loss;    /* the evaluation graph's output */
    bool eval_warm;          /* the evaluation forward ran once eagerly */
    int64_t train_bytes, tree_bytes; /* the pool's reserved bytes after each capture */
};

static void graph_state_free(graph_state *g) {
    ct_release(g->x);
    ct_release(g->y);
    ct_release(g->loss);
    ct_release(g->eval_loss);
    ct_cuda_graph_free(g->graph);
    ct_cuda_graph_free(g->eval_graph);
    ct_cuda_mempool_release(g->pool);
    if (g->stream) {
        ct_cuda_set_stream(g->device, NULL);
        ct_cuda_stream_destroy(g->stream);
    }
    memset(g, 0, sizeof *g);
}

/* One training step, eager or being captured: the loss (NULL with the error set). */
static ct_tensor *step_body(const gpt_args *a, const ct_char_gpt *m, ct_optimizer *opt, const ct_tensor *x,
                            const ct_tensor *y) {
    ct_tensor *loss = model_loss(a, m, x, y);
    if (!loss || ct_optimizer_zero_grad(opt, false) || ct_backward(loss, NULL, false, false) ||
        (a->grad_clip > 0 ? ct_optimizer_step_clipped(opt, a->grad_clip, 2.0, NULL) : ct_optimizer_step(opt)))
        return NULL;
    return loss;
}

/* Note [Graphed training step]: captures the training step (opt given) or the
 * evaluation forward (opt NULL) on the static inputs into *graph, in g's pool (made at
 * the first capture); *loss gets the graph's loss (an own reference), and the pool's
 * reserved bytes after the capture go to *bytes. */
static ct_status capture_loss(const gpt_args *a, const ct_char_gpt *m, ct_optimizer *opt, graph_state *g,
                              ct_cuda_graph **graph, ct_tensor **loss, int64_t *bytes) {
    if ((!g->pool && ct_cuda_mempool_create(g->device, &g->pool)) || ct_cuda_graph_begin(g->stream, g->pool))
        return ct_last_status();
    ct_scope_begin();
    ct_tensor *l = opt ? step_body(a, m, opt, g->x, g->y) : model_loss(a, m, g->x, g->y);
    *loss = l ? ct_retain(l) : NULL;
    ct_scope_end();
    char msg[512] = "";
    ct_status body = *loss ? CT_OK : ct_last_status();
    if (body)
        snprintf(msg, sizeof msg, "%s", ct_last_error());
    ct_status st = ct_cuda_graph_end(g->stream, graph);
    if (body && !st) { /* the capture is sound but the work failed: report the work's error */
        ct_cuda_graph_free(*graph);
        *graph = NULL;
        return ct_error(body, a->prog, "%s", msg);
    }
    if (st || body)
        return st ? st : body;
    ct_cuda_mempool_stats ps;
    if (ct_cuda_mempool_stats_get(g->pool, &ps) == CT_OK)
        *bytes = ps.reserved_bytes;
    return CT_OK;
}

/* Note [Graphed training step]: the step on batch (x, y); its loss, a new tensor of the
 * caller's scope. */
static ct_tensor *graph_step(const gpt_args *a, const ct_char_gpt *m, ct_optimizer *opt, graph_state *g,
                             const ct_tensor *x, const ct_tensor *y) {
    if (!g->x) { /* the warm-up, eagerly on the static inputs */
        ct_scope_begin();
        ct_tensor *sx = ct_clone(x), *sy = ct_clone(y);
        g->x = sx ? ct_retain(sx) : NULL;
        g->y = sy ? ct_retain(sy) : NULL;
        ct_scope_end();
        if (!g->x || !g->y)
            return NULL;
        return step_body(a, m, opt, g->x, g->y);
    }
    if (!ct_copy_(g->x, x) || !ct_copy_(g->y, y))
        return NULL;
    if (!g->graph) {
        if (capture_loss(a, m, opt, g, &g->graph, &g->loss, &g->train_bytes))
            return NULL;
        g->tree_bytes = g->train_bytes;
    }
    if (ct_cuda_graph_replay(g->graph))
        return NULL;
    return ct_clone(ct_detach(g->loss)); /* the next replay overwrites g->loss */
}

/* Note [Graphed training step]: the evaluation loss of batch (x, y), a tensor of the
 * caller's scope, eagerly until the training graph exists and at the first call after
 * it, then through the evaluation graph. */
static ct_tensor *graph_eval_loss(const gpt_args *a, const ct_char_gpt *m, graph_state *g, const ct_tensor *x,
                                  const ct_tensor *y) {
    if (!g->graph || !g->eval_warm) {
        g->eval_warm = g->graph != NULL;
        return model_loss(a, m, x, y);
    }
    if (!ct_copy_(g->x, x) || !ct_copy_(g->y, y))
        return NULL;
    if (!g->eval_graph && capture_loss(a, m, NULL, g, &g->eval_graph, &g->eval_loss, &g->tree_bytes))
        return NULL;
    if (ct_cuda_graph_replay(g->eval_graph))
        return NULL;
    return ct_clone(ct_detach(g->eval_loss)); /* read before the next training replay */
}

static ct_status check_sizes(const gpt_args *a, const gpt_data *d) {
    int64_t ntrain = split_len(d, CT_SPLIT_TRAIN), nval = split_len(d, CT_SPLIT_VAL);
    if (ntrain > a->cfg.block && nval > a->cfg.block)
        return CT_OK;
    return ct_error(CT_ERROR_VALUE, a->prog,
                    "%s is too short: %lld tokens for training and %lld for validation, and each part needs more "
                    "than the block size (%lld); use more data or a smaller --block-size",
                    a->job == JOB_CHAR ? a->text : a->train, (long long)ntrain, (long long)nval,
                    (long long)a->cfg.block);
}

static void describe(const gpt_args *a, const gpt_data *d, const ct_char_gpt *m) {
    char dev[32], lr[160], warm[48] = "";
    ct_device_str(a->device, dev, sizeof dev);
    if (a->warmup_steps > 0)
        snprintf(warm, sizeof warm, "%lld warm-up steps%s", (long long)a->warmup_steps, a->lr_cosine ? ", " : "");
    if (a->lr_cosine)
        snprintf(lr, sizeof lr, "%g (%scosine to %g at step %lld)", a->lr, warm, a->min_lr,
                 (long long)a->lr_decay_steps);
    else if (a->warmup_steps > 0)
        snprintf(lr, sizeof lr, "%g (%s)", a->lr, warm);
    else
        snprintf(lr, sizeof lr, "%g", a->lr);
    if (d->chars)
        printf("char-gpt (%s): %s, %lld characters, vocabulary %lld, %lld train / %lld val tokens\n", a->preset,
               a->text, (long long)(split_len(d, CT_SPLIT_TRAIN) + split_len(d, CT_SPLIT_VAL)),
               (long long)a->cfg.vocab, (long long)split_len(d, CT_SPLIT_TRAIN), (long long)split_len(d, CT_SPLIT_VAL));
    else if (a->synthetic)
        printf("gpt2 (%s): synthetic tokens (one random batch), vocabulary %lld\n", a->preset, (long long)d->vocab);
    else
        printf("gpt2 (%s): %s (%s), vocabulary %lld (model %lld), %lld train / %lld val tokens\n", a->preset, a->train,
               d->vocab > 256 ? "GPT-2 token shard" : "bytes", (long long)d->vocab, (long long)a->cfg.vocab,
               (long long)split_len(d, CT_SPLIT_TRAIN), (long long)split_len(d, CT_SPLIT_VAL));
    printf("model: %lld layers, %lld heads, embd %lld, block %lld, dropout %g: %lld parameters; batch %lld, "
           "lr %s, %s",
           (long long)a->cfg.n_layer, (long long)a->cfg.n_head, (long long)a->cfg.n_embd, (long long)a->cfg.block,
           a->cfg.dropout, (long long)ct_char_gpt_num_params(m), (long long)a->batch, lr, dev);
    if (a->device.type == CT_DEVICE_CPU)
        printf(", %d threads", ct_get_num_threads());
    printf(", %s%s\n", a->amp == CT_BF16 ? "bf16 autocast" : a->amp == CT_F16 ? "fp16 autocast" : "fp32",
           a->amp == CT_F32 && a->tf32 ? " (TF32 products)" : "");
}

/* --compile: the whole step (zero_grad, forward, backward, clipping, optimizer step) as
 * one compiled function; zero_grad, clipping and the step are host-call nodes that
 * read the learning rate and count the step on every replay (docs/compile.md). */
typedef struct compiled_step {
    const gpt_args *a;
    const ct_char_gpt *m;
    ct_optimizer *opt;
} compiled_step;

static ct_tensor *train_step(ct_tensor *const *in, int n, void *ud) {
    (void)n;
    const compiled_step *s = ud;
    if (ct_optimizer_zero_grad(s->opt, true) != CT_OK)
        return NULL;
    ct_tensor *loss = model_loss(s->a, s->m, in[0], in[1]);
    if (!loss || ct_backward(loss, NULL, false, false) != CT_OK)
        return NULL;
    if (s->a->grad_clip > 0 && ct_clip_grad_norm_(s->m->params, s->m->nparams, s->a->grad_clip, 2.0, false, NULL))
        return NULL;
    return ct_optimizer_step(s->opt) == CT_OK ? loss : NULL;
}

static int run(gpt_args *a) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (a->threads > 0)
        ct_set_num_threads(a->threads);
    if (a->tf32 && ct_set_float32_matmul_precision("high"))
        return fail(a, NULL);
    ct_manual_seed(a->seed);
    gpt_data d = {0};
    if (open_data(a, &d) || check_sizes(a, &d)) {
        fprintf(stderr, "%s: %s\n", a->prog, ct_last_error());
        close_data(&d);
        return 1;
    }
    a->cfg.vocab = model_vocab(a, &d);
    int64_t nprompt = 0;
    int64_t *prompt = encode_prompt(a, &d, &nprompt);
    int rc = 0;
    if (!prompt) {
        fprintf(stderr, "%s: %s\n", a->prog, ct_last_error());
        close_data(&d);
        return 2;
    }
    ct_scope_begin();
    ct_char_gpt m = {0};
    ct_optimizer *opt = NULL;
    ct_grad_scaler *scaler = NULL;
    /* the weights are drawn on the CPU and then moved, so a model starts from the same
     * weights on every device */
    if (ct_char_gpt_init(&m, &a->cfg) ||
        (a->device.type != CT_DEVICE_CPU && ct_char_gpt_to(&m, a->device, CT_DTYPE_UNDEFINED)) ||
        !(opt = make_optimizer(a, &m)))
        rc = fail(a, NULL);
    if (!rc && a->amp == CT_F16) {
        ct_grad_scaler_options so = ct_grad_scaler_defaults();
        if (!(scaler = ct_grad_scaler_new(&so)))
            rc = fail(a, NULL);
    }
    if (!rc)
        describe(a, &d, &m);
    int64_t start = 0;
    if (!rc && a->resume) {
        if (load_state(a, &m, opt, a->resume, &start, &a->seed)) {
            rc = fail(a, NULL);
        } else {
            ct_manual_seed(a->seed);
            printf("resumed from %s after step %lld (seed %llu)\n", a->resume, (long long)start,
                   (unsigned long long)a->seed);
        }
    }
    /* After a resume: DiLoCo's global copy and DDP's broadcast start from the loaded weights. */
    if (!rc && ct_cli_dist_start(&a->dist, m.params, m.nparams, opt, a->lr, a->beta2, a->weight_decay, scaler != NULL))
        rc = fail(a, NULL);
    if (!rc && a->profile && ct_profiler_start(a->profile))
        rc = fail(a, NULL);
    const double peak = peak_flops(a), fpt = flops_per_token(a, ct_char_gpt_num_params(&m));
    const int64_t tokens = a->batch * a->cfg.block, log_every = 10;
    /* Note [Loss without a sync per step]
     * The step's loss is added to a device tensor and read back every log_every steps
     * (and at validation): reading it each step would wait for the GPU every step and
     * leave it idle while the host queues the next one. */
    ct_tensor *loss_sum = NULL;
    compiled_step cs = {a, &m, opt};
    ct_compiled *cstep = NULL;
    if (!rc && a->compile && !(cstep = ct_compile(train_step, &cs, 0)))
        rc = fail(a, NULL);
    int64_t in_sum = 0, last_done = start;
    double t0 = now_s(), t_last = t0, avg = NAN, first = NAN;
    graph_state gs = {.device = a->device.index};
    /* the model's weights were made on the default stream: done before the training
     * stream reads them */
    if (!rc && a->cuda_graphs &&
        (ct_cuda_synchronize(a->device.index) || ct_cuda_stream_create(a->device.index, 0, &gs.stream) ||
         ct_cuda_set_stream(a->device.index, gs.stream)))
        rc = fail(a, NULL);
    for (int64_t step = start; !rc && step < a->steps; step++) {
        ct_scope_begin();
        ct_tensor *x, *y;
        ct_status st = get_batch(a, &d, CT_SPLIT_TRAIN, a->seed, ct_cli_dist_batch_index(&a->dist, step), &x, &y);
        if (!st) /* Note [Learning-rate schedule]: before the step, outside any capture */
            st = set_step_lr(a, opt, step);
        ct_tensor *loss = NULL, *sum = NULL;
        if (!st && a->cuda_graphs) { /* Note [Graphed training step] */
            loss = graph_step(a, &m, opt, &gs, x, y);
            sum = !loss ? NULL : loss_sum ? ct_add(loss_sum, ct_detach(loss)) : ct_detach(loss);
            if (!sum)
                rc = fail(a, NULL);
        } else if (cstep) { /* the whole step, update included, is the compiled function */
            ct_tensor *xy[2] = {x, y};
            loss = st ? NULL : ct_compiled_call(cstep, xy, 2);
            sum = !loss ? NULL : loss_sum ? ct_add(loss_sum, ct_detach(loss)) : ct_detach(loss);
            if (!sum)
                rc = fail(a, NULL);
        } else {
            loss = st ? NULL : model_loss(a, &m, x, y);
            sum = !loss ? NULL : loss_sum ? ct_add(loss_sum, ct_detach(loss)) : ct_detach(loss);
            if (!sum || ct_cli_dist_zero_grad(&a->dist, opt) ||
                ct_backward(scaler ? ct_grad_scaler_scale(scaler, loss) : loss, NULL, false, false) ||
                (scaler && a->grad_clip > 0 && ct_grad_scaler_unscale_(scaler, opt)) ||
                (a->dist.mode ? ct_cli_dist_step(&a->dist, opt, m.params, m.nparams, a->grad_clip)
                 : (a->grad_clip > 0 && ct_clip_grad_norm_(m.params, m.nparams, a->grad_clip, 2.0, false, NULL)) ||
                       (scaler ? ct_grad_scaler_step(scaler, opt) || ct_grad_scaler_update(scaler)
                               : ct_optimizer_step(opt))))
                rc = fail(a, NULL);
        }
        if (!rc) {
            ct_release(loss_sum);
            loss_sum = ct_retain(sum);
            in_sum++;
        }
        ct_scope_end();
        if (rc)
            break;
        int64_t done = step + 1;
        if (a->memory_report)
            ct_cli_memory_report(done);
        bool eval = done % a->eval_interval == 0 || done == a->steps;
        if (done % log_every == 0 || done == start + 1 || eval) {
            double total = 0;
            if (ct_item_double(loss_sum, &total)) {
                rc = fail(a, NULL);
                break;
            }
            avg = total / (double)in_sum;
            if (done == start + 1)
                first = avg;
            ct_release(loss_sum);
            loss_sum = NULL;
            in_sum = 0;
            double now = now_s(), rate = (double)((done - last_done) * tokens) / (now - t_last);
            double el = now - t0;
            progress(a, done, avg, rate, peak > 0 ? rate * fpt / peak : 0,
                     el / (double)(done - start) * (double)(a->steps - done));
            t_last = now;
            last_done = done;
        }
        if (eval) {
            double val = 0;
            if (estimate_loss(&m, &d, CT_SPLIT_VAL, a, a->cuda_graphs ? &gs : NULL, &val)) {
                rc = fail(a, NULL);
                break;
            }
            char lr[48] = ""; /* the rate of the step just done, when it changes */
            if (lr_scheduled(a))
                snprintf(lr, sizeof lr, ", lr %g", lr_at(a, done - 1));
            printf("%sstep %lld: train loss %.4f, val loss %.4f%s (%.1f s)\n", a->quiet ? "" : "\n", (long long)done,
                   avg, val, lr, now_s() - t0);
            t_last = now_s(); /* the rate counts training steps only */
        }
    }
    ct_release(loss_sum);
    if (cstep && !a->quiet)
        printf("compiled step: %lld nodes (%lld captured), %lld in %lld generated kernels, %lld replays\n",
               (long long)ct_compiled_stat(cstep, CT_COMPILE_STAT_NODES),
               (long long)ct_compiled_stat(cstep, CT_COMPILE_STAT_CAPTURED_NODES),
               (long long)ct_compiled_stat(cstep, CT_COMPILE_STAT_FUSED_NODES),
               (long long)ct_compiled_stat(cstep, CT_COMPILE_STAT_FUSED_GROUPS),
               (long long)ct_compiled_stat(cstep, CT_COMPILE_STAT_REPLAYS));
    ct_compiled_free(cstep);
    const int64_t graph_train = gs.train_bytes, graph_tree = gs.eval_graph ? gs.tree_bytes : 0;
    graph_state_free(&gs);
    if (a->profile && ct_profiler_enabled()) {
        if (ct_profiler_stop())
            rc = rc ? rc : fail(a, NULL);
        else if (!rc)
            printf("profile: %s (open it in Perfetto or chrome://tracing)\n", a->profile);
    }
    if (!rc && start < a->steps) {
        printf("first loss %.4f, final train loss %.4f\n", first, avg);
        if (a->device.type == CT_DEVICE_CUDA)
            printf("peak memory: %.0f MiB allocated\n", (double)ct_max_memory_allocated(a->device) / (1 << 20));
        if (graph_train > 0)
            printf("CUDA graphs: the training step's pool %.0f MiB%s", (double)graph_train / (1 << 20),
                   graph_tree ? "" : "\n");
        if (graph_train > 0 && graph_tree)
            printf(", with the evaluation graph %.0f MiB (%.3fx)\n", (double)graph_tree / (1 << 20),
                   (double)graph_tree / (double)graph_train);
        ct_cuda_tunable_stats ts;
        if (a->device.type == CT_DEVICE_CUDA && ct_cuda_tunable_is_enabled() && ct_cuda_tunable_get_stats(&ts) == CT_OK)
            printf("TunableOp: %lld products (%lld tuned, %lld of them off the heuristic's choice; %lld read from "
                   "the results file), %.1f s tuning\n",
                   (long long)ts.results, (long long)ts.tuned, (long long)ts.improved, (long long)ts.read,
                   ts.tuning_ms / 1e3);
    } else if (!rc) {
        printf("nothing to train: %s is already at step %lld of %lld\n", a->resume, (long long)start,
               (long long)a->steps);
    }
    if (!rc && a->out && *a->out && ct_cli_dist_is_main(&a->dist)) { /* --out "" saves nothing */
        char sp[4096];
        state_path(a->out, sp, sizeof sp);
        int64_t done = start > a->steps ? start : a->steps;
        if (save_checkpoint(a, &m, &d, a->out) == CT_OK && save_state(&m, opt, done, a->seed, sp) == CT_OK)
            printf("saved %s and %s (training state)\n", a->out, sp);
        else
            rc = fail(a, NULL);
    }
    ct_cli_dist_end(&a->dist);
    if (!rc && a->sample_tokens > 0 && ct_cli_dist_is_main(&a->dist)) {
        int64_t *ids = malloc((size_t)a->sample_tokens * sizeof *ids);
        if (!ids || sample(&m, &d, a, nprompt, prompt, ids)) {
            rc = fail(a, ids ? NULL : "out of memory for the sample");
        } else {
            printf("sample (%lld %s, temperature %g, top-k %lld):\n", (long long)a->sample_tokens,
                   d.chars ? "characters" : "tokens", a->temperature, (long long)a->top_k);
            if (write_sample(&d, ids, a->sample_tokens, stdout))
                rc = fail(a, NULL);
            printf("\n");
            FILE *f = a->sample_out ? fopen(a->sample_out, "wb") : NULL;
            if (a->sample_out && (!f || write_sample(&d, ids, a->sample_tokens, f))) {
                fprintf(stderr, "%s: cannot write %s: %s\n", a->prog, a->sample_out, strerror(errno));
                rc = 1;
            }
            if (f && fclose(f) && !rc) {
                fprintf(stderr, "%s: cannot write %s: %s\n", a->prog, a->sample_out, strerror(errno));
                rc = 1;
            }
        }
        free(ids);
    }
    ct_grad_scaler_free(scaler);
    ct_optimizer_free(opt);
    ct_char_gpt_free(&m);
    ct_scope_end();
    free(prompt);
    close_data(&d);
    return rc;
}

static int train_job(gpt_job job, int argc, char **argv) {
    gpt_args a = {.job = job, .prog = job == JOB_CHAR ? "ctorch train char-gpt" : "ctorch train gpt2"};
    bool done = false;
    int rc = ct_cli_dist_take_args(&a.dist, a.prog, &argc, argv);
    if (rc)
        return rc;
    rc = parse_args(&a, argc, argv, &done);
    if (rc || done)
        return rc;
    ct_cli_dist_pick_device(&a.dist, &a.device);
    return run(&a);
}

int ct_cmd_train_char_gpt(int argc, char **argv) {
    return train_job(JOB_CHAR, argc, argv);
}

int ct_cmd_train_gpt2(int argc, char **argv) {
    return train_job(JOB_GPT2, argc, argv);
}
