/* What the files of src/distributed share: sockets with deadlines, the clock. */
#ifndef CT_DIST_INTERNAL_H
#define CT_DIST_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ctorch.h"
#include "ctorch/distributed.h"
#include "ctorch/ext.h"

/* Milliseconds of CLOCK_MONOTONIC. */
int64_t ct_dist_now_ms(void);
void ct_dist_sleep_ms(int64_t ms);

/* A listening TCP socket on host (NULL: every address) and port (0: a free one);
 * *port_out gets the port. -1 on failure, with errno set. */
int ct_dist_listen(const char *host, int port, int *port_out);
/* Connects to host:port, retrying (refused, unreachable) until deadline_ms. -1 after
 * setting ct_error naming op. */
int ct_dist_connect(const char *op, const char *host, int port, int64_t deadline_ms);
/* Accepts one connection on fd before deadline_ms; -1 on timeout (errno ETIMEDOUT). */
int ct_dist_accept(int fd, int64_t deadline_ms);
/* Whole-buffer send and receive on a blocking socket, waiting at most until
 * deadline_ms (deadline < 0: forever). Return 0, or -1 with errno (ETIMEDOUT on
 * timeout, ECONNRESET when the peer closed). */
int ct_dist_send_all(int fd, const void *buf, size_t n, int64_t deadline_ms);
int ct_dist_recv_all(int fd, void *buf, size_t n, int64_t deadline_ms);
/* "a.b.c.d" of the local end of a connected socket (for peers to reach this host). */
int ct_dist_local_addr(int fd, char *buf, size_t cap);

/* The store's key prefix-free interface the process group uses. */
typedef struct ct_store_vtable {
    ct_status (*set)(ct_store *s, const char *key, const void *v, size_t n);
    ct_status (*get)(ct_store *s, const char *key, void **v, size_t *n);
    ct_status (*add)(ct_store *s, const char *key, int64_t d, int64_t *out);
    ct_status (*compare_set)(ct_store *s, const char *key, const void *e, size_t ne, const void *d, size_t nd,
                             void **out, size_t *nout);
    ct_status (*check)(ct_store *s, const char *const *keys, int n, bool *ready);
    ct_status (*wait)(ct_store *s, const char *const *keys, int n, int64_t timeout_ms);
    ct_status (*delete_key)(ct_store *s, const char *key, bool *deleted);
    ct_status (*num_keys)(ct_store *s, int64_t *n);
    void (*free)(ct_store *s);
} ct_store_vtable;

/* The address the TCP store's client uses to reach the store's host (empty for a file
 * store): the local end of that connection is an address peers can reach. */
const char *ct_store_local_addr(const ct_store *s);

/* Elementwise reduction of n elements of dtype: acc = acc (op) x, in the dtype's
 * arithmetic (float16/bfloat16: through float, rounded at each step, as ct_add of two
 * such tensors). */
void ct_dist_reduce_into(void *acc, const void *x, int64_t n, ct_dtype dtype, ct_reduce_op op);
/* x /= d (AVG's last step). */
void ct_dist_divide(void *x, int64_t n, ct_dtype dtype, int64_t d);

#endif
