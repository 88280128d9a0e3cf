/* CUDA kernels of the comparisons (eq ne lt le gt ge) and the logical ops (and, or,
 * xor; NaN counts as true, being nonzero): any compute dtype, bool out. */
#include "ctorch/dispatch.h"
#include "elementwise.cuh"

#define CT_CMP_OP(name, OP)                                                               \
    struct op_##name {                                                                    \
        template <typename C> __device__ bool operator()(C a, C b) const { return a OP b; } \
    };
CT_CMP_OP(eq, ==)
CT_CMP_OP(ne, !=)
CT_CMP_OP(lt, <)
CT_CMP_OP(le, <=)
CT_CMP_OP(gt, >)
CT_CMP_OP(ge, >=)
#define CT_LOGICAL_OP(name, OP)                                                                          \
    struct op_##name {                                                                                   \
        template <typename C> __device__ bool operator()(C a, C b) const { return (a != (C)0) OP(b != (C)0); } \
    };
CT_LOGICAL_OP(logical_and, &)
CT_LOGICAL_OP(logical_or, |)
CT_LOGICAL_OP(logical_xor, ^)

extern "C" bool ct_cuda_compare_supported(int op, ct_dtype dtype) {
    bool cmp = op == CT_OP_eq || op == CT_OP_ne || op == CT_OP_lt || op == CT_OP_le || op == CT_OP_gt || op == CT_OP_ge ||
               op == CT_OP_logical_and || op == CT_OP_logical_or || op == CT_OP_logical_xor;
    return cmp && ct_ew_in_groups(CT_EW_ALL, dtype);
}

extern "C" ct_status ct_cuda_compare(int op, ct_dtype dt, const ct_cuda_iter_desc *d, int device) {
    const char *name = ct_op_name(op);
    switch (op) {
    case CT_OP_eq: return ew_dispatch<2, true, CT_EW_ALL>(dt, d, op_eq(), device, name);
    case CT_OP_ne: return ew_dispatch<2, true, CT_EW_ALL>(dt, d, op_ne(), device, name);
    case CT_OP_lt: return ew_dispatch<2, true, CT_EW_ALL>(dt, d, op_lt(), device, name);
    case CT_OP_le: return ew_dispatch<2, true, CT_EW_ALL>(dt, d, op_le(), device, name);
    case CT_OP_gt: return ew_dispatch<2, true, CT_EW_ALL>(dt, d, op_gt(), device, name);
    case CT_OP_ge: return ew_dispatch<2, true, CT_EW_ALL>(dt, d, op_ge(), device, name);
    case CT_OP_logical_and: return ew_dispatch<2, true, CT_EW_ALL>(dt, d, op_logical_and(), device, name);
    case CT_OP_logical_or: return ew_dispatch<2, true, CT_EW_ALL>(dt, d, op_logical_or(), device, name);
    case CT_OP_logical_xor: return ew_dispatch<2, true, CT_EW_ALL>(dt, d, op_logical_xor(), device, name);
    default: return ct_error(CT_ERROR_NOT_IMPLEMENTED, name, "no CUDA kernel for this comparison");
    }
}
