/* A program linked against libctorch.so alone (no CUDA library, no internal header):
 * on a machine with a GPU the CUDA backend must load as a plug-in (Note [Loadable
 * backends] in src/registry.c) and run a forward and backward pass that agrees with the
 * CPU's. Exits 77 (skipped) where no CUDA device is usable. */
#include <stdio.h>
#include <string.h>

#include "ctorch.h"

/* loss = sum(tanh(x @ w)) and its gradient with respect to w, on one device */
static ct_tensor *grad_on(const ct_tensor *x_cpu, const ct_tensor *w_cpu, ct_device dev, double *loss) {
    ct_tensor *x = ct_to_device(x_cpu, dev);
    ct_tensor *w = ct_tensor_set_requires_grad(ct_detach(ct_to_device(w_cpu, dev)), true);
    ct_tensor *l = ct_sum(ct_tanh(ct_matmul(x, w)), NULL, 0, false, CT_DTYPE_UNDEFINED);
    if (!l || ct_item_double(l, loss) != CT_OK || ct_backward(l, NULL, false, false) != CT_OK)
        return NULL;
    return ct_to_device(ct_tensor_grad(w), CT_CPU);
}

int main(void) {
    const char *info = ct_backend_info();
    printf("%s", info);
    if (!ct_cuda_is_available()) {
        printf("SKIP: no usable CUDA device\n");
        return 77;
    }
    if (!strstr(info, "cuda: ") || strstr(info, "cuda: not loaded")) {
        fprintf(stderr, "cuda_shared: CUDA is available but ct_backend_info has no CUDA line\n");
        return 1;
    }
    ct_scope_begin();
    ct_manual_seed(0);
    ct_tensor *x = ct_randn(CT_SHAPE(64, 32), CT_F32, CT_CPU);
    ct_tensor *w = ct_randn(CT_SHAPE(32, 16), CT_F32, CT_CPU);
    double lc = 0, lg = 0;
    ct_tensor *gc = grad_on(x, w, CT_CPU, &lc);
    ct_tensor *gg = grad_on(x, w, CT_CUDA(0), &lg);
    bool close = false;
    if (!gc || !gg || ct_allclose(gc, gg, 1e-4, 1e-4, false, &close) != CT_OK) {
        fprintf(stderr, "cuda_shared: %s\n", ct_last_error());
        return 1;
    }
    printf("loss cpu %.6f cuda %.6f, gradients %s\n", lc, lg, close ? "agree" : "DIFFER");
    ct_scope_end();
    return close && lc - lg < 1e-3 && lg - lc < 1e-3 ? 0 : 1;
}
