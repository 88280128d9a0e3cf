/* A fake device for allocator tests: memory from malloc (never touched by the
 * allocator), an optional byte limit to provoke out-of-memory, and streams with events
 * that the test completes by hand. Installed on the CPU device type with
 * ct_alloc_set_device_interface. */
#ifndef CT_TEST_ALLOC_FAKE_H
#define CT_TEST_ALLOC_FAKE_H

#include <stdlib.h>
#include <string.h>

#include "alloc.h"

typedef struct fake_event {
    int64_t stream;
    bool done;
    struct fake_event *next;
} fake_event;

typedef struct fake_device {
    size_t limit; /* 0: unlimited */
    size_t used;
    int allocs, frees, syncs, refused;
    bool fail_all;
    fake_event *events;
    int live_events;
} fake_device;

static inline void *fake_raw_alloc(void *ctx, int index, size_t n) {
    fake_device *d = ctx;
    (void)index;
    if (d->fail_all || (d->limit && d->used + n > d->limit)) {
        d->refused++;
        return NULL;
    }
    void *p = malloc(n);
    if (p) {
        d->used += n;
        d->allocs++;
    }
    return p;
}

static inline void fake_raw_free(void *ctx, int index, void *p, size_t n) {
    fake_device *d = ctx;
    (void)index;
    d->used -= n;
    d->frees++;
    free(p);
}

static inline void fake_sync(void *ctx, int index) {
    fake_device *d = ctx;
    (void)index;
    d->syncs++;
}

static inline void *fake_event_record(void *ctx, int index, int64_t stream) {
    fake_device *d = ctx;
    (void)index;
    fake_event *e = calloc(1, sizeof *e);
    if (!e)
        return NULL;
    e->stream = stream;
    e->next = d->events;
    d->events = e;
    d->live_events++;
    return e;
}

static inline bool fake_event_query(void *ctx, void *ev) {
    (void)ctx;
    return ((fake_event *)ev)->done;
}

static inline void fake_event_destroy(void *ctx, void *ev) {
    fake_device *d = ctx;
    for (fake_event **pp = &d->events; *pp; pp = &(*pp)->next)
        if (*pp == ev) {
            *pp = ((fake_event *)ev)->next;
            break;
        }
    d->live_events--;
    free(ev);
}

/* Marks every recorded event on stream as complete. */
static inline void fake_complete_stream(fake_device *d, int64_t stream) {
    for (fake_event *e = d->events; e; e = e->next)
        if (e->stream == stream)
            e->done = true;
}

static inline ct_alloc_device_iface fake_iface(fake_device *d) {
    ct_alloc_device_iface i;
    memset(&i, 0, sizeof i);
    i.name = "cpu";
    i.ctx = d;
    i.raw_alloc = fake_raw_alloc;
    i.raw_free = fake_raw_free;
    i.synchronize = fake_sync;
    i.event_record = fake_event_record;
    i.event_query = fake_event_query;
    i.event_destroy = fake_event_destroy;
    i.caching_default = true;
    return i;
}

#endif
