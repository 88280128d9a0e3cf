/* The key-value store: PyTorch's TCPStore protocol (server and client) and a file
 * store for one machine. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "distributed/dist_internal.h"

/* Note [TCPStore wire protocol]
 * The bytes PyTorch's TCPStore client and server exchange (c10d's TCPStoreBackend),
 * all integers in the host's byte order (little-endian on every machine PyTorch
 * runs on), a "string" being a uint64 length and that many bytes:
 *
 *   client -> server                                  server -> client
 *   0  VALIDATE    uint32 0x3C85F7CE                  (nothing)
 *   1  SET         key, value                         (nothing)
 *   2  COMPARE_SET key, expected, desired             value after the call (string)
 *   3  GET         key                                value (string)
 *   4  ADD         key, int64 delta                   int64 new value
 *   5  CHECK       uint64 count, count keys           uint8 0 READY / 1 NOT_READY
 *   6  WAIT        uint64 count, count keys           uint8 0 STOP_WAITING, once all exist
 *   7  GETNUMKEYS                                     int64 count
 *   8  DELETE_KEY  key                                int64 number deleted (0 or 1)
 *   9  APPEND      key, value                         (nothing)
 *   10 MULTI_GET   uint64 count, count keys           count values
 *   11 MULTI_SET   uint64 count, count (key, value)   (nothing)
 *   12 CANCEL_WAIT                                    uint8 1 WAIT_CANCELED
 *   13 PING        uint32 nonce                       uint32 the same nonce
 *
 * ADD keeps the number as decimal text, so GET of a counter reads "5". A GET of a
 * missing key is a protocol error (the server drops the connection), so a client
 * WAITs for the key first. PyTorch's client connects with VALIDATE, then PING, and
 * prefixes every user key with "/" (store.set("k") sends "/k"); this client does the
 * same, so the two see each other's keys. A WAIT that times out sends CANCEL_WAIT and
 * reads up to WAIT_CANCELED (a STOP_WAITING may come first, when the key arrived in
 * between). tests/test_dist_store.c replays a trace recorded from PyTorch 2.15's
 * client (tests/golden/gen_tcpstore_trace.py) against this server. */

enum {
    Q_VALIDATE = 0,
    Q_SET,
    Q_COMPARE_SET,
    Q_GET,
    Q_ADD,
    Q_CHECK,
    Q_WAIT,
    Q_GETNUMKEYS,
    Q_DELETE_KEY,
    Q_APPEND,
    Q_MULTI_GET,
    Q_MULTI_SET,
    Q_CANCEL_WAIT,
    Q_PING,
};
#define VALIDATION_MAGIC 0x3C85F7CEu
/* How long the server waits for the rest of a query whose first byte came. */
#define QUERY_BODY_MS 30000
/* Longest key or value the server accepts (PyTorch has no limit; a wild length from a
 * stray client must not allocate gigabytes). */
#define MAX_VALUE_BYTES ((uint64_t)1 << 31)

struct ct_store {
    const ct_store_vtable *vt;
    int64_t timeout_ms;
    /* tcp */
    int fd;
    pthread_mutex_t mu;
    ct_store_server *own_server;
    char local_addr[64];
    char host[256];
    int port;
    /* file */
    char *dir;
};

/* ================================================================= server */

typedef struct {
    char *key;
    uint8_t *val;
    size_t n;
} kv_entry;

typedef struct {
    int fd;
    char **keys;
    int nkeys;
} waiter;

struct ct_store_server {
    int listen_fd;
    int port;
    int pipe_fd[2];
    pthread_t thread;
    kv_entry *kv;
    int nkv, cap_kv;
    int *clients;
    int nclients, cap_clients;
    waiter *waiters;
    int nwaiters, cap_waiters;
};

static kv_entry *kv_find(ct_store_server *s, const char *key) {
    for (int i = 0; i < s->nkv; i++)
        if (strcmp(s->kv[i].key, key) == 0)
            return &s->kv[i];
    return NULL;
}

static int kv_set(ct_store_server *s, const char *key, uint8_t *val, size_t n) {
    kv_entry *e = kv_find(s, key);
    if (e) {
        free(e->val);
        e->val = val;
        e->n = n;
        return 0;
    }
    if (s->nkv == s->cap_kv) {
        int cap = s->cap_kv ? 2 * s->cap_kv : 16;
        kv_entry *p = realloc(s->kv, (size_t)cap * sizeof *p);
        if (!p)
            return -1;
        s->kv = p;
        s->cap_kv = cap;
    }
    char *k = strdup(key);
    if (!k)
        return -1;
    s->kv[s->nkv++] = (kv_entry){k, val, n};
    return 0;
}

static void waiter_free(waiter *w) {
    for (int i = 0; i < w->nkeys; i++)
        free(w->keys[i]);
    free(w->keys);
}

static void drop_waiters_of(ct_store_server *s, int fd) {
    for (int i = 0; i < s->nwaiters;) {
        if (s->waiters[i].fd == fd) {
            waiter_free(&s->waiters[i]);
            s->waiters[i] = s->waiters[--s->nwaiters];
        } else {
            i++;
        }
    }
}

static bool keys_ready(ct_store_server *s, char **keys, int n) {
    for (int i = 0; i < n; i++)
        if (!kv_find(s, keys[i]))
            return false;
    return true;
}

/* After a change: answer every waiter whose keys all exist now. */
static void wake_waiters(ct_store_server *s) {
    for (int i = 0; i < s->nwaiters;) {
        waiter *w = &s->waiters[i];
        if (keys_ready(s, w->keys, w->nkeys)) {
            uint8_t stop = 0;
            (void)ct_dist_send_all(w->fd, &stop, 1, ct_dist_now_ms() + QUERY_BODY_MS);
            waiter_free(w);
            s->waiters[i] = s->waiters[--s->nwaiters];
        } else {
            i++;
        }
    }
}

static int rd(int fd, void *p, size_t n) { return ct_dist_recv_all(fd, p, n, ct_dist_now_ms() + QUERY_BODY_MS); }
static int wr(int fd, const void *p, size_t n) {
    return ct_dist_send_all(fd, p, n, ct_dist_now_ms() + QUERY_BODY_MS);
}

/* A length-prefixed byte string; *out malloc'ed with a zero byte past the end. */
static int rd_bytes(int fd, uint8_t **out, size_t *n) {
    uint64_t len;
    if (rd(fd, &len, 8) != 0 || len > MAX_VALUE_BYTES)
        return -1;
    uint8_t *b = malloc((size_t)len + 1);
    if (!b)
        return -1;
    if (len && rd(fd, b, (size_t)len) != 0) {
        free(b);
        return -1;
    }
    b[len] = 0;
    *out = b;
    *n = (size_t)len;
    return 0;
}

static int wr_bytes(int fd, const void *p, size_t n) {
    uint64_t len = n;
    if (wr(fd, &len, 8) != 0)
        return -1;
    return n ? wr(fd, p, n) : 0;
}

static int rd_keys(int fd, char ***keys, int *nkeys) {
    uint64_t count;
    if (rd(fd, &count, 8) != 0 || count > (1u << 20))
        return -1;
    char **k = calloc(count ? (size_t)count : 1, sizeof *k);
    if (!k)
        return -1;
    for (uint64_t i = 0; i < count; i++) {
        size_t n;
        if (rd_bytes(fd, (uint8_t **)&k[i], &n) != 0) {
            for (uint64_t j = 0; j < i; j++)
                free(k[j]);
            free(k);
            return -1;
        }
    }
    *keys = k;
    *nkeys = (int)count;
    return 0;
}

static void free_keys(char **keys, int n) {
    for (int i = 0; i < n; i++)
        free(keys[i]);
    free(keys);
}

/* Serves one query from fd; -1 drops the connection. */
static int serve_query(ct_store_server *s, int fd) {
    uint8_t q;
    if (rd(fd, &q, 1) != 0)
        return -1;
    switch (q) {
    case Q_VALIDATE: {
        uint32_t magic;
        if (rd(fd, &magic, 4) != 0 || magic != VALIDATION_MAGIC)
            return -1;
        return 0;
    }
    case Q_PING: {
        uint32_t nonce;
        if (rd(fd, &nonce, 4) != 0)
            return -1;
        return wr(fd, &nonce, 4);
    }
    case Q_SET:
    case Q_APPEND: {
        uint8_t *key, *val;
        size_t nk, nv;
        if (rd_bytes(fd, &key, &nk) != 0)
            return -1;
        if (rd_bytes(fd, &val, &nv) != 0) {
            free(key);
            return -1;
        }
        kv_entry *e = q == Q_APPEND ? kv_find(s, (char *)key) : NULL;
        int rc = 0;
        if (e) {
            uint8_t *p = realloc(e->val, e->n + nv + 1);
            if (p) {
                memcpy(p + e->n, val, nv);
                e->n += nv;
                p[e->n] = 0;
                e->val = p;
            } else {
                rc = -1;
            }
            free(val);
        } else if (kv_set(s, (char *)key, val, nv) != 0) {
            free(val);
            rc = -1;
        }
        free(key);
        wake_waiters(s);
        return rc;
    }
    case Q_COMPARE_SET: {
        uint8_t *key, *expected = NULL, *desired = NULL;
        size_t nk, ne, nd;
        if (rd_bytes(fd, &key, &nk) != 0)
            return -1;
        int rc = -1;
        if (rd_bytes(fd, &expected, &ne) != 0 || rd_bytes(fd, &desired, &nd) != 0)
            goto cas_done;
        kv_entry *e = kv_find(s, (char *)key);
        if (!e) {
            if (ne == 0) {
                if (kv_set(s, (char *)key, desired, nd) != 0)
                    goto cas_done;
                rc = wr_bytes(fd, desired, nd);
                desired = NULL;
                wake_waiters(s);
            } else {
                rc = wr_bytes(fd, expected, ne);
            }
        } else {
            if (e->n == ne && memcmp(e->val, expected, ne) == 0) {
                free(e->val);
                e->val = desired;
                e->n = nd;
                desired = NULL;
            }
            rc = wr_bytes(fd, e->val, e->n);
        }
    cas_done:
        free(key);
        free(expected);
        free(desired);
        return rc;
    }
    case Q_GET: {
        uint8_t *key;
        size_t nk;
        if (rd_bytes(fd, &key, &nk) != 0)
            return -1;
        kv_entry *e = kv_find(s, (char *)key);
        free(key);
        if (!e)
            return -1; /* as PyTorch's server: a GET of a missing key is an error */
        return wr_bytes(fd, e->val, e->n);
    }
    case Q_ADD: {
        uint8_t *key;
        size_t nk;
        int64_t delta;
        if (rd_bytes(fd, &key, &nk) != 0)
            return -1;
        if (rd(fd, &delta, 8) != 0) {
            free(key);
            return -1;
        }
        kv_entry *e = kv_find(s, (char *)key);
        int64_t v = delta;
        if (e)
            v += strtoll((const char *)e->val, NULL, 10);
        char buf[32];
        int len = snprintf(buf, sizeof buf, "%" PRId64, v);
        uint8_t *val = malloc((size_t)len + 1);
        int rc = -1;
        if (val) {
            memcpy(val, buf, (size_t)len + 1);
            if (kv_set(s, (char *)key, val, (size_t)len) == 0)
                rc = 0;
            else
                free(val);
        }
        free(key);
        if (rc == 0)
            rc = wr(fd, &v, 8);
        wake_waiters(s);
        return rc;
    }
    case Q_CHECK:
    case Q_WAIT: {
        char **keys;
        int n;
        if (rd_keys(fd, &keys, &n) != 0)
            return -1;
        bool ready = keys_ready(s, keys, n);
        if (q == Q_CHECK || ready) {
            free_keys(keys, n);
            uint8_t r = q == Q_CHECK ? (ready ? 0 : 1) : 0;
            return wr(fd, &r, 1);
        }
        if (s->nwaiters == s->cap_waiters) {
            int cap = s->cap_waiters ? 2 * s->cap_waiters : 8;
            waiter *p = realloc(s->waiters, (size_t)cap * sizeof *p);
            if (!p) {
                free_keys(keys, n);
                return -1;
            }
            s->waiters = p;
            s->cap_waiters = cap;
        }
        s->waiters[s->nwaiters++] = (waiter){fd, keys, n};
        return 0;
    }
    case Q_GETNUMKEYS: {
        int64_t n = s->nkv;
        return wr(fd, &n, 8);
    }
    case Q_DELETE_KEY: {
        uint8_t *key;
        size_t nk;
        if (rd_bytes(fd, &key, &nk) != 0)
            return -1;
        int64_t deleted = 0;
        for (int i = 0; i < s->nkv; i++) {
            if (strcmp(s->kv[i].key, (char *)key) == 0) {
                free(s->kv[i].key);
                free(s->kv[i].val);
                s->kv[i] = s->kv[--s->nkv];
                deleted = 1;
                break;
            }
        }
        free(key);
        return wr(fd, &deleted, 8);
    }
    case Q_MULTI_GET: {
        char **keys;
        int n;
        if (rd_keys(fd, &keys, &n) != 0)
            return -1;
        int rc = 0;
        for (int i = 0; i < n && rc == 0; i++) {
            kv_entry *e = kv_find(s, keys[i]);
            rc = e ? wr_bytes(fd, e->val, e->n) : -1;
        }
        free_keys(keys, n);
        return rc;
    }
    case Q_MULTI_SET: {
        uint64_t count;
        if (rd(fd, &count, 8) != 0 || count > (1u << 20))
            return -1;
        for (uint64_t i = 0; i < count; i++) {
            uint8_t *key, *val;
            size_t nk, nv;
            if (rd_bytes(fd, &key, &nk) != 0)
                return -1;
            if (rd_bytes(fd, &val, &nv) != 0) {
                free(key);
                return -1;
            }
            int rc = kv_set(s, (char *)key, val, nv);
            free(key);
            if (rc != 0) {
                free(val);
                return -1;
            }
        }
        wake_waiters(s);
        return 0;
    }
    case Q_CANCEL_WAIT: {
        drop_waiters_of(s, fd);
        uint8_t r = 1;
        return wr(fd, &r, 1);
    }
    default:
        return -1; /* unknown query: drop the client, as PyTorch's server does */
    }
}

static void *server_main(void *arg) {
    ct_store_server *s = arg;
    struct pollfd *fds = NULL;
    int cap = 0;
    for (;;) {
        int n = 2 + s->nclients;
        if (n > cap) {
            struct pollfd *p = realloc(fds, (size_t)n * sizeof *p);
            if (!p) {
                ct_dist_sleep_ms(10);
                continue;
            }
            fds = p;
            cap = n;
        }
        fds[0] = (struct pollfd){s->listen_fd, POLLIN, 0};
        fds[1] = (struct pollfd){s->pipe_fd[0], POLLIN, 0};
        for (int i = 0; i < s->nclients; i++)
            fds[2 + i] = (struct pollfd){s->clients[i], POLLIN, 0};
        if (poll(fds, (nfds_t)n, -1) < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        if (fds[1].revents)
            break;
        /* Clients first (indices are those of the poll), then new connections. */
        for (int i = n - 1; i >= 2; i--) {
            if (!fds[i].revents)
                continue;
            int fd = fds[i].fd;
            if (serve_query(s, fd) != 0) {
                drop_waiters_of(s, fd);
                close(fd);
                for (int j = 0; j < s->nclients; j++)
                    if (s->clients[j] == fd) {
                        s->clients[j] = s->clients[--s->nclients];
                        break;
                    }
            }
        }
        if (fds[0].revents & POLLIN) {
            int c = accept(s->listen_fd, NULL, NULL);
            if (c >= 0) {
                fcntl(c, F_SETFD, FD_CLOEXEC);
                if (s->nclients == s->cap_clients) {
                    int nc = s->cap_clients ? 2 * s->cap_clients : 16;
                    int *p = realloc(s->clients, (size_t)nc * sizeof *p);
                    if (!p) {
                        close(c);
                        continue;
                    }
                    s->clients = p;
                    s->cap_clients = nc;
                }
                s->clients[s->nclients++] = c;
            }
        }
    }
    free(fds);
    return NULL;
}

ct_store_server *ct_store_server_start(const char *host, int port) {
    static const char *op = "ct_store_server_start";
    if (port < 0 || port > 65535) {
        ct_error(CT_ERROR_VALUE, op, "port must be in [0, 65535], got %d", port);
        return NULL;
    }
    ct_store_server *s = ct_xcalloc(op, 1, sizeof *s);
    if (!s)
        return NULL;
    s->listen_fd = ct_dist_listen(host, port, &s->port);
    if (s->listen_fd < 0) {
        ct_error(CT_ERROR_RUNTIME, op, "cannot listen on %s:%d: %s", host ? host : "*", port, strerror(errno));
        free(s);
        return NULL;
    }
    if (pipe(s->pipe_fd) != 0 || fcntl(s->pipe_fd[0], F_SETFD, FD_CLOEXEC) != 0 ||
        fcntl(s->pipe_fd[1], F_SETFD, FD_CLOEXEC) != 0) {
        ct_error(CT_ERROR_RUNTIME, op, "pipe: %s", strerror(errno));
        close(s->listen_fd);
        free(s);
        return NULL;
    }
    if (pthread_create(&s->thread, NULL, server_main, s) != 0) {
        ct_error(CT_ERROR_RUNTIME, op, "cannot start the server thread");
        close(s->listen_fd);
        close(s->pipe_fd[0]);
        close(s->pipe_fd[1]);
        free(s);
        return NULL;
    }
    return s;
}

int ct_store_server_port(const ct_store_server *srv) { return srv ? srv->port : -1; }

void ct_store_server_stop(ct_store_server *s) {
    if (!s)
        return;
    char b = 0;
    ssize_t w = write(s->pipe_fd[1], &b, 1);
    (void)w;
    pthread_join(s->thread, NULL);
    close(s->listen_fd);
    close(s->pipe_fd[0]);
    close(s->pipe_fd[1]);
    for (int i = 0; i < s->nclients; i++)
        close(s->clients[i]);
    for (int i = 0; i < s->nkv; i++) {
        free(s->kv[i].key);
        free(s->kv[i].val);
    }
    for (int i = 0; i < s->nwaiters; i++)
        waiter_free(&s->waiters[i]);
    free(s->kv);
    free(s->clients);
    free(s->waiters);
    free(s);
}

/* ================================================================= TCP client */

/* "/" + key, as PyTorch's client. */
static char *prefixed(const char *op, const char *key) {
    size_t n = strlen(key);
    char *p = ct_xmalloc(op, n + 2);
    if (p) {
        p[0] = '/';
        memcpy(p + 1, key, n + 1);
    }
    return p;
}

static ct_status io_error(ct_store *s, const char *op) {
    if (errno == ETIMEDOUT)
        return ct_error(CT_ERROR_RUNTIME, op, "no answer from the store at %s:%d within %lld ms", s->host, s->port,
                        (long long)s->timeout_ms);
    return ct_error(CT_ERROR_RUNTIME, op, "lost the connection to the store at %s:%d: %s", s->host, s->port,
                    strerror(errno));
}

static int64_t deadline(const ct_store *s) { return ct_dist_now_ms() + s->timeout_ms; }

static int c_send_str(ct_store *s, const void *p, size_t n) {
    uint64_t len = n;
    if (ct_dist_send_all(s->fd, &len, 8, deadline(s)) != 0)
        return -1;
    return n ? ct_dist_send_all(s->fd, p, n, deadline(s)) : 0;
}

/* A value read whole into b (len bytes, room for one more): NUL-terminated and handed
 * to the caller through *out, or freed when out is NULL; its length through *n. */
static void give_value(void *b, size_t len, void **out, size_t *n) {
    ((char *)b)[len] = 0;
    if (out)
        *out = b;
    else
        free(b);
    if (n)
        *n = len;
}

static int c_recv_str(ct_store *s, void **out, size_t *n) {
    uint64_t len;
    if (ct_dist_recv_all(s->fd, &len, 8, deadline(s)) != 0)
        return -1;
    if (len > MAX_VALUE_BYTES) {
        errno = EPROTO;
        return -1;
    }
    uint8_t *b = malloc((size_t)len + 1);
    if (!b) {
        errno = ENOMEM;
        return -1;
    }
    if (len && ct_dist_recv_all(s->fd, b, (size_t)len, deadline(s)) != 0) {
        free(b);
        return -1;
    }
    give_value(b, (size_t)len, out, n);
    return 0;
}

static int c_send_q(ct_store *s, uint8_t q) { return ct_dist_send_all(s->fd, &q, 1, deadline(s)); }

static int c_send_key(ct_store *s, const char *op, const char *key) {
    char *k = prefixed(op, key);
    if (!k) {
        errno = ENOMEM;
        return -1;
    }
    int rc = c_send_str(s, k, strlen(k));
    free(k);
    return rc;
}

static int c_send_keys(ct_store *s, const char *op, const char *const *keys, int n) {
    uint64_t count = (uint64_t)n;
    if (ct_dist_send_all(s->fd, &count, 8, deadline(s)) != 0)
        return -1;
    for (int i = 0; i < n; i++)
        if (c_send_key(s, op, keys[i]) != 0)
            return -1;
    return 0;
}

static ct_status tcp_set(ct_store *s, const char *key, const void *v, size_t n) {
    static const char *op = "ct_store_set";
    pthread_mutex_lock(&s->mu);
    int rc = c_send_q(s, Q_SET) || c_send_key(s, op, key) || c_send_str(s, v, n);
    pthread_mutex_unlock(&s->mu);
    return rc ? io_error(s, op) : CT_OK;
}

static ct_status tcp_check_locked(ct_store *s, const char *op, const char *const *keys, int n, bool *ready) {
    uint8_t r;
    if (c_send_q(s, Q_CHECK) || c_send_keys(s, op, keys, n) || ct_dist_recv_all(s->fd, &r, 1, deadline(s)))
        return io_error(s, op);
    *ready = r == 0;
    return CT_OK;
}

static ct_status tcp_check(ct_store *s, const char *const *keys, int n, bool *ready) {
    pthread_mutex_lock(&s->mu);
    ct_status st = tcp_check_locked(s, "ct_store_check", keys, n, ready);
    pthread_mutex_unlock(&s->mu);
    return st;
}

/* The keys still missing, for a timeout's message: "a, b". */
static void missing_keys(ct_store *s, const char *const *keys, int n, char *buf, size_t cap) {
    size_t used = 0;
    buf[0] = 0;
    for (int i = 0; i < n; i++) {
        bool ready = false;
        if (s->vt->check(s, &keys[i], 1, &ready) != CT_OK) {
            ct_clear_error();
            ready = false;
        }
        if (ready)
            continue;
        int k = snprintf(buf + used, cap - used, "%s%s", used ? ", " : "", keys[i]);
        if (k < 0 || (size_t)k >= cap - used) {
            if (cap > 4)
                strcpy(buf + cap - 4, "...");
            return;
        }
        used += (size_t)k;
    }
}

static ct_status wait_timeout_error(ct_store *s, const char *op, const char *const *keys, int n, int64_t t) {
    char miss[512];
    missing_keys(s, keys, n, miss, sizeof miss);
    return ct_error(CT_ERROR_RUNTIME, op, "timed out after %lld ms waiting for keys: %s", (long long)t,
                    miss[0] ? miss : "(they arrived as it timed out)");
}

static ct_status tcp_wait(ct_store *s, const char *const *keys, int n, int64_t timeout_ms) {
    static const char *op = "ct_store_wait";
    int64_t t = timeout_ms < 0 ? s->timeout_ms : timeout_ms;
    pthread_mutex_lock(&s->mu);
    if (c_send_q(s, Q_WAIT) || c_send_keys(s, op, keys, n)) {
        pthread_mutex_unlock(&s->mu);
        return io_error(s, op);
    }
    uint8_t r;
    if (ct_dist_recv_all(s->fd, &r, 1, ct_dist_now_ms() + t) == 0) {
        pthread_mutex_unlock(&s->mu);
        return CT_OK;
    }
    if (errno != ETIMEDOUT) {
        pthread_mutex_unlock(&s->mu);
        return io_error(s, op);
    }
    /* Cancel: the answer is WAIT_CANCELED, maybe after a late STOP_WAITING. */
    if (c_send_q(s, Q_CANCEL_WAIT) || ct_dist_recv_all(s->fd, &r, 1, deadline(s)) ||
        (r == 0 && ct_dist_recv_all(s->fd, &r, 1, deadline(s)))) {
        pthread_mutex_unlock(&s->mu);
        return io_error(s, op);
    }
    pthread_mutex_unlock(&s->mu);
    return wait_timeout_error(s, op, keys, n, t);
}

static ct_status tcp_get(ct_store *s, const char *key, void **v, size_t *n) {
    static const char *op = "ct_store_get";
    if (tcp_wait(s, &key, 1, -1) != CT_OK)
        return ct_last_status();
    pthread_mutex_lock(&s->mu);
    int rc = c_send_q(s, Q_GET) || c_send_key(s, op, key) || c_recv_str(s, v, n);
    pthread_mutex_unlock(&s->mu);
    return rc ? io_error(s, op) : CT_OK;
}

static ct_status tcp_add(ct_store *s, const char *key, int64_t d, int64_t *out) {
    static const char *op = "ct_store_add";
    int64_t v = 0;
    pthread_mutex_lock(&s->mu);
    int rc = c_send_q(s, Q_ADD) || c_send_key(s, op, key) || ct_dist_send_all(s->fd, &d, 8, deadline(s)) ||
             ct_dist_recv_all(s->fd, &v, 8, deadline(s));
    pthread_mutex_unlock(&s->mu);
    if (rc)
        return io_error(s, op);
    if (out)
        *out = v;
    return CT_OK;
}

static ct_status tcp_compare_set(ct_store *s, const char *key, const void *e, size_t ne, const void *d, size_t nd,
                                 void **out, size_t *nout) {
    static const char *op = "ct_store_compare_set";
    pthread_mutex_lock(&s->mu);
    int rc = c_send_q(s, Q_COMPARE_SET) || c_send_key(s, op, key) || c_send_str(s, e, ne) || c_send_str(s, d, nd) ||
             c_recv_str(s, out, nout);
    pthread_mutex_unlock(&s->mu);
    return rc ? io_error(s, op) : CT_OK;
}

static ct_status tcp_delete(ct_store *s, const char *key, bool *deleted) {
    static const char *op = "ct_store_delete_key";
    int64_t v = 0;
    pthread_mutex_lock(&s->mu);
    int rc = c_send_q(s, Q_DELETE_KEY) || c_send_key(s, op, key) || ct_dist_recv_all(s->fd, &v, 8, deadline(s));
    pthread_mutex_unlock(&s->mu);
    if (rc)
        return io_error(s, op);
    if (deleted)
        *deleted = v != 0;
    return CT_OK;
}

static ct_status tcp_num_keys(ct_store *s, int64_t *n) {
    pthread_mutex_lock(&s->mu);
    int rc = c_send_q(s, Q_GETNUMKEYS) || ct_dist_recv_all(s->fd, n, 8, deadline(s));
    pthread_mutex_unlock(&s->mu);
    return rc ? io_error(s, "ct_store_num_keys") : CT_OK;
}

static void tcp_free(ct_store *s) {
    if (s->fd >= 0)
        close(s->fd);
    pthread_mutex_destroy(&s->mu);
    ct_store_server_stop(s->own_server);
}

static const ct_store_vtable tcp_vt = {tcp_set,  tcp_get,    tcp_add,      tcp_compare_set, tcp_check,
                                       tcp_wait, tcp_delete, tcp_num_keys, tcp_free};

static ct_status check_timeout(const char *op, int64_t t) {
    if (t <= 0)
        return ct_error(CT_ERROR_VALUE, op, "timeout must be positive, got %lld ms", (long long)t);
    return CT_OK;
}

ct_store *ct_store_tcp(const char *host, int port, bool is_server, int64_t timeout_ms) {
    static const char *op = "ct_store_tcp";
    if (!host && !is_server) {
        ct_error_null(op);
        return NULL;
    }
    if (check_timeout(op, timeout_ms) != CT_OK)
        return NULL;
    if (port < 0 || port > 65535 || (port == 0 && !is_server)) {
        ct_error(CT_ERROR_VALUE, op, "port must be in [1, 65535]%s, got %d", is_server ? " (or 0)" : "", port);
        return NULL;
    }
    ct_store *s = ct_xcalloc(op, 1, sizeof *s);
    if (!s)
        return NULL;
    s->vt = &tcp_vt;
    s->timeout_ms = timeout_ms;
    s->fd = -1;
    pthread_mutex_init(&s->mu, NULL);
    if (is_server) {
        s->own_server = ct_store_server_start(NULL, port);
        if (!s->own_server) {
            pthread_mutex_destroy(&s->mu);
            free(s);
            return NULL;
        }
        port = s->own_server->port;
        if (!host)
            host = "127.0.0.1";
    }
    snprintf(s->host, sizeof s->host, "%s", host);
    s->port = port;
    s->fd = ct_dist_connect(op, host, port, ct_dist_now_ms() + timeout_ms);
    if (s->fd < 0) {
        tcp_free(s);
        free(s);
        return NULL;
    }
    /* VALIDATE, then PING: the answer proves a TCPStore server is there. */
    uint8_t hello[5] = {Q_VALIDATE};
    uint32_t magic = VALIDATION_MAGIC, nonce = (uint32_t)getpid(), echo = 0;
    memcpy(hello + 1, &magic, 4);
    uint8_t ping[5] = {Q_PING};
    memcpy(ping + 1, &nonce, 4);
    if (ct_dist_send_all(s->fd, hello, 5, deadline(s)) || ct_dist_send_all(s->fd, ping, 5, deadline(s)) ||
        ct_dist_recv_all(s->fd, &echo, 4, deadline(s)) || echo != nonce) {
        ct_error(CT_ERROR_RUNTIME, op, "%s:%d did not answer as a TCPStore server", host, port);
        tcp_free(s);
        free(s);
        return NULL;
    }
    if (ct_dist_local_addr(s->fd, s->local_addr, sizeof s->local_addr) != 0)
        s->local_addr[0] = 0;
    return s;
}

/* ================================================================= file store */

/* Note [File store]
 * One file per key in a directory, named "k_" and the key's bytes in hex (any key is
 * a valid name). A value is written to a temporary file and renamed over the key's
 * file, so a reader sees a whole value or none; add and compare_set hold an flock on
 * the directory's ".lock" across their read and write. wait polls for the files, with
 * sleeps growing from 1 to 20 ms. PyTorch's FileStore keeps one append-only file
 * instead; the two do not read each other's stores. */

static char *key_path(ct_store *s, const char *key) {
    size_t nk = strlen(key), nd = strlen(s->dir);
    char *p = ct_xmalloc("ct_store", nd + 4 + 2 * nk + 1);
    if (!p)
        return NULL;
    memcpy(p, s->dir, nd);
    memcpy(p + nd, "/k_", 3);
    char *q = p + nd + 3;
    for (size_t i = 0; i < nk; i++)
        q += sprintf(q, "%02x", (unsigned char)key[i]);
    *q = 0;
    return p;
}

static ct_status file_write(ct_store *s, const char *op, const char *key, const void *v, size_t n) {
    static _Atomic int counter;
    char *path = key_path(s, key);
    if (!path)
        return ct_last_status();
    size_t len = strlen(s->dir) + 64;
    char *tmp = ct_xmalloc(op, len);
    if (!tmp) {
        free(path);
        return ct_last_status();
    }
    snprintf(tmp, len, "%s/.tmp.%d.%d", s->dir, (int)getpid(), counter++);
    FILE *f = fopen(tmp, "wb");
    ct_status st = CT_OK;
    if (!f || (n && fwrite(v, 1, n, f) != n) || fclose(f) != 0 || rename(tmp, path) != 0)
        st = ct_error(CT_ERROR_IO, op, "cannot write key '%s' in %s: %s", key, s->dir, strerror(errno));
    if (st != CT_OK)
        unlink(tmp);
    free(tmp);
    free(path);
    return st;
}

/* 1 read, 0 missing, -1 error. */
static int file_read(ct_store *s, const char *op, const char *key, void **v, size_t *n) {
    char *path = key_path(s, key);
    if (!path)
        return -1;
    FILE *f = fopen(path, "rb");
    free(path);
    if (!f) {
        if (errno == ENOENT)
            return 0;
        ct_error(CT_ERROR_IO, op, "cannot read key '%s' in %s: %s", key, s->dir, strerror(errno));
        return -1;
    }
    size_t cap = 256, len = 0;
    char *b = malloc(cap);
    for (;;) {
        if (!b) {
            fclose(f);
            ct_error(CT_ERROR_OUT_OF_MEMORY, op, "out of memory reading key '%s'", key);
            return -1;
        }
        len += fread(b + len, 1, cap - len - 1, f);
        if (len < cap - 1)
            break;
        cap *= 2;
        char *nb = realloc(b, cap);
        if (!nb)
            free(b);
        b = nb;
    }
    fclose(f);
    give_value(b, len, v, n);
    return 1;
}

static int file_lock(ct_store *s) {
    size_t len = strlen(s->dir) + 8;
    char *p = malloc(len);
    if (!p)
        return -1;
    snprintf(p, len, "%s/.lock", s->dir);
    int fd = open(p, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    free(p);
    if (fd >= 0 && flock(fd, LOCK_EX) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

static void file_unlock(int fd) {
    flock(fd, LOCK_UN);
    close(fd);
}

static ct_status file_set(ct_store *s, const char *key, const void *v, size_t n) {
    return file_write(s, "ct_store_set", key, v, n);
}

static ct_status file_check(ct_store *s, const char *const *keys, int n, bool *ready) {
    *ready = true;
    for (int i = 0; i < n && *ready; i++) {
        char *path = key_path(s, keys[i]);
        if (!path)
            return ct_last_status();
        struct stat st;
        *ready = stat(path, &st) == 0;
        free(path);
    }
    return CT_OK;
}

static ct_status file_wait(ct_store *s, const char *const *keys, int n, int64_t timeout_ms) {
    int64_t t = timeout_ms < 0 ? s->timeout_ms : timeout_ms;
    int64_t end = ct_dist_now_ms() + t, nap = 1;
    for (;;) {
        bool ready;
        if (file_check(s, keys, n, &ready) != CT_OK)
            return ct_last_status();
        if (ready)
            return CT_OK;
        if (ct_dist_now_ms() >= end)
            return wait_timeout_error(s, "ct_store_wait", keys, n, t);
        ct_dist_sleep_ms(nap);
        if (nap < 20)
            nap *= 2;
    }
}

static ct_status file_get(ct_store *s, const char *key, void **v, size_t *n) {
    if (file_wait(s, &key, 1, -1) != CT_OK)
        return ct_last_status();
    int r = file_read(s, "ct_store_get", key, v, n);
    if (r < 0)
        return ct_last_status();
    if (r == 0)
        return ct_error(CT_ERROR_RUNTIME, "ct_store_get", "key '%s' was deleted while being read", key);
    return CT_OK;
}

static ct_status file_add(ct_store *s, const char *key, int64_t d, int64_t *out) {
    static const char *op = "ct_store_add";
    int lk = file_lock(s);
    if (lk < 0)
        return ct_error(CT_ERROR_IO, op, "cannot lock %s: %s", s->dir, strerror(errno));
    void *v = NULL;
    int r = file_read(s, op, key, &v, NULL);
    ct_status st = CT_OK;
    if (r < 0) {
        st = ct_last_status();
    } else {
        int64_t val = d + (r ? strtoll(v, NULL, 10) : 0);
        char buf[32];
        int len = snprintf(buf, sizeof buf, "%" PRId64, val);
        st = file_write(s, op, key, buf, (size_t)len);
        if (st == CT_OK && out)
            *out = val;
    }
    free(v);
    file_unlock(lk);
    return st;
}

static ct_status file_compare_set(ct_store *s, const char *key, const void *e, size_t ne, const void *d, size_t nd,
                                  void **out, size_t *nout) {
    static const char *op = "ct_store_compare_set";
    int lk = file_lock(s);
    if (lk < 0)
        return ct_error(CT_ERROR_IO, op, "cannot lock %s: %s", s->dir, strerror(errno));
    void *v = NULL;
    size_t nv = 0;
    int r = file_read(s, op, key, &v, &nv);
    ct_status st = CT_OK;
    const void *result = NULL;
    size_t nresult = 0;
    if (r < 0) {
        st = ct_last_status();
    } else if ((r == 0 && ne == 0) || (r == 1 && nv == ne && memcmp(v, e, ne) == 0)) {
        st = file_write(s, op, key, d, nd);
        result = d;
        nresult = nd;
    } else if (r == 0) {
        result = e;
        nresult = ne;
    } else {
        result = v;
        nresult = nv;
    }
    if (st == CT_OK && out) {
        *out = ct_xmalloc(op, nresult + 1);
        if (!*out) {
            st = ct_last_status();
        } else {
            if (nresult)
                memcpy(*out, result, nresult);
            ((char *)*out)[nresult] = 0;
            if (nout)
                *nout = nresult;
        }
    }
    free(v);
    file_unlock(lk);
    return st;
}

static ct_status file_delete(ct_store *s, const char *key, bool *deleted) {
    char *path = key_path(s, key);
    if (!path)
        return ct_last_status();
    int r = unlink(path);
    free(path);
    if (deleted)
        *deleted = r == 0;
    return CT_OK;
}

static ct_status file_num_keys(ct_store *s, int64_t *n) {
    DIR *d = opendir(s->dir);
    if (!d)
        return ct_error(CT_ERROR_IO, "ct_store_num_keys", "cannot list %s: %s", s->dir, strerror(errno));
    int64_t c = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        c += strncmp(e->d_name, "k_", 2) == 0;
    closedir(d);
    *n = c;
    return CT_OK;
}

static void file_free(ct_store *s) { free(s->dir); }

static const ct_store_vtable file_vt = {file_set,  file_get,    file_add,      file_compare_set, file_check,
                                        file_wait, file_delete, file_num_keys, file_free};

ct_store *ct_store_file(const char *dir, int64_t timeout_ms) {
    static const char *op = "ct_store_file";
    if (!dir) {
        ct_error_null(op);
        return NULL;
    }
    if (check_timeout(op, timeout_ms) != CT_OK)
        return NULL;
    if (!dir[0]) {
        ct_error(CT_ERROR_VALUE, op, "the store's directory is an empty path");
        return NULL;
    }
    if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
        ct_error(CT_ERROR_IO, op, "cannot create %s: %s", dir, strerror(errno));
        return NULL;
    }
    struct stat st;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
        ct_error(CT_ERROR_IO, op, "%s is not a directory", dir);
        return NULL;
    }
    ct_store *s = ct_xcalloc(op, 1, sizeof *s);
    if (!s)
        return NULL;
    s->vt = &file_vt;
    s->timeout_ms = timeout_ms;
    s->fd = -1;
    s->port = -1;
    s->dir = strdup(dir);
    if (!s->dir) {
        free(s);
        ct_error(CT_ERROR_OUT_OF_MEMORY, op, "out of memory");
        return NULL;
    }
    return s;
}

/* ================================================================= public entry points */

ct_store *ct_store_open(const char *url, int64_t timeout_ms) {
    static const char *op = "ct_store_open";
    if (!url) {
        ct_error_null(op);
        return NULL;
    }
    if (strncmp(url, "file://", 7) == 0)
        return ct_store_file(url + 7, timeout_ms);
    if (strncmp(url, "tcp://", 6) == 0) {
        const char *hp = url + 6, *colon = strrchr(hp, ':');
        char host[256];
        char *end = NULL;
        long port = colon ? strtol(colon + 1, &end, 10) : -1;
        if (!colon || colon == hp || (size_t)(colon - hp) >= sizeof host || !end || *end || end == colon + 1) {
            ct_error(CT_ERROR_VALUE, op, "expected tcp://HOST:PORT, got '%s'", url);
            return NULL;
        }
        memcpy(host, hp, (size_t)(colon - hp));
        host[colon - hp] = 0;
        return ct_store_tcp(host, port > 65535 || port < 0 ? -1 : (int)port, false, timeout_ms);
    }
    ct_error(CT_ERROR_VALUE, op, "unsupported store URL '%s' (expected tcp://HOST:PORT or file:///DIR)", url);
    return NULL;
}

void ct_store_free(ct_store *s) {
    if (!s)
        return;
    s->vt->free(s);
    free(s);
}

int ct_store_port(const ct_store *s) { return s && s->vt == &tcp_vt ? s->port : -1; }
int64_t ct_store_timeout(const ct_store *s) { return s ? s->timeout_ms : -1; }
const char *ct_store_local_addr(const ct_store *s) { return s && s->vt == &tcp_vt ? s->local_addr : ""; }

ct_status ct_store_set_timeout(ct_store *s, int64_t timeout_ms) {
    CT_CHECK_ARG_STATUS("ct_store_set_timeout", s);
    if (check_timeout("ct_store_set_timeout", timeout_ms) != CT_OK)
        return ct_last_status();
    s->timeout_ms = timeout_ms;
    return CT_OK;
}

#define STORE_ARGS(op, s, key)            \
    do {                                  \
        CT_CHECK_ARG_STATUS(op, s);       \
        CT_CHECK_ARG_STATUS(op, key);     \
    } while (0)

ct_status ct_store_set(ct_store *s, const char *key, const void *value, size_t n) {
    STORE_ARGS("ct_store_set", s, key);
    if (n && !value)
        return ct_error_null("ct_store_set");
    return s->vt->set(s, key, value, n);
}

ct_status ct_store_get(ct_store *s, const char *key, void **value, size_t *n) {
    STORE_ARGS("ct_store_get", s, key);
    CT_CHECK_ARG_STATUS("ct_store_get", value);
    *value = NULL;
    return s->vt->get(s, key, value, n);
}

ct_status ct_store_add(ct_store *s, const char *key, int64_t delta, int64_t *out) {
    STORE_ARGS("ct_store_add", s, key);
    return s->vt->add(s, key, delta, out);
}

ct_status ct_store_compare_set(ct_store *s, const char *key, const void *expected, size_t nexpected,
                               const void *desired, size_t ndesired, void **out, size_t *nout) {
    STORE_ARGS("ct_store_compare_set", s, key);
    if ((nexpected && !expected) || (ndesired && !desired))
        return ct_error_null("ct_store_compare_set");
    if (out)
        *out = NULL;
    return s->vt->compare_set(s, key, expected, nexpected, desired, ndesired, out, nout);
}

static ct_status check_keys(const char *op, const char *const *keys, int n) {
    if (n < 0)
        return ct_error(CT_ERROR_VALUE, op, "number of keys must be non-negative, got %d", n);
    if (n && !keys)
        return ct_error_null(op);
    for (int i = 0; i < n; i++)
        if (!keys[i])
            return ct_error_null(op);
    return CT_OK;
}

ct_status ct_store_check(ct_store *s, const char *const *keys, int n, bool *ready) {
    CT_CHECK_ARG_STATUS("ct_store_check", s);
    CT_CHECK_ARG_STATUS("ct_store_check", ready);
    if (check_keys("ct_store_check", keys, n) != CT_OK)
        return ct_last_status();
    return s->vt->check(s, keys, n, ready);
}

ct_status ct_store_wait(ct_store *s, const char *const *keys, int n, int64_t timeout_ms) {
    CT_CHECK_ARG_STATUS("ct_store_wait", s);
    if (check_keys("ct_store_wait", keys, n) != CT_OK)
        return ct_last_status();
    return s->vt->wait(s, keys, n, timeout_ms);
}

ct_status ct_store_delete_key(ct_store *s, const char *key, bool *deleted) {
    STORE_ARGS("ct_store_delete_key", s, key);
    return s->vt->delete_key(s, key, deleted);
}

ct_status ct_store_num_keys(ct_store *s, int64_t *n) {
    CT_CHECK_ARG_STATUS("ct_store_num_keys", s);
    CT_CHECK_ARG_STATUS("ct_store_num_keys", n);
    return s->vt->num_keys(s, n);
}
