/* gradcheck and gradgradcheck for the ops outside the elementwise OpInfo table, and a
 * check that every differentiable op of the table has a derivative. */
#include <math.h>
#include <string.h>

#include "autograd/node.h"
#include "testutil.h"

static uint64_t rng = 0x2545F4914F6CDD1DULL;
static double unit(void) { return ct_test_unit(&rng); }

/* Where the samples live: the CPU, then (with a GPU) CUDA device 0, so every
 * derivative is also checked over the CUDA kernels. */
static ct_device on;

/* t moved to the samples' device (layout kept: a strided sample stays strided). */
static ct_tensor *placed(ct_tensor *t) {
    if (on.type == CT_DEVICE_CPU || !t)
        return t;
    const int64_t *st = ct_tensor_strides(t);
    int nd = ct_tensor_dim(t);
    if (nd >= 2 && st[nd - 1] != 1 && ct_tensor_numel(t) > 1) /* transposed storage */
        return ct_transpose(ct_to_device(ct_contiguous(ct_transpose(t, -1, -2)), on), -1, -2);
    return ct_to_device(t, on);
}

/* Sets the samples' device from a test's prestate (NULL: the CPU); false when that
 * device is a GPU this machine lacks. */
static bool use_device(void **state) {
    on = state && *state ? *(const ct_device *)*state : CT_CPU;
    if (on.type == CT_DEVICE_CPU || ct_cuda_is_available())
        return true;
    on = CT_CPU;
    return false;
}

/* A float64 leaf with values in [-1, 1]; transposed storage when strided. */
static ct_tensor *rand_leaf(const int64_t *shape, int ndim, bool strided) {
    ct_tensor *t;
    if (strided && ndim >= 2) {
        int64_t rs[CT_MAX_DIMS];
        memcpy(rs, shape, (size_t)ndim * sizeof *rs);
        rs[ndim - 1] = shape[ndim - 2];
        rs[ndim - 2] = shape[ndim - 1];
        t = ct_transpose(ct_empty(rs, ndim, CT_F64, CT_CPU), -1, -2);
    } else {
        t = ct_empty(shape, ndim, CT_F64, CT_CPU);
    }
    int64_t n = ct_tensor_numel(t);
    for (int64_t k = 0; k < n; k++) {
        int64_t idx[CT_MAX_DIMS], r = k;
        for (int d = ndim - 1; d >= 0; d--) {
            idx[d] = r % shape[d];
            r /= shape[d];
        }
        ct_tensor_set(t, idx, 2 * unit() - 1);
    }
    t = placed(t);
    ct_tensor_set_requires_grad(t, true);
    return t;
}

static ct_tensor *f_mm(ct_tensor *const *in, int n, void *ud) { (void)n, (void)ud; return ct_mm(in[0], in[1]); }
static ct_tensor *f_bmm(ct_tensor *const *in, int n, void *ud) { (void)n, (void)ud; return ct_bmm(in[0], in[1]); }
static ct_tensor *f_dot(ct_tensor *const *in, int n, void *ud) { (void)n, (void)ud; return ct_dot(in[0], in[1]); }
static ct_tensor *f_addmm(ct_tensor *const *in, int n, void *ud) {
    (void)n, (void)ud;
    return ct_addmm(in[0], in[1], in[2], ct_scalar_float(0.5), ct_scalar_float(-2));
}
static ct_tensor *f_addmm1(ct_tensor *const *in, int n, void *ud) {
    (void)n, (void)ud;
    return ct_addmm(in[0], in[1], in[2], ct_scalar_int(1), ct_scalar_int(1));
}
static ct_tensor *f_baddbmm(ct_tensor *const *in, int n, void *ud) {
    (void)n, (void)ud;
    return ct_baddbmm(in[0], in[1], in[2], ct_scalar_float(1.5), ct_scalar_float(0.25));
}

typedef struct {
    const char *name;
    ct_grad_fn_t fn;
    int n;
    int nd[5];
    int64_t shape[5][3];
} sample;

static ct_tensor *f_addmm_relu(ct_tensor *const *in, int n, void *ud) {
    (void)n, (void)ud;
    return ct_addmm_activation(in[0], in[1], in[2], ct_scalar_float(0.5), ct_scalar_float(-2), false);
}
static ct_tensor *f_addmm_gelu(ct_tensor *const *in, int n, void *ud) {
    (void)n, (void)ud;
    return ct_addmm_activation(in[0], in[1], in[2], ct_scalar_int(1), ct_scalar_int(1), true);
}

/* Note [GELU MLP]: with both biases (tanh form), and without them (erf form). */
static ct_tensor *f_gelu_mlp(ct_tensor *const *in, int n, void *ud) {
    (void)ud;
    return n == 5 ? ct_gelu_mlp(in[0], in[1], in[2], in[3], in[4], CT_GELU_APPROXIMATE_TANH)
                  : ct_gelu_mlp(in[0], in[1], NULL, in[2], NULL, CT_GELU_APPROXIMATE_NONE);
}

static const sample samples[] = {
    {"gelu_mlp", f_gelu_mlp, 5, {3, 2, 1, 2, 1}, {{2, 2, 3}, {4, 3}, {4}, {2, 4}, {2}}},
    {"gelu_mlp_no_bias", f_gelu_mlp, 3, {2, 2, 2}, {{3, 3}, {4, 3}, {2, 4}}},
    {"mm", f_mm, 2, {2, 2}, {{3, 4}, {4, 2}}},
    {"mm_1xk", f_mm, 2, {2, 2}, {{1, 3}, {3, 1}}},
    {"bmm", f_bmm, 2, {3, 3}, {{2, 3, 4}, {2, 4, 2}}},
    {"dot", f_dot, 2, {1, 1}, {{5}, {5}}},
    {"addmm", f_addmm, 3, {2, 2, 2}, {{3, 2}, {3, 4}, {4, 2}}},
    {"addmm_bias", f_addmm1, 3, {1, 2, 2}, {{2}, {3, 4}, {4, 2}}},
    {"addmm_scalar", f_addmm, 3, {0, 2, 2}, {{0}, {2, 3}, {3, 2}}},
    {"baddbmm", f_baddbmm, 3, {3, 3, 3}, {{2, 3, 2}, {2, 3, 4}, {2, 4, 2}}},
    {"baddbmm_bcast", f_baddbmm, 3, {2, 3, 3}, {{1, 2}, {2, 3, 4}, {2, 4, 2}}},
    {"addmm_activation_relu", f_addmm_relu, 3, {2, 2, 2}, {{3, 2}, {3, 4}, {4, 2}}},
    {"addmm_activation_gelu_bias", f_addmm_gelu, 3, {1, 2, 2}, {{2}, {3, 4}, {4, 2}}},
};

static void test_matrix_gradcheck(void **state) {
    if (!use_device(state))
        skip();
    for (size_t s = 0; s < sizeof samples / sizeof samples[0]; s++)
        for (int strided = 0; strided < 2; strided++) {
            ct_scope_begin();
            ct_tensor *in[5];
            for (int i = 0; i < samples[s].n; i++)
                in[i] = rand_leaf(samples[s].shape[i], samples[s].nd[i], strided);
            if (ct_gradcheck(samples[s].fn, NULL, in, samples[s].n, 1e-6, 1e-6, 1e-4) != CT_OK)
                fail_msg("%s on %s: %s", samples[s].name, on.type == CT_DEVICE_CPU ? "cpu" : "cuda", ct_last_error());
            if (ct_gradgradcheck(samples[s].fn, NULL, in, samples[s].n, 1e-6, 1e-6, 1e-4) != CT_OK)
                fail_msg("%s (second order) on %s: %s", samples[s].name, on.type == CT_DEVICE_CPU ? "cpu" : "cuda", ct_last_error());
            ct_scope_end();
        }
}

/* ------------------------------------------------------------------ shape, indexing, nn */

static ct_tensor *idx_tensor(const int64_t *v, const int64_t *shape, int ndim) {
    return placed(ct_from_data(v, shape, ndim, CT_I64));
}

static ct_tensor *f_cat(ct_tensor *const *in, int n, void *ud) {
    (void)ud;
    const ct_tensor *l[3] = {in[0], ct_zeros(CT_SHAPE(0), CT_F64, on), in[1]};
    (void)n;
    return ct_cat(l, 3, 1);
}
static ct_tensor *f_stack(ct_tensor *const *in, int n, void *ud) {
    (void)ud;
    return ct_stack((const ct_tensor *const *)in, n, -1);
}
static ct_tensor *f_flip(ct_tensor *const *in, int n, void *ud) {
    (void)n, (void)ud;
    return ct_flip(in[0], CT_INDEX(0, 1), 2);
}
static ct_tensor *f_tril(ct_tensor *const *in, int n, void *ud) { (void)n, (void)ud; return ct_tril(in[0], -1); }
static ct_tensor *f_triu(ct_tensor *const *in, int n, void *ud) { (void)n, (void)ud; return ct_triu(in[0], 1); }
static ct_tensor *f_index_select(ct_tensor *const *in, int n, void *ud) {
    (void)n, (void)ud;
    return ct_index_select(in[0], 1, idx_tensor((int64_t[]){2, 0, 2, 1}, CT_SHAPE(4)));
}
static ct_tensor *f_gather(ct_tensor *const *in, int n, void *ud) {
    (void)n, (void)ud;
    return ct_gather(in[0], 1, idx_tensor((int64_t[]){0, 0, 3, 1, 2, 2}, CT_SHAPE(3, 2)));
}
static ct_tensor *f_scatter_add(ct_tensor *const *in, int n, void *ud) {
    (void)n, (void)ud;
    return ct_scatter_add(in[0], 1, idx_tensor((int64_t[]){0, 0, 3, 1, 2, 2}, CT_SHAPE(3, 2)), in[1]);
}
static ct_tensor *f_index_add(ct_tensor *const *in, int n, void *ud) {
    (void)n, (void)ud;
    return ct_index_add(in[0], 0, idx_tensor((int64_t[]){2, 0, 2}, CT_SHAPE(3)), in[1], ct_scalar_float(-1.5));
}
static ct_tensor *f_masked_fill(ct_tensor *const *in, int n, void *ud) {
    (void)n, (void)ud;
    ct_tensor *m = placed(ct_from_data((bool[]){true, false, false, true}, CT_SHAPE(4), CT_BOOL));
    return ct_masked_fill(in[0], m, ct_scalar_float(3));
}
static ct_tensor *f_sort(ct_tensor *const *in, int n, void *ud) {
    (void)n, (void)ud;
    return ct_sort(in[0], 1, true, NULL);
}
static ct_tensor *f_topk(ct_tensor *const *in, int n, void *ud) {
    (void)n, (void)ud;
    return ct_topk(in[0], 2, 0, false, NULL);
}
static ct_tensor *f_max_pool(ct_tensor *const *in, int n, void *ud) {
    (void)n, (void)ud;
    return ct_max_pool2d(in[0], CT_INDEX(2, 2), CT_INDEX(1, 2), CT_INDEX(0, 0), CT_INDEX(1, 1), false, NULL);
}
static ct_tensor *f_conv(ct_tensor *const *in, int n, void *ud) {
    (void)n, (void)ud;
    return ct_conv2d(in[0], in[1], in[2], CT_INDEX(1, 2), CT_INDEX(1, 0), CT_INDEX(1, 1), 1);
}
static ct_tensor *f_matmul(ct_tensor *const *in, int n, void *ud) {
    (void)n, (void)ud;
    return ct_matmul(in[0], in[1]);
}
static ct_tensor *f_outer(ct_tensor *const *in, int n, void *ud) {
    (void)n, (void)ud;
    return ct_outer(in[0], in[1]);
}
static ct_tensor *f_linear(ct_tensor *const *in, int n, void *ud) {
    (void)n, (void)ud;
    return ct_linear(in[0], in[1], in[2]);
}

static ct_tensor *f_scatter(ct_tensor *const *in, int n, void *ud) {
    (void)n, (void)ud;
    return ct_scatter(in[0], 1, idx_tensor((int64_t[]){0, 1, 2, 0, 1, 3}, CT_SHAPE(3, 2)), in[1]);
}
static ct_tensor *f_scatter_value(ct_tensor *const *in, int n, void *ud) {
    (void)n, (void)ud;
    return ct_mul(ct_scatter_value(in[0], 1, idx_tensor((int64_t[]){0, 1, 2, 0, 1, 3}, CT_SHAPE(3, 2)),
                                   ct_scalar_float(2)), in[0]);
}
static ct_tensor *f_scatter_sum(ct_tensor *const *in, int n, void *ud) {
    (void)n;
    return ct_scatter_reduce(in[0], 1, idx_tensor((int64_t[]){0, 0, 2, 2, 1, 3}, CT_SHAPE(3, 2)), in[1], "sum",
                             ud != NULL);
}
static ct_tensor *f_index_copy(ct_tensor *const *in, int n, void *ud) {
    (void)n, (void)ud;
    return ct_index_copy(in[0], 0, idx_tensor((int64_t[]){2, 0}, CT_SHAPE(2)), in[1]);
}
static ct_tensor *f_index_fill(ct_tensor *const *in, int n, void *ud) {
    (void)n, (void)ud;
    return ct_index_fill(in[0], 1, idx_tensor((int64_t[]){1, 3}, CT_SHAPE(2)), ct_scalar_float(5));
}
static ct_tensor *f_take(ct_tensor *const *in, int n, void *ud) {
    (void)n, (void)ud;
    return ct_take(in[0], idx_tensor((int64_t[]){0, -1, 4, 4}, CT_SHAPE(2, 2)));
}
static ct_tensor *f_masked_select(ct_tensor *const *in, int n, void *ud) {
    (void)n, (void)ud;
    return ct_masked_select(in[0], placed(ct_from_data((bool[]){true, false, true}, CT_SHAPE(3), CT_BOOL)));
}
static ct_tensor *f_masked_scatter(ct_tensor *const *in, int n, void *ud) {
    (void)n, (void)ud;
    ct_tensor *m = placed(ct_from_data((bool[]){true, false, true, false, false, true}, CT_SHAPE(2, 3), CT_BOOL));
    return ct_masked_scatter(in[0], m, in[1]);
}
static ct_tensor *f_kthvalue(ct_tensor *const *in, int n, void *ud) {
    (void)n;
    return ct_kthvalue(in[0], 2, 1, ud != NULL, NULL);
}
static ct_tensor *f_index(ct_tensor *const *in, int n, void *ud) {
    (void)n, (void)ud;
    const ct_tensor *ix[2] = {NULL, idx_tensor((int64_t[]){2, 0, 2}, CT_SHAPE(3))};
    return ct_index(in[0], ix, 2);
}
static ct_tensor *f_index_put(ct_tensor *const *in, int n, void *ud) {
    (void)n;
    const ct_tensor *ix[1] = {idx_tensor((int64_t[]){2, 0}, CT_SHAPE(2))};
    return ct_index_put(in[0], ix, 1, in[1], ud != NULL);
}
static ct_tensor *f_pad(ct_tensor *const *in, int n, void *ud) {
    (void)n;
    if (ud) /* reflect, replicate, circular: pad_backward and its own derivative */
        return ct_pad(in[0], CT_INDEX(2, 1, 1, 0), 4, ud, 0);
    return ct_pad(in[0], CT_INDEX(1, 2, -1, 1), 4, "constant", 0.5);
}

typedef struct {
    const char *name;
    ct_grad_fn_t fn;
    int n;
    int nd[3];
    int64_t shape[3][4];
    bool gradgrad;
    void *ud;
} op_sample;

static const op_sample op_samples[] = {
    {"cat", f_cat, 2, {2, 2}, {{2, 3}, {2, 2}}, true, NULL},
    {"stack", f_stack, 2, {2, 2}, {{2, 3}, {2, 3}}, true, NULL},
    {"flip", f_flip, 1, {2}, {{3, 4}}, true, NULL},
    {"tril", f_tril, 1, {2}, {{3, 4}}, true, NULL},
    {"triu", f_triu, 1, {2}, {{4, 3}}, true, NULL},
    {"index_select", f_index_select, 1, {2}, {{2, 3}}, true, NULL},
    {"gather", f_gather, 1, {2}, {{3, 4}}, true, NULL},
    {"scatter_add", f_scatter_add, 2, {2, 2}, {{3, 4}, {3, 2}}, true, NULL},
    {"index_add", f_index_add, 2, {2, 2}, {{3, 2}, {3, 2}}, true, NULL},
    {"masked_fill", f_masked_fill, 1, {2}, {{3, 4}}, true, NULL},
    {"sort", f_sort, 1, {2}, {{2, 5}}, true, NULL},
    {"topk", f_topk, 1, {2}, {{4, 3}}, true, NULL},
    {"max_pool2d", f_max_pool, 1, {4}, {{1, 2, 4, 5}}, true, NULL},
    {"max_pool2d_unbatched", f_max_pool, 1, {3}, {{2, 3, 4}}, true, NULL},
    {"conv2d", f_conv, 3, {4, 4, 1}, {{2, 2, 4, 5}, {3, 2, 2, 3}, {3}}, true, NULL},
    {"matmul_vv", f_matmul, 2, {1, 1}, {{4}, {4}}, true, NULL},
    {"matmul_mv", f_matmul, 2, {2, 1}, {{3, 4}, {4}}, true, NULL},
    {"matmul_vm", f_matmul, 2, {1, 2}, {{3}, {3, 2}}, true, NULL},
    {"matmul_batched_broadcast", f_matmul, 2, {3, 2}, {{2, 3, 4}, {4, 2}}, true, NULL},
    {"matmul_broadcast_batches", f_matmul, 2, {4, 3}, {{2, 1, 2, 3}, {3, 3, 2}}, true, NULL},
    {"outer", f_outer, 2, {1, 1}, {{3}, {4}}, true, NULL},
    {"linear", f_linear, 3, {2, 2, 1}, {{5, 3}, {2, 3}, {2}}, true, NULL},
    {"scatter", f_scatter, 2, {2, 2}, {{3, 4}, {3, 2}}, true, NULL},
    {"scatter_value", f_scatter_value, 1, {2}, {{3, 4}}, true, NULL},
    {"scatter_reduce_sum", f_scatter_sum, 2, {2, 2}, {{3, 4}, {3, 2}}, true, (void *)1},
    {"scatter_reduce_sum_exclude_self", f_scatter_sum, 2, {2, 2}, {{3, 4}, {3, 2}}, true, NULL},
    {"index_copy", f_index_copy, 2, {2, 2}, {{4, 2}, {2, 2}}, true, NULL},
    {"index_fill", f_index_fill, 1, {2}, {{3, 4}}, true, NULL},
    {"take", f_take, 1, {2}, {{2, 3}}, true, NULL},
    {"masked_select", f_masked_select, 1, {2}, {{2, 3}}, true, NULL},
    {"masked_scatter", f_masked_scatter, 2, {2, 1}, {{2, 3}, {5}}, true, NULL},
    {"kthvalue", f_kthvalue, 1, {2}, {{3, 4}}, true, NULL},
    {"kthvalue_keepdim", f_kthvalue, 1, {2}, {{3, 4}}, true, (void *)1},
    {"index", f_index, 1, {2}, {{3, 4}}, true, NULL},
    {"index_put", f_index_put, 2, {2, 2}, {{3, 4}, {2, 4}}, true, NULL},
    {"index_put_accumulate", f_index_put, 2, {2, 2}, {{3, 4}, {2, 4}}, true, (void *)1},
    {"pad_constant", f_pad, 1, {2}, {{2, 3}}, true, NULL},
    {"pad_reflect", f_pad, 1, {3}, {{2, 3, 4}}, true, "reflect"},
    {"pad_replicate", f_pad, 1, {3}, {{2, 3, 4}}, true, "replicate"},
    {"pad_circular", f_pad, 1, {4}, {{1, 2, 3, 4}}, true, "circular"},
};

static void test_shape_index_nn_gradcheck(void **state) {
    if (!use_device(state))
        skip();
    for (size_t s = 0; s < sizeof op_samples / sizeof op_samples[0]; s++) {
        const op_sample *o = &op_samples[s];
        ct_scope_begin();
        ct_tensor *in[3];
        for (int i = 0; i < o->n; i++)
            in[i] = rand_leaf(o->shape[i], o->nd[i], false);
        if (ct_gradcheck(o->fn, o->ud, in, o->n, 1e-6, 1e-6, 1e-4) != CT_OK)
            fail_msg("%s on %s: %s", o->name, on.type == CT_DEVICE_CPU ? "cpu" : "cuda", ct_last_error());
        if (o->gradgrad && ct_gradgradcheck(o->fn, o->ud, in, o->n, 1e-6, 1e-6, 1e-4) != CT_OK)
            fail_msg("%s (second order) on %s: %s", o->name, on.type == CT_DEVICE_CPU ? "cpu" : "cuda", ct_last_error());
        ct_scope_end();
    }
}

/* ------------------------------------------------------------------ through ct_compile */

/* Samples ct_compile refuses by design (Note [What cannot be captured]): the capture
 * must fail with an error naming the op, never replay. */
typedef struct {
    const char *sample, *op, *why;
} refusal;

static const refusal compile_refused[] = {
    {"masked_select", "masked_select", "its result's shape depends on the mask's values"},
};

static const refusal *refused_op(const char *sample_name) {
    for (size_t k = 0; k < sizeof compile_refused / sizeof compile_refused[0]; k++)
        if (!strcmp(compile_refused[k].sample, sample_name))
            return &compile_refused[k];
    return NULL;
}

/* One sample through ct_compile: eager, captured, replayed, then replayed on new leaves
 * of the same layout; every result equals the eager call's bit for bit, and the last
 * replay's result has autograd history whose gradients equal eager's. A sample in
 * compile_refused must instead fail its capture with an error naming the op. Returns
 * whether it replayed. */
static bool check_compiled(const char *name, ct_grad_fn_t fn, void *ud, ct_tensor *const *in, int n) {
    ct_scope_begin();
    ct_tensor *got = fn(in, n, ud);
    if (!got)
        fail_msg("%s: %s", name, ct_last_error());
    ct_compiled *c = ct_compile(fn, ud, 0);
    CT_ASSERT_OK(c);
    const refusal *refused = refused_op(name);
    for (int k = 0; k < 4; k++) {
        ct_tensor *args[5] = {NULL};
        for (int i = 0; i < n; i++)
            args[i] = in[i];
        if (k == 3)
            for (int i = 0; i < n; i++) {
                args[i] = ct_copy_(ct_empty_strided(ct_tensor_shape(in[i]), ct_tensor_strides(in[i]),
                                                    ct_tensor_dim(in[i]), ct_tensor_dtype(in[i]), on),
                                   in[i]);
                ct_tensor_set_requires_grad(args[i], true);
            }
        ct_tensor *r = ct_compiled_call(c, args, n);
        if (refused && k == 1) {
            if (r)
                fail_msg("%s through ct_compile: captured, but %s cannot be: %s", name, refused->op, refused->why);
            if (!strstr(ct_last_error(), refused->op) || !strstr(ct_last_error(), "cannot be captured"))
                fail_msg("%s through ct_compile: the error does not name %s: %s", name, refused->op, ct_last_error());
            ct_clear_error();
            break;
        }
        if (!r)
            fail_msg("%s through ct_compile (call %d) failed: %s", name, k + 1, ct_last_error());
        if (!ct_test_same_bits(r, got))
            fail_msg("%s through ct_compile (call %d): result differs from the eager call", name, k + 1);
        if (k == 3) { /* the replay's autograd history gives eager's gradients */
            ct_tensor *ge[5] = {NULL}, *gr[5] = {NULL};
            const ct_tensor *oe[1] = {ct_sum(got, NULL, 0, false, CT_DTYPE_UNDEFINED)};
            const ct_tensor *orr[1] = {ct_sum(r, NULL, 0, false, CT_DTYPE_UNDEFINED)};
            if (ct_autograd_grad(oe, 1, (const ct_tensor *const *)in, n, NULL, false, false, true, ge) != CT_OK ||
                ct_autograd_grad(orr, 1, (const ct_tensor *const *)args, n, NULL, false, false, true, gr) != CT_OK)
                fail_msg("%s through ct_compile: backward failed: %s", name, ct_last_error());
            for (int i = 0; i < n; i++)
                if ((ge[i] == NULL) != (gr[i] == NULL) || (ge[i] && !ct_test_same_bits(ge[i], gr[i])))
                    fail_msg("%s through ct_compile: the gradient of input %d differs from eager's", name, i);
        }
    }
    bool replayed = ct_compiled_stat(c, CT_COMPILE_STAT_REPLAYS) == 2;
    if (!refused && !replayed)
        fail_msg("%s through ct_compile: %lld replays, expected 2", name,
                 (long long)ct_compiled_stat(c, CT_COMPILE_STAT_REPLAYS));
    ct_compiled_free(c);
    ct_scope_end();
    return replayed;
}

/* Every matrix and shape/index/nn sample runs through ct_compile (issue 25; the
 * elementwise and reduction OpInfo samples do in tests/opinfo.c). CPU only. */
static void test_samples_compiled(void **state) {
    (void)state;
    on = CT_CPU;
    int replayed = 0, refused = 0;
    for (size_t s = 0; s < sizeof samples / sizeof samples[0]; s++)
        for (int strided = 0; strided < 2; strided++) {
            ct_scope_begin();
            ct_tensor *in[5];
            for (int i = 0; i < samples[s].n; i++)
                in[i] = rand_leaf(samples[s].shape[i], samples[s].nd[i], strided);
            replayed += check_compiled(samples[s].name, samples[s].fn, NULL, in, samples[s].n) ? 1 : 0;
            ct_scope_end();
        }
    for (size_t s = 0; s < sizeof op_samples / sizeof op_samples[0]; s++) {
        const op_sample *o = &op_samples[s];
        ct_scope_begin();
        ct_tensor *in[3];
        for (int i = 0; i < o->n; i++)
            in[i] = rand_leaf(o->shape[i], o->nd[i], false);
        if (check_compiled(o->name, o->fn, o->ud, in, o->n))
            replayed++;
        else
            refused++;
        ct_scope_end();
    }
    assert_int_equal(refused, (int)(sizeof compile_refused / sizeof compile_refused[0]));
    assert_int_equal(replayed, (int)(2 * (sizeof samples / sizeof samples[0]) + sizeof op_samples / sizeof op_samples[0]) - refused);
}

/* conv2d's backward kernel is not differentiable; under create_graph the gradients are
 * written with conv ops (Note [Conv double backward]) and equal the kernel's. */
static void test_conv2d_double_backward(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *x = rand_leaf(CT_SHAPE(1, 1, 3, 3), false);
    ct_tensor *w = rand_leaf(CT_SHAPE(1, 1, 2, 2), false);
    ct_tensor *y = ct_conv2d(x, w, NULL, NULL, NULL, NULL, 1);
    CT_ASSERT_OK(y);
    const ct_tensor *outs[1] = {y};
    const ct_tensor *ins[2] = {x, w};
    const ct_tensor *gos[1] = {ct_ones_like(y, CT_DTYPE_UNDEFINED)};
    ct_tensor *g[2], *h[2];
    assert_int_equal(ct_autograd_grad(outs, 1, ins, 2, gos, true, true, false, g), CT_OK);
    assert_true(ct_tensor_requires_grad(g[0]) && ct_tensor_requires_grad(g[1]));
    assert_int_equal(ct_autograd_grad(outs, 1, ins, 2, gos, false, false, false, h), CT_OK);
    CT_ASSERT_SHAPE(g[0], 1, 1, 3, 3);
    CT_ASSERT_SHAPE(g[1], 1, 1, 2, 2);
    for (int k = 0; k < 2; k++)
        for (int64_t i = 0; i < ct_tensor_numel(h[k]); i++)
            assert_true(fabs(ct_test_at(g[k], i) - ct_test_at(h[k], i)) < 1e-5);
    ct_scope_end();
}

/* ------------------------------------------------------------------ reductions: ties and kinks */

static ct_tensor *grad_of(ct_tensor *y, ct_tensor *x) {
    const ct_tensor *o[1] = {y};
    const ct_tensor *i[1] = {x};
    ct_tensor *g[1] = {NULL};
    if (ct_autograd_grad(o, 1, i, 1, NULL, false, false, false, g) != CT_OK)
        fail_msg("%s", ct_last_error());
    return g[0];
}

static void assert_grad(const ct_tensor *g, const double *want, int64_t n) {
    for (int64_t k = 0; k < n; k++)
        if (fabs(ct_test_at(g, k) - want[k]) > 1e-15)
            fail_msg("element %lld: %.17g, want %.17g", (long long)k, ct_test_at(g, k), want[k]);
}

static void test_reduction_ties_and_zero_norms(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *x = ct_from_data((double[]){1, 3, 3, 0, 3, -2}, CT_SHAPE(6), CT_F64);
    ct_tensor_set_requires_grad(x, true);
    /* amax and max(a) share the gradient evenly among the three 3s. */
    assert_grad(grad_of(ct_amax(x, NULL, 0, false), x), (double[]){0, 1.0 / 3, 1.0 / 3, 0, 1.0 / 3, 0}, 6);
    assert_grad(grad_of(ct_max(x), x), (double[]){0, 1.0 / 3, 1.0 / 3, 0, 1.0 / 3, 0}, 6);
    assert_grad(grad_of(ct_amin(x, NULL, 0, false), x), (double[]){0, 0, 0, 0, 0, 1}, 6);
    /* max with a dim routes everything to the index it returned (the first 3). */
    ct_tensor *v = NULL, *idx = NULL;
    assert_int_equal(ct_max_dim(x, 0, false, &v, &idx), CT_OK);
    assert_grad(grad_of(v, x), (double[]){0, 1, 0, 0, 0, 0}, 6);
    /* Norms at zero: subgradient 0, not NaN. */
    ct_tensor *z = ct_zeros(CT_SHAPE(3), CT_F64, CT_CPU);
    ct_tensor_set_requires_grad(z, true);
    assert_grad(grad_of(ct_linalg_vector_norm(z, 2, NULL, 0, false, CT_DTYPE_UNDEFINED), z), (double[]){0, 0, 0}, 3);
    assert_grad(grad_of(ct_linalg_vector_norm(z, 1, NULL, 0, false, CT_DTYPE_UNDEFINED), z), (double[]){0, 0, 0}, 3);
    assert_grad(grad_of(ct_norm(z, 3, NULL, 0, false, CT_DTYPE_UNDEFINED), z), (double[]){0, 0, 0}, 3);
    /* prod with one zero: the product of the others; with two zeros: all zero. */
    ct_tensor *p = ct_from_data((double[]){2, 0, 5}, CT_SHAPE(3), CT_F64);
    ct_tensor_set_requires_grad(p, true);
    assert_grad(grad_of(ct_prod(p, NULL, 0, false, CT_DTYPE_UNDEFINED), p), (double[]){0, 10, 0}, 3);
    ct_tensor *p2 = ct_from_data((double[]){2, 0, 0}, CT_SHAPE(3), CT_F64);
    ct_tensor_set_requires_grad(p2, true);
    assert_grad(grad_of(ct_prod(p2, NULL, 0, false, CT_DTYPE_UNDEFINED), p2), (double[]){0, 0, 0}, 3);
    /* cumprod over zeros is refused rather than answered wrong. */
    ct_tensor *c = ct_cumprod(p, 0, CT_DTYPE_UNDEFINED);
    const ct_tensor *o[1] = {c};
    const ct_tensor *i[1] = {p};
    const ct_tensor *go[1] = {ct_ones_like(c, CT_DTYPE_UNDEFINED)};
    ct_tensor *g[1];
    CT_ASSERT_ERR(ct_autograd_grad(o, 1, i, 1, go, false, false, false, g) == CT_OK, CT_ERROR_NOT_IMPLEMENTED,
                  "cumprod");
    /* argmax is not differentiable: its result does not require grad. */
    assert_false(ct_tensor_requires_grad(ct_argmax(x)));
    ct_scope_end();
}

/* Note [Derivative table]: a differentiable op without a formula fails here (and
 * already at build time, through the table's X-macro). */
static void test_every_op_has_a_derivative(void **state) {
    (void)state;
    int checked = 0;
    for (int op = 0; op < CT_OP_COUNT; op++) {
        if (!ct_op_is_differentiable(op))
            continue;
        if (!ct_derivative_of(op))
            fail_msg("op %s has no derivative", ct_op_name(op));
        checked++;
    }
    assert_true(checked >= 50);
    assert_false(ct_op_is_differentiable(CT_OP_nonzero));
    assert_false(ct_op_is_differentiable(CT_OP_conv2d_backward));
    assert_false(ct_op_is_differentiable(CT_OP_eq));
    assert_null(ct_derivative_of(CT_OP_lt));
}

/* gradcheck itself must catch a wrong derivative: here the first factor is detached,
 * so the analytical gradient of x*x is x instead of 2x. */
static ct_tensor *f_wrong(ct_tensor *const *in, int n, void *ud) {
    (void)n, (void)ud;
    return ct_mul(ct_detach(in[0]), in[0]);
}

static ct_tensor *f_f32(ct_tensor *const *in, int n, void *ud) {
    (void)n, (void)ud;
    return ct_to_dtype(in[0], CT_F32);
}

static void test_gradcheck_catches_errors(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *x = rand_leaf(CT_SHAPE(3), false);
    ct_tensor *in[1] = {x};
    CT_ASSERT_ERR(ct_gradcheck(f_wrong, NULL, in, 1, 1e-6, 1e-6, 1e-4) == CT_OK, CT_ERROR_VALUE,
                  "Jacobian mismatch for output 0 with respect to input 0");
    CT_ASSERT_ERR(ct_gradcheck(f_f32, NULL, in, 1, 1e-6, 1e-6, 1e-4) == CT_OK, CT_ERROR_TYPE, "float64 outputs");
    CT_ASSERT_ERR(ct_gradcheck(NULL, NULL, in, 1, 1e-6, 1e-6, 1e-4) == CT_OK, CT_ERROR_NULL_ARGUMENT, "fn");
    CT_ASSERT_ERR(ct_gradgradcheck(NULL, NULL, in, 1, 1e-6, 1e-6, 1e-4) == CT_OK, CT_ERROR_NULL_ARGUMENT, "fn");
    CT_ASSERT_ERR(ct_gradcheck(f_mm, NULL, in, 0, 1e-6, 1e-6, 1e-4) == CT_OK, CT_ERROR_VALUE, "input tensors");
    CT_ASSERT_ERR(ct_gradcheck(f_wrong, NULL, in, 1, 0, 1e-6, 1e-4) == CT_OK, CT_ERROR_VALUE, "eps");
    ct_tensor *nul[1] = {NULL};
    CT_ASSERT_ERR(ct_gradcheck(f_wrong, NULL, nul, 1, 1e-6, 1e-6, 1e-4) == CT_OK, CT_ERROR_NULL_ARGUMENT, "input 0");
    ct_tensor *f = ct_zeros(CT_SHAPE(3), CT_F32, CT_CPU);
    ct_tensor_set_requires_grad(f, true);
    ct_tensor *fin[1] = {f};
    CT_ASSERT_ERR(ct_gradcheck(f_wrong, NULL, fin, 1, 1e-6, 1e-6, 1e-4) == CT_OK, CT_ERROR_TYPE, "float64");
    ct_tensor *plain[1] = {ct_zeros(CT_SHAPE(3), CT_F64, CT_CPU)};
    CT_ASSERT_ERR(ct_gradcheck(f_wrong, NULL, plain, 1, 1e-6, 1e-6, 1e-4) == CT_OK, CT_ERROR_VALUE,
                  "at least one input tensor to require gradient");
    ct_tensor *meta = ct_zeros(CT_SHAPE(3), CT_F64, CT_META);
    ct_tensor_set_requires_grad(meta, true);
    ct_tensor *min[1] = {meta};
    CT_ASSERT_ERR(ct_gradcheck(f_wrong, NULL, min, 1, 1e-6, 1e-6, 1e-4) == CT_OK, CT_ERROR_DEVICE, "meta tensor");
    ct_scope_end();
}

int main(void) {
    static const ct_device cuda0 = {CT_DEVICE_CUDA, 0};
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matrix_gradcheck),
        cmocka_unit_test(test_shape_index_nn_gradcheck),
        cmocka_unit_test(test_conv2d_double_backward),
        cmocka_unit_test(test_reduction_ties_and_zero_norms),
        cmocka_unit_test(test_every_op_has_a_derivative),
        cmocka_unit_test(test_gradcheck_catches_errors),
        cmocka_unit_test(test_samples_compiled),
        /* last: they leave the samples on the GPU */
        cmocka_unit_test_prestate(test_matrix_gradcheck, (void *)&cuda0),
        cmocka_unit_test_prestate(test_shape_index_nn_gradcheck, (void *)&cuda0),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
