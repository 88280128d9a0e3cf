/* ct_load: maps a file, recognises its format by content and hands it to its reader. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ctorch.h"
#include "ctorch/ext.h"
#include "io/load.h"
#include "io/pt.h"
#include "io/safetensors.h"

/* ------------------------------------------------------------------ mappings */

/* Note [Mapping files]
 * A regular file is mapped read-only and private (MAP_NORESERVE): the parsers can only
 * read it, and the mapping costs no commit charge, so a file larger than RAM + swap maps
 * as easily as a small one (a writable private mapping of it fails with ENOMEM under
 * Linux's default overcommit heuristic). Tensors that view a mapping must be writable
 * (in-place ops, copy-on-write, never reaching the file): the safetensors reader makes
 * the tensor data writable once the header has been validated (ct_mapping_writable).
 * Anything else (pipes, /dev/stdin, character devices such as /dev/zero) is read into
 * memory, but only after its first bytes look like a checkpoint (ct_sniff_fn): an
 * endless stream of zeros or random bytes is refused after one small read. */

/* Bytes of a stream looked at before deciding to read the rest. */
#define SNIFF_BYTES 4096

static void *xrealloc_read(const char *op, const char *path, void *p, size_t n) {
    void *q = ct_xrealloc(op, p, n);
    if (!q)
        ct_error(CT_ERROR_OUT_OF_MEMORY, op, "'%s': could not allocate %zu bytes to read it", path, n);
    return q;
}

/* Reads until cap bytes or the end; false (error set) on a read error. */
static bool read_some(const char *op, const char *path, int fd, ct_mapping *m, size_t cap) {
    while (m->len < cap) {
        ssize_t r = read(fd, m->data + m->len, cap - m->len);
        if (r == 0)
            break;
        if (r < 0) {
            if (errno == EINTR)
                continue;
            ct_error(CT_ERROR_IO, op, "cannot read '%s': %s", path, strerror(errno));
            return false;
        }
        m->len += (size_t)r;
    }
    return true;
}

static ct_mapping *read_whole(const char *op, const char *path, int fd, ct_sniff_fn sniff) {
    ct_mapping *m = ct_xcalloc(op, 1, sizeof *m);
    if (!m)
        return NULL;
    atomic_init(&m->refs, 1);
    size_t cap = SNIFF_BYTES;
    m->data = xrealloc_read(op, path, NULL, cap);
    if (!m->data || !read_some(op, path, fd, m, cap))
        goto fail;
    if (sniff && !sniff(m->data, m->len, path))
        goto fail;
    while (m->len == cap) {
        size_t ncap = cap * 2;
        uint8_t *d = ncap > cap ? xrealloc_read(op, path, m->data, ncap) : NULL;
        if (!d)
            goto fail;
        m->data = d;
        cap = ncap;
        if (!read_some(op, path, fd, m, cap))
            goto fail;
    }
    return m;
fail:
    free(m->data);
    free(m);
    return NULL;
}

ct_mapping *ct_mapping_open(const char *op, const char *path, ct_sniff_fn sniff) {
    int fd = open(path, O_RDONLY);
    if (fd < 0) {
        ct_error(CT_ERROR_IO, op, "cannot open '%s': %s", path, strerror(errno));
        return NULL;
    }
    struct stat stv;
    if (fstat(fd, &stv) != 0) {
        ct_error(CT_ERROR_IO, op, "cannot stat '%s': %s", path, strerror(errno));
        close(fd);
        return NULL;
    }
    if (S_ISDIR(stv.st_mode)) {
        ct_error(CT_ERROR_IO, op, "'%s' is a directory", path);
        close(fd);
        return NULL;
    }
    ct_mapping *m = NULL;
    if (S_ISREG(stv.st_mode) && stv.st_size > 0) {
        if ((uint64_t)stv.st_size > SIZE_MAX) {
            ct_error(CT_ERROR_IO, op, "'%s' (%lld bytes) is too large to map", path, (long long)stv.st_size);
            close(fd);
            return NULL;
        }
        void *p = mmap(NULL, (size_t)stv.st_size, PROT_READ, MAP_PRIVATE | MAP_NORESERVE, fd, 0);
        if (p != MAP_FAILED) {
            m = ct_xcalloc(op, 1, sizeof *m);
            if (!m) {
                munmap(p, (size_t)stv.st_size);
                close(fd);
                return NULL;
            }
            atomic_init(&m->refs, 1);
            m->data = p;
            m->len = (size_t)stv.st_size;
            m->mmapped = true;
        } else if (errno != ENODEV && errno != EACCES) {
            /* A mappable file that did not map: reading it would fail the same way. */
            ct_error(CT_ERROR_IO, op, "cannot map '%s' (%lld bytes): %s", path, (long long)stv.st_size,
                     strerror(errno));
            close(fd);
            return NULL;
        }
    }
    if (!m) /* pipes, character devices, files of unknown size (/proc) */
        m = read_whole(op, path, fd, sniff);
    close(fd);
    return m;
}

bool ct_mapping_writable(ct_mapping *m, const uint8_t *p, size_t n) {
    if (!m->mmapped || n == 0)
        return true;
    long page = sysconf(_SC_PAGESIZE);
    uintptr_t a = (uintptr_t)p & ~(uintptr_t)(page - 1);
    uintptr_t e = (uintptr_t)p + n;
    return mprotect((void *)a, e - a, PROT_READ | PROT_WRITE) == 0;
}

void ct_mapping_retain(ct_mapping *m) { atomic_fetch_add_explicit(&m->refs, 1, memory_order_relaxed); }

void ct_mapping_release(ct_mapping *m) {
    if (!m || atomic_fetch_sub_explicit(&m->refs, 1, memory_order_acq_rel) != 1)
        return;
    if (m->mmapped)
        munmap(m->data, m->len);
    else
        free(m->data);
    free(m);
}

/* ------------------------------------------------------------------ detection */

/* Note [Format detection]
 * Only content decides, never the file name:
 *   - "PK\x03\x04": a zip, which is what torch.save writes since 1.6;
 *   - a pickle of torch.save's legacy magic number 0x1950a86a20f9469cfc6c (0.4-1.5,
 *     or _use_new_zipfile_serialization=False): PROTO 2, LONG1 of 10 bytes, magic;
 *   - "ustar" at byte 257: the tar format of PyTorch before 0.4, refused as
 *     weights_only loading refuses it;
 *   - otherwise safetensors when byte 8 opens its JSON header ('{', or whitespace,
 *     which the reference accepts). The 8 bytes before are the header length, which
 *     has no magic of its own; the safetensors reader then validates everything. */
typedef enum { FMT_UNKNOWN, FMT_SAFETENSORS, FMT_ZIP, FMT_LEGACY_PICKLE, FMT_TAR } file_format;

static const uint8_t legacy_magic[] = {0x80, 0x02, 0x8a, 0x0a, 0x6c, 0xfc, 0x9c, 0x46,
                                       0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19};

static file_format detect(const uint8_t *b, size_t n) {
    if (n >= 4 && memcmp(b, "PK\x03\x04", 4) == 0)
        return FMT_ZIP;
    if (n >= sizeof legacy_magic && memcmp(b, legacy_magic, sizeof legacy_magic) == 0)
        return FMT_LEGACY_PICKLE;
    if (n >= 262 && memcmp(b + 257, "ustar", 5) == 0)
        return FMT_TAR;
    if (n >= 9 && (b[8] == '{' || b[8] == ' ' || b[8] == '\t' || b[8] == '\n' || b[8] == '\r'))
        return FMT_SAFETENSORS;
    return FMT_UNKNOWN;
}

static void refuse_unknown(const uint8_t *b, size_t n, const char *who) {
    char hex[3 * 8 + 1] = "";
    size_t h = 0;
    for (size_t i = 0; i < n && i < 8; i++)
        h += (size_t)snprintf(hex + h, sizeof hex - h, i ? " %02x" : "%02x", b[i]);
    ct_error(CT_ERROR_FORMAT, "load",
             "%s: not a checkpoint ctorch recognises (%zu bytes, starting %s%s): expected safetensors (an 8-byte "
             "header length, then '{'), a torch.save zip (PK\\x03\\x04) or a legacy torch.save pickle",
             who, n, n ? "" : "(empty)", hex);
}

static uint64_t le64(const uint8_t *b) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | b[i];
    return v;
}

bool ct_sniff_safetensors(const uint8_t *b, size_t n, const char *name) {
    /* A plausible header length (random bytes pass once in 2^37), then the header's
     * first byte. Shorter streams are whole: the reader judges them. */
    if (n < 8 || (le64(b) <= CT_SAFETENSORS_MAX_HEADER && (n == 8 || detect(b, n) == FMT_SAFETENSORS)))
        return true;
    ct_clear_error();
    ct_value *v = ct_safetensors_load_buffer(b, n, NULL, name); /* its own verdict on these bytes */
    if (v || ct_last_status() == CT_OK) {
        ct_value_free(v);
        ct_error(CT_ERROR_FORMAT, "load_safetensors", "%s: not a safetensors file (header length %llu)", name,
                 (unsigned long long)le64(b));
    }
    return false;
}

bool ct_sniff_checkpoint(const uint8_t *b, size_t n, const char *name) {
    switch (detect(b, n)) {
    case FMT_UNKNOWN: refuse_unknown(b, n, name); return false;
    case FMT_SAFETENSORS: return ct_sniff_safetensors(b, n, name);
    default: return true;
    }
}

static ct_value *dispatch(const uint8_t *b, size_t n, ct_mapping *map, const char *name, ct_st_parts parts) {
    const char *who = name ? name : "buffer";
    switch (detect(b, n)) {
    case FMT_SAFETENSORS: return ct_safetensors_load_parts(b, n, map, name, parts);
    case FMT_ZIP:
    case FMT_LEGACY_PICKLE: return ct_pt_load_buffer(b, n, name);
    case FMT_TAR:
        ct_error(CT_ERROR_NOT_IMPLEMENTED, "load",
                 "%s: a tar archive, the torch.save format of PyTorch before 0.4, which ctorch does not read "
                 "(nor does torch.load with weights_only=True); re-save it with a recent PyTorch",
                 who);
        return NULL;
    case FMT_UNKNOWN: break;
    }
    refuse_unknown(b, n, who);
    return NULL;
}

static ct_value *load_path(const char *op, const char *path, ct_st_parts parts) {
    if (!path) {
        ct_error(CT_ERROR_NULL_ARGUMENT, op, "path is NULL");
        return NULL;
    }
    ct_mapping *m = ct_mapping_open(op, path, ct_sniff_checkpoint);
    if (!m)
        return NULL;
    ct_value *v = dispatch(m->data, m->len, ct_safetensors_copy_requested() ? NULL : m, path, parts);
    ct_mapping_release(m);
    return v;
}

ct_value *ct_load(const char *path) { return load_path("load", path, CT_ST_ALL); }

/* A state dict is a dict of str -> tensor; a torch.save file may hold anything. */
static bool is_state_dict(const char *op, const ct_value *v, const char *path) {
    if (ct_value_kind(v) != CT_VALUE_DICT) {
        ct_error(CT_ERROR_TYPE, op,
                 "'%s' holds a value of type %s, not a state dict (a dict of name -> tensor); ct_load "
                 "reads any checkpoint",
                 path, ct_value_type_name(ct_value_kind(v)));
        return false;
    }
    for (int64_t i = 0; i < ct_value_len(v); i++) {
        const ct_value *k = ct_value_key_at(v, i), *item = ct_value_at(v, i);
        if (ct_value_kind(k) != CT_VALUE_STRING) {
            ct_error(CT_ERROR_TYPE, op, "'%s': key %lld of the dict is an int, but a state dict's keys are names", path,
                     (long long)ct_value_int(k));
            return false;
        }
        if (ct_value_kind(item) != CT_VALUE_TENSOR) {
            ct_error(CT_ERROR_TYPE, op,
                     "'%s': '%s' is of type %s, not a tensor: a checkpoint rather than a state dict? "
                     "(ct_load reads any checkpoint)",
                     path, ct_value_str(k, NULL), ct_value_type_name(ct_value_kind(item)));
            return false;
        }
    }
    return true;
}

ct_value *ct_load_state_dict_file(const char *path) {
    const char *op = "load_state_dict_file";
    ct_value *v = load_path(op, path, CT_ST_TENSORS);
    if (v && !is_state_dict(op, v, path)) {
        ct_value_free(v);
        return NULL;
    }
    return v;
}

ct_value *ct_load_buffer(const void *buf, size_t len) {
    if (!buf && len) {
        ct_error(CT_ERROR_NULL_ARGUMENT, "load_buffer", "buffer is NULL for %zu bytes", len);
        return NULL;
    }
    /* No mapping: the caller may free buf, so every tensor is copied. */
    return dispatch(buf, len, NULL, NULL, CT_ST_ALL);
}
