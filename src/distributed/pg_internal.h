/* The process group's and work's layout, shared by the tcp backend
 * (process_group.c) and the nccl backend (nccl.c). */
#ifndef CT_DIST_PG_INTERNAL_H
#define CT_DIST_PG_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>

#include "distributed/dist_internal.h"

enum { K_ALL_REDUCE = 1, K_REDUCE_SCATTER, K_ALL_GATHER, K_BROADCAST, K_BARRIER, K_SEND, K_RECV };

#define HEADER_MAGIC 0x31445443u /* "CTD1" */
#define MSG_CAP 480

typedef struct {
    uint32_t magic;
    uint8_t kind, step, dtype, pad;
    uint32_t seq;
    uint32_t pad2;
    uint64_t nbytes;
} msg_header;

struct ct_work {
    bool cuda;             /* nccl: done is an event on the group's stream */
    ct_cuda_event *event;
    ct_process_group *pg;
    int kind;
    ct_reduce_op op;
    ct_dtype dtype;
    void *buf;        /* in-place / output buffer */
    const void *in;   /* reduce_scatter, all_gather input */
    int64_t count;    /* elements of buf */
    int peer;         /* broadcast src, send dst, recv src */
    uint32_t seq;
    ct_tensor *t1, *t2;
    bool done;
    ct_status status;
    char msg[MSG_CAP];
    ct_work *next;
};

struct ct_process_group {
    char backend[8];
    int rank, size;
    int64_t timeout_ms;
    ct_store *store;
    bool owns_store;
    char prefix[160];
    int *fds;
    int split_count;
    uint32_t seq;
    _Atomic int64_t bytes_sent;
    pthread_t thread;
    bool thread_started;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    ct_work *head, *tail;
    bool stop;
    bool broken;
    char broken_msg[MSG_CAP + 64];
    /* nccl */
    bool nccl;
    void *comm;
    ct_cuda_stream *stream;
    int device;
};

/* The nccl backend (nccl.c). */
ct_status ct_nccl_group_init(ct_process_group *pg);
void ct_nccl_group_free(ct_process_group *pg);
/* Launches w on the group's stream, after the current stream's work; w is complete
 * (as far as the host goes) on return, its event marks the end on the device. */
void ct_nccl_submit(ct_process_group *pg, ct_work *w);
ct_status ct_nccl_barrier(ct_process_group *pg);

#endif
