/* Every op with a CUDA kernel, run on the GPU and compared with the CPU result:
 * elementwise ops over every dtype and layout (contiguous, misaligned, broadcast,
 * strided, 0-d, empty, CPU scalars, in-place, out=), matrix products, and random
 * numbers equal to the CPU generator's. Skipped (exit code 77) without a GPU. */
#include <stdlib.h>
#include <string.h>

#include "cuda_testutil.h"

#define CUDA0 CT_CUDA(0)

static const ct_dtype all_dtypes[] = {CT_BOOL, CT_U8,  CT_I8,  CT_I16, CT_I32, CT_I64, CT_U16,
                                      CT_U32,  CT_U64, CT_F16, CT_BF16, CT_F32, CT_F64};
#define NDT ((int)(sizeof all_dtypes / sizeof all_dtypes[0]))

typedef struct {
    const char *name;
    ct_tensor *(*u)(const ct_tensor *);
    ct_tensor *(*u_)(ct_tensor *);
    double lo, hi;
} unary_case;

typedef struct {
    const char *name;
    ct_tensor *(*b)(const ct_tensor *, const ct_tensor *);
    ct_tensor *(*b_)(ct_tensor *, const ct_tensor *);
    ct_tensor *(*b_out)(const ct_tensor *, const ct_tensor *, ct_tensor *);
    ct_tensor *(*bs)(const ct_tensor *, ct_scalar);
} binary_case;

#define U(op, lo, hi) {#op, ct_##op, ct_##op##_, lo, hi}
static const unary_case unary_cases[] = {
    U(neg, -50, 50), U(abs, -50, 50),  U(relu, -50, 50), U(exp, -5, 5),   U(log, 0.05, 60),
    U(sqrt, 0, 60),  U(sin, -10, 10),  U(cos, -10, 10),  U(tanh, -4, 4), U(sigmoid, -8, 8),
};
#define B(op) {#op, ct_##op, ct_##op##_, ct_##op##_out, ct_##op##_scalar}
static const binary_case binary_cases[] = {
    B(add), B(sub), B(mul), B(div), B(maximum), B(minimum), B(eq), B(ne), B(lt), B(le), B(gt), B(ge),
};

static double lo_for(ct_dtype dt, double lo) { return ct_dtype_is_signed(dt) || ct_dtype_is_floating(dt) ? lo : 0; }

/* Runs f on CPU inputs and on their GPU copies; either both fail with the same
 * status or the results agree. */
static void check_pair(const char *what, ct_dtype dt, ct_tensor *cpu_result, ct_tensor *gpu_result) {
    if (!cpu_result) {
        ct_status st = ct_last_status();
        ct_clear_error();
        if (gpu_result) {
            print_error("%s (%s): the CPU refuses but the GPU computes\n", what, ct_dtype_name(dt));
            fail();
        }
        if (ct_last_status() != st && ct_last_status() != CT_OK) {
            print_error("%s (%s): CPU status %s, GPU status %s\n", what, ct_dtype_name(dt), ct_status_name(st),
                        ct_status_name(ct_last_status()));
            fail();
        }
        ct_clear_error();
        return;
    }
    if (!gpu_result) {
        print_error("%s (%s): GPU failed: %s\n", what, ct_dtype_name(dt), ct_last_error());
        fail();
    }
    assert_int_equal(ct_tensor_device(gpu_result).type, CT_DEVICE_CUDA);
    double rtol, atol;
    ct_test_tolerance(ct_tensor_dtype(cpu_result), &rtol, &atol);
    char msg[128];
    snprintf(msg, sizeof msg, "%s (%s)", what, ct_dtype_name(dt));
    CT_ASSERT_CLOSE(gpu_result, cpu_result, rtol, atol, msg);
}

/* The layouts each op runs over: (cpu a, cpu b) pairs built from one base. */
typedef struct {
    const char *name;
    ct_tensor *a, *b;
} layout;

static int make_layouts(ct_dtype dt, double lo, double hi, layout *out) {
    int n = 0;
    /* Contiguous, long enough for the vector loop and a tail. */
    out[n++] = (layout){"contiguous", ct_test_values(CT_SHAPE(4099), dt, lo, hi, 1),
                        ct_test_values(CT_SHAPE(4099), dt, lo, hi, 2)};
    /* Starting one element in: misaligned for 16-byte vectors. */
    out[n++] = (layout){"misaligned", ct_slice(ct_test_values(CT_SHAPE(1031), dt, lo, hi, 3), 0, 1, 1031, 1),
                        ct_slice(ct_test_values(CT_SHAPE(1031), dt, lo, hi, 4), 0, 1, 1031, 1)};
    /* Broadcast against each other. */
    out[n++] = (layout){"broadcast", ct_test_values(CT_SHAPE(37, 1), dt, lo, hi, 5),
                        ct_test_values(CT_SHAPE(1, 41), dt, lo, hi, 6)};
    /* Transposed and strided. */
    out[n++] = (layout){"strided", ct_t(ct_test_values(CT_SHAPE(33, 20), dt, lo, hi, 7)),
                        ct_slice(ct_test_values(CT_SHAPE(20, 66), dt, lo, hi, 8), 1, 0, 66, 2)};
    /* A row broadcast over a matrix (the bias pattern). */
    out[n++] = (layout){"row", ct_test_values(CT_SHAPE(64, 48), dt, lo, hi, 9), ct_test_values(CT_SHAPE(48), dt, lo, hi, 10)};
    out[n++] = (layout){"0-d", ct_test_values(NULL, 0, dt, lo, hi, 11), ct_test_values(NULL, 0, dt, lo, hi, 12)};
    out[n++] = (layout){"empty", ct_test_values(CT_SHAPE(0, 3), dt, lo, hi, 13), ct_test_values(CT_SHAPE(1, 3), dt, lo, hi, 14)};
    return n;
}

static void test_unary_ops(void **state) {
    (void)state;
    for (size_t o = 0; o < sizeof unary_cases / sizeof unary_cases[0]; o++) {
        const unary_case *c = &unary_cases[o];
        for (int d = 0; d < NDT; d++) {
            ct_dtype dt = all_dtypes[d];
            ct_scope_begin();
            layout ls[8];
            int nl = make_layouts(dt, lo_for(dt, c->lo), c->hi, ls);
            for (int l = 0; l < nl; l++) {
                char what[96];
                snprintf(what, sizeof what, "%s %s", c->name, ls[l].name);
                ct_tensor *ga = ct_to_device(ls[l].a, CUDA0);
                CT_ASSERT_OK(ga);
                check_pair(what, dt, c->u(ls[l].a), c->u(ga));
                /* The GPU operand keeps the CPU operand's strides only when copied as
                 * a view: run the strided layout on a transposed GPU tensor too. */
                if (strcmp(ls[l].name, "strided") == 0)
                    check_pair(what, dt, c->u(ls[l].a), c->u(ct_t(ct_to_device(ct_t(ls[l].a), CUDA0))));
            }
            /* In place. */
            ct_tensor *a = ct_test_values(CT_SHAPE(100), dt, lo_for(dt, c->lo), c->hi, 15);
            ct_tensor *ga = ct_to_device(a, CUDA0);
            ct_tensor *ca = ct_clone(a);
            ct_tensor *rc = c->u_(ca);
            ct_tensor *rg = c->u_(ga);
            check_pair("in-place", dt, rc ? ca : NULL, rg ? ga : NULL);
            ct_scope_end();
        }
    }
}

static void test_binary_ops(void **state) {
    (void)state;
    for (size_t o = 0; o < sizeof binary_cases / sizeof binary_cases[0]; o++) {
        const binary_case *c = &binary_cases[o];
        for (int d = 0; d < NDT; d++) {
            ct_dtype dt = all_dtypes[d];
            ct_scope_begin();
            layout ls[8];
            int nl = make_layouts(dt, lo_for(dt, -20), 20, ls);
            for (int l = 0; l < nl; l++) {
                char what[96];
                snprintf(what, sizeof what, "%s %s", c->name, ls[l].name);
                ct_tensor *ga = ct_to_device(ls[l].a, CUDA0), *gb = ct_to_device(ls[l].b, CUDA0);
                CT_ASSERT_OK(ga);
                CT_ASSERT_OK(gb);
                check_pair(what, dt, c->b(ls[l].a, ls[l].b), c->b(ga, gb));
            }
            ct_tensor *a = ct_test_values(CT_SHAPE(5, 64), dt, lo_for(dt, -20), 20, 21);
            ct_tensor *b = ct_test_values(CT_SHAPE(64), dt, lo_for(dt, -20), 20, 22);
            ct_tensor *ga = ct_to_device(a, CUDA0), *gb = ct_to_device(b, CUDA0);
            /* Scalars: a C scalar, and a 0-d CPU tensor joining GPU operands. */
            check_pair("scalar int", dt, c->bs(a, ct_scalar_int(3)), c->bs(ga, ct_scalar_int(3)));
            check_pair("scalar float", dt, c->bs(a, ct_scalar_float(2.5)), c->bs(ga, ct_scalar_float(2.5)));
            ct_tensor *z = ct_test_values(NULL, 0, CT_I64, 1, 5, 23);
            check_pair("0-d CPU operand", dt, c->b(a, z), c->b(ga, z));
            /* Mixed dtypes promote on the GPU as on the CPU. */
            ct_tensor *f = ct_test_values(CT_SHAPE(64), CT_F32, -3, 3, 24);
            check_pair("promotion", dt, c->b(a, f), c->b(ga, ct_to_device(f, CUDA0)));
            /* out= into a transposed tensor, and in place. */
            ct_tensor *want = c->b(a, b);
            if (want) {
                ct_tensor *out = ct_t(ct_empty(CT_SHAPE(64, 5), ct_tensor_dtype(want), CUDA0));
                check_pair("out=", dt, want, c->b_out(ga, gb, out) ? out : NULL);
            }
            ct_tensor *ca = ct_clone(a), *gc = ct_clone(ga);
            ct_tensor *rc = c->b_(ca, b);
            ct_tensor *rg = c->b_(gc, gb);
            check_pair("in-place", dt, rc ? ca : NULL, rg ? gc : NULL);
            ct_scope_end();
        }
    }
}

static void test_alpha_and_large(void **state) {
    (void)state;
    ct_scope_begin();
    for (int d = 0; d < NDT; d++) {
        ct_dtype dt = all_dtypes[d];
        if (dt == CT_BOOL)
            continue;
        ct_tensor *a = ct_test_values(CT_SHAPE(300), dt, lo_for(dt, -9), 9, 31);
        ct_tensor *b = ct_test_values(CT_SHAPE(300), dt, lo_for(dt, -9), 9, 32);
        ct_tensor *ga = ct_to_device(a, CUDA0), *gb = ct_to_device(b, CUDA0);
        ct_scalar alpha = ct_dtype_is_floating(dt) ? ct_scalar_float(-1.5) : ct_scalar_int(3);
        check_pair("add alpha", dt, ct_add_alpha(a, b, alpha), ct_add_alpha(ga, gb, alpha));
        check_pair("sub alpha", dt, ct_sub_alpha(a, b, alpha), ct_sub_alpha(ga, gb, alpha));
    }
    /* More than 2^31 bytes of iteration space in a strided layout takes the 64-bit
     * offset path: a broadcast of 2^20 x 2^9 int8 elements = 512 MiB. Too slow under
     * compute-sanitizer, which scripts/gpu-check.sh runs with CT_CUDA_TEST_SMALL set. */
    if (getenv("CT_CUDA_TEST_SMALL")) {
        ct_scope_end();
        return;
    }
    ct_tensor *x = ct_to_device(ct_test_values(CT_SHAPE(1 << 20, 1), CT_I8, -3, 3, 33), CUDA0);
    ct_tensor *y = ct_to_device(ct_test_values(CT_SHAPE(1, 1 << 9), CT_I8, -3, 3, 34), CUDA0);
    ct_tensor *r = ct_add(x, y);
    CT_ASSERT_OK(r);
    int64_t v = 0;
    ct_tensor *last = ct_select(ct_select(r, 0, (1 << 20) - 1), 0, (1 << 9) - 1);
    assert_int_equal(ct_item_int64(last, &v), CT_OK);
    int64_t xa = 0, yb = 0;
    ct_item_int64(ct_select(ct_select(x, 0, (1 << 20) - 1), 0, 0), &xa);
    ct_item_int64(ct_select(ct_select(y, 0, 0), 0, (1 << 9) - 1), &yb);
    assert_int_equal(v, xa + yb);
    ct_scope_end();
}

static void test_errors_on_cuda(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *bo = ct_ones(CT_SHAPE(3), CT_BOOL, CUDA0);
    CT_ASSERT_ERR(ct_neg(bo) != NULL, CT_ERROR_TYPE, "Negation");
    CT_ASSERT_ERR(ct_sub(bo, bo) != NULL, CT_ERROR_TYPE, "Subtraction");
    ct_tensor *g = ct_ones(CT_SHAPE(3), CT_F32, CUDA0);
    CT_ASSERT_ERR(ct_add(g, ct_ones(CT_SHAPE(4), CT_F32, CUDA0)) != NULL, CT_ERROR_VALUE, "must match");
    CT_ASSERT_ERR(ct_add_(ct_ones(CT_SHAPE(3), CT_I32, CUDA0), g) != NULL, CT_ERROR_TYPE, "can't be cast");
    ct_scope_end();
}

/* ------------------------------------------------------------------ matrix products */

static void product_tol(ct_dtype dt, int64_t k, double *rtol, double *atol) {
    switch (dt) {
    case CT_F16: *rtol = 5e-3, *atol = 2e-3 * (double)k; break;
    case CT_BF16: *rtol = 2e-2, *atol = 1e-2 * (double)k; break;
    case CT_F32: *rtol = 1e-5, *atol = 1e-5 * (double)k; break;
    default: *rtol = 1e-12, *atol = 1e-12 * (double)k; break;
    }
}

static void test_matrix_products(void **state) {
    (void)state;
    const ct_dtype dts[] = {CT_F32, CT_F64, CT_F16, CT_BF16};
    for (int d = 0; d < 4; d++) {
        ct_dtype dt = dts[d];
        ct_scope_begin();
        double rtol, atol;
        product_tol(dt, 64, &rtol, &atol);
        ct_tensor *a = ct_test_values(CT_SHAPE(37, 64), dt, -1, 1, 41);
        ct_tensor *b = ct_test_values(CT_SHAPE(64, 29), dt, -1, 1, 42);
        ct_tensor *c = ct_test_values(CT_SHAPE(29), dt, -1, 1, 43);
        ct_tensor *ga = ct_to_device(a, CUDA0), *gb = ct_to_device(b, CUDA0), *gc = ct_to_device(c, CUDA0);
        CT_ASSERT_CLOSE(ct_mm(ga, gb), ct_mm(a, b), rtol, atol, "mm");
        /* Transposed operands (column-major storage) and a sliced (misaligned) one. */
        ct_tensor *at = ct_to_device(ct_t(a), CUDA0), *bt = ct_to_device(ct_t(b), CUDA0);
        CT_ASSERT_CLOSE(ct_mm(ct_t(at), ct_t(bt)), ct_mm(a, b), rtol, atol, "mm transposed");
        ct_tensor *as = ct_slice(ga, 1, 1, 64, 1), *bs = ct_slice(gb, 0, 1, 64, 1);
        CT_ASSERT_CLOSE(ct_mm(as, bs), ct_mm(ct_slice(a, 1, 1, 64, 1), ct_slice(b, 0, 1, 64, 1)), rtol, atol,
                        "mm sliced");
        /* A layout BLAS cannot read (every other column) goes through a copy. */
        ct_tensor *wide = ct_test_values(CT_SHAPE(37, 128), dt, -1, 1, 44);
        CT_ASSERT_CLOSE(ct_mm(ct_slice(ct_to_device(wide, CUDA0), 1, 0, 128, 2), gb),
                        ct_mm(ct_slice(wide, 1, 0, 128, 2), b), rtol, atol, "mm every other column");
        CT_ASSERT_CLOSE(ct_addmm(gc, ga, gb, ct_scalar_float(0.5), ct_scalar_float(2.0)),
                        ct_addmm(c, a, b, ct_scalar_float(0.5), ct_scalar_float(2.0)), rtol, 2 * atol, "addmm");
        CT_ASSERT_CLOSE(ct_linear(ga, ct_t(gb), gc), ct_linear(a, ct_t(b), c), rtol, atol, "linear");
        ct_tensor *x = ct_test_values(CT_SHAPE(5, 17, 64), dt, -1, 1, 45);
        ct_tensor *y = ct_test_values(CT_SHAPE(5, 64, 23), dt, -1, 1, 46);
        ct_tensor *z = ct_test_values(CT_SHAPE(5, 17, 23), dt, -1, 1, 47);
        ct_tensor *gx = ct_to_device(x, CUDA0), *gy = ct_to_device(y, CUDA0), *gz = ct_to_device(z, CUDA0);
        CT_ASSERT_CLOSE(ct_bmm(gx, gy), ct_bmm(x, y), rtol, atol, "bmm");
        CT_ASSERT_CLOSE(ct_baddbmm(gz, gx, gy, ct_scalar_float(-1.0), ct_scalar_float(0.5)),
                        ct_baddbmm(z, x, y, ct_scalar_float(-1.0), ct_scalar_float(0.5)), rtol, 2 * atol, "baddbmm");
        /* A batch broadcast by expand (stride 0), and matmul's broadcasting. */
        ct_tensor *y1 = ct_test_values(CT_SHAPE(1, 64, 23), dt, -1, 1, 48);
        CT_ASSERT_CLOSE(ct_bmm(gx, ct_expand(ct_to_device(y1, CUDA0), CT_SHAPE(5, 64, 23))),
                        ct_bmm(x, ct_expand(y1, CT_SHAPE(5, 64, 23))), rtol, atol, "bmm expanded");
        CT_ASSERT_CLOSE(ct_matmul(gx, gb), ct_matmul(x, b), rtol, atol, "matmul");
        /* Into a transposed out=. */
        ct_tensor *out = ct_t(ct_empty(CT_SHAPE(29, 37), dt, CUDA0));
        CT_ASSERT_OK(ct_mm_out(ga, gb, out));
        CT_ASSERT_CLOSE(out, ct_mm(a, b), rtol, atol, "mm out=");
        /* k = 0: zeros, or beta * c. */
        ct_tensor *e1 = ct_empty(CT_SHAPE(4, 0), dt, CUDA0), *e2 = ct_empty(CT_SHAPE(0, 3), dt, CUDA0);
        CT_ASSERT_CLOSE(ct_mm(e1, e2), ct_zeros(CT_SHAPE(4, 3), dt, CT_CPU), 0, 0, "mm k=0");
        ct_tensor *c3 = ct_test_values(CT_SHAPE(4, 3), dt, -1, 1, 49);
        CT_ASSERT_CLOSE(ct_addmm(ct_to_device(c3, CUDA0), e1, e2, ct_scalar_float(2.0), ct_scalar_float(1.0)),
                        ct_addmm(c3, ct_empty(CT_SHAPE(4, 0), dt, CT_CPU), ct_empty(CT_SHAPE(0, 3), dt, CT_CPU),
                                 ct_scalar_float(2.0), ct_scalar_float(1.0)),
                        rtol, atol, "addmm k=0");
        /* dot */
        ct_tensor *v = ct_test_values(CT_SHAPE(1000), dt, -1, 1, 50), *w = ct_test_values(CT_SHAPE(1000), dt, -1, 1, 51);
        double dr, da;
        product_tol(dt, 1000, &dr, &da);
        CT_ASSERT_CLOSE(ct_dot(ct_to_device(v, CUDA0), ct_to_device(w, CUDA0)), ct_dot(v, w), dr, da, "dot");
        CT_ASSERT_CLOSE(ct_dot(ct_slice(ct_to_device(v, CUDA0), 0, 0, 1000, 3), ct_slice(ct_to_device(w, CUDA0), 0, 0, 1000, 3)),
                        ct_dot(ct_slice(v, 0, 0, 1000, 3), ct_slice(w, 0, 0, 1000, 3)), dr, da, "dot strided");
        ct_scope_end();
    }
}

static void test_matmul_precision_and_errors(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *a = ct_test_values(CT_SHAPE(128, 256), CT_F32, -1, 1, 61);
    ct_tensor *b = ct_test_values(CT_SHAPE(256, 64), CT_F32, -1, 1, 62);
    ct_tensor *ga = ct_to_device(a, CUDA0), *gb = ct_to_device(b, CUDA0);
    ct_tensor *ref = ct_mm(ct_to_dtype(a, CT_F64), ct_to_dtype(b, CT_F64));
    /* "highest": full float32. */
    CT_ASSERT_CLOSE(ct_to_dtype(ct_mm(ga, gb), CT_F64), ref, 1e-5, 1e-4, "float32 highest");
    /* "high": TF32 allowed (10-bit mantissa inputs): a looser bound, still close. */
    assert_int_equal(ct_set_float32_matmul_precision("high"), CT_OK);
    ct_tensor *tf = ct_mm(ga, gb);
    assert_int_equal(ct_set_float32_matmul_precision("highest"), CT_OK);
    CT_ASSERT_CLOSE(ct_to_dtype(tf, CT_F64), ref, 1e-2, 5e-2, "float32 high");
    /* Integer products have no CUDA kernel, as in PyTorch. */
    ct_tensor *ia = ct_ones(CT_SHAPE(2, 2), CT_I64, CUDA0);
    CT_ASSERT_ERR(ct_mm(ia, ia) != NULL, CT_ERROR_TYPE, "not implemented for 'int64'");
    CT_ASSERT_ERR(ct_dot(ct_ones(CT_SHAPE(2), CT_I32, CUDA0), ct_ones(CT_SHAPE(2), CT_I32, CUDA0)) != NULL,
                  CT_ERROR_TYPE, "not implemented");
    CT_ASSERT_ERR(ct_mm(ga, ga) != NULL, CT_ERROR_VALUE, "cannot be multiplied");
    CT_ASSERT_ERR(ct_mm(ga, ct_to_dtype(gb, CT_F64)) != NULL, CT_ERROR_TYPE, "same dtype");
    ct_scope_end();
}

/* ------------------------------------------------------------------ random */

static void test_random_matches_cpu(void **state) {
    (void)state;
    const ct_dtype dts[] = {CT_F32, CT_F64, CT_F16, CT_BF16};
    for (int d = 0; d < 4; d++) {
        ct_dtype dt = dts[d];
        ct_scope_begin();
        /* Odd sizes: the last Philox block is partly used. */
        ct_manual_seed(1234);
        ct_tensor *c1 = ct_rand(CT_SHAPE(1001), dt, CT_CPU);
        ct_tensor *c2 = ct_randn(CT_SHAPE(3, 333), dt, CT_CPU);
        ct_tensor *c3 = ct_uniform_(ct_empty(CT_SHAPE(77), dt, CT_CPU), -2.0, 5.0);
        ct_tensor *c4 = ct_normal_(ct_empty(CT_SHAPE(7, 9), dt, CT_CPU), 1.0, 3.0);
        ct_manual_seed(1234);
        ct_tensor *g1 = ct_rand(CT_SHAPE(1001), dt, CUDA0);
        ct_tensor *g2 = ct_randn(CT_SHAPE(3, 333), dt, CUDA0);
        ct_tensor *g3 = ct_uniform_(ct_empty(CT_SHAPE(77), dt, CUDA0), -2.0, 5.0);
        ct_tensor *g4 = ct_normal_(ct_t(ct_empty(CT_SHAPE(9, 7), dt, CUDA0)), 1.0, 3.0); /* strided */
        /* Uniform numbers are bit-identical. */
        CT_ASSERT_CLOSE(g1, c1, 0, 0, "rand");
        CT_ASSERT_CLOSE(g3, c3, 0, 0, "uniform_");
        /* Normals go through log/cos/sin: equal to the last bits of a double. */
        double rn = dt == CT_F64 ? 1e-14 : dt == CT_F32 ? 1.2e-7 : dt == CT_F16 ? 1e-3 : 8e-3;
        CT_ASSERT_CLOSE(g2, c2, rn, rn, "randn");
        CT_ASSERT_CLOSE(g4, c4, rn, 3 * rn, "normal_ strided");
        ct_scope_end();
    }
    /* CPU and GPU calls share one stream of counters. */
    ct_scope_begin();
    ct_manual_seed(99);
    ct_tensor *a = ct_rand(CT_SHAPE(5), CT_F32, CT_CPU);
    ct_tensor *b = ct_rand(CT_SHAPE(9), CT_F32, CUDA0);
    ct_tensor *c = ct_rand(CT_SHAPE(6), CT_F32, CT_CPU);
    ct_manual_seed(99);
    ct_tensor *a2 = ct_rand(CT_SHAPE(5), CT_F32, CT_CPU);
    ct_tensor *b2 = ct_rand(CT_SHAPE(9), CT_F32, CT_CPU);
    ct_tensor *c2 = ct_rand(CT_SHAPE(6), CT_F32, CT_CPU);
    CT_ASSERT_CLOSE(a, a2, 0, 0, "interleaved a");
    CT_ASSERT_CLOSE(b, b2, 0, 0, "interleaved b");
    CT_ASSERT_CLOSE(c, c2, 0, 0, "interleaved c");
    /* randint and randperm on CUDA hold the CPU's numbers. */
    ct_manual_seed(7);
    ct_tensor *ri = ct_randint(-5, 100, CT_SHAPE(50), CT_I32, CUDA0);
    ct_tensor *rp = ct_randperm(40, CT_I64, CUDA0);
    ct_manual_seed(7);
    CT_ASSERT_CLOSE(ri, ct_randint(-5, 100, CT_SHAPE(50), CT_I32, CT_CPU), 0, 0, "randint");
    CT_ASSERT_CLOSE(rp, ct_randperm(40, CT_I64, CT_CPU), 0, 0, "randperm");
    /* Errors as on the CPU. */
    CT_ASSERT_ERR(ct_rand(CT_SHAPE(3), CT_I32, CUDA0) != NULL, CT_ERROR_TYPE, "not implemented");
    CT_ASSERT_ERR(ct_uniform_(ct_empty(CT_SHAPE(2), CT_F32, CUDA0), 2.0, 1.0) != NULL, CT_ERROR_VALUE, "from=");
    CT_ASSERT_ERR(ct_normal_(ct_empty(CT_SHAPE(2), CT_F32, CUDA0), 0.0, -1.0) != NULL, CT_ERROR_VALUE, "std");
    ct_scope_end();
}

/* bernoulli_, bernoulli and dropout draw the CPU's numbers on the GPU. */
static void test_bernoulli_matches_cpu(void **state) {
    (void)state;
    const ct_dtype dts[] = {CT_BOOL, CT_U8, CT_I32, CT_I64, CT_F16, CT_BF16, CT_F32, CT_F64};
    for (int d = 0; d < 8; d++) {
        ct_dtype dt = dts[d];
        ct_scope_begin();
        ct_manual_seed(31);
        ct_tensor *c1 = ct_bernoulli_(ct_empty(CT_SHAPE(1001), dt, CT_CPU), 0.3);
        ct_tensor *c2 = ct_bernoulli_(ct_t(ct_empty(CT_SHAPE(9, 7), dt, CT_CPU)), 0.7);
        ct_manual_seed(31);
        ct_tensor *g1 = ct_bernoulli_(ct_empty(CT_SHAPE(1001), dt, CUDA0), 0.3);
        ct_tensor *g2 = ct_bernoulli_(ct_t(ct_empty(CT_SHAPE(9, 7), dt, CUDA0)), 0.7); /* strided */
        CT_ASSERT_CLOSE(g1, c1, 0, 0, "bernoulli_");
        CT_ASSERT_CLOSE(g2, c2, 0, 0, "bernoulli_ strided");
        ct_scope_end();
    }
    for (int d = 4; d < 8; d++) {
        ct_dtype dt = dts[d];
        ct_scope_begin();
        ct_tensor *p = ct_rand(CT_SHAPE(17, 13), dt, CT_CPU);
        ct_tensor *gp = ct_to_device(p, CUDA0);
        ct_manual_seed(5);
        ct_tensor *c = ct_bernoulli(p);
        ct_tensor *cd = ct_dropout(ct_ones(CT_SHAPE(333), dt, CT_CPU), 0.25, true);
        ct_manual_seed(5);
        ct_tensor *g = ct_bernoulli(ct_t(ct_t(gp)));
        ct_tensor *gd = ct_dropout(ct_ones(CT_SHAPE(333), dt, CUDA0), 0.25, true);
        CT_ASSERT_CLOSE(g, c, 0, 0, "bernoulli");
        CT_ASSERT_CLOSE(gd, cd, 0, 0, "dropout");
        ct_scope_end();
    }
    /* p = 0 and 1 are exact; the generator advances as on the CPU. */
    ct_scope_begin();
    ct_tensor *z = ct_bernoulli_(ct_empty(CT_SHAPE(100), CT_F32, CUDA0), 0.0);
    ct_tensor *o = ct_bernoulli_(ct_empty(CT_SHAPE(100), CT_I64, CUDA0), 1.0);
    CT_ASSERT_CLOSE(z, ct_zeros(CT_SHAPE(100), CT_F32, CT_CPU), 0, 0, "p = 0");
    CT_ASSERT_CLOSE(o, ct_ones(CT_SHAPE(100), CT_I64, CT_CPU), 0, 0, "p = 1");
    /* Bad probabilities: the CPU's message naming the first one, nothing drawn. */
    const float pv[5] = {0.5f, 0.2f, 1.5f, NAN, -1.0f};
    ct_tensor *bad = ct_to_device(ct_from_data(pv, CT_SHAPE(5), CT_F32), CUDA0);
    ct_manual_seed(8);
    CT_ASSERT_ERR(ct_bernoulli(bad) != NULL, CT_ERROR_VALUE, "but got false (p[2] = 1.5)");
    ct_tensor *after = ct_rand(CT_SHAPE(4), CT_F32, CT_CPU);
    ct_manual_seed(8);
    CT_ASSERT_CLOSE(after, ct_rand(CT_SHAPE(4), CT_F32, CT_CPU), 0, 0, "no counters reserved by a refused call");
    CT_ASSERT_ERR(ct_bernoulli(ct_slice(bad, 0, 3, 5, 1)) != NULL, CT_ERROR_VALUE, "(p[0] = nan)");
    CT_ASSERT_ERR(ct_bernoulli_(ct_empty(CT_SHAPE(2), CT_F32, CUDA0), 1.5) != NULL, CT_ERROR_VALUE, "p=1.5");
    CT_ASSERT_ERR(ct_bernoulli(ct_zeros(CT_SHAPE(2), CT_I64, CUDA0)) != NULL, CT_ERROR_TYPE, "'Long'");
    ct_scope_end();
}

int main(void) {
    int skip = ct_test_require_gpu("test_cuda_ops");
    if (skip)
        return skip;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_unary_ops),
        cmocka_unit_test(test_bernoulli_matches_cpu),
        cmocka_unit_test(test_binary_ops),
        cmocka_unit_test(test_alpha_and_large),
        cmocka_unit_test(test_errors_on_cuda),
        cmocka_unit_test(test_matrix_products),
        cmocka_unit_test(test_matmul_precision_and_errors),
        cmocka_unit_test(test_random_matches_cpu),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
