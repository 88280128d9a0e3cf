/* bench/train_cnn: ms per training step of the Fashion-MNIST CNN (the model of
 * `ctorch train fashion-mnist` and of PyTorch's side in shared/bench/torch_peer.py
 * --what cnn: same layers, SGD momentum 0.9, batch 64, random inputs).
 *
 * Prints cnn.fmnist.b64.ms_per_step and cnn.fmnist.b64.images_per_s, the mean over 50
 * steps after 5 warm-up steps, as torch_peer.py measures them; then the median step
 * and the process CPU time per step, which a loaded machine disturbs less (with
 * OMP_NUM_THREADS=1 it is the step's compute cost). CT_BENCH_STEPS changes the count.
 *
 *   bench/train_cnn [--device cpu|cuda[:N]]
 *
 * On a GPU the steps are queued back to back and the device is synchronised before the
 * first and after the last timed step, as torch_peer.py does: the mean is the figure
 * (no per-step median or CPU time). */
#include <string.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>

#include "cli/cnn.h"
#include "ctorch.h"
#include "bench_util.h"

static double cpu_now(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) + 1e-6 * (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
}

int main(int argc, char **argv) {
    ct_runtime_tune_and_reexec(argv); /* as the ctorch CLI runs */
    ct_device dev = CT_CPU;
    if (argc == 3 && strcmp(argv[1], "--device") == 0 && ct_device_parse(argv[2], &dev) == CT_OK) {
    } else if (argc != 1) {
        fprintf(stderr, "usage: train_cnn [--device cpu|cuda[:N]]\n");
        return 2;
    }
    const bool gpu = dev.type == CT_DEVICE_CUDA;
    const int64_t b = 64;
    const char *env = getenv("CT_BENCH_STEPS");
    int steps = env ? atoi(env) : 50;
    if (steps < 1 || steps > 100000)
        steps = 50;
    ct_manual_seed(0);
    ct_fashion_cnn m;
    if (ct_fashion_cnn_init(&m) != CT_OK || ct_fashion_cnn_to(&m, dev) != CT_OK) {
        fprintf(stderr, "train_cnn: %s\n", ct_last_error());
        return 1;
    }
    ct_optim_options o = ct_sgd_options(0.01);
    o.momentum = 0.9;
    ct_optimizer *opt = ct_optimizer_new(CT_OPTIM_SGD, m.p, CT_FASHION_CNN_NPARAMS, &o);
    ct_tensor *x = ct_randn(CT_SHAPE(b, 1, 28, 28), CT_F32, dev);
    ct_tensor *y = ct_randint(0, 10, CT_SHAPE(b), CT_I64, dev);
    double *dts = malloc(sizeof(double) * (size_t)steps);
    double t0 = 0, c0 = 0;
    if (!dts)
        return 1;
    for (int i = 0; i < steps + 5; i++) {
        if (i == 5) {
            if (gpu && ct_cuda_synchronize(dev.index)) {
                fprintf(stderr, "train_cnn: %s\n", ct_last_error());
                return 1;
            }
            t0 = now();
            c0 = cpu_now();
        }
        double ts = now();
        ct_scope_begin();
        ct_tensor *loss = ct_fashion_cnn_loss(&m, x, y, NULL);
        if (!loss || ct_backward(loss, NULL, false, false) || ct_optimizer_step(opt) ||
            ct_optimizer_zero_grad(opt, false)) {
            fprintf(stderr, "train_cnn: %s\n", ct_last_error());
            return 1;
        }
        ct_scope_end();
        if (i >= 5)
            dts[i - 5] = now() - ts;
    }
    if (gpu && ct_cuda_synchronize(dev.index)) {
        fprintf(stderr, "train_cnn: %s\n", ct_last_error());
        return 1;
    }
    double dt = (now() - t0) / steps, cpu = (cpu_now() - c0) / steps;
    qsort(dts, (size_t)steps, sizeof *dts, cmp_double);
    char dname[32];
    printf("ctorch %s %s (BLAS: %s) threads %d\n", ct_version(), ct_device_str(dev, dname, sizeof dname),
           ct_blas_info(), ct_get_num_threads());
    printf("cnn.fmnist.b64.ms_per_step %.3f ms\n", dt * 1e3);
    printf("cnn.fmnist.b64.images_per_s %.0f img/s\n", (double)b / dt);
    if (!gpu) {
        printf("cnn.fmnist.b64.median_ms_per_step %.3f ms (min %.3f)\n", dts[steps / 2] * 1e3, dts[0] * 1e3);
        printf("cnn.fmnist.b64.cpu_ms_per_step %.3f ms\n", cpu * 1e3);
    }
    free(dts);
    ct_optimizer_free(opt);
    ct_fashion_cnn_free(&m);
    ct_release(x);
    ct_release(y);
    return 0;
}
