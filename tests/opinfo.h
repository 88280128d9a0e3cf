/* The OpInfo harness: one table entry per op, run against samples.
 *
 * For elementwise ops an entry names the public functions, a double-precision
 * reference, the input domain and the dtypes the op supports; the harness builds
 * samples (every supported dtype; 0-d, empty, broadcast and non-contiguous shapes),
 * and checks values, result dtype, META shape/dtype agreement, in-place and out=
 * variants, and error inputs. Unary, binary and ternary entries; an entry without an
 * in-place or out= function skips that check. Ops with parameters are tested through
 * small adapters that fix them (tests/test_ops_elementwise.c). */
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
    const char *op; /* the op's name in error messages when it differs from name (adapters) */
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
    /* ternary */
    ct_tensor *(*t)(const ct_tensor *, const ct_tensor *, const ct_tensor *);
    ct_tensor *(*t_)(ct_tensor *, const ct_tensor *, const ct_tensor *);
    ct_tensor *(*t_out)(const ct_tensor *, const ct_tensor *, const ct_tensor *, ct_tensor *);
    double (*ref3)(double a, double b, double c);
    /* Domains of the second and third inputs when hi_b > lo_b (hi_c > lo_c). */
    double lo_b, hi_b, lo_c, hi_c;
    bool nonzero_b; /* the second input has no zeros (integer divisors) */
    bool condition; /* the first input is a bool condition outside type promotion (where) */
    bool optional;  /* NULL second/third inputs are allowed (clamp's bounds) */
    double tol;     /* extra relative tolerance for floats (0: the dtype's default) */
    uint32_t refused; /* input dtypes the op must refuse with an error naming the dtype */
} ct_opinfo;

/* Runs every check for one entry; fails the current test on the first mismatch. */
void ct_opinfo_run(const ct_opinfo *info);

/* gradcheck (and gradgradcheck when asked) in float64 on the op's samples: broadcast,
 * 0-d and non-contiguous inputs, and the in-place variant. */
void ct_opinfo_gradcheck(const ct_opinfo *info, bool gradgrad);

#define CT_OPINFO_UNARY(op) .name = #op, .u = ct_##op, .u_ = ct_##op##_, .u_out = ct_##op##_out
#define CT_OPINFO_BINARY(op) .name = #op, .b = ct_##op, .b_ = ct_##op##_, .b_out = ct_##op##_out
#define CT_OPINFO_TERNARY(op) .name = #op, .t = ct_##op, .t_ = ct_##op##_, .t_out = ct_##op##_out

/* ---------------------------------------------------------------- reductions
 *
 * A reduction entry calls its op through an adaptor with one signature (out NULL: the
 * functional form) and gives a double-precision reference over the reduced values of
 * one output element, in row-major order (scans: over one row, writing one result per
 * element). The runner reduces over many dim lists, with and without keepdim, on
 * contiguous, strided, transposed and broadcast-expanded inputs, empty and 0-d ones,
 * for every supported dtype; it checks values, result dtype, META shape and dtype, the
 * out= form, and the errors of reductions without an identity. */
typedef ct_tensor *(*ct_opinfo_red_fn)(const ct_tensor *a, const int64_t *dims, int ndims, bool keepdim,
                                       ct_dtype dtype, ct_tensor *out);

typedef enum ct_opinfo_red_out {
    CT_RED_OUT_SAME,  /* the input dtype (or dtype=) */
    CT_RED_OUT_LONG,  /* bool/integers give int64 (sum, prod, cumsum) */
    CT_RED_OUT_INT64, /* always int64 (indices, counts) */
    CT_RED_OUT_BOOL,  /* bool, uint8 for uint8 inputs (all, any) */
    CT_RED_OUT_FLOAT, /* integers give the default float dtype (logsumexp) */
} ct_opinfo_red_out;

typedef struct ct_opinfo_red {
    const char *name;
    ct_opinfo_red_fn call;
    bool has_out;
    double (*ref)(const double *v, int64_t n, double param);        /* reductions */
    void (*ref_scan)(const double *v, int64_t n, double *out);       /* scans */
    double param;
    bool single_dim; /* takes exactly one dim (max_dim, argmax_dim, scans) */
    bool full_only;  /* takes no dims (max(a), argmax(a)) */
    uint32_t dtypes;
    ct_opinfo_red_out out;
    double lo, hi;
    bool integer_inputs;
    double nan_fraction; /* share of float sample values replaced by NaN */
    bool no_identity;    /* empty reduced dims are an error */
    ct_dtype dtype_arg;  /* a dtype= argument to try besides none (0, bool, means none) */
    bool no_keepdim;     /* the op has no keepdim argument */
    double tol_scale;    /* multiplies the float tolerances (0 means 1) */
} ct_opinfo_red;

void ct_opinfo_reduce_run(const ct_opinfo_red *info);
/* gradcheck (and gradgradcheck) in float64 over several dim lists, keepdim, a
 * non-contiguous and a 0-d input; run by ct_opinfo_reduce_run for float results. */
void ct_opinfo_reduce_gradcheck(const ct_opinfo_red *info, bool gradgrad);

#endif /* CT_OPINFO_H */
