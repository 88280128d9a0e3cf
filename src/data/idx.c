/* IDX files (MNIST, Fashion-MNIST), plain or gzip-compressed. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "ctorch.h"
#include "ctorch/ext.h"

/* Note [IDX format]
 * Bytes 0-1 are zero, byte 2 is the element type (0x08 uint8, 0x09 int8, 0x0B int16,
 * 0x0C int32, 0x0D float32, 0x0E float64), byte 3 the number of dimensions; then one
 * big-endian uint32 size per dimension, then the elements, big-endian, row-major.
 * zlib's gzread passes a file that is not gzip through unchanged, so one reader serves
 * both. The header's sizes are never trusted for an allocation: the buffer grows with
 * the bytes that actually arrive (up to the claimed size), so a file that claims
 * terabytes fails as truncated rather than as a huge allocation. */

#define IDX_OP "idx_load"

typedef struct idx_reader {
    gzFile f;
    const char *path;
} idx_reader;

/* Reads up to n bytes; returns the count, or -1 with an error set. */
static int64_t rd(idx_reader *r, void *buf, int64_t n) {
    int64_t got = 0;
    while (got < n) {
        int64_t chunk = n - got > (1 << 30) ? (1 << 30) : n - got;
        int k = gzread(r->f, (char *)buf + got, (unsigned)chunk);
        if (k < 0) {
            int zerr = 0;
            const char *msg = gzerror(r->f, &zerr);
            ct_error(CT_ERROR_FORMAT, IDX_OP, "%s: corrupt compressed data (%s)", r->path, msg ? msg : "zlib error");
            return -1;
        }
        if (k == 0)
            break;
        got += k;
    }
    return got;
}

static int idx_dtype(int code, ct_dtype *out) {
    switch (code) {
    case 0x08:
        *out = CT_U8;
        return 0;
    case 0x09:
        *out = CT_I8;
        return 0;
    case 0x0B:
        *out = CT_I16;
        return 0;
    case 0x0C:
        *out = CT_I32;
        return 0;
    case 0x0D:
        *out = CT_F32;
        return 0;
    case 0x0E:
        *out = CT_F64;
        return 0;
    default:
        return -1;
    }
}

static void swap_bytes(unsigned char *p, int64_t n, size_t esize) {
    if (esize == 1)
        return;
    for (int64_t i = 0; i < n; i++, p += esize)
        for (size_t a = 0, b = esize - 1; a < b; a++, b--) {
            unsigned char t = p[a];
            p[a] = p[b];
            p[b] = t;
        }
}

static bool host_little_endian(void) {
    const uint16_t one = 1;
    unsigned char c;
    memcpy(&c, &one, 1);
    return c == 1;
}

static ct_tensor *idx_read(idx_reader *r) {
    unsigned char head[4];
    int64_t got = rd(r, head, 4);
    if (got < 0)
        return NULL;
    if (got < 4) {
        ct_error(CT_ERROR_FORMAT, IDX_OP, "%s: truncated header (%lld bytes)", r->path, (long long)got);
        return NULL;
    }
    if (head[0] != 0 || head[1] != 0) {
        ct_error(CT_ERROR_FORMAT, IDX_OP, "%s: not an IDX file (bad magic %02x %02x %02x %02x)", r->path, head[0],
                 head[1], head[2], head[3]);
        return NULL;
    }
    ct_dtype dtype;
    if (idx_dtype(head[2], &dtype)) {
        ct_error(CT_ERROR_FORMAT, IDX_OP, "%s: unknown IDX element type 0x%02x", r->path, head[2]);
        return NULL;
    }
    int ndim = head[3];
    if (ndim < 1 || ndim > CT_MAX_DIMS) {
        ct_error(CT_ERROR_FORMAT, IDX_OP, "%s: %d dimensions (IDX files here have 1 to %d)", r->path, ndim,
                 CT_MAX_DIMS);
        return NULL;
    }
    unsigned char dims[4 * CT_MAX_DIMS];
    got = rd(r, dims, 4 * ndim);
    if (got < 0)
        return NULL;
    if (got < 4 * ndim) {
        ct_error(CT_ERROR_FORMAT, IDX_OP, "%s: truncated header (%d dimension sizes expected)", r->path, ndim);
        return NULL;
    }
    int64_t shape[CT_MAX_DIMS];
    size_t esize = ct_dtype_size(dtype);
    int64_t numel = 1;
    bool overflow = false;
    for (int d = 0; d < ndim; d++) {
        const unsigned char *p = dims + 4 * d;
        shape[d] = (int64_t)(((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3]);
        if (shape[d] != 0 && numel > INT64_MAX / 16 / shape[d])
            overflow = true;
        else
            numel *= shape[d];
    }
    if (overflow) {
        ct_error(CT_ERROR_FORMAT, IDX_OP, "%s: the header's sizes overflow (more than 2^59 elements)", r->path);
        return NULL;
    }
    const int64_t need = numel * (int64_t)esize;
    /* Grow toward the claimed size only as data arrives (Note [IDX format]). */
    int64_t cap = need < (1 << 20) ? need : (1 << 20), have = 0;
    unsigned char *buf = cap ? ct_xmalloc(IDX_OP, (size_t)cap) : NULL;
    if (cap && !buf)
        return NULL;
    while (have < need) {
        if (have == cap) {
            int64_t ncap = cap * 2 < need ? cap * 2 : need;
            unsigned char *nb = realloc(buf, (size_t)ncap);
            if (!nb) {
                free(buf);
                ct_error(CT_ERROR_OUT_OF_MEMORY, IDX_OP, "%s: out of memory reading %lld bytes", r->path,
                         (long long)need);
                return NULL;
            }
            buf = nb;
            cap = ncap;
        }
        int64_t k = rd(r, buf + have, cap - have);
        if (k < 0) {
            free(buf);
            return NULL;
        }
        if (k == 0)
            break;
        have += k;
    }
    char sb[128];
    if (have < need) {
        free(buf);
        ct_error(CT_ERROR_FORMAT, IDX_OP, "%s: truncated: shape %s of %s needs %lld bytes of data, the file has %lld",
                 r->path, ct_shape_str(shape, ndim, sb, sizeof sb), ct_dtype_name(dtype), (long long)need,
                 (long long)have);
        return NULL;
    }
    unsigned char extra;
    int64_t more = rd(r, &extra, 1);
    if (more != 0) {
        free(buf);
        if (more > 0)
            ct_error(CT_ERROR_FORMAT, IDX_OP, "%s: size mismatch: data continues past the %lld bytes that shape %s needs",
                     r->path, (long long)need, ct_shape_str(shape, ndim, sb, sizeof sb));
        return NULL;
    }
    /* A gzip stream cut inside its trailer yields all the data and then a soft error
     * (Z_BUF_ERROR, "unexpected end of file"): still a damaged file. */
    int zerr = Z_OK;
    const char *zmsg = gzerror(r->f, &zerr);
    if (zerr != Z_OK) {
        free(buf);
        ct_error(CT_ERROR_FORMAT, IDX_OP, "%s: truncated or corrupt compressed data (%s)", r->path,
                 zmsg ? zmsg : "zlib error");
        return NULL;
    }
    if (host_little_endian())
        swap_bytes(buf, numel, esize);
    ct_tensor *t = ct_empty(shape, ndim, dtype, CT_CPU);
    if (t && need)
        memcpy(ct_tensor_data(t), buf, (size_t)need);
    free(buf);
    return t;
}

ct_tensor *ct_idx_load(const char *path) {
    if (!path) {
        ct_error(CT_ERROR_NULL_ARGUMENT, IDX_OP, "path is NULL");
        return NULL;
    }
    FILE *probe = fopen(path, "rb");
    if (!probe) {
        ct_error(CT_ERROR_IO, IDX_OP, "cannot open %s: %s", path, strerror(errno));
        return NULL;
    }
    fclose(probe);
    idx_reader r = {gzopen(path, "rb"), path};
    if (!r.f) {
        ct_error(CT_ERROR_IO, IDX_OP, "cannot open %s", path);
        return NULL;
    }
    ct_tensor *t = idx_read(&r);
    gzclose(r.f);
    return t;
}

/* The first of "<base>.gz" and "<base>" that exists. */
static bool find_file(const char *dir, const char *base, char *out, size_t cap) {
    static const char *const suffixes[] = {".gz", ""};
    for (int i = 0; i < 2; i++) {
        int n = snprintf(out, cap, "%s/%s%s", dir, base, suffixes[i]);
        if (n < 0 || (size_t)n >= cap)
            return false;
        FILE *f = fopen(out, "rb");
        if (f) {
            fclose(f);
            return true;
        }
    }
    return false;
}

ct_status ct_mnist_load(const char *dir, bool train, ct_tensor **images, ct_tensor **labels) {
    static const char *op = "mnist_load";
    if (!dir || !images || !labels)
        return ct_error(CT_ERROR_NULL_ARGUMENT, op, "%s is NULL", !dir ? "dir" : !images ? "images" : "labels");
    *images = *labels = NULL;
    const char *split = train ? "train" : "t10k";
    char ipath[4096], lpath[4096], base[64];
    snprintf(base, sizeof base, "%s-images-idx3-ubyte", split);
    if (!find_file(dir, base, ipath, sizeof ipath))
        return ct_error(CT_ERROR_IO, op, "no %s or %s.gz in %s", base, base, dir);
    snprintf(base, sizeof base, "%s-labels-idx1-ubyte", split);
    if (!find_file(dir, base, lpath, sizeof lpath))
        return ct_error(CT_ERROR_IO, op, "no %s or %s.gz in %s", base, base, dir);
    ct_status st = CT_OK;
    ct_scope_begin();
    ct_tensor *x = ct_idx_load(ipath);
    ct_tensor *y = x ? ct_idx_load(lpath) : NULL;
    if (!x || !y) {
        st = ct_last_status();
    } else if (ct_tensor_dtype(x) != CT_U8 || ct_tensor_dim(x) != 3) {
        st = ct_error(CT_ERROR_FORMAT, op, "%s: expected uint8 images (N, H, W), got %s with %d dimensions", ipath,
                      ct_dtype_name(ct_tensor_dtype(x)), ct_tensor_dim(x));
    } else if (ct_tensor_dtype(y) != CT_U8 || ct_tensor_dim(y) != 1) {
        st = ct_error(CT_ERROR_FORMAT, op, "%s: expected uint8 labels (N), got %s with %d dimensions", lpath,
                      ct_dtype_name(ct_tensor_dtype(y)), ct_tensor_dim(y));
    } else if (ct_tensor_shape(x)[0] != ct_tensor_shape(y)[0]) {
        st = ct_error(CT_ERROR_FORMAT, op, "%lld images but %lld labels", (long long)ct_tensor_shape(x)[0],
                      (long long)ct_tensor_shape(y)[0]);
    } else {
        ct_tensor *y64 = ct_to_dtype(y, CT_I64);
        if (!y64) {
            st = ct_last_status();
        } else {
            *images = ct_keep(x);
            *labels = ct_keep(y64);
        }
    }
    ct_scope_end();
    return st;
}
