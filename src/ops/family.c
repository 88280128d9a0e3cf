/* Kernels shared by whole op families: one shape/dtype rule and one CPU driver per
 * family, specialised by each op's loop table. The same kernel serves the META
 * backend: the iterator computes the output's shape and dtype and nothing runs. */
#include <string.h>

#include "autograd/node.h"
#include "cpu/loops.h"
#include "dispatch/dispatch_internal.h"
#include "ops/ew_args.h"
#include "meta/kernels.h"
#include "meta/op_info.h"
#include "ops/reduce.h"
#ifdef CT_HAVE_CUDA
#include "cuda/cuda_ops.h"
#endif

const ct_op_info ct_op_table[CT_OP_COUNT] = {
#define CT_OP(name, sig, family, flags) {#name, CT_SIG_##sig, CT_FAM_##family, flags},
#include "ctorch/ops.def"
#undef CT_OP
};

static ct_status check_dtype_flags(const ct_op_info *info, ct_dtype compute, const ct_call *call) {
    if ((info->flags & CT_OPF_NO_BOOL) && compute == CT_DTYPE_BOOL) {
        if (call->op == CT_OP_neg)
            return ct_error(CT_ERROR_TYPE, info->name,
                            "Negation, the `-` operator, on a bool tensor is not supported. If you are trying to "
                            "invert a mask, use the `~` or `logical_not()` operator instead.");
        if (call->op == CT_OP_sub)
            return ct_error(CT_ERROR_TYPE, info->name,
                            "Subtraction, the `-` operator, with two bool tensors is not supported. Use the `^` or "
                            "`logical_xor()` operator instead.");
        return ct_error(CT_ERROR_TYPE, info->name, "not implemented for 'bool'");
    }
    if ((info->flags & CT_OPF_NO_INT) && ct_dtype_is_integral(compute, false))
        return ct_error(CT_ERROR_TYPE, info->name, "not implemented for '%s'", ct_dtype_name(compute));
    return CT_OK;
}

static void family_config(const ct_op_info *info, ct_iter_config *cfg) {
    switch (info->family) {
    case CT_FAM_UNARY_FLOAT:
    case CT_FAM_BINARY_FLOAT: cfg->promote_int_to_float = true; break;
    case CT_FAM_COMPARE:
    case CT_FAM_UNARY_BOOL: cfg->out_kind = CT_ITER_OUT_BOOL; break;
    case CT_FAM_BINARY_DIV: cfg->promote_int_to_float = true; break; /* unless a rounding mode (ew_args.c) */
    default: break;
    }
}

static ct_status fill_params(const ct_call *call, ct_dtype compute, ct_loop_params *p) {
    memset(p, 0, sizeof *p);
    p->alpha = 1.0;
    p->ialpha = 1;
    if (call->nscalars > 0 && ct_op_table[call->op].sig == CT_SIG_BINARY_ALPHA) {
        ct_scalar a = call->s[0];
        if (!ct_dtype_is_floating(compute) && a.type == CT_SCALAR_FLOAT)
            return ct_error(CT_ERROR_TYPE, ct_op_name(call->op),
                            "For integral input tensors, argument alpha must not be a floating point number.");
        if (compute == CT_DTYPE_BOOL && a.type == CT_SCALAR_INT && a.v.i != 0 && a.v.i != 1)
            return ct_error(CT_ERROR_TYPE, ct_op_name(call->op),
                            "Boolean alpha only supported for Boolean results.");
        p->alpha = ct_scalar_to_double(a);
        p->ialpha = a.type == CT_SCALAR_INT ? a.v.i : a.type == CT_SCALAR_BOOL ? a.v.b : (int64_t)a.v.f;
    }
    return CT_OK;
}

/* The kernel of every elementwise family op, for CPU, META and CUDA: one shape and
 * dtype rule, then the backend's loop (a CPU loop table entry or a CUDA launch). */
static ct_status elementwise_kernel(ct_keyset ks, ct_call *call, void *user_data) {
    const ct_op_info *info = &ct_op_table[call->op];
    const ct_cpu_loop *loops = user_data;
    ct_iter_config cfg = ct_iter_config_default();
    cfg.op = info->name;
    cfg.nin = call->nin;
    for (int i = 0; i < call->nin; i++)
        cfg.in[i] = call->in[i];
    bool cuda = ct_keyset_has(ks, CT_KEY_CUDA);
    if (call->mode != CT_CALL_FUNCTIONAL)
        cfg.out = call->out[0];
    cfg.inplace = call->mode == CT_CALL_INPLACE;
    family_config(info, &cfg);
    ct_status st = ct_ew_prepare(call, &cfg, &loops);
    if (st != CT_OK)
        return st;
#ifdef CT_HAVE_CUDA
    /* CPU scalars join the GPU operands (in the call's scope); after ct_ew_prepare,
     * which may rearrange the operands (clamp with one bound). */
    if (cuda && cfg.nin > 1) {
        ct_status mst = ct_cuda_move_scalars(cfg.in, cfg.nin, ct_cuda_call_device(call));
        if (mst != CT_OK)
            return mst;
    }
#endif

    ct_iter it;
    st = ct_iter_build(&it, &cfg);
    if (st != CT_OK)
        return st;
    ct_loop_params params;
    st = check_dtype_flags(info, it.compute_dtype, call);
    if (st == CT_OK)
        st = fill_params(call, it.compute_dtype, &params);
    if (st == CT_OK)
        st = ct_ew_setup(call, &it, &params, &loops);
    ct_cpu_loop loop = loops ? loops[it.compute_dtype] : NULL;
#ifdef CT_HAVE_CUDA
    /* The GPU runs the dtypes the CPU has loops for (so both refuse the same ones), in
     * the form of the op the arguments chose. */
    int variant = cuda ? ct_cuda_variant_of(call->op, loops) : 0;
    bool have_loop = loop != NULL && (!cuda || ct_cuda_elementwise_supported(call->op, variant, it.compute_dtype));
    /* An op the CUDA backend has no kernel for at all reads like an empty dispatch slot. */
    if (st == CT_OK && cuda && !ct_cuda_elementwise_has(call->op, variant))
        st = ct_error(CT_ERROR_NOT_IMPLEMENTED, info->name, "no kernel for this op at dispatch key %s",
                      ct_dispatch_key_name(CT_KEY_CUDA));
#else
    bool have_loop = !cuda && loop != NULL;
#endif
    if (st == CT_OK && !have_loop)
        st = ct_error(CT_ERROR_TYPE, info->name, "not implemented for '%s'", ct_dtype_name(it.compute_dtype));
    if (st != CT_OK) {
        ct_iter_abort(&it);
        return st;
    }
#ifdef CT_HAVE_CUDA
    if (cuda) {
        st = ct_cuda_iter_run(&it, call->op, variant, &params);
        if (st != CT_OK) {
            ct_iter_abort(&it);
            return st;
        }
    } else
#endif
        ct_iter_run(&it, loop, &params);
    ct_tensor *out = ct_iter_finish(&it);
    if (!out)
        return ct_last_status();
    if (call->mode == CT_CALL_FUNCTIONAL) {
        call->out[0] = out; /* the iterator's reference moves to the call */
        call->nout = 1;
    } else {
        ct_release(out); /* the call already holds the given output */
    }
    return CT_OK;
}

/* The fast lane's ops (Note [Fast lane] in src/dispatch/dispatch.c): elementwise ops
 * whose kernel does nothing but run their loop for same-dtype floating inputs (no
 * arguments, no checks that depend on the values). NULL for every other op. */
static const ct_cpu_loop *tiny_loops[CT_OP_COUNT];
static bool tiny_bool_out[CT_OP_COUNT];

static void tiny_register(ct_op op, const ct_cpu_loop *loops) {
    const ct_op_info *info = &ct_op_table[op];
    bool sig_ok = info->sig == CT_SIG_UNARY || info->sig == CT_SIG_BINARY || info->sig == CT_SIG_BINARY_ALPHA;
    bool fam_ok = info->family == CT_FAM_UNARY_FLOAT || info->family == CT_FAM_UNARY_SAME ||
                  info->family == CT_FAM_BINARY_ARITH || info->family == CT_FAM_BINARY_FLOAT ||
                  info->family == CT_FAM_COMPARE;
    if (!sig_ok || !fam_ok || ct_ew_has_args(op))
        return;
    tiny_loops[op] = loops;
    tiny_bool_out[op] = info->family == CT_FAM_COMPARE;
}

#define CT_FLOATING_MASK                                                                        \
    ((1u << CT_DTYPE_FLOAT32) | (1u << CT_DTYPE_FLOAT64) | (1u << CT_DTYPE_FLOAT16) |           \
     (1u << CT_DTYPE_BFLOAT16))

ct_tensor *ct_ew_tiny(ct_op op, const ct_tensor *a, const ct_tensor *b) {
    ct_dispatch_ensure_init(); /* fills tiny_loops */
    const ct_cpu_loop *loops = tiny_loops[op];
    if (!loops || !((1u << a->dtype) & CT_FLOATING_MASK) || !ct_iter_tiny_ok(a, b))
        return NULL;
    ct_cpu_loop loop = loops[a->dtype];
    if (!loop || (ct_op_table[op].sig == CT_SIG_UNARY) != (b == NULL) || !ct_dispatch_fast_lane(op))
        return NULL;
    ct_loop_params params = {.alpha = 1.0, .ialpha = 1};
    ct_tensor *r = ct_iter_tiny(ct_op_table[op].name, loop, tiny_bool_out[op] ? CT_DTYPE_BOOL : a->dtype, a, b,
                                &params);
    if (r)
        ct_dispatch_fast_lane_taken();
    return r;
}

/* Note [CUDA registration]
 * In a build with CUDA every elementwise family op gets the family kernel at the CUDA
 * key too (it launches the family's CUDA kernel); the CUDA backend registers its own
 * kernels of CUSTOM ops (ct_cuda_register_kernels). Ops without a CUDA kernel keep an
 * empty slot, so a CUDA call fails with the dispatcher's "no kernel for this op at
 * dispatch key CUDA". */
#ifdef CT_HAVE_CUDA
#define CT_REGISTER_CUDA_LOOPS(name) \
    ct_dispatch_register_default(CT_OP_##name, CT_KEY_CUDA, elementwise_kernel, (void *)ct_cpu_loops_##name);
#else
#define CT_REGISTER_CUDA_LOOPS(name)
#endif

#define CT_REGISTER_LOOPS(name)                                                                        \
    tiny_register(CT_OP_##name, ct_cpu_loops_##name);                                                    \
    ct_dispatch_register_default(CT_OP_##name, CT_KEY_CPU, elementwise_kernel, (void *)ct_cpu_loops_##name); \
    ct_dispatch_register_default(CT_OP_##name, CT_KEY_META, elementwise_kernel, (void *)ct_cpu_loops_##name); \
    CT_REGISTER_CUDA_LOOPS(name)
#define CT_REGISTER_UNARY_FLOAT(name) CT_REGISTER_LOOPS(name)
#define CT_REGISTER_UNARY_SAME(name) CT_REGISTER_LOOPS(name)
#define CT_REGISTER_BINARY_ARITH(name) CT_REGISTER_LOOPS(name)
#define CT_REGISTER_BINARY_FLOAT(name) CT_REGISTER_LOOPS(name)
#define CT_REGISTER_COMPARE(name) CT_REGISTER_LOOPS(name)
#define CT_REGISTER_CUSTOM(name)                                                       \
    ct_dispatch_register_default(CT_OP_##name, CT_KEY_CPU, ct_cpu_##name, NULL);       \
    ct_dispatch_register_default(CT_OP_##name, CT_KEY_META, ct_meta_##name, NULL);
#define CT_REGISTER_COMPOSITE(name)
/* Structured kernels (src/meta): the same kernel at CPU and META; the CUDA backend
 * registers it where it fills the stubs. */
#define CT_REGISTER_STRUCTURED(name)                                                     \
    ct_dispatch_register_default(CT_OP_##name, CT_KEY_CPU, ct_kernel_##name, NULL);     \
    ct_dispatch_register_default(CT_OP_##name, CT_KEY_META, ct_kernel_##name, NULL);
/* reductions and scans (src/ops/reduce.c): one kernel for CPU, META and CUDA */
#ifdef CT_HAVE_CUDA
#define CT_REGISTER_CUDA_REDUCE(name) ct_dispatch_register_default(CT_OP_##name, CT_KEY_CUDA, ct_reduce_kernel, NULL);
#else
#define CT_REGISTER_CUDA_REDUCE(name)
#endif
#define CT_REGISTER_REDUCE(name)                                                       \
    ct_dispatch_register_default(CT_OP_##name, CT_KEY_CPU, ct_reduce_kernel, NULL);    \
    ct_dispatch_register_default(CT_OP_##name, CT_KEY_META, ct_reduce_kernel, NULL);   \
    CT_REGISTER_CUDA_REDUCE(name)
#define CT_REGISTER_SCAN(name) CT_REGISTER_REDUCE(name)
/* Views and copies are the core's own functions, which serve CUDA tensors too
 * (copies launch the CUDA copy kernels through src/core/copy.c). */
#ifdef CT_HAVE_CUDA
#define CT_REGISTER_CUDA_CORE(name) ct_dispatch_register_default(CT_OP_##name, CT_KEY_CUDA, ct_core_kernel, NULL);
#else
#define CT_REGISTER_CUDA_CORE(name)
#endif
#define CT_REGISTER_VIEW(name)                                                      \
    ct_dispatch_register_default(CT_OP_##name, CT_KEY_CPU, ct_core_kernel, NULL);   \
    ct_dispatch_register_default(CT_OP_##name, CT_KEY_META, ct_core_kernel, NULL);  \
    CT_REGISTER_CUDA_CORE(name)
#define CT_REGISTER_COPY(name) CT_REGISTER_VIEW(name)
#define CT_REGISTER_UNARY_BOOL(name) CT_REGISTER_LOOPS(name)
#define CT_REGISTER_UNARY_SQUARE(name) CT_REGISTER_LOOPS(name)
#define CT_REGISTER_BINARY_DIV(name) CT_REGISTER_LOOPS(name)
#define CT_REGISTER_TERNARY_ARITH(name) CT_REGISTER_LOOPS(name)
#define CT_REGISTER_WHERE(name) CT_REGISTER_LOOPS(name)

void ct_register_default_kernels(void) {
#define CT_OP(name, sig, family, flags) CT_REGISTER_##family(name)
#include "ctorch/ops.def"
#undef CT_OP
}
