/* Every allocation failure is an error: no abort, no hang, no leak.
 *
 * A small training loop (synthetic data through a DataLoader with one worker thread, a
 * conv + linear model, cross-entropy, backward, SGD with momentum, three steps), then
 * saving its state_dict as .pt and .safetensors, loading both back, printing a
 * parameter and calling the module API around forward (module_api), runs once per N
 * in a forked child in which the N-th host allocation fails. The first op of each
 * child also starts the dispatcher, so its kernel registration is swept too. The
 * failing allocation is chosen by wrapping malloc, calloc, realloc, aligned_alloc,
 * posix_memalign, strdup and strndup at link time (tests/CMakeLists.txt links this
 * test with --wrap), which catches every allocation the library makes, not only those
 * that go through its helpers. Each child must end normally; a call that fails must
 * return NULL or a status with a message; the CPU allocator must hold no memory at the
 * end; an alarm turns a hang into a failure, and in the sanitizer build LeakSanitizer
 * checks the child before it exits.
 *
 * Every N is swept, up to a little past the count of a clean run (every 4th under the
 * sanitizers, to keep the test well under a minute there; CT_TEST_SWEEP_STRIDE=k sets
 * the stride). The children run one OpenMP thread and OpenBLAS' GEMM: a fresh OpenMP
 * pool and oneDNN's kernel generation in every child took most of the time. */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "testutil.h"

#if defined(__SANITIZE_ADDRESS__)
#define CT_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CT_TEST_ASAN 1
#endif
#endif
#ifdef CT_TEST_ASAN
#include <sanitizer/lsan_interface.h>
#endif

/* ------------------------------------------------------------------ failing allocations */

static atomic_long g_count; /* allocations seen in this process */
static long g_fail_at;      /* the one to fail; 0: none */
static long g_warm_count;   /* allocations made by the first op (the dispatcher's start-up) */

static bool fail_now(void) { return atomic_fetch_add_explicit(&g_count, 1, memory_order_relaxed) + 1 == g_fail_at; }

#include "alloc_wrap.h"

/* ------------------------------------------------------------------ the workload */

enum { CHILD_OK = 0, CHILD_SILENT = 3, CHILD_LEAK = 4, CHILD_WRONG = 5 };

static int silent; /* a call failed without saying why */

/* A failed call must leave an error behind. */
static bool failed_call(const char *what) {
    if (ct_last_status() == CT_OK || !ct_last_error()[0]) {
        fprintf(stderr, "%s failed without an error (allocation %ld)\n", what, g_fail_at);
        silent = 1;
    }
    return true;
}
#define OK_PTR(x) ((ct_clear_error(), (x)) != NULL || !failed_call(#x))
#define OK_ST(x) ((ct_clear_error(), (x)) == CT_OK || !failed_call(#x))

static ct_module *make_model(void) {
    ct_module *m[4] = {NULL};
    const int64_t k[2] = {3, 3}, one[2] = {1, 1}, zero[2] = {0, 0};
    bool ok = OK_PTR(m[0] = ct_nn_conv2d(1, 4, k, one, zero, one, 1, true, CT_F32)) && OK_PTR(m[1] = ct_nn_relu()) &&
              OK_PTR(m[2] = ct_nn_flatten(1, -1)) && OK_PTR(m[3] = ct_nn_linear(4 * 4 * 4, 4, true, CT_F32));
    if (!ok) {
        for (int i = 0; i < 4; i++)
            ct_module_free(m[i]);
        return NULL;
    }
    ct_module *seq = NULL;
    (void)OK_PTR(seq = ct_nn_sequential(m, 4)); /* owns the layers, also when it fails */
    return seq;
}

static ct_status train_step(ct_module *model, ct_optimizer *opt, ct_dataloader *dl) {
    ct_scope_begin();
    ct_tensor *batch[2];
    ct_tensor *out = NULL, *loss = NULL;
    int got = (ct_clear_error(), ct_dataloader_next(dl, batch));
    bool ok = got == 1 || (got < 0 && failed_call("ct_dataloader_next"));
    if (ok && got != 1)
        ok = false;
    ok = ok && OK_PTR(out = ct_module_forward(model, batch[0])) &&
         OK_PTR(loss = ct_cross_entropy(out, batch[1], NULL, CT_REDUCTION_MEAN, -100, 0.0)) &&
         OK_ST(ct_optimizer_zero_grad(opt, true)) && OK_ST(ct_backward(loss, NULL, false, false)) &&
         OK_ST(ct_optimizer_step(opt));
    ct_scope_end();
    return ok ? CT_OK : CT_ERROR_RUNTIME;
}

static ct_status add_one(ct_module *m, const ct_tensor *const *in, int nin, ct_tensor **out, int *nout, int cap,
                         void *ud) {
    (void)m, (void)in, (void)nin, (void)nout, (void)cap, (void)ud;
    return (out[0] = ct_add_scalar(out[0], ct_scalar_float(1))) != NULL ? CT_OK : ct_last_status();
}

static int count_tensor(const char *name, ct_tensor *t, void *ud) {
    (void)name, (void)t;
    ++*(int *)ud;
    return 0;
}

/* The module API around forward: printing, a hook, dotted names, a walk, the state
 * dict file and its metadata, a non-strict load that lists what it skipped. */
static bool module_api(ct_module *model, ct_tensor *x, const char *st) {
    char *repr = NULL;
    ct_module *tree = NULL;
    ct_value *sd = NULL, *meta = NULL, *missing = NULL;
    int64_t hook = -1;
    int n = 0;
    bool ok = OK_PTR(repr = ct_module_to_string(model)) &&
              ((ct_clear_error(), hook = ct_module_register_forward_hook(model, add_one, NULL)) > 0 ||
               !failed_call("ct_module_register_forward_hook")) &&
              OK_PTR(ct_module_forward(model, x)) && OK_ST(ct_module_remove_hook(model, hook)) &&
              OK_PTR(tree = ct_module_new("Tree", NULL, NULL, NULL)) &&
              OK_ST(ct_module_register_buffer(tree, "enc.layer.0.x", x)) &&
              ((ct_clear_error(), ct_module_named_buffers(tree, count_tensor, &n)) == 0 ||
               !failed_call("ct_module_named_buffers")) &&
              OK_PTR(sd = ct_load_state_dict_file(st)) && OK_PTR(meta = ct_load_safetensors_metadata(st)) &&
              OK_ST(ct_value_dict_remove(sd, "0.bias")) &&
              OK_ST(ct_module_load_state_dict_keys(model, sd, false, &missing, NULL));
    free(repr);
    ct_module_free(tree);
    ct_value_free(sd);
    ct_value_free(meta);
    ct_value_free(missing);
    return ok;
}

/* One run; false when it stopped at a (reported) failure. */
static bool workload(const char *dir) {
    ct_module *model = NULL;
    ct_optimizer *opt = NULL;
    ct_dataset *ds = NULL;
    ct_dataloader *dl = NULL;
    ct_value *sd = NULL, *a = NULL, *b = NULL;
    ct_tensor *x = NULL, *y = NULL, *xy[2];
    char pt[512], st[512], text[256];
    snprintf(pt, sizeof pt, "%s/m%ld.pt", dir, (long)getpid());
    snprintf(st, sizeof st, "%s/m%ld.safetensors", dir, (long)getpid());
    ct_scope_begin();
    ct_tensor *w = NULL; /* the first op, which starts the dispatcher */
    bool ok = OK_PTR(w = ct_ones(CT_SHAPE(2), CT_F32, CT_CPU)) &&
              OK_PTR(ct_sum(w, NULL, 0, false, CT_DTYPE_UNDEFINED));
    g_warm_count = atomic_load(&g_count);
    ct_manual_seed(1);
    ok = ok && OK_PTR(x = ct_rand(CT_SHAPE(32, 1, 6, 6), CT_F32, CT_CPU)) &&
         OK_PTR(y = ct_randint(0, 4, CT_SHAPE(32), CT_I64, CT_CPU)) &&
         (xy[0] = x, xy[1] = y, OK_PTR(ds = ct_tensor_dataset_new(xy, 2)));
    if (ok) {
        ct_dataloader_options o = ct_dataloader_defaults(8);
        o.shuffle = true;
        o.num_workers = 1;
        ok = OK_PTR(dl = ct_dataloader_new(ds, &o)) && OK_PTR(model = make_model());
    }
    if (ok) {
        ct_tensor *params[8];
        int64_t n = ct_module_parameters(model, params, NULL, 8);
        ct_optim_options so = ct_sgd_options(0.1);
        so.momentum = 0.9;
        ok = (n == 4 || failed_call("ct_module_parameters")) && n == 4 &&
             OK_PTR(opt = ct_optimizer_new(CT_OPTIM_SGD, params, (int)n, &so));
    }
    for (int step = 0; ok && step < 3; step++)
        ok = train_step(model, opt, dl) == CT_OK;
    ok = ok && OK_PTR(sd = ct_module_state_dict(model)) && OK_ST(ct_save_pt(pt, sd)) &&
         OK_ST(ct_save_safetensors(st, sd, NULL)) && OK_PTR(a = ct_load(pt)) && OK_PTR(b = ct_load(st)) &&
         OK_ST(ct_module_load_state_dict(model, a, true, NULL, NULL)) &&
         OK_ST(ct_module_load_state_dict(model, b, true, NULL, NULL));
    if (ok) {
        ct_clear_error();
        ok = ct_to_string(ct_module_param(ct_module_child(model, "3"), "bias"), text, sizeof text) >= 0 ||
             !failed_call("ct_to_string");
    }
    ok = ok && module_api(model, x, st);
    ct_value_free(a);
    ct_value_free(b);
    ct_value_free(sd);
    ct_optimizer_free(opt);
    ct_module_free(model);
    ct_dataloader_free(dl);
    ct_dataset_free(ds);
    ct_scope_end();
    unlink(pt);
    unlink(st);
    return ok;
}

/* ------------------------------------------------------------------ dispatcher start-up */

/* The first dispatched op registers every kernel (Note [Start-up without memory]): with
 * the k-th registration allocation failing, that op fails with an out-of-memory error
 * and the next one starts the dispatcher again and works. */
static int start_up_child(long k) {
    static const float ones[3] = {1, 1, 1};
    ct_tensor *t = ct_from_data(ones, CT_SHAPE(3), CT_F32); /* registers nothing yet */
    if (!t)
        return 10;
    atomic_store(&g_count, 0);
    g_fail_at = k;
    ct_clear_error();
    ct_tensor *s = ct_sum(t, NULL, 0, false, CT_DTYPE_UNDEFINED);
    g_fail_at = 0;
    if (!s && (ct_last_status() != CT_ERROR_OUT_OF_MEMORY || !strstr(ct_last_error(), "memory")))
        return 11; /* failed, but not as out of memory */
    if (!s) {
        s = ct_sum(t, NULL, 0, false, CT_DTYPE_UNDEFINED); /* the retry */
        if (!s)
            return 12;
    }
    double v = 0;
    int rc = ct_tensor_get(s, NULL, &v) == CT_OK && v == 3.0 ? 0 : 13;
    ct_release(s);
    ct_release(t);
    return rc;
}

static void test_dispatch_start_up(void **state) {
    (void)state;
    for (long k = 1; k <= 40; k += k < 8 ? 1 : 8) {
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
            alarm(20);
            _exit(start_up_child(k));
        }
        int status;
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
            ;
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
            fprintf(stderr, "start-up with allocation %ld failing: status %#x\n", k, status);
        assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
}

/* ------------------------------------------------------------------ the sweep */

typedef struct {
    int status;      /* waitpid's */
    long count;      /* allocations the child made */
    long warm_count; /* of which by the first op */
    bool finished;
} child_result;

static child_result run_child(const char *dir, long fail_at) {
    child_result r = {0, -1, -1, false};
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(fds[0]);
        alarm(20); /* a hang ends the child with SIGALRM */
        ct_set_num_threads(1);
        atomic_store(&g_count, 0);
        g_fail_at = fail_at;
        bool ok = workload(dir);
        int code = CHILD_OK;
        if (silent)
            code = CHILD_SILENT;
        else if (fail_at == 0 && !ok)
            code = CHILD_WRONG; /* nothing failed on purpose, yet it stopped */
        else if (ct_memory_allocated(CT_CPU) != 0) {
            fprintf(stderr, "allocation %ld: %lld bytes of tensors still allocated\n", fail_at,
                    (long long)ct_memory_allocated(CT_CPU));
            code = CHILD_LEAK;
        }
#ifdef CT_TEST_ASAN
        if (code == CHILD_OK && __lsan_do_recoverable_leak_check() != 0)
            code = CHILD_LEAK;
#endif
        long n[2] = {atomic_load(&g_count), g_warm_count};
        ssize_t w = write(fds[1], n, sizeof n);
        (void)w;
        _exit(code);
    }
    close(fds[1]);
    long n[2];
    if (read(fds[0], n, sizeof n) == (ssize_t)sizeof n) {
        r.count = n[0];
        r.warm_count = n[1];
    }
    close(fds[0]);
    while (waitpid(pid, &r.status, 0) < 0 && errno == EINTR)
        ;
    r.finished = WIFEXITED(r.status) && WEXITSTATUS(r.status) == CHILD_OK;
    return r;
}

static void describe(long n, const child_result *r) {
    if (WIFSIGNALED(r->status))
        fprintf(stderr, "allocation %ld: child killed by signal %d (%s)\n", n, WTERMSIG(r->status),
                WTERMSIG(r->status) == SIGALRM ? "hang" : strsignal(WTERMSIG(r->status)));
    else
        fprintf(stderr, "allocation %ld: child exit status %d (3 silent failure, 4 leak, 5 failed unprovoked)\n", n,
                WEXITSTATUS(r->status));
}

static void test_sweep(void **state) {
    (void)state;
    char dir[] = "/tmp/ct_alloc_failure_XXXXXX";
    assert_non_null(mkdtemp(dir));
    child_result base = run_child(dir, 0);
    if (!base.finished)
        describe(0, &base);
    assert_true(base.finished);
    assert_true(base.count > 0);
#ifdef CT_TEST_ASAN
    long stride = 4;
#else
    long stride = 1;
#endif
    const char *env = getenv("CT_TEST_SWEEP_STRIDE");
    if (env && atol(env) > 0)
        stride = atol(env);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    long runs = 0, bad = 0;
    /* the count varies a little with thread timing: go somewhat past it */
    for (long n = 1; n <= base.count + base.count / 20 + 16; n += stride) {
        child_result r = run_child(dir, n);
        runs++;
        if (!(WIFEXITED(r.status) && WEXITSTATUS(r.status) == CHILD_OK)) {
            describe(n, &r);
            bad++;
        }
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    printf("allocation-failure sweep: %ld allocations in a clean run (%ld of them starting the dispatcher), %ld runs "
           "(stride %ld), %ld bad, %.1f s\n",
           base.count, base.warm_count, runs, stride, bad,
           (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec));
    rmdir(dir);
    assert_int_equal(bad, 0);
}

int main(void) {
    setvbuf(stdout, NULL, _IONBF, 0);
    /* oneDNN would generate its GEMM kernels again in every child: most of its time */
    setenv("CT_SGEMM", "openblas", 0);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dispatch_start_up), /* first: the parent never dispatches */
        cmocka_unit_test(test_sweep),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
