/* threshold_backward on the CPU: relu's gradient in one pass.
 *
 * Written as a select (no branch, which random signs would mispredict) over
 * contiguous buffers, so the compiler vectorizes it; large tensors are split over
 * the OpenMP threads. float16/bfloat16 go through float32, whose comparison and
 * copy are exact for them. */
#include "core/factory.h"
#include "core/parallel.h"
#include "core/view.h"
#include "cpu/cpu_backend.h"
#include "cpu/loops.h"
#include "meta/nn_ops.h"

typedef struct {
    const void *g, *x;
    void *out;
    double th;
    int64_t n;
} threshold_job;

/* Blocks [b0, b1) of 4096 elements. */
#define THRESHOLD_BWD(T)                                                                                 \
    static void threshold_bwd_blocks_##T(void *ctx, int64_t b0, int64_t b1) {                          \
        const threshold_job *j = ctx;                                                                    \
        const T *restrict g = j->g, *restrict x = j->x;                                                  \
        T *restrict out = j->out;                                                                        \
        const T th = (T)j->th;                                                                           \
        int64_t end = b1 * 4096 < j->n ? b1 * 4096 : j->n;                                               \
        for (int64_t b = b0 * 4096; b < end; b += 4096) {                                                \
            int64_t e = b + 4096 < end ? b + 4096 : end;                                                 \
            for (int64_t i = b; i < e; i++) {                                                            \
                T gv = g[i]; /* loaded unconditionally, so the select needs no branch */                 \
                out[i] = x[i] <= th ? (T)0 : gv;                                                         \
            }                                                                                            \
        }                                                                                                \
    }                                                                                                    \
    static void threshold_bwd_##T(const T *restrict g, const T *restrict x, T th, T *restrict out,      \
                                  int64_t n) {                                                           \
        threshold_job j = {g, x, out, (double)th, n};                                                    \
        ct_parallel_range((n + 4095) / 4096, n, 65536, threshold_bwd_blocks_##T, &j);                    \
    }
THRESHOLD_BWD(float)
THRESHOLD_BWD(double)

ct_status ct_cpu_threshold_backward(ct_keyset ks, ct_call *call, void *ud) {
    (void)ks, (void)ud;
    ct_status st = ct_threshold_backward_check(call);
    if (st)
        return st;
    ct_dtype dt = call->in[0]->dtype, wd = dt == CT_DTYPE_FLOAT64 ? CT_DTYPE_FLOAT64 : CT_DTYPE_FLOAT32;
    double th = ct_scalar_to_double(call->s[0]);
    ct_scope_begin();
    const ct_tensor *g = ct_contiguous_impl(ct_to_dtype_impl(call->in[0], wd));
    const ct_tensor *x = ct_contiguous_impl(ct_to_dtype_impl(call->in[1], wd));
    ct_tensor *out = g ? ct_empty_impl(g->shape, g->ndim, wd, CT_CPU) : NULL;
    if (!g || !x || !out) {
        ct_scope_end();
        return ct_last_status();
    }
    if (wd == CT_DTYPE_FLOAT32)
        threshold_bwd_float(ct_tensor_data(g), ct_tensor_data(x), (float)th, ct_tensor_data(out), out->numel);
    else
        threshold_bwd_double(ct_tensor_data(g), ct_tensor_data(x), th, ct_tensor_data(out), out->numel);
    ct_tensor *res = ct_to_dtype_impl(out, dt);
    st = res ? ct_call_set_output(call, 0, res) : ct_last_status();
    ct_scope_end();
    return st;
}
