/* Type promotion: promote_types, result_type, can_cast (PyTorch's rules). */
#include "core/dtype.h"
#include "ctorch/ops.h"
#include "tensor_impl.h"

static bool is_barebones_unsigned(ct_dtype d) {
    return d == CT_DTYPE_UINT16 || d == CT_DTYPE_UINT32 || d == CT_DTYPE_UINT64;
}

static int rank_signed(ct_dtype d) {
    switch (d) {
    case CT_DTYPE_INT8: return 1;
    case CT_DTYPE_INT16: return 2;
    case CT_DTYPE_INT32: return 3;
    case CT_DTYPE_INT64: return 4;
    default: return 0;
    }
}

static int rank_float(ct_dtype d) {
    switch (d) {
    case CT_DTYPE_FLOAT16: return 1;
    case CT_DTYPE_BFLOAT16: return 1;
    case CT_DTYPE_FLOAT32: return 2;
    case CT_DTYPE_FLOAT64: return 3;
    default: return 0;
    }
}

ct_dtype ct_promote_types(ct_dtype a, ct_dtype b) {
    if (!ct_dtype_valid(a) || !ct_dtype_valid(b)) {
        ct_error(CT_ERROR_TYPE, "promote_types", "invalid dtype");
        return CT_DTYPE_UNDEFINED;
    }
    if (a == b)
        return a;
    if (a == CT_DTYPE_BOOL && !is_barebones_unsigned(b))
        return b;
    if (b == CT_DTYPE_BOOL && !is_barebones_unsigned(a))
        return a;
    bool fa = ct_dtype_is_floating(a), fb = ct_dtype_is_floating(b);
    if (is_barebones_unsigned(a) || is_barebones_unsigned(b)) {
        /* PyTorch promotes these "barebones" unsigned types only with floats. */
        if (fa)
            return a;
        if (fb)
            return b;
        ct_error(CT_ERROR_TYPE, "promote_types",
                 "Promotion for uint16, uint32, uint64 types is not supported, attempted to promote %s and %s",
                 ct_dtype_name(a), ct_dtype_name(b));
        return CT_DTYPE_UNDEFINED;
    }
    if (fa && fb) {
        int ra = rank_float(a), rb = rank_float(b);
        if (ra == rb) /* float16 with bfloat16 */
            return CT_DTYPE_FLOAT32;
        return ra > rb ? a : b;
    }
    if (fa)
        return a;
    if (fb)
        return b;
    /* Both integers, one of them possibly uint8. */
    if (a == CT_DTYPE_UINT8 || b == CT_DTYPE_UINT8) {
        ct_dtype other = a == CT_DTYPE_UINT8 ? b : a;
        return other == CT_DTYPE_INT8 ? CT_DTYPE_INT16 : other;
    }
    return rank_signed(a) > rank_signed(b) ? a : b;
}

static ct_dtype promote_skip_undefined(ct_dtype a, ct_dtype b) {
    if (a == CT_DTYPE_UNDEFINED)
        return b;
    if (b == CT_DTYPE_UNDEFINED)
        return a;
    return ct_promote_types(a, b);
}

/* Note [Result type]
 * Operands fall in three groups: tensors with dimensions, 0-d tensors, and wrapped
 * scalars. Each group is promoted within itself; a lower-priority group changes the
 * result only when it is of a higher category (bool < integer < float). A float
 * scalar joins as the default float dtype, so int_tensor * 2.5 is float32 and
 * float16_tensor * 2.5 stays float16. */
static ct_dtype combine(ct_dtype higher, ct_dtype lower) {
    if (ct_dtype_is_floating(higher))
        return higher;
    if (higher == CT_DTYPE_BOOL || ct_dtype_is_floating(lower))
        return promote_skip_undefined(higher, lower);
    if (higher != CT_DTYPE_UNDEFINED)
        return higher;
    return lower;
}

ct_dtype ct_result_type(const ct_tensor *const *ts, int n) {
    ct_dtype dim = CT_DTYPE_UNDEFINED, zero = CT_DTYPE_UNDEFINED, wrapped = CT_DTYPE_UNDEFINED;
    for (int i = 0; i < n; i++) {
        const ct_tensor *t = ts[i];
        if (!t)
            continue;
        ct_dtype d = t->dtype;
        ct_dtype *slot = t->wrapped_number ? &wrapped : t->ndim == 0 ? &zero : &dim;
        if (t->wrapped_number && ct_dtype_is_floating(d))
            d = ct_get_default_dtype();
        *slot = promote_skip_undefined(*slot, d);
        if (*slot == CT_DTYPE_UNDEFINED)
            return CT_DTYPE_UNDEFINED;
    }
    return combine(dim, combine(zero, wrapped));
}

bool ct_can_cast(ct_dtype from, ct_dtype to) {
    if (ct_dtype_is_floating(from) && ct_dtype_is_integral(to, false))
        return false;
    if (from != CT_DTYPE_BOOL && to == CT_DTYPE_BOOL)
        return false;
    return true;
}
