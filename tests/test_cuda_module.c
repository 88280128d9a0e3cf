/* Modules, optimizers and checkpoints on the GPU: Module.to(cuda) of a tied model and
 * back, a small MLP trained with SGD and AdamW on the GPU and on the CPU from the same
 * weights (losses and weights agree), state dicts and .pt / safetensors checkpoints
 * across devices, optimizer state dicts across devices, bfloat16 modules, and layers
 * made under a CUDA default device. Skipped (exit 77) without a GPU. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cuda_testutil.h"
#include "ctorch/nn.h"
#include "ctorch/optim.h"

#define CUDA0 CT_CUDA(0)
#define PARAM(m, child, name) ct_module_param(ct_module_child((m), (child)), (name))
#define MAXP 16

static char tmp_path[256];

static const char *tmp_file(const char *name) {
    snprintf(tmp_path, sizeof tmp_path, "%s/ctorch_test_cuda_module_%d_%s",
             getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", (int)getpid(), name);
    return tmp_path;
}

static bool on(const ct_tensor *t, ct_device d) { return t && ct_device_equal(ct_tensor_device(t), d); }

/* Linear(4, 8) -> Tanh -> Linear(8, 3) in dtype, on the CPU. */
static ct_module *mlp(ct_dtype dtype) {
    ct_module *layers[3] = {ct_nn_linear(4, 8, true, dtype), ct_nn_tanh(), ct_nn_linear(8, 3, true, dtype)};
    ct_module *m = ct_nn_sequential(layers, 3);
    assert_non_null(m);
    return m;
}

/* Asserts every tensor of m's state dict is on device (and of dtype, when given). */
static void expect_module_on(const ct_module *m, ct_device device, ct_dtype dtype) {
    ct_scope_begin();
    ct_value *sd = ct_module_state_dict(m);
    assert_non_null(sd);
    for (int64_t i = 0; i < ct_value_len(sd); i++) {
        ct_tensor *t = ct_value_tensor(ct_value_at(sd, i));
        assert_true(on(t, device));
        if (dtype != CT_DTYPE_UNDEFINED && ct_dtype_is_floating(ct_tensor_dtype(t)))
            assert_int_equal(ct_tensor_dtype(t), dtype);
    }
    ct_value_free(sd);
    ct_scope_end();
}

/* Asserts the state dicts of a and b hold the same keys with equal values (within
 * the tolerances), whatever their devices. */
static void expect_same_state(const ct_module *a, const ct_module *b, double rtol, double atol) {
    ct_scope_begin();
    ct_value *sa = ct_module_state_dict(a), *sb = ct_module_state_dict(b);
    assert_int_equal(ct_value_len(sa), ct_value_len(sb));
    for (int64_t i = 0; i < ct_value_len(sa); i++) {
        const char *k = ct_value_str(ct_value_key_at(sa, i), NULL);
        ct_tensor *ta = ct_value_tensor(ct_value_at(sa, i)), *tb = ct_value_tensor(ct_value_get(sb, k));
        assert_non_null(tb);
        CT_ASSERT_CLOSE(ta, ct_to_device(tb, CT_CPU), rtol, atol, k);
    }
    ct_value_free(sa);
    ct_value_free(sb);
    ct_scope_end();
}

/* A copy of m's weights in a new CPU MLP. */
static ct_module *mlp_like(const ct_module *m, ct_dtype dtype) {
    ct_module *c = mlp(dtype);
    ct_value *sd = ct_module_state_dict(m);
    assert_int_equal(ct_module_load_state_dict(c, sd, true, NULL, NULL), CT_OK);
    ct_value_free(sd);
    return c;
}

static void test_to_cuda_and_back(void **state) {
    (void)state;
    ct_module *m = ct_module_new("Tied", NULL, NULL, NULL);
    assert_int_equal(ct_module_add_child(m, "a", ct_nn_linear(3, 3, true, CT_F32)), CT_OK);
    assert_int_equal(ct_module_add_child(m, "b", ct_nn_linear(3, 3, true, CT_F32)), CT_OK);
    assert_int_equal(ct_module_add_child(m, "bn", ct_nn_batch_norm2d(3, 1e-5, 0.1, true, true, CT_F32)), CT_OK);
    assert_int_equal(ct_module_set_param(ct_module_child(m, "b"), "weight", PARAM(m, "a", "weight")), CT_OK);
    ct_tensor_set_requires_grad(PARAM(m, "b", "bias"), false);
    ct_scope_begin();
    ct_tensor *w_cpu = ct_clone(PARAM(m, "a", "weight"));
    ct_tensor *g_cpu = ct_test_values(CT_SHAPE(3, 3), CT_F32, -1, 1, 7);
    assert_int_equal(ct_tensor_set_grad(PARAM(m, "a", "weight"), g_cpu), CT_OK);

    assert_int_equal(ct_module_to(m, CUDA0, CT_DTYPE_UNDEFINED), CT_OK);
    expect_module_on(m, CUDA0, CT_F32);
    assert_true(ct_device_equal(ct_module_device(m), CUDA0));
    ct_tensor *w = PARAM(m, "a", "weight");
    assert_ptr_equal(PARAM(m, "b", "weight"), w);
    assert_true(ct_tensor_is_leaf(w) && ct_tensor_requires_grad(w));
    assert_false(ct_tensor_requires_grad(PARAM(m, "b", "bias")));
    assert_int_equal(ct_tensor_dtype(ct_module_buffer(ct_module_child(m, "bn"), "num_batches_tracked")), CT_I64);
    CT_ASSERT_CLOSE(w, w_cpu, 0, 0, "weight on cuda");
    ct_tensor *g = ct_tensor_grad(w);
    assert_true(on(g, CUDA0));
    CT_ASSERT_CLOSE(g, g_cpu, 0, 0, "grad on cuda");

    /* back to the CPU, in float64 */
    assert_int_equal(ct_module_to(m, CT_CPU, CT_F64), CT_OK);
    expect_module_on(m, CT_CPU, CT_F64);
    w = PARAM(m, "a", "weight");
    assert_ptr_equal(PARAM(m, "b", "weight"), w);
    CT_ASSERT_CLOSE(w, ct_to_dtype(w_cpu, CT_F64), 0, 0, "weight back on the cpu");
    CT_ASSERT_CLOSE(ct_tensor_grad(w), ct_to_dtype(g_cpu, CT_F64), 0, 0, "grad back on the cpu");
    assert_int_equal(ct_tensor_dtype(ct_module_buffer(ct_module_child(m, "bn"), "num_batches_tracked")), CT_I64);
    ct_scope_end();
    ct_module_free(m);
}

/* Trains m (on its device) for steps steps of MSE on fixed data with the optimizer
 * kind, clipping the gradient norm at 1; losses[i] gets each step's loss. */
static void train(ct_module *m, ct_optim_kind kind, int steps, double *losses) {
    ct_device dev = ct_module_device(m);
    ct_tensor *ps[MAXP];
    int n = (int)ct_module_parameters(m, ps, NULL, MAXP);
    assert_true(n > 0 && n <= MAXP);
    for (int i = 0; i < n; i++)
        assert_true(on(ps[i], dev));
    ct_optim_options o = kind == CT_OPTIM_SGD ? ct_sgd_options(0.1) : ct_adamw_options(0.01);
    if (kind == CT_OPTIM_SGD)
        o.momentum = 0.9;
    ct_optimizer *opt = ct_optimizer_new(kind, ps, n, &o);
    assert_non_null(opt);
    ct_scope_begin();
    ct_tensor *x = ct_to_device(ct_test_values(CT_SHAPE(16, 4), CT_F32, -1, 1, 11), dev);
    ct_tensor *y = ct_to_device(ct_test_values(CT_SHAPE(16, 3), CT_F32, -1, 1, 12), dev);
    for (int s = 0; s < steps; s++) {
        ct_scope_begin();
        assert_int_equal(ct_optimizer_zero_grad(opt, true), CT_OK);
        ct_tensor *loss = ct_mse_loss(ct_module_forward(m, x), y, CT_REDUCTION_MEAN);
        CT_ASSERT_OK(loss);
        assert_true(on(loss, dev));
        assert_int_equal(ct_backward(loss, NULL, false, false), CT_OK);
        assert_int_equal(ct_item_double(loss, &losses[s]), CT_OK);
        double norm = 0;
        assert_int_equal(ct_clip_grad_norm_(ps, n, 1.0, 2.0, false, &norm), CT_OK);
        assert_true(norm > 0 && isfinite(norm));
        assert_int_equal(ct_optimizer_step(opt), CT_OK);
        ct_scope_end();
    }
    /* the state lives beside the parameters */
    ct_scope_begin();
    ct_value *sd = ct_optimizer_state_dict(opt);
    ct_value *st = ct_value_get(sd, "state");
    assert_int_equal(ct_value_len(st), n);
    for (int64_t i = 0; i < ct_value_len(st); i++) {
        ct_value *pi = ct_value_at(st, i);
        for (int64_t k = 0; k < ct_value_len(pi); k++) {
            const char *key = ct_value_str(ct_value_key_at(pi, k), NULL);
            ct_tensor *t = ct_value_tensor(ct_value_at(pi, k));
            if (t && strcmp(key, "step") != 0)
                assert_true(on(t, dev));
        }
    }
    ct_value_free(sd);
    ct_scope_end();
    ct_optimizer_free(opt);
    ct_scope_end();
}

static void test_train_matches_cpu(void **state) {
    (void)state;
    ct_optim_kind kinds[] = {CT_OPTIM_SGD, CT_OPTIM_ADAMW};
    for (int k = 0; k < 2; k++) {
        ct_manual_seed(5);
        ct_module *cpu = mlp(CT_F32);
        ct_module *gpu = mlp_like(cpu, CT_F32);
        assert_int_equal(ct_module_to(gpu, CUDA0, CT_DTYPE_UNDEFINED), CT_OK);
        expect_module_on(gpu, CUDA0, CT_F32);
        double lc[6], lg[6];
        train(cpu, kinds[k], 6, lc);
        train(gpu, kinds[k], 6, lg);
        for (int s = 0; s < 6; s++) {
            if (!(fabs(lc[s] - lg[s]) <= 1e-4 * fabs(lc[s]) + 1e-6)) {
                print_error("%s step %d: GPU loss %.9g vs CPU %.9g\n", kinds[k] == CT_OPTIM_SGD ? "SGD" : "AdamW", s,
                            lg[s], lc[s]);
                fail();
            }
        }
        assert_true(lc[5] < lc[0]); /* it learned something */
        expect_same_state(cpu, gpu, 1e-4, 1e-5);
        ct_module_free(cpu);
        ct_module_free(gpu);
    }
}

static void test_state_dict_across_devices(void **state) {
    (void)state;
    ct_manual_seed(6);
    ct_module *gpu = mlp(CT_F32);
    assert_int_equal(ct_module_to(gpu, CUDA0, CT_DTYPE_UNDEFINED), CT_OK);
    /* GPU state dict into a CPU module: exact copies */
    ct_module *cpu = mlp(CT_F32);
    ct_value *sd = ct_module_state_dict(gpu);
    ct_scope_begin();
    assert_true(on(ct_value_tensor(ct_value_get(sd, "0.weight")), CUDA0));
    ct_scope_end();
    assert_int_equal(ct_module_load_state_dict(cpu, sd, true, NULL, NULL), CT_OK);
    expect_module_on(cpu, CT_CPU, CT_F32);
    expect_same_state(gpu, cpu, 0, 0);

    /* through files: torch.save's .pt and safetensors, written from the GPU */
    const char *pt = tmp_file("gpu_sd.pt");
    assert_int_equal(ct_save_pt(pt, sd), CT_OK);
    ct_value *loaded = ct_load_pt(pt);
    assert_non_null(loaded);
    ct_scope_begin();
    assert_true(on(ct_value_tensor(ct_value_get(loaded, "2.bias")), CT_CPU));
    ct_scope_end();
    ct_module *from_pt = mlp(CT_F32);
    assert_int_equal(ct_module_load_state_dict(from_pt, loaded, true, NULL, NULL), CT_OK);
    expect_same_state(gpu, from_pt, 0, 0);
    ct_value_free(loaded);
    remove(pt);
    const char *stf = tmp_file("gpu_sd.safetensors");
    assert_int_equal(ct_save_safetensors(stf, sd, NULL), CT_OK);
    loaded = ct_load_safetensors(stf);
    assert_non_null(loaded);
    ct_module *from_st = mlp(CT_F32);
    assert_int_equal(ct_module_load_state_dict(from_st, loaded, true, NULL, NULL), CT_OK);
    expect_same_state(gpu, from_st, 0, 0);
    ct_value_free(loaded);
    remove(stf);
    ct_value_free(sd);

    /* a CPU checkpoint into the CUDA module: copied into its CUDA tensors */
    ct_manual_seed(7);
    ct_module *other = mlp(CT_F32);
    ct_tensor *w_before = PARAM(gpu, "0", "weight");
    sd = ct_module_state_dict(other);
    assert_int_equal(ct_module_load_state_dict(gpu, sd, true, NULL, NULL), CT_OK);
    ct_value_free(sd);
    assert_ptr_equal(PARAM(gpu, "0", "weight"), w_before); /* in place, as PyTorch */
    expect_module_on(gpu, CUDA0, CT_F32);
    expect_same_state(other, gpu, 0, 0);

    /* views of one CUDA storage share one record of the file */
    ct_scope_begin();
    ct_tensor *base = ct_to_device(ct_test_values(CT_SHAPE(4, 6), CT_F32, -1, 1, 3), CUDA0);
    ct_value *views = ct_value_new_dict();
    ct_value_set(views, "whole", ct_value_new_tensor(base));
    ct_value_set(views, "row", ct_value_new_tensor(ct_select(base, 0, 2)));
    ct_value_set(views, "t", ct_value_new_tensor(ct_transpose(base, 0, 1)));
    const char *vp = tmp_file("views.pt");
    assert_int_equal(ct_save_pt(vp, views), CT_OK);
    ct_value *back = ct_load_pt(vp);
    assert_non_null(back);
    ct_tensor *whole = ct_value_tensor(ct_value_get(back, "whole"));
    ct_tensor *row = ct_value_tensor(ct_value_get(back, "row"));
    ct_tensor *tt = ct_value_tensor(ct_value_get(back, "t"));
    assert_true(ct_tensor_shares_storage(whole, row) && ct_tensor_shares_storage(whole, tt));
    CT_ASSERT_CLOSE(base, whole, 0, 0, "whole");
    CT_ASSERT_CLOSE(ct_select(base, 0, 2), row, 0, 0, "row");
    CT_ASSERT_CLOSE(ct_transpose(base, 0, 1), tt, 0, 0, "transposed");
    ct_value_free(back);
    ct_value_free(views);
    remove(vp);
    ct_scope_end();

    ct_module_free(other);
    ct_module_free(from_st);
    ct_module_free(from_pt);
    ct_module_free(cpu);
    ct_module_free(gpu);
}

/* One AdamW step more after moving the optimizer's state between devices through a
 * .pt file: the GPU and CPU runs stay together. */
static void test_optimizer_state_across_devices(void **state) {
    (void)state;
    ct_manual_seed(8);
    ct_module *gpu = mlp(CT_F32);
    assert_int_equal(ct_module_to(gpu, CUDA0, CT_DTYPE_UNDEFINED), CT_OK);
    ct_tensor *gp[MAXP], *cp[MAXP];
    int n = (int)ct_module_parameters(gpu, gp, NULL, MAXP);
    ct_optim_options o = ct_adamw_options(0.01);
    ct_optimizer *gopt = ct_optimizer_new(CT_OPTIM_ADAMW, gp, n, &o);
    assert_non_null(gopt);
    ct_scope_begin();
    ct_tensor *x = ct_test_values(CT_SHAPE(8, 4), CT_F32, -1, 1, 21);
    ct_tensor *y = ct_test_values(CT_SHAPE(8, 3), CT_F32, -1, 1, 22);
    ct_tensor *xg = ct_to_device(x, CUDA0), *yg = ct_to_device(y, CUDA0);
    for (int s = 0; s < 3; s++) {
        ct_scope_begin();
        ct_optimizer_zero_grad(gopt, true);
        assert_int_equal(ct_backward(ct_mse_loss(ct_module_forward(gpu, xg), yg, CT_REDUCTION_MEAN), NULL, false, false),
                         CT_OK);
        assert_int_equal(ct_optimizer_step(gopt), CT_OK);
        ct_scope_end();
    }
    /* the GPU optimizer's state, through a file, into a CPU optimizer of a CPU copy */
    ct_value *osd = ct_optimizer_state_dict(gopt);
    const char *path = tmp_file("optim.pt");
    assert_int_equal(ct_save_pt(path, osd), CT_OK);
    ct_value *ocpu = ct_load_pt(path);
    assert_non_null(ocpu);
    remove(path);
    ct_module *cpu = mlp_like(gpu, CT_F32);
    int nc = (int)ct_module_parameters(cpu, cp, NULL, MAXP);
    assert_int_equal(nc, n);
    ct_optimizer *copt = ct_optimizer_new(CT_OPTIM_ADAMW, cp, n, &o);
    assert_int_equal(ct_optimizer_load_state_dict(copt, ocpu), CT_OK);
    /* and the CPU dict back into a new GPU optimizer: its state goes to the GPU */
    ct_optimizer *gopt2 = ct_optimizer_new(CT_OPTIM_ADAMW, gp, n, &o);
    assert_int_equal(ct_optimizer_load_state_dict(gopt2, ocpu), CT_OK);
    ct_value *back = ct_optimizer_state_dict(gopt2);
    ct_value *s0 = ct_value_at(ct_value_get(back, "state"), 0);
    assert_true(on(ct_value_tensor(ct_value_get(s0, "exp_avg")), CUDA0));
    CT_ASSERT_CLOSE(ct_value_tensor(ct_value_get(s0, "exp_avg_sq")),
                    ct_value_tensor(ct_value_get(ct_value_at(ct_value_get(ocpu, "state"), 0), "exp_avg_sq")), 0, 0,
                    "exp_avg_sq after the round trip");
    ct_value_free(back);
    ct_value_free(ocpu);
    ct_value_free(osd);
    /* one more step on both devices */
    ct_optimizer_zero_grad(gopt2, true);
    ct_optimizer_zero_grad(copt, true);
    assert_int_equal(ct_backward(ct_mse_loss(ct_module_forward(gpu, xg), yg, CT_REDUCTION_MEAN), NULL, false, false),
                     CT_OK);
    assert_int_equal(ct_backward(ct_mse_loss(ct_module_forward(cpu, x), y, CT_REDUCTION_MEAN), NULL, false, false),
                     CT_OK);
    assert_int_equal(ct_optimizer_step(gopt2), CT_OK);
    assert_int_equal(ct_optimizer_step(copt), CT_OK);
    expect_same_state(cpu, gpu, 1e-4, 1e-5);
    ct_scope_end();
    ct_optimizer_free(gopt2);
    ct_optimizer_free(copt);
    ct_optimizer_free(gopt);
    ct_module_free(cpu);
    ct_module_free(gpu);
}

static void test_bfloat16_module(void **state) {
    (void)state;
    ct_manual_seed(9);
    ct_module *cpu = mlp(CT_F32);
    ct_module *gpu = mlp_like(cpu, CT_F32);
    assert_int_equal(ct_module_to(gpu, CUDA0, CT_BF16), CT_OK);
    expect_module_on(gpu, CUDA0, CT_BF16);
    assert_int_equal(ct_module_bfloat16(cpu), CT_OK);
    expect_module_on(cpu, CT_CPU, CT_BF16);
    expect_same_state(cpu, gpu, 0, 0); /* one rounding, on either device */
    ct_scope_begin();
    ct_tensor *x = ct_test_values(CT_SHAPE(5, 4), CT_BF16, -1, 1, 31);
    ct_tensor *yc = ct_module_forward(cpu, x);
    ct_tensor *yg = ct_module_forward(gpu, ct_to_device(x, CUDA0));
    assert_true(on(yg, CUDA0));
    assert_int_equal(ct_tensor_dtype(yg), CT_BF16);
    double rtol, atol;
    ct_test_tolerance(CT_BF16, &rtol, &atol);
    /* two layers, each rounding to bfloat16: twice one op's tolerance */
    CT_ASSERT_CLOSE(yg, yc, 2 * rtol, 2 * atol, "bfloat16 forward");
    ct_scope_end();
    /* dtype shorthands keep the device */
    assert_int_equal(ct_module_float(gpu), CT_OK);
    expect_module_on(gpu, CUDA0, CT_F32);
    assert_int_equal(ct_module_half(gpu), CT_OK);
    expect_module_on(gpu, CUDA0, CT_F16);
    ct_module_free(cpu);
    ct_module_free(gpu);
}

static void test_default_device_cuda(void **state) {
    (void)state;
    assert_int_equal(ct_set_default_device(CUDA0), CT_OK);
    ct_module *lin = ct_nn_linear(4, 3, true, CT_F32);
    ct_module *bn = ct_nn_batch_norm2d(3, 1e-5, 0.1, true, true, CT_F32);
    ct_module *emb = ct_nn_embedding(6, 4, 0, CT_F32);
    ct_module *gpt = ct_nn_gpt_block(8, 2, CT_F32);
    assert_int_equal(ct_set_default_device(CT_CPU), CT_OK);
    assert_non_null(lin);
    assert_non_null(bn);
    assert_non_null(emb);
    assert_non_null(gpt);
    expect_module_on(lin, CUDA0, CT_F32);
    expect_module_on(bn, CUDA0, CT_F32);
    expect_module_on(emb, CUDA0, CT_F32);
    expect_module_on(gpt, CUDA0, CT_F32);
    assert_int_equal(ct_tensor_dtype(ct_module_buffer(bn, "num_batches_tracked")), CT_I64);
    ct_scope_begin();
    /* initialised on the GPU: the bounds of nn.Linear's init, the padding row zero */
    ct_tensor *w = ct_to_device(ct_module_param(lin, "weight"), CT_CPU);
    double bound = 1 / sqrt(4.0), mx = 0;
    for (int64_t i = 0; i < ct_tensor_numel(w); i++)
        mx = fmax(mx, fabs(ct_test_at(w, i)));
    assert_true(mx > 0 && mx <= bound);
    ct_tensor *e = ct_to_device(ct_module_param(emb, "weight"), CT_CPU);
    for (int64_t j = 0; j < 4; j++)
        assert_true(ct_test_at(e, j) == 0);
    /* and they run there */
    ct_tensor *y = ct_module_forward(lin, ct_ones(CT_SHAPE(2, 4), CT_F32, CUDA0));
    assert_true(on(y, CUDA0));
    ct_tensor *h = ct_module_forward(gpt, ct_to_device(ct_test_values(CT_SHAPE(1, 5, 8), CT_F32, -1, 1, 41), CUDA0));
    assert_true(on(h, CUDA0));
    ct_scope_end();
    ct_module_free(lin);
    ct_module_free(bn);
    ct_module_free(emb);
    ct_module_free(gpt);
}

/* Attention with dropout on CUDA (the composite path, its causal mask made on the
 * scores' device): with p = 0.5 about half the probabilities are dropped, so the output
 * differs from p = 0's yet stays finite; p = 1 gives zeros. */
static void test_attention_dropout_cuda(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *q = ct_randn(CT_SHAPE(2, 3, 16, 8), CT_F32, CT_CUDA(0));
    ct_tensor *y0 = ct_scaled_dot_product_attention(q, q, q, NULL, 0.0, true, NULL);
    ct_tensor *y = ct_scaled_dot_product_attention(q, q, q, NULL, 0.5, true, NULL);
    ct_tensor *y1 = ct_scaled_dot_product_attention(q, q, q, NULL, 1.0, true, NULL);
    CT_ASSERT_OK(y0);
    CT_ASSERT_OK(y);
    CT_ASSERT_OK(y1);
    assert_true(ct_device_equal(ct_tensor_device(y), CT_CUDA(0)));
    ct_tensor *a = ct_to_device(y, CT_CPU), *b = ct_to_device(y0, CT_CPU), *c = ct_to_device(y1, CT_CPU);
    int differ = 0;
    for (int64_t i = 0; i < ct_tensor_numel(a); i++) {
        assert_true(isfinite(ct_test_at(a, i)));
        differ += ct_test_at(a, i) != ct_test_at(b, i);
        assert_true(ct_test_at(c, i) == 0);
    }
    assert_true(differ > ct_tensor_numel(a) / 4);
    ct_scope_end();
}

int main(void) {
    int skip = ct_test_require_gpu("test_cuda_module");
    if (skip)
        return skip;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_to_cuda_and_back),
        cmocka_unit_test(test_train_matches_cpu),
        cmocka_unit_test(test_state_dict_across_devices),
        cmocka_unit_test(test_optimizer_state_across_devices),
        cmocka_unit_test(test_bfloat16_module),
        cmocka_unit_test(test_default_device_cuda),
        cmocka_unit_test(test_attention_dropout_cuda),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
