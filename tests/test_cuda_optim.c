/* The fused Adam/AdamW kernel on the GPU (src/cuda/fused_optim.cu) against the CPU
 * optimizer: float32 parameters over several steps with weight decay, amsgrad and
 * maximize; bfloat16 parameters with float32 master copies against a float32
 * reference; many tensors of odd sizes (empty ones, ones longer than a block's chunk,
 * more than one launch's table) in one step; grad_scale and found_inf; clip_grad_norm_
 * folded into the step against clipping then stepping; float64 CUDA parameters on the
 * plain path. Skipped (exit code 77) without a GPU. */
#include <string.h>

#include "cuda_testutil.h"
#include "optim/grad_access.h"

#define CUDA0 CT_CUDA(0)

/* Counts the fused op's calls at CT_KEY_CUDA (one per device/dtype group and step). */
static int fused_calls;
static ct_status count_fused(ct_keyset ks, ct_call *call, void *ud) {
    (void)ud;
    fused_calls++;
    return ct_call_next(ks, call);
}

/* A float64 CPU tensor of n values in [-1, 1). */
static ct_tensor *vals(int64_t n, uint64_t seed) { return ct_test_values(&n, 1, CT_F64, -1, 1, seed); }

/* n parameters of the given sizes: CPU (cpu_dt) and GPU (gpu_dt) copies of the same
 * values, with the same gradients (new references in cp, gp). */
static void make_pair(ct_tensor **cp, ct_tensor **gp, const int64_t *sizes, int n, ct_dtype cpu_dt, ct_dtype gpu_dt,
                      uint64_t seed) {
    for (int i = 0; i < n; i++) {
        ct_scope_begin();
        /* values representable in gpu_dt, so both sides start equal */
        ct_tensor *v = ct_to_dtype(ct_to_dtype(vals(sizes[i], seed + (uint64_t)i), gpu_dt), cpu_dt);
        cp[i] = ct_retain(ct_clone(v));
        gp[i] = ct_retain(ct_to_dtype(ct_to_device(v, CUDA0), gpu_dt));
        ct_scope_end();
    }
}

/* New gradients, equal on both sides (representable in the GPU dtype). */
static void set_grads(ct_tensor **cp, ct_tensor **gp, int n, uint64_t seed) {
    for (int i = 0; i < n; i++) {
        ct_scope_begin();
        ct_tensor *g = ct_to_dtype(vals(ct_tensor_numel(cp[i]), seed * 1000 + (uint64_t)i), ct_tensor_dtype(gp[i]));
        g = ct_reshape(g, ct_tensor_shape(cp[i]), ct_tensor_dim(cp[i]));
        assert_int_equal(ct_optim_set_grad(cp[i], ct_to_dtype(g, ct_tensor_dtype(cp[i]))), CT_OK);
        assert_int_equal(ct_optim_set_grad(gp[i], ct_to_device(g, CUDA0)), CT_OK);
        ct_scope_end();
    }
}

static void release_all(ct_tensor **ts, int n) {
    for (int i = 0; i < n; i++) {
        ct_optim_set_grad(ts[i], NULL);
        ct_release(ts[i]);
    }
}

static void assert_params_close(ct_tensor **gp, ct_tensor **cp, int n, double rtol, double atol, const char *what) {
    for (int i = 0; i < n; i++)
        ct_test_assert_close(gp[i], cp[i], rtol, atol, what, __FILE__, __LINE__);
}

/* Adam and AdamW, float32: the fused CUDA step against the CPU's foreach step. */
static void test_fused_vs_cpu(void **state) {
    (void)state;
    enum { N = 5 };
    const int64_t sizes[N] = {1000, 3, 65537, 1, 4096};
    int64_t h = ct_op_override(CT_OP_fused_adamw, CT_KEY_CUDA, count_fused, NULL, 0);
    int64_t h2 = ct_op_override(CT_OP_fused_adam, CT_KEY_CUDA, count_fused, NULL, 0);
    assert_true(h > 0 && h2 > 0);
    for (int kind = CT_OPTIM_ADAM; kind <= CT_OPTIM_ADAMW; kind++)
        for (int variant = 0; variant < 4; variant++) {
            ct_scope_begin();
            ct_tensor *cp[N], *gp[N];
            make_pair(cp, gp, sizes, N, CT_F32, CT_F32, 7);
            ct_optim_options o = kind == CT_OPTIM_ADAMW ? ct_adamw_options(1e-2) : ct_adam_options(1e-2);
            o.weight_decay = variant == 0 ? 0 : 0.05;
            o.amsgrad = variant == 2;
            o.maximize = variant == 3;
            ct_optimizer *co = ct_optimizer_new((ct_optim_kind)kind, cp, N, &o);
            ct_optimizer *go = ct_optimizer_new((ct_optim_kind)kind, gp, N, &o);
            assert_non_null(co);
            assert_non_null(go);
            fused_calls = 0;
            for (int step = 0; step < 4; step++) {
                set_grads(cp, gp, N, 10 + (uint64_t)step);
                assert_int_equal(ct_optimizer_step(co), CT_OK);
                assert_int_equal(ct_optimizer_step(go), CT_OK);
                assert_params_close(gp, cp, N, 1e-6, 1e-7, kind == CT_OPTIM_ADAMW ? "adamw" : "adam");
            }
            assert_int_equal(fused_calls, 4); /* one call per step for the five parameters */
            /* the state dict: torch's names, the CPU's values */
            ct_value *sc = ct_optimizer_state_dict(co), *sg = ct_optimizer_state_dict(go);
            for (int i = 0; i < N; i++) {
                const ct_value *a = ct_value_at(ct_value_get(sg, "state"), i);
                const ct_value *b = ct_value_at(ct_value_get(sc, "state"), i);
                ct_test_assert_close(ct_value_tensor(ct_value_get(a, "exp_avg_sq")),
                                     ct_value_tensor(ct_value_get(b, "exp_avg_sq")), 1e-6, 1e-12, "exp_avg_sq",
                                     __FILE__, __LINE__);
                assert_true(ct_test_at(ct_value_tensor(ct_value_get(a, "step")), 0) == 4);
                assert_int_equal(ct_value_get(a, "max_exp_avg_sq") != NULL, variant == 2);
            }
            ct_value_free(sc);
            ct_value_free(sg);
            ct_optimizer_free(co);
            ct_optimizer_free(go);
            release_all(cp, N);
            release_all(gp, N);
            ct_scope_end();
        }
    ct_op_override_remove(h);
    ct_op_override_remove(h2);
}

/* bfloat16 parameters with master_weights follow a float32 run on the same values:
 * the master copy is the float32 parameter, the bfloat16 one its rounding. */
static void test_bf16_master_weights(void **state) {
    (void)state;
    enum { N = 3 };
    const int64_t sizes[N] = {777, 20000, 5};
    ct_scope_begin();
    ct_tensor *cp[N], *gp[N], *fp[N];
    make_pair(cp, gp, sizes, N, CT_F32, CT_BF16, 21);
    for (int i = 0; i < N; i++)
        fp[i] = ct_retain(ct_to_device(cp[i], CUDA0)); /* float32 on the GPU, the same values */
    ct_optim_options o = ct_adamw_options(1e-3);
    o.amsgrad = true;
    ct_optimizer *co = ct_optimizer_new(CT_OPTIM_ADAMW, cp, N, &o);
    ct_optimizer *fo = ct_optimizer_new(CT_OPTIM_ADAMW, fp, N, &o);
    o.master_weights = true;
    ct_optimizer *go = ct_optimizer_new(CT_OPTIM_ADAMW, gp, N, &o);
    for (int step = 0; step < 5; step++) {
        set_grads(cp, gp, N, 50 + (uint64_t)step);
        for (int i = 0; i < N; i++)
            assert_int_equal(ct_optim_set_grad(fp[i], ct_to_device(ct_optim_grad(cp[i]), CUDA0)), CT_OK);
        assert_int_equal(ct_optimizer_step(co), CT_OK);
        assert_int_equal(ct_optimizer_step(fo), CT_OK);
        assert_int_equal(ct_optimizer_step(go), CT_OK);
        for (int i = 0; i < N; i++) {
            assert_int_equal(ct_tensor_dtype(gp[i]), CT_BF16);
            /* bf16(master) == bf16(float32 run): the float32 run rounded */
            ct_test_assert_close(gp[i], ct_to_dtype(cp[i], CT_BF16), 0, 0, "bf16 master", __FILE__, __LINE__);
            ct_test_assert_close(fp[i], cp[i], 1e-6, 1e-7, "f32 on the GPU", __FILE__, __LINE__);
        }
    }
    /* the state dict holds exp_avg and exp_avg_sq (float32 here), no master copy */
    ct_value *sd = ct_optimizer_state_dict(go);
    const ct_value *s0 = ct_value_at(ct_value_get(sd, "state"), 0);
    assert_int_equal(ct_value_len(s0), 4); /* step, exp_avg, exp_avg_sq, max_exp_avg_sq */
    assert_int_equal(ct_tensor_dtype(ct_value_tensor(ct_value_get(s0, "exp_avg"))), CT_F32);
    ct_value_free(sd);
    /* without master copies bfloat16 runs too: one step against one float32 step */
    ct_tensor *bp[N], *bc[N];
    make_pair(bc, bp, sizes, N, CT_F32, CT_BF16, 21);
    o.master_weights = false;
    ct_optimizer *bo = ct_optimizer_new(CT_OPTIM_ADAMW, bp, N, &o);
    ct_optimizer *ro = ct_optimizer_new(CT_OPTIM_ADAMW, bc, N, &o);
    set_grads(bc, bp, N, 50);
    assert_int_equal(ct_optimizer_step(bo), CT_OK);
    assert_int_equal(ct_optimizer_step(ro), CT_OK);
    double rtol, atol;
    ct_test_tolerance(CT_BF16, &rtol, &atol);
    for (int i = 0; i < N; i++)
        ct_test_assert_close(bp[i], ct_to_dtype(bc[i], CT_BF16), rtol, atol, "bf16 plain", __FILE__, __LINE__);
    ct_optimizer_free(ro);
    ct_optimizer_free(bo);
    release_all(bp, N);
    release_all(bc, N);
    ct_optimizer_free(co);
    ct_optimizer_free(fo);
    ct_optimizer_free(go);
    release_all(cp, N);
    release_all(gp, N);
    release_all(fp, N);
    ct_scope_end();
}

/* 300 tensors of odd sizes (empty ones, ones over a block's chunk of 16384, more than
 * the 256 one launch's table holds), float16 ones beside them. */
static void test_many_tensors(void **state) {
    (void)state;
    enum { N = 300 };
    int64_t sizes[N];
    for (int i = 0; i < N; i++)
        sizes[i] = i % 7 == 0 ? 0 : i % 50 == 1 ? 16384 * 2 + 3 : (i * 37) % 101 + 1;
    ct_scope_begin();
    ct_tensor *cp[N], *gp[N];
    make_pair(cp, gp, sizes, N, CT_F32, CT_F32, 99);
    ct_optim_options o = ct_adamw_options(1e-2);
    ct_optimizer *co = ct_optimizer_new(CT_OPTIM_ADAMW, cp, N, &o);
    ct_optimizer *go = ct_optimizer_new(CT_OPTIM_ADAMW, gp, N, &o);
    for (int step = 0; step < 2; step++) {
        set_grads(cp, gp, N, 7 + (uint64_t)step);
        assert_int_equal(ct_optimizer_step(co), CT_OK);
        assert_int_equal(ct_optimizer_step(go), CT_OK);
        assert_params_close(gp, cp, N, 1e-6, 1e-7, "many tensors");
    }
    /* float16 parameters, directly through the op, against float32 math on the CPU */
    const int64_t hs[3] = {5, 40000, 0};
    ct_tensor *hc[3], *hg[3], *m[3], *v[3], *g[3], *cm[3], *cv[3], *cg[3];
    make_pair(hc, hg, hs, 3, CT_F32, CT_F16, 5);
    for (int i = 0; i < 3; i++) {
        ct_tensor *gr = ct_to_dtype(vals(hs[i], 77 + (uint64_t)i), CT_F16);
        g[i] = ct_to_device(gr, CUDA0);
        cg[i] = ct_to_dtype(gr, CT_F32);
        m[i] = ct_zeros(&hs[i], 1, CT_F16, CUDA0);
        v[i] = ct_zeros(&hs[i], 1, CT_F16, CUDA0);
        cm[i] = ct_zeros(&hs[i], 1, CT_F32, CT_CPU);
        cv[i] = ct_zeros(&hs[i], 1, CT_F32, CT_CPU);
    }
    assert_int_equal(ct_fused_adam_(hg, 3, g, 3, m, 3, v, 3, NULL, 0, NULL, 0, 1, 1e-2, 0.9, 0.999, 0, 1e-8, false,
                                    false, NULL, NULL, NULL),
                     CT_OK);
    assert_int_equal(ct_fused_adam_(hc, 3, cg, 3, cm, 3, cv, 3, NULL, 0, NULL, 0, 1, 1e-2, 0.9, 0.999, 0, 1e-8, false,
                                    false, NULL, NULL, NULL),
                     CT_OK);
    for (int i = 0; i < 3; i++)
        ct_test_assert_close(hg[i], ct_to_dtype(hc[i], CT_F16), 0, 0, "float16", __FILE__, __LINE__);
    ct_optimizer_free(co);
    ct_optimizer_free(go);
    release_all(cp, N);
    release_all(gp, N);
    release_all(hc, 3);
    release_all(hg, 3);
    ct_scope_end();
}

/* grad_scale (gradients divided, and written back) and found_inf (no update). */
static void test_grad_scale_found_inf(void **state) {
    (void)state;
    ct_scope_begin();
    const int64_t sizes[2] = {100, 3};
    ct_tensor *cp[2], *gp[2], *g[2], *cg[2], *m[2], *v[2], *cm[2], *cv[2];
    make_pair(cp, gp, sizes, 2, CT_F32, CT_F32, 3);
    for (int i = 0; i < 2; i++) {
        cg[i] = ct_to_dtype(vals(sizes[i], 8 + (uint64_t)i), CT_F32);
        g[i] = ct_to_device(ct_mul_scalar(cg[i], ct_scalar_float(1024)), CUDA0);
        m[i] = ct_zeros(&sizes[i], 1, CT_F32, CUDA0);
        v[i] = ct_zeros(&sizes[i], 1, CT_F32, CUDA0);
        cm[i] = ct_zeros(&sizes[i], 1, CT_F32, CT_CPU);
        cv[i] = ct_zeros(&sizes[i], 1, CT_F32, CT_CPU);
    }
    ct_tensor *scale = ct_scalar_tensor(ct_scalar_float(1024), CT_F32, CUDA0);
    ct_tensor *inf1 = ct_scalar_tensor(ct_scalar_float(1), CT_F32, CUDA0);
    ct_tensor *inf0 = ct_scalar_tensor(ct_scalar_float(0), CT_F32, CUDA0);
    ct_tensor *before = ct_to_device(gp[0], CT_CPU);
    assert_int_equal(ct_fused_adamw_(gp, 2, g, 2, m, 2, v, 2, NULL, 0, NULL, 0, 1, 1e-2, 0.9, 0.999, 0.01, 1e-8, false,
                                     false, scale, inf1, NULL),
                     CT_OK);
    ct_test_assert_close(gp[0], before, 0, 0, "found_inf", __FILE__, __LINE__);
    assert_int_equal(ct_fused_adamw_(gp, 2, g, 2, m, 2, v, 2, NULL, 0, NULL, 0, 1, 1e-2, 0.9, 0.999, 0.01, 1e-8, false,
                                     false, scale, inf0, NULL),
                     CT_OK);
    assert_int_equal(ct_fused_adamw_(cp, 2, cg, 2, cm, 2, cv, 2, NULL, 0, NULL, 0, 1, 1e-2, 0.9, 0.999, 0.01, 1e-8,
                                     false, false, NULL, NULL, NULL),
                     CT_OK);
    for (int i = 0; i < 2; i++) {
        ct_test_assert_close(gp[i], cp[i], 1e-6, 1e-7, "grad_scale", __FILE__, __LINE__);
        ct_test_assert_close(g[i], cg[i], 0, 0, "unscaled grads", __FILE__, __LINE__);
    }
    /* errors on the GPU: float64 params, inputs on another device */
    ct_tensor *d = ct_zeros(CT_SHAPE(4), CT_F64, CUDA0), *D[1] = {d};
    CT_ASSERT_ERR(ct_fused_adamw_(D, 1, D, 1, D, 1, D, 1, NULL, 0, NULL, 0, 1, 1e-3, 0.9, 0.999, 0, 1e-8, false, false,
                                  NULL, NULL, NULL) == CT_OK,
                  CT_ERROR_NOT_IMPLEMENTED, "float32, bfloat16 and float16");
    ct_tensor *cpu_scale = ct_scalar_tensor(ct_scalar_float(1), CT_F32, CT_CPU);
    CT_ASSERT_ERR(ct_fused_adamw_(gp, 2, g, 2, m, 2, v, 2, NULL, 0, NULL, 0, 1, 1e-3, 0.9, 0.999, 0, 1e-8, false,
                                  false, cpu_scale, NULL, NULL) == CT_OK,
                  CT_ERROR_DEVICE, "grad_scale");
    ct_tensor *mixed[2] = {gp[0], cp[1]};
    CT_ASSERT_ERR(ct_fused_adamw_(mixed, 2, g, 2, m, 2, v, 2, NULL, 0, NULL, 0, 1, 1e-3, 0.9, 0.999, 0, 1e-8, false,
                                  false, NULL, NULL, NULL) == CT_OK,
                  CT_ERROR_DEVICE, "same device");
    release_all(cp, 2);
    release_all(gp, 2);
    ct_scope_end();
}

/* step_clipped on CUDA: the clip factor folded into the fused kernel against
 * clip_grad_norm_ then step; the norm a device tensor; gradients untouched. */
static void test_clip_folded(void **state) {
    (void)state;
    enum { N = 4 };
    const int64_t sizes[N] = {300, 17, 40000, 1};
    ct_scope_begin();
    ct_tensor *ap[N], *bp[N], *cp[N], *dummy[N];
    make_pair(cp, ap, sizes, N, CT_F32, CT_F32, 31);
    make_pair(dummy, bp, sizes, N, CT_F32, CT_F32, 31);
    ct_optim_options o = ct_adamw_options(1e-2);
    ct_optimizer *ao = ct_optimizer_new(CT_OPTIM_ADAMW, ap, N, &o);
    ct_optimizer *bo = ct_optimizer_new(CT_OPTIM_ADAMW, bp, N, &o);
    ct_optimizer *co = ct_optimizer_new(CT_OPTIM_ADAMW, cp, N, &o);
    for (int step = 0; step < 3; step++) {
        set_grads(cp, ap, N, 60 + (uint64_t)step);
        set_grads(dummy, bp, N, 60 + (uint64_t)step);
        double norm = 0;
        /* CPU reference: clip, then step */
        assert_int_equal(ct_clip_grad_norm_(cp, N, 1.0, 2.0, false, &norm), CT_OK);
        assert_true(norm > 1.0); /* the clip is active */
        assert_int_equal(ct_optimizer_step(co), CT_OK);
        /* GPU: clip (device path, no number back) then step */
        assert_int_equal(ct_clip_grad_norm_(bp, N, 1.0, 2.0, false, NULL), CT_OK);
        assert_int_equal(ct_optimizer_step(bo), CT_OK);
        /* GPU: folded */
        ct_tensor *g0 = ct_to_device(ct_optim_grad(ap[2]), CT_CPU);
        ct_tensor *tn = NULL;
        assert_int_equal(ct_optimizer_step_clipped(ao, 1.0, 2.0, &tn), CT_OK);
        assert_non_null(tn);
        assert_int_equal(ct_tensor_device(tn).type, CT_DEVICE_CUDA);
        assert_true(fabs(ct_test_at(ct_to_device(tn, CT_CPU), 0) - norm) <= 1e-9 * norm);
        ct_test_assert_close(ct_optim_grad(ap[2]), g0, 0, 0, "grads untouched", __FILE__, __LINE__);
        assert_params_close(ap, cp, N, 1e-6, 1e-7, "folded clip vs CPU");
        assert_params_close(bp, cp, N, 1e-6, 1e-7, "device clip vs CPU");
    }
    /* the tensor form */
    set_grads(dummy, bp, N, 90);
    ct_tensor *tn = NULL;
    assert_int_equal(ct_clip_grad_norm_tensor_(bp, N, 0.5, 2.0, &tn), CT_OK);
    assert_int_equal(ct_tensor_device(tn).type, CT_DEVICE_CUDA);
    ct_optimizer_free(ao);
    ct_optimizer_free(bo);
    ct_optimizer_free(co);
    release_all(ap, N);
    release_all(bp, N);
    release_all(cp, N);
    release_all(dummy, N);
    ct_scope_end();
}

/* float64 CUDA parameters take the plain path, with the CPU's results. */
static void test_f64_plain_path(void **state) {
    (void)state;
    const int64_t sizes[2] = {50, 7};
    ct_scope_begin();
    ct_tensor *cp[2], *gp[2];
    make_pair(cp, gp, sizes, 2, CT_F64, CT_F64, 4);
    int64_t h = ct_op_override(CT_OP_fused_adamw, CT_KEY_CUDA, count_fused, NULL, 0);
    fused_calls = 0;
    ct_optim_options o = ct_adamw_options(1e-2);
    ct_optimizer *co = ct_optimizer_new(CT_OPTIM_ADAMW, cp, 2, &o);
    ct_optimizer *go = ct_optimizer_new(CT_OPTIM_ADAMW, gp, 2, &o);
    set_grads(cp, gp, 2, 3);
    assert_int_equal(ct_optimizer_step(co), CT_OK);
    assert_int_equal(ct_optimizer_step(go), CT_OK);
    assert_params_close(gp, cp, 2, 1e-12, 1e-14, "float64");
    assert_int_equal(fused_calls, 0);
    ct_op_override_remove(h);
    ct_optimizer_free(co);
    ct_optimizer_free(go);
    release_all(cp, 2);
    release_all(gp, 2);
    ct_scope_end();
}

int main(void) {
    int skip = ct_test_require_gpu("test_cuda_optim");
    if (skip)
        return skip;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fused_vs_cpu),         cmocka_unit_test(test_bf16_master_weights),
        cmocka_unit_test(test_many_tensors),         cmocka_unit_test(test_grad_scale_found_inf),
        cmocka_unit_test(test_clip_folded),          cmocka_unit_test(test_f64_plain_path),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
