/* The recurrent layers on cuDNN (Note [Recurrent layers on cuDNN] in src/nn/rnn_cudnn.c):
 * for every cell, stacks of layers, both directions, batch_first, no biases, sequence
 * lengths and unbatched input, cuDNN's results and every gradient equal those of the
 * layers' own CUDA path (cuDNN turned off); double backward, float16 and bfloat16, and
 * the ops' errors. Skips without a GPU or without libcudnn. */
#include "cuda_testutil.h"

#define CUDA0 CT_CUDA(0)

enum { LSTM, GRU, TANH, RELU };

typedef struct {
    int kind, L;
    bool bidir, batch_first, bias, lengths, unbatched;
} rcase;

static const rcase cases[] = {
    {LSTM, 2, true, false, true, false, false}, {LSTM, 1, false, true, false, false, false},
    {LSTM, 2, true, true, true, true, false},   {LSTM, 1, false, false, true, false, true},
    {GRU, 2, true, false, true, false, false},  {GRU, 1, false, true, true, true, false},
    {TANH, 2, false, false, true, false, false}, {RELU, 1, true, true, false, true, false},
};

static const int64_t T = 5, B = 3, I = 4, H = 6;

static int gates(int kind) { return kind == LSTM ? 4 : kind == GRU ? 3 : 1; }

static ct_status call(int kind, const ct_tensor *x, const ct_tensor *h0, const ct_tensor *c0, const ct_tensor *len,
                      ct_tensor *const *p, int n, const rcase *c, ct_tensor **o, ct_tensor **hn, ct_tensor **cn) {
    switch (kind) {
    case LSTM:
        return ct_lstm(x, h0, c0, len, p, n, c->bias, c->L, 0.0, true, c->bidir, c->batch_first, o, hn, cn);
    case GRU: return ct_gru(x, h0, len, p, n, c->bias, c->L, 0.0, true, c->bidir, c->batch_first, o, hn);
    case TANH: return ct_rnn_tanh(x, h0, len, p, n, c->bias, c->L, 0.0, true, c->bidir, c->batch_first, o, hn);
    default: return ct_rnn_relu(x, h0, len, p, n, c->bias, c->L, 0.0, true, c->bidir, c->batch_first, o, hn);
    }
}

/* The case's parameters (PyTorch's order) on the GPU in dt, requiring grad. */
static int make_params(const rcase *c, ct_dtype dt, ct_tensor **p) {
    int n = 0, D = c->bidir ? 2 : 1;
    int64_t G = gates(c->kind) * H;
    for (int l = 0; l < c->L; l++)
        for (int d = 0; d < D; d++) {
            int64_t in = l == 0 ? I : D * H;
            int64_t shapes[4][2] = {{G, in}, {G, H}, {G, 0}, {G, 0}};
            for (int k = 0; k < (c->bias ? 4 : 2); k++) {
                ct_tensor *t = ct_test_values(shapes[k], k < 2 ? 2 : 1, dt, -0.5, 0.5, (uint64_t)(100 * l + 10 * d + k));
                p[n] = ct_to_device(t, CUDA0);
                ct_tensor_set_requires_grad(p[n], true);
                n++;
            }
        }
    return n;
}

/* Forward and every gradient of a weighted sum of the outputs, on the CPU. */
static int run(const rcase *c, ct_dtype dt, bool cudnn, bool create_graph, ct_tensor **res, const char **fn) {
    ct_backends_cudnn_set_enabled(cudnn);
    int D = c->bidir ? 2 : 1;
    ct_tensor *p[16];
    int n = make_params(c, dt, p);
    int64_t xs[3] = {c->batch_first ? B : T, c->batch_first ? T : B, I}, hs[3] = {c->L * D, B, H};
    ct_tensor *x = c->unbatched ? ct_test_values(CT_SHAPE(T, I), dt, -1, 1, 7) : ct_test_values(xs, 3, dt, -1, 1, 7);
    ct_tensor *h0 = c->unbatched ? ct_test_values(CT_SHAPE(c->L * D, H), dt, -1, 1, 8) : ct_test_values(hs, 3, dt, -1, 1, 8);
    ct_tensor *c0 = c->kind != LSTM ? NULL : ct_to_device(ct_mul_scalar(h0, ct_scalar_float(0.5)), CUDA0);
    x = ct_to_device(x, CUDA0);
    h0 = ct_to_device(h0, CUDA0);
    ct_tensor_set_requires_grad(x, true);
    ct_tensor_set_requires_grad(h0, true);
    if (c0)
        ct_tensor_set_requires_grad(c0, true);
    ct_tensor *len = c->lengths ? ct_from_data((int64_t[]){T, 2, 4}, CT_SHAPE(3), CT_I64) : NULL;
    ct_tensor *o = NULL, *hn = NULL, *cn = NULL;
    assert_int_equal(call(c->kind, x, h0, c0, len, p, n, c, &o, &hn, c0 ? &cn : NULL), CT_OK);
    *fn = ct_tensor_grad_fn_name(o);
    /* a weighted sum, so every output element gets its own gradient */
    ct_tensor *loss = ct_sum(ct_mul(o, ct_sin(o)), NULL, 0, false, CT_DTYPE_UNDEFINED);
    loss = ct_add(loss, ct_sum(ct_mul(hn, hn), NULL, 0, false, CT_DTYPE_UNDEFINED));
    if (cn)
        loss = ct_add(loss, ct_sum(ct_mul(cn, ct_cos(cn)), NULL, 0, false, CT_DTYPE_UNDEFINED));
    const ct_tensor *wrt[19] = {x, h0};
    int nw = 2;
    if (c0)
        wrt[nw++] = c0;
    for (int i = 0; i < n; i++)
        wrt[nw++] = p[i];
    ct_tensor *g[19];
    assert_int_equal(ct_autograd_grad((const ct_tensor *[]){loss}, 1, wrt, nw, NULL, create_graph, create_graph,
                                      false, g),
                     CT_OK);
    int k = 0;
    res[k++] = o, res[k++] = hn;
    if (cn)
        res[k++] = cn;
    for (int i = 0; i < nw; i++)
        res[k++] = g[i];
    if (create_graph) { /* the gradients' own gradient, with respect to the parameters */
        ct_tensor *gg = ct_sum(ct_mul(g[0], g[0]), NULL, 0, false, CT_DTYPE_UNDEFINED);
        for (int i = 1; i < nw; i++)
            gg = ct_add(gg, ct_sum(ct_mul(g[i], g[i]), NULL, 0, false, CT_DTYPE_UNDEFINED));
        ct_tensor *g2[16];
        assert_int_equal(ct_autograd_grad((const ct_tensor *[]){gg}, 1, (const ct_tensor *const *)p, n, NULL, false,
                                          false, false, g2),
                         CT_OK);
        for (int i = 0; i < n; i++)
            res[k++] = g2[i];
    }
    for (int i = 0; i < k; i++)
        res[i] = ct_to_dtype(ct_to_device(ct_detach(res[i]), CT_CPU), CT_F32);
    ct_backends_cudnn_set_enabled(true);
    return k;
}

static void compare(const rcase *c, ct_dtype dt, bool create_graph, double tol) {
    ct_scope_begin();
    ct_tensor *a[40], *b[40];
    const char *fa = NULL, *fb = NULL;
    int na = run(c, dt, true, create_graph, a, &fa), nb = run(c, dt, false, create_graph, b, &fb);
    assert_int_equal(na, nb);
    /* an unbatched call returns a squeezed view of the node's output */
    assert_non_null(strstr(fa, c->unbatched ? "Squeeze" : "CudnnRNN"));
    assert_null(strstr(fb, "CudnnRNN"));
    char what[96];
    for (int i = 0; i < na; i++) {
        snprintf(what, sizeof what, "case kind %d L %d: result %d", c->kind, c->L, i);
        CT_ASSERT_CLOSE(a[i], b[i], tol, tol, what);
    }
    ct_scope_end();
}

static void test_same_as_ops(void **state) {
    (void)state;
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        compare(&cases[i], CT_F32, false, 1e-4);
}

/* Under create_graph the node differentiates the layers again from ops. */
static void test_double_backward(void **state) {
    (void)state;
    compare(&cases[0], CT_F32, true, 1e-4);
    compare(&cases[5], CT_F32, true, 1e-4);
}

/* float16 and bfloat16 on cuDNN against the ops path in the same dtype. */
static void test_half(void **state) {
    (void)state;
    compare(&cases[0], CT_F16, false, 3e-2);
    compare(&cases[4], CT_BF16, false, 1e-1);
}

/* Without autograd the forward takes cuDNN's inference mode and gives the same. */
static void test_no_grad(void **state) {
    (void)state;
    ct_scope_begin();
    const rcase *c = &cases[2];
    ct_tensor *p[16];
    int n = make_params(c, CT_F32, p);
    ct_tensor *x = ct_to_device(ct_test_values(CT_SHAPE(B, T, I), CT_F32, -1, 1, 3), CUDA0);
    ct_tensor *len = ct_from_data((int64_t[]){T, 2, 4}, CT_SHAPE(3), CT_I64);
    ct_tensor *o[2][3];
    for (int k = 0; k < 2; k++) {
        bool prev = ct_set_grad_enabled(k == 0);
        assert_int_equal(call(LSTM, x, NULL, NULL, len, p, n, c, &o[k][0], &o[k][1], &o[k][2]), CT_OK);
        ct_set_grad_enabled(prev);
    }
    for (int i = 0; i < 3; i++)
        CT_ASSERT_CLOSE(ct_to_device(o[1][i], CT_CPU), ct_to_device(ct_detach(o[0][i]), CT_CPU), 1e-6, 1e-6,
                        "no-grad forward");
    /* padded steps are zeros */
    ct_tensor *tail = ct_to_device(ct_narrow(ct_select(o[1][0], 0, 1), 0, 2, T - 2), CT_CPU);
    double s = -1;
    assert_int_equal(ct_item_double(ct_sum(ct_abs(tail), NULL, 0, false, CT_DTYPE_UNDEFINED), &s), CT_OK);
    assert_true(s == 0.0);
    ct_scope_end();
}

static void test_errors(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *x = ct_zeros(CT_SHAPE(T, B, I), CT_F32, CUDA0), *h = ct_zeros(CT_SHAPE(1, B, H), CT_F32, CUDA0);
    int64_t nw = 4 * H * I + 4 * H * H + 8 * H;
    ct_tensor *w = ct_zeros(CT_SHAPE(nw), CT_F32, CUDA0), *o = NULL, *hy = NULL, *cy = NULL, *r = NULL;
    ct_tensor *o0 = NULL, *hy0 = NULL, *cy0 = NULL, *r0 = NULL;
    assert_int_equal(
        ct_cudnn_rnn(x, w, h, h, NULL, CT_CUDNN_RNN_LSTM, H, 1, false, false, true, true, &o0, &hy0, &cy0, &r0), CT_OK);
    assert_non_null(r0);
    CT_ASSERT_ERR(ct_cudnn_rnn(x, ct_zeros(CT_SHAPE(nw - 1), CT_F32, CUDA0), h, h, NULL, CT_CUDNN_RNN_LSTM, H, 1,
                               false, false, true, true, &o, &hy, &cy, &r) == CT_OK,
                  CT_ERROR_VALUE, "parameters of the layers");
    CT_ASSERT_ERR(ct_cudnn_rnn(x, w, h, h, NULL, CT_CUDNN_RNN_GRU, H, 1, false, false, true, true, &o, &hy, &cy, &r) ==
                      CT_OK,
                  CT_ERROR_VALUE, "");
    CT_ASSERT_ERR(ct_cudnn_rnn(x, w, h, NULL, NULL, CT_CUDNN_RNN_LSTM, H, 1, false, false, true, true, &o, &hy, &cy,
                               &r) == CT_OK,
                  CT_ERROR_VALUE, "needs cx");
    CT_ASSERT_ERR(ct_cudnn_rnn(x, w, h, h, ct_from_data((int64_t[]){T, 0, 1}, CT_SHAPE(3), CT_I64), CT_CUDNN_RNN_LSTM,
                               H, 1, false, false, true, true, &o, &hy, &cy, &r) == CT_OK,
                  CT_ERROR_VALUE, "outside [1, 5]");
    CT_ASSERT_ERR(ct_cudnn_rnn(ct_zeros(CT_SHAPE(T, B, I), CT_F32, CT_CPU), w, h, h, NULL, CT_CUDNN_RNN_LSTM, H, 1,
                               false, false, true, true, &o, &hy, &cy, &r) == CT_OK,
                  CT_ERROR_DEVICE, "");
    CT_ASSERT_ERR(ct_cudnn_rnn(ct_zeros(CT_SHAPE(T, B, I), CT_F64, CUDA0), w, h, h, NULL, CT_CUDNN_RNN_LSTM, H, 1,
                               false, false, true, true, &o, &hy, &cy, &r) == CT_OK,
                  CT_ERROR_TYPE, "float32, float16 or bfloat16");
    ct_tensor *a = NULL, *b = NULL, *cc = NULL, *d = NULL;
    CT_ASSERT_ERR(ct_cudnn_rnn_backward(x, w, h, h, NULL, o0, o0, hy0, cy0, ct_zeros(CT_SHAPE(1), CT_U8, CUDA0),
                                        CT_CUDNN_RNN_LSTM, H, 1, false, false, true, &a, &b, &cc, &d) == CT_OK,
                  CT_ERROR_VALUE, "reserve");
    assert_int_equal(ct_cudnn_rnn_backward(x, w, h, h, NULL, o0, o0, hy0, cy0, r0, CT_CUDNN_RNN_LSTM, H, 1, false,
                                           false, true, &a, &b, &cc, &d),
                     CT_OK);
    CT_ASSERT_SHAPE(d, nw);
    CT_ASSERT_SHAPE(cc, 1, B, H);
    ct_clear_error();
    ct_scope_end();
}

int main(void) {
    int rc = ct_test_require_gpu("test_cuda_rnn");
    if (rc)
        return rc;
    if (!ct_backends_cudnn_is_available()) {
        printf("test_cuda_rnn: no libcudnn (CT_CUDNN_LIBRARY): skipped\n");
        return CT_TEST_SKIP;
    }
    printf("test_cuda_rnn: cuDNN %lld\n", (long long)ct_backends_cudnn_version());
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_same_as_ops), cmocka_unit_test(test_double_backward), cmocka_unit_test(test_half),
        cmocka_unit_test(test_no_grad),     cmocka_unit_test(test_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
