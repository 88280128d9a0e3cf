/* Which dtypes each op accepts, against PyTorch's CPU ops (tests/data/dtype_support.txt,
 * written by tests/golden/gen_dtype_support.py; the file's header names the version).
 *
 * For every op and every input dtype the file records what PyTorch did with the same
 * call: a result dtype, a refusal by definition (bool negation, bitwise ops on floats,
 * mean of integers), or a missing kernel ("not implemented for 'UInt32'"). ctorch must
 * accept what PyTorch accepts with the same result dtype, and refuse what PyTorch
 * refuses by definition; where PyTorch only lacks a kernel ctorch may do better, and
 * the test counts those cases. Every accepted case runs once more on META inputs, whose
 * result must have the CPU result's shape and dtype. Every case is checked before the
 * test fails, so one run lists every mismatch. */
#include <stdio.h>
#include <string.h>

#include "testutil.h"

/* where the inputs live: the device under test, or META for the shape-rule pass */
static ct_device g_dev = {CT_DEVICE_CPU, 0};

static ct_tensor *on_dev(ct_tensor *t) { return g_dev.type == CT_DEVICE_CPU ? t : ct_to_device(t, g_dev); }

/* the inputs of gen_dtype_support.py, in dtype d */
static ct_tensor *from_i64(const int64_t *v, const int64_t *shape, int nd, ct_dtype d) {
    return on_dev(ct_to_dtype(ct_from_data(v, shape, nd, CT_I64), d));
}
static ct_tensor *vec(ct_dtype d) { return from_i64((int64_t[]){0, 1, 2}, CT_SHAPE(3), d); }
static ct_tensor *pos(ct_dtype d) { return from_i64((int64_t[]){1, 2, 3}, CT_SHAPE(3), d); }
static ct_tensor *pos2(ct_dtype d) { return from_i64((int64_t[]){1, 2}, CT_SHAPE(2), d); }
static ct_tensor *mat(ct_dtype d) { return from_i64((int64_t[]){0, 1, 2, 2, 1, 0}, CT_SHAPE(2, 3), d); }
static ct_tensor *sq(ct_dtype d) { return from_i64((int64_t[]){1, 0, 2, 1}, CT_SHAPE(2, 2), d); }
static ct_tensor *idx(void) { return on_dev(ct_from_data((int64_t[]){1, 0}, CT_SHAPE(2), CT_I64)); }
static ct_tensor *mask(void) { return on_dev(ct_from_data((bool[]){true, false, true}, CT_SHAPE(3), CT_BOOL)); }

typedef ct_tensor *(*case_fn)(ct_dtype d);
#define CASE(name, expr)                        \
    static ct_tensor *f_##name(ct_dtype d) {    \
        return (expr);                          \
    }
#define UN(name) CASE(name, ct_##name(vec(d)))
#define BIN(name) CASE(name, ct_##name(vec(d), pos(d)))

/* unary */
UN(abs) UN(neg) UN(sign) UN(sgn) UN(exp) UN(exp2) UN(expm1) UN(log) UN(log2) UN(log10) UN(log1p) UN(sqrt)
UN(rsqrt) UN(sin) UN(cos) UN(tan) UN(asin) UN(acos) UN(atan) UN(sinh) UN(cosh) UN(tanh) UN(asinh) UN(acosh)
UN(atanh) UN(sigmoid) UN(erf) UN(erfc) UN(erfinv) UN(lgamma) UN(digamma) UN(floor) UN(ceil) UN(round) UN(trunc) UN(frac)
UN(reciprocal) UN(relu) UN(logical_not) UN(bitwise_not) UN(isnan) UN(isinf) UN(isfinite) UN(square)
UN(relu6) UN(selu) UN(silu) UN(mish) UN(hardsigmoid) UN(hardswish)
CASE(nan_to_num, ct_nan_to_num(vec(d), NULL, NULL, NULL))
CASE(logit, ct_logit(vec(d), -1.0))
CASE(polygamma, ct_polygamma(vec(d), 1))
CASE(round_decimals, ct_round_decimals(vec(d), 1))
CASE(leaky_relu, ct_leaky_relu(vec(d), 0.01))
CASE(elu, ct_elu(vec(d), 1.0, 1.0, 1.0))
CASE(celu, ct_celu(vec(d), 1.0))
CASE(gelu, ct_gelu(vec(d), CT_GELU_APPROXIMATE_NONE))
CASE(softplus, ct_softplus(vec(d), 1.0, 20.0))
CASE(hardtanh, ct_hardtanh(vec(d), -1.0, 1.0))
/* binary */
BIN(add) BIN(sub) BIN(mul) BIN(div) BIN(floor_divide) BIN(remainder) BIN(fmod) BIN(pow) BIN(atan2) BIN(hypot)
BIN(copysign) BIN(maximum) BIN(minimum) BIN(fmax) BIN(fmin) BIN(eq) BIN(ne) BIN(lt) BIN(le) BIN(gt) BIN(ge)
BIN(logical_and) BIN(logical_or) BIN(logical_xor) BIN(bitwise_and) BIN(bitwise_or) BIN(bitwise_xor)
BIN(bitwise_left_shift) BIN(bitwise_right_shift) BIN(clamp_min) BIN(clamp_max)
CASE(div_trunc, ct_div_mode(vec(d), pos(d), CT_ROUNDING_MODE_TRUNC))
CASE(div_floor, ct_div_mode(vec(d), pos(d), CT_ROUNDING_MODE_FLOOR))
CASE(add_scalar, ct_add_scalar(vec(d), ct_scalar_int(2)))
CASE(mul_scalar_float, ct_mul_scalar(vec(d), ct_scalar_float(0.5)))
/* ternary */
CASE(where, ct_where(mask(), vec(d), pos(d)))
CASE(clamp, ct_clamp_tensor(vec(d), vec(d), pos(d)))
static ct_tensor *f_clamp_scalar(ct_dtype d) {
    ct_scalar lo = ct_scalar_int(0), hi = ct_scalar_int(1);
    return ct_clamp(vec(d), &lo, &hi);
}
CASE(lerp, ct_lerp(vec(d), pos(d), pos(d)))
CASE(addcmul, ct_addcmul(vec(d), vec(d), pos(d), ct_scalar_int(1)))
CASE(addcdiv, ct_addcdiv(vec(d), vec(d), pos(d), ct_scalar_int(1)))
/* reductions and scans */
#define RED_DT(name) CASE(name, ct_##name(mat(d), NULL, 0, false, CT_DTYPE_UNDEFINED))
#define RED(name) CASE(name, ct_##name(mat(d), NULL, 0, false))
RED_DT(sum) RED_DT(nansum) RED_DT(mean) RED_DT(nanmean) RED_DT(prod) RED(amax) RED(amin) RED(all) RED(any)
CASE(argmax, ct_argmax(mat(d)))
CASE(argmin, ct_argmin(mat(d)))
CASE(var, ct_var(mat(d), NULL, 0, 1.0, false))
CASE(std, ct_std(mat(d), NULL, 0, 1.0, false))
CASE(logsumexp, ct_logsumexp(mat(d), (int64_t[]){1}, 1, false))
CASE(count_nonzero, ct_count_nonzero(mat(d), NULL, 0))
CASE(norm, ct_norm(mat(d), 2.0, NULL, 0, false, CT_DTYPE_UNDEFINED))
CASE(linalg_vector_norm, ct_linalg_vector_norm(mat(d), 2.0, NULL, 0, false, CT_DTYPE_UNDEFINED))
CASE(max, ct_max(mat(d)))
CASE(min, ct_min(mat(d)))
static ct_tensor *f_max_dim(ct_dtype d) {
    ct_tensor *v = NULL, *i = NULL;
    return ct_max_dim(mat(d), 1, false, &v, &i) == CT_OK ? v : NULL;
}
static ct_tensor *f_var_mean(ct_dtype d) {
    ct_tensor *v = NULL, *m = NULL;
    return ct_var_mean(mat(d), NULL, 0, 1.0, false, &v, &m) == CT_OK ? v : NULL;
}
CASE(cumsum, ct_cumsum(mat(d), 1, CT_DTYPE_UNDEFINED))
CASE(cumprod, ct_cumprod(mat(d), 1, CT_DTYPE_UNDEFINED))
CASE(softmax, ct_softmax(mat(d), 1, CT_DTYPE_UNDEFINED))
CASE(log_softmax, ct_log_softmax(mat(d), 1, CT_DTYPE_UNDEFINED))
static ct_tensor *f_cummax(ct_dtype d) {
    ct_tensor *v = NULL, *i = NULL;
    return ct_cummax(mat(d), 1, &v, &i) == CT_OK ? v : NULL;
}
static ct_tensor *f_cummin(ct_dtype d) {
    ct_tensor *v = NULL, *i = NULL;
    return ct_cummin(mat(d), 1, &v, &i) == CT_OK ? v : NULL;
}
/* sorting */
CASE(sort, ct_sort(mat(d), 1, false, NULL))
CASE(argsort, ct_argsort(mat(d), 1, false))
CASE(topk, ct_topk(mat(d), 2, 1, true, NULL))
CASE(kthvalue, ct_kthvalue(mat(d), 2, 1, false, NULL))
CASE(unique, ct_unique(mat(d), true, NULL, NULL))
/* linear algebra */
CASE(mm, ct_mm(sq(d), sq(d)))
CASE(bmm, ct_bmm(ct_unsqueeze(sq(d), 0), ct_unsqueeze(sq(d), 0)))
CASE(matmul, ct_matmul(sq(d), ct_slice(vec(d), 0, 0, 2, 1)))
CASE(dot, ct_dot(vec(d), pos(d)))
CASE(outer, ct_outer(vec(d), pos(d)))
CASE(addmm, ct_addmm(sq(d), sq(d), sq(d), ct_scalar_int(1), ct_scalar_int(1)))
/* shape */
CASE(cat, ct_cat((const ct_tensor *[]){vec(d), pos(d)}, 2, 0))
CASE(stack, ct_stack((const ct_tensor *[]){vec(d), pos(d)}, 2, 0))
CASE(flip, ct_flip(mat(d), (int64_t[]){1}, 1))
CASE(roll, ct_roll(mat(d), (int64_t[]){1}, (int64_t[]){1}, 1))
CASE(repeat, ct_repeat(vec(d), (int64_t[]){2}, 1))
CASE(tril, ct_tril(mat(d), 0))
CASE(triu, ct_triu(mat(d), 0))
CASE(pad_constant, ct_pad(mat(d), (int64_t[]){1, 1}, 2, "constant", 0))
CASE(pad_reflect, ct_pad(mat(d), (int64_t[]){1, 1}, 2, "reflect", 0))
CASE(pad_replicate, ct_pad(mat(d), (int64_t[]){1, 1}, 2, "replicate", 0))
CASE(pad_circular, ct_pad(mat(d), (int64_t[]){1, 1}, 2, "circular", 0))
/* indexing */
CASE(index_select, ct_index_select(mat(d), 1, idx()))
CASE(gather, ct_gather(mat(d), 1, on_dev(ct_from_data((int64_t[]){1, 0, 1, 0}, CT_SHAPE(2, 2), CT_I64))))
CASE(scatter, ct_scatter(vec(d), 0, idx(), pos2(d)))
CASE(scatter_add, ct_scatter_add(vec(d), 0, idx(), pos2(d)))
CASE(scatter_reduce_amax, ct_scatter_reduce(vec(d), 0, idx(), pos2(d), "amax", true))
CASE(index_add, ct_index_add(vec(d), 0, idx(), pos2(d), ct_scalar_int(1)))
CASE(index_copy, ct_index_copy(vec(d), 0, idx(), pos2(d)))
CASE(index_put_accumulate, ct_index_put(vec(d), (const ct_tensor *[]){idx()}, 1, pos2(d), true))
CASE(masked_fill, ct_masked_fill(vec(d), mask(), ct_scalar_int(1)))
CASE(masked_select, ct_masked_select(vec(d), mask()))
CASE(masked_scatter, ct_masked_scatter(vec(d), mask(), pos(d)))
CASE(take, ct_take(vec(d), idx()))
CASE(nonzero, ct_nonzero(vec(d)))
CASE(embedding, ct_embedding(idx(), mat(d), CT_NO_PADDING_IDX))

/* neural-network functions */
static ct_tensor *img(ct_dtype d) { return from_i64((int64_t[]){0, 1, 2, 2, 1, 0, 1, 1, 1}, CT_SHAPE(1, 1, 3, 3), d); }
static ct_tensor *ker(ct_dtype d) { return from_i64((int64_t[]){1, 0, 2, 1}, CT_SHAPE(1, 1, 2, 2), d); }
static ct_tensor *one(ct_dtype d) { return from_i64((int64_t[]){1}, CT_SHAPE(1), d); }
static ct_tensor *quarter(ct_tensor *t) { return ct_div_scalar(t, ct_scalar_int(4)); }
static const int64_t one2[2] = {1, 1}, zero2[2] = {0, 0}, two2[2] = {2, 2};
CASE(conv1d, ct_conv1d(ct_slice(ct_view(img(d), CT_SHAPE(3, 3)), 0, 0, 2, 1), ct_view(ker(d), CT_SHAPE(1, 2, 2)),
                       NULL, 1, 0, 1, 1))
CASE(conv2d, ct_conv2d(img(d), ker(d), one(d), one2, zero2, one2, 1))
CASE(conv_transpose2d, ct_conv_transpose2d(img(d), ker(d), NULL, one2, zero2, zero2, 1, one2))
CASE(max_pool2d, ct_max_pool2d(img(d), two2, NULL, zero2, one2, false, NULL))
CASE(avg_pool2d, ct_avg_pool2d(img(d), two2, two2, zero2, false, true, 0))
CASE(adaptive_avg_pool2d, ct_adaptive_avg_pool2d(img(d), one2))
CASE(batch_norm, ct_batch_norm(img(d), one(d), one(d), NULL, NULL, false, 0.1, 1e-5))
CASE(layer_norm, ct_layer_norm(mat(d), (int64_t[]){3}, 1, NULL, NULL, 1e-5))
CASE(group_norm, ct_group_norm(img(d), 1, NULL, NULL, 1e-5))
CASE(rms_norm, ct_rms_norm(mat(d), (int64_t[]){3}, 1, NULL, -1.0))
CASE(dropout_eval, ct_dropout(mat(d), 0.5, false))
CASE(one_hot, ct_one_hot(vec(d), 4))
CASE(sdpa, ct_scaled_dot_product_attention(ct_unsqueeze(mat(d), 0), ct_unsqueeze(mat(d), 0), ct_unsqueeze(mat(d), 0),
                                           NULL, 0.0, false, NULL))
CASE(cross_entropy, ct_cross_entropy(mat(d), idx(), NULL, CT_REDUCTION_MEAN, CT_DEFAULT_IGNORE_INDEX, 0.0))
CASE(nll_loss, ct_nll_loss(mat(d), idx(), NULL, CT_REDUCTION_MEAN, CT_DEFAULT_IGNORE_INDEX))
CASE(mse_loss, ct_mse_loss(vec(d), pos(d), CT_REDUCTION_MEAN))
CASE(l1_loss, ct_l1_loss(vec(d), pos(d), CT_REDUCTION_MEAN))
CASE(smooth_l1_loss, ct_smooth_l1_loss(vec(d), pos(d), CT_REDUCTION_MEAN, 1.0))
CASE(huber_loss, ct_huber_loss(vec(d), pos(d), CT_REDUCTION_MEAN, 1.0))
CASE(binary_cross_entropy, ct_binary_cross_entropy(quarter(vec(d)), quarter(pos(d)), NULL, CT_REDUCTION_MEAN))
CASE(binary_cross_entropy_with_logits,
     ct_binary_cross_entropy_with_logits(vec(d), pos(d), NULL, NULL, CT_REDUCTION_MEAN))
CASE(kl_div, ct_kl_div(vec(d), pos(d), CT_REDUCTION_SUM, false))
CASE(linear, ct_linear(mat(d), ct_contiguous(ct_expand(ct_slice(sq(d), 1, 0, 1, 1), CT_SHAPE(2, 3))), NULL))

#define E(name) {#name, f_##name}
static const struct {
    const char *name;
    case_fn fn;
} cases[] = {
    E(abs), E(neg), E(sign), E(sgn), E(exp), E(exp2), E(expm1), E(log), E(log2), E(log10), E(log1p), E(sqrt),
    E(rsqrt), E(sin), E(cos), E(tan), E(asin), E(acos), E(atan), E(sinh), E(cosh), E(tanh), E(asinh), E(acosh),
    E(atanh), E(sigmoid), E(erf), E(erfc), E(erfinv), E(lgamma), E(digamma), E(polygamma), E(floor), E(ceil), E(round), E(trunc), E(frac),
    E(reciprocal), E(relu), E(logical_not), E(bitwise_not), E(isnan), E(isinf), E(isfinite), E(square),
    E(relu6), E(selu), E(silu), E(mish), E(hardsigmoid), E(hardswish), E(nan_to_num), E(logit),
    E(round_decimals), E(leaky_relu), E(elu), E(celu), E(gelu), E(softplus), E(hardtanh),
    E(add), E(sub), E(mul), E(div), E(floor_divide), E(remainder), E(fmod), E(pow), E(atan2), E(hypot),
    E(copysign), E(maximum), E(minimum), E(fmax), E(fmin), E(eq), E(ne), E(lt), E(le), E(gt), E(ge),
    E(logical_and), E(logical_or), E(logical_xor), E(bitwise_and), E(bitwise_or), E(bitwise_xor),
    E(bitwise_left_shift), E(bitwise_right_shift), E(clamp_min), E(clamp_max), E(div_trunc), E(div_floor),
    E(add_scalar), E(mul_scalar_float), E(where), E(clamp), E(clamp_scalar), E(lerp), E(addcmul), E(addcdiv),
    E(sum), E(nansum), E(mean), E(nanmean), E(prod), E(amax), E(amin), E(all), E(any), E(argmax), E(argmin),
    E(var), E(std), E(logsumexp), E(count_nonzero), E(norm), E(linalg_vector_norm), E(max), E(min),
    E(max_dim), E(var_mean), E(cumsum), E(cumprod), E(cummax), E(cummin), E(softmax), E(log_softmax),
    E(sort), E(argsort), E(topk), E(kthvalue), E(unique), E(mm), E(bmm), E(matmul), E(dot), E(outer),
    E(addmm), E(cat), E(stack), E(flip), E(roll), E(repeat), E(tril), E(triu), E(pad_constant),
    E(pad_reflect), E(pad_replicate), E(pad_circular), E(index_select), E(gather), E(scatter),
    E(scatter_add), E(scatter_reduce_amax), E(index_add), E(index_copy), E(index_put_accumulate),
    E(masked_fill), E(masked_select), E(masked_scatter), E(take), E(nonzero), E(embedding),
    E(conv1d), E(conv2d), E(conv_transpose2d), E(max_pool2d), E(avg_pool2d), E(adaptive_avg_pool2d),
    E(batch_norm), E(layer_norm), E(group_norm), E(rms_norm), E(dropout_eval), E(one_hot), E(sdpa),
    E(cross_entropy), E(nll_loss), E(mse_loss), E(l1_loss), E(smooth_l1_loss), E(huber_loss),
    E(binary_cross_entropy), E(binary_cross_entropy_with_logits), E(kl_div), E(linear),
};

static case_fn find_case(const char *name) {
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        if (!strcmp(cases[i].name, name))
            return cases[i].fn;
    return NULL;
}

/* ops whose output shape depends on the values: META cannot know it and refuses */
static bool data_dependent(const char *name) {
    return !strcmp(name, "nonzero") || !strcmp(name, "masked_select") || !strcmp(name, "unique");
}

/* The same call on META inputs gives the CPU result's shape and dtype (docs/dispatcher.md,
 * "META"), or, for the data-dependent ops, an error. */
static bool meta_agrees(const char *name, const char *dname, case_fn fn, ct_dtype d, const ct_tensor *cpu) {
    g_dev = (ct_device){CT_DEVICE_META, 0};
    ct_tensor *m = fn(d);
    g_dev = (ct_device){CT_DEVICE_CPU, 0};
    const char *why = NULL;
    if (data_dependent(name))
        why = m ? "META gave a result for a data-dependent shape" : NULL;
    else if (!m)
        why = ct_last_error();
    else if (ct_tensor_device(m).type != CT_DEVICE_META)
        why = "the result is not on META";
    else if (ct_tensor_dtype(m) != ct_tensor_dtype(cpu) || ct_tensor_dim(m) != ct_tensor_dim(cpu) ||
             memcmp(ct_tensor_shape(m), ct_tensor_shape(cpu), sizeof(int64_t) * (size_t)ct_tensor_dim(cpu)) != 0)
        why = "shape or dtype differs from the CPU result";
    if (why)
        printf("MISMATCH %s(%s) on META: %s\n", name, dname, why);
    ct_clear_error();
    return why == NULL;
}

/* Every case of file on device dev (inputs made there); on the CPU each accepted call
 * also runs on META. */
static void run_cases(const char *file, ct_device dev) {
    FILE *f = fopen(file, "r");
    assert_non_null(f);
    char line[256];
    int checked = 0, accepted = 0, refused = 0, beyond = 0, metas = 0, mismatches = 0;
    bool seen[sizeof cases / sizeof cases[0]] = {false};
    const char *on = dev.type == CT_DEVICE_CPU ? "" : " on CUDA";
    while (fgets(line, sizeof line, f)) {
        if (line[0] == '#' || line[0] == '\n')
            continue;
        line[strcspn(line, "\r\n")] = '\0';
        char *name = strtok(line, ";"), *dname = strtok(NULL, ";"), *want = strtok(NULL, ";");
        assert_non_null(want);
        case_fn fn = find_case(name);
        if (!fn)
            fail_msg("%s names %s, which this test does not know", file, name);
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
            seen[i] = seen[i] || cases[i].fn == fn;
        ct_dtype d = ct_dtype_from_name(dname);
        assert_true(d != CT_DTYPE_UNDEFINED);
        ct_scope_begin();
        g_dev = dev;
        ct_tensor *r = fn(d);
        g_dev = (ct_device){CT_DEVICE_CPU, 0};
        const char *err = r ? NULL : ct_last_error();
        if (r && !ct_device_equal(ct_tensor_device(r), dev)) {
            printf("MISMATCH %s(%s)%s: the result is on another device\n", name, dname, on);
            mismatches++;
        }
        if (want[0] != '!') {
            accepted++;
            if (!r) {
                printf("MISMATCH %s(%s)%s: PyTorch gives %s, ctorch refuses: %s\n", name, dname, on, want, err);
                mismatches++;
            } else if (strcmp(ct_dtype_name(ct_tensor_dtype(r)), want) != 0) {
                printf("MISMATCH %s(%s)%s: PyTorch gives %s, ctorch %s\n", name, dname, on, want,
                       ct_dtype_name(ct_tensor_dtype(r)));
                mismatches++;
            }
        } else if (!strcmp(want, "!refused")) {
            refused++;
            if (r) {
                printf("MISMATCH %s(%s)%s: PyTorch refuses it, ctorch gives %s\n", name, dname, on,
                       ct_dtype_name(ct_tensor_dtype(r)));
                mismatches++;
            }
        } else {
            assert_string_equal(want, "!unimplemented");
            beyond += r != NULL;
        }
        if (r && dev.type == CT_DEVICE_CPU) {
            metas++;
            mismatches += !meta_agrees(name, dname, fn, d, r);
        }
        ct_clear_error();
        ct_scope_end();
        checked++;
    }
    fclose(f);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        if (!seen[i])
            fail_msg("%s has no line in %s", cases[i].name, file);
    printf("%s: %d cases: %d accepted and %d refused by PyTorch; ctorch also runs %d of PyTorch's missing "
           "kernels; %d calls repeated on META\n",
           file, checked, accepted, refused, beyond, metas);
    assert_true(checked > 1500 && (dev.type != CT_DEVICE_CPU || metas > 1500));
    assert_int_equal(mismatches, 0);
}

static void test_cpu(void **state) {
    (void)state;
    run_cases(CT_TEST_DATA_DIR "/dtype_support.txt", (ct_device){CT_DEVICE_CPU, 0});
}

/* The same calls on the GPU against PyTorch's CUDA ops: no op or dtype falls off it. */
static void test_cuda(void **state) {
    (void)state;
    if (!ct_cuda_is_available())
        skip();
    run_cases(CT_TEST_DATA_DIR "/dtype_support_cuda.txt", (ct_device){CT_DEVICE_CUDA, 0});
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_cpu), cmocka_unit_test(test_cuda)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
