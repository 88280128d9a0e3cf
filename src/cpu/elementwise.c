/* The CPU backend of the elementwise families (Note [Elementwise backends] in
 * src/meta/elementwise.h): each op's loop table per variant, and the fast lane's tiny
 * path (Note [Fast lane] in src/dispatch/dispatch.c). */
#include "cpu/cpu_backend.h"
#include "cpu/ew_loops.h"
#include "dispatch/dispatch_internal.h"
#include "meta/elementwise.h"

/* ------------------------------------------------------------------ loop tables */

/* The default loop table of every elementwise family op (NULL for other ops). */
static const ct_cpu_loop *default_loops[CT_OP_COUNT];

#define CT_EW_TABLE(name) default_loops[CT_OP_##name] = ct_cpu_loops_##name;
#define CT_EW_TABLE_UNARY_FLOAT(name) CT_EW_TABLE(name)
#define CT_EW_TABLE_UNARY_SAME(name) CT_EW_TABLE(name)
#define CT_EW_TABLE_BINARY_ARITH(name) CT_EW_TABLE(name)
#define CT_EW_TABLE_BINARY_FLOAT(name) CT_EW_TABLE(name)
#define CT_EW_TABLE_COMPARE(name) CT_EW_TABLE(name)
#define CT_EW_TABLE_UNARY_BOOL(name) CT_EW_TABLE(name)
#define CT_EW_TABLE_UNARY_SQUARE(name) CT_EW_TABLE(name)
#define CT_EW_TABLE_BINARY_DIV(name) CT_EW_TABLE(name)
#define CT_EW_TABLE_TERNARY_ARITH(name) CT_EW_TABLE(name)
#define CT_EW_TABLE_WHERE(name) CT_EW_TABLE(name)
#define CT_EW_TABLE_CUSTOM(name)
#define CT_EW_TABLE_STRUCTURED(name)
#define CT_EW_TABLE_COMPOSITE(name)
#define CT_EW_TABLE_BACKEND(name)
#define CT_EW_TABLE_REDUCE(name)
#define CT_EW_TABLE_SCAN(name)
#define CT_EW_TABLE_VIEW(name)
#define CT_EW_TABLE_COPY(name)
#define CT_EW_TABLE_FACTORY(name)
#define CT_EW_TABLE_RANDOM(name)

static void fill_default_loops(void) {
#define CT_OP(name, sig, family, flags) CT_EW_TABLE_##family(name)
#include "ctorch/ops.def"
#undef CT_OP
}

static const ct_cpu_loop *loops_of(ct_op op, int variant) {
    switch (variant) {
    case CT_EW_DEFAULT: return (unsigned)op < CT_OP_COUNT ? default_loops[op] : NULL;
    case CT_EW_DIV_TRUNC: return ct_cpu_loops_div_trunc;
    case CT_EW_DIV_FLOOR: return ct_cpu_loops_floor_divide;
    case CT_EW_ROUND_DECIMALS: return ct_cpu_loops_round_decimals;
    case CT_EW_GELU_TANH: return ct_cpu_loops_gelu_tanh;
    case CT_EW_POW_SCALAR: return ct_cpu_loops_pow_scalar;
    case CT_EW_LERP_SCALAR: return ct_cpu_loops_lerp_scalar;
    case CT_EW_CLAMP_MIN: return ct_cpu_loops_clamp_min;
    case CT_EW_CLAMP_MAX: return ct_cpu_loops_clamp_max;
    default: return NULL;
    }
}

static bool cpu_supported(ct_op op, int variant, ct_dtype compute) {
    const ct_cpu_loop *loops = loops_of(op, variant);
    return loops && ct_dtype_valid(compute) && loops[compute] != NULL;
}

static bool cpu_has(ct_op op, int variant) { return loops_of(op, variant) != NULL; }

static ct_status cpu_run(const ct_iter *it, ct_op op, int variant, const ct_loop_params *params) {
    ct_iter_run(it, loops_of(op, variant)[it->compute_dtype], params);
    return CT_OK;
}

static ct_status cpu_any_zero(const ct_iter *it, int k, bool *found) {
    (void)k; /* the loop reads the divisor, operand 2 */
    int zero = 0;
    ct_iter_run(it, ct_cpu_loops_any_zero[it->compute_dtype], &zero);
    *found = zero != 0;
    return CT_OK;
}

static const ct_ew_backend cpu_backend = {
    .supported = cpu_supported,
    .has = cpu_has,
    .run = cpu_run,
    .any_zero = cpu_any_zero,
};

/* ------------------------------------------------------------------ the fast lane */

/* The fast lane's ops: elementwise ops whose kernel does nothing but run their loop
 * for same-dtype floating inputs (no arguments, no checks that depend on the values).
 * NULL for every other op. */
static const ct_cpu_loop *tiny_loops[CT_OP_COUNT];
static bool tiny_bool_out[CT_OP_COUNT];

static void tiny_register(void) {
    for (int op = 0; op < CT_OP_COUNT; op++) {
        const ct_op_info *info = &ct_op_table[op];
        bool sig_ok = info->sig == CT_SIG_UNARY || info->sig == CT_SIG_BINARY || info->sig == CT_SIG_BINARY_ALPHA;
        bool fam_ok = info->family == CT_FAM_UNARY_FLOAT || info->family == CT_FAM_UNARY_SAME ||
                      info->family == CT_FAM_BINARY_ARITH || info->family == CT_FAM_BINARY_FLOAT ||
                      info->family == CT_FAM_COMPARE;
        if (!sig_ok || !fam_ok || ct_ew_has_args(op))
            continue;
        tiny_loops[op] = default_loops[op];
        tiny_bool_out[op] = info->family == CT_FAM_COMPARE;
    }
}

#define CT_FLOATING_MASK                                                                        \
    ((1u << CT_DTYPE_FLOAT32) | (1u << CT_DTYPE_FLOAT64) | (1u << CT_DTYPE_FLOAT16) |           \
     (1u << CT_DTYPE_BFLOAT16))

static ct_tensor *ew_tiny(ct_op op, const ct_tensor *a, const ct_tensor *b) {
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

void ct_cpu_register_elementwise(void) {
    fill_default_loops();
    tiny_register();
    ct_ew_register_backend(CT_DEVICE_CPU, &cpu_backend);
    ct_dispatch_set_fast_lane_fn(ew_tiny);
}
