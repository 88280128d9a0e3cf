/* The allocation-failure sweep of the ctorch tool: runs a job once per N in a forked
 * child in which the N-th host allocation fails, and counts what each child did.
 *
 *   alloc_sweep [--stride K] [--from N] [--to N] [--alarm S] [--quiet] [--trace] JOB...
 *
 *   train             ctorch train fashion-mnist --max-steps 3 (a small synthetic
 *                     Fashion-MNIST in IDX files: 96 training and 64 test images; batch
 *                     16, evaluation on 64 images, a checkpoint written at the end)
 *   load-pt           ctorch inspect of the .pt checkpoint a clean train run wrote, then
 *                     ct_load, its tensors registered as a module's buffers and walked
 *   load-safetensors  the same for the .safetensors file, also through
 *                     ct_load_state_dict_file
 *
 * The CLI's commands are linked in (src/cli without main.c) and every allocation
 * function is wrapped at link time (tests/CMakeLists.txt), as in test_alloc_failure.c:
 * every allocation the library and the tool make is counted, in every thread. Each
 * child must return 0 (the failure was absorbed) or 1 (the tool reported an error);
 * anything else is counted: an abort (a signal), a hang (the child's alarm), a leak
 * (tensor memory still allocated after the command, or, in the sanitizer build,
 * LeakSanitizer's report), or a wrong exit status. N runs from --from (1) to a little
 * past the allocation count of a clean run (or --to), every --stride-th (1). The exit
 * status is 1 when any child was bad, 2 on a usage error. A bad child's stderr is shown
 * unless --quiet; --trace adds the stack of the failing allocation (sanitizer build).
 * --alarm S sets the seconds after which a child counts as hung (120). Run it from
 * scripts/alloc_sweep.sh for the full sweep; ctest runs a stride of it. */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli/commands.h"
#include "ctorch.h"

#if defined(__SANITIZE_ADDRESS__)
#define CT_SWEEP_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CT_SWEEP_ASAN 1
#endif
#endif
#ifdef CT_SWEEP_ASAN
#include <sanitizer/common_interface_defs.h>
#include <sanitizer/lsan_interface.h>
#endif

#ifdef CT_SWEEP_ASAN
/* A sanitizer report must end a child with a signal (an abort here), not with exit
 * status 1, which is the tool's clean error. */
const char *__asan_default_options(void);
const char *__ubsan_default_options(void);
const char *__asan_default_options(void) { return "abort_on_error=1:allocator_may_return_null=1"; }
const char *__ubsan_default_options(void) { return "abort_on_error=1:halt_on_error=1:print_stacktrace=1"; }
#endif

/* ------------------------------------------------------------------ failing allocations */

static atomic_long g_count; /* allocations seen in this process */
static long g_fail_at;      /* the one to fail; 0: none */

static bool g_trace;        /* --trace: the failing allocation's stack on stderr */

static bool fail_now(void) {
    if (atomic_fetch_add_explicit(&g_count, 1, memory_order_relaxed) + 1 != g_fail_at)
        return false;
#ifdef CT_SWEEP_ASAN
    if (g_trace)
        __sanitizer_print_stack_trace();
#endif
    return true;
}

#include "alloc_wrap.h"

/* ------------------------------------------------------------------ the data set */

static bool write_idx(const char *path, const unsigned char *head, size_t nhead, size_t nbody, unsigned mod,
                      unsigned seed) {
    FILE *f = fopen(path, "wb");
    if (!f)
        return false;
    bool ok = fwrite(head, 1, nhead, f) == nhead;
    unsigned x = seed;
    for (size_t i = 0; ok && i < nbody; i++) {
        x = x * 1103515245u + 12345u;
        ok = fputc((int)((x >> 16) % mod), f) != EOF;
    }
    return fclose(f) == 0 && ok;
}

/* IDX files of n images of 28 x 28 and their labels (0..9). */
static bool write_split(const char *dir, const char *split, unsigned n) {
    char path[600];
    unsigned char img[16] = {0, 0, 8, 3, 0, 0, (unsigned char)(n >> 8), (unsigned char)n, 0, 0, 0, 28, 0, 0, 0, 28};
    unsigned char lab[8] = {0, 0, 8, 1, 0, 0, (unsigned char)(n >> 8), (unsigned char)n};
    snprintf(path, sizeof path, "%s/%s-images-idx3-ubyte", dir, split);
    if (!write_idx(path, img, sizeof img, (size_t)n * 28 * 28, 256, n))
        return false;
    snprintf(path, sizeof path, "%s/%s-labels-idx1-ubyte", dir, split);
    return write_idx(path, lab, sizeof lab, n, 10, n + 1);
}

/* ------------------------------------------------------------------ the jobs */

static char g_dir[256];

static int job_train(bool write_checkpoint) {
    char data[300], out[300];
    snprintf(data, sizeof data, "%s/data", g_dir);
    snprintf(out, sizeof out, "%s/%s", g_dir, write_checkpoint ? "ck" : "run");
    char *argv[] = {"train", "fashion-mnist", "--max-steps", "3", "--batch-size", "16", "--eval-limit", "64",
                    "--threads", "1", "--quiet", "--data", data, "--out", out, NULL};
    return ct_cmd_train((int)(sizeof argv / sizeof argv[0]) - 1, argv);
}

static int count_tensor(const char *name, ct_tensor *t, void *ud) {
    (void)name;
    *(int64_t *)ud += ct_tensor_numel(t);
    return 0;
}

/* Registers the tensors of a state dict as buffers of a module and walks them. */
static int walk_state_dict(const ct_value *sd) {
    int rc = 0;
    int64_t numel = 0;
    ct_scope_begin();
    ct_module *m = ct_module_new("Holder", NULL, NULL, NULL);
    if (!m) {
        fprintf(stderr, "ct_module_new: %s\n", ct_last_error());
        rc = 1;
    }
    int64_t n = ct_value_len(sd);
    for (int64_t i = 0; rc == 0 && i < n; i++) {
        char name[64];
        snprintf(name, sizeof name, "t%lld", (long long)i);
        ct_tensor *t = ct_value_tensor(ct_value_at(sd, i));
        if (t && ct_module_register_buffer(m, name, t) != CT_OK) {
            fprintf(stderr, "register_buffer: %s\n", ct_last_error());
            rc = 1;
        }
    }
    if (rc == 0 && ct_module_named_buffers(m, count_tensor, &numel) < 0) {
        fprintf(stderr, "named_buffers: %s\n", ct_last_error());
        rc = 1;
    }
    ct_module_free(m);
    ct_scope_end();
    return rc;
}

/* inspect, then the file as a value tree (the .pt checkpoint's "model" dict, the
 * .safetensors file also through ct_load_state_dict_file) walked as a module's buffers */
static int job_load(const char *ext) {
    char path[300];
    snprintf(path, sizeof path, "%s/ck.%s", g_dir, ext);
    char *argv[] = {"inspect", path, NULL};
    int rc = ct_cmd_inspect(2, argv);
    if (rc != 0)
        return rc;
    ct_value *v = ct_load(path);
    if (!v) {
        fprintf(stderr, "ct_load: %s\n", ct_last_error());
        return 1;
    }
    const ct_value *model = ct_value_get(v, "model");
    rc = walk_state_dict(model ? model : v);
    ct_value_free(v);
    if (rc == 0 && strcmp(ext, "safetensors") == 0) {
        ct_value *sd = ct_load_state_dict_file(path);
        if (!sd) {
            fprintf(stderr, "ct_load_state_dict_file: %s\n", ct_last_error());
            return 1;
        }
        rc = walk_state_dict(sd);
        ct_value_free(sd);
    }
    return rc;
}

typedef enum { JOB_TRAIN, JOB_LOAD_PT, JOB_LOAD_ST, NJOBS } job_kind;
static const char *const job_names[NJOBS] = {"train", "load-pt", "load-safetensors"};

static int run_job(job_kind j) {
    switch (j) {
    case JOB_TRAIN:
        return job_train(false);
    case JOB_LOAD_PT:
        return job_load("pt");
    default:
        return job_load("safetensors");
    }
}

/* ------------------------------------------------------------------ children */

enum { CHILD_LEAK = 40, CHILD_MEMORY = 41 };

typedef enum { RES_OK, RES_ERROR, RES_ABORT, RES_HANG, RES_LEAK, RES_EXIT, NRESULTS } result;
static const char *const result_names[NRESULTS] = {"absorbed", "clean error", "abort", "hang", "leak", "bad exit"};

typedef struct {
    result r;
    int status;
    long count; /* allocations the child made */
} child;

static int g_alarm = 120;

/* Whether the file has a line with needle in it. */
static bool file_has(const char *path, const char *needle) {
    FILE *f = fopen(path, "r");
    if (!f)
        return false;
    char line[512];
    bool found = false;
    while (!found && fgets(line, sizeof line, f))
        found = strstr(line, needle) != NULL;
    fclose(f);
    return found;
}

static child run_child(job_kind j, long fail_at, const char *errpath) {
    child c = {RES_OK, 0, -1};
    int fds[2];
    if (pipe(fds) != 0) {
        perror("pipe");
        exit(2);
    }
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        perror("fork");
        exit(2);
    }
    if (pid == 0) {
        close(fds[0]);
        alarm((unsigned)g_alarm); /* a hang ends the child with SIGALRM */
        FILE *e = freopen(errpath, "w", stderr);
        (void)e;
        FILE *o = freopen("/dev/null", "w", stdout);
        (void)o;
        ct_set_num_threads(1);
        atomic_store(&g_count, 0);
        g_fail_at = fail_at;
        int rc = run_job(j);
        long n = atomic_load(&g_count);
        g_fail_at = 0;
        if (rc == 0 || rc == 1) {
            int64_t live = ct_memory_allocated(CT_CPU);
            if (live != 0) {
                fprintf(stderr, "alloc_sweep: %lld bytes of tensors still allocated\n", (long long)live);
                rc = CHILD_MEMORY;
            }
        }
#ifdef CT_SWEEP_ASAN
        if ((rc == 0 || rc == 1 || rc == CHILD_MEMORY) && __lsan_do_recoverable_leak_check() != 0)
            rc = CHILD_LEAK;
#endif
        ssize_t w = write(fds[1], &n, sizeof n);
        (void)w;
        fflush(NULL);
        _exit(rc);
    }
    close(fds[1]);
    long n;
    if (read(fds[0], &n, sizeof n) == (ssize_t)sizeof n)
        c.count = n;
    close(fds[0]);
    while (waitpid(pid, &c.status, 0) < 0 && errno == EINTR)
        ;
    if (WIFSIGNALED(c.status))
        c.r = WTERMSIG(c.status) == SIGALRM ? RES_HANG : RES_ABORT;
    else if (WEXITSTATUS(c.status) == 0)
        c.r = RES_OK;
    else if (WEXITSTATUS(c.status) == 1)
        c.r = RES_ERROR;
    else if (WEXITSTATUS(c.status) == CHILD_LEAK || WEXITSTATUS(c.status) == CHILD_MEMORY)
        c.r = RES_LEAK;
    else
        c.r = RES_EXIT;
    /* a sanitizer report that did not end the child (options from the environment) */
    if ((c.r == RES_OK || c.r == RES_ERROR) && (file_has(errpath, "Sanitizer") || file_has(errpath, "runtime error:")))
        c.r = RES_ABORT;
    return c;
}

static void show_file(const char *path, int max_lines) {
    FILE *f = fopen(path, "r");
    if (!f)
        return;
    char line[512];
    for (int i = 0; i < max_lines && fgets(line, sizeof line, f); i++)
        fprintf(stderr, "    %s", line);
    fclose(f);
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Sweeps one job; the number of bad children. */
static long sweep(job_kind j, long stride, long from, long to, bool quiet) {
    char errpath[300];
    snprintf(errpath, sizeof errpath, "%s/stderr", g_dir);
    double t0 = now_s();
    child base = run_child(j, 0, errpath);
    if (base.r != RES_OK) {
        fprintf(stderr, "alloc_sweep %s: the run without a failure did not succeed (%s, status %#x)\n", job_names[j],
                result_names[base.r], base.status);
        show_file(errpath, 40);
        return 1;
    }
    long last = to > 0 ? to : base.count + base.count / 20 + 16; /* thread timing varies the count a little */
    long counts[NRESULTS] = {0}, runs = 0;
    for (long n = from; n <= last; n += stride) {
        child c = run_child(j, n, errpath);
        counts[c.r]++;
        runs++;
        if (c.r >= RES_ABORT) {
            fprintf(stderr, "alloc_sweep %s: allocation %ld: %s (status %#x)\n", job_names[j], n, result_names[c.r],
                    c.status);
            if (!quiet)
                show_file(errpath, 60);
        }
    }
    long bad = counts[RES_ABORT] + counts[RES_HANG] + counts[RES_LEAK] + counts[RES_EXIT];
    printf("alloc_sweep %s: %ld allocations in a clean run; %ld runs (N = %ld..%ld, stride %ld): %ld absorbed, %ld clean "
           "errors, %ld aborts, %ld hangs, %ld leaks, %ld bad exits (%.0f s)\n",
           job_names[j], base.count, runs, from, last, stride, counts[RES_OK], counts[RES_ERROR], counts[RES_ABORT],
           counts[RES_HANG], counts[RES_LEAK], counts[RES_EXIT], now_s() - t0);
    unlink(errpath);
    return bad;
}

static int usage(void) {
    fprintf(stderr, "usage: alloc_sweep [--stride K] [--from N] [--to N] [--alarm S] [--quiet] [--trace] "
                    "train|load-pt|load-safetensors...\n");
    return 2;
}

static void remove_tree(const char *dir) {
    static const char *const names[] = {"data/train-images-idx3-ubyte", "data/train-labels-idx1-ubyte",
                                        "data/t10k-images-idx3-ubyte",  "data/t10k-labels-idx1-ubyte",
                                        "ck.pt",                        "ck.safetensors",
                                        "run.pt",                       "run.safetensors",
                                        "stderr",                       "data"};
    char path[600];
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        if (unlink(path) != 0 && errno == EISDIR)
            rmdir(path);
        rmdir(path);
    }
    rmdir(dir);
}

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    long stride = 1, from = 1, to = 0;
    bool quiet = false, want[NJOBS] = {false};
    int njobs = 0;
    for (int i = 1; i < argc; i++) {
        if ((strcmp(argv[i], "--stride") == 0 || strcmp(argv[i], "--from") == 0 || strcmp(argv[i], "--to") == 0 ||
             strcmp(argv[i], "--alarm") == 0) &&
            i + 1 < argc) {
            long v = atol(argv[i + 1]);
            if (v < 1)
                return usage();
            if (argv[i][2] == 's')
                stride = v;
            else if (argv[i][2] == 'f')
                from = v;
            else if (argv[i][2] == 't')
                to = v;
            else
                g_alarm = (int)v;
            i++;
            continue;
        }
        if (strcmp(argv[i], "--quiet") == 0 || strcmp(argv[i], "--trace") == 0) {
            if (argv[i][2] == 'q')
                quiet = true;
            else
                g_trace = true;
            continue;
        }
        int k = 0;
        while (k < NJOBS && strcmp(argv[i], job_names[k]) != 0)
            k++;
        if (k == NJOBS)
            return usage();
        want[k] = true;
        njobs++;
    }
    if (njobs == 0)
        return usage();
    /* oneDNN would generate its GEMM kernels again in every child */
    setenv("CT_SGEMM", "openblas", 0);
    const char *tmp = getenv("TMPDIR");
    snprintf(g_dir, sizeof g_dir, "%s/ct_alloc_sweep_XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(g_dir)) {
        perror("mkdtemp");
        return 2;
    }
    char data[300];
    snprintf(data, sizeof data, "%s/data", g_dir);
    if (mkdir(data, 0700) != 0 || !write_split(data, "train", 96) || !write_split(data, "t10k", 64)) {
        perror("alloc_sweep: writing the data set");
        remove_tree(g_dir);
        return 2;
    }
    long bad = 0;
    /* the checkpoint the load jobs read: one clean run in a child (the parent stays
     * free of the library's threads) */
    if (want[JOB_LOAD_PT] || want[JOB_LOAD_ST]) {
        fflush(NULL);
        pid_t pid = fork();
        if (pid == 0) {
            FILE *o = freopen("/dev/null", "w", stdout);
            (void)o;
            ct_set_num_threads(1);
            _exit(job_train(true));
        }
        int status = 0;
        while (pid > 0 && waitpid(pid, &status, 0) < 0 && errno == EINTR)
            ;
        if (pid < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            fprintf(stderr, "alloc_sweep: the checkpoint run failed (status %#x)\n", status);
            remove_tree(g_dir);
            return 1;
        }
    }
    for (int k = 0; k < NJOBS; k++)
        if (want[k])
            bad += sweep((job_kind)k, stride, from, to, quiet);
    remove_tree(g_dir);
    return bad ? 1 : 0;
}
