/* Integer convolution and average pooling on the CPU.
 *
 * Note [Integer convolution]
 * PyTorch's CPU conv2d takes every integer dtype (its slow im2col path with an integer
 * GEMM), conv_transpose2d and avg_pool2d take int64. Integer results wrap: the sums
 * and products run in the dtype. Here the values are widened to int64 and summed in
 * uint64, so the sums wrap modulo 2^64; since wrapping commutes with sums and
 * products, casting the int64 result down to the dtype gives exactly the result of
 * computing in the dtype. avg_pool2d divides the window's sum by its divisor with C's
 * truncating division, as PyTorch's int64 kernel. These are direct loops (no GEMM,
 * no threads): they exist so that integer models run, not for speed. */
#include "cpu/conv_int.h"

/* The input position of output index o at kernel tap k, or -1 outside the input. */
static int64_t tap(int64_t o, int64_t k, int64_t stride, int64_t pad, int64_t dil, int64_t size) {
    int64_t i = o * stride - pad + k * dil;
    return i >= 0 && i < size ? i : -1;
}

/* Calls body(xi, wi, yi) for every (input, weight, output) index triple of the
 * convolution that lies inside the input. */
#define CONV_FOR_EACH_TAP(g, body)                                                                             \
    do {                                                                                                       \
        int64_t cg_ = (g)->c / (g)->groups, og_ = (g)->oc / (g)->groups;                                       \
        for (int64_t n_ = 0; n_ < (g)->n; n_++)                                                                \
            for (int64_t oc_ = 0; oc_ < (g)->oc; oc_++) {                                                      \
                int64_t c0_ = oc_ / og_ * cg_;                                                                 \
                for (int64_t oy_ = 0; oy_ < (g)->oh; oy_++)                                                    \
                    for (int64_t ox_ = 0; ox_ < (g)->ow; ox_++) {                                              \
                        int64_t yi = ((n_ * (g)->oc + oc_) * (g)->oh + oy_) * (g)->ow + ox_;                   \
                        for (int64_t ic_ = 0; ic_ < cg_; ic_++)                                                \
                            for (int64_t i_ = 0; i_ < (g)->kh; i_++) {                                         \
                                int64_t ih_ = tap(oy_, i_, (g)->stride[0], (g)->padding[0], (g)->dilation[0],  \
                                                  (g)->h);                                                     \
                                if (ih_ < 0)                                                                   \
                                    continue;                                                                  \
                                for (int64_t j_ = 0; j_ < (g)->kw; j_++) {                                     \
                                    int64_t iw_ = tap(ox_, j_, (g)->stride[1], (g)->padding[1],                \
                                                      (g)->dilation[1], (g)->w);                               \
                                    if (iw_ < 0)                                                               \
                                        continue;                                                              \
                                    int64_t xi = ((n_ * (g)->c + c0_ + ic_) * (g)->h + ih_) * (g)->w + iw_;    \
                                    int64_t wi = ((oc_ * cg_ + ic_) * (g)->kh + i_) * (g)->kw + j_;            \
                                    body;                                                                      \
                                }                                                                              \
                            }                                                                                  \
                    }                                                                                          \
            }                                                                                                  \
    } while (0)

void ct_conv2d_int_forward(const ct_conv2d_geom *g, const int64_t *x, const int64_t *w, const int64_t *b,
                           int64_t *y) {
    int64_t plane = g->oh * g->ow, total = g->n * g->oc * plane;
    for (int64_t k = 0; k < total; k++)
        y[k] = b ? b[k / plane % g->oc] : 0;
    uint64_t *uy = (uint64_t *)y;
    CONV_FOR_EACH_TAP(g, uy[yi] += (uint64_t)x[xi] * (uint64_t)w[wi]);
}

void ct_conv2d_int_backward(const ct_conv2d_geom *g, const int64_t *x, const int64_t *w, const int64_t *gy,
                            int64_t *gx, int64_t *gw, int64_t *gb) {
    if (gx) {
        for (int64_t k = 0; k < g->n * g->c * g->h * g->w; k++)
            gx[k] = 0;
        uint64_t *ux = (uint64_t *)gx;
        CONV_FOR_EACH_TAP(g, ux[xi] += (uint64_t)gy[yi] * (uint64_t)w[wi]);
    }
    if (gw) {
        for (int64_t k = 0; k < g->oc * (g->c / g->groups) * g->kh * g->kw; k++)
            gw[k] = 0;
        uint64_t *uw = (uint64_t *)gw;
        CONV_FOR_EACH_TAP(g, uw[wi] += (uint64_t)gy[yi] * (uint64_t)x[xi]);
    }
    if (gb) {
        int64_t plane = g->oh * g->ow;
        uint64_t *ub = (uint64_t *)gb;
        for (int64_t c = 0; c < g->oc; c++)
            ub[c] = 0;
        for (int64_t k = 0; k < g->n * g->oc * plane; k++)
            ub[k / plane % g->oc] += (uint64_t)gy[k];
    }
}

void ct_avgpool_int_forward(const ct_avgpool_geom *g, const int64_t *x, int64_t *y) {
    for (int64_t p = 0; p < g->n * g->c; p++) {
        const int64_t *xp = x + p * g->h * g->w;
        int64_t *yp = y + p * g->oh * g->ow;
        for (int64_t oy = 0; oy < g->oh; oy++)
            for (int64_t ox = 0; ox < g->ow; ox++) {
                ct_avgpool_window win;
                if (!ct_avgpool_window_of(g, oy, ox, &win)) {
                    yp[oy * g->ow + ox] = 0;
                    continue;
                }
                uint64_t acc = 0;
                for (int64_t i = win.h0; i < win.h1; i++)
                    for (int64_t j = win.w0; j < win.w1; j++)
                        acc += (uint64_t)xp[i * g->w + j];
                yp[oy * g->ow + ox] = (int64_t)acc / win.divisor;
            }
    }
}
