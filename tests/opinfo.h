/* The OpInfo harness: one table entry per op, run against samples.
 *
 * For elementwise ops an entry names the public functions, a double-precision
 * reference, the input domain and the dtypes the op supports; the harness builds
 * samples (every supported dtype; 0-d, empty, broadcast and non-contiguous shapes),
 * and checks values, result dtype, META shape/dtype agreement, in-place and out=
 * variants, and error inputs. */
#ifndef CT_OPINFO_H
#define CT_OPINFO_H

#include "testutil.h"

#define CT_DT(d) (1u << (d))
#define CT_DTS_FLOAT (CT_DT(CT_F16) | CT_DT(CT_BF16) | CT_DT(CT_F32) | CT_DT(CT_F64))
#define CT_DTS_SINT (CT_DT(CT_I8) | CT_DT(CT_I16) | CT_DT(CT_I32) | CT_DT(CT_I64))
#define CT_DTS_UINT (CT_DT(CT_U8) | CT_DT(CT_U16) | CT_DT(CT_U32) | CT_DT(CT_U64))
#define CT_DTS_INT (CT_DTS_SINT | CT_DTS_UINT)
#define CT_DTS_ALL (CT_DTS_FLOAT | CT_DTS_INT | CT_DT(CT_BOOL))

typedef enum ct_opinfo_out {
    CT_OPINFO_OUT_SAME,  /* output dtype = promoted input dtype */
    CT_OPINFO_OUT_FLOAT, /* integers promote to the default float dtype */
    CT_OPINFO_OUT_BOOL,  /* output bool */
} ct_opinfo_out;

typedef struct ct_opinfo {
    const char *name;
    /* unary */
    ct_tensor *(*u)(const ct_tensor *);
    ct_tensor *(*u_)(ct_tensor *);
    ct_tensor *(*u_out)(const ct_tensor *, ct_tensor *);
    /* binary */
    ct_tensor *(*b)(const ct_tensor *, const ct_tensor *);
    ct_tensor *(*b_)(ct_tensor *, const ct_tensor *);
    ct_tensor *(*b_out)(const ct_tensor *, const ct_tensor *, ct_tensor *);
    double (*ref)(double a, double b);
    double lo, hi;       /* sample values are drawn from [lo, hi] */
    uint32_t dtypes;     /* supported input dtypes (CT_DT bits) */
    ct_opinfo_out out;
    bool integer_inputs; /* draw integer-valued samples even for float dtypes */
} ct_opinfo;

/* Runs every check for one entry; fails the current test on the first mismatch. */
void ct_opinfo_run(const ct_opinfo *info);

#define CT_OPINFO_UNARY(op) .name = #op, .u = ct_##op, .u_ = ct_##op##_, .u_out = ct_##op##_out
#define CT_OPINFO_BINARY(op) .name = #op, .b = ct_##op, .b_ = ct_##op##_, .b_out = ct_##op##_out

#endif /* CT_OPINFO_H */
