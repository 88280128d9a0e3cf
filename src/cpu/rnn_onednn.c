/* One layer and direction of an LSTM's forward through oneDNN's LSTM primitive, for
 * inference (ct_lstm_layer_onednn in ctorch/ext.h).
 *
 * Note [LSTM inference on oneDNN]
 * With prepacked weights (Note [Prepacked recurrent weights] in packed_mm.c) the
 * fused recurrence's forward is on par with PyTorch's on two Xeon cores, but one core
 * still took 356 ms against 309 (bench/rnn, LSTM 512x2, seq 128, batch 32, medians of
 * three rounds): PyTorch's inference runs oneDNN's LSTM primitive (mkldnn_rnn_layer),
 * whose brgemm kernel applies the gates to each block of the step's product while it
 * is in registers, where the fused recurrence writes the product out and reads it
 * back. Debian's oneDNN 2.6 has the same primitive. So where autograd records nothing
 * (inference mode, no_grad, or no input requires grad) and ctorch runs on one thread,
 * an LSTM layer on float32 CPU tensors without lengths or projections runs that
 * primitive, as PyTorch does; training keeps the fused node, whose saved gates the
 * backward reads. Cores 2 and 3 of the 16-core GPU host, bench/rnn --forward-only
 * against bench/torch_rnn_peer.py, medians of 5, four alternating rounds: one thread,
 * this primitive 270, 318, 262, 269 ms, the fused recurrence 283, 295, 309, 289 ms,
 * PyTorch 2.11 280, 271, 277, 300 ms (weights reordered on every call included, about
 * 10 ms). On two threads an earlier run gave the primitive, whose work OpenMP splits,
 * 199, 236, 190 ms against the fused recurrence's 193, 144, 193 ms on ctorch's pool,
 * so with more than one thread the pool keeps the work: a thread the system pauses
 * then holds up one block, not every step (Note [Threads on a busy machine] in
 * src/core/parallel.c). Without AVX-512 oneDNN 2.6 has no brgemm RNN and runs its
 * reference one over its sgemm: on one core of the 2-core EPYC (AVX2) the forward took
 * 529 and 588 ms with it against 531 and 526 ms with the fused recurrence, so only
 * CPUs with AVX-512 take it (CT_ONEDNN_RNN=1 runs it anywhere, at any thread count,
 * for tests). Its results differ from the fused recurrence's in rounding (another
 * order of the gates' sums). */
#include <stdlib.h>
#include <string.h>

#include "cpu/blas.h"
#include "ctorch.h"
#include "ctorch/ext.h"

#include "cpu/cpu_isa.h"
#include "cpu/onednn.h"

#ifdef CT_HAVE_OPENMP
#include <omp.h>
#endif

#ifdef CT_HAVE_DNNL
#define RO_TRY(x)                  \
    do {                           \
        if ((x) != dnnl_success)   \
            goto done;             \
    } while (0)

/* A user memory over t's data with the given dims and strides (elements). */
static dnnl_status_t ro_user(dnnl_memory_t *m, dnnl_memory_desc_t *md, int nd, const dnnl_dims_t dims,
                             const dnnl_dims_t strides, const ct_tensor *t) {
    dnnl_status_t s = dnnl_memory_desc_init_by_strides(md, nd, dims, dnnl_f32, strides);
    return s != dnnl_success ? s : dnnl_memory_create(m, md, ct_cpu_dnnl_engine(), ct_tensor_data(t));
}

#endif

static bool ro_f32_cpu(const ct_tensor *t) {
    return !t || (ct_tensor_dtype(t) == CT_F32 && ct_tensor_device(t).type == CT_DEVICE_CPU);
}

static ct_status ro_refused(void) {
    return ct_error(CT_ERROR_NOT_IMPLEMENTED, "lstm_layer_onednn", "oneDNN's LSTM does not apply here");
}

static bool ro_matrix(const ct_tensor *t, int64_t r, int64_t c) {
    return ct_tensor_dim(t) == 2 && ct_tensor_size(t, 0) == r && ct_tensor_size(t, 1) == c;
}

static bool ro_needs_grad(const ct_tensor *t) { return t && ct_tensor_requires_grad(t); }

/* Whether the primitive takes this layer (ct_lstm_layer_onednn in ctorch/ext.h). */
static bool ro_applies(const ct_tensor *x, int tdim, int64_t T, int64_t B, const ct_tensor *wih, const ct_tensor *b,
                       const ct_tensor *whh, const ct_tensor *h0, const ct_tensor *c0) {
    const char *env = getenv("CT_ONEDNN_RNN");
    const bool forced = env && strcmp(env, "1") == 0;
    if ((env && strcmp(env, "0") == 0) ||
        (!forced && (ct_get_num_threads() > 1 || !ct_cpu_has_avx512())) || !ct_cpu_sgemm_onednn())
        return false;
    if (!ro_f32_cpu(x) || !ro_f32_cpu(wih) || !ro_f32_cpu(b) || !ro_f32_cpu(whh) || !ro_f32_cpu(h0) ||
        !ro_f32_cpu(c0) || ct_tensor_dim(x) != 2 || ct_tensor_dim(wih) != 2 || ct_tensor_dim(whh) != 2 ||
        (b && ct_tensor_dim(b) != 1) || (tdim != 0 && tdim != 1))
        return false;
    const int64_t G = ct_tensor_size(wih, 0), I = ct_tensor_size(x, 1), H = ct_tensor_size(whh, 1);
    if (T < 1 || B < 1 || H < 1 || I < 1 || G != 4 * H || ct_tensor_size(x, 0) != T * B ||
        ct_tensor_size(wih, 1) != I || ct_tensor_size(whh, 0) != G || (b && ct_tensor_size(b, 0) != G) ||
        !ro_matrix(h0, B, H) || !ro_matrix(c0, B, H) || ct_tensor_stride(x, 1) != 1)
        return false;
    return !(ct_is_grad_enabled() && (ro_needs_grad(x) || ro_needs_grad(wih) || ro_needs_grad(b) ||
                                      ro_needs_grad(whh) || ro_needs_grad(h0) || ro_needs_grad(c0)));
}

ct_status ct_lstm_layer_onednn(ct_tensor *x, int tdim, int64_t T, int64_t B, ct_tensor *wih, ct_tensor *b,
                               ct_tensor *whh, ct_tensor *h0, ct_tensor *c0, bool reverse, ct_tensor **hall,
                               ct_tensor **cn) {
    CT_CHECK_ARG_STATUS("lstm_layer_onednn", x);
    CT_CHECK_ARG_STATUS("lstm_layer_onednn", wih);
    CT_CHECK_ARG_STATUS("lstm_layer_onednn", whh);
    CT_CHECK_ARG_STATUS("lstm_layer_onednn", h0);
    CT_CHECK_ARG_STATUS("lstm_layer_onednn", c0);
    CT_CHECK_ARG_STATUS("lstm_layer_onednn", hall);
    CT_CHECK_ARG_STATUS("lstm_layer_onednn", cn);
    if (!ro_applies(x, tdim, T, B, wih, b, whh, h0, c0))
        return ro_refused();
#ifndef CT_HAVE_DNNL
    (void)reverse;
    return ro_refused();
#else
    const int64_t G = ct_tensor_size(wih, 0), I = ct_tensor_size(x, 1), H = ct_tensor_size(whh, 1);
    dnnl_engine_t ro_engine = ct_cpu_dnnl_engine();
    if (!ro_engine)
        return ro_refused();
    ct_status rc = CT_ERROR_NOT_IMPLEMENTED;
    ct_scope_begin();
    ct_tensor *wi = ct_contiguous(wih), *wh = ct_contiguous(whh), *bc = b ? ct_contiguous(b) : NULL;
    ct_tensor *h0c = ct_contiguous(h0), *c0c = ct_contiguous(c0);
    ct_tensor *y = ct_empty(CT_SHAPE(T, B, H), CT_F32, CT_CPU), *cy = ct_empty(CT_SHAPE(B, H), CT_F32, CT_CPU);
    ct_tensor *hy = ct_empty(CT_SHAPE(B, H), CT_F32, CT_CPU); /* oneDNN wants both final states or neither */
    if (!wi || !wh || (b && !bc) || !h0c || !c0c || !y || !cy || !hy) {
        rc = ct_last_status();
        ct_scope_end();
        return rc;
    }
    dnnl_stream_t stream = NULL;
    dnnl_memory_t mx = NULL, mwi = NULL, mwh = NULL, mb = NULL, mh0 = NULL, mc0 = NULL, my = NULL, mcy = NULL;
    dnnl_memory_t mhy = NULL;
    dnnl_memory_t pwi = NULL, pwh = NULL, scratch = NULL;
    dnnl_primitive_attr_t attr = NULL;
    dnnl_primitive_desc_t pd = NULL;
    dnnl_primitive_t prim = NULL;
    dnnl_memory_desc_t dx, dwi, dwh, db, dh0, dc0, dy, dhy, dcy, awi, awh;
    const int64_t rs = ct_tensor_stride(x, 0);
    const dnnl_dim_t ts = tdim ? rs : B * rs, bs = tdim ? T * rs : rs;
    RO_TRY(dnnl_stream_create(&stream, ro_engine, dnnl_stream_default_flags));
    RO_TRY(ro_user(&mx, &dx, 3, (dnnl_dims_t){T, B, I}, (dnnl_dims_t){ts, bs, 1}, x));
    RO_TRY(ro_user(&mwi, &dwi, 5, (dnnl_dims_t){1, 1, I, 4, H}, (dnnl_dims_t){G * I, G * I, 1, H * I, I}, wi));
    RO_TRY(ro_user(&mwh, &dwh, 5, (dnnl_dims_t){1, 1, H, 4, H}, (dnnl_dims_t){G * H, G * H, 1, H * H, H}, wh));
    RO_TRY(ro_user(&mh0, &dh0, 4, (dnnl_dims_t){1, 1, B, H}, (dnnl_dims_t){B * H, B * H, H, 1}, h0c));
    RO_TRY(ro_user(&mc0, &dc0, 4, (dnnl_dims_t){1, 1, B, H}, (dnnl_dims_t){B * H, B * H, H, 1}, c0c));
    RO_TRY(ro_user(&my, &dy, 3, (dnnl_dims_t){T, B, H}, (dnnl_dims_t){B * H, H, 1}, y));
    RO_TRY(ro_user(&mhy, &dhy, 4, (dnnl_dims_t){1, 1, B, H}, (dnnl_dims_t){B * H, B * H, H, 1}, hy));
    RO_TRY(ro_user(&mcy, &dcy, 4, (dnnl_dims_t){1, 1, B, H}, (dnnl_dims_t){B * H, B * H, H, 1}, cy));
    if (bc)
        RO_TRY(ro_user(&mb, &db, 4, (dnnl_dims_t){1, 1, 4, H}, (dnnl_dims_t){G, G, H, 1}, bc));
    RO_TRY(dnnl_memory_desc_init_by_tag(&awi, 5, (dnnl_dims_t){1, 1, I, 4, H}, dnnl_f32, dnnl_format_tag_any));
    RO_TRY(dnnl_memory_desc_init_by_tag(&awh, 5, (dnnl_dims_t){1, 1, H, 4, H}, dnnl_f32, dnnl_format_tag_any));
    dnnl_rnn_desc_t rd;
    RO_TRY(dnnl_lstm_forward_desc_init(&rd, dnnl_forward_inference,
                                       reverse ? dnnl_unidirectional_right2left : dnnl_unidirectional_left2right, &dx,
                                       &dh0, &dc0, &awi, &awh, bc ? &db : NULL, &dy, &dhy, &dcy, 0));
    RO_TRY(dnnl_primitive_attr_create(&attr));
    RO_TRY(dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user));
    RO_TRY(dnnl_primitive_desc_create(&pd, &rd, attr, ro_engine, NULL));
    const dnnl_memory_desc_t *qwi = dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
    const dnnl_memory_desc_t *qwh = dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 1);
    const dnnl_memory_desc_t *qsp = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
    RO_TRY(dnnl_memory_create(&scratch, qsp, ro_engine, DNNL_MEMORY_ALLOCATE));
    RO_TRY(dnnl_primitive_create(&prim, pd));
#ifdef CT_HAVE_OPENMP
    int omp_threads = omp_get_max_threads();
    omp_set_num_threads(ct_get_num_threads());
#endif
    dnnl_status_t s = ct_cpu_dnnl_reorder(stream, mwi, &dwi, qwi, &pwi);
    if (s == dnnl_success)
        s = ct_cpu_dnnl_reorder(stream, mwh, &dwh, qwh, &pwh);
    dnnl_exec_arg_t args[] = {{DNNL_ARG_SRC_LAYER, mx},     {DNNL_ARG_SRC_ITER, mh0},      {DNNL_ARG_SRC_ITER_C, mc0},
                              {DNNL_ARG_WEIGHTS_LAYER, pwi}, {DNNL_ARG_WEIGHTS_ITER, pwh}, {DNNL_ARG_DST_LAYER, my},
                              {DNNL_ARG_DST_ITER, mhy},      {DNNL_ARG_DST_ITER_C, mcy},    {DNNL_ARG_SCRATCHPAD, scratch},
                              {DNNL_ARG_BIAS, mb}};
    if (s == dnnl_success)
        s = dnnl_primitive_execute(prim, stream, bc ? 10 : 9, args);
    if (s == dnnl_success)
        s = dnnl_stream_wait(stream);
#ifdef CT_HAVE_OPENMP
    omp_set_num_threads(omp_threads);
#endif
    if (s == dnnl_success) {
        *hall = ct_keep(y);
        *cn = ct_keep(cy);
        rc = CT_OK;
    } else {
        rc = s == dnnl_out_of_memory ? ct_error(CT_ERROR_OUT_OF_MEMORY, "lstm", "oneDNN's LSTM ran out of memory")
                                     : ct_error(CT_ERROR_RUNTIME, "lstm", "oneDNN's LSTM failed (status %d)", (int)s);
    }
done:
    if (rc == CT_ERROR_NOT_IMPLEMENTED) /* oneDNN refused a descriptor */
        ro_refused();
    if (prim)
        dnnl_primitive_destroy(prim);
    if (pd)
        dnnl_primitive_desc_destroy(pd);
    if (attr)
        dnnl_primitive_attr_destroy(attr);
    dnnl_memory_t mems[] = {mx, mwi, mwh, mb, mh0, mc0, my, mhy, mcy, pwi, pwh, scratch};
    for (size_t i = 0; i < sizeof mems / sizeof mems[0]; i++)
        if (mems[i])
            dnnl_memory_destroy(mems[i]);
    if (stream)
        dnnl_stream_destroy(stream);
    ct_scope_end();
    return rc;
#endif
}
