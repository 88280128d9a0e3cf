/* The op table as data (op_info.h), generated from ctorch/ops.def. */
#include "meta/op_info.h"

const ct_op_info ct_op_table[CT_OP_COUNT] = {
#define CT_OP(name, sig, family, flags) {#name, CT_SIG_##sig, CT_FAM_##family, flags},
#include "ctorch/ops.def"
#undef CT_OP
};
