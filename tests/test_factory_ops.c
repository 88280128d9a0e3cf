/* Factories, random ops, fills and device moves as dispatched ops (Note [Factories as
 * ops] in src/meta/factories.c): a capture at the TRACE key and the op log see them in
 * a training step, every factory makes META tensors, an override at META sees them,
 * and the gradients of to_device and of the in-place fills and draws are PyTorch's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dispatch/call.h"
#include "testutil.h"

/* ------------------------------------------------------------------ a capture at TRACE */

/* What the TRACE kernel of a graph capture does: record each
 * outermost call, with TRACE excluded for the calls made inside it, then run it. */
typedef struct {
    int n;
    ct_op ops[4096];
    bool has_device[4096];
    ct_device device[4096];
} capture;

static ct_status record(ct_keyset ks, ct_call *call, void *ud) {
    capture *c = ud;
    if (c->n < 4096) {
        c->ops[c->n] = ct_call_op(call);
        c->has_device[c->n] = ct_call_has_device(call);
        c->device[c->n] = ct_call_device(call);
        c->n++;
    }
    ct_keyset ex = ct_tls_excluded();
    ct_tls_set_excluded(ex | CT_KEYSET(CT_KEY_TRACE));
    ct_status st = ct_call_next(ks, call);
    ct_tls_set_excluded(ex);
    return st;
}

static int64_t handles[CT_OP_COUNT];

static void capture_begin(capture *c) {
    memset(c, 0, sizeof *c);
    for (ct_op op = 0; op < CT_OP_COUNT; op++)
        if (ct_op_has_kernel(op, CT_KEY_CPU)) {
            handles[op] = ct_op_override(op, CT_KEY_TRACE, record, c, 0);
            assert_true(handles[op] > 0);
        }
    ct_tls_set_included(ct_tls_included() | CT_KEYSET(CT_KEY_TRACE));
}

static void capture_end(void) {
    ct_tls_set_included(ct_tls_included() & ~CT_KEYSET(CT_KEY_TRACE));
    for (ct_op op = 0; op < CT_OP_COUNT; op++)
        if (handles[op]) {
            assert_int_equal(ct_op_override_remove(handles[op]), CT_OK);
            handles[op] = 0;
        }
}

static int count(const capture *c, const char *name) {
    ct_op op = ct_op_find(name);
    assert_true(op >= 0);
    int n = 0;
    for (int i = 0; i < c->n; i++)
        n += c->ops[i] == op;
    return n;
}

/* One step of a small model: weights from randn and zeros, a batch from rand and
 * randint moved to the CPU, dropout (bernoulli_ over empty_like), forward, backward,
 * an SGD step and zero_grad (fill_). */
static void training_step(ct_tensor *w, ct_tensor *b, ct_optimizer *opt) {
    ct_scope_begin();
    ct_tensor *x = ct_rand(CT_SHAPE(8, 4), CT_F32, CT_CPU);
    ct_tensor *y = ct_to_device(ct_randint(0, 3, CT_SHAPE(8), CT_DTYPE_UNDEFINED, CT_CPU), CT_CPU);
    ct_tensor *h = ct_dropout(ct_relu(ct_add(ct_mm(x, w), b)), 0.5, true);
    ct_tensor *loss = ct_nll_loss(ct_log_softmax(h, 1, CT_DTYPE_UNDEFINED), y, NULL, CT_REDUCTION_MEAN, -100);
    CT_ASSERT_OK(loss);
    assert_int_equal(ct_backward(loss, NULL, false, false), CT_OK);
    assert_int_equal(ct_optimizer_step(opt), CT_OK);
    assert_int_equal(ct_optimizer_zero_grad(opt, false), CT_OK);
    ct_scope_end();
}

static void test_trace_sees_a_training_step(void **state) {
    (void)state;
    ct_manual_seed(7);
    ct_scope_begin();
    capture *c = malloc(sizeof *c);
    capture_begin(c);
    ct_tensor *w = ct_randn(CT_SHAPE(4, 3), CT_F32, CT_CPU);
    ct_tensor *b = ct_zeros(CT_SHAPE(3), CT_F32, CT_CPU);
    ct_tensor_set_requires_grad(w, true);
    ct_tensor_set_requires_grad(b, true);
    ct_optim_options o = ct_sgd_options(0.1);
    ct_tensor *params[2] = {w, b};
    ct_optimizer *opt = ct_optimizer_new(CT_OPTIM_SGD, params, 2, &o);
    assert_non_null(opt);
    training_step(w, b, opt); /* the first step makes the gradients */
    training_step(w, b, opt); /* the second zeroes them in place */
    capture_end();
    /* the factories, the draws, the fills and the move, besides the model's ops */
    assert_int_equal(count(c, "randn"), 1);
    assert_int_equal(count(c, "rand"), 2);
    assert_int_equal(count(c, "randint"), 2);
    assert_int_equal(count(c, "to_device"), 2);
    assert_true(count(c, "full") >= 1 + 2);  /* zeros for b, the backward's root gradient */
    assert_true(count(c, "empty") >= 2);     /* dropout's mask */
    assert_int_equal(count(c, "bernoulli"), 2);
    assert_int_equal(count(c, "fill"), 2 * 2); /* zero_grad of w and b in the second step */
    assert_true(count(c, "mm") >= 2 && count(c, "nll_loss_backward") == 2);
    /* a factory carries its device, an op with tensor inputs none */
    for (int i = 0; i < c->n; i++) {
        const char *name = ct_op_name(c->ops[i]);
        bool factory = !strcmp(name, "randn") || !strcmp(name, "rand") || !strcmp(name, "randint") ||
                       !strcmp(name, "full") || !strcmp(name, "empty") || !strcmp(name, "to_device");
        if (c->has_device[i] != factory)
            fail_msg("call %d (%s): has_device %d", i, name, c->has_device[i]);
        if (factory)
            assert_true(ct_device_equal(c->device[i], CT_CPU));
        else
            assert_int_equal(c->device[i].type, -1);
    }
    ct_optimizer_free(opt);
    free(c);
    ct_scope_end();
}

/* The same step through the op log (CT_LOG_OPS): a line per call, the device shown. */
static void test_op_log_shows_factories(void **state) {
    (void)state;
    const char *path = "test_factory_ops.log";
    remove(path);
    ct_scope_begin();
    ct_tensor *w = ct_randn(CT_SHAPE(4, 3), CT_F32, CT_CPU);
    ct_tensor *b = ct_zeros(CT_SHAPE(3), CT_F32, CT_CPU);
    ct_tensor_set_requires_grad(w, true);
    ct_tensor_set_requires_grad(b, true);
    ct_optim_options o = ct_sgd_options(0.1);
    ct_tensor *params[2] = {w, b};
    ct_optimizer *opt = ct_optimizer_new(CT_OPTIM_SGD, params, 2, &o);
    assert_int_equal(ct_set_op_logging(true, path), CT_OK);
    training_step(w, b, opt);
    training_step(w, b, opt);
    ct_tensor *e = ct_eye(2, -1, CT_DTYPE_UNDEFINED, CT_META);
    assert_int_equal(ct_set_op_logging(false, NULL), CT_OK);
    CT_ASSERT_OK(e);
    ct_optimizer_free(opt);
    ct_scope_end();
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    static char buf[1 << 20];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = '\0';
    fclose(f);
    remove(path);
    static const char *const want[] = {
        "[ct] rand(8, 4, device=cpu) -> f32[8, 4] cpu\n",
        "[ct] randint(0, 3, 8, device=cpu) -> i64[8] cpu\n",
        "[ct] to_device(i64[8] cpu, device=cpu) -> i64[8] cpu\n",
        "[ct] empty(8, 3, device=cpu) -> f32[8, 3] cpu\n",
        "[ct] bernoulli_(f32[8, 3] cpu, 0.5) -> f32[8, 3] cpu\n",
        "[ct] fill_(f32[4, 3] cpu, 0) -> f32[4, 3] cpu\n",
        "[ct] full(1, device=cpu) -> f32[] cpu\n", /* the backward's root gradient */
        "[ct] eye(2, -1, device=meta) -> f32[2, 2] meta\n",
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        if (!strstr(buf, want[i]))
            fail_msg("the op log lacks %s", want[i]);
}

/* ------------------------------------------------------------------ META */

static void check_meta(const ct_tensor *t, ct_dtype dtype, const int64_t *shape, int ndim, int line) {
    if (!t)
        fail_msg("line %d: %s", line, ct_last_error());
    assert_int_equal(ct_tensor_device(t).type, CT_DEVICE_META);
    assert_int_equal(ct_tensor_dtype(t), dtype);
    ct_test_assert_shape(t, shape, ndim, __FILE__, line);
}
#define META(t, dtype, ...) check_meta((t), (dtype), CT_SHAPE(__VA_ARGS__), __LINE__)

static uint64_t first_draw(void) {
    double v = 0;
    assert_int_equal(ct_item_double(ct_rand(NULL, 0, CT_F64, CT_CPU), &v), CT_OK);
    return (uint64_t)(v * 9007199254740992.0);
}

static void test_factories_on_meta(void **state) {
    (void)state;
    ct_scope_begin();
    ct_manual_seed(3);
    uint64_t expected = first_draw();
    ct_manual_seed(3);
    ct_set_default_dtype(CT_F32);
    META(ct_empty(CT_SHAPE(2, 3), CT_F16, CT_META), CT_F16, 2, 3);
    META(ct_empty_strided(CT_INDEX(2, 3), CT_INDEX(1, 2), 2, CT_F32, CT_META), CT_F32, 2, 3);
    META(ct_zeros(CT_SHAPE(4), CT_I32, CT_META), CT_I32, 4);
    META(ct_ones(CT_SHAPE(1, 0), CT_DTYPE_UNDEFINED, CT_META), CT_I64, 1, 0);
    META(ct_full(CT_SHAPE(5), ct_scalar_float(1.5), CT_DTYPE_UNDEFINED, CT_META), CT_F32, 5);
    META(ct_full(CT_SHAPE(5), ct_scalar_bool(true), CT_DTYPE_UNDEFINED, CT_META), CT_BOOL, 5);
    ct_tensor *s0 = ct_scalar_tensor(ct_scalar_int(3), CT_DTYPE_UNDEFINED, CT_META);
    check_meta(s0, CT_I64, NULL, 0, __LINE__);
    META(ct_arange(ct_scalar_int(0), ct_scalar_int(10), ct_scalar_int(3), CT_DTYPE_UNDEFINED, CT_META), CT_I64, 4);
    META(ct_arange(ct_scalar_float(0), ct_scalar_float(1), ct_scalar_float(0.1), CT_F64, CT_META), CT_F64, 10);
    META(ct_linspace(0, 1, 7, CT_DTYPE_UNDEFINED, CT_META), CT_F32, 7);
    META(ct_logspace(0, 1, 3, 2, CT_F64, CT_META), CT_F64, 3);
    META(ct_eye(3, 5, CT_BOOL, CT_META), CT_BOOL, 3, 5);
    META(ct_rand(CT_SHAPE(2, 2), CT_DTYPE_UNDEFINED, CT_META), CT_F32, 2, 2);
    META(ct_randn(CT_SHAPE(3), CT_BF16, CT_META), CT_BF16, 3);
    META(ct_randint(0, 5, CT_SHAPE(2, 1), CT_DTYPE_UNDEFINED, CT_META), CT_I64, 2, 1);
    META(ct_randperm(6, CT_I32, CT_META), CT_I32, 6);
    ct_tensor *m = ct_empty(CT_SHAPE(2, 3), CT_F32, CT_META);
    META(ct_empty_like(m, CT_F64), CT_F64, 2, 3);
    META(ct_zeros_like(m, CT_DTYPE_UNDEFINED), CT_F32, 2, 3);
    META(ct_ones_like(m, CT_I8), CT_I8, 2, 3);
    META(ct_full_like(m, ct_scalar_int(2), CT_DTYPE_UNDEFINED), CT_F32, 2, 3);
    META(ct_rand_like(m, CT_DTYPE_UNDEFINED), CT_F32, 2, 3);
    META(ct_randn_like(m, CT_F64), CT_F64, 2, 3);
    META(ct_fill_(m, ct_scalar_float(1)), CT_F32, 2, 3);
    META(ct_zero_(m), CT_F32, 2, 3);
    META(ct_uniform_(m, 0, 1), CT_F32, 2, 3);
    META(ct_normal_(m, 0, 1), CT_F32, 2, 3);
    META(ct_bernoulli_(m, 0.5), CT_F32, 2, 3);
    META(ct_bernoulli(m), CT_F32, 2, 3);
    META(ct_to_device(ct_ones(CT_SHAPE(2), CT_F32, CT_CPU), CT_META), CT_F32, 2);
    /* the rules are the CPU's: same errors */
    CT_ASSERT_ERR(ct_rand(CT_SHAPE(2), CT_I64, CT_META) != NULL, CT_ERROR_TYPE,
                  "\"check_uniform_bounds\" not implemented for 'Long'");
    CT_ASSERT_ERR(ct_full(CT_SHAPE(2), ct_scalar_int(300), CT_U8, CT_META) != NULL, CT_ERROR_VALUE,
                  "value cannot be converted to type uint8 without overflow");
    CT_ASSERT_ERR(ct_to_device(m, CT_CPU) != NULL, CT_ERROR_DEVICE, "cannot copy out of meta tensor");
    /* no data, no draws: the generator is where it was */
    assert_true(first_draw() == expected);
    ct_scope_end();
}

static ct_status count_call(ct_keyset ks, ct_call *call, void *ud) {
    (*(int *)ud)++;
    return ct_call_next(ks, call);
}

/* An override at META sees the factories a model runs on META tensors. */
static void test_meta_override_sees_factories(void **state) {
    (void)state;
    int n = 0;
    int64_t h1 = ct_op_override(ct_op_find("full"), CT_KEY_META, count_call, &n, 0);
    int64_t h2 = ct_op_override(ct_op_find("randn"), CT_KEY_META, count_call, &n, 0);
    ct_scope_begin();
    ct_zeros(CT_SHAPE(2), CT_F32, CT_META);
    ct_randn(CT_SHAPE(2), CT_F32, CT_META);
    ct_zeros(CT_SHAPE(2), CT_F32, CT_CPU); /* the CPU's key: not seen */
    ct_scope_end();
    assert_int_equal(ct_op_override_remove(h1), CT_OK);
    assert_int_equal(ct_op_override_remove(h2), CT_OK);
    assert_int_equal(n, 2);
}

/* An override at the CPU key sees ct_zeros (as full), ct_randn, ct_fill_ and
 * ct_to_device, each once, with the arguments its schema says. */
typedef struct {
    int full, randn, fill, to_device;
    int64_t full_ints[2];
    double full_value;
    bool fill_inplace;
} seen_calls;

static ct_status see(ct_keyset ks, ct_call *call, void *ud) {
    seen_calls *s = ud;
    const char *name = ct_op_name(ct_call_op(call));
    if (!strcmp(name, "full")) {
        s->full++;
        for (int i = 0; i < 2 && i < ct_call_num_ints(call); i++)
            s->full_ints[i] = ct_call_int(call, i);
        s->full_value = ct_scalar_to_double(ct_call_scalar(call, 0));
    } else if (!strcmp(name, "randn")) {
        s->randn++;
    } else if (!strcmp(name, "fill")) {
        s->fill++;
        s->fill_inplace = ct_call_is_inplace(call);
    } else if (!strcmp(name, "to_device")) {
        s->to_device++;
    }
    return ct_call_next(ks, call);
}

static void test_cpu_override_sees_factories(void **state) {
    (void)state;
    seen_calls s = {0};
    const char *names[] = {"full", "randn", "fill", "to_device"};
    int64_t h[4];
    for (int i = 0; i < 4; i++) {
        h[i] = ct_op_override(ct_op_find(names[i]), CT_KEY_CPU, see, &s, 0);
        assert_true(h[i] > 0);
    }
    ct_scope_begin();
    ct_tensor *z = ct_zeros(CT_SHAPE(2, 5), CT_F32, CT_CPU);
    ct_tensor *r = ct_randn(CT_SHAPE(3), CT_F32, CT_CPU);
    CT_ASSERT_OK(ct_fill_(r, ct_scalar_float(0.25)));
    ct_tensor *m = ct_to_device(z, CT_META);
    ct_tensor *c = ct_to_device(z, CT_CPU);
    ct_scope_end();
    for (int i = 0; i < 4; i++)
        assert_int_equal(ct_op_override_remove(h[i]), CT_OK);
    CT_ASSERT_OK(z);
    CT_ASSERT_OK(m);
    assert_ptr_equal(c, z);
    assert_int_equal(s.full, 1);
    assert_int_equal(s.full_ints[0], 2);
    assert_int_equal(s.full_ints[1], 5);
    assert_true(s.full_value == 0.0);
    assert_int_equal(s.randn, 1);
    assert_int_equal(s.fill, 1);
    assert_true(s.fill_inplace);
    /* the move to the CPU; the one from the CPU to META runs at META, the higher of its
     * two backend keys */
    assert_int_equal(s.to_device, 1);
}

/* ------------------------------------------------------------------ errors */

/* Wrong arguments give an error naming the op, through the dispatcher or before it,
 * on every device; nothing is made, the generator does not move. */
static void test_error_inputs(void **state) {
    (void)state;
    ct_scope_begin();
    ct_manual_seed(5);
    uint64_t expected = first_draw();
    ct_manual_seed(5);
    const ct_device devices[2] = {CT_CPU, CT_META};
    const int64_t neg[2] = {2, -1};
    const ct_dtype bad_dtype = (ct_dtype)99;
    const ct_device bad_device = {42, 0};
    for (int d = 0; d < 2; d++) {
        ct_device dev = devices[d];
        /* negative sizes */
        const char *negdim = "Trying to create tensor with negative dimension -1: [2, -1]";
        CT_ASSERT_ERR(ct_empty(neg, 2, CT_F32, dev) != NULL, CT_ERROR_VALUE, negdim);
        CT_ASSERT_ERR(ct_zeros(neg, 2, CT_F32, dev) != NULL, CT_ERROR_VALUE, negdim);
        CT_ASSERT_ERR(ct_full(neg, 2, ct_scalar_int(1), CT_F32, dev) != NULL, CT_ERROR_VALUE, negdim);
        CT_ASSERT_ERR(ct_empty_strided(neg, CT_INDEX(1, 1), 2, CT_F32, dev) != NULL, CT_ERROR_VALUE, negdim);
        CT_ASSERT_ERR(ct_rand(neg, 2, CT_F32, dev) != NULL, CT_ERROR_VALUE, negdim);
        CT_ASSERT_ERR(ct_randn(neg, 2, CT_F32, dev) != NULL, CT_ERROR_VALUE, negdim);
        CT_ASSERT_ERR(ct_randint(0, 3, neg, 2, CT_I64, dev) != NULL, CT_ERROR_VALUE, negdim);
        CT_ASSERT_ERR(ct_randperm(-1, CT_I64, dev) != NULL, CT_ERROR_VALUE, "negative dimension -1");
        CT_ASSERT_ERR(ct_eye(-1, 2, CT_F32, dev) != NULL, CT_ERROR_VALUE, "n must be greater or equal to 0, got -1");
        CT_ASSERT_ERR(ct_linspace(0, 1, -2, CT_F32, dev) != NULL, CT_ERROR_VALUE, "number of steps must be non-negative");
        CT_ASSERT_ERR(ct_logspace(0, 1, -2, 10, CT_F32, dev) != NULL, CT_ERROR_VALUE, "number of steps must be");
        CT_ASSERT_ERR(ct_arange(ct_scalar_int(0), ct_scalar_int(5), ct_scalar_int(0), CT_DTYPE_UNDEFINED, dev) != NULL,
                      CT_ERROR_VALUE, "step must be nonzero");
        /* shapes a call cannot carry: refused with the core's own message */
        CT_ASSERT_ERR(ct_empty(NULL, 2, CT_F32, dev) != NULL, CT_ERROR_NULL_ARGUMENT, "shape is NULL but ndim is 2");
        CT_ASSERT_ERR(ct_zeros(neg, -1, CT_F32, dev) != NULL, CT_ERROR_VALUE, "0 to 8 dimensions, got -1");
        CT_ASSERT_ERR(ct_rand(neg, 99, CT_F32, dev) != NULL, CT_ERROR_VALUE, "0 to 8 dimensions, got 99");
        /* dtypes */
        CT_ASSERT_ERR(ct_empty(CT_SHAPE(2), bad_dtype, dev) != NULL, CT_ERROR_TYPE, "empty: invalid dtype 99");
        CT_ASSERT_ERR(ct_zeros(CT_SHAPE(2), bad_dtype, dev) != NULL, CT_ERROR_TYPE, "full: invalid dtype 99");
        CT_ASSERT_ERR(ct_rand(CT_SHAPE(2), bad_dtype, dev) != NULL, CT_ERROR_TYPE, "rand: invalid dtype 99");
        CT_ASSERT_ERR(ct_randint(0, 3, CT_SHAPE(2), bad_dtype, dev) != NULL, CT_ERROR_TYPE, "invalid dtype 99");
        CT_ASSERT_ERR(ct_eye(2, 2, bad_dtype, dev) != NULL, CT_ERROR_TYPE, "eye: invalid dtype 99");
        CT_ASSERT_ERR(ct_randn(CT_SHAPE(2), CT_I32, dev) != NULL, CT_ERROR_TYPE,
                      "\"normal_kernel_cpu\" not implemented for 'Int'");
        CT_ASSERT_ERR(ct_randint(3, 0, CT_SHAPE(2), CT_I64, dev) != NULL, CT_ERROR_VALUE,
                      "random_ expects 'from' to be less than 'to', but got from=3 >= to=0");
        /* in place */
        ct_tensor *t = ct_empty(CT_SHAPE(2), CT_I32, dev);
        CT_ASSERT_OK(t);
        CT_ASSERT_ERR(ct_fill_(t, ct_scalar_int(1LL << 40)) != NULL, CT_ERROR_VALUE, "without overflow");
        CT_ASSERT_ERR(ct_uniform_(t, 0, 1) != NULL, CT_ERROR_TYPE, "not implemented for 'Int'");
        ct_tensor *f = ct_empty(CT_SHAPE(2), CT_F32, dev);
        CT_ASSERT_ERR(ct_uniform_(f, 1, 0) != NULL, CT_ERROR_VALUE, "from=1 > to=0");
        CT_ASSERT_ERR(ct_normal_(f, 0, -1) != NULL, CT_ERROR_VALUE, "normal expects std >= 0.0");
        CT_ASSERT_ERR(ct_bernoulli_(f, 2) != NULL, CT_ERROR_VALUE, "expects p to be in [0, 1], but got p=2");
        CT_ASSERT_ERR(ct_bernoulli(t) != NULL, CT_ERROR_TYPE, "not implemented for 'Int'");
        /* a device of no known type */
        CT_ASSERT_ERR(ct_empty(CT_SHAPE(2), CT_F32, bad_device) != NULL, CT_ERROR_DEVICE, "unknown device type 42");
        CT_ASSERT_ERR(ct_to_device(f, bad_device) != NULL, CT_ERROR_DEVICE,
                      dev.type == CT_DEVICE_META ? "cannot copy out of meta tensor" : "unknown device type 42");
    }
    ct_device bad_types[2] = {{42, 0}, {-3, 0}};
    for (int i = 0; i < 2; i++) {
        ct_device dev = bad_types[i];
        CT_ASSERT_ERR(ct_zeros(CT_SHAPE(2), CT_F32, dev) != NULL, CT_ERROR_DEVICE, "full: unknown device type");
        CT_ASSERT_ERR(ct_rand(CT_SHAPE(2), CT_F32, dev) != NULL, CT_ERROR_DEVICE, "rand: unknown device type");
        CT_ASSERT_ERR(ct_randint(0, 3, CT_SHAPE(2), CT_I64, dev) != NULL, CT_ERROR_DEVICE, "unknown device type");
        CT_ASSERT_ERR(ct_randperm(3, CT_I64, dev) != NULL, CT_ERROR_DEVICE, "unknown device type");
        CT_ASSERT_ERR(ct_arange(ct_scalar_int(0), ct_scalar_int(3), ct_scalar_int(1), CT_DTYPE_UNDEFINED, dev) != NULL,
                      CT_ERROR_DEVICE, "arange: unknown device type");
        CT_ASSERT_ERR(ct_linspace(0, 1, 3, CT_F32, dev) != NULL, CT_ERROR_DEVICE, "unknown device type");
        CT_ASSERT_ERR(ct_eye(2, 2, CT_F32, dev) != NULL, CT_ERROR_DEVICE, "eye: unknown device type");
    }
    CT_ASSERT_ERR(ct_empty(CT_SHAPE(2), CT_F32, ct_device_make(CT_DEVICE_CPU, 3)) != NULL, CT_ERROR_DEVICE,
                  "invalid device (type 0, index 3)");
    if (!ct_cuda_is_available()) {
        /* a device whose backend is not there: the message it always gave */
        CT_ASSERT_ERR(ct_zeros(CT_SHAPE(2), CT_F32, CT_CUDA(0)) != NULL, CT_ERROR_DEVICE, "full: ");
        CT_ASSERT_ERR(ct_randn(CT_SHAPE(2), CT_F32, CT_CUDA(0)) != NULL, CT_ERROR_DEVICE, "randn: ");
        CT_ASSERT_ERR(ct_to_device(ct_ones(CT_SHAPE(2), CT_F32, CT_CPU), CT_CUDA(0)) != NULL, CT_ERROR_DEVICE,
                      "to_device: ");
    }
    /* NULL tensors */
    ct_clear_error();
    CT_ASSERT_ERR(ct_fill_(NULL, ct_scalar_int(0)) != NULL, CT_ERROR_NULL_ARGUMENT, "fill_: got a NULL argument");
    ct_clear_error();
    CT_ASSERT_ERR(ct_to_device(NULL, CT_CPU) != NULL, CT_ERROR_NULL_ARGUMENT, "to_device: got a NULL argument");
    ct_clear_error();
    CT_ASSERT_ERR(ct_bernoulli(NULL) != NULL, CT_ERROR_NULL_ARGUMENT, "bernoulli: got a NULL argument");
    ct_clear_error();
    CT_ASSERT_ERR(ct_zeros_like(NULL, CT_F32) != NULL, CT_ERROR_NULL_ARGUMENT, "zeros_like: got a NULL argument");
    ct_clear_error();
    /* the op log writes an error line for a failed factory */
    const char *path = "test_factory_ops_errors.log";
    remove(path);
    assert_int_equal(ct_set_op_logging(true, path), CT_OK);
    assert_null(ct_zeros(neg, 2, CT_F32, CT_CPU));
    assert_null(ct_empty(CT_SHAPE(1), CT_F32, bad_device));
    assert_int_equal(ct_set_op_logging(false, NULL), CT_OK);
    FILE *lf = fopen(path, "r");
    assert_non_null(lf);
    char buf[4096];
    size_t n = fread(buf, 1, sizeof buf - 1, lf);
    buf[n] = '\0';
    fclose(lf);
    remove(path);
    if (!strstr(buf, "[ct] full(0, 2, -1, device=cpu) -> error: full: Trying to create tensor with negative"))
        fail_msg("the op log lacks the failed full: %s", buf);
    if (!strstr(buf, "[ct] empty(1, device=unknown) -> error: empty: unknown device type 42"))
        fail_msg("the op log lacks the failed empty: %s", buf);
    /* nothing drew from the generator */
    assert_true(first_draw() == expected);
    ct_scope_end();
}

/* ------------------------------------------------------------------ gradients */

static ct_tensor *to_cpu_squared(ct_tensor *const *in, int n, void *ud) {
    (void)n, (void)ud;
    ct_tensor *y = ct_to_device(in[0], CT_CPU);
    return ct_mul(y, y);
}

static void test_to_device_gradient(void **state) {
    (void)state;
    ct_scope_begin();
    /* CPU to CPU: the identity (the tensor itself), gradcheck through it */
    ct_tensor *x = ct_rand(CT_SHAPE(2, 3), CT_F64, CT_CPU);
    ct_tensor_set_requires_grad(x, true);
    assert_ptr_equal(ct_to_device(x, CT_CPU), x);
    ct_tensor *in[1] = {x};
    assert_int_equal(ct_gradcheck(to_cpu_squared, NULL, in, 1, 1e-6, 1e-7, 1e-5), CT_OK);
    /* CPU to META: a node whose backward is the move back, which META cannot do */
    ct_tensor *m = ct_to_device(x, CT_META);
    CT_ASSERT_OK(m);
    assert_true(ct_tensor_requires_grad(m));
    assert_string_equal(ct_tensor_grad_fn_name(m), "ToDeviceBackward0");
    CT_ASSERT_ERR(ct_backward(ct_sum(m, NULL, 0, false, CT_DTYPE_UNDEFINED), NULL, false, false) == CT_OK,
                  CT_ERROR_DEVICE, "cannot copy out of meta tensor");
    /* META to META: shapes through the backward */
    ct_tensor *mx = ct_empty(CT_SHAPE(2, 3), CT_F32, CT_META);
    ct_tensor_set_requires_grad(mx, true);
    ct_tensor *my = ct_mul_scalar(ct_to_device(mx, CT_META), ct_scalar_int(2));
    assert_int_equal(ct_backward(ct_sum(my, NULL, 0, false, CT_DTYPE_UNDEFINED), NULL, false, false), CT_OK);
    ct_tensor *g = ct_tensor_grad(mx);
    CT_ASSERT_OK(g);
    META(g, CT_F32, 2, 3);
    ct_scope_end();
}

/* In-place fills and draws on tensors that require grad, as in PyTorch. */
static void test_inplace_fills_and_grad(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *leaf = ct_ones(CT_SHAPE(3), CT_F32, CT_CPU);
    ct_tensor_set_requires_grad(leaf, true);
    CT_ASSERT_ERR(ct_fill_(leaf, ct_scalar_int(2)) != NULL, CT_ERROR_RUNTIME,
                  "a leaf Variable that requires grad is being used in an in-place operation.");
    CT_ASSERT_ERR(ct_uniform_(leaf, 0, 1) != NULL, CT_ERROR_RUNTIME, "a leaf Variable that requires grad");
    CT_ASSERT_ERR(ct_normal_(leaf, 0, 1) != NULL, CT_ERROR_RUNTIME, "a leaf Variable that requires grad");
    CT_ASSERT_ERR(ct_bernoulli_(leaf, 0.5) != NULL, CT_ERROR_RUNTIME, "a leaf Variable that requires grad");
    CT_ASSERT_ERR(ct_zero_(leaf) != NULL, CT_ERROR_RUNTIME, "a leaf Variable that requires grad");
    assert_true(ct_test_at(leaf, 0) == 1.0);
    /* under no_grad (what nn.init does) the leaf is written and stays a leaf */
    bool was = ct_set_grad_enabled(false);
    CT_ASSERT_OK(ct_fill_(leaf, ct_scalar_int(2)));
    CT_ASSERT_OK(ct_uniform_(leaf, 2, 3));
    ct_set_grad_enabled(was);
    assert_true(ct_test_at(leaf, 0) >= 2.0 && ct_test_at(leaf, 0) < 3.0);
    assert_true(ct_tensor_requires_grad(leaf) && ct_tensor_grad_fn_name(leaf) == NULL);
    CT_ASSERT_OK(ct_init_normal_(leaf, 0, 1));
    CT_ASSERT_OK(ct_init_constant_(leaf, 0.5));
    assert_true(ct_test_at(leaf, 2) == 0.5);
    /* a non-leaf is overwritten: its old value gets a zero gradient */
    ct_tensor *x = ct_ones(CT_SHAPE(3), CT_F32, CT_CPU);
    ct_tensor_set_requires_grad(x, true);
    ct_tensor *y = ct_mul_scalar(x, ct_scalar_int(2));
    CT_ASSERT_OK(ct_fill_(y, ct_scalar_int(5)));
    assert_string_equal(ct_tensor_grad_fn_name(y), "FillBackward0");
    CT_ASSERT_OK(ct_normal_(y, 0, 1));
    assert_string_equal(ct_tensor_grad_fn_name(y), "NormalBackward0");
    assert_int_equal(ct_backward(ct_sum(ct_mul(y, x), NULL, 0, false, CT_DTYPE_UNDEFINED), NULL, false, false),
                     CT_OK);
    ct_tensor *gx = ct_tensor_grad(x); /* only through the product's other factor */
    CT_ASSERT_OK(gx);
    for (int i = 0; i < 3; i++)
        assert_true(ct_test_at(gx, i) == ct_test_at(y, i));
    /* bernoulli of probabilities that require grad: a zero gradient */
    ct_tensor *p = ct_full(CT_SHAPE(4), ct_scalar_float(0.5), CT_F64, CT_CPU);
    ct_tensor_set_requires_grad(p, true);
    ct_tensor *d = ct_bernoulli(p);
    assert_string_equal(ct_tensor_grad_fn_name(d), "BernoulliBackward0");
    assert_int_equal(ct_backward(ct_sum(d, NULL, 0, false, CT_DTYPE_UNDEFINED), NULL, false, false), CT_OK);
    for (int i = 0; i < 4; i++)
        assert_true(ct_test_at(ct_tensor_grad(p), i) == 0.0);
    ct_scope_end();
}

/* The dispatcher bumps an in-place op's version once. */
static void test_inplace_version(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *t = ct_zeros(CT_SHAPE(3), CT_F32, CT_CPU);
    int64_t v = ct_tensor_version(t);
    ct_fill_(t, ct_scalar_int(1));
    assert_int_equal(ct_tensor_version(t), v + 1);
    ct_uniform_(t, 0, 1);
    ct_normal_(t, 0, 1);
    ct_bernoulli_(t, 0.5);
    ct_zero_(t);
    assert_int_equal(ct_tensor_version(t), v + 5);
    ct_scope_end();
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_trace_sees_a_training_step),
        cmocka_unit_test(test_op_log_shows_factories),
        cmocka_unit_test(test_factories_on_meta),
        cmocka_unit_test(test_meta_override_sees_factories),
        cmocka_unit_test(test_cpu_override_sees_factories),
        cmocka_unit_test(test_error_inputs),
        cmocka_unit_test(test_to_device_gradient),
        cmocka_unit_test(test_inplace_fills_and_grad),
        cmocka_unit_test(test_inplace_version),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
