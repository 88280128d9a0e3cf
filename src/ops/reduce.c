/* The reduction family: shape and dtype rules, argument checks and output handling of
 * every reduction and scan op, for CPU and META. The loops are in src/cpu/reduce*.c. */
#include <math.h>
#include <string.h>

#include "core/dtype.h"
#include "cpu/reduce.h"
#include "ops/op_info.h"
#include "ops/reduce.h"

ct_status ct_reduce_parse_dims(const char *op, int ndim, const int64_t *dims, int ndims, uint32_t *mask) {
    *mask = 0;
    if (!dims || ndims <= 0) {
        *mask = ndim > 0 ? (uint32_t)((1ull << ndim) - 1) : 0;
        return CT_OK;
    }
    uint32_t seen = 0;
    for (int i = 0; i < ndims; i++) {
        int d;
        if (ct_wrap_dim(op, dims[i], ndim, &d))
            return ct_last_status();
        if ((seen >> d) & 1u)
            return ct_error(CT_ERROR_VALUE, op, "dim %d appears multiple times in the list of dims", d);
        seen |= 1u << d;
    }
    *mask = ndim > 0 ? seen : 0;
    return CT_OK;
}

/* What one call computes: the loop, the work dtype the input is converted to, and the
 * outputs' dtypes. */
typedef struct red_plan {
    ct_reduce_params P;
    ct_dtype pre;    /* convert the input to this first (a dtype= argument), or UNDEFINED */
    ct_dtype work;   /* float32, float64 or int64 */
    ct_dtype out_dt[2];
    int nout;
    bool reorder;
} red_plan;

static bool is_float(ct_dtype d) { return ct_dtype_is_floating(d); }

/* The work dtype for computing a result of dtype d. */
static ct_dtype work_for(ct_dtype d) {
    if (d == CT_DTYPE_FLOAT64)
        return CT_DTYPE_FLOAT64;
    if (is_float(d))
        return CT_DTYPE_FLOAT32;
    return CT_DTYPE_INT64;
}

static ct_status check_dtype_arg(const char *name, ct_dtype d) {
    if (d != CT_DTYPE_UNDEFINED && !ct_dtype_valid(d))
        return ct_error(CT_ERROR_TYPE, name, "invalid dtype %d", (int)d);
    return CT_OK;
}

/* sum/prod/cumsum: bool and integers give int64 unless a dtype is asked for. */
static ct_dtype int_to_long(ct_dtype in, ct_dtype requested) {
    if (requested != CT_DTYPE_UNDEFINED)
        return requested;
    return is_float(in) ? in : CT_DTYPE_INT64;
}

static ct_status plan_op(const ct_call *call, const ct_tensor *a, ct_dtype requested, red_plan *pl) {
    const char *name = ct_op_name(call->op);
    memset(pl, 0, sizeof *pl);
    pl->pre = requested;
    pl->nout = 1;
    pl->reorder = true;
    switch (call->op) {
    case CT_OP_sum:
        pl->P.kind = CT_RED_SUM;
        pl->out_dt[0] = int_to_long(a->dtype, requested);
        break;
    default:
        return ct_error(CT_ERROR_NOT_IMPLEMENTED, name, "no reduction rule for this op");
    }
    pl->work = work_for(pl->out_dt[0]);
    return CT_OK;
}

/* The loop output for result i: the given out= tensor, or a new one, or a temporary
 * of the result dtype that is copied into out= afterwards. */
static ct_status make_output(ct_call *call, int i, const int64_t *shape, int nd, ct_dtype dt, ct_device dev,
                             ct_tensor **loop) {
    const char *name = ct_op_name(call->op);
    if (call->mode == CT_CALL_FUNCTIONAL) {
        ct_tensor *t = ct_empty(shape, nd, dt, dev);
        if (!t)
            return ct_last_status();
        *loop = t;
        return ct_call_set_output(call, i, t);
    }
    ct_tensor *o = call->out[i];
    if (!o)
        return ct_error_null(name);
    if (!ct_device_equal(o->device, dev)) {
        char x[32], y[32];
        return ct_error(CT_ERROR_DEVICE, name, "the output is on %s but the input is on %s",
                        ct_device_str(o->device, x, sizeof x), ct_device_str(dev, y, sizeof y));
    }
    bool same = o->ndim == nd;
    for (int d = 0; same && d < nd; d++)
        same = o->shape[d] == shape[d];
    if (!same) {
        char x[128], y[128];
        return ct_error(CT_ERROR_VALUE, name, "the out= tensor has shape %s but the result has shape %s",
                        ct_shape_str(o->shape, o->ndim, x, sizeof x), ct_shape_str(shape, nd, y, sizeof y));
    }
    if (o->dtype == dt) {
        *loop = o;
        return CT_OK;
    }
    if (!ct_can_cast(dt, o->dtype))
        return ct_error(CT_ERROR_TYPE, name, "result type %s can't be cast to the desired output type %s",
                        ct_dtype_name(dt), ct_dtype_name(o->dtype));
    *loop = ct_empty(shape, nd, dt, dev);
    return *loop ? CT_OK : ct_last_status();
}

ct_status ct_reduce_kernel(ct_keyset ks, ct_call *call, void *user_data) {
    (void)ks;
    (void)user_data;
    const char *name = ct_op_name(call->op);
    const ct_tensor *a = call->in[0];
    bool keepdim = call->ints[CT_RED_INT_KEEPDIM] != 0;
    int nd = (int)call->ints[CT_RED_INT_NDIMS];
    ct_status st = check_dtype_arg(name, call->dtype);
    if (st)
        return st;
    uint32_t mask;
    st = ct_reduce_parse_dims(name, a->ndim, &call->ints[CT_RED_INT_DIMS], nd, &mask);
    if (st)
        return st;
    ct_dtype requested = call->dtype;
    /* out= variants of ops with a dtype= argument compute in the out= tensor's dtype. */
    if (requested == CT_DTYPE_UNDEFINED && call->mode == CT_CALL_OUT && call->out[0] &&
        ct_op_table[call->op].sig == CT_SIG_REDUCE_DT)
        requested = call->out[0]->dtype;
    red_plan pl;
    st = plan_op(call, a, requested, &pl);
    if (st)
        return st;

    int64_t oshape[CT_MAX_DIMS];
    int ond = 0;
    for (int d = 0; d < a->ndim; d++) {
        if ((mask >> d) & 1u) {
            if (keepdim)
                oshape[ond++] = 1;
        } else {
            oshape[ond++] = a->shape[d];
        }
    }
    ct_tensor *loop[2] = {NULL, NULL};
    for (int i = 0; i < pl.nout; i++) {
        st = make_output(call, i, oshape, ond, pl.out_dt[i], a->device, &loop[i]);
        if (st)
            return st;
    }
    if (a->device.type == CT_DEVICE_META || ct_shape_numel(oshape, ond) == 0)
        return CT_OK;

    const ct_tensor *w = a;
    if (pl.pre != CT_DTYPE_UNDEFINED)
        w = ct_to_dtype(w, pl.pre);
    if (w)
        w = ct_to_dtype(w, pl.work);
    if (!w)
        return ct_last_status();
    ct_reduce_iter it;
    ct_reduce_iter_init(&it, w, mask, loop, pl.nout, keepdim, pl.reorder);
    ct_cpu_reduce(&it, &pl.P);
    for (int i = 0; i < pl.nout; i++)
        if (call->mode != CT_CALL_FUNCTIONAL && loop[i] != call->out[i] && !ct_copy_(call->out[i], loop[i]))
            return ct_last_status();
    return CT_OK;
}
