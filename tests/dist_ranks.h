/* Running a test body on N ranks: N forked processes, each with a tcp process group
 * over a file store in a fresh directory. The parent only forks and waits (it never
 * runs an op before forking, so no OpenMP pool is copied into a child). */
#ifndef CT_TEST_DIST_RANKS_H
#define CT_TEST_DIST_RANKS_H

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ctorch.h"

/* In a rank: on failure print where and why, and make the rank exit 1. */
#define RCHECK(cond)                                                                                   \
    do {                                                                                               \
        if (!(cond)) {                                                                                 \
            fprintf(stderr, "rank %d: %s:%d: %s failed (%s)\n", ct_process_group_rank(pg), __FILE__,   \
                    __LINE__, #cond, ct_last_error());                                                 \
            return 1;                                                                                  \
        }                                                                                              \
    } while (0)

typedef int (*rank_fn)(ct_process_group *pg, int rank, int n, void *ud);

typedef struct {
    int64_t timeout_ms; /* the group's timeout; 10 s when 0 */
    int absent_rank;    /* a rank that never joins (-1: none) */
    int wall_s;         /* the parent kills everyone after this; 60 when 0 */
} rank_opts;

/* Removes a test's directory and what it holds; 0 on success. */
static inline int remove_dir(const char *dir) {
    char cmd[96];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    return system(cmd);
}

/* One rank in this process, for the error tests: a file store in a fresh directory
 * named after prefix (dir holds 64 bytes) and a tcp group of one; NULL on failure.
 * single_rank_end frees both and removes the directory (0 on success). */
static inline ct_process_group *single_rank_begin(const char *prefix, char dir[64], ct_store **s) {
    snprintf(dir, 64, "/tmp/%s_XXXXXX", prefix);
    *s = mkdtemp(dir) ? ct_store_file(dir, 1000) : NULL;
    return *s ? ct_process_group_new("tcp", *s, 0, 1, 1000) : NULL;
}

static inline int single_rank_end(ct_process_group *pg, ct_store *s, const char *dir) {
    ct_process_group_free(pg);
    ct_store_free(s);
    return remove_dir(dir);
}

/* Runs fn on n ranks; codes[r] gets rank r's exit code (128 + signal when killed).
 * Returns 0 when every rank exited 0. */
static inline int run_ranks_opts(int n, rank_fn fn, void *ud, const rank_opts *o, int *codes) {
    char dir[64];
    snprintf(dir, sizeof dir, "/tmp/ct_dist_test_XXXXXX");
    if (!mkdtemp(dir))
        return -1;
    fflush(NULL);
    pid_t pids[16];
    for (int r = 0; r < n; r++) {
        pids[r] = fork();
        if (pids[r] == 0) {
            if (r == o->absent_rank)
                _exit(0);
            ct_store *store = ct_store_file(dir, 30000);
            ct_process_group *pg =
                store ? ct_process_group_new("tcp", store, r, n, o->timeout_ms ? o->timeout_ms : 10000) : NULL;
            int rc;
            if (!pg) {
                rc = fn(NULL, r, n, ud); /* the body may expect the failure */
            } else {
                rc = fn(pg, r, n, ud);
                ct_process_group_free(pg);
            }
            ct_store_free(store);
            fflush(NULL);
            _exit(rc);
        }
    }
    int bad = 0;
    time_t end = time(NULL) + (o->wall_s ? o->wall_s : 60);
    for (int r = 0; r < n; r++) {
        int status = 0;
        for (;;) {
            pid_t p = waitpid(pids[r], &status, WNOHANG);
            if (p == pids[r])
                break;
            if (time(NULL) > end) {
                fprintf(stderr, "rank %d did not finish in time: killing every rank\n", r);
                for (int k = 0; k < n; k++)
                    kill(pids[k], SIGKILL);
            }
            struct timespec nap = {0, 5 * 1000 * 1000};
            nanosleep(&nap, NULL);
        }
        int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        if (codes)
            codes[r] = code;
        bad |= code != 0;
    }
    if (remove_dir(dir) != 0)
        bad = 1;
    return bad;
}

static inline int run_ranks(int n, rank_fn fn, void *ud) {
    rank_opts o = {0, -1, 0};
    return run_ranks_opts(n, fn, ud, &o, NULL);
}

#endif
