/* Distributed training: a key-value store for rendezvous, process groups with
 * collectives, DDP, ZeRO-1 and DiLoCo (docs/distributed.md).
 *
 *   ct_process_group *pg = ct_process_group_from_env("tcp", 30000);  // under ctorch run / torchrun
 *   ct_all_reduce(pg, t, CT_REDUCE_SUM);
 *   ct_process_group_free(pg);
 *
 * Every function reports failures through ct_last_error (a peer that exited, a timeout
 * naming the ranks waited for), never by hanging past its timeout. */
#ifndef CTORCH_DISTRIBUTED_H
#define CTORCH_DISTRIBUTED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ct_module ct_module;
typedef struct ct_optimizer ct_optimizer;

/* ------------------------------------------------------------ store */

/* A key-value store (c10d's Store): values are bytes, keys are strings. The TCP store
 * speaks PyTorch's TCPStore protocol, so a ctorch program and PyTorch's TCPStore (its
 * server or its clients, torchrun's agent) share keys. */
typedef struct ct_store ct_store;

/* A client of the TCPStore at host:port; with is_server, this process also serves it
 * (port 0: a free port, read back with ct_store_port). The client retries the
 * connection until timeout_ms. */
CT_API ct_store *ct_store_tcp(const char *host, int port, bool is_server, int64_t timeout_ms);
/* A store in a directory on one machine (created if missing): one file per key,
 * written to a temporary name and renamed, so a reader sees a whole value or none. */
CT_API ct_store *ct_store_file(const char *dir, int64_t timeout_ms);
/* "tcp://host:port" (a client) or "file:///path/to/dir". */
CT_API ct_store *ct_store_open(const char *url, int64_t timeout_ms);
CT_API void ct_store_free(ct_store *s);
CT_API int ct_store_port(const ct_store *s); /* the TCP store's port; -1 for others */
CT_API int64_t ct_store_timeout(const ct_store *s);
CT_API ct_status ct_store_set_timeout(ct_store *s, int64_t timeout_ms);

CT_API ct_status ct_store_set(ct_store *s, const char *key, const void *value, size_t n);
/* Waits (up to the store's timeout) for key, then returns its value in a malloc'ed
 * buffer (one zero byte past the end, so a string value is usable as is). */
CT_API ct_status ct_store_get(ct_store *s, const char *key, void **value, size_t *n);
/* Adds delta to the integer stored (as decimal text) at key, 0 when missing. */
CT_API ct_status ct_store_add(ct_store *s, const char *key, int64_t delta, int64_t *out);
/* If key holds expected (or is missing and expected is empty), stores desired. The
 * value after the call comes back in *out (malloc'ed; NULL out skips it). */
CT_API ct_status ct_store_compare_set(ct_store *s, const char *key, const void *expected, size_t nexpected,
                                      const void *desired, size_t ndesired, void **out, size_t *nout);
/* Whether every key exists, without waiting. */
CT_API ct_status ct_store_check(ct_store *s, const char *const *keys, int n, bool *ready);
/* Waits until every key exists; timeout_ms < 0 uses the store's timeout. On timeout
 * the error names the keys still missing. */
CT_API ct_status ct_store_wait(ct_store *s, const char *const *keys, int n, int64_t timeout_ms);
CT_API ct_status ct_store_delete_key(ct_store *s, const char *key, bool *deleted);
CT_API ct_status ct_store_num_keys(ct_store *s, int64_t *n);

/* A TCPStore server alone (what the launcher of `ctorch run` holds): serves until
 * stopped. host NULL binds every address; port 0 picks a free one. */
typedef struct ct_store_server ct_store_server;
CT_API ct_store_server *ct_store_server_start(const char *host, int port);
CT_API int ct_store_server_port(const ct_store_server *srv);
CT_API void ct_store_server_stop(ct_store_server *srv);

/* ------------------------------------------------------------ process groups */

typedef struct ct_process_group ct_process_group;
typedef struct ct_work ct_work;

typedef enum {
    CT_REDUCE_SUM = 0,
    CT_REDUCE_AVG,
    CT_REDUCE_MAX,
    CT_REDUCE_MIN,
} ct_reduce_op;

/* A group of world_size processes meeting through store (every rank calls it with
 * the same store and world size). backend: "tcp" (built in, CPU tensors) or "nccl"
 * (CUDA tensors; libnccl.so.2 loaded at first use). timeout_ms bounds the rendezvous
 * and every collective. The group keeps a reference to nothing: the store must
 * outlive it. */
CT_API ct_process_group *ct_process_group_new(const char *backend, ct_store *store, int rank, int world_size,
                                              int64_t timeout_ms);
/* init_method env://: RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT (as torchrun and
 * ctorch run set them). Rank 0 serves the store at MASTER_PORT unless
 * TORCHELASTIC_USE_AGENT_STORE=True (torchrun's agent serves it). The group owns that
 * store. */
CT_API ct_process_group *ct_process_group_from_env(const char *backend, int64_t timeout_ms);
/* Waits for the group's pending work, then closes its connections. */
CT_API void ct_process_group_free(ct_process_group *pg);
CT_API int ct_process_group_rank(const ct_process_group *pg);
CT_API int ct_process_group_size(const ct_process_group *pg);
CT_API const char *ct_process_group_backend(const ct_process_group *pg);
/* Collective: the ranks that pass the same color form a new group (ranks ordered as
 * in pg). Every rank of pg calls it. */
CT_API ct_process_group *ct_process_group_split(ct_process_group *pg, int color);
/* Bytes this process sent through the group so far (for traffic comparisons). */
CT_API int64_t ct_process_group_bytes_sent(const ct_process_group *pg);

/* Collectives. Tensors are contiguous and on the group's device; every rank passes the
 * same shapes and dtype. The blocking forms return once the result is in place; the
 * _async forms return a work handle at once (the tensors must stay alive and untouched
 * until it completes). Work runs in the order it was issued. */
CT_API ct_status ct_all_reduce(ct_process_group *pg, ct_tensor *t, ct_reduce_op op);
CT_API ct_work *ct_all_reduce_async(ct_process_group *pg, ct_tensor *t, ct_reduce_op op);
/* out (n elements) gets the reduction of every rank's in[rank*n : (rank+1)*n]
 * (reduce_scatter_tensor: in has world_size * n elements). */
CT_API ct_status ct_reduce_scatter(ct_process_group *pg, ct_tensor *out, const ct_tensor *in, ct_reduce_op op);
CT_API ct_work *ct_reduce_scatter_async(ct_process_group *pg, ct_tensor *out, const ct_tensor *in,
                                        ct_reduce_op op);
/* out (world_size * n elements) gets every rank's in (n elements) in rank order
 * (all_gather_into_tensor). */
CT_API ct_status ct_all_gather(ct_process_group *pg, ct_tensor *out, const ct_tensor *in);
CT_API ct_work *ct_all_gather_async(ct_process_group *pg, ct_tensor *out, const ct_tensor *in);
CT_API ct_status ct_broadcast(ct_process_group *pg, ct_tensor *t, int src);
CT_API ct_work *ct_broadcast_async(ct_process_group *pg, ct_tensor *t, int src);
CT_API ct_status ct_barrier(ct_process_group *pg);
CT_API ct_status ct_send(ct_process_group *pg, const ct_tensor *t, int dst);
CT_API ct_status ct_recv(ct_process_group *pg, ct_tensor *t, int src);
CT_API ct_work *ct_send_async(ct_process_group *pg, const ct_tensor *t, int dst);
CT_API ct_work *ct_recv_async(ct_process_group *pg, ct_tensor *t, int src);

/* Blocks until the work finished; its error, if it failed. */
CT_API ct_status ct_work_wait(ct_work *w);
CT_API bool ct_work_is_completed(const ct_work *w);
/* Waits for the work if it is still running, then frees the handle. */
CT_API void ct_work_free(ct_work *w);

/* ------------------------------------------------------------ DDP */

/* DistributedDataParallel over a module's parameters: gradients are views of flat
 * buckets (the first bucket_cap_first bytes, then bucket_cap bytes, in reverse
 * parameter order), each bucket is all-reduced (averaged) as soon as its last
 * gradient was accumulated, from the post-accumulate hooks, in the same order on
 * every rank. The parameters are broadcast from rank 0 at creation. */
typedef struct ct_ddp ct_ddp;
typedef struct {
    int64_t bucket_cap_first; /* bytes; 1 MiB */
    int64_t bucket_cap;       /* bytes; 25 MiB */
    bool find_unused_parameters;
    bool broadcast_parameters; /* at creation, from rank 0; true */
} ct_ddp_options;
CT_API ct_ddp_options ct_ddp_defaults(void);
CT_API ct_ddp *ct_ddp_new(ct_process_group *pg, ct_module *module, const ct_ddp_options *o);
/* The same over a list of parameters (no module). */
CT_API ct_ddp *ct_ddp_new_params(ct_process_group *pg, ct_tensor *const *params, int n, const ct_ddp_options *o);
CT_API void ct_ddp_free(ct_ddp *d);
/* Call after ct_backward and before the optimizer step: waits for the buckets' all-
 * reduces (launching those whose parameters got no gradient, when
 * find_unused_parameters) and leaves the averaged gradients in .grad. */
CT_API ct_status ct_ddp_finish(ct_ddp *d);
/* no_sync: while disabled, backward passes accumulate locally and launch nothing; the
 * first backward after re-enabling reduces the sum. */
CT_API ct_status ct_ddp_set_sync(ct_ddp *d, bool sync);
CT_API int ct_ddp_num_buckets(const ct_ddp *d);
/* The parameters of bucket i, in bucket order, as indices into the parameters that
 * require grad (in the order given); returns their count, filling at most cap. */
CT_API int ct_ddp_bucket_params(const ct_ddp *d, int bucket, int *idx, int cap);
/* Zeroes the bucket memory (the gradients stay views of it). */
CT_API ct_status ct_ddp_zero_grad(ct_ddp *d);

/* ------------------------------------------------------------ ZeRO-1 */

/* ZeRO stage 1: the parameters become views of one flat buffer (padded to a multiple
 * of world_size), gradients views of a flat gradient buffer; step reduce-scatters
 * (averages) the gradients, runs AdamW on this rank's shard (its state covers the
 * shard only), and all-gathers the parameters. max_norm > 0 clips by the global
 * 2-norm, computed across ranks. */
typedef struct ct_zero1 ct_zero1;
CT_API ct_zero1 *ct_zero1_new(ct_process_group *pg, ct_tensor *const *params, int n, double lr, double beta1,
                              double beta2, double eps, double weight_decay);
CT_API void ct_zero1_free(ct_zero1 *z);
CT_API ct_status ct_zero1_step(ct_zero1 *z, double max_norm, double *total_norm);
CT_API ct_status ct_zero1_zero_grad(ct_zero1 *z);
CT_API ct_status ct_zero1_set_lr(ct_zero1 *z, double lr);

/* ------------------------------------------------------------ DiLoCo */

/* DiLoCo (arXiv 2311.08105): each rank trains with its inner optimizer; every h calls
 * of ct_diloco_step the pseudo-gradient global - local is averaged across ranks
 * (in bfloat16 when bf16), the parameters are reset to the global copy and the outer
 * optimizer (SGD, Nesterov momentum) steps with it; the result is the new global copy.
 * ct_diloco_step runs the inner step itself. */
typedef struct ct_diloco ct_diloco;
CT_API ct_diloco *ct_diloco_new(ct_process_group *pg, ct_tensor *const *params, int n, ct_optimizer *inner,
                                int h, double outer_lr, double outer_momentum, bool bf16);
CT_API void ct_diloco_free(ct_diloco *d);
/* Inner step; every h-th call also the outer step. */
CT_API ct_status ct_diloco_step(ct_diloco *d);
CT_API int64_t ct_diloco_outer_steps(const ct_diloco *d);

#ifdef __cplusplus
}
#endif

#endif
