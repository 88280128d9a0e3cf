/* Process groups on the tcp backend: every collective exact on integer-valued data of
 * odd sizes, for 2 to 4 ranks; work handles; split; a killed or hung rank, a rank that
 * never joins and mismatched calls give clear errors within the timeout. Each rank is
 * a forked process (tests/dist_ranks.h). */
#include <math.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "testutil.h"
#include "dist_ranks.h"

static const int64_t sizes[] = {1, 7, 1000003};
static const ct_dtype dtypes[] = {CT_F32, CT_F64, CT_BF16, CT_F16, CT_I64, CT_I32};

/* Rank r's value at i: small integers (exact in bfloat16 after summing 4 ranks). */
static double val(int r, int64_t i) { return (double)((r + 1) * (int64_t)((i * 7 + r) % 13)) - 20.0; }

static void put(void *p, ct_dtype d, int64_t i, double v) {
    switch (d) {
    case CT_F32: ((float *)p)[i] = (float)v; break;
    case CT_F64: ((double *)p)[i] = v; break;
    case CT_BF16: ((uint16_t *)p)[i] = ct_float_to_bfloat16((float)v); break;
    case CT_F16: ((uint16_t *)p)[i] = ct_float_to_half((float)v); break;
    case CT_I64: ((int64_t *)p)[i] = (int64_t)v; break;
    case CT_I32: ((int32_t *)p)[i] = (int32_t)v; break;
    default: break;
    }
}

static double get(const void *p, ct_dtype d, int64_t i) {
    switch (d) {
    case CT_F32: return ((const float *)p)[i];
    case CT_F64: return ((const double *)p)[i];
    case CT_BF16: return ct_bfloat16_to_float(((const uint16_t *)p)[i]);
    case CT_F16: return ct_half_to_float(((const uint16_t *)p)[i]);
    case CT_I64: return (double)((const int64_t *)p)[i];
    case CT_I32: return ((const int32_t *)p)[i];
    default: return NAN;
    }
}

/* What op gives over the ranks' values at i, rounded as the dtype would be. */
static double expect(ct_reduce_op op, int n, int64_t i, ct_dtype d) {
    double acc = val(0, i);
    for (int r = 1; r < n; r++) {
        double v = val(r, i);
        acc = op == CT_REDUCE_MAX ? fmax(acc, v) : op == CT_REDUCE_MIN ? fmin(acc, v) : acc + v;
    }
    if (op == CT_REDUCE_AVG) {
        if (d == CT_F64)
            return acc / n;
        float f = (float)acc / (float)n;
        return d == CT_BF16 ? ct_bfloat16_to_float(ct_float_to_bfloat16(f))
               : d == CT_F16 ? ct_half_to_float(ct_float_to_half(f))
                             : f;
    }
    return acc;
}

static int all_collectives(ct_process_group *pg, int r, int n, void *ud) {
    RCHECK(pg);
    RCHECK(ct_process_group_rank(pg) == r && ct_process_group_size(pg) == n);
    for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
        int64_t m = sizes[si];
        for (size_t di = 0; di < sizeof dtypes / sizeof dtypes[0]; di++) {
            ct_dtype d = dtypes[di];
            /* Big sizes once per dtype family, to keep the test short. */
            if (m > 1000 && d != CT_F32 && d != CT_BF16 && d != CT_I64)
                continue;
            ct_scope_begin();
            ct_tensor *t = ct_empty(CT_SHAPE(m), d, CT_CPU);
            RCHECK(t);
            for (int op = CT_REDUCE_SUM; op <= CT_REDUCE_MIN; op++) {
                if (op == CT_REDUCE_AVG && !ct_dtype_is_floating(d))
                    continue;
                void *p = ct_tensor_data(t);
                for (int64_t i = 0; i < m; i++)
                    put(p, d, i, val(r, i));
                RCHECK(ct_all_reduce(pg, t, (ct_reduce_op)op) == CT_OK);
                for (int64_t i = 0; i < m; i++)
                    if (get(p, d, i) != expect((ct_reduce_op)op, n, i, d)) {
                        fprintf(stderr, "rank %d: all_reduce op %d %s size %lld at %lld: %g, expected %g\n", r, op,
                                ct_dtype_name(d), (long long)m, (long long)i, get(p, d, i),
                                expect((ct_reduce_op)op, n, i, d));
                        return 1;
                    }
            }
            /* reduce_scatter: rank r gets chunk r of the sum of every rank's input. */
            ct_tensor *in = ct_empty(CT_SHAPE(m * n), d, CT_CPU), *out = ct_empty(CT_SHAPE(m), d, CT_CPU);
            RCHECK(in && out);
            for (int64_t i = 0; i < m * n; i++)
                put(ct_tensor_data(in), d, i, val(r, i));
            RCHECK(ct_reduce_scatter(pg, out, in, CT_REDUCE_SUM) == CT_OK);
            for (int64_t i = 0; i < m; i++)
                RCHECK(get(ct_tensor_data(out), d, i) == expect(CT_REDUCE_SUM, n, r * m + i, d));
            /* all_gather: rank k's input lands at k * m. */
            for (int64_t i = 0; i < m; i++)
                put(ct_tensor_data(out), d, i, val(r, i));
            RCHECK(ct_all_gather(pg, in, out) == CT_OK);
            for (int k = 0; k < n; k++)
                for (int64_t i = 0; i < m; i++)
                    RCHECK(get(ct_tensor_data(in), d, k * m + i) == val(k, i));
            /* broadcast from the last rank. */
            for (int64_t i = 0; i < m; i++)
                put(ct_tensor_data(out), d, i, val(r, i));
            RCHECK(ct_broadcast(pg, out, n - 1) == CT_OK);
            for (int64_t i = 0; i < m; i++)
                RCHECK(get(ct_tensor_data(out), d, i) == val(n - 1, i));
            ct_scope_end();
        }
    }
    RCHECK(ct_barrier(pg) == CT_OK);
    return 0;
}

static void test_collectives_2(void **state) { assert_int_equal(run_ranks(2, all_collectives, NULL), 0); }
static void test_collectives_3(void **state) { assert_int_equal(run_ranks(3, all_collectives, NULL), 0); }
static void test_collectives_4(void **state) { assert_int_equal(run_ranks(4, all_collectives, NULL), 0); }

/* Sums in rank order: ((a0 + a1) + a2) + a3 in float32, not any other order. */
static int rank_order(ct_process_group *pg, int r, int n, void *ud) {
    RCHECK(pg);
    const float v[4] = {1e8f, 1.0f, -1e8f, 3.0f};
    ct_scope_begin();
    ct_tensor *t = ct_full(CT_SHAPE(5), ct_scalar_float(v[r]), CT_F32, CT_CPU);
    RCHECK(ct_all_reduce(pg, t, CT_REDUCE_SUM) == CT_OK);
    float want = ((v[0] + v[1]) + v[2]) + v[3];
    for (int i = 0; i < 5; i++)
        RCHECK(((float *)ct_tensor_data(t))[i] == want);
    ct_scope_end();
    return 0;
}

static void test_rank_order(void **state) { assert_int_equal(run_ranks(4, rank_order, NULL), 0); }

static int p2p_async_split(ct_process_group *pg, int r, int n, void *ud) {
    RCHECK(pg);
    ct_scope_begin();
    /* send/recv around a ring, asynchronously. */
    ct_tensor *s = ct_full(CT_SHAPE(3), ct_scalar_int(r), CT_I64, CT_CPU);
    ct_tensor *g = ct_zeros(CT_SHAPE(3), CT_I64, CT_CPU);
    ct_work *ws = ct_send_async(pg, s, (r + 1) % n), *wr = ct_recv_async(pg, g, (r + n - 1) % n);
    RCHECK(ws && wr);
    RCHECK(ct_work_wait(ws) == CT_OK && ct_work_wait(wr) == CT_OK);
    RCHECK(ct_work_is_completed(ws) && ct_work_is_completed(wr));
    ct_work_free(ws);
    ct_work_free(wr);
    RCHECK(((int64_t *)ct_tensor_data(g))[2] == (r + n - 1) % n);
    /* Several async all-reduces in flight, completed in order. */
    ct_work *w[4];
    ct_tensor *t[4];
    for (int k = 0; k < 4; k++) {
        t[k] = ct_full(CT_SHAPE(100 + k), ct_scalar_float(k + r), CT_F32, CT_CPU);
        w[k] = ct_all_reduce_async(pg, t[k], CT_REDUCE_SUM);
        RCHECK(w[k]);
    }
    for (int k = 3; k >= 0; k--) {
        RCHECK(ct_work_wait(w[k]) == CT_OK);
        ct_work_free(w[k]);
        RCHECK(((float *)ct_tensor_data(t[k]))[99] == (float)(n * k + n * (n - 1) / 2));
    }
    /* split: even and odd ranks. */
    ct_process_group *sub = ct_process_group_split(pg, r % 2);
    RCHECK(sub);
    RCHECK(ct_process_group_size(sub) == (n - r % 2 + 1) / 2);
    RCHECK(ct_process_group_rank(sub) == r / 2);
    ct_tensor *x = ct_full(CT_SHAPE(7), ct_scalar_int(r), CT_I32, CT_CPU);
    RCHECK(ct_all_reduce(sub, x, CT_REDUCE_SUM) == CT_OK);
    int want = 0;
    for (int k = r % 2; k < n; k += 2)
        want += k;
    RCHECK(((int32_t *)ct_tensor_data(x))[6] == want);
    ct_process_group_free(sub);
    /* The parent group still works after the split. */
    RCHECK(ct_barrier(pg) == CT_OK);
    RCHECK(ct_process_group_bytes_sent(pg) > 0);
    ct_scope_end();
    return 0;
}

static void test_p2p_async_split(void **state) {
    assert_int_equal(run_ranks(4, p2p_async_split, NULL), 0);
    assert_int_equal(run_ranks(3, p2p_async_split, NULL), 0);
}

/* ------------------------------------------------------------ faults */

static int killed_rank(ct_process_group *pg, int r, int n, void *ud) {
    RCHECK(pg);
    ct_scope_begin();
    ct_tensor *t = ct_ones(CT_SHAPE(1000), CT_F32, CT_CPU);
    RCHECK(ct_all_reduce(pg, t, CT_REDUCE_SUM) == CT_OK);
    if (r == 2)
        raise(SIGKILL);
    ct_status st = ct_all_reduce(pg, t, CT_REDUCE_SUM);
    RCHECK(st == CT_ERROR_RUNTIME);
    RCHECK(strstr(ct_last_error(), "ct_all_reduce") != NULL);
    /* rank 0 and 1 each notice rank 2's end (or the other's, once it gave up). */
    RCHECK(strstr(ct_last_error(), "closed its connection") != NULL);
    ct_clear_error();
    RCHECK(ct_barrier(pg) != CT_OK);
    RCHECK(strstr(ct_last_error(), "unusable after an earlier error") != NULL);
    ct_clear_error();
    ct_scope_end();
    return 0;
}

static void test_killed_rank(void **state) {
    int codes[3];
    rank_opts o = {30000, -1, 60};
    time_t t0 = time(NULL);
    run_ranks_opts(3, killed_rank, NULL, &o, codes);
    assert_int_equal(codes[0], 0);
    assert_int_equal(codes[1], 0);
    assert_int_equal(codes[2], 128 + SIGKILL);
    assert_true(time(NULL) - t0 < 15); /* at once, not after the 30 s timeout */
}

static int hung_rank(ct_process_group *pg, int r, int n, void *ud) {
    RCHECK(pg);
    ct_scope_begin();
    ct_tensor *t = ct_ones(CT_SHAPE(10), CT_F32, CT_CPU);
    if (r == 1) {
        struct timespec nap = {1, 500 * 1000 * 1000};
        nanosleep(&nap, NULL);
        ct_scope_end();
        return 0;
    }
    RCHECK(ct_all_reduce(pg, t, CT_REDUCE_SUM) != CT_OK);
    RCHECK(strstr(ct_last_error(), "timed out after 400 ms") != NULL);
    RCHECK(strstr(ct_last_error(), "waiting for rank 1") != NULL);
    ct_clear_error();
    ct_scope_end();
    return 0;
}

static void test_hung_rank(void **state) {
    rank_opts o = {400, -1, 20};
    assert_int_equal(run_ranks_opts(2, hung_rank, NULL, &o, NULL), 0);
}

static int absent_body(ct_process_group *pg, int r, int n, void *ud) {
    if (pg) {
        fprintf(stderr, "rank %d: the group formed without rank 2\n", r);
        return 1;
    }
    if (!strstr(ct_last_error(), "rank(s) 2 of 3 did not join")) {
        fprintf(stderr, "rank %d: unexpected error '%s'\n", r, ct_last_error());
        return 1;
    }
    return 0;
}

static void test_absent_rank(void **state) {
    rank_opts o = {300, 2, 20};
    assert_int_equal(run_ranks_opts(3, absent_body, NULL, &o, NULL), 0);
}

static int mismatched(ct_process_group *pg, int r, int n, void *ud) {
    RCHECK(pg);
    ct_scope_begin();
    ct_tensor *t = ct_ones(CT_SHAPE(8 * (r + 1)), CT_F32, CT_CPU);
    RCHECK(ct_all_reduce(pg, t, CT_REDUCE_SUM) != CT_OK);
    RCHECK(strstr(ct_last_error(), "called different collectives, dtypes or sizes") != NULL);
    ct_clear_error();
    ct_scope_end();
    return 0;
}

static void test_mismatched(void **state) {
    rank_opts o = {2000, -1, 20};
    assert_int_equal(run_ranks_opts(2, mismatched, NULL, &o, NULL), 0);
}

/* ------------------------------------------------------------ env:// */

static int free_port(void) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {0};
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bind(fd, (struct sockaddr *)&sa, sizeof sa);
    socklen_t len = sizeof sa;
    getsockname(fd, (struct sockaddr *)&sa, &len);
    close(fd);
    return ntohs(sa.sin_port);
}

static void test_from_env(void **state) {
    int port = free_port();
    fflush(NULL);
    pid_t pids[2];
    for (int r = 0; r < 2; r++) {
        pids[r] = fork();
        if (pids[r] == 0) {
            char b[16];
            snprintf(b, sizeof b, "%d", r);
            setenv("RANK", b, 1);
            setenv("WORLD_SIZE", "2", 1);
            setenv("MASTER_ADDR", "127.0.0.1", 1);
            snprintf(b, sizeof b, "%d", port);
            setenv("MASTER_PORT", b, 1);
            unsetenv("TORCHELASTIC_USE_AGENT_STORE");
            ct_process_group *pg = ct_process_group_from_env("tcp", 10000);
            if (!pg) {
                fprintf(stderr, "rank %d: %s\n", r, ct_last_error());
                _exit(1);
            }
            ct_tensor *t = ct_full(CT_SHAPE(3), ct_scalar_int(r + 1), CT_I64, CT_CPU);
            int ok = ct_all_reduce(pg, t, CT_REDUCE_SUM) == CT_OK && ((int64_t *)ct_tensor_data(t))[0] == 3;
            /* Rank 0 serves the store: everyone is done with it before it goes. */
            ok = ok && ct_barrier(pg) == CT_OK;
            ct_process_group_free(pg);
            _exit(ok ? 0 : 1);
        }
    }
    for (int r = 0; r < 2; r++) {
        int status;
        waitpid(pids[r], &status, 0);
        assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
}

/* ------------------------------------------------------------ structured log */

static int logged(ct_process_group *pg, int r, int n, void *ud) {
    RCHECK(pg);
    char dir[64];
    snprintf(dir, sizeof dir, "/tmp/ct_dist_log_%d_XXXXXX", r);
    RCHECK(mkdtemp(dir));
    RCHECK(ct_trace_log_start(dir) == CT_OK);
    ct_scope_begin();
    ct_tensor *t = ct_ones(CT_SHAPE(7), CT_F32, CT_CPU);
    RCHECK(ct_all_reduce(pg, t, CT_REDUCE_SUM) == CT_OK);
    RCHECK(ct_barrier(pg) == CT_OK);
    ct_scope_end();
    char path[256];
    snprintf(path, sizeof path, "%s", ct_trace_log_path());
    RCHECK(ct_trace_log_stop() == CT_OK);
    FILE *f = fopen(path, "r");
    RCHECK(f);
    char line[1024];
    int found = 0;
    while (fgets(line, sizeof line, f))
        found += strstr(line, "\"collective\"") && strstr(line, "\"op\": \"all_reduce\"") &&
                 strstr(line, "\"numel\": 7") && strstr(line, "\"world_size\": 2");
    fclose(f);
    RCHECK(found == 1);
    RCHECK(remove_dir(dir) == 0);
    return 0;
}

static void test_trace_log(void **state) { assert_int_equal(run_ranks(2, logged, NULL), 0); }

/* ------------------------------------------------------------ argument errors */

static void test_errors(void **state) {
    char dir[64];
    snprintf(dir, sizeof dir, "/tmp/ct_dist_err_XXXXXX");
    assert_non_null(mkdtemp(dir));
    ct_store *s = ct_store_file(dir, 1000);
    CT_ASSERT_OK(s);
    CT_ASSERT_ERR(ct_process_group_new("gloo", s, 0, 1, 1000) != NULL, CT_ERROR_VALUE, "unknown backend 'gloo'");
    CT_ASSERT_ERR(ct_process_group_new("tcp", s, 1, 1, 1000) != NULL, CT_ERROR_VALUE, "rank 1");
    CT_ASSERT_ERR(ct_process_group_new("tcp", s, 0, 0, 1000) != NULL, CT_ERROR_VALUE, "world_size 0");
    CT_ASSERT_ERR(ct_process_group_new("tcp", s, 0, 1, 0) != NULL, CT_ERROR_VALUE, "timeout");
    CT_ASSERT_ERR(ct_process_group_new("tcp", NULL, 0, 1, 1000) != NULL, CT_ERROR_NULL_ARGUMENT, NULL);
    unsetenv("RANK");
    CT_ASSERT_ERR(ct_process_group_from_env("tcp", 1000) != NULL, CT_ERROR_VALUE,
                  "environment variable RANK expected, but not set");
    setenv("RANK", "x", 1);
    setenv("WORLD_SIZE", "2", 1);
    setenv("MASTER_PORT", "1234", 1);
    CT_ASSERT_ERR(ct_process_group_from_env("tcp", 1000) != NULL, CT_ERROR_VALUE, "RANK must be an integer");
    setenv("RANK", "0", 1);
    unsetenv("MASTER_ADDR");
    CT_ASSERT_ERR(ct_process_group_from_env("tcp", 1000) != NULL, CT_ERROR_VALUE, "MASTER_ADDR");
    unsetenv("RANK");
    unsetenv("WORLD_SIZE");
    unsetenv("MASTER_PORT");

    ct_process_group *pg = ct_process_group_new("tcp", s, 0, 1, 1000);
    CT_ASSERT_OK(pg);
    assert_string_equal(ct_process_group_backend(pg), "tcp");
    ct_scope_begin();
    ct_tensor *t = ct_ones(CT_SHAPE(4, 3), CT_F32, CT_CPU);
    ct_tensor *it = ct_ones(CT_SHAPE(4), CT_I64, CT_CPU);
    /* One rank: the collectives are identities. */
    assert_int_equal(ct_all_reduce(pg, t, CT_REDUCE_AVG), CT_OK);
    assert_true(((float *)ct_tensor_data(t))[5] == 1.0f);
    CT_ASSERT_ERR(ct_all_reduce(NULL, t, CT_REDUCE_SUM) == CT_OK, CT_ERROR_NULL_ARGUMENT, NULL);
    CT_ASSERT_ERR(ct_all_reduce(pg, NULL, CT_REDUCE_SUM) == CT_OK, CT_ERROR_NULL_ARGUMENT, NULL);
    CT_ASSERT_ERR(ct_all_reduce(pg, ct_transpose(t, 0, 1), CT_REDUCE_SUM) == CT_OK, CT_ERROR_VALUE, "contiguous");
    CT_ASSERT_ERR(ct_all_reduce(pg, it, CT_REDUCE_AVG) == CT_OK, CT_ERROR_TYPE, "AVG needs a floating-point");
    CT_ASSERT_ERR(ct_all_reduce(pg, t, (ct_reduce_op)9) == CT_OK, CT_ERROR_VALUE, "unknown reduce op");
    CT_ASSERT_ERR(ct_reduce_scatter(pg, it, t, CT_REDUCE_SUM) == CT_OK, CT_ERROR_TYPE, "same dtype");
    CT_ASSERT_ERR(ct_reduce_scatter(pg, ct_ones(CT_SHAPE(5), CT_F32, CT_CPU), t, CT_REDUCE_SUM) == CT_OK,
                  CT_ERROR_VALUE, "output size times world size");
    CT_ASSERT_ERR(ct_all_gather(pg, ct_ones(CT_SHAPE(5), CT_F32, CT_CPU), t) == CT_OK, CT_ERROR_VALUE,
                  "world_size times input");
    CT_ASSERT_ERR(ct_broadcast(pg, t, 1) == CT_OK, CT_ERROR_VALUE, "invalid source rank 1");
    CT_ASSERT_ERR(ct_send(pg, t, 0) == CT_OK, CT_ERROR_VALUE, "it is this rank");
    CT_ASSERT_ERR(ct_recv(pg, t, -1) == CT_OK, CT_ERROR_VALUE, "invalid source rank -1");
    CT_ASSERT_ERR(ct_process_group_split(pg, -1) != NULL, CT_ERROR_VALUE, "color");
    CT_ASSERT_ERR(ct_work_wait(NULL) == CT_OK, CT_ERROR_NULL_ARGUMENT, NULL);
    assert_false(ct_work_is_completed(NULL));
    ct_work_free(NULL);
    ct_scope_end();
    ct_process_group_free(NULL);
    assert_int_equal(single_rank_end(pg, s, dir), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_collectives_2), cmocka_unit_test(test_collectives_3),
        cmocka_unit_test(test_collectives_4), cmocka_unit_test(test_rank_order),
        cmocka_unit_test(test_p2p_async_split), cmocka_unit_test(test_killed_rank),
        cmocka_unit_test(test_hung_rank),     cmocka_unit_test(test_absent_rank),
        cmocka_unit_test(test_mismatched),    cmocka_unit_test(test_from_env),
        cmocka_unit_test(test_trace_log),
        cmocka_unit_test(test_errors), /* last: it runs ops in this process */
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
