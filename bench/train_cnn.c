/* bench/train_cnn: ms per training step of the Fashion-MNIST CNN (the model of
 * `ctorch train fashion-mnist` and of PyTorch's side in shared/bench/torch_peer.py
 * --what cnn: same layers, SGD momentum 0.9, batch 64, random inputs).
 *
 * Prints cnn.fmnist.b64.ms_per_step and cnn.fmnist.b64.images_per_s, the mean over 50
 * steps after 5 warm-up steps, as torch_peer.py measures them. */
#include <stdio.h>
#include <time.h>

#include "cli/cnn.h"
#include "ctorch.h"

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int main(void) {
    const int64_t b = 64;
    ct_manual_seed(0);
    ct_fashion_cnn m;
    if (ct_fashion_cnn_init(&m) != CT_OK) {
        fprintf(stderr, "train_cnn: %s\n", ct_last_error());
        return 1;
    }
    ct_optim_options o = ct_sgd_options(0.01);
    o.momentum = 0.9;
    ct_optimizer *opt = ct_optimizer_new(CT_OPTIM_SGD, m.p, CT_FASHION_CNN_NPARAMS, &o);
    ct_tensor *x = ct_randn(CT_SHAPE(b, 1, 28, 28), CT_F32, CT_CPU);
    ct_tensor *y = ct_randint(0, 10, CT_SHAPE(b), CT_I64, CT_CPU);
    double t0 = 0;
    for (int i = 0; i < 55; i++) {
        if (i == 5)
            t0 = now();
        ct_scope_begin();
        ct_tensor *loss = ct_fashion_cnn_loss(&m, x, y, NULL);
        if (!loss || ct_backward(loss, NULL, false, false) || ct_optimizer_step(opt) ||
            ct_optimizer_zero_grad(opt, false)) {
            fprintf(stderr, "train_cnn: %s\n", ct_last_error());
            return 1;
        }
        ct_scope_end();
    }
    double dt = (now() - t0) / 50;
    printf("ctorch %s threads %d\n", ct_version(), ct_get_num_threads());
    printf("cnn.fmnist.b64.ms_per_step %.3f ms\n", dt * 1e3);
    printf("cnn.fmnist.b64.images_per_s %.0f img/s\n", (double)b / dt);
    ct_optimizer_free(opt);
    ct_fashion_cnn_free(&m);
    ct_release(x);
    ct_release(y);
    return 0;
}
