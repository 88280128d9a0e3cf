/* CPU kernels of cross_entropy_fused and its backward (Note [Fused cross_entropy] in
 * src/meta/nn_fused.c): plain loops over rows in float32 (float64 for float64 logits;
 * float16/bfloat16 convert on the way in, as the other fused nn kernels), each row's
 * sum of exponentials in double. Rows run in parallel; the reduction over rows adds the
 * per-row losses in row order afterwards, so results do not depend on the thread count. */
#include <math.h>
#include <stdlib.h>

#include "core/factory.h"
#include "core/parallel.h"
#include "core/view.h"
#include "cpu/cpu_backend.h"
#include "ctorch/nn.h"
#include "meta/nn_fused.h"

/* The operands of the row loops, shared by both types. */
typedef struct {
    const void *x, *gy, *lse;
    const int64_t *t;
    void *loss, *lse_out, *gx;
    int64_t c, ignore;
    bool per_row;
    double scale;
} xent_job;

#define XENT_DEFINE(T, SUF)                                                                                   \
    static void xent_fwd_rows_##SUF(void *ctx, int64_t i0, int64_t i1) {                                     \
        const xent_job *jb = ctx;                                                                           \
        const T *x = jb->x;                                                                                 \
        const int64_t *t = jb->t, c = jb->c, ignore = jb->ignore;                                           \
        T *loss = jb->loss, *lse = jb->lse_out;                                                             \
        for (int64_t i = i0; i < i1; i++) {                                                                 \
            const T *xr = x + i * c;                                                                        \
            T m = -INFINITY;                                                                                \
            for (int64_t j = 0; j < c; j++)                                                                 \
                m = xr[j] > m ? xr[j] : m;                                                                  \
            double s = 0;                                                                                   \
            for (int64_t j = 0; j < c; j++)                                                                 \
                s += (double)exp((T)(xr[j] - m));                                                           \
            T l = (T)((double)m + log(s));                                                                  \
            lse[i] = l;                                                                                     \
            loss[i] = t[i] == ignore ? (T)0 : (T)(l - xr[t[i]]);                                            \
        }                                                                                                   \
    }                                                                                                       \
    static void xent_fwd_##SUF(const T *x, const int64_t *t, T *loss, T *lse, int64_t n, int64_t c,          \
                               int64_t ignore) {                                                            \
        xent_job jb = {.x = x, .t = t, .loss = loss, .lse_out = lse, .c = c, .ignore = ignore};             \
        ct_parallel_range(n, n * c, 65536, xent_fwd_rows_##SUF, &jb);                                       \
    }                                                                                                       \
    static void xent_bwd_rows_##SUF(void *ctx, int64_t i0, int64_t i1) {                                     \
        const xent_job *jb = ctx;                                                                           \
        const T *x = jb->x, *gy = jb->gy, *lse = jb->lse;                                                   \
        const int64_t *t = jb->t, c = jb->c, ignore = jb->ignore;                                           \
        T *gx = jb->gx;                                                                                     \
        for (int64_t i = i0; i < i1; i++) {                                                                 \
            const T *xr = x + i * c;                                                                        \
            T *gr = gx + i * c;                                                                             \
            if (t[i] == ignore) {                                                                           \
                for (int64_t j = 0; j < c; j++)                                                             \
                    gr[j] = 0;                                                                              \
                continue;                                                                                   \
            }                                                                                               \
            T g = (T)((double)(jb->per_row ? gy[i] : gy[0]) * jb->scale);                                   \
            for (int64_t j = 0; j < c; j++)                                                                 \
                gr[j] = g * (exp(xr[j] - lse[i]) - (j == t[i] ? (T)1 : (T)0));                              \
        }                                                                                                   \
    }                                                                                                       \
    /* gx = g_i (exp(x - lse_i) - onehot(t_i)); scale: the mean's 1 / count, else 1 */                   \
    static void xent_bwd_##SUF(const T *gy, bool per_row, double scale, const T *x, const int64_t *t,       \
                               const T *lse, T *gx, int64_t n, int64_t c, int64_t ignore) {                 \
        xent_job jb = {.x = x, .gy = gy, .lse = lse, .t = t, .gx = gx, .c = c, .ignore = ignore,            \
                       .per_row = per_row, .scale = scale};                                                 \
        ct_parallel_range(n, n * c, 65536, xent_bwd_rows_##SUF, &jb);                                       \
    }

XENT_DEFINE(float, f32)
XENT_DEFINE(double, f64)

/* The first target neither ignore_index nor a class, or -1. */
static int64_t first_bad(const int64_t *t, int64_t n, int64_t c, int64_t ignore) {
    for (int64_t i = 0; i < n; i++)
        if (t[i] != ignore && (t[i] < 0 || t[i] >= c))
            return i;
    return -1;
}

ct_status ct_cpu_cross_entropy_fused(ct_keyset ks, ct_call *call, void *ud) {
    (void)ks, (void)ud;
    const char *op = "cross_entropy_fused";
    const ct_tensor *x0 = call->in[0], *t0 = call->in[1];
    ct_xent_geom g;
    ct_status st = ct_xent_check(op, x0, t0, &g);
    if (st)
        return st;
    int red = (int)call->ints[0];
    int64_t ignore = call->ints[1];
    ct_dtype wd = ct_nn_work_dtype(x0->dtype), ld;
    if ((st = ct_xent_loss_dtype(call, &ld)))
        return st;
    ct_scope_begin();
    ct_tensor *x = ct_nn_as_work(x0, wd), *t = ct_contiguous_impl(t0);
    ct_tensor *rows = ct_empty_impl(&g.n, 1, wd, CT_CPU), *lse = ct_empty_impl(&g.n, 1, wd, CT_CPU);
    ct_tensor *y = red == CT_REDUCTION_NONE ? rows : ct_empty_impl(NULL, 0, wd, CT_CPU);
    st = x && t && rows && lse && y ? CT_OK : ct_last_status();
    const int64_t *pt = t ? ct_tensor_data(t) : NULL;
    int64_t bad = st == CT_OK ? first_bad(pt, g.n, g.c, ignore) : -1;
    if (bad >= 0)
        st = ct_error(CT_ERROR_INDEX, "nll_loss", "Target %lld is out of bounds.", (long long)pt[bad]);
    if (st == CT_OK) {
        double acc = 0;
        int64_t count = 0;
        if (wd == CT_DTYPE_FLOAT64) {
            double *pl = ct_tensor_data(rows);
            xent_fwd_f64(ct_tensor_data(x), pt, pl, ct_tensor_data(lse), g.n, g.c, ignore);
            for (int64_t i = 0; i < g.n; i++)
                acc += pl[i];
        } else {
            float *pl = ct_tensor_data(rows);
            xent_fwd_f32(ct_tensor_data(x), pt, pl, ct_tensor_data(lse), g.n, g.c, ignore);
            for (int64_t i = 0; i < g.n; i++)
                acc += pl[i];
        }
        for (int64_t i = 0; i < g.n; i++)
            count += pt[i] != ignore;
        double v = red == CT_REDUCTION_MEAN ? acc / (double)count : acc;
        if (red != CT_REDUCTION_NONE && wd == CT_DTYPE_FLOAT64)
            *(double *)ct_tensor_data(y) = v;
        else if (red != CT_REDUCTION_NONE)
            *(float *)ct_tensor_data(y) = (float)v;
    }
    if (st == CT_OK)
        st = ct_nn_set_out(call, 0, y, ld);
    if (st == CT_OK)
        st = ct_call_set_output(call, 1, lse);
    ct_scope_end();
    return st;
}

ct_status ct_cpu_cross_entropy_fused_backward(ct_keyset ks, ct_call *call, void *ud) {
    (void)ks, (void)ud;
    const ct_tensor *gy0 = call->in[0], *x0 = call->in[1], *t0 = call->in[2], *lse0 = call->in[3];
    ct_xent_geom g;
    ct_status st = ct_xent_backward_check(call, &g);
    if (st)
        return st;
    int red = (int)call->ints[0];
    int64_t ignore = call->ints[1];
    ct_dtype wd = ct_nn_work_dtype(x0->dtype);
    ct_scope_begin();
    ct_tensor *x = ct_nn_as_work(x0, wd), *gy = ct_nn_as_work(gy0, wd), *t = ct_contiguous_impl(t0);
    /* out= (contiguous, checked) is written directly when it has the work dtype; it may
     * be x0 itself: a row's gradient element is written after its logit is read */
    ct_tensor *out = call->mode == CT_CALL_OUT ? call->out[0] : NULL;
    ct_tensor *lse = ct_contiguous_impl(lse0);
    ct_tensor *gx = out && out->dtype == wd ? out : ct_empty_impl(x0->shape, 2, wd, CT_CPU);
    st = x && gy && t && lse && gx ? CT_OK : ct_last_status();
    const int64_t *pt = t ? ct_tensor_data(t) : NULL;
    int64_t bad = st == CT_OK ? first_bad(pt, g.n, g.c, ignore) : -1;
    if (bad >= 0)
        st = ct_error(CT_ERROR_INDEX, "nll_loss", "Target %lld is out of bounds.", (long long)pt[bad]);
    if (st == CT_OK) {
        double scale = 1;
        if (red == CT_REDUCTION_MEAN) {
            int64_t count = 0;
            for (int64_t i = 0; i < g.n; i++)
                count += pt[i] != ignore;
            scale = 1.0 / (double)count;
        }
        bool per_row = red == CT_REDUCTION_NONE;
        if (wd == CT_DTYPE_FLOAT64)
            xent_bwd_f64(ct_tensor_data(gy), per_row, scale, ct_tensor_data(x), pt, ct_tensor_data(lse),
                         ct_tensor_data(gx), g.n, g.c, ignore);
        else
            xent_bwd_f32(ct_tensor_data(gy), per_row, scale, ct_tensor_data(x), pt, ct_tensor_data(lse),
                         ct_tensor_data(gx), g.n, g.c, ignore);
    }
    if (st == CT_OK && !out)
        st = ct_nn_set_out(call, 0, gx, x0->dtype);
    else if (st == CT_OK && gx != out && !ct_copy_impl(out, gx))
        st = ct_last_status();
    ct_scope_end();
    return st;
}
