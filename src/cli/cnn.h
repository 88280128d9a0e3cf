/* The Fashion-MNIST CNN of `ctorch train fashion-mnist` and bench/train_cnn (the same
 * model as PyTorch's side in shared/bench/torch_peer.py --what cnn):
 *
 *   conv 1->32 3x3 pad 1, ReLU, maxpool 2, conv 32->64 3x3 pad 1, ReLU, maxpool 2,
 *   flatten, linear 3136->128, ReLU, linear 128->10 */
#ifndef CT_CLI_CNN_H
#define CT_CLI_CNN_H

#include "ctorch.h"

#define CT_FASHION_CNN_NPARAMS 8

typedef struct ct_fashion_cnn {
    /* conv1.weight, conv1.bias, conv2.weight, conv2.bias, fc1.weight, fc1.bias,
     * fc2.weight, fc2.bias: retained, requiring grad */
    ct_tensor *p[CT_FASHION_CNN_NPARAMS];
} ct_fashion_cnn;

extern const char *const ct_fashion_cnn_param_names[CT_FASHION_CNN_NPARAMS];

/* PyTorch's default initialisation (Conv2d/Linear: U(-1/sqrt(fan_in), 1/sqrt(fan_in))
 * for weights and biases alike), from ctorch's generator. */
ct_status ct_fashion_cnn_init(ct_fashion_cnn *m);
void ct_fashion_cnn_free(ct_fashion_cnn *m);
/* Moves the parameters to device (new leaf tensors requiring grad; on error m is
 * unchanged). */
ct_status ct_fashion_cnn_to(ct_fashion_cnn *m, ct_device device);
/* x: float32 (B, 1, 28, 28) -> logits (B, 10). */
ct_tensor *ct_fashion_cnn_forward(const ct_fashion_cnn *m, const ct_tensor *x);
/* Mean cross-entropy of the logits for x against int64 labels y (B); when correct is
 * not NULL it receives how many predictions were right. */
ct_tensor *ct_fashion_cnn_loss(const ct_fashion_cnn *m, const ct_tensor *x, const ct_tensor *y, int64_t *correct);
/* The same, with the count of correct predictions left as a 0-d int64 tensor (no host
 * read, so that a compiled step can hold it). */
ct_tensor *ct_fashion_cnn_loss_hits(const ct_fashion_cnn *m, const ct_tensor *x, const ct_tensor *y, ct_tensor **hits);

#endif
