/* The gradient scaler (torch.amp.GradScaler): scaling and unscaling values, skipped
 * steps on inf/NaN, growth and backoff of the scale, the call-order checks, the state
 * dict, and a training step under autocast. The expected values follow from
 * PyTorch's rules by hand: the scale is a float32, unscaling multiplies by its
 * float32 reciprocal, and _amp_update_scale_ backs off on inf/NaN and grows after
 * growth_interval clean steps. */
#include <math.h>
#include <string.h>

#include "testutil.h"

/* Exact comparison of doubles, printing both on failure. */
static void eq_double(double got, double want, const char *file, int line) {
    if (got != want && !(isnan(got) && isnan(want))) {
        print_error("%s:%d: got %.9g, want %.9g\n", file, line, got, want);
        _fail(file, line);
    }
}
#define assert_exactly(got, want) eq_double((got), (want), __FILE__, __LINE__)

static ct_tensor *vec3(float a, float b, float c) {
    float v[3] = {a, b, c};
    return ct_from_data(v, CT_SHAPE(3), CT_F32);
}

static void assert_values(const ct_tensor *t, double a, double b, double c) {
    CT_ASSERT_OK(t);
    assert_exactly(ct_test_at(t, 0), a);
    assert_exactly(ct_test_at(t, 1), b);
    assert_exactly(ct_test_at(t, 2), c);
}

static ct_tensor *grad_of(const ct_tensor *t) { return ct_tensor_grad(t); }

/* A parameter w = [1, 2, 3] with an SGD optimizer (lr 0.5) and the gradient g. */
static ct_optimizer *sgd_with_grad(ct_tensor **w, const ct_tensor *g) {
    *w = ct_tensor_set_requires_grad(vec3(1, 2, 3), true);
    ct_optim_options o = ct_sgd_options(0.5);
    ct_optimizer *opt = ct_optimizer_new(CT_OPTIM_SGD, w, 1, &o);
    assert_non_null(opt);
    assert_int_equal(ct_tensor_set_grad(*w, g), CT_OK);
    return opt;
}

static void defaults_and_scale(void **state) {
    (void)state;
    ct_scope_begin();
    ct_grad_scaler_options d = ct_grad_scaler_defaults();
    assert_exactly(d.init_scale, 65536.0);
    assert_exactly(d.growth_factor, 2.0);
    assert_exactly(d.backoff_factor, 0.5);
    assert_int_equal(d.growth_interval, 2000);
    assert_true(d.enabled);
    ct_grad_scaler *s = ct_grad_scaler_new(NULL);
    assert_non_null(s);
    assert_true(ct_grad_scaler_is_enabled(s));
    assert_exactly(ct_grad_scaler_get_scale(s), 65536.0);
    ct_tensor *loss = ct_from_data((float[]){1.5f}, NULL, 0, CT_F32);
    ct_tensor *scaled = ct_grad_scaler_scale(s, loss);
    CT_ASSERT_OK(scaled);
    assert_exactly(ct_test_at(scaled, 0), 98304.0);
    /* a float16 loss stays float16 (and 65536 * 1.5 overflows it: that is what the
     * inf check is for) */
    ct_tensor *h = ct_grad_scaler_scale(s, ct_to_dtype(loss, CT_F16));
    assert_int_equal(ct_tensor_dtype(h), CT_F16);
    assert_true(isinf(ct_test_at(h, 0)));
    ct_grad_scaler_free(s);

    /* disabled: a pass-through */
    d.enabled = false;
    d.growth_factor = 0.5; /* not checked when disabled, as in PyTorch */
    s = ct_grad_scaler_new(&d);
    assert_non_null(s);
    assert_false(ct_grad_scaler_is_enabled(s));
    assert_exactly(ct_grad_scaler_get_scale(s), 1.0);
    scaled = ct_grad_scaler_scale(s, loss);
    assert_ptr_equal(scaled, loss);
    ct_tensor *w;
    ct_optimizer *opt = sgd_with_grad(&w, vec3(2, 2, 2));
    assert_int_equal(ct_grad_scaler_unscale_(s, opt), CT_OK);
    assert_int_equal(ct_grad_scaler_step(s, opt), CT_OK);
    assert_values(w, 0, 1, 2); /* the gradient as given: not unscaled */
    assert_int_equal(ct_grad_scaler_update(s), CT_OK);
    ct_value *sd = ct_grad_scaler_state_dict(s);
    assert_int_equal(ct_value_len(sd), 0);
    ct_value_free(sd);
    ct_optimizer_free(opt);
    ct_grad_scaler_free(s);
    ct_scope_end();
}

static void unscale_and_step(void **state) {
    (void)state;
    ct_scope_begin();
    ct_grad_scaler_options o = ct_grad_scaler_defaults();
    o.init_scale = 1024;
    ct_grad_scaler *s = ct_grad_scaler_new(&o);
    ct_tensor *w;
    ct_optimizer *opt = sgd_with_grad(&w, vec3(1024, 2048, -512));
    CT_ASSERT_OK(ct_grad_scaler_scale(s, w));
    assert_int_equal(ct_grad_scaler_unscale_(s, opt), CT_OK);
    assert_values(grad_of(w), 1, 2, -0.5);
    CT_ASSERT_ERR(ct_grad_scaler_unscale_(s, opt) == CT_OK, CT_ERROR_RUNTIME, "already been called");
    assert_values(grad_of(w), 1, 2, -0.5); /* not unscaled twice */
    assert_int_equal(ct_grad_scaler_step(s, opt), CT_OK);
    assert_true(ct_grad_scaler_stepped(s, opt));
    assert_values(w, 0.5, 1, 3.25);
    CT_ASSERT_ERR(ct_grad_scaler_step(s, opt) == CT_OK, CT_ERROR_RUNTIME, "step() has already been called");
    CT_ASSERT_ERR(ct_grad_scaler_unscale_(s, opt) == CT_OK, CT_ERROR_RUNTIME, "after step()");
    assert_int_equal(ct_grad_scaler_update(s), CT_OK);
    assert_exactly(ct_grad_scaler_get_scale(s), 1024);
    assert_int_equal(ct_grad_scaler_growth_tracker(s), 1);

    /* step without unscale_ unscales first */
    assert_int_equal(ct_tensor_set_grad(w, vec3(2048, 0, 1024)), CT_OK);
    assert_int_equal(ct_grad_scaler_step(s, opt), CT_OK);
    assert_values(w, -0.5, 1, 2.75);
    assert_int_equal(ct_grad_scaler_update(s), CT_OK);
    assert_int_equal(ct_grad_scaler_growth_tracker(s), 2);

    /* a scale that is not a power of two: the gradient times float32(1 / scale) */
    assert_int_equal(ct_grad_scaler_update_to(s, 3.0), CT_OK);
    assert_exactly(ct_grad_scaler_get_scale(s), 3.0);
    assert_int_equal(ct_tensor_set_grad(w, vec3(3, 6, 1)), CT_OK);
    assert_int_equal(ct_grad_scaler_unscale_(s, opt), CT_OK);
    float inv = (float)(1.0 / 3.0);
    assert_values(grad_of(w), (double)(3.0f * inv), (double)(6.0f * inv), (double)inv);
    ct_optimizer_free(opt);
    ct_grad_scaler_free(s);
    ct_scope_end();
}

static void skip_on_inf_and_nan(void **state) {
    (void)state;
    ct_scope_begin();
    ct_grad_scaler *s = ct_grad_scaler_new(NULL);
    ct_tensor *w, *w2 = ct_tensor_set_requires_grad(vec3(5, 5, 5), true);
    ct_optimizer *opt = sgd_with_grad(&w, vec3(1, INFINITY, 1));
    ct_optim_options o2 = ct_sgd_options(0.5);
    ct_optimizer *opt2 = ct_optimizer_new(CT_OPTIM_SGD, &w2, 1, &o2);
    assert_int_equal(ct_tensor_set_grad(w2, vec3(65536, 65536, 65536)), CT_OK);
    CT_ASSERT_OK(ct_grad_scaler_scale(s, w));
    assert_int_equal(ct_grad_scaler_step(s, opt), CT_OK);
    assert_false(ct_grad_scaler_stepped(s, opt));
    assert_values(w, 1, 2, 3); /* skipped */
    /* another optimizer of the same iteration with finite gradients steps */
    assert_int_equal(ct_grad_scaler_step(s, opt2), CT_OK);
    assert_true(ct_grad_scaler_stepped(s, opt2));
    assert_values(w2, 4.5, 4.5, 4.5);
    /* one inf in the iteration backs the scale off */
    assert_int_equal(ct_grad_scaler_update(s), CT_OK);
    assert_exactly(ct_grad_scaler_get_scale(s), 32768);
    assert_int_equal(ct_grad_scaler_growth_tracker(s), 0);
    /* NaN too */
    assert_int_equal(ct_tensor_set_grad(w, vec3(NAN, 0, 0)), CT_OK);
    assert_int_equal(ct_grad_scaler_step(s, opt), CT_OK);
    assert_false(ct_grad_scaler_stepped(s, opt));
    assert_values(w, 1, 2, 3);
    assert_int_equal(ct_grad_scaler_update(s), CT_OK);
    assert_exactly(ct_grad_scaler_get_scale(s), 16384);
    ct_optimizer_free(opt);
    ct_optimizer_free(opt2);
    ct_grad_scaler_free(s);
    ct_scope_end();
}

/* One iteration: scale, step with the gradient g, update. */
static void iteration(ct_grad_scaler *s, ct_optimizer *opt, ct_tensor *w, float g) {
    ct_scope_begin();
    CT_ASSERT_OK(ct_grad_scaler_scale(s, w));
    assert_int_equal(ct_tensor_set_grad(w, vec3(g, g, g)), CT_OK);
    assert_int_equal(ct_grad_scaler_step(s, opt), CT_OK);
    assert_int_equal(ct_grad_scaler_update(s), CT_OK);
    ct_scope_end();
}

static void growth_and_backoff(void **state) {
    (void)state;
    ct_scope_begin();
    ct_grad_scaler_options o = ct_grad_scaler_defaults();
    o.init_scale = 8;
    o.growth_interval = 3;
    o.growth_factor = 4;
    o.backoff_factor = 0.25;
    ct_grad_scaler *s = ct_grad_scaler_new(&o);
    ct_tensor *w;
    ct_optimizer *opt = sgd_with_grad(&w, vec3(0, 0, 0));
    /* scale after each iteration, growth tracker after it */
    const float grads[] = {1, 1, 1, 1, INFINITY, 1, 1, NAN, 1, 1, 1};
    const double scales[] = {8, 8, 32, 32, 8, 8, 8, 2, 2, 2, 8};
    const int64_t trackers[] = {1, 2, 0, 1, 0, 1, 2, 0, 1, 2, 0};
    for (int i = 0; i < 11; i++) {
        iteration(s, opt, w, grads[i]);
        assert_exactly(ct_grad_scaler_get_scale(s), scales[i]);
        assert_int_equal(ct_grad_scaler_growth_tracker(s), trackers[i]);
    }
    ct_optimizer_free(opt);
    ct_grad_scaler_free(s);

    /* growth that overflows float32 keeps the scale (and restarts the count) */
    o = ct_grad_scaler_defaults();
    o.init_scale = ldexp(1.0, 127);
    o.growth_interval = 1;
    s = ct_grad_scaler_new(&o);
    opt = sgd_with_grad(&w, vec3(0, 0, 0));
    iteration(s, opt, w, 0);
    assert_exactly(ct_grad_scaler_get_scale(s), ldexp(1.0, 127));
    assert_int_equal(ct_grad_scaler_growth_tracker(s), 0);
    /* backoff rounds as float32: 3 * 0.1 */
    assert_int_equal(ct_grad_scaler_update_to(s, 3.0), CT_OK);
    ct_optimizer_free(opt);
    ct_grad_scaler_free(s);
    o = ct_grad_scaler_defaults();
    o.init_scale = 3;
    o.backoff_factor = 0.1;
    s = ct_grad_scaler_new(&o);
    opt = sgd_with_grad(&w, vec3(0, 0, 0));
    iteration(s, opt, w, INFINITY);
    assert_exactly(ct_grad_scaler_get_scale(s), (double)(float)(3.0 * 0.1));
    ct_optimizer_free(opt);
    ct_grad_scaler_free(s);
    ct_scope_end();
}

static void state_dict_round_trip(void **state) {
    (void)state;
    ct_scope_begin();
    ct_grad_scaler_options o = ct_grad_scaler_defaults();
    o.growth_interval = 5;
    o.init_scale = 256;
    ct_grad_scaler *s = ct_grad_scaler_new(&o);
    ct_tensor *w;
    ct_optimizer *opt = sgd_with_grad(&w, vec3(0, 0, 0));
    iteration(s, opt, w, INFINITY);
    iteration(s, opt, w, 1);
    iteration(s, opt, w, 1);
    ct_value *sd = ct_grad_scaler_state_dict(s);
    assert_non_null(sd);
    const char *keys[] = {"scale", "growth_factor", "backoff_factor", "growth_interval", "_growth_tracker"};
    assert_int_equal(ct_value_len(sd), 5);
    for (int i = 0; i < 5; i++)
        assert_string_equal(ct_value_str(ct_value_key_at(sd, i), NULL), keys[i]);
    assert_exactly(ct_value_float(ct_value_get(sd, "scale")), 128);
    assert_int_equal(ct_value_kind(ct_value_get(sd, "scale")), CT_VALUE_FLOAT);
    assert_int_equal(ct_value_kind(ct_value_get(sd, "growth_interval")), CT_VALUE_INT);
    assert_int_equal(ct_value_int(ct_value_get(sd, "growth_interval")), 5);
    assert_int_equal(ct_value_int(ct_value_get(sd, "_growth_tracker")), 2);

    /* a fresh scaler takes it over, before and after its first scale call */
    ct_grad_scaler *t = ct_grad_scaler_new(NULL);
    assert_int_equal(ct_grad_scaler_load_state_dict(t, sd), CT_OK);
    assert_exactly(ct_grad_scaler_get_scale(t), 128);
    assert_int_equal(ct_grad_scaler_growth_tracker(t), 2);
    /* both continue identically: three more clean steps reach the interval of 5 */
    ct_tensor *w2;
    ct_optimizer *opt2 = sgd_with_grad(&w2, vec3(0, 0, 0));
    for (int i = 0; i < 3; i++) {
        iteration(s, opt, w, 1);
        iteration(t, opt2, w2, 1);
    }
    assert_exactly(ct_grad_scaler_get_scale(s), 256);
    assert_exactly(ct_grad_scaler_get_scale(t), 256);
    assert_int_equal(ct_grad_scaler_growth_tracker(t), ct_grad_scaler_growth_tracker(s));
    ct_value *sd2 = ct_grad_scaler_state_dict(t);
    ct_value *sd3 = ct_grad_scaler_state_dict(s);
    char a[256], b[256];
    assert_true(ct_value_to_json(sd2, a, sizeof a) > 0);
    assert_true(ct_value_to_json(sd3, b, sizeof b) > 0);
    assert_string_equal(a, b);
    ct_value_free(sd2);
    ct_value_free(sd3);

    /* errors: a disabled scaler's empty dict, wrong kinds, bad values */
    ct_value *empty = ct_value_new_dict();
    CT_ASSERT_ERR(ct_grad_scaler_load_state_dict(t, empty) == CT_OK, CT_ERROR_RUNTIME, "empty");
    ct_value *lst = ct_value_new_list();
    CT_ASSERT_ERR(ct_grad_scaler_load_state_dict(t, lst) == CT_OK, CT_ERROR_VALUE, "dict");
    ct_value *bad = ct_value_clone(sd);
    assert_int_equal(ct_value_set(bad, "growth_interval", ct_value_new_float(2.5)), CT_OK);
    CT_ASSERT_ERR(ct_grad_scaler_load_state_dict(t, bad) == CT_OK, CT_ERROR_VALUE, "growth_interval");
    ct_value_free(bad);
    bad = ct_value_clone(sd);
    assert_int_equal(ct_value_set(bad, "backoff_factor", ct_value_new_float(2)), CT_OK);
    CT_ASSERT_ERR(ct_grad_scaler_load_state_dict(t, bad) == CT_OK, CT_ERROR_VALUE, "backoff_factor");
    assert_exactly(ct_grad_scaler_get_scale(t), 256); /* unchanged */
    CT_ASSERT_ERR(ct_grad_scaler_load_state_dict(NULL, sd) == CT_OK, CT_ERROR_NULL_ARGUMENT, "scaler");
    CT_ASSERT_ERR(ct_grad_scaler_load_state_dict(t, NULL) == CT_OK, CT_ERROR_NULL_ARGUMENT, "state_dict");
    ct_value_free(bad);
    ct_value_free(lst);
    ct_value_free(empty);
    ct_value_free(sd);
    ct_optimizer_free(opt);
    ct_optimizer_free(opt2);
    ct_grad_scaler_free(s);
    ct_grad_scaler_free(t);
    ct_scope_end();
}

static void errors(void **state) {
    (void)state;
    ct_scope_begin();
    ct_grad_scaler_options o = ct_grad_scaler_defaults();
    o.growth_factor = 1.0;
    CT_ASSERT_ERR(ct_grad_scaler_new(&o) != NULL, CT_ERROR_VALUE, "growth factor must be > 1.0");
    o = ct_grad_scaler_defaults();
    o.backoff_factor = 1.0;
    CT_ASSERT_ERR(ct_grad_scaler_new(&o) != NULL, CT_ERROR_VALUE, "backoff factor must be < 1.0");
    o = ct_grad_scaler_defaults();
    o.backoff_factor = NAN;
    CT_ASSERT_ERR(ct_grad_scaler_new(&o) != NULL, CT_ERROR_VALUE, "backoff factor");
    o = ct_grad_scaler_defaults();
    o.init_scale = INFINITY;
    CT_ASSERT_ERR(ct_grad_scaler_new(&o) != NULL, CT_ERROR_VALUE, "init_scale");

    ct_grad_scaler *s = ct_grad_scaler_new(NULL);
    ct_tensor *w;
    ct_optimizer *opt = sgd_with_grad(&w, vec3(1, 1, 1));
    CT_ASSERT_ERR(ct_grad_scaler_scale(NULL, w) != NULL, CT_ERROR_NULL_ARGUMENT, "scaler");
    CT_ASSERT_ERR(ct_grad_scaler_scale(s, NULL) != NULL, CT_ERROR_NULL_ARGUMENT, "");
    CT_ASSERT_ERR(ct_grad_scaler_unscale_(NULL, opt) == CT_OK, CT_ERROR_NULL_ARGUMENT, "scaler");
    CT_ASSERT_ERR(ct_grad_scaler_unscale_(s, NULL) == CT_OK, CT_ERROR_NULL_ARGUMENT, "optimizer");
    CT_ASSERT_ERR(ct_grad_scaler_step(s, NULL) == CT_OK, CT_ERROR_NULL_ARGUMENT, "optimizer");
    CT_ASSERT_ERR(ct_grad_scaler_update(NULL) == CT_OK, CT_ERROR_NULL_ARGUMENT, "scaler");
    CT_ASSERT_ERR(ct_grad_scaler_update_to(NULL, 2) == CT_OK, CT_ERROR_NULL_ARGUMENT, "scaler");
    CT_ASSERT_ERR(ct_grad_scaler_state_dict(NULL) != NULL, CT_ERROR_NULL_ARGUMENT, "scaler");
    assert_true(isnan(ct_grad_scaler_get_scale(NULL)));
    assert_false(ct_grad_scaler_is_enabled(NULL));
    assert_int_equal(ct_grad_scaler_growth_tracker(NULL), 0);
    assert_false(ct_grad_scaler_stepped(NULL, opt));
    ct_grad_scaler_free(NULL);
    /* before the first scale call */
    CT_ASSERT_ERR(ct_grad_scaler_unscale_(s, opt) == CT_OK, CT_ERROR_RUNTIME, "_scale is None");
    CT_ASSERT_ERR(ct_grad_scaler_step(s, opt) == CT_OK, CT_ERROR_RUNTIME, "_scale is None");
    CT_ASSERT_ERR(ct_grad_scaler_update(s) == CT_OK, CT_ERROR_RUNTIME, "_scale is None");
    CT_ASSERT_OK(ct_grad_scaler_scale(s, w));
    /* update without any step */
    CT_ASSERT_ERR(ct_grad_scaler_update(s) == CT_OK, CT_ERROR_RUNTIME, "No inf checks were recorded prior to update");
    CT_ASSERT_ERR(ct_grad_scaler_update_to(s, -1) == CT_OK, CT_ERROR_VALUE, "new_scale");
    /* an optimizer without gradients */
    assert_int_equal(ct_optimizer_zero_grad(opt, true), CT_OK);
    CT_ASSERT_ERR(ct_grad_scaler_step(s, opt) == CT_OK, CT_ERROR_RUNTIME, "No inf checks were recorded for this optimizer");
    ct_optimizer_free(opt);
    /* float16 gradients are refused, none is changed */
    ct_tensor *h = ct_tensor_set_requires_grad(ct_to_dtype(vec3(1, 2, 3), CT_F16), true);
    ct_tensor *f = ct_tensor_set_requires_grad(vec3(1, 2, 3), true);
    ct_tensor *ps[2] = {f, h};
    ct_optim_options so = ct_sgd_options(0.1);
    opt = ct_optimizer_new(CT_OPTIM_SGD, ps, 2, &so);
    assert_non_null(opt);
    assert_int_equal(ct_tensor_set_grad(f, vec3(65536, 65536, 65536)), CT_OK);
    assert_int_equal(ct_tensor_set_grad(h, ct_to_dtype(vec3(1, 1, 1), CT_F16)), CT_OK);
    ct_grad_scaler *s2 = ct_grad_scaler_new(NULL);
    CT_ASSERT_OK(ct_grad_scaler_scale(s2, f));
    CT_ASSERT_ERR(ct_grad_scaler_unscale_(s2, opt) == CT_OK, CT_ERROR_VALUE, "Attempting to unscale FP16 gradients.");
    assert_values(grad_of(f), 65536, 65536, 65536);
    ct_optimizer_free(opt);
    ct_grad_scaler_free(s2);
    ct_grad_scaler_free(s);
    ct_scope_end();
}

/* The whole recipe: a linear layer under bfloat16 autocast, a scaled backward, the
 * step; the parameters end where an unscaled step with the same gradients puts them. */
static void training_step_under_autocast(void **state) {
    (void)state;
    ct_scope_begin();
    uint64_t rng = 7;
    float xv[8 * 4], wv[3 * 4];
    for (int i = 0; i < 32; i++)
        xv[i] = (float)(ct_test_unit(&rng) - 0.5);
    for (int i = 0; i < 12; i++)
        wv[i] = (float)(ct_test_unit(&rng) - 0.5);
    ct_tensor *x = ct_from_data(xv, CT_SHAPE(8, 4), CT_F32);
    ct_tensor *w = ct_tensor_set_requires_grad(ct_from_data(wv, CT_SHAPE(3, 4), CT_F32), true);
    ct_tensor *w2 = ct_tensor_set_requires_grad(ct_from_data(wv, CT_SHAPE(3, 4), CT_F32), true);
    ct_optim_options o = ct_sgd_options(0.1);
    ct_optimizer *opt = ct_optimizer_new(CT_OPTIM_SGD, &w, 1, &o);
    ct_optimizer *opt2 = ct_optimizer_new(CT_OPTIM_SGD, &w2, 1, &o);
    ct_grad_scaler *s = ct_grad_scaler_new(NULL);

    assert_int_equal(ct_autocast_begin(CT_DEVICE_CPU, CT_BF16), CT_OK);
    ct_tensor *loss = ct_sum(ct_linear(x, w, NULL), NULL, 0, false, CT_DTYPE_UNDEFINED);
    assert_int_equal(ct_autocast_end(), CT_OK);
    assert_int_equal(ct_tensor_dtype(loss), CT_F32);
    assert_int_equal(ct_backward(ct_grad_scaler_scale(s, loss), NULL, false, false), CT_OK);
    assert_int_equal(ct_grad_scaler_step(s, opt), CT_OK);
    assert_true(ct_grad_scaler_stepped(s, opt));
    assert_int_equal(ct_grad_scaler_update(s), CT_OK);

    assert_int_equal(ct_autocast_begin(CT_DEVICE_CPU, CT_BF16), CT_OK);
    ct_tensor *loss2 = ct_sum(ct_linear(x, w2, NULL), NULL, 0, false, CT_DTYPE_UNDEFINED);
    assert_int_equal(ct_autocast_end(), CT_OK);
    assert_int_equal(ct_backward(loss2, NULL, false, false), CT_OK);
    assert_int_equal(ct_optimizer_step(opt2), CT_OK);
    /* the scale is a power of two, so the scaled gradients unscale exactly */
    bool eq = false;
    assert_int_equal(ct_equal(w, w2, &eq), CT_OK);
    assert_true(eq);
    assert_int_equal(ct_tensor_dtype(grad_of(w)), CT_F32);
    ct_grad_scaler_free(s);
    ct_optimizer_free(opt);
    ct_optimizer_free(opt2);
    ct_scope_end();
}

/* On a GPU (skipped without one): unscaling, the inf check and a skipped step on
 * CUDA gradients. */
static void cuda_gradients(void **state) {
    (void)state;
    if (!ct_cuda_is_available()) {
        skip();
        return;
    }
    ct_scope_begin();
    ct_tensor *w = ct_tensor_set_requires_grad(ct_to_device(vec3(1, 2, 3), CT_CUDA(0)), true);
    ct_optim_options o = ct_sgd_options(0.5);
    ct_optimizer *opt = ct_optimizer_new(CT_OPTIM_SGD, &w, 1, &o);
    ct_grad_scaler *s = ct_grad_scaler_new(NULL);
    CT_ASSERT_OK(ct_grad_scaler_scale(s, w));
    assert_int_equal(ct_tensor_set_grad(w, ct_to_device(vec3(65536, 131072, 0), CT_CUDA(0))), CT_OK);
    assert_int_equal(ct_grad_scaler_step(s, opt), CT_OK);
    assert_true(ct_grad_scaler_stepped(s, opt));
    assert_values(ct_to_device(w, CT_CPU), 0.5, 1, 3);
    assert_int_equal(ct_grad_scaler_update(s), CT_OK);
    CT_ASSERT_OK(ct_grad_scaler_scale(s, w));
    assert_int_equal(ct_tensor_set_grad(w, ct_to_device(vec3(1, NAN, 0), CT_CUDA(0))), CT_OK);
    assert_int_equal(ct_grad_scaler_step(s, opt), CT_OK);
    assert_false(ct_grad_scaler_stepped(s, opt));
    assert_values(ct_to_device(w, CT_CPU), 0.5, 1, 3);
    assert_int_equal(ct_grad_scaler_update(s), CT_OK);
    assert_exactly(ct_grad_scaler_get_scale(s), 32768);
    ct_grad_scaler_free(s);
    ct_optimizer_free(opt);
    ct_scope_end();
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(defaults_and_scale),    cmocka_unit_test(unscale_and_step),
        cmocka_unit_test(skip_on_inf_and_nan),   cmocka_unit_test(growth_and_backoff),
        cmocka_unit_test(state_dict_round_trip), cmocka_unit_test(errors),
        cmocka_unit_test(training_step_under_autocast), cmocka_unit_test(cuda_gradients),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
