/* The op table as data: signature, family and flags of every op. Its schema
 * (arguments, results and their places in a ct_call) is ct_op_schema's answer
 * (ctorch/dispatch.h), defined in op_info.c from the CT_SCHEMA lines of ops.def and the
 * signature classes (Note [Op schemas]). */
#ifndef CT_OP_INFO_H
#define CT_OP_INFO_H

#include "dispatch/call.h"
#include "core/backend_api.h"

CT_BACKEND_BEGIN

/* Flags of an op (the last column of ops.def). */
enum {
    CT_OPF_NO_BOOL = 1u << 0,  /* bool inputs are an error */
    CT_OPF_NO_INT = 1u << 1,   /* integer inputs are an error */
    CT_OPF_NONDIFF = 1u << 2,  /* not differentiable (autograd refuses requires_grad inputs) */
    CT_OPF_DRAWS = 1u << 3,    /* may draw from the generator outside the RANDOM family (flash
                                  attention's dropout): a compiled graph never removes or
                                  merges its calls (Note [Pure nodes]) */
};

typedef enum ct_op_sig {
    CT_SIG_UNARY,
    CT_SIG_BINARY,
    CT_SIG_BINARY_ALPHA,
    CT_SIG_BINARY_PLAIN,
    CT_SIG_CUSTOM,
    /* reductions */
    CT_SIG_REDUCE_DT,
    CT_SIG_REDUCE,
    CT_SIG_COUNT,
    CT_SIG_VAR,
    CT_SIG_VAR_MEAN,
    CT_SIG_MINMAX,
    CT_SIG_ARG,
    CT_SIG_NORM,
    CT_SIG_SCAN_DT,
    CT_SIG_SCAN_IDX,
    /* more elementwise classes */
    CT_SIG_UNARY_FN,
    CT_SIG_UNARY_D1,
    CT_SIG_UNARY_D2,
    CT_SIG_UNARY_D3,
    CT_SIG_UNARY_OPT_D3,
    CT_SIG_UNARY_INT,
    CT_SIG_UNARY_DECIMALS,
    CT_SIG_BINARY_MODE,
    CT_SIG_TERNARY,
    CT_SIG_TERNARY_VALUE,
    CT_SIG_CLAMP,
    CT_SIG_WHERE,
} ct_op_sig;

typedef enum ct_op_family {
    CT_FAM_UNARY_FLOAT,
    CT_FAM_UNARY_SAME,
    CT_FAM_BINARY_ARITH,
    CT_FAM_BINARY_FLOAT,
    CT_FAM_COMPARE,
    CT_FAM_CUSTOM,    /* its own kernels: ct_cpu_NAME and ct_meta_NAME */
    CT_FAM_STRUCTURED, /* one device-neutral kernel ct_kernel_NAME (src/meta) and per-device stubs */
    CT_FAM_COMPOSITE, /* no kernel of its own: its function calls other ops */
    /* reductions */
    CT_FAM_REDUCE,
    CT_FAM_SCAN,
    CT_FAM_VIEW,      /* a view made by the core (src/core/view.c) */
    CT_FAM_COPY,      /* a copy made by the core (src/core/copy.c) */
    /* more elementwise families */
    CT_FAM_UNARY_BOOL,
    CT_FAM_UNARY_SQUARE,
    CT_FAM_BINARY_DIV,
    CT_FAM_TERNARY_ARITH,
    CT_FAM_WHERE,
    /* made by the core from the arguments alone (Note [Factories as ops] in factories.c) */
    CT_FAM_FACTORY,   /* empty, full, arange, ..., fill_ */
    CT_FAM_RANDOM,    /* the same, drawn from the default generator */
    CT_FAM_BACKEND,   /* kernels only from a backend that has them (cuDNN's recurrence) */
    CT_FAM_COUNT
} ct_op_family;

typedef struct ct_op_info {
    const char *name;
    ct_op_sig sig;
    ct_op_family family;
    uint32_t flags;
} ct_op_info;

extern const ct_op_info ct_op_table[CT_OP_COUNT];

CT_BACKEND_END

#endif /* CT_OP_INFO_H */
