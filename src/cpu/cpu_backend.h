/* The CPU backend's entry points for the registry and the core's device interface. */
#ifndef CT_CPU_BACKEND_H
#define CT_CPU_BACKEND_H

#include "core/device.h"
#include "dispatch/call.h"

/* Registers the CPU backend: its device interface and stubs (register.c). */
void ct_cpu_register(void);
/* The parts, one per file: copy.c (the device interface), elementwise.c (the
 * elementwise backend and the fast lane), shape.c and reduce_loops.c (stubs). */
void ct_cpu_register_device(void);
/* runtime.c: the CPU's lines of ct_build_info (OpenMP, BLAS, SLEEF). */
void ct_cpu_register_info(void);
void ct_cpu_register_elementwise(void);
void ct_cpu_register_shape(void);
void ct_cpu_register_reduce(void);

/* The CPU kernels of the CUSTOM ops (one per op of that family in ops.def). */
#define CT_OP(name, sig, family, flags) CT_CPU_DECL_##family(name)
#define CT_CPU_DECL_CUSTOM(name) ct_status ct_cpu_##name(ct_keyset ks, ct_call *call, void *user_data);
#define CT_CPU_DECL_UNARY_FLOAT(name)
#define CT_CPU_DECL_UNARY_SAME(name)
#define CT_CPU_DECL_BINARY_ARITH(name)
#define CT_CPU_DECL_BINARY_FLOAT(name)
#define CT_CPU_DECL_COMPARE(name)
#define CT_CPU_DECL_STRUCTURED(name)
#define CT_CPU_DECL_COMPOSITE(name)
#define CT_CPU_DECL_BACKEND(name)
#define CT_CPU_DECL_REDUCE(name)
#define CT_CPU_DECL_SCAN(name)
#define CT_CPU_DECL_VIEW(name)
#define CT_CPU_DECL_COPY(name)
#define CT_CPU_DECL_FACTORY(name)
#define CT_CPU_DECL_RANDOM(name)
#define CT_CPU_DECL_UNARY_BOOL(name)
#define CT_CPU_DECL_UNARY_SQUARE(name)
#define CT_CPU_DECL_BINARY_DIV(name)
#define CT_CPU_DECL_TERNARY_ARITH(name)
#define CT_CPU_DECL_WHERE(name)
#include "ctorch/ops.def"
#undef CT_OP
/* pad.c: pad's stub (src/meta/pad.c). */
void ct_cpu_register_pad(void);
void ct_cpu_register_upsample(void);
/* advindex.c: the stubs of index and index_put (src/meta/advindex.c). */
void ct_cpu_register_advindex(void);
/* indexing.c: the stubs of scatter, index_copy, index_fill, take, masked_select,
 * masked_scatter, kthvalue and unique (src/meta/indexing.c). */
void ct_cpu_register_indexing(void);
/* ct_device_iface.random_fill of the CPU (src/cpu/random.c). */
ct_status ct_cpu_random_fill(const ct_random_job *job, int device_index);

/* A scalar argument (alpha, beta) as the integer an integer dtype's arithmetic wraps
 * with. The meta layer checked it fits the dtype (ct_ew_check_fits): |v| < 2^64 for
 * uint64, beyond int64's range, which wraps; anything else (NaN) is 0 and never
 * reaches a loop. */
static inline int64_t ct_cpu_wrap_int(double v) {
    if (!(v > -18446744073709551616.0 && v < 18446744073709551616.0))
        return 0;
    if (v >= 9223372036854775808.0 || v < -9223372036854775808.0) {
        uint64_t u = (uint64_t)(v < 0 ? -v : v);
        return (int64_t)(v < 0 ? 0 - u : u);
    }
    return (int64_t)v;
}

#endif /* CT_CPU_BACKEND_H */
