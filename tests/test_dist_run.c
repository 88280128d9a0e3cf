/* ctorch run -n N PROGRAM: this test program runs itself as the ranks ("--worker
 * MODE"), through the ctorch tool built beside it. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "testutil.h"

static char self[PATH_MAX], tool[PATH_MAX + 32];

static int worker(const char *mode) {
    const char *rank_s = getenv("RANK"), *local = getenv("LOCAL_RANK"), *ws = getenv("WORLD_SIZE");
    if (!rank_s || !local || !ws || strcmp(rank_s, local) != 0 || !getenv("MASTER_ADDR") || !getenv("MASTER_PORT")) {
        fprintf(stderr, "worker: the torchrun variables are not set\n");
        return 10;
    }
    const char *bind = getenv("CT_POOL_BIND"); /* main() unset it: ctorch run's default */
    if (strcmp(mode, "ok-run") == 0) {
        if (!(bind && strcmp(bind, "0") == 0)) {
            fprintf(stderr, "worker: CT_POOL_BIND is %s, not 0\n", bind ? bind : "unset");
            return 14;
        }
        mode = "ok";
    }
    int rank = atoi(rank_s);
    if (strcmp(mode, "fail") == 0 && rank == 1)
        return 3; /* before joining: the others wait in the rendezvous until killed */
    ct_process_group *pg = ct_process_group_from_env("tcp", 20000);
    if (!pg) {
        fprintf(stderr, "worker %d: %s\n", rank, ct_last_error());
        return 11;
    }
    ct_tensor *t = ct_full(CT_SHAPE(5), ct_scalar_int(rank + 1), CT_I64, CT_CPU);
    int n = ct_process_group_size(pg);
    int ok = ct_all_reduce(pg, t, CT_REDUCE_SUM) == CT_OK && ((int64_t *)ct_tensor_data(t))[4] == n * (n + 1) / 2;
    if (strcmp(mode, "crash") == 0 && rank == 0)
        abort();
    if (strcmp(mode, "crash") == 0) {
        /* Rank 0 died: this collective fails at once with a clear error. */
        if (ct_all_reduce(pg, t, CT_REDUCE_SUM) == CT_OK)
            return 12;
        fprintf(stderr, "worker %d: %s\n", rank, ct_last_error());
        sleep(30); /* until the launcher stops it */
    }
    ok = ok && ct_barrier(pg) == CT_OK;
    ct_process_group_free(pg);
    return ok ? 0 : 13;
}

static int run(const char *args) {
    size_t n = strlen(tool) + strlen(args) + 16;
    char *cmd = malloc(n);
    if (!cmd)
        return -1;
    snprintf(cmd, n, "'%s' run %s", tool, args);
    int st = system(cmd);
    free(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void test_run_ok(void **state) {
    char args[PATH_MAX + 64];
    snprintf(args, sizeof args, "-n 3 '%s' --worker ok-run", self);
    assert_int_equal(run(args), 0);
    snprintf(args, sizeof args, "-n 1 '%s' --worker ok", self);
    assert_int_equal(run(args), 0);
}

static void test_run_failure(void **state) {
    char args[PATH_MAX + 64];
    time_t t0 = time(NULL);
    /* Rank 1 exits 3: the others are stopped and the code is the launcher's. */
    snprintf(args, sizeof args, "-n 3 --grace 1 '%s' --worker fail 2>/dev/null", self);
    assert_int_equal(run(args), 3);
    /* Rank 0 aborts: 128 + SIGABRT, and rank 1, stuck in sleep, is killed after the grace. */
    snprintf(args, sizeof args, "-n 2 --grace 1 '%s' --worker crash 2>/dev/null", self);
    assert_int_equal(run(args), 128 + 6);
    assert_true(time(NULL) - t0 < 15);
}

static void test_run_usage(void **state) {
    assert_int_equal(run("2>/dev/null"), 2);
    assert_int_equal(run("-n 0 true 2>/dev/null"), 2);
    assert_int_equal(run("-n 2 2>/dev/null"), 2);
    assert_int_equal(run("--bogus 1 true 2>/dev/null"), 2);
    assert_int_equal(run("-n 2 /nonexistent/program 2>/dev/null"), 127);
    assert_int_equal(run("-n 2 true"), 0);
}

/* ctorch train fashion-mnist --ddp on synthetic images: rank 0 saves, --zero1 is
 * refused (the job trains with SGD). */
static void test_train_fashion(void **state) {
    char dir[64];
    snprintf(dir, sizeof dir, "/tmp/ct_run_fm_XXXXXX");
    assert_non_null(mkdtemp(dir));
    char args[PATH_MAX + 512];
    const char *modes[] = {"--ddp", "--diloco 4"};
    for (int k = 0; k < 2; k++) {
        snprintf(args, sizeof args,
                 "-n 2 '%s' train fashion-mnist --synthetic 256 --epochs 1 --batch-size 32 --eval-limit 64 --quiet "
                 "--out %s/fm%d %s >/dev/null 2>&1",
                 tool, dir, k, modes[k]);
        assert_int_equal(run(args), 0);
        char path[160];
        snprintf(path, sizeof path, "%s/fm%d.safetensors", dir, k);
        assert_int_equal(access(path, R_OK), 0);
    }
    snprintf(args, sizeof args, "-n 2 '%s' train fashion-mnist --synthetic 64 --zero1 >/dev/null 2>&1", tool);
    assert_int_equal(run(args), 2);
    char cmd[96];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

/* PyTorch's torchrun starts ctorch ranks (--no-python): its agent serves the TCPStore
 * they rendezvous through (TORCHELASTIC_USE_AGENT_STORE=True). */
static void test_torchrun(void **state) {
    if (system("command -v torchpy >/dev/null 2>&1") != 0)
        skip();
    char cmd[PATH_MAX + 160];
    snprintf(cmd, sizeof cmd,
             "torchpy -m torch.distributed.run --nproc-per-node 2 --no-python '%s' --worker ok >/dev/null 2>&1",
             self);
    int st = system(cmd);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

/* ctorch train char-gpt under ctorch run: DDP and ZeRO-1 reach the same losses (the
 * same averaged gradients), DiLoCo runs, and rank 0 alone writes the checkpoint. */
static void test_train_char_gpt(void **state) {
    char dir[64];
    snprintf(dir, sizeof dir, "/tmp/ct_run_train_XXXXXX");
    assert_non_null(mkdtemp(dir));
    char text[128];
    snprintf(text, sizeof text, "%s/text.txt", dir);
    FILE *f = fopen(text, "w");
    assert_non_null(f);
    for (int i = 0; i < 400; i++)
        fprintf(f, "line %d: the quick brown fox jumps over the lazy dog %d times.\n", i, i % 7);
    fclose(f);
    const char *modes[] = {"--ddp", "--zero1", "--diloco 5 --diloco-bf16"};
    char losses[3][512];
    for (int k = 0; k < 3; k++) {
        char args[PATH_MAX + 512];
        snprintf(args, sizeof args,
                 "-n 2 '%s' train char-gpt --text %s --steps 10 --layers 1 --embd 32 --heads 2 --block-size 16 "
                 "--batch-size 4 --eval-interval 10 --eval-iters 2 --sample-tokens 0 --quiet --out %s/m%d.safetensors "
                 "%s > %s/log%d.txt 2>&1",
                 tool, text, dir, k, modes[k], dir, k);
        assert_int_equal(run(args), 0);
        char path[160];
        snprintf(path, sizeof path, "%s/m%d.safetensors", dir, k);
        assert_int_equal(access(path, R_OK), 0);
        snprintf(path, sizeof path, "%s/log%d.txt", dir, k);
        f = fopen(path, "r");
        assert_non_null(f);
        char line[512];
        losses[k][0] = 0;
        while (fgets(line, sizeof line, f))
            if (strstr(line, "val loss"))
                snprintf(losses[k], sizeof losses[k], "%s", line);
        fclose(f);
        assert_non_null(strstr(losses[k], "step 10"));
    }
    /* Rank 0's DDP checkpoint resumes on 3 ranks. */
    char args[PATH_MAX + 512];
    snprintf(args, sizeof args,
             "-n 3 '%s' train char-gpt --text %s --steps 12 --layers 1 --embd 32 --heads 2 --block-size 16 "
             "--batch-size 4 --eval-interval 12 --eval-iters 2 --sample-tokens 0 --quiet --out '' --resume %s/m0.pt "
             "--ddp > %s/resume.txt 2>&1",
             tool, text, dir, dir);
    assert_int_equal(run(args), 0);
    char path[160];
    snprintf(path, sizeof path, "%s/resume.txt", dir);
    f = fopen(path, "r");
    assert_non_null(f);
    char line[512];
    bool resumed = false, trained = false;
    while (fgets(line, sizeof line, f)) {
        resumed |= strstr(line, "resumed from") != NULL;
        trained |= strstr(line, "step 12:") != NULL;
    }
    fclose(f);
    assert_true(resumed && trained);
    /* "step 10: train loss X, val loss Y (T s)": the same X and Y for DDP and ZeRO-1. */
    *strrchr(losses[0], '(') = 0;
    *strrchr(losses[1], '(') = 0;
    assert_string_equal(losses[0], losses[1]);
    char cmd[96];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

int main(int argc, char **argv) {
    if (argc == 3 && strcmp(argv[1], "--worker") == 0)
        return worker(argv[2]);
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0)
        return 1;
    self[n] = 0;
    snprintf(tool, sizeof tool, "%s", self);
    char *slash = strrchr(tool, '/');
    snprintf(slash, sizeof tool - (size_t)(slash - tool), "/../ctorch");
    if (access(tool, X_OK) != 0) {
        fprintf(stderr, "no ctorch tool at %s: skipped\n", tool);
        return 77;
    }
    unsetenv("CT_POOL_BIND");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_run_ok),
        cmocka_unit_test(test_run_failure),
        cmocka_unit_test(test_run_usage),
        cmocka_unit_test(test_train_char_gpt),
        cmocka_unit_test(test_train_fashion),
        cmocka_unit_test(test_torchrun),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
