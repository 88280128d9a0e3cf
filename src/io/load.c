/* ct_load: maps a file, recognises its format by content and hands it to its reader. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "error.h"
#include "io/load.h"
#include "io/pt.h"
#include "io/safetensors.h"

/* ------------------------------------------------------------------ mappings */

static ct_mapping *read_whole(const char *op, const char *path, int fd) {
    ct_mapping *m = ct_xcalloc(op, 1, sizeof *m);
    if (!m)
        return NULL;
    atomic_init(&m->refs, 1);
    size_t cap = 0;
    for (;;) {
        if (m->len == cap) {
            size_t ncap = cap ? cap * 2 : 65536;
            uint8_t *d = ncap > cap ? realloc(m->data, ncap) : NULL;
            if (!d) {
                ct_error(CT_ERROR_OUT_OF_MEMORY, op, "'%s': could not allocate %zu bytes to read it", path, ncap);
                free(m->data);
                free(m);
                return NULL;
            }
            m->data = d;
            cap = ncap;
        }
        ssize_t r = read(fd, m->data + m->len, cap - m->len);
        if (r == 0)
            break;
        if (r < 0) {
            if (errno == EINTR)
                continue;
            ct_error(CT_ERROR_IO, op, "cannot read '%s': %s", path, strerror(errno));
            free(m->data);
            free(m);
            return NULL;
        }
        m->len += (size_t)r;
    }
    return m;
}

ct_mapping *ct_mapping_open(const char *op, const char *path) {
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
    if (S_ISREG(stv.st_mode) && stv.st_size > 0 && (uint64_t)stv.st_size <= SIZE_MAX) {
        /* Writable and private: tensors over the mapping can be modified in place
         * (copy-on-write), and nothing ever reaches the file. */
        void *p = mmap(NULL, (size_t)stv.st_size, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
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
        }
    }
    if (!m)
        m = read_whole(op, path, fd);
    close(fd);
    return m;
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

static ct_value *dispatch(const uint8_t *b, size_t n, ct_mapping *map, const char *name) {
    const char *who = name ? name : "buffer";
    switch (detect(b, n)) {
    case FMT_SAFETENSORS: return ct_safetensors_load_buffer(b, n, map, name);
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
    char hex[3 * 8 + 1] = "";
    size_t h = 0;
    for (size_t i = 0; i < n && i < 8; i++)
        h += (size_t)snprintf(hex + h, sizeof hex - h, i ? " %02x" : "%02x", b[i]);
    ct_error(CT_ERROR_FORMAT, "load",
             "%s: not a checkpoint ctorch recognises (%zu bytes, starting %s%s): expected safetensors (an 8-byte "
             "header length, then '{'), a torch.save zip (PK\\x03\\x04) or a legacy torch.save pickle",
             who, n, n ? "" : "(empty)", hex);
    return NULL;
}

ct_value *ct_load(const char *path) {
    if (!path) {
        ct_error(CT_ERROR_NULL_ARGUMENT, "load", "path is NULL");
        return NULL;
    }
    ct_mapping *m = ct_mapping_open("load", path);
    if (!m)
        return NULL;
    ct_value *v = dispatch(m->data, m->len, ct_safetensors_copy_requested() ? NULL : m, path);
    ct_mapping_release(m);
    return v;
}

ct_value *ct_load_buffer(const void *buf, size_t len) {
    if (!buf && len) {
        ct_error(CT_ERROR_NULL_ARGUMENT, "load_buffer", "buffer is NULL for %zu bytes", len);
        return NULL;
    }
    /* No mapping: the caller may free buf, so every tensor is copied. */
    return dispatch(buf, len, NULL, NULL);
}
