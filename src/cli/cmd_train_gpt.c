/* ctorch train char-gpt: a character-level GPT on a text file, nanoGPT's
 * shakespeare_char recipe. Builds the vocabulary from the text's bytes, splits it 90/10
 * into training and validation tokens, trains with AdamW showing a progress bar,
 * estimates the validation loss at intervals, saves the weights as safetensors and
 * samples text from the trained model. The model is src/cli/gpt.h's. */
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

typedef struct {
    const char *text, *out, *sample_out, *prompt, *resume;
    const char *profile; /* Chrome trace of the training steps */
    const char *preset;
    ct_char_gpt_config cfg;
    int64_t steps, batch, eval_interval, eval_iters, sample_tokens, top_k;
    double lr, beta2, grad_clip, temperature;
    int threads;
    uint64_t seed;
    bool quiet;
} gpt_args;

static const char *const PROG = "ctorch train char-gpt";

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void help(FILE *f) {
    fprintf(f,
            "usage: ctorch train char-gpt --text FILE [--preset cpu|shakespeare] [--steps N]\n"
            "         [--batch-size B] [--block-size T] [--layers L] [--heads H] [--embd D]\n"
            "         [--dropout P] [--lr X] [--threads N] [--seed N] [--eval-interval N]\n"
            "         [--eval-iters N] [--sample-tokens N] [--temperature X] [--top-k K]\n"
            "         [--prompt TEXT] [--sample-out FILE] [--out CKPT.safetensors] [--quiet]\n"
            "         [--profile TRACE.json] [--resume STATE.pt]\n"
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
            "                 gradient clipping at 1.0, 5000 steps\n"
            "\n"
            "  --eval-interval N  steps between validation losses (default steps / 10)\n"
            "  --eval-iters N     validation batches per estimate (default 20)\n"
            "  --sample-tokens N  characters sampled after training (default 300, 0: none)\n"
            "  --temperature X    sampling temperature (default 1.0; 0 picks the likeliest)\n"
            "  --top-k K          sample among the K likeliest characters (default 0: all)\n"
            "  --prompt TEXT      text the sample continues (default a newline)\n"
            "  --sample-out FILE  also write the sampled characters to FILE\n"
            "  --out PATH         checkpoint (default char_gpt.safetensors; \"\": none); the\n"
            "                     training state (weights, AdamW state, step, seed) goes\n"
            "                     beside it as PATH without .safetensors plus .pt\n"
            "  --resume FILE      continue from a training state up to --steps (same model\n"
            "                     options; dropout draws restart from the seed)\n"
            "  --profile FILE     Chrome trace of the training steps (chrome://tracing, Perfetto)\n");
}

static int usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int usage_error(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s: ", PROG);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n(see ctorch train char-gpt --help)\n");
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

static void apply_preset(gpt_args *a, bool shakespeare) {
    if (shakespeare) {
        a->cfg = (ct_char_gpt_config){.block = 256, .n_layer = 6, .n_head = 6, .n_embd = 384, .dropout = 0.2,
                                      .gpt2_init = true};
        a->batch = 64;
        a->lr = 1e-3;
        a->beta2 = 0.99;
        a->grad_clip = 1.0;
        a->steps = 5000;
    } else {
        a->cfg = (ct_char_gpt_config){.block = 64, .n_layer = 4, .n_head = 4, .n_embd = 128, .dropout = 0,
                                      .gpt2_init = true};
        a->batch = 16;
        a->lr = 3e-4;
        a->beta2 = 0.999;
        a->grad_clip = 0;
        a->steps = 2000;
    }
}

/* Parses argv (argv[0] is "char-gpt"): 0 when training should go on, else the exit code. */
static int parse_args(gpt_args *a, int argc, char **argv, bool *done) {
    *done = false;
    const char *preset = "cpu";
    for (int i = 1; i < argc; i++) { /* the preset first: explicit options override it */
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            help(stdout);
            *done = true;
            return 0;
        }
        if (strcmp(argv[i], "--preset") == 0 && i + 1 < argc)
            preset = argv[i + 1];
    }
    if (strcmp(preset, "cpu") != 0 && strcmp(preset, "shakespeare") != 0)
        return usage_error("unknown preset '%s' (available: cpu, shakespeare)", preset);
    a->preset = preset;
    apply_preset(a, strcmp(preset, "shakespeare") == 0);
    a->out = "char_gpt.safetensors";
    a->eval_iters = 20;
    a->sample_tokens = 300;
    a->temperature = 1.0;
    a->prompt = "\n";
    int64_t eval_interval = -1;
    for (int i = 1; i < argc; i++) {
        const char *k = argv[i];
        if (strcmp(k, "--quiet") == 0) {
            a->quiet = true;
            continue;
        }
        if (strncmp(k, "--", 2) != 0)
            return usage_error("unexpected argument '%s'", k);
        if (i + 1 >= argc)
            return usage_error("%s needs a value", k);
        const char *v = argv[++i];
        int64_t n = 0;
        bool ok = true;
        if (strcmp(k, "--preset") == 0)
            continue;
        else if (strcmp(k, "--text") == 0)
            a->text = v;
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
        else if (strcmp(k, "--threads") == 0) {
            ok = parse_int(v, 1, 4096, &n);
            a->threads = (int)n;
        } else if (strcmp(k, "--seed") == 0) {
            ok = parse_int(v, 0, INT64_MAX, &n);
            a->seed = (uint64_t)n;
        }
        else if (strcmp(k, "--eval-interval") == 0)
            ok = parse_int(v, 1, INT64_C(1) << 40, &eval_interval);
        else if (strcmp(k, "--eval-iters") == 0)
            ok = parse_int(v, 1, 1 << 20, &a->eval_iters);
        else if (strcmp(k, "--sample-tokens") == 0)
            ok = parse_int(v, 0, 1 << 24, &a->sample_tokens);
        else if (strcmp(k, "--top-k") == 0)
            ok = parse_int(v, 0, 256, &a->top_k);
        else if (strcmp(k, "--temperature") == 0)
            ok = parse_double(v, 0, 1e6, &a->temperature);
        else if (strcmp(k, "--device") == 0) {
            if (strcmp(v, "cpu") != 0)
                return usage_error("only --device cpu trains in this build (got '%s')", v);
        } else
            return usage_error("unknown option '%s'", k);
        if (!ok)
            return usage_error("invalid value '%s' for %s", v, k);
    }
    if (!a->text)
        return usage_error("--text FILE is required (there is no bundled text; any plain text file will do)");
    if (a->cfg.n_embd % a->cfg.n_head) {
        fprintf(stderr, "%s: --embd (%lld) must be a multiple of --heads (%lld)\n", PROG, (long long)a->cfg.n_embd,
                (long long)a->cfg.n_head);
        return 2;
    }
    a->eval_interval = eval_interval > 0 ? eval_interval : (a->steps >= 10 ? a->steps / 10 : a->steps);
    return 0;
}

static void progress(const gpt_args *a, int64_t step, double loss, double rate, double eta) {
    if (a->quiet)
        return;
    int width = 24, done = (int)(width * step / a->steps);
    char bar[32];
    for (int i = 0; i < width; i++)
        bar[i] = i < done ? '=' : i == done ? '>' : ' ';
    bar[width] = 0;
    fprintf(stdout, "\rstep %lld/%lld [%s] %3d%% loss %.4f %7.0f tok/s ETA %2d:%02d ", (long long)step,
            (long long)a->steps, bar, (int)(100 * step / a->steps), loss, rate, (int)eta / 60, (int)eta % 60);
    fflush(stdout);
}

/* Mean loss over eval_iters fixed batches of a split (the same batches every time, so
 * successive estimates compare), with dropout off and no graph. */
static ct_status estimate_loss(ct_char_gpt *m, const ct_char_dataset *ds, ct_text_split split, const gpt_args *a,
                               double *out) {
    bool prev = ct_set_grad_enabled(false);
    ct_char_gpt_train(m, false);
    double sum = 0;
    ct_status st = CT_OK;
    for (int64_t i = 0; i < a->eval_iters && !st; i++) {
        ct_scope_begin();
        ct_tensor *x, *y;
        double v = 0;
        st = ct_char_dataset_batch(ds, split, a->batch, m->cfg.block, a->seed + 0x5eed, (uint64_t)i, &x, &y);
        if (!st) {
            ct_tensor *loss = ct_char_gpt_loss(m, x, y);
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

static void hex(char *dst, const unsigned char *src, int n) {
    static const char digits[] = "0123456789abcdef";
    for (int i = 0; i < n; i++) {
        dst[2 * i] = digits[src[i] >> 4];
        dst[2 * i + 1] = digits[src[i] & 15];
    }
    dst[2 * n] = 0;
}

/* The parameters (the tied head.weight once, as wte.weight) and, as metadata, what a
 * reader needs to rebuild the model and its vocabulary. */
static ct_status save_checkpoint(const ct_char_gpt *m, const ct_char_dataset *ds, const char *path) {
    ct_value *sd = ct_cli_params_dict((const char *const *)m->names, m->params, m->nparams),
             *meta = ct_value_new_dict();
    unsigned char vocab[256];
    char vhex[513], num[32];
    int nv = ct_char_dataset_vocab_size(ds);
    for (int i = 0; i < nv; i++)
        vocab[i] = (unsigned char)ct_char_dataset_byte(ds, i);
    hex(vhex, vocab, nv);
    ct_value_set(meta, "format", ct_value_new_str("ctorch char-gpt"));
    ct_value_set(meta, "vocab_bytes_hex", ct_value_new_str(vhex));
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

/* Note [char-gpt training state]
 * Beside the weights, `--out` writes the training state as a PyTorch checkpoint: the
 * parameters by name, the AdamW state dict, the number of steps done and the seed.
 * Batches are drawn from (seed, step), so `--resume` continues with exactly the
 * batches an uninterrupted run would have used, and with dropout 0 the weights come
 * out bit for bit the same (tests/train/check_gpt.sh). The global generator (dropout,
 * sampling) is not saved: it restarts from the seed. */
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
static ct_status load_state(ct_char_gpt *m, ct_optimizer *opt, const char *path, int64_t *step, uint64_t *seed) {
    ct_value *ckpt = ct_load(path);
    if (!ckpt)
        return ct_last_status();
    ct_status st = CT_OK;
    ct_value *model = ct_value_get(ckpt, "model"), *os = ct_value_get(ckpt, "optimizer");
    ct_value *sv = ct_value_get(ckpt, "step"), *seedv = ct_value_get(ckpt, "seed");
    if (!model || !os || !sv || !seedv)
        st = ct_error(CT_ERROR_FORMAT, "char-gpt", "%s is not a char-gpt training state (it needs model, optimizer, "
                      "step and seed)", path);
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

/* The next token from the logits of the last position: temperature, optional top-k,
 * then one draw of the default generator (argmax at temperature 0). */
static ct_status pick(const float *logits, int vocab, const gpt_args *a, int64_t *tok) {
    double p[256], best = -INFINITY;
    int arg = 0;
    for (int i = 0; i < vocab; i++)
        if (logits[i] > best)
            best = logits[i], arg = i;
    if (a->temperature == 0) {
        *tok = arg;
        return CT_OK;
    }
    double cut = -INFINITY;
    if (a->top_k > 0 && a->top_k < vocab) { /* the k-th largest logit */
        double sorted[256];
        for (int i = 0; i < vocab; i++)
            sorted[i] = logits[i];
        for (int i = 0; i < (int)a->top_k; i++) { /* partial selection sort: k <= 256 */
            int mx = i;
            for (int j = i + 1; j < vocab; j++)
                if (sorted[j] > sorted[mx])
                    mx = j;
            double t = sorted[i];
            sorted[i] = sorted[mx];
            sorted[mx] = t;
        }
        cut = sorted[a->top_k - 1];
    }
    double sum = 0;
    for (int i = 0; i < vocab; i++) {
        p[i] = logits[i] < cut ? 0 : exp((logits[i] - best) / a->temperature);
        sum += p[i];
    }
    ct_scope_begin();
    double u = 0;
    ct_status st = ct_item_double(ct_rand(CT_SHAPE(1), CT_F64, CT_CPU), &u);
    ct_scope_end();
    if (st)
        return st;
    double acc = 0, target = u * sum;
    *tok = arg;
    for (int i = 0; i < vocab; i++) {
        acc += p[i];
        if (p[i] > 0 && target < acc) {
            *tok = i;
            break;
        }
    }
    return CT_OK;
}

/* Samples a->sample_tokens characters after the prompt; out gets them NUL-terminated. */
static ct_status sample(ct_char_gpt *m, const ct_char_dataset *ds, const gpt_args *a, int64_t nprompt,
                        const int64_t *prompt, char *out) {
    int64_t total = nprompt + a->sample_tokens;
    int64_t *ctx = malloc((size_t)total * sizeof *ctx);
    if (!ctx)
        return ct_error(CT_ERROR_OUT_OF_MEMORY, "char-gpt", "out of memory for the sample");
    memcpy(ctx, prompt, (size_t)nprompt * sizeof *ctx);
    bool prev = ct_set_grad_enabled(false);
    ct_char_gpt_train(m, false);
    ct_status st = CT_OK;
    int vocab = (int)m->cfg.vocab;
    for (int64_t len = nprompt; len < total && !st; len++) {
        ct_scope_begin();
        int64_t t = len < m->cfg.block ? len : m->cfg.block;
        ct_tensor *logits = ct_char_gpt_forward(m, ct_from_data(ctx + len - t, CT_SHAPE(1, t), CT_I64));
        ct_tensor *last = logits ? ct_contiguous(ct_select(ct_select(logits, 0, 0), 0, t - 1)) : NULL;
        st = last ? pick(ct_tensor_data(last), vocab, a, &ctx[len]) : ct_last_status();
        ct_scope_end();
        if (!st)
            out[len - nprompt] = (char)ct_char_dataset_byte(ds, (int)ctx[len]);
    }
    out[a->sample_tokens] = 0;
    ct_char_gpt_train(m, true);
    ct_set_grad_enabled(prev);
    free(ctx);
    return st;
}

static int fail(const char *what) {
    fprintf(stderr, "\n%s: %s%s\n", PROG, what ? what : "", what ? "" : ct_last_error());
    return 1;
}

static int run(gpt_args *a) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (a->threads > 0)
        ct_set_num_threads(a->threads);
    ct_manual_seed(a->seed);
    ct_char_dataset *ds = ct_char_dataset_from_file(a->text, 0.1);
    if (!ds) {
        fprintf(stderr, "%s: %s\n", PROG, ct_last_error());
        return 1;
    }
    int64_t ntrain = ct_char_dataset_len(ds, CT_SPLIT_TRAIN), nval = ct_char_dataset_len(ds, CT_SPLIT_VAL);
    if (ntrain <= a->cfg.block || nval <= a->cfg.block) {
        fprintf(stderr,
                "%s: %s is too short: %lld characters give %lld for training and %lld for validation, and each "
                "part needs more than the block size (%lld); use a longer text or a smaller --block-size\n",
                PROG, a->text, (long long)(ntrain + nval), (long long)ntrain, (long long)nval,
                (long long)a->cfg.block);
        ct_char_dataset_free(ds);
        return 1;
    }
    a->cfg.vocab = ct_char_dataset_vocab_size(ds);
    /* the prompt's characters must be in the vocabulary; the default newline falls
     * back to the first character when the text has none */
    int64_t nprompt = (int64_t)strlen(a->prompt);
    int64_t *prompt = malloc(((size_t)nprompt + 1) * sizeof *prompt);
    int rc = 0;
    ct_scope_begin();
    ct_tensor *enc = prompt ? ct_char_dataset_encode(ds, a->prompt, (size_t)nprompt) : NULL;
    if (prompt && !enc && strcmp(a->prompt, "\n") == 0) {
        ct_clear_error();
        prompt[0] = 0;
        nprompt = 1;
    } else if (!enc || nprompt == 0) {
        fprintf(stderr, "%s: --prompt: %s\n", PROG, nprompt ? ct_last_error() : "the prompt is empty");
        rc = 2;
    } else {
        memcpy(prompt, ct_tensor_data(enc), (size_t)nprompt * sizeof *prompt);
    }
    ct_char_gpt m = {0};
    ct_optimizer *opt = NULL;
    ct_optim_options o = ct_adamw_options(a->lr);
    o.beta2 = a->beta2;
    if (!rc && (ct_char_gpt_init(&m, &a->cfg) ||
                !(opt = ct_optimizer_new(CT_OPTIM_ADAMW, m.params, m.nparams, &o)))) {
        rc = fail(NULL);
    }
    if (!rc) {
        printf("char-gpt (%s): %s, %lld characters, vocabulary %lld, %lld train / %lld val tokens\n", a->preset,
               a->text, (long long)(ntrain + nval), (long long)a->cfg.vocab, (long long)ntrain, (long long)nval);
        printf("model: %lld layers, %lld heads, embd %lld, block %lld, dropout %g: %lld parameters; batch %lld, "
               "lr %g, %d threads\n",
               (long long)a->cfg.n_layer, (long long)a->cfg.n_head, (long long)a->cfg.n_embd,
               (long long)a->cfg.block, a->cfg.dropout, (long long)ct_char_gpt_num_params(&m), (long long)a->batch,
               a->lr, ct_get_num_threads());
    }
    int64_t start = 0;
    if (!rc && a->resume) {
        if (load_state(&m, opt, a->resume, &start, &a->seed)) {
            rc = fail(NULL);
        } else {
            ct_manual_seed(a->seed);
            printf("resumed from %s after step %lld (seed %llu)\n", a->resume, (long long)start,
                   (unsigned long long)a->seed);
        }
    }
    if (!rc && a->profile && ct_profiler_start(a->profile))
        rc = fail(NULL);
    double t0 = now_s(), avg = 0, first = NAN;
    for (int64_t step = start; !rc && step < a->steps; step++) {
        ct_scope_begin();
        ct_tensor *x, *y;
        double lv = NAN;
        ct_status st = ct_char_dataset_batch(ds, CT_SPLIT_TRAIN, a->batch, a->cfg.block, a->seed, (uint64_t)step, &x,
                                             &y);
        ct_tensor *loss = st ? NULL : ct_char_gpt_loss(&m, x, y);
        if (!loss || ct_optimizer_zero_grad(opt, true) || ct_backward(loss, NULL, false, false) ||
            (a->grad_clip > 0 && ct_clip_grad_norm_(m.params, m.nparams, a->grad_clip, 2.0, false, NULL)) ||
            ct_optimizer_step(opt) || ct_item_double(loss, &lv))
            rc = fail(NULL);
        ct_scope_end();
        if (rc)
            break;
        if (step == start)
            first = avg = lv;
        avg = 0.95 * avg + 0.05 * lv;
        double el = now_s() - t0;
        int64_t done = step + 1;
        if (done % 10 == 0 || done == a->steps || done == start + 1)
            progress(a, done, avg, (double)((done - start) * a->batch * a->cfg.block) / el,
                     el / (double)(done - start) * (double)(a->steps - done));
        if (done % a->eval_interval == 0 || done == a->steps) {
            double val = 0;
            if (estimate_loss(&m, ds, CT_SPLIT_VAL, a, &val)) {
                rc = fail(NULL);
                break;
            }
            printf("%sstep %lld: train loss %.4f, val loss %.4f (%.1f s)\n", a->quiet ? "" : "\n", (long long)done,
                   avg, val, now_s() - t0);
        }
    }
    if (a->profile && ct_profiler_enabled()) {
        if (ct_profiler_stop())
            rc = rc ? rc : fail(NULL);
        else if (!rc)
            printf("profile: %s (open it in Perfetto or chrome://tracing)\n", a->profile);
    }
    if (!rc && start < a->steps)
        printf("first loss %.4f, final train loss %.4f\n", first, avg);
    else if (!rc)
        printf("nothing to train: %s is already at step %lld of %lld\n", a->resume, (long long)start,
               (long long)a->steps);
    if (!rc && a->out && *a->out) { /* --out "" saves nothing */
        char sp[4096];
        state_path(a->out, sp, sizeof sp);
        int64_t done = start > a->steps ? start : a->steps;
        if (save_checkpoint(&m, ds, a->out) == CT_OK && save_state(&m, opt, done, a->seed, sp) == CT_OK)
            printf("saved %s and %s (training state)\n", a->out, sp);
        else
            rc = fail(NULL);
    }
    if (!rc && a->sample_tokens > 0) {
        char *text = malloc((size_t)a->sample_tokens + 1);
        if (!text || sample(&m, ds, a, nprompt, prompt, text)) {
            rc = fail(text ? NULL : "out of memory for the sample");
        } else {
            printf("sample (%lld characters, temperature %g, top-k %lld):\n%s\n", (long long)a->sample_tokens,
                   a->temperature, (long long)a->top_k, text);
            FILE *f = a->sample_out ? fopen(a->sample_out, "wb") : NULL;
            if (a->sample_out &&
                (!f || fwrite(text, 1, (size_t)a->sample_tokens, f) != (size_t)a->sample_tokens)) {
                fprintf(stderr, "%s: cannot write %s: %s\n", PROG, a->sample_out, strerror(errno));
                rc = 1;
            }
            if (f && fclose(f) && !rc) {
                fprintf(stderr, "%s: cannot write %s: %s\n", PROG, a->sample_out, strerror(errno));
                rc = 1;
            }
        }
        free(text);
    }
    ct_optimizer_free(opt);
    ct_char_gpt_free(&m);
    ct_scope_end();
    free(prompt);
    ct_char_dataset_free(ds);
    return rc;
}

int ct_cmd_train_char_gpt(int argc, char **argv) {
    gpt_args a = {0};
    bool done = false;
    int rc = parse_args(&a, argc, argv, &done);
    if (rc || done)
        return rc;
    return run(&a);
}
