/* The nccl backend on 2 GPUs: collectives exact on integer-valued data of odd sizes,
 * send/recv, async work ordered with the current stream, and DDP. Without CUDA, NCCL
 * or 2 devices it checks the error a nccl group gives and skips the rest. Each rank is
 * a forked process that has not touched CUDA before the fork. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"
#include "dist_ranks.h"

static const int64_t sizes[] = {1, 7, 1000003};

static double val(int r, int64_t i) { return (double)((r + 1) * ((i * 7 + r) % 13)) - 20.0; }

static int nccl_rank(int r, int n, const char *dir) {
    ct_cuda_set_device(r);
    ct_store *store = ct_store_file(dir, 30000);
    ct_process_group *pg = store ? ct_process_group_new("nccl", store, r, n, 30000) : NULL;
    RCHECK(pg);
    ct_device dev = {CT_DEVICE_CUDA, r};
    const ct_dtype dts[] = {CT_F32, CT_BF16, CT_I64};
    for (size_t si = 0; si < 3; si++) {
        int64_t m = sizes[si];
        for (size_t di = 0; di < 3; di++) {
            ct_scope_begin();
            ct_dtype d = dts[di];
            double *h = malloc((size_t)m * sizeof *h);
            for (int64_t i = 0; i < m; i++)
                h[i] = val(r, i);
            ct_tensor *t = ct_to_device(ct_to_dtype(ct_from_data(h, CT_SHAPE(m), CT_F64), d), dev);
            RCHECK(t && ct_all_reduce(pg, t, CT_REDUCE_SUM) == CT_OK);
            ct_tensor *back = ct_to_dtype(ct_to_device(t, CT_CPU), CT_F64);
            RCHECK(back);
            const double *b = ct_tensor_data(back);
            for (int64_t i = 0; i < m; i++) {
                double want = 0;
                for (int k = 0; k < n; k++)
                    want += val(k, i);
                RCHECK(b[i] == want);
            }
            /* all_gather and broadcast on the same data. */
            ct_tensor *src = ct_to_device(ct_to_dtype(ct_from_data(h, CT_SHAPE(m), CT_F64), d), dev);
            ct_tensor *all = ct_empty(CT_SHAPE(m * n), d, dev);
            RCHECK(ct_all_gather(pg, all, src) == CT_OK);
            back = ct_to_dtype(ct_to_device(all, CT_CPU), CT_F64);
            b = ct_tensor_data(back);
            for (int k = 0; k < n; k++)
                RCHECK(b[k * m + m - 1] == val(k, m - 1));
            RCHECK(ct_broadcast(pg, src, 1) == CT_OK);
            back = ct_to_dtype(ct_to_device(src, CT_CPU), CT_F64);
            RCHECK(((const double *)ct_tensor_data(back))[0] == val(1, 0));
            free(h);
            ct_scope_end();
        }
    }
    /* Async work: the current stream waits for it, the host does not. */
    ct_scope_begin();
    ct_tensor *x = ct_full(CT_SHAPE(1 << 20), ct_scalar_float(r + 1), CT_F32, dev);
    ct_work *w = ct_all_reduce_async(pg, x, CT_REDUCE_AVG);
    RCHECK(w && ct_work_wait(w) == CT_OK);
    ct_tensor *y = ct_mul_scalar(x, ct_scalar_float(2)); /* ordered after the all-reduce */
    double v = 0;
    RCHECK(ct_item_double(ct_select(ct_to_device(y, CT_CPU), 0, 5), &v) == CT_OK);
    RCHECK(v == (double)(n + 1)); /* 2 * mean(1..n) */
    RCHECK(ct_work_is_completed(w));
    ct_work_free(w);
    ct_scope_end();
    /* DDP on the GPUs: after a few steps on different data the ranks hold the same
     * weights (the bucket all-reduces ran on the group's stream). */
    ct_manual_seed(3);
    ct_module *lin = ct_nn_linear(64, 32, true, CT_F32);
    RCHECK(lin && ct_module_to(lin, dev, CT_DTYPE_UNDEFINED) == CT_OK);
    ct_tensor *ps[2];
    RCHECK(ct_module_parameters(lin, ps, NULL, 2) == 2);
    ct_ddp_options o = ct_ddp_defaults();
    o.bucket_cap_first = 4096; /* two buckets */
    ct_ddp *ddp = ct_ddp_new(pg, lin, &o);
    ct_optim_options so = ct_sgd_options(0.1);
    ct_optimizer *opt = ct_optimizer_new(CT_OPTIM_SGD, ps, 2, &so);
    RCHECK(ddp && opt && ct_ddp_num_buckets(ddp) == 2);
    for (int step = 0; step < 3; step++) {
        ct_scope_begin();
        ct_manual_seed(100 + (uint64_t)(step * n + r)); /* each rank its own batch */
        ct_tensor *xb = ct_to_device(ct_randn(CT_SHAPE(16, 64), CT_F32, CT_CPU), dev);
        ct_tensor *loss = ct_mean(ct_mul(ct_module_forward(lin, xb), ct_module_forward(lin, xb)), NULL, 0, false,
                                  CT_DTYPE_UNDEFINED);
        RCHECK(ct_ddp_zero_grad(ddp) == CT_OK && ct_backward(loss, NULL, false, false) == CT_OK);
        RCHECK(ct_ddp_finish(ddp) == CT_OK && ct_optimizer_step(opt) == CT_OK);
        ct_scope_end();
    }
    ct_scope_begin();
    ct_tensor *w0 = ct_clone(ps[0]);
    RCHECK(ct_broadcast(pg, w0, 0) == CT_OK);
    ct_tensor *same = ct_to_device(ct_eq(w0, ps[0]), CT_CPU);
    double all = 0;
    RCHECK(ct_item_double(ct_sum(ct_to_dtype(same, CT_F64), NULL, 0, false, CT_DTYPE_UNDEFINED), &all) == CT_OK);
    RCHECK(all == 64 * 32);
    ct_scope_end();
    ct_optimizer_free(opt);
    ct_ddp_free(ddp);
    ct_module_free(lin);
    RCHECK(ct_barrier(pg) == CT_OK);
    ct_process_group_free(pg);
    ct_store_free(store);
    return 0;
}

static void test_nccl_two_gpus(void **state) {
    char dir[64];
    snprintf(dir, sizeof dir, "/tmp/ct_nccl_test_XXXXXX");
    assert_non_null(mkdtemp(dir));
    fflush(NULL);
    pid_t pids[2];
    for (int r = 0; r < 2; r++) {
        pids[r] = fork();
        if (pids[r] == 0)
            _exit(nccl_rank(r, 2, dir));
    }
    for (int r = 0; r < 2; r++) {
        int st = 0;
        waitpid(pids[r], &st, 0);
        assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    }
    assert_int_equal(remove_dir(dir), 0);
}

/* In a child: whether this machine has 2 GPUs and NCCL (the parent stays CUDA-free). */
static int probe(void) {
    fflush(NULL);
    pid_t p = fork();
    if (p == 0) {
        if (ct_cuda_device_count() < 2)
            _exit(77);
        _exit(0);
    }
    int st = 0;
    waitpid(p, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 1;
}

int main(void) {
    /* Without CUDA a nccl group is a clear error, never a crash. */
    pid_t p = fork();
    if (p == 0) {
        if (ct_cuda_is_available())
            _exit(0);
        ct_clear_error();
        char dir[64];
        snprintf(dir, sizeof dir, "/tmp/ct_nccl_err_XXXXXX");
        if (!mkdtemp(dir))
            _exit(1);
        ct_store *s = ct_store_file(dir, 1000);
        ct_process_group *pg = ct_process_group_new("nccl", s, 0, 1, 1000);
        int ok = !pg && ct_last_status() == CT_ERROR_DEVICE && strstr(ct_last_error(), "needs a CUDA device");
        if (!ok)
            fprintf(stderr, "unexpected: %s\n", ct_last_error());
        ct_store_free(s);
        if (remove_dir(dir) != 0)
            ok = 0;
        _exit(ok ? 0 : 1);
    }
    int st = 0;
    waitpid(p, &st, 0);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        fprintf(stderr, "the nccl backend without CUDA did not give the expected error\n");
        return 1;
    }
    if (probe() != 0) {
        printf("fewer than 2 CUDA devices: skipped\n");
        return 77;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_nccl_two_gpus),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
