/* bench/rnn: nn.LSTM (input 512, hidden 512, 2 layers) over a (128, 32, 512) float32
 * sequence: one training step (forward, sum of the output, backward into every
 * parameter) and the forward alone, each the median of several runs.
 *
 *   bench/rnn [--device cpu|cuda] [--precision highest|high] [--threads N] [--reps N]
 *             [--no-cudnn] [--forward-only]
 *
 * Prints "name value unit" lines a peer can match (bench/torch_rnn_peer.py prints the
 * same names for PyTorch):
 *   lstm.<device>.s128b32h512l2.ms_per_step   forward + backward
 *   lstm.<device>.s128b32h512l2.fwd_ms        forward only, no graph (inference mode)
 * and on the CPU the same two as CPU time of the process (.cpu_ms_per_step,
 * .fwd_cpu_ms): with one thread, the work done, which a busy shared machine changes far
 * less than the wall time. On CUDA each time ends with the device synchronized;
 * --precision high lets float32 products use TF32 (ct_set_float32_matmul_precision),
 * as PyTorch's cuDNN LSTM does by default (torch.backends.cudnn.allow_tf32). On CUDA the
 * LSTM runs on cuDNN when the backend found it (Note [Recurrent layers on cuDNN]);
 * --no-cudnn keeps it on the layers' own CUDA path, and a line "cudnn <version|off>"
 * says which ran. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ctorch.h"
#include "bench_util.h"

enum { SEQ = 128, BATCH = 32, HIDDEN = 512, INPUT = 512, LAYERS = 2 };

static int fail(void) {
    fprintf(stderr, "rnn: %s\n", ct_last_error());
    return 1;
}

/* The medians of reps wall times t and CPU times tc (CPU only), as "tag.name value ms". */
static void report(const char *tag, const char *name, const char *cpu_name, double *t, double *tc, int reps,
                   bool cuda) {
    qsort(t, (size_t)reps, sizeof *t, cmp_double);
    qsort(tc, (size_t)reps, sizeof *tc, cmp_double);
    printf("%s.%s %.1f ms\n", tag, name, 1e3 * t[reps / 2]);
    if (!cuda)
        printf("%s.%s %.1f ms\n", tag, cpu_name, 1e3 * tc[reps / 2]);
    fflush(stdout);
}

int main(int argc, char **argv) {
    ct_runtime_tune_and_reexec(argv); /* as the ctorch CLI runs */
    int threads = 0, reps = 7;
    bool forward_only = false;
    const char *device = "cpu", *precision = "highest";
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--threads") && i + 1 < argc)
            threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--device") && i + 1 < argc)
            device = argv[++i];
        else if (!strcmp(argv[i], "--precision") && i + 1 < argc)
            precision = argv[++i];
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc)
            reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--no-cudnn"))
            ct_backends_cudnn_set_enabled(false);
        else if (!strcmp(argv[i], "--forward-only"))
            forward_only = true;
        else {
            fprintf(stderr,
                    "usage: %s [--device cpu|cuda] [--precision highest|high] [--threads N] "
                    "[--reps N] [--no-cudnn] [--forward-only]\n",
                    argv[0]);
            return 2;
        }
    }
    if (reps < 1 || reps > 1000)
        reps = 7;
    if (threads > 0)
        ct_set_num_threads(threads);
    ct_device dev;
    if (ct_device_parse(device, &dev) != CT_OK ||
        ct_set_float32_matmul_precision(precision) != CT_OK)
        return fail();
    bool cuda = dev.type == CT_DEVICE_CUDA;
    ct_manual_seed(0);
    ct_module *m = ct_nn_lstm(INPUT, HIDDEN, LAYERS, true, false, 0.0, false, 0, CT_F32);
    ct_tensor *x = ct_randn(CT_SHAPE(SEQ, BATCH, INPUT), CT_F32, dev);
    if (!m || !x || ct_module_to(m, dev, CT_DTYPE_UNDEFINED) != CT_OK)
        return fail();
    ct_tensor *params[16];
    int np = (int)ct_module_parameters(m, params, NULL, 16);
    double *t = calloc((size_t)reps, sizeof *t), *tc = calloc((size_t)reps, sizeof *tc);
    char tag[64];
    snprintf(tag, sizeof tag, "lstm.%s.s128b32h512l2", cuda ? "cuda" : "cpu");
    if (cuda && ct_backends_cudnn_enabled() && ct_backends_cudnn_is_available())
        printf("cudnn %lld\n", (long long)ct_backends_cudnn_version());
    else if (cuda)
        printf("cudnn off\n");

    /* training steps: one warm-up, then reps timed */
    for (int r = -1; r < reps && !forward_only; r++) {
        for (int i = 0; i < np; i++)
            ct_tensor_set_grad(params[i], NULL);
        double t0 = now(), c0 = process_cpu_now();
        ct_scope_begin();
        ct_tensor *y = ct_module_forward(m, x);
        ct_tensor *loss = y ? ct_sum(y, NULL, 0, false, CT_DTYPE_UNDEFINED) : NULL;
        ct_status st = loss ? ct_backward(loss, NULL, false, false) : ct_last_status();
        ct_scope_end();
        if (st == CT_OK && cuda)
            st = ct_cuda_synchronize(dev.index);
        if (st != CT_OK)
            return fail();
        if (r >= 0)
            t[r] = now() - t0, tc[r] = process_cpu_now() - c0;
    }
    if (!forward_only)
        report(tag, "ms_per_step", "cpu_ms_per_step", t, tc, reps, cuda);

    /* forward only, no graph */
    ct_inference_mode_begin();
    for (int r = -1; r < reps; r++) {
        double t0 = now(), c0 = process_cpu_now();
        ct_scope_begin();
        ct_tensor *y = ct_module_forward(m, x);
        ct_scope_end();
        if (!y || (cuda && ct_cuda_synchronize(dev.index) != CT_OK))
            return fail();
        if (r >= 0)
            t[r] = now() - t0, tc[r] = process_cpu_now() - c0;
    }
    ct_inference_mode_end();
    report(tag, "fwd_ms", "fwd_cpu_ms", t, tc, reps, cuda);
    free(t);
    free(tc);
    ct_release(x);
    ct_module_free(m);
    return 0;
}
