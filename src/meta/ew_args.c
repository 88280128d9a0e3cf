/* Op-specific argument handling of the elementwise family kernel (see elementwise.h). */
#include <float.h>
#include <math.h>

#include "core/dtype.h"
#include "ctorch/ops.h"
#include "meta/elementwise.h"

/* c10's spelling of the C type behind a dtype, for its overflow message. */
static const char *c_type_name(ct_dtype d) {
    switch (d) {
    case CT_DTYPE_UINT8: return "uint8_t";
    case CT_DTYPE_INT8: return "int8_t";
    case CT_DTYPE_INT16: return "int16_t";
    case CT_DTYPE_INT32: return "int";
    case CT_DTYPE_INT64: return "int64_t";
    case CT_DTYPE_UINT16: return "uint16_t";
    case CT_DTYPE_UINT32: return "uint32_t";
    case CT_DTYPE_UINT64: return "uint64_t";
    default: return ct_dtype_name(d);
    }
}

/* Scalar arguments converted to an integer compute dtype must fit it, as PyTorch's
 * checked conversion: signed types their range, unsigned types [-max, max] (so -1
 * means the largest value, as in C). */
ct_status ct_ew_check_fits(const char *op, double v, ct_dtype d) {
    if (!ct_dtype_is_integral(d, false))
        return CT_OK;
    if (isnan(v)) /* no integer holds it (c10's overflows() says the same) */
        return ct_error(CT_ERROR_VALUE, op, "value cannot be converted to type %s without overflow", c_type_name(d));
    double lo, hi;
    switch (d) {
    case CT_DTYPE_UINT8: hi = 255.0, lo = -hi; break;
    case CT_DTYPE_UINT16: hi = 65535.0, lo = -hi; break;
    case CT_DTYPE_UINT32: hi = 4294967295.0, lo = -hi; break;
    case CT_DTYPE_UINT64: hi = 18446744073709551615.0, lo = -hi; break;
    case CT_DTYPE_INT8: lo = -128.0, hi = 127.0; break;
    case CT_DTYPE_INT16: lo = -32768.0, hi = 32767.0; break;
    case CT_DTYPE_INT32: lo = -2147483648.0, hi = 2147483647.0; break;
    default: lo = -9223372036854775808.0, hi = 9223372036854775807.0; break;
    }
    /* 2^63 - 1 and 2^64 - 1 round up to 2^63 and 2^64 as doubles, which do not fit */
    bool wide = d == CT_DTYPE_INT64 || d == CT_DTYPE_UINT64;
    if (v < lo || v > hi || (wide && (v >= hi || (d == CT_DTYPE_UINT64 && v <= lo))))
        return ct_error(CT_ERROR_VALUE, op, "value cannot be converted to type %s without overflow", c_type_name(d));
    return CT_OK;
}

static double wrapped_value(const ct_tensor *t) {
    double v = 0;
    int64_t idx[1] = {0};
    ct_tensor_get(t, idx, &v);
    return v;
}

static bool wrapped_is_int(const ct_tensor *t) {
    return t && t->wrapped_number && ct_dtype_is_integral(t->dtype, true);
}

static int64_t rounding_mode(const ct_call *call) { return call->nints > 0 ? call->ints[0] : 0; }

/* Ops that ct_ew_prepare or ct_ew_setup treat specially (every case label below): the
 * fast lane (Note [Fast lane]) runs only ops that need nothing but their loop. The
 * check_ew_args test fails when this list and those functions' case labels differ. */
bool ct_ew_has_args(ct_op op) {
    switch (op) {
    case CT_OP_addcdiv:
    case CT_OP_addcmul:
    case CT_OP_celu:
    case CT_OP_clamp:
    case CT_OP_div:
    case CT_OP_floor_divide:
    case CT_OP_fmod:
    case CT_OP_gelu:
    case CT_OP_hardtanh:
    case CT_OP_lerp:
    case CT_OP_nan_to_num:
    case CT_OP_polygamma:
    case CT_OP_pow:
    case CT_OP_relu6:
    case CT_OP_remainder:
    case CT_OP_round:
    case CT_OP_selu:
    case CT_OP_square:
    case CT_OP_where:
        return true;
    default: return false;
    }
}

ct_status ct_ew_prepare(const ct_call *call, ct_iter_config *cfg, int *variant) {
    const char *name = ct_op_name(call->op);
    switch (call->op) {
    case CT_OP_div: {
        int64_t m = rounding_mode(call);
        if (m < CT_ROUNDING_MODE_NONE || m > CT_ROUNDING_MODE_FLOOR)
            return ct_error(CT_ERROR_VALUE, name,
                            "div expected rounding_mode to be one of None, 'trunc', or 'floor' but found %lld",
                            (long long)m);
        if (m != CT_ROUNDING_MODE_NONE) {
            cfg->promote_int_to_float = false;
            *variant = m == CT_ROUNDING_MODE_TRUNC ? CT_EW_DIV_TRUNC : CT_EW_DIV_FLOOR;
        }
        if (m != CT_ROUNDING_MODE_NONE && call->in[0]->dtype == CT_DTYPE_BOOL && call->in[1]->dtype == CT_DTYPE_BOOL)
            return ct_error(CT_ERROR_TYPE, name, "not implemented for 'bool'");
        break;
    }
    case CT_OP_round:
        if (call->nints > 0)
            *variant = CT_EW_ROUND_DECIMALS;
        break;
    case CT_OP_gelu:
        if (call->ints[0] != CT_GELU_APPROXIMATE_NONE && call->ints[0] != CT_GELU_APPROXIMATE_TANH)
            return ct_error(CT_ERROR_VALUE, name, "approximate argument must be either none or tanh.");
        if (call->ints[0] == CT_GELU_APPROXIMATE_TANH)
            *variant = CT_EW_GELU_TANH;
        break;
    case CT_OP_hardtanh:
    case CT_OP_relu6:
        if (call->in[0]->dtype == CT_DTYPE_BOOL)
            return ct_error(CT_ERROR_TYPE, name, "Bool inputs not supported for hardtanh");
        if (call->op == CT_OP_hardtanh && call->s[0].v.f > call->s[1].v.f)
            return ct_error(CT_ERROR_VALUE, name, "min_val cannot be greater than max_val");
        if (call->op == CT_OP_hardtanh && ct_dtype_is_integral(call->in[0]->dtype, false) &&
            !ct_dtype_is_signed(call->in[0]->dtype) && (call->s[0].v.f < 0 || call->s[1].v.f < 0))
            return ct_error(CT_ERROR_VALUE, name, "cannot do hardtanh on an unsigned type with negative limits");
        break;
    case CT_OP_polygamma:
        if (call->ints[0] < 0)
            return ct_error(CT_ERROR_VALUE, name, "polygamma(n, x) does not support negative n.");
        break;
    case CT_OP_celu:
        if (call->s[0].v.f == 0)
            return ct_error(CT_ERROR_VALUE, name, "ZeroDivisionError: alpha cannot be 0 for CELU");
        break;
    case CT_OP_square:
        if (call->in[0]->dtype == CT_DTYPE_BOOL)
            cfg->compute_dtype = CT_DTYPE_INT64; /* pow(bool, 2) promotes with the int 2 */
        break;
    case CT_OP_pow:
        if (wrapped_is_int(call->in[1]) && ct_dtype_is_integral(call->in[0]->dtype, true) &&
            wrapped_value(call->in[1]) < 0)
            return ct_error(CT_ERROR_VALUE, name, "Integers to negative integer powers are not allowed.");
        break;
    case CT_OP_lerp:
        if (call->in[1]->dtype != call->in[0]->dtype)
            return ct_error(CT_ERROR_TYPE, name, "expected dtype %s for `end` but got dtype %s",
                            ct_dtype_name(call->in[0]->dtype), ct_dtype_name(call->in[1]->dtype));
        if (call->nin == 3 && call->in[2]->dtype != call->in[0]->dtype)
            return ct_error(CT_ERROR_TYPE, name, "expected dtype %s for `weight` but got dtype %s",
                            ct_dtype_name(call->in[0]->dtype), ct_dtype_name(call->in[2]->dtype));
        if (call->nin == 2)
            *variant = CT_EW_LERP_SCALAR;
        break;
    case CT_OP_addcdiv:
        if (ct_dtype_is_integral(call->in[1]->dtype, true) && ct_dtype_is_integral(call->in[2]->dtype, true))
            return ct_error(CT_ERROR_TYPE, name,
                            "Integer division with addcdiv is no longer supported, and in a future  release addcdiv "
                            "will perform a true division of tensor1 and tensor2. The historic addcdiv behavior can be "
                            "implemented as (input + value * torch.trunc(tensor1 / tensor2)).to(input.dtype) for "
                            "integer inputs and as (input + value * tensor1 / tensor2) for float inputs. The future "
                            "addcdiv behavior is just the latter implementation: (input + value * tensor1 / tensor2), "
                            "for all dtypes.");
        break;
    case CT_OP_clamp: {
        const ct_tensor *lo = call->in[1], *hi = call->in[2];
        if (!lo && !hi)
            return ct_error(CT_ERROR_VALUE, name, "torch.clamp: At least one of 'min' or 'max' must not be None");
        if (!lo || !hi) {
            cfg->nin = 2;
            cfg->in[1] = lo ? lo : hi;
            cfg->in[2] = NULL;
            *variant = lo ? CT_EW_CLAMP_MIN : CT_EW_CLAMP_MAX;
        }
        break;
    }
    case CT_OP_where: {
        ct_dtype c = call->in[0]->dtype;
        if (c != CT_DTYPE_BOOL && c != CT_DTYPE_UINT8)
            return ct_error(CT_ERROR_TYPE, name,
                            "where expected condition to be a boolean tensor, but got a tensor with dtype %s",
                            ct_dtype_name(c));
        cfg->keep_dtype = 1u;
        break;
    }
    default: break;
    }
    return CT_OK;
}

static double dtype_max(ct_dtype d) {
    switch (d) {
    case CT_DTYPE_FLOAT16: return 65504.0;
    case CT_DTYPE_BFLOAT16: return 3.3895313892515355e38;
    case CT_DTYPE_FLOAT32: return FLT_MAX;
    default: return DBL_MAX;
    }
}

static bool divides_integers(const ct_call *call, ct_dtype compute) {
    if (!ct_dtype_is_integral(compute, false))
        return false;
    switch (call->op) {
    case CT_OP_floor_divide:
    case CT_OP_remainder:
    case CT_OP_fmod: return true;
    case CT_OP_div: return rounding_mode(call) != CT_ROUNDING_MODE_NONE;
    default: return false;
    }
}

ct_status ct_ew_setup(const ct_call *call, const ct_iter *it, ct_loop_params *p, int *variant,
                      const ct_ew_backend *backend) {
    const char *name = ct_op_name(call->op);
    ct_dtype d = it->compute_dtype;
    ct_status st = CT_OK;
    switch (ct_op_table[call->op].sig) {
    case CT_SIG_UNARY_D1:
    case CT_SIG_UNARY_D2:
    case CT_SIG_UNARY_D3:
        for (int i = 0; i < call->nscalars && i < 3; i++)
            p->p[i] = ct_scalar_to_double(call->s[i]);
        break;
    default: break;
    }
    switch (call->op) {
    case CT_OP_celu: p->p[1] = 1.0, p->p[2] = 1.0 / p->p[0]; break;
    case CT_OP_polygamma: p->p[0] = (double)call->ints[0]; break;
    case CT_OP_selu:
        p->p[0] = 1.6732632423543772848170429916717;
        p->p[1] = 1.0507009873554804934193349852946;
        p->p[2] = 1.0;
        break;
    case CT_OP_hardtanh:
        st = ct_ew_check_fits(name, p->p[0], d);
        if (st == CT_OK)
            st = ct_ew_check_fits(name, p->p[1], d);
        break;
    case CT_OP_nan_to_num: {
        double m = dtype_max(d);
        p->p[0] = call->ints[0] ? ct_scalar_to_double(call->s[0]) : 0.0;
        p->p[1] = call->ints[1] ? ct_scalar_to_double(call->s[1]) : m;
        p->p[2] = call->ints[2] ? ct_scalar_to_double(call->s[2]) : -m;
        break;
    }
    case CT_OP_round:
        if (call->nints > 0) {
            int64_t dec = call->ints[0];
            p->p[0] = pow(10.0, fabs((double)dec)); /* |dec| in double: -INT64_MIN is no int64 */
            p->p[1] = dec < 0;
        }
        break;
    case CT_OP_pow:
        if (call->in[1]->wrapped_number && ct_dtype_is_floating(d)) {
            p->p[0] = wrapped_value(call->in[1]);
            *variant = CT_EW_POW_SCALAR;
        }
        break;
    case CT_OP_lerp:
        if (call->nin == 2)
            p->p[0] = ct_scalar_to_double(call->s[0]);
        break;
    case CT_OP_addcmul:
    case CT_OP_addcdiv: {
        ct_scalar v = call->s[0];
        p->alpha = ct_scalar_to_double(v);
        p->ialpha = ct_ew_int_scalar(v);
        if (v.type == CT_SCALAR_FLOAT) /* value on an integer dtype: converted with a check, as c10 does */
            st = ct_ew_check_fits(name, p->alpha, d);
        break;
    }
    case CT_OP_clamp:
        for (int i = 1; i < 3 && st == CT_OK; i++)
            if (wrapped_is_int(call->in[i]))
                st = ct_ew_check_fits(name, wrapped_value(call->in[i]), d);
        break;
    default: break;
    }
    if (st != CT_OK)
        return st;
    if (divides_integers(call, d) && it->data[0] && it->numel > 0 && backend) {
        bool zero = false;
        ct_status zs = backend->any_zero(it, 2, &zero); /* operand 2: the divisor */
        if (zs != CT_OK)
            return zs;
        if (zero)
            return ct_error(CT_ERROR_VALUE, name, "ZeroDivisionError");
    }
    return CT_OK;
}
