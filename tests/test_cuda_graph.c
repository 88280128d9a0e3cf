/* CUDA graphs and private memory pools (docs/cuda-graphs.md): capture and replay give
 * the eager numbers, replays read static inputs copied in before them, the graph's
 * tensors live in its pool (stats and snapshots show it), two graphs share one pool
 * (graph trees) without growing it, random numbers replay fresh from the generator, a
 * captured AdamW step follows the learning rate set between replays, and what cannot
 * be captured (host copies, item, nonzero, synchronisation, allocations on other
 * streams, a first cuBLAS use, a new seed between random draws) is refused with the
 * op's name. The argument errors run in every build; the rest is
 * skipped (exit code 77) without a GPU. */
#include <string.h>

#include "alloc.h"
#include "cuda_testutil.h"
#include "ctorch/optim.h"

#define CUDA0 CT_CUDA(0)

#define assert_ct(p)                                                                                                  \
    do {                                                                                                              \
        if (!(p))                                                                                                     \
            fail_msg("%s is NULL: %s", #p, ct_last_error());                                                          \
    } while (0)

static ct_cuda_stream *g_stream;

/* The work captured: relu(x @ w + 1) summed over rows, then scaled. */
static ct_tensor *work(const ct_tensor *x, const ct_tensor *w) {
    ct_tensor *h = ct_relu(ct_add_scalar(ct_matmul(x, w), ct_scalar_float(1.0)));
    return ct_mul_scalar(ct_sum(h, CT_INDEX(1), 1, false, CT_DTYPE_UNDEFINED), ct_scalar_float(0.5));
}

static ct_tensor *gpu_values(const int64_t *shape, int nd, uint64_t seed) {
    return ct_to_device(ct_test_values(shape, nd, CT_F32, -1, 1, seed), CUDA0);
}

static void assert_same(const ct_tensor *a, const ct_tensor *b, const char *what) {
    ct_scope_begin();
    bool eq = false;
    assert_st(ct_equal(ct_to_device(a, CT_CPU), ct_to_device(b, CT_CPU), &eq));
    if (!eq)
        fail_msg("%s: replay and eager results differ", what);
    ct_scope_end();
}

static int stream_setup(void **state) {
    (void)state;
    return ct_cuda_stream_create(0, 0, &g_stream) == CT_OK ? 0 : -1;
}

/* A failed assertion leaves the test function early, maybe inside a capture: end it, so
 * that one failure does not turn the next tests' eager work into refusals. */
static int end_capture(void **state) {
    (void)state;
    if (ct_cuda_is_current_stream_capturing()) {
        ct_cuda_graph *g = NULL;
        if (ct_cuda_graph_end(g_stream, &g) == CT_OK)
            ct_cuda_graph_free(g);
    }
    ct_clear_error();
    ct_cuda_set_stream(0, NULL);
    return 0;
}

static int stream_teardown(void **state) {
    (void)state;
    ct_cuda_set_stream(0, NULL);
    return ct_cuda_stream_destroy(g_stream) == CT_OK ? 0 : -1;
}

/* ------------------------------------------------------------------ capture and replay */

static void test_replay_matches_eager(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *x = gpu_values(CT_SHAPE(64, 96), 1), *w = gpu_values(CT_SHAPE(96, 48), 2);
    /* warm-up on the capture stream: cuBLAS's handles and workspace exist afterwards */
    /* inputs made on the default stream are ready before the capture stream reads them */
    assert_st(ct_cuda_synchronize(0));
    assert_st(ct_cuda_set_stream(0, g_stream));
    assert_ct(work(x, w));
    assert_st(ct_cuda_set_stream(0, NULL));
    assert_st(ct_cuda_synchronize(0));

    assert_false(ct_cuda_is_current_stream_capturing());
    assert_st(ct_cuda_graph_begin(g_stream, NULL));
    assert_true(ct_cuda_is_current_stream_capturing());
    assert_ptr_equal(ct_cuda_current_stream(0), g_stream);
    ct_scope_begin();
    ct_tensor *y = ct_retain(work(x, w)); /* the static output */
    ct_scope_end();
    assert_ct(y);
    ct_cuda_graph *g = NULL;
    assert_st(ct_cuda_graph_end(g_stream, &g));
    assert_ct(g);
    assert_false(ct_cuda_is_current_stream_capturing());
    assert_null(ct_cuda_current_stream(0)); /* the previous current stream is back */

    for (uint64_t round = 0; round < 3; round++) {
        ct_scope_begin();
        ct_tensor *xin = gpu_values(CT_SHAPE(64, 96), 10 + round);
        assert_ct(ct_copy_(x, xin)); /* the static input */
        assert_st(ct_cuda_graph_replay(g));
        assert_st(ct_cuda_synchronize(0));
        ct_tensor *want = work(xin, w);
        assert_same(y, want, "replay");
        /* a second replay of the same input gives the same bits */
        ct_tensor *first = ct_clone(y);
        assert_st(ct_cuda_graph_replay(g));
        assert_st(ct_cuda_synchronize(0));
        assert_same(y, first, "second replay");
        ct_scope_end();
    }
    ct_release(y);
    ct_cuda_graph_free(g);
    ct_scope_end();
}

static void test_pool_memory(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *x = gpu_values(CT_SHAPE(256, 256), 3), *w = gpu_values(CT_SHAPE(256, 256), 4);
    /* inputs made on the default stream are ready before the capture stream reads them */
    assert_st(ct_cuda_synchronize(0));
    assert_st(ct_cuda_set_stream(0, g_stream));
    assert_ct(work(x, w));
    assert_st(ct_cuda_set_stream(0, NULL));
    ct_cuda_mempool *pool = NULL;
    assert_st(ct_cuda_mempool_create(0, &pool));
    assert_true(ct_cuda_mempool_id(pool) != 0);
    ct_cuda_mempool_stats ps;
    assert_st(ct_cuda_mempool_stats_get(pool, &ps));
    assert_int_equal(ps.reserved_bytes, 0);
    assert_int_equal(ps.uses, 1);
    int64_t before = ct_memory_allocated(CUDA0);

    assert_st(ct_cuda_graph_begin(g_stream, pool));
    ct_scope_begin();
    ct_tensor *y = ct_retain(work(x, w));
    ct_scope_end();
    ct_cuda_graph *g = NULL;
    assert_st(ct_cuda_graph_end(g_stream, &g));
    assert_int_equal(ct_cuda_mempool_id(ct_cuda_graph_pool(g)), ct_cuda_mempool_id(pool));

    assert_st(ct_cuda_mempool_stats_get(pool, &ps));
    assert_int_equal(ps.uses, 2); /* the handle and the graph */
    assert_true(ps.reserved_bytes >= 256 * 256 * 4); /* the (256, 256) product lived in it */
    assert_int_equal(ps.active_blocks, 1);           /* only y is still alive */
    assert_int_equal(ps.allocated_bytes, 1024);      /* 256 floats, one 512-byte unit pair */
    assert_int_equal(ct_memory_allocated(CUDA0) - before, 1024);
    /* the snapshot shows the pool's segments */
    ct_alloc_state s;
    assert_st(ct_alloc_state_get(CUDA0, &s));
    int in_pool = 0;
    for (size_t i = 0; i < s.nsegments; i++)
        in_pool += s.segments[i].pool == ct_cuda_mempool_id(pool);
    assert_int_equal(in_pool, ps.segments);
    ct_alloc_state_free(&s);
    /* an eager allocation on the capture stream does not take the pool's free memory */
    /* inputs made on the default stream are ready before the capture stream reads them */
    assert_st(ct_cuda_synchronize(0));
    assert_st(ct_cuda_set_stream(0, g_stream));
    ct_tensor *eager = ct_empty(CT_SHAPE(256, 256), CT_F32, CUDA0);
    assert_st(ct_cuda_set_stream(0, NULL));
    assert_st(ct_cuda_mempool_stats_get(pool, &ps));
    assert_int_equal(ps.active_blocks, 1);
    assert_non_null(eager); /* the scope releases it */

    ct_release(y);
    ct_cuda_mempool_release(pool);
    assert_st(ct_cuda_mempool_stats_get(ct_cuda_graph_pool(g), &ps));
    assert_int_equal(ps.uses, 1);
    ct_cuda_graph_free(g); /* the last use: the pool's memory goes back */
    ct_alloc_state s2;
    assert_st(ct_alloc_state_get(CUDA0, &s2));
    for (size_t i = 0; i < s2.nsegments; i++)
        assert_true(s2.segments[i].pool == 0);
    ct_alloc_state_free(&s2);
    ct_scope_end();
}

/* Graph trees: a training-like and an evaluation-like graph captured into one pool,
 * one after the other; the second fits in what the first freed. */
static void test_two_graphs_one_pool(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *x = gpu_values(CT_SHAPE(512, 512), 5), *w = gpu_values(CT_SHAPE(512, 512), 6);
    /* inputs made on the default stream are ready before the capture stream reads them */
    assert_st(ct_cuda_synchronize(0));
    assert_st(ct_cuda_set_stream(0, g_stream));
    assert_ct(work(x, w));
    assert_st(ct_cuda_set_stream(0, NULL));
    ct_cuda_mempool *pool = NULL;
    assert_st(ct_cuda_mempool_create(0, &pool));

    assert_st(ct_cuda_graph_begin(g_stream, pool));
    ct_scope_begin();
    ct_tensor *ya = ct_retain(work(ct_matmul(x, w), w)); /* more temporaries */
    ct_scope_end();
    ct_cuda_graph *ga = NULL;
    assert_st(ct_cuda_graph_end(g_stream, &ga));
    ct_cuda_mempool_stats pa, pb;
    assert_st(ct_cuda_mempool_stats_get(pool, &pa));

    assert_st(ct_cuda_graph_begin(g_stream, pool));
    ct_scope_begin();
    ct_tensor *yb = ct_retain(work(x, w));
    ct_scope_end();
    ct_cuda_graph *gb = NULL;
    assert_st(ct_cuda_graph_end(g_stream, &gb));
    assert_st(ct_cuda_mempool_stats_get(pool, &pb));
    assert_int_equal(pb.reserved_bytes, pa.reserved_bytes);
    assert_int_equal(pb.uses, 3);

    for (int round = 0; round < 2; round++) {
        ct_scope_begin();
        ct_tensor *xin = gpu_values(CT_SHAPE(512, 512), 20 + (uint64_t)round);
        assert_ct(ct_copy_(x, xin));
        assert_st(ct_cuda_graph_replay(ga));
        assert_st(ct_cuda_synchronize(0));
        assert_same(ya, work(ct_matmul(xin, w), w), "train graph");
        assert_st(ct_cuda_graph_replay(gb));
        assert_st(ct_cuda_synchronize(0));
        assert_same(yb, work(xin, w), "eval graph");
        ct_scope_end();
    }
    ct_release(ya);
    ct_release(yb);
    ct_cuda_graph_free(ga);
    ct_cuda_graph_free(gb);
    ct_cuda_mempool_release(pool);
    ct_scope_end();
}

/* Index checks run on the device during a capture (Note [Checks under capture]). */
static void test_checked_ops_capture(void **state) {
    (void)state;
    ct_scope_begin();
    int64_t ids[6] = {3, 0, 7, 7, 1, 5};
    ct_tensor *idx = ct_to_device(ct_from_data(ids, CT_SHAPE(6), CT_I64), CUDA0);
    ct_tensor *table = gpu_values(CT_SHAPE(8, 16), 7);
    /* inputs made on the default stream are ready before the capture stream reads them */
    assert_st(ct_cuda_synchronize(0));
    assert_st(ct_cuda_set_stream(0, g_stream));
    assert_ct(ct_embedding(idx, table, CT_NO_PADDING_IDX));
    assert_st(ct_cuda_set_stream(0, NULL));
    assert_st(ct_cuda_graph_begin(g_stream, NULL));
    ct_scope_begin();
    ct_tensor *y = ct_retain(ct_embedding(idx, table, CT_NO_PADDING_IDX));
    ct_scope_end();
    ct_cuda_graph *g = NULL;
    assert_st(ct_cuda_graph_end(g_stream, &g));
    int64_t ids2[6] = {1, 1, 2, 6, 0, 4};
    ct_tensor *idx2 = ct_to_device(ct_from_data(ids2, CT_SHAPE(6), CT_I64), CUDA0);
    assert_ct(ct_copy_(idx, idx2));
    assert_st(ct_cuda_graph_replay(g));
    assert_st(ct_cuda_synchronize(0));
    assert_same(y, ct_embedding(idx2, table, CT_NO_PADDING_IDX), "embedding");
    ct_release(y);
    ct_cuda_graph_free(g);
    ct_scope_end();
}

/* A whole training step (forward, backward, SGD with momentum) captured once and
 * replayed, against the same steps run eagerly from the same weights and batches. */
typedef struct {
    ct_tensor *w1, *w2;
    ct_optimizer *opt;
} mlp;

static void mlp_init_opt(mlp *m, bool adamw) {
    ct_scope_begin();
    m->w1 = ct_retain(ct_tensor_set_requires_grad(gpu_values(CT_SHAPE(32, 64), 30), true));
    m->w2 = ct_retain(ct_tensor_set_requires_grad(gpu_values(CT_SHAPE(64, 8), 31), true));
    ct_scope_end();
    ct_optim_options o = adamw ? ct_adamw_options(1e-2) : ct_sgd_options(0.05);
    if (adamw)
        o.capturable = 1; /* Note [Capturable step]: the step number on the device */
    else
        o.momentum = 0.9;
    ct_tensor *ps[2] = {m->w1, m->w2};
    m->opt = ct_optimizer_new(adamw ? CT_OPTIM_ADAMW : CT_OPTIM_SGD, ps, 2, &o);
    assert_ct(m->opt);
}

static void mlp_init(mlp *m) { mlp_init_opt(m, false); }

static void mlp_free(mlp *m) {
    ct_optimizer_free(m->opt);
    ct_release(m->w1);
    ct_release(m->w2);
}

/* One step on (x, y), clipped when clip > 0; the loss stays in the caller's scope. */
static ct_tensor *mlp_step_clip(mlp *m, const ct_tensor *x, const ct_tensor *y, double clip) {
    ct_tensor *out = ct_matmul(ct_relu(ct_matmul(x, m->w1)), m->w2);
    ct_tensor *loss = ct_mse_loss(out, y, CT_REDUCTION_MEAN);
    if (!loss || ct_optimizer_zero_grad(m->opt, false) || ct_backward(loss, NULL, false, false) ||
        (clip > 0 ? ct_optimizer_step_clipped(m->opt, clip, 2.0, NULL) : ct_optimizer_step(m->opt)))
        return NULL;
    return loss;
}

static ct_tensor *mlp_step(mlp *m, const ct_tensor *x, const ct_tensor *y) { return mlp_step_clip(m, x, y, 0); }

/* The graphed MLP's weights against the eager one's once the device is done, then both
 * freed with the graph and its loss. */
static void finish_pair(mlp *eager, mlp *graphed, ct_tensor *loss, ct_cuda_graph *g) {
    assert_st(ct_cuda_synchronize(0));
    ct_test_assert_close(graphed->w1, ct_to_device(eager->w1, CT_CPU), 1e-5, 1e-6, "w1", __FILE__, __LINE__);
    ct_test_assert_close(graphed->w2, ct_to_device(eager->w2, CT_CPU), 1e-5, 1e-6, "w2", __FILE__, __LINE__);
    ct_release(loss);
    ct_cuda_graph_free(g);
    mlp_free(eager);
    mlp_free(graphed);
}

/* One clipped step of m on (x, y) captured on g_stream into a private pool; *loss gets
 * its static loss (an own reference). */
static ct_cuda_graph *capture_clipped_step(mlp *m, const ct_tensor *x, const ct_tensor *y, ct_tensor **loss) {
    assert_st(ct_cuda_graph_begin(g_stream, NULL));
    ct_scope_begin();
    *loss = ct_retain(mlp_step_clip(m, x, y, 0.5));
    ct_scope_end();
    ct_cuda_graph *g = NULL;
    assert_st(ct_cuda_graph_end(g_stream, &g));
    assert_ct(*loss);
    return g;
}

static void test_training_step(void **state) {
    (void)state;
    ct_scope_begin();
    mlp eager, graphed;
    mlp_init(&eager);
    mlp_init(&graphed);
    ct_tensor *xs[6], *ys[6];
    for (int i = 0; i < 6; i++) {
        xs[i] = gpu_values(CT_SHAPE(16, 32), 40 + (uint64_t)i);
        ys[i] = gpu_values(CT_SHAPE(16, 8), 50 + (uint64_t)i);
    }
    for (int i = 0; i < 6; i++) {
        ct_scope_begin();
        assert_ct(mlp_step(&eager, xs[i], ys[i]));
        ct_scope_end();
    }
    /* static inputs; step 0 eagerly on the capture stream is the warm-up (it makes the
     * gradients and the momentum buffers the graph then updates in place) */
    ct_tensor *x = ct_clone(xs[0]), *y = ct_clone(ys[0]);
    /* inputs made on the default stream are ready before the capture stream reads them */
    assert_st(ct_cuda_synchronize(0));
    assert_st(ct_cuda_set_stream(0, g_stream));
    ct_scope_begin();
    assert_ct(mlp_step(&graphed, x, y));
    ct_scope_end();
    assert_st(ct_cuda_set_stream(0, NULL));
    assert_st(ct_cuda_graph_begin(g_stream, NULL));
    ct_scope_begin();
    ct_tensor *loss = ct_retain(mlp_step(&graphed, x, y));
    ct_scope_end();
    ct_cuda_graph *g = NULL;
    assert_st(ct_cuda_graph_end(g_stream, &g));
    assert_ct(loss);
    for (int i = 1; i < 6; i++) {
        assert_ct(ct_copy_(x, xs[i]));
        assert_ct(ct_copy_(y, ys[i]));
        assert_st(ct_cuda_graph_replay(g));
    }
    finish_pair(&eager, &graphed, loss, g);
    ct_scope_end();
}

/* Two equal MLPs with AdamW: graphed has the capturable option, eager (the reference)
 * passes the lr and the step by value. */
static void mlp_adamw_pair(mlp *eager, mlp *graphed) {
    mlp_init_opt(eager, true);
    mlp_init_opt(graphed, true);
    ct_optim_options o;
    assert_st(ct_optimizer_get_options(eager->opt, 0, &o));
    o.capturable = 0;
    assert_st(ct_optimizer_set_options(eager->opt, 0, &o));
}

/* The GPT training step's shape: AdamW (fused, capturable: the step number lives on
 * the device, so the bias corrections advance at every replay) with clipping folded
 * in, captured and replayed, against eager steps without the option. */
static void test_adamw_step_capturable(void **state) {
    (void)state;
    ct_scope_begin();
    mlp eager, graphed;
    mlp_adamw_pair(&eager, &graphed);
    ct_tensor *xs[8], *ys[8];
    for (int i = 0; i < 8; i++) {
        xs[i] = gpu_values(CT_SHAPE(16, 32), 60 + (uint64_t)i);
        ys[i] = gpu_values(CT_SHAPE(16, 8), 70 + (uint64_t)i);
    }
    for (int i = 0; i < 8; i++) {
        ct_scope_begin();
        assert_ct(mlp_step_clip(&eager, xs[i], ys[i], 0.5));
        ct_scope_end();
    }
    ct_tensor *x = ct_clone(xs[0]), *y = ct_clone(ys[0]);
    /* inputs made on the default stream are ready before the capture stream reads them */
    assert_st(ct_cuda_synchronize(0));
    assert_st(ct_cuda_set_stream(0, g_stream));
    ct_scope_begin();
    assert_ct(mlp_step_clip(&graphed, x, y, 0.5)); /* warm-up: step 1 */
    ct_scope_end();
    ct_tensor *loss = NULL;
    ct_cuda_graph *g = capture_clipped_step(&graphed, x, y, &loss);
    for (int i = 1; i < 8; i++) {
        assert_ct(ct_copy_(x, xs[i]));
        assert_ct(ct_copy_(y, ys[i]));
        assert_st(ct_cuda_graph_replay(g));
    }
    assert_st(ct_cuda_set_stream(0, NULL));
    finish_pair(&eager, &graphed, loss, g);
    ct_scope_end();
}

/* Note [Device learning rate] in src/optim/optimizer.c: the captured AdamW step reads
 * the learning rate from the device, so a rate changed between replays, by
 * ct_optimizer_set_lr and by a scheduler, is the one the next replay uses. The
 * reference runs eagerly without the option (lr and step by value) through the same
 * schedule: cosine annealing from 1e-2 stepped after every step, with the rate set to
 * 3e-2 before step 4 (the schedule goes on from there, as torch's chainable form
 * does). A graph that kept the capture's rate would be off by about 1e-2. */
#define LR_STEPS 8

static void lr_before_step(ct_optimizer *opt, int i) {
    if (i == 4)
        assert_st(ct_optimizer_set_lr(opt, 0, 3e-2));
}

static void test_adamw_lr_schedule_capturable(void **state) {
    (void)state;
    ct_scope_begin();
    mlp eager, graphed;
    mlp_adamw_pair(&eager, &graphed);
    ct_lr_scheduler *se = ct_cosineannealinglr_new(eager.opt, LR_STEPS, 1e-3);
    ct_lr_scheduler *sg = ct_cosineannealinglr_new(graphed.opt, LR_STEPS, 1e-3);
    assert_ct(se);
    assert_ct(sg);
    ct_tensor *xs[LR_STEPS], *ys[LR_STEPS];
    for (int i = 0; i < LR_STEPS; i++) {
        xs[i] = gpu_values(CT_SHAPE(16, 32), 80 + (uint64_t)i);
        ys[i] = gpu_values(CT_SHAPE(16, 8), 90 + (uint64_t)i);
    }
    double lrs[LR_STEPS];
    for (int i = 0; i < LR_STEPS; i++) {
        lr_before_step(eager.opt, i);
        lrs[i] = ct_optimizer_get_lr(eager.opt, 0);
        ct_scope_begin();
        assert_ct(mlp_step_clip(&eager, xs[i], ys[i], 0.5));
        ct_scope_end();
        assert_st(ct_lr_scheduler_step(se));
    }
    ct_tensor *x = ct_clone(xs[0]), *y = ct_clone(ys[0]);
    /* inputs made on the default stream are ready before the capture stream reads them */
    assert_st(ct_cuda_synchronize(0));
    assert_st(ct_cuda_set_stream(0, g_stream));
    ct_scope_begin();
    assert_ct(mlp_step_clip(&graphed, x, y, 0.5)); /* warm-up: step 0, which makes step_t and lr_t */
    ct_scope_end();
    assert_st(ct_lr_scheduler_step(sg));
    /* the capture records the step and runs nothing; the scheduler is not stepped for it */
    ct_tensor *loss = NULL;
    ct_cuda_graph *g = capture_clipped_step(&graphed, x, y, &loss);
    for (int i = 1; i < LR_STEPS; i++) {
        lr_before_step(graphed.opt, i); /* a fill on the current stream (g_stream), before the replay */
        assert_true(ct_optimizer_get_lr(graphed.opt, 0) == lrs[i]);
        assert_ct(ct_copy_(x, xs[i]));
        assert_ct(ct_copy_(y, ys[i]));
        assert_st(ct_cuda_graph_replay(g));
        assert_st(ct_lr_scheduler_step(sg));
    }
    assert_st(ct_cuda_set_stream(0, NULL));
    assert_true(lrs[3] != lrs[4] && lrs[1] != lrs[LR_STEPS - 1]); /* the rate did change */
    ct_lr_scheduler_free(se);
    ct_lr_scheduler_free(sg);
    finish_pair(&eager, &graphed, loss, g);
    ct_scope_end();
}

/* ------------------------------------------------------------------ random numbers */

/* Note [Random numbers in a graph]: rand, randn, dropout (bernoulli_) and flash
 * attention's dropout in a graph. A replay draws what the same calls draw eagerly from
 * the generator's state at the replay, and the capture draws nothing, so two replays
 * after a seed and a capture give the first and second eager runs after that seed,
 * and the CPU's numbers (Note [Same numbers on CPU and GPU]). */
#define NRANDOM 5
static void random_work(const ct_tensor *x, ct_tensor **out) {
    out[0] = ct_rand(CT_SHAPE(37, 5), CT_F32, CUDA0);
    out[1] = ct_dropout(x, 0.3, true);
    out[2] = ct_randn(CT_SHAPE(1001), CT_F64, CUDA0);
    out[3] = ct_mul_scalar(ct_rand(CT_SHAPE(64), CT_BF16, CUDA0), ct_scalar_float(2.0));
    /* (2, 2, 33, 16) bfloat16 heads: the flash kernels, dropout inside */
    ct_tensor *h = ct_to_dtype(ct_view(ct_narrow(ct_reshape(x, CT_SHAPE(33 * 70)), 0, 0, 2 * 2 * 33 * 16),
                                       CT_SHAPE(2, 2, 33, 16)),
                               CT_BF16);
    out[4] = ct_scaled_dot_product_attention(h, h, h, NULL, 0.4, true, NULL);
}

static void test_random_replays(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *x = gpu_values(CT_SHAPE(33, 70), 11);
    ct_tensor *eager1[NRANDOM], *eager2[NRANDOM], *cpu1[1], *captured[NRANDOM];
    ct_manual_seed(5);
    random_work(x, eager1);
    random_work(x, eager2);
    ct_manual_seed(5);
    cpu1[0] = ct_rand(CT_SHAPE(37, 5), CT_F32, CT_CPU);
    for (int i = 0; i < NRANDOM; i++) {
        assert_ct(eager1[i]);
        assert_ct(eager2[i]);
        eager1[i] = ct_to_device(eager1[i], CT_CPU);
        eager2[i] = ct_to_device(eager2[i], CT_CPU);
    }
    assert_same(eager1[0], cpu1[0], "eager rand against the CPU's");

    ct_manual_seed(5);
    uint64_t before = ct_initial_seed();
    assert_st(ct_cuda_graph_begin(g_stream, NULL));
    random_work(x, captured);
    ct_cuda_graph *g = NULL;
    assert_st(ct_cuda_graph_end(g_stream, &g));
    assert_int_equal(ct_initial_seed(), before);
    for (int i = 0; i < NRANDOM; i++)
        assert_ct(captured[i]);

    assert_st(ct_cuda_graph_replay(g)); /* no seed again: the capture drew nothing */
    assert_st(ct_cuda_stream_synchronize(g_stream));
    for (int i = 0; i < NRANDOM; i++)
        assert_same(captured[i], eager1[i], "first replay after the seed and the capture");
    assert_same(captured[0], cpu1[0], "replayed rand against the CPU's");
    assert_st(ct_cuda_graph_replay(g));
    assert_st(ct_cuda_stream_synchronize(g_stream));
    for (int i = 0; i < NRANDOM; i++)
        assert_same(captured[i], eager2[i], "second replay");
    ct_manual_seed(5);
    assert_st(ct_cuda_graph_replay(g));
    assert_st(ct_cuda_stream_synchronize(g_stream));
    for (int i = 0; i < NRANDOM; i++)
        assert_same(captured[i], eager1[i], "a replay after the seed again");
    assert_st(ct_cuda_graph_replay(g));
    /* eager draws after the replays continue the stream: the third run's numbers */
    ct_tensor *third = ct_to_device(ct_rand(CT_SHAPE(37, 5), CT_F32, CUDA0), CT_CPU);
    ct_manual_seed(5);
    ct_tensor *eager3[NRANDOM];
    random_work(x, eager3);
    random_work(x, eager3);
    assert_same(third, ct_to_device(ct_rand(CT_SHAPE(37, 5), CT_F32, CUDA0), CT_CPU), "draws after the replays");
    ct_cuda_graph_free(g);
    ct_scope_end();
}

/* ------------------------------------------------------------------ refusals */

/* Begins a capture, runs what must be refused, checks its error names op, and checks
 * that ending the capture reports it and returns no graph. */
#define EXPECT_REFUSED(call, op)                                                                                      \
    do {                                                                                                              \
        assert_st(ct_cuda_graph_begin(g_stream, NULL));                                                \
        ct_scope_begin();                                                                                             \
        bool failed = (call);                                                                                         \
        char msg[512];                                                                                                \
        snprintf(msg, sizeof msg, "%s", ct_last_error());                                                             \
        ct_scope_end();                                                                                               \
        ct_cuda_graph *g_ = NULL;                                                                                     \
        ct_status end_ = ct_cuda_graph_end(g_stream, &g_);                                                           \
        assert_true(failed);                                                                                          \
        if (!strstr(msg, op) || !strstr(msg, "CUDA graph cannot capture"))                                           \
            fail_msg("expected a refusal naming %s, got: %s", op, msg);                                               \
        assert_int_equal(end_, CT_ERROR_RUNTIME);                                                                     \
        assert_null(g_);                                                                                              \
        assert_non_null(strstr(ct_last_error(), op));                                                                 \
        assert_false(ct_cuda_is_current_stream_capturing());                                                         \
    } while (0)

static void test_refusals(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *x = gpu_values(CT_SHAPE(4, 4), 8);
    double v = 0;
    EXPECT_REFUSED(ct_item_double(ct_sum(x, NULL, 0, false, CT_DTYPE_UNDEFINED), &v) != CT_OK, "item");
    EXPECT_REFUSED(ct_nonzero(x) == NULL, "nonzero");
    EXPECT_REFUSED(ct_to_device(x, CT_CPU) == NULL, "to");
    EXPECT_REFUSED(ct_to_device(ct_ones(CT_SHAPE(3), CT_F32, CT_CPU), CUDA0) == NULL, "to");
    /* random numbers are captured (test_random_replays), but from one seed */
    EXPECT_REFUSED(ct_rand(CT_SHAPE(4), CT_F32, CUDA0) != NULL &&
                       (ct_manual_seed(9), ct_rand(CT_SHAPE(4), CT_F32, CUDA0) == NULL) &&
                       strstr(ct_last_error(), "seeded again") != NULL,
                   "rand");
    EXPECT_REFUSED(ct_cuda_synchronize(0) != CT_OK, "cuda_synchronize");
    EXPECT_REFUSED(ct_cuda_stream_synchronize(g_stream) != CT_OK, "cuda_stream_synchronize");
    ct_scope_end();
    /* an allocation on another stream than the captured one is refused; it never
     * happened, so the capture itself is sound */
    assert_st(ct_cuda_graph_begin(g_stream, NULL));
    assert_null(ct_alloc_stream(CUDA0, 4096, 0));
    assert_non_null(strstr(ct_last_error(), "outside the private memory pool"));
    ct_cuda_graph *g = NULL;
    assert_st(ct_cuda_graph_end(g_stream, &g));
    ct_cuda_graph_free(g);
}

/* ------------------------------------------------------------------ argument errors (every build) */

static void test_argument_errors(void **state) {
    (void)state;
    ct_cuda_mempool *pool = (ct_cuda_mempool *)1;
    ct_clear_error(); /* a NULL argument propagates an earlier error */
    assert_int_equal(ct_cuda_mempool_create(0, NULL), CT_ERROR_NULL_ARGUMENT);
    if (!ct_cuda_is_available()) {
        assert_int_not_equal(ct_cuda_mempool_create(0, &pool), CT_OK);
        assert_null(pool);
        assert_int_not_equal(ct_cuda_graph_begin(NULL, NULL), CT_OK);
    } else {
        assert_int_equal(ct_cuda_mempool_create(-1, &pool), CT_ERROR_DEVICE);
        assert_int_equal(ct_cuda_mempool_create(ct_cuda_device_count(), &pool), CT_ERROR_DEVICE);
        assert_null(pool);
        /* the default stream cannot be captured */
        assert_int_equal(ct_cuda_graph_begin(NULL, NULL), CT_ERROR_RUNTIME);
        assert_non_null(strstr(ct_last_error(), "not on the default stream"));
        ct_cuda_graph *g = (ct_cuda_graph *)1;
        assert_int_equal(ct_cuda_graph_end(NULL, &g), CT_ERROR_RUNTIME); /* nothing being captured */
        assert_null(g);
        assert_non_null(strstr(ct_last_error(), "not capturing"));
    }
    assert_int_equal(ct_cuda_graph_begin_mode(NULL, NULL, (ct_cuda_capture_mode)7), CT_ERROR_VALUE);
    assert_non_null(strstr(ct_last_error(), "invalid capture mode 7"));
    ct_clear_error();
    assert_int_equal(ct_cuda_graph_end(NULL, NULL), CT_ERROR_NULL_ARGUMENT);
    assert_int_equal(ct_cuda_graph_replay(NULL), CT_ERROR_NULL_ARGUMENT);
    assert_null(ct_cuda_graph_pool(NULL));
    ct_cuda_mempool_stats ps;
    assert_int_equal(ct_cuda_mempool_stats_get(NULL, &ps), CT_ERROR_NULL_ARGUMENT);
    assert_int_equal(ct_cuda_mempool_id(NULL), 0);
    ct_cuda_graph_free(NULL);
    ct_cuda_mempool_release(NULL);
    assert_false(ct_cuda_is_current_stream_capturing());
}

static void test_capture_state_errors(void **state) {
    (void)state;
    ct_cuda_stream *other = NULL;
    assert_st(ct_cuda_stream_create(0, 0, &other));
    assert_st(ct_cuda_graph_begin(g_stream, NULL));
    assert_int_equal(ct_cuda_graph_begin(other, NULL), CT_ERROR_RUNTIME); /* one capture per thread */
    assert_non_null(strstr(ct_last_error(), "already capturing"));
    ct_cuda_graph *g = NULL;
    assert_int_equal(ct_cuda_graph_end(other, &g), CT_ERROR_RUNTIME); /* not the captured stream */
    assert_non_null(strstr(ct_last_error(), "another stream"));
    /* an empty capture is a graph that does nothing */
    assert_st(ct_cuda_graph_end(g_stream, &g));
    assert_st(ct_cuda_graph_replay(g));
    ct_cuda_graph_free(g);
    /* a pool in use by a capture is not released under it */
    ct_cuda_mempool *pool = NULL;
    assert_st(ct_cuda_mempool_create(0, &pool));
    assert_st(ct_cuda_graph_begin(g_stream, pool));
    ct_cuda_mempool_stats ps;
    assert_st(ct_cuda_mempool_stats_get(pool, &ps));
    assert_int_equal(ps.uses, 2);
    assert_st(ct_cuda_graph_end(g_stream, &g));
    ct_cuda_mempool_release(pool);
    ct_cuda_graph_free(g);
    assert_st(ct_cuda_stream_destroy(other));
}

int main(void) {
    const struct CMUnitTest always[] = {cmocka_unit_test(test_argument_errors)};
    int rc = cmocka_run_group_tests_name("arguments", always, NULL, NULL);
    int skip = ct_test_require_gpu("test_cuda_graph");
    if (skip)
        return rc ? rc : skip;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_replay_matches_eager, end_capture),
        cmocka_unit_test_teardown(test_pool_memory, end_capture),
        cmocka_unit_test_teardown(test_two_graphs_one_pool, end_capture),
        cmocka_unit_test_teardown(test_checked_ops_capture, end_capture),
        cmocka_unit_test_teardown(test_training_step, end_capture),
        cmocka_unit_test_teardown(test_adamw_step_capturable, end_capture),
        cmocka_unit_test_teardown(test_adamw_lr_schedule_capturable, end_capture),
        cmocka_unit_test_teardown(test_random_replays, end_capture),
        cmocka_unit_test_teardown(test_refusals, end_capture),
        cmocka_unit_test_teardown(test_capture_state_errors, end_capture),
    };
    return rc | cmocka_run_group_tests_name("gpu", tests, stream_setup, stream_teardown);
}
