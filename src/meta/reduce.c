/* The reduction family: shape and dtype rules, argument checks and output handling of
 * every reduction and scan op, for CPU and META. The loops are in src/cpu/reduce*.c. */
#include <math.h>
#include <string.h>

#include "core/checks.h"
#include "core/dtype.h"
#include "core/factory.h"
#include "core/view.h"
#include "ctorch/ops.h"
#include "meta/kernels.h"
#include "meta/op_info.h"
#include "meta/reduce.h"
#include "meta/reduce_iter.h"
#include "meta/stubs.h"

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
    ct_dtype pre;  /* convert the input to this first (a dtype= argument), or UNDEFINED */
    ct_dtype work; /* float32, float64 or int64 */
    ct_dtype out_dt[2];
    int nout;
    bool reorder;  /* the walk order does not matter (no indices, no scans) */
    bool scan;
    /* Reductions without an identity: error on empty reduced dims (message flavour). */
    enum { EMPTY_OK, EMPTY_MINMAX, EMPTY_ARG, EMPTY_NORM } empty;
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

static ct_status not_implemented(const char *name, ct_dtype d) {
    return ct_error(CT_ERROR_TYPE, name, "\"%s\" not implemented for '%s'", name, ct_dtype_pt_name(d));
}

/* Comparisons run on int64 work values: uint64 beyond INT64_MAX would compare wrong. */
static ct_status check_comparable(const char *name, ct_dtype d) {
    return d == CT_DTYPE_UINT64 ? not_implemented(name, d) : CT_OK;
}

static ct_status plan_norm(const ct_call *call, const ct_tensor *a, ct_dtype requested, red_plan *pl) {
    double ord = ct_scalar_to_double(call->s[0]);
    ct_dtype in = a->dtype;
    pl->P.p = ord;
    pl->P.kind = CT_RED_NORM;
    switch (call->op) {
    case CT_OP_norm: /* torch.norm is linalg.vector_norm over dims (PyTorch 2.x) */
    case CT_OP_linalg_vector_norm:
    case CT_OP_linalg__powsum: {
        const char *pn = call->op == CT_OP_linalg__powsum ? "linalg._powsum" : "linalg.vector_norm";
        if (!is_float(in))
            return ct_error(CT_ERROR_TYPE, ct_op_name(call->op),
                            "%s: Expected a floating point or complex tensor as input. Got %s", pn, ct_dtype_pt_name(in));
        if (requested != CT_DTYPE_UNDEFINED && !is_float(requested))
            return ct_error(CT_ERROR_TYPE, ct_op_name(call->op),
                            "%s: dtype should be floating point or complex, but got %s", pn, ct_dtype_pt_name(requested));
        if (requested != CT_DTYPE_UNDEFINED && call->op != CT_OP_linalg__powsum &&
            ct_promote_types(in, requested) != requested)
            return ct_error(CT_ERROR_TYPE, ct_op_name(call->op),
                            "%s: the dtype of the input (%s) should be convertible without narrowing to the "
                            "specified dtype (%s)",
                            pn, ct_dtype_pt_name(in), ct_dtype_pt_name(requested));
        if (call->op == CT_OP_linalg__powsum)
            pl->P.kind = CT_RED_POWSUM;
        else if (isinf(ord) || ord < 0)
            pl->empty = EMPTY_NORM;
        break;
    }
    default: break;
    }
    pl->out_dt[0] = requested != CT_DTYPE_UNDEFINED ? requested : in;
    return CT_OK;
}

static ct_status plan_op(const ct_call *call, const ct_tensor *a, ct_dtype requested, red_plan *pl) {
    const char *name = ct_op_name(call->op);
    ct_dtype in = a->dtype;
    memset(pl, 0, sizeof *pl);
    pl->pre = requested;
    pl->nout = 1;
    pl->reorder = true;
    ct_status st = CT_OK;
    switch (call->op) {
    case CT_OP_sum:
    case CT_OP_nansum:
    case CT_OP_prod:
        pl->P.kind = call->op == CT_OP_sum ? CT_RED_SUM : call->op == CT_OP_nansum ? CT_RED_NANSUM : CT_RED_PROD;
        pl->out_dt[0] = int_to_long(in, requested);
        break;
    case CT_OP_mean:
        if (requested != CT_DTYPE_UNDEFINED ? !is_float(requested) : !is_float(in))
            return ct_error(CT_ERROR_TYPE, name,
                            "mean(): could not infer output dtype. %s dtype must be either a floating point or "
                            "complex dtype. Got: %s",
                            requested != CT_DTYPE_UNDEFINED ? "Optional" : "Input",
                            ct_dtype_pt_name(requested != CT_DTYPE_UNDEFINED ? requested : in));
        pl->P.kind = CT_RED_SUM;
        pl->P.mean = true;
        pl->out_dt[0] = requested != CT_DTYPE_UNDEFINED ? requested : in;
        break;
    case CT_OP_nanmean:
        if (!is_float(in))
            return ct_error(CT_ERROR_TYPE, name, "nanmean(): expected input to have floating point or complex dtype but got %s",
                            ct_dtype_pt_name(in));
        if (requested != CT_DTYPE_UNDEFINED && !is_float(requested))
            return ct_error(CT_ERROR_TYPE, name, "nanmean(): expected dtype to be a floating point dtype but got %s",
                            ct_dtype_pt_name(requested));
        pl->P.kind = CT_RED_NANSUM;
        pl->P.mean = true;
        pl->out_dt[0] = requested != CT_DTYPE_UNDEFINED ? requested : in;
        break;
    case CT_OP_amax:
    case CT_OP_amin:
        st = check_comparable(name, in);
        pl->P.kind = call->op == CT_OP_amax ? CT_RED_MAX : CT_RED_MIN;
        pl->out_dt[0] = in;
        pl->empty = EMPTY_MINMAX;
        break;
    case CT_OP_max:
    case CT_OP_min: {
        st = check_comparable(name, in);
        bool full = call->ints[CT_RED_INT_NDIMS] == 0;
        pl->P.kind = full ? (call->op == CT_OP_max ? CT_RED_MAX : CT_RED_MIN)
                          : (call->op == CT_OP_max ? CT_RED_ARGMAX : CT_RED_ARGMIN);
        pl->out_dt[0] = in;
        pl->out_dt[1] = CT_DTYPE_INT64;
        pl->nout = full ? 1 : 2;
        pl->reorder = full;
        pl->empty = EMPTY_MINMAX;
        break;
    }
    case CT_OP_argmax:
    case CT_OP_argmin:
        st = check_comparable(name, in);
        if (st == CT_OK && in == CT_DTYPE_BOOL) /* PyTorch refuses it; max(dim) takes bools */
            st = ct_error(CT_ERROR_TYPE, name, "%s(): does not support bool input", name);
        pl->P.kind = call->op == CT_OP_argmax ? CT_RED_ARGMAX : CT_RED_ARGMIN;
        pl->P.index_only = true;
        pl->out_dt[0] = CT_DTYPE_INT64;
        pl->reorder = false;
        pl->empty = EMPTY_ARG;
        break;
    case CT_OP_logsumexp:
        pl->P.kind = CT_RED_LOGSUMEXP;
        pl->out_dt[0] = is_float(in) ? in : ct_get_default_dtype();
        break;
    case CT_OP_all:
    case CT_OP_any:
        pl->P.kind = call->op == CT_OP_all ? CT_RED_ALL : CT_RED_ANY;
        pl->out_dt[0] = in == CT_DTYPE_UINT8 ? CT_DTYPE_UINT8 : CT_DTYPE_BOOL;
        break;
    case CT_OP_count_nonzero:
        pl->P.kind = CT_RED_COUNT;
        pl->out_dt[0] = CT_DTYPE_INT64;
        break;
    case CT_OP_var:
    case CT_OP_std:
    case CT_OP_var_mean:
    case CT_OP_std_mean:
        if (!is_float(in)) {
            if (call->op == CT_OP_var || call->op == CT_OP_std)
                return ct_error(CT_ERROR_TYPE, name, "std and var only support floating point and complex dtypes");
            return ct_error(CT_ERROR_TYPE, name, "%s only support floating point and complex dtypes", name);
        }
        pl->P.kind = CT_RED_VAR;
        pl->P.p = ct_scalar_to_double(call->s[0]);
        pl->P.take_sqrt = call->op == CT_OP_std || call->op == CT_OP_std_mean;
        pl->out_dt[0] = pl->out_dt[1] = in;
        pl->nout = call->op == CT_OP_var_mean || call->op == CT_OP_std_mean ? 2 : 1;
        break;
    case CT_OP_norm:
    case CT_OP_linalg_vector_norm:
    case CT_OP_linalg__powsum:
        st = plan_norm(call, a, requested, pl);
        break;
    case CT_OP_cumsum:
    case CT_OP_cumprod:
        pl->P.kind = call->op == CT_OP_cumsum ? CT_RED_CUMSUM : CT_RED_CUMPROD;
        pl->out_dt[0] = int_to_long(in, requested);
        pl->scan = true;
        break;
    case CT_OP_cummax:
    case CT_OP_cummin:
        st = check_comparable(name, in);
        pl->P.kind = call->op == CT_OP_cummax ? CT_RED_CUMMAX : CT_RED_CUMMIN;
        pl->out_dt[0] = in;
        pl->out_dt[1] = CT_DTYPE_INT64;
        pl->nout = 2;
        pl->scan = true;
        break;
    case CT_OP_softmax:
    case CT_OP_log_softmax: {
        ct_dtype d = requested != CT_DTYPE_UNDEFINED ? requested : in;
        if (!is_float(d))
            return not_implemented(name, d);
        pl->P.kind = call->op == CT_OP_softmax ? CT_RED_SOFTMAX : CT_RED_LOG_SOFTMAX;
        pl->out_dt[0] = d;
        pl->scan = true;
        break;
    }
    default:
        return ct_error(CT_ERROR_NOT_IMPLEMENTED, name, "no reduction rule for this op");
    }
    if (st)
        return st;
    /* Float results of integer inputs (logsumexp, a float dtype=) compute in floats;
     * index and count results keep the input's own kind of work. */
    ct_dtype value_dt = pl->out_dt[0];
    switch (pl->P.kind) {
    case CT_RED_ARGMAX:
    case CT_RED_ARGMIN:
    case CT_RED_COUNT:
    case CT_RED_ANY:
    case CT_RED_ALL: value_dt = requested != CT_DTYPE_UNDEFINED ? requested : in; break;
    default: break;
    }
    pl->work = work_for(value_dt);
    return CT_OK;
}

/* Reductions without an identity refuse empty reduced dims, in PyTorch's words. */
static ct_status check_empty(const char *name, const red_plan *pl, const ct_tensor *a, uint32_t mask, bool full,
                             double ord) {
    if (pl->empty == EMPTY_OK)
        return CT_OK;
    if (full) {
        if (a->numel != 0)
            return CT_OK;
        if (pl->empty == EMPTY_NORM)
            return ct_error(CT_ERROR_VALUE, name,
                            "linalg.vector_norm cannot compute the %g norm on an empty tensor because the operation "
                            "does not have an identity",
                            ord);
        if (pl->empty == EMPTY_ARG)
            return ct_error(CT_ERROR_INDEX, name,
                            "%s(): Expected reduction dim to be specified for input.numel() == 0.", name);
        return ct_error(CT_ERROR_VALUE, name,
                        "%s(): Expected reduction dim to be specified for input.numel() == 0. Specify the reduction "
                        "dim with the 'dim' argument.",
                        name);
    }
    for (int d = 0; d < a->ndim; d++) {
        if (!((mask >> d) & 1u) || a->shape[d] != 0)
            continue;
        if (pl->empty == EMPTY_NORM)
            return ct_error(CT_ERROR_VALUE, name,
                            "linalg.vector_norm cannot compute the %g norm on the dimension %d because this "
                            "dimension is empty and the operation does not have an identity",
                            ord, d);
        return ct_error(CT_ERROR_INDEX, name, "%s(): Expected reduction dim %d to have non-zero size.", name, d);
    }
    return CT_OK;
}

/* The loop output for result i: the given out= tensor, or a new one, or a temporary
 * of the result dtype that is copied into out= afterwards. */
static ct_status make_output(ct_call *call, int i, const int64_t *shape, int nd, ct_dtype dt, ct_device dev,
                             bool exact, ct_tensor **loop) {
    const char *name = ct_op_name(call->op);
    if (call->mode == CT_CALL_FUNCTIONAL) {
        ct_tensor *t = ct_empty_impl(shape, nd, dt, dev);
        if (!t)
            return ct_last_status();
        *loop = t;
        return ct_call_set_output(call, i, t);
    }
    ct_tensor *o = call->out[i];
    if (!o)
        return ct_error_null(name);
    if (ct_check_no_internal_overlap(name, o)) /* Note [Internal overlap] */
        return ct_last_status();
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
    if (exact) /* index outputs */
        return ct_error(CT_ERROR_TYPE, name, "Expected out tensor to have dtype %s, but got %s instead",
                        ct_dtype_name(dt), ct_dtype_name(o->dtype));
    if (!ct_can_cast(dt, o->dtype))
        return ct_error(CT_ERROR_TYPE, name, "result type %s can't be cast to the desired output type %s",
                        ct_dtype_name(dt), ct_dtype_name(o->dtype));
    *loop = ct_empty_impl(shape, nd, dt, dev);
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
    ct_op_sig sig = ct_op_table[call->op].sig;
    if (requested == CT_DTYPE_UNDEFINED && call->mode == CT_CALL_OUT && call->out[0] &&
        (sig == CT_SIG_REDUCE_DT || sig == CT_SIG_NORM || sig == CT_SIG_SCAN_DT))
        requested = call->out[0]->dtype;
    red_plan pl;
    st = plan_op(call, a, requested, &pl);
    if (st)
        return st;
    int scan_dim = 0;
    if (pl.scan)
        ct_wrap_dim(name, call->ints[CT_RED_INT_DIMS], a->ndim, &scan_dim); /* checked by parse_dims */
    else if ((st = check_empty(name, &pl, a, mask, nd == 0, pl.P.p)) != CT_OK)
        return st;

    int64_t oshape[CT_MAX_DIMS];
    int ond = 0;
    for (int d = 0; d < a->ndim; d++) {
        if (pl.scan || !((mask >> d) & 1u))
            oshape[ond++] = a->shape[d];
        else if (keepdim)
            oshape[ond++] = 1;
    }
    ct_tensor *loop[2] = {NULL, NULL};
    for (int i = 0; i < pl.nout; i++) {
        bool index_out = (pl.P.index_only && i == 0) ||
                         (i == 1 && (pl.P.kind == CT_RED_ARGMAX || pl.P.kind == CT_RED_ARGMIN ||
                                     pl.P.kind == CT_RED_CUMMAX || pl.P.kind == CT_RED_CUMMIN));
        st = make_output(call, i, oshape, ond, pl.out_dt[i], a->device, index_out, &loop[i]);
        if (st)
            return st;
    }
    if (a->device.type == CT_DEVICE_META || ct_shape_numel(oshape, ond) == 0)
        return CT_OK;

    /* Note [Narrow reduction inputs]
     * A bfloat16 or float16 input reduced in float32 work is converted first, a full
     * copy at twice its size that the reduction then reads again. A device whose
     * reduce_narrow slot is filled loads the narrow elements and widens them as it
     * reads: the widening is exact, so the result is the same bits. On an H200 profile
     * of a GPT-2 bf16 training step the bias gradients (sums over 32768 rows of bf16)
     * spent more time in that conversion than in the sums. */
    bool narrow = !pl.scan && pl.pre == CT_DTYPE_UNDEFINED && pl.work == CT_DTYPE_FLOAT32 &&
                  (a->dtype == CT_DTYPE_BFLOAT16 || a->dtype == CT_DTYPE_FLOAT16) &&
                  (unsigned)a->device.type < CT_STUB_SLOTS && ct_stub_reduce_narrow[a->device.type];
    const ct_tensor *w = a;
    if (!narrow && pl.pre != CT_DTYPE_UNDEFINED)
        w = ct_to_dtype_impl(w, pl.pre);
    if (w && !narrow)
        w = ct_to_dtype_impl(w, pl.work);
    if (!w)
        return ct_last_status();
    ct_reduce_iter it;
    if (pl.scan)
        ct_scan_iter_init(&it, w, scan_dim, loop, pl.nout);
    else
        ct_reduce_iter_init(&it, w, mask, loop, pl.nout, keepdim, pl.reorder);
    st = narrow ? CT_CALL_STUB(reduce_narrow, name, a->device, &it, &pl.P, a->device, name)
                : CT_CALL_STUB(reduce, name, a->device, &it, &pl.P, a->device, name);
    if (st)
        return st;
    for (int i = 0; i < pl.nout; i++)
        if (call->mode != CT_CALL_FUNCTIONAL && loop[i] != call->out[i] && !ct_copy_impl(call->out[i], loop[i]))
            return ct_last_status();
    return CT_OK;
}
