/* ctorch run -n N PROGRAM [args]: N processes of PROGRAM on this machine, with the
 * environment torchrun gives its workers and a TCPStore served by this process. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "commands.h"
#include "ctorch.h"

extern char **environ;

/* Note [ctorch run]
 * The launcher is torchrun's agent for one machine: it serves the store itself (the
 * workers connect as clients, TORCHELASTIC_USE_AGENT_STORE=True, so no rank has to
 * come up first) on a free port of 127.0.0.1, and starts the ranks with RANK,
 * LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, GROUP_RANK, ROLE_RANK, ROLE_WORLD_SIZE,
 * MASTER_ADDR, MASTER_PORT, TORCHELASTIC_RESTART_COUNT and TORCHELASTIC_RUN_ID set,
 * OMP_NUM_THREADS=1 unless it is set (torchrun's default too: N ranks of a machine
 * share its cores) and CT_POOL_BIND=0 unless it is set (each rank's pool would bind its
 * threads to the same first CPUs, Note [Workers on their own cores]). When a rank
 * fails (exits non-zero or is killed by a signal) the others get SIGTERM, then SIGKILL
 * after a grace period, and the launcher
 * exits with the failed rank's code (128 + signal for a signal), naming the rank.
 * There are no restarts: --max-restarts of torchrun is not offered. */

static volatile sig_atomic_t got_signal;
static void on_signal(int sig) { got_signal = sig; }

static void usage(FILE *f) {
    fprintf(f, "usage: ctorch run -n N [--grace SECONDS] PROGRAM [ARGS...]\n"
               "  starts N processes of PROGRAM with the torchrun environment (RANK, WORLD_SIZE,\n"
               "  LOCAL_RANK, MASTER_ADDR, MASTER_PORT, ...) and a TCPStore on a free port.\n"
               "  -n, --nproc-per-node N   processes (1 to 1024)\n"
               "  --grace SECONDS          after a failure, time the others get before SIGKILL (5)\n");
}

/* An environment for one rank: the current one without the names we set, then ours. */
static char **rank_env(int rank, int n, int port, long run_id) {
    static const char *names[] = {"RANK=",          "LOCAL_RANK=",    "WORLD_SIZE=",  "LOCAL_WORLD_SIZE=",
                                  "GROUP_RANK=",    "ROLE_RANK=",     "ROLE_WORLD_SIZE=",
                                  "MASTER_ADDR=",   "MASTER_PORT=",   "TORCHELASTIC_USE_AGENT_STORE=",
                                  "TORCHELASTIC_RESTART_COUNT=",      "TORCHELASTIC_RUN_ID="};
    const int nnames = (int)(sizeof names / sizeof names[0]);
    int count = 0;
    while (environ[count])
        count++;
    /* one allocation: the pointers, then the text of our variables (freed with env) */
    const size_t nptr = (size_t)count + (size_t)nnames + 3, len = 128;
    char **env = calloc(1, nptr * sizeof *env + (size_t)(nnames + 2) * len);
    if (!env)
        return NULL;
    char *text = (char *)(env + nptr);
    int k = 0;
    bool have_omp = false, have_bind = false;
    for (int i = 0; i < count; i++) {
        bool ours = false;
        for (int j = 0; j < nnames; j++)
            ours |= strncmp(environ[i], names[j], strlen(names[j])) == 0;
        have_omp |= strncmp(environ[i], "OMP_NUM_THREADS=", 16) == 0;
        have_bind |= strncmp(environ[i], "CT_POOL_BIND=", 13) == 0;
        if (!ours)
            env[k++] = environ[i];
    }
#define ADD(...)                            \
    do {                                    \
        snprintf(text, len, __VA_ARGS__);   \
        env[k++] = text;                    \
        text += len;                        \
    } while (0)
    ADD("RANK=%d", rank);
    ADD("LOCAL_RANK=%d", rank);
    ADD("WORLD_SIZE=%d", n);
    ADD("LOCAL_WORLD_SIZE=%d", n);
    ADD("GROUP_RANK=0");
    ADD("ROLE_RANK=%d", rank);
    ADD("ROLE_WORLD_SIZE=%d", n);
    ADD("MASTER_ADDR=127.0.0.1");
    ADD("MASTER_PORT=%d", port);
    ADD("TORCHELASTIC_USE_AGENT_STORE=True");
    ADD("TORCHELASTIC_RESTART_COUNT=0");
    ADD("TORCHELASTIC_RUN_ID=ctorch-%ld", run_id);
    if (!have_omp)
        ADD("OMP_NUM_THREADS=1");
    if (!have_bind)
        ADD("CT_POOL_BIND=0");
#undef ADD
    env[k] = NULL;
    return env;
}

static void kill_all(const pid_t *pids, const bool *alive, int n, int sig) {
    for (int i = 0; i < n; i++)
        if (alive[i])
            kill(pids[i], sig);
}

int ct_cmd_run(int argc, char **argv) {
    int n = 0;
    double grace = 5;
    int i = 1;
    for (; i < argc && argv[i][0] == '-'; i++) {
        if ((strcmp(argv[i], "-n") == 0 || strcmp(argv[i], "--nproc-per-node") == 0 ||
             strcmp(argv[i], "--nproc_per_node") == 0) &&
            i + 1 < argc) {
            char *end;
            long v = strtol(argv[++i], &end, 10);
            if (*end || v < 1 || v > 1024) {
                fprintf(stderr, "ctorch run: -n must be an integer in [1, 1024], got '%s'\n", argv[i]);
                return 2;
            }
            n = (int)v;
        } else if (strcmp(argv[i], "--grace") == 0 && i + 1 < argc) {
            char *end;
            grace = strtod(argv[++i], &end);
            if (*end || grace < 0) {
                fprintf(stderr, "ctorch run: --grace must be a non-negative number, got '%s'\n", argv[i]);
                return 2;
            }
        } else if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            usage(stdout);
            return 0;
        } else if (strcmp(argv[i], "--") == 0) {
            i++;
            break;
        } else {
            fprintf(stderr, "ctorch run: unknown option '%s'\n", argv[i]);
            usage(stderr);
            return 2;
        }
    }
    if (n == 0 || i >= argc) {
        fprintf(stderr, "ctorch run: %s\n", n == 0 ? "-n N is required" : "no program to run");
        usage(stderr);
        return 2;
    }
    char **prog = argv + i;
    ct_store_server *srv = ct_store_server_start("127.0.0.1", 0);
    if (!srv) {
        fprintf(stderr, "ctorch run: %s\n", ct_last_error());
        return 1;
    }
    int port = ct_store_server_port(srv);
    long run_id = (long)getpid();
    char ***envs = calloc((size_t)n, sizeof *envs);
    pid_t *pids = calloc((size_t)n, sizeof *pids);
    bool *alive = calloc((size_t)n, sizeof *alive);
    if (!envs || !pids || !alive) {
        fprintf(stderr, "ctorch run: out of memory\n");
        ct_store_server_stop(srv);
        return 1;
    }
    for (int r = 0; r < n; r++) {
        envs[r] = rank_env(r, n, port, run_id);
        if (!envs[r]) {
            fprintf(stderr, "ctorch run: out of memory\n");
            ct_store_server_stop(srv);
            for (int j = 0; j < r; j++)
                free(envs[j]);
            free(envs);
            free(pids);
            free(alive);
            return 1;
        }
    }
    struct sigaction sa = {0};
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    fflush(NULL);
    int started = 0;
    for (int r = 0; r < n; r++) {
        pid_t pid = fork();
        if (pid == 0) {
            /* Only exec-safe calls here: the store's thread runs in the parent. */
            signal(SIGINT, SIG_DFL);
            signal(SIGTERM, SIG_DFL);
            environ = envs[r];
            execvp(prog[0], prog);
            const char msg[] = "ctorch run: cannot execute the program\n";
            ssize_t w = write(2, msg, sizeof msg - 1);
            (void)w;
            _exit(127);
        }
        if (pid < 0) {
            fprintf(stderr, "ctorch run: fork failed: %s\n", strerror(errno));
            break;
        }
        pids[r] = pid;
        alive[r] = true;
        started++;
    }
    int result = started == n ? 0 : 1;
    int failed = -1;
    int left = started;
    struct timespec deadline = {0, 0};
    bool killing = started != n;
    if (killing) {
        clock_gettime(CLOCK_MONOTONIC, &deadline);
        deadline.tv_sec += (time_t)grace;
        kill_all(pids, alive, n, SIGTERM);
    }
    while (left > 0) {
        int status;
        pid_t pid = waitpid(-1, &status, killing ? WNOHANG : 0);
        if (pid < 0 && errno != EINTR && errno != ECHILD)
            break;
        if (got_signal && !killing) {
            fprintf(stderr, "ctorch run: got signal %d, stopping the ranks\n", (int)got_signal);
            killing = true;
            result = 128 + got_signal;
            clock_gettime(CLOCK_MONOTONIC, &deadline);
            deadline.tv_sec += (time_t)grace;
            kill_all(pids, alive, n, SIGTERM);
        }
        if (pid > 0) {
            int r = 0;
            while (r < n && pids[r] != pid)
                r++;
            if (r == n)
                continue;
            alive[r] = false;
            left--;
            int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
            if (code != 0 && !killing) {
                failed = r;
                result = code;
                if (WIFSIGNALED(status))
                    fprintf(stderr, "ctorch run: rank %d (pid %d) was killed by signal %d; stopping the other ranks\n",
                            r, (int)pid, WTERMSIG(status));
                else
                    fprintf(stderr, "ctorch run: rank %d (pid %d) exited with code %d; stopping the other ranks\n",
                            r, (int)pid, code);
                killing = true;
                clock_gettime(CLOCK_MONOTONIC, &deadline);
                deadline.tv_sec += (time_t)grace;
                kill_all(pids, alive, n, SIGTERM);
            }
            continue;
        }
        if (killing) {
            struct timespec now;
            clock_gettime(CLOCK_MONOTONIC, &now);
            if (now.tv_sec > deadline.tv_sec || (now.tv_sec == deadline.tv_sec && now.tv_nsec >= deadline.tv_nsec))
                kill_all(pids, alive, n, SIGKILL);
            struct timespec nap = {0, 20 * 1000 * 1000};
            nanosleep(&nap, NULL);
        }
    }
    (void)failed;
    ct_store_server_stop(srv);
    for (int r = 0; r < n; r++)
        free(envs[r]);
    free(envs);
    free(pids);
    free(alive);
    return result;
}
