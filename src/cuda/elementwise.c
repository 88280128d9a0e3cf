/* The host half of the GPU elementwise engine: the elementwise kernel (src/meta)
 * plans a ct_iter (broadcasting, promotion, output allocation, dim reordering and
 * coalescing), and this file hands its layout to the kernel file that has the op. */
#include <string.h>

#include "core/factory.h"
#include "core/dtype.h"
#include "cuda/cuda_ops.h"
#include "meta/op_info.h"

_Static_assert(CT_CUDA_MAX_OPERANDS == CT_ITER_MAX, "kernel descriptions and ct_iter must agree on operands");

/* The kernel files, in the order they are asked whether they have an op. */
typedef enum ew_file { F_NONE, F_UNARY, F_BINARY, F_COMPARE, F_UMATH, F_UMISC, F_ACT, F_BMATH, F_TERNARY } ew_file;

static ew_file file_of(ct_op op, int variant, ct_dtype dt) {
    if (variant == CT_CUDA_V_DEFAULT) {
        if (ct_cuda_unary_supported(op, dt))
            return F_UNARY;
        if (ct_cuda_binary_supported(op, dt))
            return F_BINARY;
        if (ct_cuda_compare_supported(op, dt))
            return F_COMPARE;
    }
    if (ct_cuda_unary_math_supported(op, variant, dt))
        return F_UMATH;
    if (ct_cuda_unary_misc_supported(op, variant, dt))
        return F_UMISC;
    if (ct_cuda_activation_supported(op, variant, dt))
        return F_ACT;
    if (ct_cuda_binary_math_supported(op, variant, dt))
        return F_BMATH;
    if (ct_cuda_ternary_supported(op, variant, dt))
        return F_TERNARY;
    return F_NONE;
}

bool ct_cuda_elementwise_supported(ct_op op, int variant, ct_dtype dtype) {
    return ct_dtype_valid(dtype) && file_of(op, variant, dtype) != F_NONE;
}

bool ct_cuda_elementwise_has(ct_op op, int variant) {
    for (int d = 0; d < CT_DTYPE_COUNT; d++)
        if (file_of(op, variant, (ct_dtype)d) != F_NONE)
            return true;
    return false;
}

static void desc_of(const ct_iter *it, ct_cuda_iter_desc *d) {
    memset(d, 0, sizeof *d);
    d->ntensors = it->ntensors;
    d->ndim = it->ndim;
    d->numel = it->numel;
    for (int i = 0; i < it->ndim; i++) {
        d->shape[i] = it->shape[i];
        for (int k = 0; k < it->ntensors; k++)
            d->strides[i][k] = it->strides[i][k];
    }
    for (int k = 0; k < it->ntensors; k++)
        d->data[k] = it->data[k];
}

ct_status ct_cuda_iter_run(const ct_iter *it, ct_op op, int variant, const ct_loop_params *params) {
    if (it->numel == 0 || !it->data[0])
        return CT_OK;
    int device = it->loop_out->device.index;
    if (!ct_cuda_use_device(ct_op_name(op), device))
        return ct_last_status();
    ct_cuda_iter_desc d;
    desc_of(it, &d);
    ct_cuda_params p;
    memset(&p, 0, sizeof p);
    p.alpha = params->alpha;
    p.ialpha = params->ialpha;
    for (int i = 0; i < 3; i++)
        p.p[i] = params->p[i];
    p.variant = variant;
    ct_dtype dt = it->compute_dtype;
    switch (file_of(op, variant, dt)) {
    case F_UNARY: return ct_cuda_unary(op, dt, &d, device);
    case F_BINARY: return ct_cuda_binary(op, dt, &d, &p, device);
    case F_COMPARE: return ct_cuda_compare(op, dt, &d, device);
    case F_UMATH: return ct_cuda_unary_math(op, dt, &d, &p, device);
    case F_UMISC: return ct_cuda_unary_misc(op, dt, &d, &p, device);
    case F_ACT: return ct_cuda_activation(op, dt, &d, &p, device);
    case F_BMATH: return ct_cuda_binary_math(op, dt, &d, &p, device);
    case F_TERNARY: return ct_cuda_ternary(op, dt, &d, &p, device);
    default: return ct_error(CT_ERROR_NOT_IMPLEMENTED, ct_op_name(op), "no CUDA elementwise kernel");
    }
}

ct_status ct_cuda_iter_any_zero(const ct_iter *it, int k, bool *found) {
    *found = false;
    if (it->numel == 0 || !it->data[0] || k >= it->ntensors)
        return CT_OK;
    ct_device dev = it->loop_out->device;
    const char *op = it->op ? it->op : "div";
    if (!ct_cuda_use_device(op, dev.index))
        return ct_last_status();
    ct_cuda_iter_desc d;
    desc_of(it, &d);
    ct_scope_begin();
    int64_t one = 1;
    ct_tensor *flag = ct_zeros_impl(&one, 1, CT_DTYPE_INT32, dev);
    ct_status st = flag ? ct_cuda_any_zero(it->compute_dtype, &d, k, (int *)ct_tensor_ptr(flag), dev.index)
                        : ct_last_status();
    int32_t v = 0;
    if (st == CT_OK)
        st = ct_cuda_read_flag(flag, &v, op); /* waits for the stream */
    ct_scope_end();
    *found = v != 0;
    return st;
}

static const ct_ew_backend cuda_backend = {
    .supported = ct_cuda_elementwise_supported,
    .has = ct_cuda_elementwise_has,
    .run = ct_cuda_iter_run,
    .any_zero = ct_cuda_iter_any_zero,
};

_Static_assert((int)CT_CUDA_V_COUNT == (int)CT_EW_VARIANT_COUNT && (int)CT_CUDA_V_CLAMP_MAX == (int)CT_EW_CLAMP_MAX &&
                   (int)CT_CUDA_V_DIV_TRUNC == (int)CT_EW_DIV_TRUNC &&
                   (int)CT_CUDA_V_POW_SCALAR == (int)CT_EW_POW_SCALAR,
               "the kernels' variant numbers are the elementwise kernel's");

void ct_cuda_register_elementwise(void) { ct_ew_register_backend(CT_DEVICE_CUDA, &cuda_backend); }
