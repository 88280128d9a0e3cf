/* ct_memory_snapshot: the allocator state as torch.cuda.memory._dump_snapshot writes it
 * (formats.md §3), in pickle or JSON.
 *
 * Note [Snapshot writer]
 * The structure is walked once and fed to a tiny emitter with two back ends, so the
 * pickle and the JSON always hold the same data. Only plain containers and scalars go
 * into the pickle, because PyTorch's memory viewer (MemoryViz.js) has its own unpickler
 * without GLOBAL/REDUCE. Frames: ctorch has no Python stack; each block and trace entry
 * gets one frame {"filename": "ctorch", "line": 0, "name": <op>} naming the op that
 * asked for the memory (ct_alloc_set_context), or no frames when none was set. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/error.h"
#include "util/pickle_emit.h"

typedef struct {
    bool json;
    ct_pickle pk;
    /* JSON: output buffer, and per-depth "first element" flags for commas */
    char *buf;
    size_t len, cap;
    bool first[32];
    int depth;
    bool after_key;
    bool oom;
} emitter;

static void jraw(emitter *e, const char *s, size_t n) {
    if (e->oom)
        return;
    if (e->len + n + 1 > e->cap) {
        size_t cap = e->cap ? e->cap * 2 : 8192;
        while (cap < e->len + n + 1)
            cap *= 2;
        char *b = realloc(e->buf, cap);
        if (!b) {
            e->oom = true;
            return;
        }
        e->buf = b;
        e->cap = cap;
    }
    memcpy(e->buf + e->len, s, n);
    e->len += n;
}

static void jsep(emitter *e) {
    if (e->after_key) {
        e->after_key = false;
        return;
    }
    if (e->depth > 0) {
        if (!e->first[e->depth])
            jraw(e, ",", 1);
        e->first[e->depth] = false;
    }
}

static void jstr(emitter *e, const char *s) {
    jraw(e, "\"", 1);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        char esc[8];
        if (c == '"' || c == '\\') {
            esc[0] = '\\';
            esc[1] = (char)c;
            jraw(e, esc, 2);
        } else if (c < 0x20) {
            snprintf(esc, sizeof esc, "\\u%04x", c);
            jraw(e, esc, 6);
        } else {
            jraw(e, (const char *)&c, 1);
        }
    }
    jraw(e, "\"", 1);
}

static void open_c(emitter *e, char kind) { /* 'd' dict, 'l' list, 't' tuple */
    if (e->json) {
        jsep(e);
        jraw(e, kind == 'd' ? "{" : "[", 1);
        if (e->depth < 31)
            e->depth++;
        e->first[e->depth] = true;
    } else {
        if (kind == 'd')
            ct_pickle_empty_dict(&e->pk);
        else if (kind == 'l')
            ct_pickle_empty_list(&e->pk);
        ct_pickle_mark(&e->pk);
    }
}

static void close_c(emitter *e, char kind) {
    if (e->json) {
        e->depth--;
        jraw(e, kind == 'd' ? "}" : "]", 1);
    } else if (kind == 'd') {
        ct_pickle_setitems(&e->pk);
    } else if (kind == 'l') {
        ct_pickle_appends(&e->pk);
    } else {
        ct_pickle_tuple(&e->pk);
    }
}

static void key(emitter *e, const char *k) {
    if (e->json) {
        jsep(e);
        jstr(e, k);
        jraw(e, ":", 1);
        e->after_key = true;
    } else {
        ct_pickle_unicode(&e->pk, k, (size_t)-1);
    }
}

static void v_str(emitter *e, const char *s) {
    if (e->json) {
        jsep(e);
        jstr(e, s);
    } else {
        ct_pickle_unicode(&e->pk, s, (size_t)-1);
    }
}

static void v_int(emitter *e, int64_t v) {
    if (e->json) {
        char b[32];
        jsep(e);
        jraw(e, b, (size_t)snprintf(b, sizeof b, "%" PRId64, v));
    } else {
        ct_pickle_int(&e->pk, v);
    }
}

static void v_uint(emitter *e, uint64_t v) {
    if (e->json) {
        char b[32];
        jsep(e);
        jraw(e, b, (size_t)snprintf(b, sizeof b, "%" PRIu64, v));
    } else {
        ct_pickle_uint(&e->pk, v);
    }
}

static void v_bool(emitter *e, bool v) {
    if (e->json) {
        jsep(e);
        jraw(e, v ? "true" : "false", v ? 4 : 5);
    } else {
        ct_pickle_bool(&e->pk, v);
    }
}

/* One key and its value: the snapshot is mostly flat records of these. */
static void kv_int(emitter *e, const char *k, int64_t v) {
    key(e, k);
    v_int(e, v);
}

static void kv_uint(emitter *e, const char *k, uint64_t v) {
    key(e, k);
    v_uint(e, v);
}

static void kv_str(emitter *e, const char *k, const char *v) {
    key(e, k);
    v_str(e, v);
}

static void kv_bool(emitter *e, const char *k, bool v) {
    key(e, k);
    v_bool(e, v);
}

static void frames(emitter *e, const char *context) {
    open_c(e, 'l');
    if (context && context[0]) {
        open_c(e, 'd');
        kv_str(e, "filename", "ctorch");
        kv_int(e, "line", 0);
        kv_str(e, "name", context);
        close_c(e, 'd');
    }
    close_c(e, 'l');
}

static const char *state_name(int s) {
    return s == 1 ? "active_allocated" : s == 2 ? "active_pending_free" : "inactive";
}

static void emit_state(emitter *e, const ct_alloc_state *st) {
    open_c(e, 'd');
    key(e, "segments");
    open_c(e, 'l');
    for (size_t i = 0; i < st->nsegments; i++) {
        const ct_alloc_segment_info *s = &st->segments[i];
        open_c(e, 'd');
        kv_int(e, "device", st->device.index);
        kv_uint(e, "address", s->address);
        kv_uint(e, "total_size", s->total_size);
        kv_uint(e, "allocated_size", s->allocated_size);
        kv_uint(e, "active_size", s->active_size);
        kv_uint(e, "requested_size", s->requested_size);
        kv_int(e, "stream", s->stream);
        kv_str(e, "segment_type", s->is_small ? "small" : "large");
        key(e, "segment_pool_id");
        open_c(e, 't');
        v_int(e, 0);
        v_int(e, (int64_t)s->pool);
        close_c(e, 't');
        kv_bool(e, "is_expandable", false);
        key(e, "frames");
        frames(e, s->context);
        key(e, "blocks");
        open_c(e, 'l');
        for (size_t j = 0; j < s->nblocks; j++) {
            const ct_alloc_block_info *b = &s->blocks[j];
            open_c(e, 'd');
            kv_uint(e, "address", b->address);
            kv_uint(e, "size", b->size);
            kv_uint(e, "requested_size", b->requested_size);
            kv_str(e, "state", state_name(b->state));
            key(e, "frames");
            frames(e, b->context);
            close_c(e, 'd');
        }
        close_c(e, 'l');
        close_c(e, 'd');
    }
    close_c(e, 'l');
    /* One list per device index of this type, as PyTorch indexes device_traces. */
    key(e, "device_traces");
    open_c(e, 'l');
    for (int d = 0; d <= st->device.index; d++) {
        open_c(e, 'l');
        for (size_t i = 0; d == st->device.index && i < st->ntrace; i++) {
            const ct_alloc_trace_entry *t = &st->trace[i];
            open_c(e, 'd');
            kv_str(e, "action", ct_alloc_trace_action_name(t->action));
            key(e, t->action == CT_TRACE_OOM ? "device_free" : "addr");
            v_uint(e, t->addr);
            kv_uint(e, "size", t->size);
            kv_int(e, "stream", t->stream);
            kv_int(e, "time_us", t->time_us);
            key(e, "frames");
            frames(e, t->context);
            close_c(e, 'd');
        }
        close_c(e, 'l');
    }
    close_c(e, 'l');
    key(e, "allocator_settings");
    open_c(e, 'd');
    const char *conf = getenv("CT_ALLOC_CONF");
    if (conf && *conf) {
        kv_str(e, "CT_ALLOC_CONF", conf);
    }
    kv_int(e, "max_split_size", st->max_split_size);
    kv_bool(e, "caching", st->caching);
    close_c(e, 'd');
    close_c(e, 'd');
}

ct_status ct_memory_snapshot(ct_device device, const char *path, ct_snapshot_format format) {
    const char *op = "memory_snapshot";
    CT_CHECK_ARG_STATUS(op, path);
    if (format != CT_SNAPSHOT_PICKLE && format != CT_SNAPSHOT_JSON)
        return ct_error(CT_ERROR_VALUE, op, "unknown snapshot format %d (use CT_SNAPSHOT_PICKLE or CT_SNAPSHOT_JSON)",
                        (int)format);
    ct_alloc_state st;
    ct_status s = ct_alloc_state_get(device, &st);
    if (s != CT_OK)
        return s;
    emitter e;
    memset(&e, 0, sizeof e);
    e.json = format == CT_SNAPSHOT_JSON;
    const void *data;
    size_t len;
    if (e.json) {
        emit_state(&e, &st);
        jraw(&e, "\n", 1);
        if (e.oom)
            s = ct_error(CT_ERROR_OUT_OF_MEMORY, op, "out of memory while writing the snapshot");
        data = e.buf;
        len = e.len;
    } else {
        ct_pickle_init(&e.pk);
        ct_pickle_proto(&e.pk);
        emit_state(&e, &st);
        ct_pickle_stop(&e.pk);
        s = ct_pickle_finish(&e.pk, op);
        data = e.pk.buf;
        len = e.pk.len;
    }
    ct_alloc_state_free(&st);
    if (s == CT_OK) {
        FILE *f = fopen(path, "wb");
        if (!f) {
            s = ct_error(CT_ERROR_IO, op, "cannot open '%s' for writing", path);
        } else {
            bool ok = fwrite(data, 1, len, f) == len;
            ok = fclose(f) == 0 && ok;
            if (!ok)
                s = ct_error(CT_ERROR_IO, op, "could not write '%s'", path);
        }
    }
    free(e.buf);
    ct_pickle_destroy(&e.pk);
    return s;
}
