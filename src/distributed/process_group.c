/* Process groups: rendezvous through a store, the tcp backend's collectives, and the
 * work queue behind the asynchronous calls. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "distributed/dist_internal.h"
#include "distributed/pg_internal.h"

/* Note [The tcp backend]
 * Every pair of ranks holds one TCP connection (rank i connects to each j < i, whose
 * address it reads from the store; j accepts). A collective is one or two exchange
 * steps, each a set of sends and receives with at most one of each per peer, driven
 * by one poll loop over non-blocking sockets, so no pair can deadlock on full socket
 * buffers. all_reduce is a reduce-scatter (rank r receives chunk r of every other
 * rank and reduces them in rank order, Note [Reducing in rank order]) and an
 * all-gather (each rank sends its reduced chunk to all): the bytes of a ring, in two
 * steps instead of 2(N-1), which suits the few ranks of one machine or a small
 * cluster. Every message starts with a header (kind, step, sequence number, dtype,
 * byte count), checked by the receiver, so ranks that call different collectives or
 * shapes get an error naming the difference instead of garbage.
 *
 * Work runs on one thread per group, in the order it was issued (the same order on
 * every rank is the caller's contract, as in PyTorch); the blocking calls queue their
 * work and wait for it. A peer that closes its connection (it exited or was killed)
 * fails the collective at once; a peer that stops sending fails it after the group's
 * timeout without progress, naming the ranks waited for. After a failure the group is
 * unusable, and every later call says why. */

static const char *kind_name(int k) {
    switch (k) {
    case K_ALL_REDUCE: return "all_reduce";
    case K_REDUCE_SCATTER: return "reduce_scatter";
    case K_ALL_GATHER: return "all_gather";
    case K_BROADCAST: return "broadcast";
    case K_BARRIER: return "barrier";
    case K_SEND: return "send";
    case K_RECV: return "recv";
    default: return "?";
    }
}

static const char *api_name(int k) {
    switch (k) {
    case K_ALL_REDUCE: return "ct_all_reduce";
    case K_REDUCE_SCATTER: return "ct_reduce_scatter";
    case K_ALL_GATHER: return "ct_all_gather";
    case K_BROADCAST: return "ct_broadcast";
    case K_BARRIER: return "ct_barrier";
    case K_SEND: return "ct_send";
    case K_RECV: return "ct_recv";
    default: return "ct_process_group";
    }
}

/* Completion of any work of any group: one mutex and condition (waits are rare and
 * short next to the transfers, and a work outlives nothing it needs). */
static pthread_mutex_t done_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t done_cv = PTHREAD_COND_INITIALIZER;
static _Atomic int group_counter;

static void werr(ct_work *w, ct_status st, const char *fmt, ...) CT_PRINTF(3, 4);
static void werr(ct_work *w, ct_status st, const char *fmt, ...) {
    if (w->status != CT_OK)
        return;
    w->status = st;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(w->msg, sizeof w->msg, fmt, ap);
    va_end(ap);
}

/* ================================================================= exchange */

typedef struct {
    int peer;
    bool is_send;
    uint8_t step;
    char *data;
    size_t n;
    msg_header hdr;
    size_t done; /* bytes of header + data moved */
} xfer;

/* A send and its recv carry the same kind on the wire. */
static int wire_kind(const ct_work *w) { return w->kind == K_RECV ? K_SEND : w->kind; }

static int exchange(ct_process_group *pg, ct_work *w, xfer *x, int nx) {
    struct pollfd *pf = calloc((size_t)(nx ? nx : 1), sizeof *pf);
    int *map = calloc((size_t)(nx ? nx : 1), sizeof *map);
    if (!pf || !map) {
        free(pf);
        free(map);
        werr(w, CT_ERROR_OUT_OF_MEMORY, "out of memory");
        return -1;
    }
    for (int i = 0; i < nx; i++) {
        x[i].done = 0;
        if (x[i].is_send)
            x[i].hdr = (msg_header){HEADER_MAGIC, (uint8_t)wire_kind(w), x[i].step, (uint8_t)w->dtype, 0, w->seq, 0,
                                    x[i].n};
    }
    int64_t last_progress = ct_dist_now_ms();
    int rc = 0;
    for (;;) {
        int np = 0;
        for (int i = 0; i < nx; i++) {
            if (x[i].done == sizeof(msg_header) + x[i].n)
                continue;
            pf[np] = (struct pollfd){pg->fds[x[i].peer], x[i].is_send ? POLLOUT : POLLIN, 0};
            map[np++] = i;
        }
        if (np == 0)
            break;
        int64_t left = last_progress + pg->timeout_ms - ct_dist_now_ms();
        int r = left > 0 ? poll(pf, (nfds_t)np, left > 1000000 ? 1000000 : (int)left) : 0;
        if (r < 0) {
            if (errno == EINTR)
                continue;
            werr(w, CT_ERROR_RUNTIME, "poll failed: %s", strerror(errno));
            rc = -1;
            break;
        }
        if (r == 0) {
            char ranks[256];
            size_t used = 0;
            ranks[0] = 0;
            for (int k = 0; k < np; k++) {
                int peer = x[map[k]].peer;
                bool seen = false;
                for (int j = 0; j < k; j++)
                    seen |= x[map[j]].peer == peer;
                if (seen || used >= sizeof ranks - 16)
                    continue;
                used += (size_t)snprintf(ranks + used, sizeof ranks - used, "%s%d", used ? ", " : "", peer);
            }
            werr(w, CT_ERROR_RUNTIME,
                 "timed out after %lld ms without progress, waiting for rank%s %s (it may have hung, or called "
                 "another collective)",
                 (long long)pg->timeout_ms, strchr(ranks, ',') ? "s" : "", ranks);
            rc = -1;
            break;
        }
        for (int k = 0; k < np && rc == 0; k++) {
            if (!pf[k].revents)
                continue;
            xfer *t = &x[map[k]];
            int fd = pf[k].fd;
            size_t total = sizeof(msg_header) + t->n;
            while (t->done < total) {
                bool in_hdr = t->done < sizeof(msg_header);
                char *p = in_hdr ? (char *)&t->hdr + t->done : t->data + (t->done - sizeof(msg_header));
                size_t want = in_hdr ? sizeof(msg_header) - t->done : total - t->done;
                ssize_t got = t->is_send ? send(fd, p, want, MSG_NOSIGNAL | MSG_DONTWAIT)
                                         : recv(fd, p, want, MSG_DONTWAIT);
                if (got == 0 && !t->is_send) {
                    werr(w, CT_ERROR_RUNTIME, "rank %d closed its connection (the process exited or was killed)",
                         t->peer);
                    rc = -1;
                    break;
                }
                if (got < 0) {
                    if (errno == EINTR)
                        continue;
                    if (errno == EAGAIN || errno == EWOULDBLOCK)
                        break;
                    if (errno == EPIPE || errno == ECONNRESET)
                        werr(w, CT_ERROR_RUNTIME,
                             "rank %d closed its connection (the process exited or was killed)", t->peer);
                    else
                        werr(w, CT_ERROR_RUNTIME, "connection to rank %d failed: %s", t->peer, strerror(errno));
                    rc = -1;
                    break;
                }
                t->done += (size_t)got;
                last_progress = ct_dist_now_ms();
                if (t->is_send)
                    atomic_fetch_add(&pg->bytes_sent, got);
                if (!t->is_send && t->done == sizeof(msg_header)) {
                    msg_header *h = &t->hdr;
                    if (h->magic != HEADER_MAGIC) {
                        werr(w, CT_ERROR_RUNTIME, "rank %d sent bytes that are not a ctorch message", t->peer);
                        rc = -1;
                        break;
                    }
                    if (h->kind != wire_kind(w) || h->step != t->step || h->nbytes != t->n || h->dtype != w->dtype) {
                        werr(w, CT_ERROR_RUNTIME,
                             "rank %d sent %s (%s, %llu bytes) where this rank runs %s (%s, %zu bytes): the ranks "
                             "called different collectives, dtypes or sizes",
                             t->peer, kind_name(h->kind), ct_dtype_name((ct_dtype)h->dtype),
                             (unsigned long long)h->nbytes, kind_name(w->kind), ct_dtype_name(w->dtype), t->n);
                        rc = -1;
                        break;
                    }
                }
            }
        }
        if (rc)
            break;
    }
    free(pf);
    free(map);
    return rc;
}

/* ================================================================= algorithms */

static int64_t chunk_off(int64_t count, int c, int n) { return (int64_t)((__int128)count * c / n); }

/* Receives chunk rank of every peer into tmp (size slots of len elements), then
 * reduces them in rank order into tmp slot 0 (own chunk from own_src). */
static int reduce_chunks(ct_process_group *pg, ct_work *w, const char *src, int64_t count, bool equal_chunks,
                         int64_t m, char **result) {
    int n = pg->size, r = pg->rank;
    size_t esz = ct_dtype_size(w->dtype);
    int64_t my_off = equal_chunks ? m * r : chunk_off(count, r, n);
    int64_t my_len = equal_chunks ? m : chunk_off(count, r + 1, n) - my_off;
    char *tmp = malloc((size_t)n * (size_t)(my_len ? my_len : 1) * esz);
    xfer *x = calloc((size_t)(2 * n), sizeof *x);
    if (!tmp || !x) {
        free(tmp);
        free(x);
        werr(w, CT_ERROR_OUT_OF_MEMORY, "out of memory for %d chunks of %lld elements", n, (long long)my_len);
        return -1;
    }
    int nx = 0;
    for (int p = 0; p < n; p++) {
        if (p == r)
            continue;
        int64_t off = equal_chunks ? m * p : chunk_off(count, p, n);
        int64_t len = equal_chunks ? m : chunk_off(count, p + 1, n) - off;
        x[nx++] = (xfer){.peer = p, .is_send = true, .step = 0, .data = (char *)src + off * esz, .n = (size_t)len * esz};
        x[nx++] = (xfer){.peer = p, .is_send = false, .step = 0, .data = tmp + (size_t)p * my_len * esz,
                         .n = (size_t)my_len * esz};
    }
    memcpy(tmp + (size_t)r * my_len * esz, src + my_off * esz, (size_t)my_len * esz);
    int rc = exchange(pg, w, x, nx);
    free(x);
    if (rc) {
        free(tmp);
        return -1;
    }
    for (int p = 1; p < n; p++)
        ct_dist_reduce_into(tmp, tmp + (size_t)p * my_len * esz, my_len, w->dtype, w->op);
    if (w->op == CT_REDUCE_AVG)
        ct_dist_divide(tmp, my_len, w->dtype, n);
    *result = tmp;
    return 0;
}

static int run_all_reduce(ct_process_group *pg, ct_work *w) {
    int n = pg->size, r = pg->rank;
    if (n == 1)
        return 0;
    size_t esz = ct_dtype_size(w->dtype);
    char *buf = w->buf, *red = NULL;
    if (reduce_chunks(pg, w, buf, w->count, false, 0, &red) != 0)
        return -1;
    int64_t my_off = chunk_off(w->count, r, n), my_len = chunk_off(w->count, r + 1, n) - my_off;
    memcpy(buf + my_off * esz, red, (size_t)my_len * esz);
    free(red);
    xfer *x = calloc((size_t)(2 * n), sizeof *x);
    if (!x) {
        werr(w, CT_ERROR_OUT_OF_MEMORY, "out of memory");
        return -1;
    }
    int nx = 0;
    for (int p = 0; p < n; p++) {
        if (p == r)
            continue;
        int64_t off = chunk_off(w->count, p, n), len = chunk_off(w->count, p + 1, n) - off;
        x[nx++] = (xfer){.peer = p, .is_send = true, .step = 1, .data = buf + my_off * esz, .n = (size_t)my_len * esz};
        x[nx++] = (xfer){.peer = p, .is_send = false, .step = 1, .data = buf + off * esz, .n = (size_t)len * esz};
    }
    int rc = exchange(pg, w, x, nx);
    free(x);
    return rc;
}

static int run_reduce_scatter(ct_process_group *pg, ct_work *w) {
    size_t esz = ct_dtype_size(w->dtype);
    if (pg->size == 1) {
        memcpy(w->buf, w->in, (size_t)w->count * esz);
        return 0;
    }
    char *red = NULL;
    if (reduce_chunks(pg, w, w->in, w->count * pg->size, true, w->count, &red) != 0)
        return -1;
    memcpy(w->buf, red, (size_t)w->count * esz);
    free(red);
    return 0;
}

/* Sends n bytes of send to every other rank and receives n bytes from rank p at
 * recv + p * n (nothing moves when n is 0: a barrier). */
static int exchange_with_all(ct_process_group *pg, ct_work *w, char *send, char *recv, size_t n) {
    int size = pg->size, r = pg->rank;
    xfer *x = calloc((size_t)(2 * size), sizeof *x);
    if (!x) {
        werr(w, CT_ERROR_OUT_OF_MEMORY, "out of memory");
        return -1;
    }
    int nx = 0;
    for (int p = 0; p < size; p++) {
        if (p == r)
            continue;
        x[nx++] = (xfer){.peer = p, .is_send = true, .data = send, .n = n};
        x[nx++] = (xfer){.peer = p, .is_send = false, .data = recv ? recv + (size_t)p * n : NULL, .n = n};
    }
    int rc = exchange(pg, w, x, nx);
    free(x);
    return rc;
}

static int run_all_gather(ct_process_group *pg, ct_work *w) {
    size_t bytes = (size_t)w->count * ct_dtype_size(w->dtype);
    char *out = w->buf;
    memmove(out + (size_t)pg->rank * bytes, w->in, bytes);
    return pg->size == 1 ? 0 : exchange_with_all(pg, w, out + (size_t)pg->rank * bytes, out, bytes);
}

static int run_broadcast(ct_process_group *pg, ct_work *w) {
    int n = pg->size, r = pg->rank;
    size_t bytes = (size_t)w->count * ct_dtype_size(w->dtype);
    if (n == 1)
        return 0;
    xfer *x = calloc((size_t)n, sizeof *x);
    if (!x) {
        werr(w, CT_ERROR_OUT_OF_MEMORY, "out of memory");
        return -1;
    }
    int nx = 0;
    if (r == w->peer) {
        for (int p = 0; p < n; p++)
            if (p != r)
                x[nx++] = (xfer){.peer = p, .is_send = true, .data = w->buf, .n = bytes};
    } else {
        x[nx++] = (xfer){.peer = w->peer, .is_send = false, .data = w->buf, .n = bytes};
    }
    int rc = exchange(pg, w, x, nx);
    free(x);
    return rc;
}

static int run_barrier(ct_process_group *pg, ct_work *w) {
    return pg->size == 1 ? 0 : exchange_with_all(pg, w, NULL, NULL, 0);
}

static int run_p2p(ct_process_group *pg, ct_work *w) {
    xfer x = {.peer = w->peer,
              .is_send = w->kind == K_SEND,
              .data = w->buf,
              .n = (size_t)w->count * ct_dtype_size(w->dtype)};
    return exchange(pg, w, &x, 1);
}

static void run_work(ct_process_group *pg, ct_work *w) {
    if (pg->broken) {
        werr(w, CT_ERROR_RUNTIME, "the process group is unusable after an earlier error: %s", pg->broken_msg);
        return;
    }
    int rc = 0;
    switch (w->kind) {
    case K_ALL_REDUCE: rc = run_all_reduce(pg, w); break;
    case K_REDUCE_SCATTER: rc = run_reduce_scatter(pg, w); break;
    case K_ALL_GATHER: rc = run_all_gather(pg, w); break;
    case K_BROADCAST: rc = run_broadcast(pg, w); break;
    case K_BARRIER: rc = run_barrier(pg, w); break;
    case K_SEND:
    case K_RECV: rc = run_p2p(pg, w); break;
    default: werr(w, CT_ERROR_RUNTIME, "unknown work"); rc = -1;
    }
    if (rc) {
        pg->broken = true;
        snprintf(pg->broken_msg, sizeof pg->broken_msg, "%s: %s", kind_name(w->kind), w->msg);
    }
}

static void *worker_main(void *arg) {
    ct_process_group *pg = arg;
    for (;;) {
        pthread_mutex_lock(&pg->mu);
        while (!pg->head && !pg->stop)
            pthread_cond_wait(&pg->cv, &pg->mu);
        ct_work *w = pg->head;
        if (!w) {
            pthread_mutex_unlock(&pg->mu);
            break;
        }
        pthread_mutex_unlock(&pg->mu);
        run_work(pg, w);
        pthread_mutex_lock(&pg->mu);
        pg->head = w->next;
        if (!pg->head)
            pg->tail = NULL;
        pthread_mutex_unlock(&pg->mu);
        pthread_mutex_lock(&done_mu);
        w->done = true;
        pthread_cond_broadcast(&done_cv);
        pthread_mutex_unlock(&done_mu);
    }
    return NULL;
}

static void enqueue(ct_process_group *pg, ct_work *w) {
    w->seq = pg->seq++;
    pthread_mutex_lock(&pg->mu);
    if (pg->tail)
        pg->tail->next = w;
    else
        pg->head = w;
    pg->tail = w;
    pthread_cond_signal(&pg->cv);
    pthread_mutex_unlock(&pg->mu);
}

/* ================================================================= work handles */

ct_status ct_work_wait(ct_work *w) {
    CT_CHECK_ARG_STATUS("ct_work_wait", w);
    if (w->cuda && w->status == CT_OK && w->event &&
        ct_cuda_stream_wait_event(ct_cuda_current_stream(ct_cuda_current_device()), w->event) != CT_OK)
        return ct_last_status();
    bool ranged = ct_profiler_enabled() && ct_profiler_range_push("ct_work_wait") == CT_OK;
    pthread_mutex_lock(&done_mu);
    while (!w->done)
        pthread_cond_wait(&done_cv, &done_mu);
    pthread_mutex_unlock(&done_mu);
    if (ranged)
        ct_profiler_range_pop();
    if (w->status != CT_OK)
        return ct_error(w->status, api_name(w->kind), "%s", w->msg);
    return CT_OK;
}

bool ct_work_is_completed(const ct_work *w) {
    if (!w)
        return false;
    pthread_mutex_lock(&done_mu);
    bool d = w->done;
    pthread_mutex_unlock(&done_mu);
    if (d && w->cuda && w->event)
        return ct_cuda_event_query(w->event);
    return d;
}

void ct_work_free(ct_work *w) {
    if (!w)
        return;
    pthread_mutex_lock(&done_mu);
    while (!w->done)
        pthread_cond_wait(&done_cv, &done_mu);
    pthread_mutex_unlock(&done_mu);
    ct_cuda_event_destroy(w->event);
    ct_release(w->t1);
    ct_release(w->t2);
    free(w);
}

/* ================================================================= rendezvous */

static void close_fds(ct_process_group *pg) {
    if (!pg->fds)
        return;
    for (int i = 0; i < pg->size; i++)
        if (pg->fds[i] >= 0)
            close(pg->fds[i]);
    free(pg->fds);
    pg->fds = NULL;
}

static void key_of(char *buf, size_t cap, const ct_process_group *pg, const char *what, int rank) {
    snprintf(buf, cap, "%s%s/%d", pg->prefix, what, rank);
}

/* The ranks whose key `what` is missing: "2, 3". */
static void missing_ranks(ct_process_group *pg, const char *what, char *out, size_t cap) {
    size_t used = 0;
    out[0] = 0;
    for (int j = 0; j < pg->size; j++) {
        char key[256];
        key_of(key, sizeof key, pg, what, j);
        const char *k = key;
        bool ready = true;
        if (ct_store_check(pg->store, &k, 1, &ready) != CT_OK) {
            ct_clear_error();
            ready = false;
        }
        if (!ready && used < cap - 16)
            used += (size_t)snprintf(out + used, cap - used, "%s%d", used ? ", " : "", j);
    }
}

typedef struct {
    uint32_t magic;
    int32_t rank;
    int32_t size;
    int32_t pad;
} hello_msg;

static ct_status rendezvous(ct_process_group *pg) {
    static const char *op = "ct_process_group_new";
    int n = pg->size, r = pg->rank;
    pg->fds = malloc((size_t)n * sizeof *pg->fds);
    if (!pg->fds)
        return ct_error(CT_ERROR_OUT_OF_MEMORY, op, "out of memory");
    for (int i = 0; i < n; i++)
        pg->fds[i] = -1;
    if (n == 1)
        return CT_OK;
    int port = 0;
    int lfd = ct_dist_listen(NULL, 0, &port);
    if (lfd < 0)
        return ct_error(CT_ERROR_RUNTIME, op, "cannot listen for peers: %s", strerror(errno));
    const char *host = ct_store_local_addr(pg->store);
    char addr[128], key[256];
    snprintf(addr, sizeof addr, "%s:%d", host && host[0] ? host : "127.0.0.1", port);
    key_of(key, sizeof key, pg, "addr", r);
    if (ct_store_set(pg->store, key, addr, strlen(addr)) != CT_OK) {
        close(lfd);
        return ct_last_status();
    }
    int64_t end = ct_dist_now_ms() + pg->timeout_ms;
    /* Wait for every rank's address first, so that a timeout names who is missing. */
    char **keys = calloc((size_t)n, sizeof *keys);
    ct_status st = CT_OK;
    if (!keys) {
        close(lfd);
        return ct_error(CT_ERROR_OUT_OF_MEMORY, op, "out of memory");
    }
    for (int j = 0; j < n && st == CT_OK; j++) {
        keys[j] = malloc(256);
        if (!keys[j])
            st = ct_error(CT_ERROR_OUT_OF_MEMORY, op, "out of memory");
        else
            key_of(keys[j], 256, pg, "addr", j);
    }
    if (st == CT_OK && ct_store_wait(pg->store, (const char *const *)keys, n, pg->timeout_ms) != CT_OK) {
        char miss[256];
        char prev[512];
        snprintf(prev, sizeof prev, "%s", ct_last_error());
        ct_clear_error();
        missing_ranks(pg, "addr", miss, sizeof miss);
        if (miss[0])
            st = ct_error(CT_ERROR_RUNTIME, op, "timed out after %lld ms: rank(s) %s of %d did not join",
                          (long long)pg->timeout_ms, miss, n);
        else
            st = ct_error(CT_ERROR_RUNTIME, op, "%s", prev);
    }
    for (int j = 0; j < n; j++)
        free(keys[j]);
    free(keys);
    if (st != CT_OK) {
        close(lfd);
        return st;
    }
    /* Connect to the lower ranks. */
    for (int j = 0; j < r && st == CT_OK; j++) {
        key_of(key, sizeof key, pg, "addr", j);
        void *v = NULL;
        size_t nv = 0;
        if (ct_store_get(pg->store, key, &v, &nv) != CT_OK) {
            st = ct_last_status();
            break;
        }
        char *colon = strrchr(v, ':');
        if (!colon) {
            free(v);
            st = ct_error(CT_ERROR_RUNTIME, op, "rank %d published a bad address", j);
            break;
        }
        *colon = 0;
        int fd = ct_dist_connect(op, v, atoi(colon + 1), end);
        free(v);
        if (fd < 0) {
            st = ct_last_status();
            break;
        }
        hello_msg h = {HEADER_MAGIC, r, n, 0};
        if (ct_dist_send_all(fd, &h, sizeof h, end) != 0) {
            close(fd);
            st = ct_error(CT_ERROR_RUNTIME, op, "handshake with rank %d failed: %s", j, strerror(errno));
            break;
        }
        pg->fds[j] = fd;
    }
    /* Accept the higher ranks. */
    for (int k = r + 1; k < n && st == CT_OK; k++) {
        int fd = ct_dist_accept(lfd, end);
        if (fd < 0) {
            char miss[256];
            size_t used = 0;
            miss[0] = 0;
            for (int j = r + 1; j < n; j++)
                if (pg->fds[j] < 0 && used < sizeof miss - 16)
                    used += (size_t)snprintf(miss + used, sizeof miss - used, "%s%d", used ? ", " : "", j);
            st = ct_error(CT_ERROR_RUNTIME, op, "timed out after %lld ms: rank(s) %s did not connect",
                          (long long)pg->timeout_ms, miss);
            break;
        }
        hello_msg h;
        if (ct_dist_recv_all(fd, &h, sizeof h, end) != 0 || h.magic != HEADER_MAGIC || h.rank <= r ||
            h.rank >= n || h.size != n || pg->fds[h.rank] >= 0) {
            close(fd);
            k--; /* not one of ours: keep accepting */
            continue;
        }
        pg->fds[h.rank] = fd;
    }
    close(lfd);
    if (st != CT_OK)
        return st;
    for (int j = 0; j < n; j++)
        if (pg->fds[j] >= 0)
            fcntl(pg->fds[j], F_SETFL, fcntl(pg->fds[j], F_GETFL) | O_NONBLOCK);
    return CT_OK;
}

static ct_process_group *group_new(const char *backend, ct_store *store, int rank, int size, int64_t timeout_ms,
                                   const char *prefix) {
    static const char *op = "ct_process_group_new";
    if (!backend || !store) {
        ct_error_null(op);
        return NULL;
    }
    if (strcmp(backend, "tcp") != 0 && strcmp(backend, "nccl") != 0) {
        ct_error(CT_ERROR_VALUE, op, "unknown backend '%s' (expected tcp or nccl)", backend);
        return NULL;
    }
    if (size < 1 || rank < 0 || rank >= size) {
        ct_error(CT_ERROR_VALUE, op, "rank %d is not in [0, world_size) for world_size %d", rank, size);
        return NULL;
    }
    if (timeout_ms <= 0) {
        ct_error(CT_ERROR_VALUE, op, "timeout must be positive, got %lld ms", (long long)timeout_ms);
        return NULL;
    }
    ct_process_group *pg = ct_xcalloc(op, 1, sizeof *pg);
    if (!pg)
        return NULL;
    snprintf(pg->backend, sizeof pg->backend, "%s", backend);
    pg->rank = rank;
    pg->size = size;
    pg->timeout_ms = timeout_ms;
    pg->store = store;
    snprintf(pg->prefix, sizeof pg->prefix, "%s", prefix);
    pthread_mutex_init(&pg->mu, NULL);
    pthread_cond_init(&pg->cv, NULL);
    if (strcmp(backend, "nccl") == 0) {
        pg->nccl = true;
        if (ct_nccl_group_init(pg) != CT_OK) {
            ct_process_group_free(pg);
            return NULL;
        }
        return pg;
    }
    if (rendezvous(pg) != CT_OK) {
        ct_process_group_free(pg);
        return NULL;
    }
    if (pthread_create(&pg->thread, NULL, worker_main, pg) != 0) {
        ct_error(CT_ERROR_RUNTIME, op, "cannot start the group's thread");
        ct_process_group_free(pg);
        return NULL;
    }
    pg->thread_started = true;
    return pg;
}

ct_process_group *ct_process_group_new(const char *backend, ct_store *store, int rank, int world_size,
                                       int64_t timeout_ms) {
    char prefix[64];
    snprintf(prefix, sizeof prefix, "ctorch/pg%d/", atomic_fetch_add(&group_counter, 1));
    return group_new(backend, store, rank, world_size, timeout_ms, prefix);
}

static ct_status env_int(const char *op, const char *name, long lo, long hi, long *out) {
    const char *v = getenv(name);
    if (!v || !*v)
        return ct_error(CT_ERROR_VALUE, op, "environment variable %s expected, but not set", name);
    char *end;
    long x = strtol(v, &end, 10);
    if (*end || x < lo || x > hi)
        return ct_error(CT_ERROR_VALUE, op, "environment variable %s must be an integer in [%ld, %ld], got '%s'",
                        name, lo, hi, v);
    *out = x;
    return CT_OK;
}

ct_process_group *ct_process_group_from_env(const char *backend, int64_t timeout_ms) {
    static const char *op = "ct_process_group_from_env";
    long rank = 0, size = 0, port = 0;
    if (env_int(op, "RANK", 0, 1 << 20, &rank) != CT_OK || env_int(op, "WORLD_SIZE", 1, 1 << 20, &size) != CT_OK ||
        env_int(op, "MASTER_PORT", 1, 65535, &port) != CT_OK)
        return NULL;
    const char *addr = getenv("MASTER_ADDR");
    if (!addr || !*addr) {
        ct_error(CT_ERROR_VALUE, op, "environment variable MASTER_ADDR expected, but not set");
        return NULL;
    }
    if (rank >= size) {
        ct_error(CT_ERROR_VALUE, op, "RANK %ld is not below WORLD_SIZE %ld", rank, size);
        return NULL;
    }
    if (timeout_ms <= 0) {
        ct_error(CT_ERROR_VALUE, op, "timeout must be positive, got %lld ms", (long long)timeout_ms);
        return NULL;
    }
    const char *agent = getenv("TORCHELASTIC_USE_AGENT_STORE");
    bool serve = rank == 0 && !(agent && strcmp(agent, "True") == 0);
    ct_store *store = ct_store_tcp(addr, (int)port, serve, timeout_ms);
    if (!store)
        return NULL;
    const char *restart = getenv("TORCHELASTIC_RESTART_COUNT");
    char prefix[96];
    snprintf(prefix, sizeof prefix, "ctorch/%s/pg%d/", restart && *restart ? restart : "0",
             atomic_fetch_add(&group_counter, 1));
    ct_process_group *pg = group_new(backend, store, (int)rank, (int)size, timeout_ms, prefix);
    if (!pg) {
        ct_store_free(store);
        return NULL;
    }
    pg->owns_store = true;
    return pg;
}

void ct_process_group_free(ct_process_group *pg) {
    if (!pg)
        return;
    if (pg->thread_started) {
        pthread_mutex_lock(&pg->mu);
        pg->stop = true;
        pthread_cond_signal(&pg->cv);
        pthread_mutex_unlock(&pg->mu);
        pthread_join(pg->thread, NULL);
    }
    close_fds(pg);
    if (pg->nccl)
        ct_nccl_group_free(pg);
    pthread_mutex_destroy(&pg->mu);
    pthread_cond_destroy(&pg->cv);
    if (pg->owns_store) {
        /* Rank 0 may serve the store: let the others finish their last reads first. */
        ct_store_free(pg->store);
    }
    free(pg);
}

int ct_process_group_rank(const ct_process_group *pg) { return pg ? pg->rank : -1; }
int ct_process_group_size(const ct_process_group *pg) { return pg ? pg->size : -1; }
const char *ct_process_group_backend(const ct_process_group *pg) { return pg ? pg->backend : ""; }
int64_t ct_process_group_bytes_sent(const ct_process_group *pg) { return pg ? atomic_load(&pg->bytes_sent) : 0; }

ct_process_group *ct_process_group_split(ct_process_group *pg, int color) {
    static const char *op = "ct_process_group_split";
    CT_CHECK_ARG(op, pg);
    if (color < 0) {
        ct_error(CT_ERROR_VALUE, op, "color must be non-negative, got %d", color);
        return NULL;
    }
    int k = pg->split_count++;
    char key[256], what[64], val[32];
    snprintf(what, sizeof what, "split%d/color", k);
    key_of(key, sizeof key, pg, what, pg->rank);
    snprintf(val, sizeof val, "%d", color);
    if (ct_store_set(pg->store, key, val, strlen(val)) != CT_OK)
        return NULL;
    int *colors = ct_xmalloc(op, (size_t)pg->size * sizeof *colors);
    if (!colors)
        return NULL;
    for (int j = 0; j < pg->size; j++) {
        key_of(key, sizeof key, pg, what, j);
        void *v = NULL;
        if (ct_store_get(pg->store, key, &v, NULL) != CT_OK) {
            char miss[256];
            char prev[512];
            snprintf(prev, sizeof prev, "%s", ct_last_error());
            ct_clear_error();
            missing_ranks(pg, what, miss, sizeof miss);
            ct_error(CT_ERROR_RUNTIME, op, "rank(s) %s did not call split: %s", miss[0] ? miss : "?", prev);
            free(colors);
            return NULL;
        }
        colors[j] = atoi(v);
        free(v);
    }
    int sub_rank = 0, sub_size = 0;
    for (int j = 0; j < pg->size; j++) {
        if (colors[j] != color)
            continue;
        if (j == pg->rank)
            sub_rank = sub_size;
        sub_size++;
    }
    free(colors);
    char prefix[224];
    snprintf(prefix, sizeof prefix, "%ssplit%d/c%d/", pg->prefix, k, color);
    return group_new(pg->backend, pg->store, sub_rank, sub_size, pg->timeout_ms, prefix);
}

/* ================================================================= public collectives */

static bool reducible(ct_dtype d) { return d >= CT_DTYPE_BOOL && d <= CT_DTYPE_FLOAT64; }

static ct_status check_tensor(const char *op, const ct_process_group *pg, const ct_tensor *t, const char *what) {
    CT_CHECK_ARG_STATUS(op, t);
    ct_device dev = ct_tensor_device(t);
    if (dev.type != (pg->nccl ? CT_DEVICE_CUDA : CT_DEVICE_CPU)) {
        char b[32];
        return ct_error(CT_ERROR_DEVICE, op, "the %s backend takes %s tensors, got %s on %s", pg->backend,
                        pg->nccl ? "CUDA" : "CPU", what, ct_device_str(dev, b, sizeof b));
    }
    if (!ct_tensor_is_contiguous(t))
        return ct_error(CT_ERROR_VALUE, op, "%s must be contiguous", what);
    if (!reducible(ct_tensor_dtype(t)))
        return ct_error(CT_ERROR_TYPE, op, "unsupported dtype %s", ct_dtype_name(ct_tensor_dtype(t)));
    return CT_OK;
}

static ct_status check_op(const char *op, ct_reduce_op rop, ct_dtype d) {
    if ((int)rop < CT_REDUCE_SUM || (int)rop > CT_REDUCE_MIN)
        return ct_error(CT_ERROR_VALUE, op, "unknown reduce op %d", (int)rop);
    if (rop == CT_REDUCE_AVG && !ct_dtype_is_floating(d))
        return ct_error(CT_ERROR_TYPE, op, "AVG needs a floating-point tensor, got %s", ct_dtype_name(d));
    if (d == CT_DTYPE_BOOL && rop != CT_REDUCE_MAX && rop != CT_REDUCE_MIN && rop != CT_REDUCE_SUM)
        return ct_error(CT_ERROR_TYPE, op, "unsupported reduce op for bool");
    return CT_OK;
}

static ct_work *new_work(const char *op, ct_process_group *pg, int kind) {
    ct_work *w = ct_xcalloc(op, 1, sizeof *w);
    if (w) {
        w->pg = pg;
        w->kind = kind;
        w->peer = -1;
    }
    return w;
}

/* Note [Collectives in the structured log]
 * With CT_TRACE on, every collective writes one "collective" event when it is issued
 * (op, backend, group rank and size, sequence number, dtype, elements, peer), so the
 * logs of all ranks line up by sequence number when a job hangs or mismatches; the
 * blocking wait shows in a profile as a "ct_work_wait" range. */
static void log_collective(const ct_work *w) {
    if (!ct_trace_log_enabled())
        return;
    char meta[320];
    snprintf(meta, sizeof meta,
             "{\"op\": \"%s\", \"backend\": \"%s\", \"rank\": %d, \"world_size\": %d, \"seq\": %u, "
             "\"dtype\": \"%s\", \"numel\": %lld, \"peer\": %d}",
             kind_name(w->kind), w->pg->backend, w->pg->rank, w->pg->size, (unsigned)w->pg->seq,
             ct_dtype_name(w->dtype), (long long)w->count, w->peer);
    if (ct_trace_log_event("collective", meta, NULL) != CT_OK)
        ct_clear_error();
}

static ct_work *submit(ct_work *w, ct_tensor *t1, const ct_tensor *t2) {
    log_collective(w);
    w->t1 = t1 ? ct_retain(t1) : NULL;
    w->t2 = t2 ? ct_retain((ct_tensor *)t2) : NULL;
    if (w->pg->nccl) {
        w->seq = w->pg->seq++;
        ct_nccl_submit(w->pg, w);
    } else {
        enqueue(w->pg, w);
    }
    return w;
}

static ct_status run_sync(ct_work *w) {
    if (!w)
        return ct_last_status();
    ct_status st = ct_work_wait(w);
    ct_work_free(w);
    return st;
}

ct_work *ct_all_reduce_async(ct_process_group *pg, ct_tensor *t, ct_reduce_op op) {
    static const char *name = "ct_all_reduce";
    CT_CHECK_ARG(name, pg);
    if (check_tensor(name, pg, t, "tensor") != CT_OK || check_op(name, op, ct_tensor_dtype(t)) != CT_OK)
        return NULL;
    ct_work *w = new_work(name, pg, K_ALL_REDUCE);
    if (!w)
        return NULL;
    w->op = op;
    w->dtype = ct_tensor_dtype(t);
    w->buf = ct_tensor_data(t);
    w->count = ct_tensor_numel(t);
    return submit(w, t, NULL);
}

ct_status ct_all_reduce(ct_process_group *pg, ct_tensor *t, ct_reduce_op op) {
    return run_sync(ct_all_reduce_async(pg, t, op));
}

ct_work *ct_reduce_scatter_async(ct_process_group *pg, ct_tensor *out, const ct_tensor *in, ct_reduce_op op) {
    static const char *name = "ct_reduce_scatter";
    CT_CHECK_ARG(name, pg);
    if (check_tensor(name, pg, out, "output") != CT_OK || check_tensor(name, pg, in, "input") != CT_OK ||
        check_op(name, op, ct_tensor_dtype(in)) != CT_OK)
        return NULL;
    if (ct_tensor_dtype(in) != ct_tensor_dtype(out)) {
        ct_error(CT_ERROR_TYPE, name, "input and output must have the same dtype, got %s and %s",
                 ct_dtype_name(ct_tensor_dtype(in)), ct_dtype_name(ct_tensor_dtype(out)));
        return NULL;
    }
    if (ct_tensor_numel(in) != ct_tensor_numel(out) * pg->size) {
        ct_error(CT_ERROR_VALUE, name,
                 "input tensor must be the same size as output size times world size (%lld elements), got %lld",
                 (long long)(ct_tensor_numel(out) * pg->size), (long long)ct_tensor_numel(in));
        return NULL;
    }
    if (ct_tensor_shares_storage(in, out)) {
        ct_error(CT_ERROR_VALUE, name, "input and output must not share memory");
        return NULL;
    }
    ct_work *w = new_work(name, pg, K_REDUCE_SCATTER);
    if (!w)
        return NULL;
    w->op = op;
    w->dtype = ct_tensor_dtype(in);
    w->buf = ct_tensor_data(out);
    w->in = ct_tensor_data(in);
    w->count = ct_tensor_numel(out);
    return submit(w, out, in);
}

ct_status ct_reduce_scatter(ct_process_group *pg, ct_tensor *out, const ct_tensor *in, ct_reduce_op op) {
    return run_sync(ct_reduce_scatter_async(pg, out, in, op));
}

ct_work *ct_all_gather_async(ct_process_group *pg, ct_tensor *out, const ct_tensor *in) {
    static const char *name = "ct_all_gather";
    CT_CHECK_ARG(name, pg);
    if (check_tensor(name, pg, out, "output") != CT_OK || check_tensor(name, pg, in, "input") != CT_OK)
        return NULL;
    if (ct_tensor_dtype(in) != ct_tensor_dtype(out)) {
        ct_error(CT_ERROR_TYPE, name, "input and output must have the same dtype, got %s and %s",
                 ct_dtype_name(ct_tensor_dtype(in)), ct_dtype_name(ct_tensor_dtype(out)));
        return NULL;
    }
    if (ct_tensor_numel(out) != ct_tensor_numel(in) * pg->size) {
        ct_error(CT_ERROR_VALUE, name,
                 "output tensor size must be equal to world_size times input tensor size (%lld elements), got %lld",
                 (long long)(ct_tensor_numel(in) * pg->size), (long long)ct_tensor_numel(out));
        return NULL;
    }
    /* The input may be this rank's slot of the output (ZeRO's in-place all-gather);
     * any other overlap is refused. */
    size_t esz = ct_dtype_size(ct_tensor_dtype(in));
    const char *ip = ct_tensor_data(in), *op = ct_tensor_data(out);
    size_t nin = (size_t)ct_tensor_numel(in) * esz;
    if (ip != op + (size_t)pg->rank * nin && ip < op + nin * (size_t)pg->size && op < ip + nin) {
        ct_error(CT_ERROR_VALUE, name, "the input overlaps the output other than at this rank's slot");
        return NULL;
    }
    ct_work *w = new_work(name, pg, K_ALL_GATHER);
    if (!w)
        return NULL;
    w->dtype = ct_tensor_dtype(in);
    w->buf = ct_tensor_data(out);
    w->in = ct_tensor_data(in);
    w->count = ct_tensor_numel(in);
    return submit(w, out, in);
}

ct_status ct_all_gather(ct_process_group *pg, ct_tensor *out, const ct_tensor *in) {
    return run_sync(ct_all_gather_async(pg, out, in));
}

static ct_status check_peer(const char *name, const ct_process_group *pg, int peer, const char *what, bool self_ok) {
    if (peer < 0 || peer >= pg->size)
        return ct_error(CT_ERROR_VALUE, name, "invalid %s rank %d for a group of %d", what, peer, pg->size);
    if (!self_ok && peer == pg->rank)
        return ct_error(CT_ERROR_VALUE, name, "invalid %s rank %d: it is this rank", what, peer);
    return CT_OK;
}

/* The work of a collective between this rank and one peer (broadcast's source, send's
 * destination, recv's source): the tensor and the peer checked, the buffer described. */
static ct_work *peer_work(const char *name, ct_process_group *pg, const ct_tensor *t, int kind, int peer,
                          const char *what, bool self_ok) {
    CT_CHECK_ARG(name, pg);
    if (check_tensor(name, pg, t, "tensor") != CT_OK || check_peer(name, pg, peer, what, self_ok) != CT_OK)
        return NULL;
    ct_work *w = new_work(name, pg, kind);
    if (!w)
        return NULL;
    w->dtype = ct_tensor_dtype(t);
    w->buf = ct_tensor_data(t);
    w->count = ct_tensor_numel(t);
    w->peer = peer;
    return w;
}

ct_work *ct_broadcast_async(ct_process_group *pg, ct_tensor *t, int src) {
    ct_work *w = peer_work("ct_broadcast", pg, t, K_BROADCAST, src, "source", true);
    return w ? submit(w, t, NULL) : NULL;
}

ct_status ct_broadcast(ct_process_group *pg, ct_tensor *t, int src) {
    return run_sync(ct_broadcast_async(pg, t, src));
}

ct_status ct_barrier(ct_process_group *pg) {
    CT_CHECK_ARG_STATUS("ct_barrier", pg);
    if (pg->nccl)
        return ct_nccl_barrier(pg);
    ct_work *w = new_work("ct_barrier", pg, K_BARRIER);
    if (!w)
        return ct_last_status();
    w->dtype = CT_DTYPE_UINT8;
    return run_sync(submit(w, NULL, NULL));
}

ct_work *ct_send_async(ct_process_group *pg, const ct_tensor *t, int dst) {
    ct_work *w = peer_work("ct_send", pg, t, K_SEND, dst, "destination", false);
    return w ? submit(w, NULL, t) : NULL;
}

ct_work *ct_recv_async(ct_process_group *pg, ct_tensor *t, int src) {
    ct_work *w = peer_work("ct_recv", pg, t, K_RECV, src, "source", false);
    return w ? submit(w, t, NULL) : NULL;
}

ct_status ct_send(ct_process_group *pg, const ct_tensor *t, int dst) { return run_sync(ct_send_async(pg, t, dst)); }
ct_status ct_recv(ct_process_group *pg, ct_tensor *t, int src) { return run_sync(ct_recv_async(pg, t, src)); }
