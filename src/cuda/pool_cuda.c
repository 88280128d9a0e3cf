/* The host half of pooling on CUDA: max_pool2d_with_indices and max_pool2d_backward,
 * avg_pool2d and adaptive_avg_pool2d with their backward ops. Argument checks and
 * shapes are the CPU's (ct_pool2d_geometry, ct_avgpool_check, ct_adapool_check); the
 * inputs are converted to the CPU kernels' work dtypes, so the results are the CPU's.
 * max_pool2d's indices are validated on the GPU (Note [GPU index checks] in
 * indexing_cuda.c) before its gradient is scattered with atomics. */
#include <string.h>

#include "core/determinism.h"
#include "core/factory.h"
#include "ctorch/ops.h"
#include "cuda/cuda_ops.h"
#include "cuda/nn_rt.h"
#include "meta/nn_fused.h"
#include "meta/nn_ops.h"

/* a and b on one device */
static ct_status same_device(const char *op, const ct_tensor *a, const ct_tensor *b) {
    const ct_tensor *ts[2] = {a, b};
    return ct_nn_same_device(op, ts, 2);
}

/* ------------------------------------------------------------------ max_pool2d */

static ct_status max_pool_kernel(ct_keyset ks, ct_call *call, void *ud) {
    (void)ks, (void)ud;
    ct_pool2d_geom g;
    ct_status st = ct_pool2d_geometry(call, &g);
    if (st)
        return st;
    const ct_tensor *x0 = call->in[0];
    int64_t shape[4];
    int nd;
    ct_pool2d_out_shape(&g, shape, &nd);
    /* the CPU's work dtypes: float32 natively, every other dtype through float64 */
    ct_dtype dt = x0->dtype, wd = dt == CT_DTYPE_FLOAT32 ? CT_DTYPE_FLOAT32 : CT_DTYPE_FLOAT64;
    if (!ct_cuda_use_device("max_pool2d", x0->device.index))
        return ct_last_status();
    ct_scope_begin();
    ct_tensor *x = ct_nn_as_work(x0, wd);
    ct_tensor *y = ct_empty_impl(shape, nd, wd, x0->device);
    ct_tensor *idx = ct_empty_impl(shape, nd, CT_DTYPE_INT64, x0->device);
    st = x && y && idx ? CT_OK : ct_last_status();
    ct_cuda_pool_geom k;
    memset(&k, 0, sizeof k);
    k.planes = g.n * g.c;
    k.h = g.h, k.w = g.w, k.oh = g.oh, k.ow = g.ow;
    for (int i = 0; i < 2; i++) {
        k.kernel[i] = g.kernel[i];
        k.stride[i] = g.stride[i];
        k.padding[i] = g.padding[i];
        k.dilation[i] = g.dilation[i];
    }
    if (st == CT_OK)
        st = ct_cuda_max_pool(wd, ct_tensor_ptr(x), ct_tensor_ptr(y), (int64_t *)ct_tensor_ptr(idx), &k,
                              x0->device.index);
    if (st == CT_OK)
        st = ct_nn_set_out(call, 0, y, dt);
    if (st == CT_OK)
        st = ct_call_set_output(call, 1, idx);
    ct_scope_end();
    return st;
}

/* The first index outside [0, in_plane), as the CPU reports it. */
static ct_status check_pool_indices(const ct_tensor *ix, int64_t in_plane) {
    const char *op = "max_pool2d_backward";
    int64_t n = ix->numel;
    if (n == 0)
        return CT_OK;
    ct_scope_begin();
    int64_t one = 1;
    ct_tensor *first = ct_full_impl(&one, 1, ct_scalar_int(-1), CT_DTYPE_INT64, ix->device);
    ct_status st = first ? ct_cuda_check_indices(ct_tensor_ptr(ix), 1, n, in_plane, 0,
                                                 (uint64_t *)ct_tensor_ptr(first), ix->device.index, op)
                         : ct_last_status();
    int64_t k = -1, v = 0;
    if (st == CT_OK)
        st = ct_cuda_read_flag(first, &k, op);
    if (st == CT_OK && k >= 0 && k < n && (st = ct_cuda_read_element(ix, k, &v)) == CT_OK)
        st = ct_error(CT_ERROR_INDEX, op, "index %lld is out of bounds for a plane of %lld elements", (long long)v,
                      (long long)in_plane);
    ct_scope_end();
    return st;
}

static ct_status max_pool_backward_kernel(ct_keyset ks, ct_call *call, void *ud) {
    (void)ks, (void)ud;
    const ct_tensor *go = call->in[0], *x = call->in[1], *ix = call->in[2];
    const char *op = "max_pool2d_backward";
    if (ct_max_pool2d_backward_check(go, x, ix))
        return ct_last_status();
    ct_status st = same_device(op, x, go);
    if (st == CT_OK)
        st = same_device(op, x, ix);
    /* Note [Deterministic algorithms]: overlapping windows add with atomics */
    if (st == CT_OK)
        st = ct_alert_not_deterministic("max_pool2d_with_indices_backward_cuda");
    if (st)
        return st;
    int64_t h = x->shape[x->ndim - 2], w = x->shape[x->ndim - 1];
    int64_t oh = go->shape[go->ndim - 2], ow = go->shape[go->ndim - 1];
    int64_t planes = x->numel / (h * w > 0 ? h * w : 1);
    /* float32 natively, float16/bfloat16 through float32, the rest through float64 */
    ct_dtype wd = x->dtype == CT_DTYPE_FLOAT32 || x->dtype == CT_DTYPE_FLOAT16 || x->dtype == CT_DTYPE_BFLOAT16
                      ? CT_DTYPE_FLOAT32
                      : CT_DTYPE_FLOAT64;
    if (!ct_cuda_use_device(op, x->device.index))
        return ct_last_status();
    ct_scope_begin();
    ct_tensor *gw = ct_nn_as_work(go, wd), *i64 = ct_contiguous(ix);
    ct_tensor *gx = ct_zeros_impl(x->shape, x->ndim, wd, x->device);
    /* no input elements: the CPU reads no index either */
    st = gw && i64 && gx ? (planes > 0 ? check_pool_indices(i64, h * w) : CT_OK) : ct_last_status();
    if (st == CT_OK && planes > 0)
        st = ct_cuda_max_unpool(wd, ct_tensor_ptr(gw), (const int64_t *)ct_tensor_ptr(i64), ct_tensor_ptr(gx), planes,
                                h * w, oh * ow, x->device.index);
    if (st == CT_OK)
        st = ct_nn_set_out(call, 0, gx, x->dtype);
    ct_scope_end();
    return st;
}

/* ------------------------------------------------------------------ avg_pool2d */

static ct_cuda_pool_geom avg_geom(const ct_avgpool_geom *g) {
    ct_cuda_pool_geom k;
    memset(&k, 0, sizeof k);
    k.planes = g->n * g->c;
    k.h = g->h, k.w = g->w, k.oh = g->oh, k.ow = g->ow;
    for (int i = 0; i < 2; i++) {
        k.kernel[i] = g->kernel[i];
        k.stride[i] = g->stride[i];
        k.padding[i] = g->padding[i];
        k.dilation[i] = 1;
    }
    k.count_include_pad = g->count_include_pad;
    k.divisor = g->divisor;
    return k;
}

static ct_status avg_pool_kernel(ct_keyset ks, ct_call *call, void *ud) {
    (void)ks, (void)ud;
    ct_avgpool_geom g;
    const ct_tensor *x0 = call->in[0];
    ct_status st = ct_avgpool_check(x0, call->ints, &g);
    if (st == CT_OK) /* integers run on the CPU only */
        st = ct_nn_need_float("avg_pool2d", x0);
    if (st)
        return st;
    if (!ct_cuda_use_device("avg_pool2d", x0->device.index))
        return ct_last_status();
    ct_dtype wd = ct_nn_work_dtype(x0->dtype);
    int64_t shape[4] = {g.n, g.c, g.oh, g.ow};
    ct_cuda_pool_geom k = avg_geom(&g);
    ct_scope_begin();
    ct_tensor *x = ct_nn_as_work(x0, wd);
    ct_tensor *y = ct_empty_impl(g.batched ? shape : shape + 1, g.batched ? 4 : 3, wd, x0->device);
    st = x && y ? ct_cuda_avg_pool(wd, ct_tensor_ptr(x), ct_tensor_ptr(y), &k, x0->device.index) : ct_last_status();
    if (st == CT_OK)
        st = ct_nn_set_out(call, 0, y, x0->dtype);
    ct_scope_end();
    return st;
}

static ct_status avg_pool_backward_kernel(ct_keyset ks, ct_call *call, void *ud) {
    (void)ks, (void)ud;
    ct_avgpool_geom g;
    const ct_tensor *gy0 = call->in[0], *x0 = call->in[1];
    ct_status st = ct_avgpool_backward_check(call, &g);
    if (st)
        return st;
    if (!ct_cuda_use_device("avg_pool2d_backward", x0->device.index))
        return ct_last_status();
    ct_dtype wd = ct_nn_work_dtype(x0->dtype);
    ct_cuda_pool_geom k = avg_geom(&g);
    ct_scope_begin();
    ct_tensor *gy = ct_nn_as_work(gy0, wd);
    ct_tensor *gx = ct_empty_impl(x0->shape, x0->ndim, wd, x0->device);
    st = gy && gx ? ct_cuda_avg_pool_bwd(wd, ct_tensor_ptr(gy), ct_tensor_ptr(gx), &k, x0->device.index)
                  : ct_last_status();
    if (st == CT_OK)
        st = ct_nn_set_out(call, 0, gx, x0->dtype);
    ct_scope_end();
    return st;
}

/* ------------------------------------------------------------------ adaptive_avg_pool2d */

static ct_cuda_pool_geom ada_geom(const ct_adapool_geom *g) {
    ct_cuda_pool_geom k;
    memset(&k, 0, sizeof k);
    k.planes = g->n * g->c;
    k.h = g->h, k.w = g->w, k.oh = g->oh, k.ow = g->ow;
    return k;
}

static ct_status adaptive_kernel(ct_keyset ks, ct_call *call, void *ud) {
    (void)ks, (void)ud;
    ct_adapool_geom g;
    const ct_tensor *x0 = call->in[0];
    ct_status st = ct_adapool_check(x0, call->ints, &g);
    if (st)
        return st;
    if (!ct_cuda_use_device("adaptive_avg_pool2d", x0->device.index))
        return ct_last_status();
    ct_dtype wd = ct_nn_work_dtype(x0->dtype);
    int64_t shape[4] = {g.n, g.c, g.oh, g.ow};
    ct_cuda_pool_geom k = ada_geom(&g);
    ct_scope_begin();
    ct_tensor *x = ct_nn_as_work(x0, wd);
    ct_tensor *y = ct_empty_impl(g.batched ? shape : shape + 1, g.batched ? 4 : 3, wd, x0->device);
    st = x && y ? ct_cuda_adaptive_pool(wd, ct_tensor_ptr(x), ct_tensor_ptr(y), &k, x0->device.index)
                : ct_last_status();
    if (st == CT_OK)
        st = ct_nn_set_out(call, 0, y, x0->dtype);
    ct_scope_end();
    return st;
}

static ct_status adaptive_backward_kernel(ct_keyset ks, ct_call *call, void *ud) {
    (void)ks, (void)ud;
    ct_adapool_geom g;
    const ct_tensor *gy0 = call->in[0], *x0 = call->in[1];
    ct_status st = ct_adapool_backward_check(call, &g);
    if (st)
        return st;
    if (!ct_cuda_use_device("adaptive_avg_pool2d_backward", x0->device.index))
        return ct_last_status();
    ct_dtype wd = ct_nn_work_dtype(x0->dtype);
    ct_cuda_pool_geom k = ada_geom(&g);
    ct_scope_begin();
    ct_tensor *gy = ct_nn_as_work(gy0, wd);
    /* zeros: with no output cells nothing is written */
    ct_tensor *gx = ct_zeros_impl(x0->shape, x0->ndim, wd, x0->device);
    st = gy && gx ? ct_cuda_adaptive_pool_bwd(wd, ct_tensor_ptr(gy), ct_tensor_ptr(gx), &k, x0->device.index)
                  : ct_last_status();
    if (st == CT_OK)
        st = ct_nn_set_out(call, 0, gx, x0->dtype);
    ct_scope_end();
    return st;
}

void ct_cuda_register_pool(void) {
    ct_dispatch_register_default(CT_OP_max_pool2d_with_indices, CT_KEY_CUDA, max_pool_kernel, NULL);
    ct_dispatch_register_default(CT_OP_max_pool2d_backward, CT_KEY_CUDA, max_pool_backward_kernel, NULL);
    ct_dispatch_register_default(CT_OP_avg_pool2d, CT_KEY_CUDA, avg_pool_kernel, NULL);
    ct_dispatch_register_default(CT_OP_avg_pool2d_backward, CT_KEY_CUDA, avg_pool_backward_kernel, NULL);
    ct_dispatch_register_default(CT_OP_adaptive_avg_pool2d, CT_KEY_CUDA, adaptive_kernel, NULL);
    ct_dispatch_register_default(CT_OP_adaptive_avg_pool2d_backward, CT_KEY_CUDA, adaptive_backward_kernel, NULL);
}
