/* The key-value store: the TCP store (server and client), the file store, and the bytes
 * of PyTorch's TCPStore protocol (tests/data/tcpstore_trace.txt, recorded from
 * PyTorch's own client and server). PyTorch's client and server themselves:
 * test_dist_store_torch.c. */
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"
#include "distributed/dist_internal.h"

static char tmpdir[256];

static void make_tmpdir(void) {
    snprintf(tmpdir, sizeof tmpdir, "/tmp/ct_store_test_XXXXXX");
    assert_non_null(mkdtemp(tmpdir));
}

static void rm_tmpdir(void) {
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    assert_int_equal(system(cmd), 0);
}

/* The operations every store has, with their answers. */
static void exercise(ct_store *s) {
    assert_int_equal(ct_store_set(s, "k", "v", 1), CT_OK);
    void *v = NULL;
    size_t n = 0;
    assert_int_equal(ct_store_get(s, "k", &v, &n), CT_OK);
    assert_int_equal(n, 1);
    assert_string_equal(v, "v");
    free(v);
    int64_t x = 0;
    assert_int_equal(ct_store_add(s, "n", 5, &x), CT_OK);
    assert_int_equal(x, 5);
    assert_int_equal(ct_store_add(s, "n", -7, &x), CT_OK);
    assert_int_equal(x, -2);
    assert_int_equal(ct_store_get(s, "n", &v, &n), CT_OK);
    assert_string_equal(v, "-2"); /* counters are decimal text, as TCPStore's */
    free(v);
    /* compare_set: a hit swaps, a miss returns the current value. */
    assert_int_equal(ct_store_compare_set(s, "k", "v", 1, "w", 1, &v, &n), CT_OK);
    assert_string_equal(v, "w");
    free(v);
    assert_int_equal(ct_store_compare_set(s, "k", "zz", 2, "q", 1, &v, &n), CT_OK);
    assert_string_equal(v, "w");
    free(v);
    assert_int_equal(ct_store_compare_set(s, "fresh", "", 0, "new", 3, &v, &n), CT_OK);
    assert_string_equal(v, "new");
    free(v);
    const char *keys[] = {"k", "absent"};
    bool ready = true;
    assert_int_equal(ct_store_check(s, keys, 2, &ready), CT_OK);
    assert_false(ready);
    assert_int_equal(ct_store_check(s, keys, 1, &ready), CT_OK);
    assert_true(ready);
    assert_int_equal(ct_store_wait(s, keys, 1, -1), CT_OK);
    /* A wait that times out names the keys still missing, and only those. */
    CT_ASSERT_ERR(ct_store_wait(s, keys, 2, 150) == CT_OK, CT_ERROR_RUNTIME, "waiting for keys: absent");
    const char *two[] = {"nope1", "k", "nope2"};
    assert_int_not_equal(ct_store_wait(s, two, 3, 100), CT_OK);
    assert_non_null(strstr(ct_last_error(), "nope1, nope2"));
    ct_clear_error();
    /* The connection still works after a cancelled wait. */
    int64_t nk = 0;
    assert_int_equal(ct_store_num_keys(s, &nk), CT_OK);
    assert_int_equal(nk, 3);
    bool deleted = false;
    assert_int_equal(ct_store_delete_key(s, "fresh", &deleted), CT_OK);
    assert_true(deleted);
    assert_int_equal(ct_store_delete_key(s, "fresh", &deleted), CT_OK);
    assert_false(deleted);
    /* Binary values, with zero bytes. */
    const unsigned char bin[5] = {0, 1, 0, 255, 7};
    assert_int_equal(ct_store_set(s, "bin", bin, 5), CT_OK);
    assert_int_equal(ct_store_get(s, "bin", &v, &n), CT_OK);
    assert_int_equal(n, 5);
    assert_memory_equal(v, bin, 5);
    free(v);
    /* A get of a key nobody sets times out naming it. */
    assert_int_equal(ct_store_set_timeout(s, 100), CT_OK);
    CT_ASSERT_ERR(ct_store_get(s, "missing/3", &v, &n) == CT_OK, CT_ERROR_RUNTIME, "missing/3");
}

static void test_tcp_store(void **state) {
    ct_store *s = ct_store_tcp(NULL, 0, true, 5000);
    CT_ASSERT_OK(s);
    assert_true(ct_store_port(s) > 0);
    exercise(s);
    /* A second client of the same server sees the keys. */
    ct_store *c = ct_store_tcp("127.0.0.1", ct_store_port(s), false, 5000);
    CT_ASSERT_OK(c);
    void *v = NULL;
    assert_int_equal(ct_store_get(c, "k", &v, NULL), CT_OK);
    assert_string_equal(v, "w");
    free(v);
    ct_store_free(c);
    ct_store_free(s);
}

static void test_file_store(void **state) {
    make_tmpdir();
    char url[300];
    snprintf(url, sizeof url, "file://%s/store", tmpdir);
    ct_store *s = ct_store_open(url, 5000);
    CT_ASSERT_OK(s);
    assert_int_equal(ct_store_port(s), -1);
    exercise(s);
    ct_store_free(s);
    rm_tmpdir();
}

/* A waiter is woken by another client's set. */
static void test_wait_woken(void **state) {
    ct_store *s = ct_store_tcp(NULL, 0, true, 5000);
    CT_ASSERT_OK(s);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        ct_store *c = ct_store_tcp("127.0.0.1", ct_store_port(s), false, 5000);
        usleep(100000);
        _exit(c && ct_store_set(c, "late", "1", 1) == CT_OK ? 0 : 1);
    }
    const char *k = "late";
    assert_int_equal(ct_store_wait(s, &k, 1, 5000), CT_OK);
    int status = 0;
    waitpid(pid, &status, 0);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    ct_store_free(s);
}

static void test_store_errors(void **state) {
    CT_ASSERT_ERR(ct_store_open(NULL, 100) != NULL, CT_ERROR_NULL_ARGUMENT, NULL);
    CT_ASSERT_ERR(ct_store_open("http://x", 100) != NULL, CT_ERROR_VALUE, "unsupported store URL");
    CT_ASSERT_ERR(ct_store_open("tcp://nohost", 100) != NULL, CT_ERROR_VALUE, "tcp://HOST:PORT");
    CT_ASSERT_ERR(ct_store_tcp("127.0.0.1", 0, false, 100) != NULL, CT_ERROR_VALUE, "port");
    CT_ASSERT_ERR(ct_store_tcp("127.0.0.1", 70000, false, 100) != NULL, CT_ERROR_VALUE, "port");
    CT_ASSERT_ERR(ct_store_tcp(NULL, 0, true, 0) != NULL, CT_ERROR_VALUE, "timeout must be positive");
    CT_ASSERT_ERR(ct_store_file("", 100) != NULL, CT_ERROR_VALUE, "empty path");
    CT_ASSERT_ERR(ct_store_file("/proc/version", 100) != NULL, CT_ERROR_IO, NULL);
    /* Nobody listens: a clear error within the timeout. */
    int fd = ct_dist_listen("127.0.0.1", 0, NULL);
    int port = 0;
    struct sockaddr_in sa;
    socklen_t len = sizeof sa;
    getsockname(fd, (struct sockaddr *)&sa, &len);
    port = ntohs(sa.sin_port);
    close(fd);
    CT_ASSERT_ERR(ct_store_tcp("127.0.0.1", port, false, 200) != NULL, CT_ERROR_RUNTIME, "could not connect");
    /* Something that is not a TCPStore. */
    fd = ct_dist_listen("127.0.0.1", 0, &port);
    CT_ASSERT_ERR(ct_store_tcp("127.0.0.1", port, false, 300) != NULL, CT_ERROR_RUNTIME, "TCPStore server");
    close(fd);
    ct_store *s = ct_store_tcp(NULL, 0, true, 1000);
    CT_ASSERT_OK(s);
    CT_ASSERT_ERR(ct_store_set(s, NULL, "x", 1) == CT_OK, CT_ERROR_NULL_ARGUMENT, NULL);
    CT_ASSERT_ERR(ct_store_set(s, "k", NULL, 1) == CT_OK, CT_ERROR_NULL_ARGUMENT, NULL);
    CT_ASSERT_ERR(ct_store_get(s, "k", NULL, NULL) == CT_OK, CT_ERROR_NULL_ARGUMENT, NULL);
    bool ready;
    CT_ASSERT_ERR(ct_store_check(s, NULL, 1, &ready) == CT_OK, CT_ERROR_NULL_ARGUMENT, NULL);
    CT_ASSERT_ERR(ct_store_wait(s, NULL, -1, 10) == CT_OK, CT_ERROR_VALUE, "non-negative");
    CT_ASSERT_ERR(ct_store_set_timeout(s, -5) == CT_OK, CT_ERROR_VALUE, "timeout");
    CT_ASSERT_ERR(ct_store_num_keys(NULL, NULL) == CT_OK, CT_ERROR_NULL_ARGUMENT, NULL);
    CT_ASSERT_ERR(ct_store_server_start(NULL, -1) != NULL, CT_ERROR_VALUE, "port");
    ct_store_free(s);
    ct_store_free(NULL);
    ct_store_server_stop(NULL);
}

/* ------------------------------------------------------------ the recorded trace */

static size_t unhex(const char *h, unsigned char *out, size_t cap) {
    size_t n = 0;
    while (h[0] && h[1] && h[0] != '\n' && n < cap) {
        unsigned v;
        sscanf(h, "%2x", &v);
        out[n++] = (unsigned char)v;
        h += 2;
    }
    return n;
}

static void test_tcpstore_trace(void **state) {
    FILE *f = fopen(CT_TEST_DATA_DIR "/tcpstore_trace.txt", "r");
    assert_non_null(f);
    ct_store_server *srv = ct_store_server_start("127.0.0.1", 0);
    CT_ASSERT_OK(srv);
    int fd = ct_dist_connect("test", "127.0.0.1", ct_store_server_port(srv), ct_dist_now_ms() + 2000);
    assert_true(fd >= 0);
    char line[4096], name[128] = "";
    static unsigned char c[2048], s[2048], got[2048];
    size_t nc = 0;
    int blocks = 0;
    while (fgets(line, sizeof line, f)) {
        if (line[0] == '#') {
            size_t len = strcspn(line + 2, "\n");
            if (len >= sizeof name)
                len = sizeof name - 1;
            memcpy(name, line + 2, len);
            name[len] = 0;
        } else if (line[0] == 'C') {
            nc = unhex(line + 2, c, sizeof c);
        } else if (line[0] == 'S') {
            size_t ns = line[1] == ' ' ? unhex(line + 2, s, sizeof s) : 0;
            assert_int_equal(ct_dist_send_all(fd, c, nc, ct_dist_now_ms() + 2000), 0);
            if (ns) {
                if (ct_dist_recv_all(fd, got, ns, ct_dist_now_ms() + 2000) != 0)
                    fail_msg("%s: no answer (%s)", name, strerror(errno));
                if (memcmp(got, s, ns) != 0)
                    fail_msg("%s: the answer differs from PyTorch's server", name);
            }
            /* Nothing more than PyTorch's server sends. */
            struct pollfd p = {fd, POLLIN, 0};
            if (poll(&p, 1, 50) != 0)
                fail_msg("%s: the server sent more than PyTorch's", name);
            blocks++;
        }
    }
    fclose(f);
    assert_int_equal(blocks, 18);
    close(fd);
    ct_store_server_stop(srv);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tcp_store),       cmocka_unit_test(test_file_store),
        cmocka_unit_test(test_wait_woken),      cmocka_unit_test(test_store_errors),
        cmocka_unit_test(test_tcpstore_trace),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
