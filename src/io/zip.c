/* Zip archives as torch.save writes them.
 *
 * Note [Zip reader]
 * torch.save archives need a small subset of zip: one disk, STORED entries (deflate
 * is accepted too, through zlib, which ctorch already links), ZIP64 sizes and offsets,
 * and data descriptors. Debian's libzip/minizip would add a dependency and still leave
 * the hostile-input checks to us (a zip library answers "where is entry N", not "does
 * entry N overlap entry M"), so the reader is written here, about 300 lines, and every
 * offset and size it reads is checked against the buffer before use:
 *  - the end records, the central directory and every local header lie inside the file;
 *  - the entry count fits in the central directory's size (46 bytes per entry at least);
 *  - each local header agrees with its central entry (name, method);
 *  - payloads end before the central directory, and no two entries' header+payload
 *    ranges overlap (this also refuses "zip bombs" built from shared payloads);
 *  - names are unique and free of NUL bytes; encrypted and multi-disk archives are
 *    refused; CRC-32 is checked on extraction;
 *  - a deflated entry claims no more than 1032 times its compressed size (deflate's
 *    limit), so a forged size cannot make the loader allocate gigabytes.
 * The central directory is authoritative for sizes: with a data descriptor (flag bit
 * 3) the local header's sizes are zero. */
#include "zip.h"

#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "ctorch/ext.h"

#define SIG_LOCAL 0x04034b50u
#define SIG_CENTRAL 0x02014b50u
#define SIG_EOCD 0x06054b50u
#define SIG_EOCD64 0x06064b50u
#define SIG_LOC64 0x07064b50u
#define SIG_DESC 0x08074b50u

static uint16_t rd16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }
static uint32_t rd32(const uint8_t *p) {
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}
static uint64_t rd64(const uint8_t *p) { return (uint64_t)rd32(p) | ((uint64_t)rd32(p + 4) << 32); }

/* True when [off, off+n) lies inside [0, len). */
static bool in_range(uint64_t off, uint64_t n, uint64_t len) { return off <= len && n <= len - off; }

static ct_status bad(const char *op, const char *msg, ...) CT_PRINTF(2, 3);
static ct_status bad(const char *op, const char *msg, ...) {
    char buf[400];
    va_list ap;
    va_start(ap, msg);
    vsnprintf(buf, sizeof buf, msg, ap);
    va_end(ap);
    return ct_error(CT_ERROR_FORMAT, op, "zip archive: %s", buf);
}

/* Reads the ZIP64 extended-information extra field of a central entry: only the fields
 * whose 32-bit value is 0xFFFFFFFF are present, in this order. */
static ct_status read_zip64_extra(const uint8_t *x, uint32_t xlen, ct_zip_entry *e, bool need_size,
                                  bool need_csize, bool need_off, const char *op) {
    uint32_t i = 0;
    while (i + 4 <= xlen) {
        uint16_t id = rd16(x + i), n = rd16(x + i + 2);
        if (n > xlen - i - 4)
            return bad(op, "entry '%s' has an extra field running past its header", e->name);
        if (id == 0x0001) {
            const uint8_t *p = x + i + 4;
            uint32_t left = n;
            if (need_size) {
                if (left < 8)
                    return bad(op, "entry '%s' has a short ZIP64 field", e->name);
                e->size = rd64(p), p += 8, left -= 8;
            }
            if (need_csize) {
                if (left < 8)
                    return bad(op, "entry '%s' has a short ZIP64 field", e->name);
                e->comp_size = rd64(p), p += 8, left -= 8;
            }
            if (need_off) {
                if (left < 8)
                    return bad(op, "entry '%s' has a short ZIP64 field", e->name);
                e->header_offset = rd64(p);
            }
            return CT_OK;
        }
        i += 4u + n;
    }
    if (need_size || need_csize || need_off)
        return bad(op, "entry '%s' needs a ZIP64 field but has none", e->name);
    return CT_OK;
}

static int cmp_offset(const void *a, const void *b) {
    const ct_zip_entry *x = *(const ct_zip_entry *const *)a, *y = *(const ct_zip_entry *const *)b;
    return x->header_offset < y->header_offset ? -1 : x->header_offset > y->header_offset;
}
static int cmp_name(const void *a, const void *b) {
    return strcmp((*(const ct_zip_entry *const *)a)->name, (*(const ct_zip_entry *const *)b)->name);
}

/* Overlaps and duplicate names, on a sorted array of pointers. */
static ct_status check_layout(ct_zip *z, uint64_t cd_off, const char *op) {
    if (z->count == 0)
        return CT_OK;
    ct_zip_entry **v = ct_xmalloc(op, (size_t)z->count * sizeof *v);
    if (!v)
        return CT_ERROR_OUT_OF_MEMORY;
    for (int64_t i = 0; i < z->count; i++)
        v[i] = &z->entries[i];
    ct_status st = CT_OK;
    qsort(v, (size_t)z->count, sizeof *v, cmp_offset);
    for (int64_t i = 0; i < z->count && st == CT_OK; i++) {
        uint64_t end = v[i]->data_offset + v[i]->comp_size;
        uint64_t next = i + 1 < z->count ? v[i + 1]->header_offset : cd_off;
        if (end > next)
            st = bad(op, "entry '%s' (bytes %llu-%llu) overlaps %s", v[i]->name,
                     (unsigned long long)v[i]->header_offset, (unsigned long long)end,
                     i + 1 < z->count ? "the next entry" : "the central directory");
    }
    qsort(v, (size_t)z->count, sizeof *v, cmp_name);
    for (int64_t i = 0; i + 1 < z->count && st == CT_OK; i++)
        if (strcmp(v[i]->name, v[i + 1]->name) == 0)
            st = bad(op, "the name '%s' appears twice", v[i]->name);
    z->by_name = v; /* kept for ct_zip_find's binary search */
    return st;
}

static ct_status parse_entries(ct_zip *z, uint64_t cd_off, uint64_t cd_size, uint64_t count, const char *op) {
    const uint8_t *b = z->buf;
    uint64_t pos = cd_off, cd_end = cd_off + cd_size;
    z->entries = ct_xcalloc(op, (size_t)(count ? count : 1), sizeof *z->entries);
    if (!z->entries)
        return CT_ERROR_OUT_OF_MEMORY;
    for (uint64_t i = 0; i < count; i++) {
        if (!in_range(pos, 46, cd_end) || rd32(b + pos) != SIG_CENTRAL)
            return bad(op, "central directory entry %llu is missing or truncated", (unsigned long long)i);
        const uint8_t *c = b + pos;
        uint16_t flags = rd16(c + 8), method = rd16(c + 10), nlen = rd16(c + 28), xlen = rd16(c + 30),
                 clen = rd16(c + 32), disk = rd16(c + 34);
        if (!in_range(pos + 46, (uint64_t)nlen + xlen + clen, cd_end))
            return bad(op, "central directory entry %llu runs past the directory", (unsigned long long)i);
        ct_zip_entry *e = &z->entries[i];
        e->name = ct_xmalloc(op, (size_t)nlen + 1);
        if (!e->name)
            return CT_ERROR_OUT_OF_MEMORY;
        z->count = (int64_t)i + 1; /* so close() frees this name */
        memcpy(e->name, c + 46, nlen);
        e->name[nlen] = '\0';
        if (strlen(e->name) != nlen)
            return bad(op, "entry %llu has a NUL byte in its name", (unsigned long long)i);
        e->method = method;
        e->crc32 = rd32(c + 16);
        e->comp_size = rd32(c + 20);
        e->size = rd32(c + 24);
        e->header_offset = rd32(c + 42);
        ct_status st = read_zip64_extra(c + 46 + nlen, xlen, e, e->size == 0xFFFFFFFFu,
                                        e->comp_size == 0xFFFFFFFFu, e->header_offset == 0xFFFFFFFFu, op);
        if (st)
            return st;
        if (flags & 1u)
            return bad(op, "entry '%s' is encrypted", e->name);
        if (disk != 0 && disk != 0xFFFF)
            return bad(op, "entry '%s' lies on another disk (multi-part archives are not supported)", e->name);
        if (method != 0 && method != 8)
            return bad(op, "entry '%s' uses compression method %u; only stored (0) and deflate (8) are supported",
                       e->name, method);
        /* Deflate expands at most 1032:1; a larger claim would only make us allocate. */
        if (method == 8 && e->size / 1032 > e->comp_size)
            return bad(op, "deflated entry '%s' claims %llu bytes from %llu compressed bytes, more than deflate can produce",
                       e->name, (unsigned long long)e->size, (unsigned long long)e->comp_size);
        if (method == 0 && e->comp_size != e->size)
            return bad(op, "stored entry '%s' has compressed size %llu but size %llu", e->name,
                       (unsigned long long)e->comp_size, (unsigned long long)e->size);
        /* The local header. */
        uint64_t h = e->header_offset;
        if (!in_range(h, 30, cd_off) || rd32(b + h) != SIG_LOCAL)
            return bad(op, "entry '%s' points to offset %llu, where there is no local header", e->name,
                       (unsigned long long)h);
        uint16_t lnlen = rd16(b + h + 26), lxlen = rd16(b + h + 28);
        if (!in_range(h + 30, (uint64_t)lnlen + lxlen, cd_off))
            return bad(op, "the local header of '%s' runs past the entries", e->name);
        if (lnlen != nlen || memcmp(b + h + 30, e->name, nlen) != 0)
            return bad(op, "the local header at offset %llu does not match the central entry '%s'",
                       (unsigned long long)h, e->name);
        if (rd16(b + h + 8) != method)
            return bad(op, "the local header of '%s' disagrees on the compression method", e->name);
        e->data_offset = h + 30 + lnlen + lxlen;
        if (!in_range(e->data_offset, e->comp_size, cd_off))
            return bad(op, "the data of '%s' (%llu bytes at offset %llu) runs past the end of the entries", e->name,
                       (unsigned long long)e->comp_size, (unsigned long long)e->data_offset);
        pos += 46u + nlen + xlen + clen;
    }
    return check_layout(z, cd_off, op);
}

ct_status ct_zip_open(ct_zip *z, const uint8_t *buf, size_t len, const char *op) {
    memset(z, 0, sizeof *z);
    z->buf = buf;
    z->len = len;
    if (len < 22)
        return bad(op, "the file is %zu bytes, too short for a zip archive (truncated?)", len);
    /* The end record sits in the last 22 + 65535 bytes (its comment is at most 64 KiB). */
    uint64_t eocd = UINT64_MAX;
    uint64_t lo = len - 22 > 65535 ? len - 22 - 65535 : 0;
    for (uint64_t p = len - 22 + 1; p-- > lo;)
        if (rd32(buf + p) == SIG_EOCD && p + 22 + rd16(buf + p + 20) <= len) {
            eocd = p;
            break;
        }
    if (eocd == UINT64_MAX)
        return bad(op, "no end-of-central-directory record (truncated or not a zip file)");
    const uint8_t *e = buf + eocd;
    if (rd16(e + 4) != 0 || rd16(e + 6) != 0)
        return bad(op, "multi-part archives are not supported");
    uint64_t count = rd16(e + 10), cd_size = rd32(e + 12), cd_off = rd32(e + 16);
    if (rd16(e + 8) != rd16(e + 10))
        return bad(op, "the end record's entry counts disagree (%u vs %u)", rd16(e + 8), rd16(e + 10));
    uint64_t dir_end = eocd; /* the directory must end before the end records */
    if (eocd >= 20 && rd32(buf + eocd - 20) == SIG_LOC64) {
        uint64_t r = rd64(buf + eocd - 20 + 8);
        if (!in_range(r, 56, eocd - 20) || rd32(buf + r) != SIG_EOCD64)
            return bad(op, "the ZIP64 end record pointer (offset %llu) is invalid", (unsigned long long)r);
        if (rd32(buf + r + 16) != 0 || rd32(buf + r + 20) != 0 || rd64(buf + r + 24) != rd64(buf + r + 32))
            return bad(op, "multi-part archives are not supported");
        count = rd64(buf + r + 32);
        cd_size = rd64(buf + r + 40);
        cd_off = rd64(buf + r + 48);
        dir_end = r;
    } else if (count == 0xFFFF || cd_size == 0xFFFFFFFFu || cd_off == 0xFFFFFFFFu) {
        return bad(op, "the end record needs ZIP64 values but there is no ZIP64 end record");
    }
    if (!in_range(cd_off, cd_size, dir_end))
        return bad(op, "the central directory (%llu bytes at offset %llu) lies outside the file (%zu bytes)",
                   (unsigned long long)cd_size, (unsigned long long)cd_off, len);
    if (count > cd_size / 46)
        return bad(op, "the end record claims %llu entries, more than a %llu-byte central directory can hold",
                   (unsigned long long)count, (unsigned long long)cd_size);
    ct_status st = parse_entries(z, cd_off, cd_size, count, op);
    if (st)
        ct_zip_close(z);
    return st;
}

void ct_zip_close(ct_zip *z) {
    if (z->entries)
        for (int64_t i = 0; i < z->count; i++)
            free(z->entries[i].name);
    free(z->entries);
    free(z->by_name);
    memset(z, 0, sizeof *z);
}

const ct_zip_entry *ct_zip_find(const ct_zip *z, const char *name) {
    int64_t lo = 0, hi = z->by_name ? z->count : 0;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        int c = strcmp(z->by_name[mid]->name, name);
        if (c == 0)
            return z->by_name[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

static uLong crc_update(uLong crc, const uint8_t *p, uint64_t n) {
    while (n > 0) {
        uInt k = n > (1u << 30) ? (1u << 30) : (uInt)n;
        crc = crc32(crc, p, k);
        p += k;
        n -= k;
    }
    return crc;
}

static ct_status inflate_entry(const ct_zip *z, const ct_zip_entry *e, uint8_t *out, const char *op) {
    z_stream s;
    memset(&s, 0, sizeof s);
    if (inflateInit2(&s, -MAX_WBITS) != Z_OK)
        return ct_error(CT_ERROR_OUT_OF_MEMORY, op, "zlib could not start inflating '%s'", e->name);
    const uint8_t *in = z->buf + e->data_offset;
    uint64_t in_left = e->comp_size, out_left = e->size;
    int rc = Z_OK;
    uint8_t spare; /* one byte past the end detects data longer than declared */
    s.next_out = out;
    while (rc == Z_OK) {
        if (s.avail_in == 0 && in_left > 0) {
            s.avail_in = in_left > (1u << 30) ? (1u << 30) : (uInt)in_left;
            s.next_in = (Bytef *)(uintptr_t)in;
            in += s.avail_in;
            in_left -= s.avail_in;
        }
        if (s.avail_out == 0) {
            if (out_left == 0) {
                s.next_out = &spare;
                s.avail_out = 1;
            } else {
                s.avail_out = out_left > (1u << 30) ? (1u << 30) : (uInt)out_left;
                out_left -= s.avail_out;
            }
        }
        uInt before_in = s.avail_in, before_out = s.avail_out;
        rc = inflate(&s, Z_NO_FLUSH);
        if (rc == Z_OK && s.avail_in == before_in && s.avail_out == before_out)
            rc = Z_BUF_ERROR; /* no progress: input ran out */
    }
    uint64_t produced = (uint64_t)s.total_out;
    inflateEnd(&s);
    if (rc != Z_STREAM_END || produced != e->size || in_left != 0 || s.avail_in != 0)
        return bad(op, "the compressed data of '%s' is corrupt or does not inflate to its %llu declared bytes",
                   e->name, (unsigned long long)e->size);
    return CT_OK;
}

ct_status ct_zip_extract(const ct_zip *z, const ct_zip_entry *e, void *out, const char *op) {
    if (e->method == 0) {
        if (e->size)
            memcpy(out, z->buf + e->data_offset, (size_t)e->size);
    } else {
        ct_status st = inflate_entry(z, e, out, op);
        if (st)
            return st;
    }
    uLong crc = crc_update(crc32(0L, Z_NULL, 0), out, e->size);
    if ((uint32_t)crc != e->crc32)
        return bad(op, "CRC-32 mismatch in '%s' (the file is corrupt)", e->name);
    return CT_OK;
}

/* ------------------------------------------------------------------ writer */

struct ct_zip_wentry {
    char *name;
    uint64_t header_offset, size;
    uint32_t crc32;
};

static void wr16(uint8_t *p, uint16_t v) {
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}
static void wr32(uint8_t *p, uint32_t v) {
    wr16(p, (uint16_t)v);
    wr16(p + 2, (uint16_t)(v >> 16));
}
static void wr64(uint8_t *p, uint64_t v) {
    wr32(p, (uint32_t)v);
    wr32(p + 4, (uint32_t)(v >> 32));
}

void ct_zip_writer_init(ct_zip_writer *w, FILE *f, const char *op) {
    memset(w, 0, sizeof *w);
    w->f = f;
    w->op = op;
}

static ct_status emit(ct_zip_writer *w, const void *p, size_t n) {
    if (w->failed)
        return CT_ERROR_IO;
    if (n && fwrite(p, 1, n, w->f) != n) {
        w->failed = true;
        return ct_error(CT_ERROR_IO, w->op, "write failed after %llu bytes (disk full?)",
                        (unsigned long long)w->offset);
    }
    w->offset += n;
    return CT_OK;
}

#define DOS_DATE_1980 0x21 /* 1980-01-01: entries carry no meaningful time */

ct_status ct_zip_write_entry(ct_zip_writer *w, const char *name, const void *data, uint64_t size) {
    if (w->failed)
        return CT_ERROR_IO;
    size_t nlen = strlen(name);
    if (nlen > 0xFFFF)
        return ct_error(CT_ERROR_VALUE, w->op, "record name too long");
    if (w->count == w->cap) {
        int64_t cap = w->cap ? w->cap * 2 : 16;
        struct ct_zip_wentry *n = realloc(w->entries, (size_t)cap * sizeof *n);
        if (!n)
            return ct_error(CT_ERROR_OUT_OF_MEMORY, w->op, "out of memory");
        w->entries = n;
        w->cap = cap;
    }
    struct ct_zip_wentry *e = &w->entries[w->count];
    e->name = ct_xmalloc(w->op, nlen + 1);
    if (!e->name)
        return CT_ERROR_OUT_OF_MEMORY;
    memcpy(e->name, name, nlen + 1);
    w->count++;
    e->header_offset = w->offset;
    e->size = size;
    e->crc32 = (uint32_t)crc_update(crc32(0L, Z_NULL, 0), data, size);

    bool big_size = w->force_zip64 || size >= 0xFFFFFFFFu;
    bool big_off = w->force_zip64 || e->header_offset >= 0xFFFFFFFFu;
    uint8_t h[30 + 4 + 24 + 4];
    memset(h, 0, sizeof h);
    wr32(h, SIG_LOCAL);
    wr16(h + 4, big_size || big_off ? 45 : 20);
    wr16(h + 6, 0x0808); /* data descriptor follows; UTF-8 names */
    wr16(h + 8, 0);
    wr16(h + 12, DOS_DATE_1980);
    /* crc and sizes stay zero here: the data descriptor carries them. */
    if (big_size) {
        wr32(h + 18, 0xFFFFFFFFu);
        wr32(h + 22, 0xFFFFFFFFu);
    }
    size_t xlen = 0;
    uint8_t x[4 + 24];
    if (big_size || big_off) {
        size_t n = 0;
        if (big_size) {
            wr64(x + 4 + n, size);
            wr64(x + 4 + n + 8, size);
            n += 16;
        }
        if (big_off) {
            wr64(x + 4 + n, e->header_offset);
            n += 8;
        }
        wr16(x, 0x0001);
        wr16(x + 2, (uint16_t)n);
        xlen = 4 + n;
    }
    /* Note [Payload alignment]: torch.save pads with an extra field 'FB' of 'Z' bytes
     * so that every payload starts on a 64-byte boundary (readers may map it). */
    uint64_t start = e->header_offset + 30 + nlen + xlen + 4;
    size_t pad = (size_t)((CT_ZIP_ALIGNMENT - start % CT_ZIP_ALIGNMENT) % CT_ZIP_ALIGNMENT);
    wr16(h + 26, (uint16_t)nlen);
    wr16(h + 28, (uint16_t)(xlen + 4 + pad));
    uint8_t fb[4 + CT_ZIP_ALIGNMENT];
    fb[0] = 'F';
    fb[1] = 'B';
    wr16(fb + 2, (uint16_t)pad);
    memset(fb + 4, 'Z', pad);
    if (emit(w, h, 30) || emit(w, name, nlen) || emit(w, x, xlen) || emit(w, fb, 4 + pad) || emit(w, data, (size_t)size))
        return CT_ERROR_IO;
    uint8_t d[24];
    wr32(d, SIG_DESC);
    wr32(d + 4, e->crc32);
    if (big_size) {
        wr64(d + 8, size);
        wr64(d + 16, size);
        return emit(w, d, 24);
    }
    wr32(d + 8, (uint32_t)size);
    wr32(d + 12, (uint32_t)size);
    return emit(w, d, 16);
}

static void free_wentries(ct_zip_writer *w) {
    for (int64_t i = 0; i < w->count; i++)
        free(w->entries[i].name);
    free(w->entries);
    w->entries = NULL;
    w->count = w->cap = 0;
}

void ct_zip_writer_discard(ct_zip_writer *w) { free_wentries(w); }

ct_status ct_zip_writer_finish(ct_zip_writer *w) {
    uint64_t cd_off = w->offset;
    for (int64_t i = 0; i < w->count && !w->failed; i++) {
        struct ct_zip_wentry *e = &w->entries[i];
        bool big_size = w->force_zip64 || e->size >= 0xFFFFFFFFu;
        bool big_off = w->force_zip64 || e->header_offset >= 0xFFFFFFFFu;
        size_t nlen = strlen(e->name);
        uint8_t c[46], x[4 + 24];
        memset(c, 0, sizeof c);
        wr32(c, SIG_CENTRAL);
        wr16(c + 4, 0x0300 | 45); /* made by: Unix, zip 4.5 */
        wr16(c + 6, big_size || big_off ? 45 : 20);
        wr16(c + 8, 0x0808);
        wr16(c + 14, DOS_DATE_1980);
        wr32(c + 16, e->crc32);
        wr32(c + 20, big_size ? 0xFFFFFFFFu : (uint32_t)e->size);
        wr32(c + 24, big_size ? 0xFFFFFFFFu : (uint32_t)e->size);
        wr16(c + 28, (uint16_t)nlen);
        wr32(c + 38, 0644u << 16);
        wr32(c + 42, big_off ? 0xFFFFFFFFu : (uint32_t)e->header_offset);
        size_t n = 0;
        if (big_size) {
            wr64(x + 4, e->size);
            wr64(x + 12, e->size);
            n = 16;
        }
        if (big_off) {
            wr64(x + 4 + n, e->header_offset);
            n += 8;
        }
        size_t xlen = n ? 4 + n : 0;
        if (n) {
            wr16(x, 0x0001);
            wr16(x + 2, (uint16_t)n);
        }
        wr16(c + 30, (uint16_t)xlen);
        if (emit(w, c, 46) || emit(w, e->name, nlen) || emit(w, x, xlen))
            break;
    }
    uint64_t cd_size = w->offset - cd_off;
    bool z64 = w->force_zip64 || w->count >= 0xFFFF || cd_off >= 0xFFFFFFFFu || cd_size >= 0xFFFFFFFFu;
    if (z64 && !w->failed) {
        uint8_t r[56 + 20];
        memset(r, 0, sizeof r);
        uint64_t r_off = w->offset;
        wr32(r, SIG_EOCD64);
        wr64(r + 4, 44);
        wr16(r + 12, 0x0300 | 45);
        wr16(r + 14, 45);
        wr64(r + 24, (uint64_t)w->count);
        wr64(r + 32, (uint64_t)w->count);
        wr64(r + 40, cd_size);
        wr64(r + 48, cd_off);
        wr32(r + 56, SIG_LOC64);
        wr64(r + 56 + 8, r_off);
        wr32(r + 56 + 16, 1);
        emit(w, r, sizeof r);
    }
    uint8_t eocd[22];
    memset(eocd, 0, sizeof eocd);
    wr32(eocd, SIG_EOCD);
    uint16_t n16 = w->count >= 0xFFFF ? 0xFFFF : (uint16_t)w->count;
    wr16(eocd + 8, n16);
    wr16(eocd + 10, n16);
    wr32(eocd + 12, cd_size >= 0xFFFFFFFFu ? 0xFFFFFFFFu : (uint32_t)cd_size);
    wr32(eocd + 16, cd_off >= 0xFFFFFFFFu ? 0xFFFFFFFFu : (uint32_t)cd_off);
    emit(w, eocd, sizeof eocd);
    bool failed = w->failed;
    free_wentries(w);
    return failed ? CT_ERROR_IO : CT_OK;
}
