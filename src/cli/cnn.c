#include "cnn.h"

#include <math.h>

const char *const ct_fashion_cnn_param_names[CT_FASHION_CNN_NPARAMS] = {
    "conv1.weight", "conv1.bias", "conv2.weight", "conv2.bias", "fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"};

/* Inside ct_fashion_cnn_init's scope. kaiming_uniform_(a=sqrt(5)) gives the bound
 * gain * sqrt(3 / fan_in) with gain sqrt(2 / (1 + 5)): 1 / sqrt(fan_in), the bias bound
 * too. */
static ct_tensor *param(const int64_t *shape, int ndim, int64_t fan_in) {
    ct_tensor *t = ct_empty(shape, ndim, CT_F32, CT_CPU);
    double b = 1.0 / sqrt((double)fan_in);
    if (!ct_uniform_(t, -b, b)) /* in the caller's scope, as t */
        return NULL;
    return ct_tensor_set_requires_grad(t, true);
}

/* The model owns a reference to each parameter (released by ct_fashion_cnn_free),
 * whatever scope the caller has open: the parameters are made in a scope of their own
 * and retained out of it. */
ct_status ct_fashion_cnn_init(ct_fashion_cnn *m) {
    ct_scope_begin();
    ct_tensor *p[CT_FASHION_CNN_NPARAMS] = {
        param(CT_SHAPE(32, 1, 3, 3), 9),    param(CT_SHAPE(32), 9),
        param(CT_SHAPE(64, 32, 3, 3), 288), param(CT_SHAPE(64), 288),
        param(CT_SHAPE(128, 3136), 3136),   param(CT_SHAPE(128), 3136),
        param(CT_SHAPE(10, 128), 128),      param(CT_SHAPE(10), 128),
    };
    bool ok = true;
    for (int i = 0; i < CT_FASHION_CNN_NPARAMS; i++)
        ok = ok && p[i];
    ct_status st = ok ? CT_OK : ct_last_status();
    for (int i = 0; i < CT_FASHION_CNN_NPARAMS; i++)
        m->p[i] = ok ? ct_retain(p[i]) : NULL;
    ct_scope_end();
    return st;
}

ct_status ct_fashion_cnn_to(ct_fashion_cnn *m, ct_device device) {
    ct_tensor *moved[CT_FASHION_CNN_NPARAMS] = {NULL};
    bool ok = true;
    ct_scope_begin();
    for (int i = 0; i < CT_FASHION_CNN_NPARAMS && ok; i++) { /* all moved first: on failure m is unchanged */
        /* a reference of the model's own: ct_keep would hand it to the caller's scope
         * when one is open, which released it again after ct_fashion_cnn_free did */
        moved[i] = ct_retain(ct_detach(ct_to_device(m->p[i], device)));
        ok = moved[i] && ct_tensor_set_requires_grad(moved[i], true);
    }
    ct_scope_end();
    ct_status st = ok ? CT_OK : ct_last_status();
    for (int i = 0; i < CT_FASHION_CNN_NPARAMS; i++) {
        if (ok) {
            ct_release(m->p[i]);
            m->p[i] = moved[i];
        } else {
            ct_release(moved[i]);
        }
    }
    return st;
}

void ct_fashion_cnn_free(ct_fashion_cnn *m) {
    for (int i = 0; i < CT_FASHION_CNN_NPARAMS; i++) {
        ct_release(m->p[i]);
        m->p[i] = NULL;
    }
}

ct_tensor *ct_fashion_cnn_forward(const ct_fashion_cnn *m, const ct_tensor *x) {
    static const int64_t one[2] = {1, 1}, two[2] = {2, 2};
    ct_scope_begin();
    ct_tensor *h = ct_relu(ct_conv2d(x, m->p[0], m->p[1], one, one, one, 1));
    h = ct_max_pool2d(h, two, NULL, NULL, NULL, false, NULL);
    h = ct_relu(ct_conv2d(h, m->p[2], m->p[3], one, one, one, 1));
    h = ct_max_pool2d(h, two, NULL, NULL, NULL, false, NULL);
    h = ct_relu(ct_linear(ct_flatten(h, 1, -1), m->p[4], m->p[5]));
    ct_tensor *logits = ct_keep(ct_linear(h, m->p[6], m->p[7]));
    ct_scope_end();
    return logits;
}

ct_tensor *ct_fashion_cnn_loss_hits(const ct_fashion_cnn *m, const ct_tensor *x, const ct_tensor *y, ct_tensor **hits) {
    ct_scope_begin();
    ct_tensor *logits = ct_fashion_cnn_forward(m, x);
    /* cross-entropy: the mean of -log_softmax at the label */
    ct_tensor *logp = ct_log_softmax(logits, 1, CT_DTYPE_UNDEFINED);
    ct_tensor *picked = ct_gather(logp, 1, ct_unsqueeze(y, 1));
    ct_tensor *loss = ct_neg(ct_mean(picked, NULL, 0, false, CT_DTYPE_UNDEFINED));
    if (loss && hits) {
        bool prev = ct_set_grad_enabled(false);
        *hits = ct_keep(ct_sum(ct_eq(ct_argmax_dim(logits, 1, false), y), NULL, 0, false, CT_DTYPE_UNDEFINED));
        if (!*hits)
            loss = NULL;
        ct_set_grad_enabled(prev);
    }
    ct_keep(loss);
    ct_scope_end();
    return loss;
}

ct_tensor *ct_fashion_cnn_loss(const ct_fashion_cnn *m, const ct_tensor *x, const ct_tensor *y, int64_t *correct) {
    ct_scope_begin();
    ct_tensor *hits = NULL;
    ct_tensor *loss = ct_fashion_cnn_loss_hits(m, x, y, correct ? &hits : NULL);
    if (loss && correct) {
        *correct = 0;
        if (ct_item_int64(hits, correct) != CT_OK)
            loss = NULL;
    }
    ct_keep(loss);
    ct_scope_end();
    return loss;
}
