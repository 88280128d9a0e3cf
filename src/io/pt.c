/* PyTorch .pt checkpoints: torch.save's zip archive around a protocol-2 pickle.
 * The container facts are in specs/formats.md §2; the decisions in
 * docs/serialization.md. */
#include "pt.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "ctorch/ext.h"
#include "pickle.h"
#include "zip.h"

#define OP_LOAD "load_pt"
#define OP_SAVE "save_pt"

/* The oldest format PyTorch's weights-only loading could read is the zip one (1.6+). */
static const uint8_t legacy_magic[] = {0x80, 0x02, 0x8a, 0x0a, 0x6c, 0xfc, 0x9c, 0x46,
                                       0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19};

bool ct_pt_sniff(const uint8_t *buf, size_t len) { return buf && len >= 4 && memcmp(buf, "PK\x03\x04", 4) == 0; }

static bool host_little_endian(void) {
    uint16_t x = 1;
    uint8_t b;
    memcpy(&b, &x, 1);
    return b == 1;
}

/* Gives the last error, when it is function's, to op instead: the pickle reader's and
 * writer's messages appear under the loader's and saver's names. */
static void rename_error(const char *function, const char *op) {
    const char *msg = ct_last_error();
    size_t n = strlen(function);
    if (strncmp(msg, function, n) == 0 && msg[n] == ':' && msg[n + 1] == ' ') {
        char copy[1024];
        snprintf(copy, sizeof copy, "%s", msg + n + 2);
        ct_error(ct_last_status(), op, "%s", copy);
    }
}

/* A storage record read so far (Note [Storages as tensors] in pickle.h). */
typedef struct cached_storage {
    char *key;
    size_t nbytes;
    ct_tensor *base;   /* of the storage's dtype, or uint8 when untyped (a reference of the loader's) */
    ct_tensor **others; /* bases of other dtypes over the same bytes, made on demand */
    int nothers;
} cached_storage;

typedef struct loader {
    ct_zip z;
    char root[256];
    bool swap; /* the file's byte order differs from the host's */
    cached_storage *cache;
    int64_t ncache, capcache;
    int64_t *slots; /* open addressing over cache: position + 1, 0 = empty */
    int64_t nslots;
} loader;

static uint64_t hash_key(const char *k) {
    uint64_t h = 1469598103934665603ull;
    for (; *k; k++)
        h = (h ^ (uint8_t)*k) * 1099511628211ull;
    return h;
}

/* Slot of key: where it is, or the empty slot where it would go. */
static int64_t find_slot(const loader *l, const char *key) {
    int64_t i = (int64_t)(hash_key(key) & (uint64_t)(l->nslots - 1));
    while (l->slots[i] && strcmp(l->cache[l->slots[i] - 1].key, key) != 0)
        i = (i + 1) & (l->nslots - 1);
    return i;
}

/* Keeps the table at most half full. */
static bool grow_slots(loader *l) {
    if (l->nslots >= 2 * (l->ncache + 1))
        return true;
    int64_t n = l->nslots ? l->nslots * 2 : 64;
    int64_t *s = calloc((size_t)n, sizeof *s);
    if (!s)
        return false;
    free(l->slots);
    l->slots = s;
    l->nslots = n;
    for (int64_t i = 0; i < l->ncache; i++)
        l->slots[find_slot(l, l->cache[i].key)] = i + 1;
    return true;
}

static const ct_zip_entry *find_record(const loader *l, const char *name) {
    char full[512];
    if ((size_t)snprintf(full, sizeof full, "%s/%s", l->root, name) >= sizeof full)
        return NULL;
    return ct_zip_find(&l->z, full);
}

/* Reads a small text record (version, byteorder) into buf, NUL-terminated. */
static ct_status read_small(const loader *l, const ct_zip_entry *e, char *buf, size_t cap) {
    if (e->size >= cap)
        return ct_error(CT_ERROR_FORMAT, OP_LOAD, "record '%s' is %llu bytes, expected a few", e->name,
                        (unsigned long long)e->size);
    ct_status st = ct_zip_extract(&l->z, e, buf, OP_LOAD);
    if (st)
        return st;
    buf[e->size] = '\0';
    size_t n = (size_t)e->size;
    while (n && (buf[n - 1] == '\n' || buf[n - 1] == '\r' || buf[n - 1] == ' '))
        buf[--n] = '\0';
    return CT_OK;
}

static void byteswap(uint8_t *p, size_t nbytes, size_t esz) {
    for (size_t i = 0; i + esz <= nbytes; i += esz)
        for (size_t a = 0, b = esz - 1; a < b; a++, b--) {
            uint8_t t = p[i + a];
            p[i + a] = p[i + b];
            p[i + b] = t;
        }
}

static int64_t load_storage(void *ctx, size_t pos, const char *key, ct_dtype dtype, int64_t numel,
                            const char *location) {
    loader *l = ctx;
    size_t esz = dtype == CT_DTYPE_UNDEFINED ? 1 : ct_dtype_size(dtype);
    if ((uint64_t)numel > (uint64_t)INT64_MAX / esz || (uint64_t)numel > SIZE_MAX / esz) {
        ct_error(CT_ERROR_FORMAT, OP_LOAD, "data.pkl offset %zu: storage '%s' of %lld elements overflows", pos, key,
                 (long long)numel);
        return -1;
    }
    size_t nbytes = (size_t)numel * esz;
    if (!grow_slots(l)) {
        ct_error(CT_ERROR_OUT_OF_MEMORY, OP_LOAD, "out of memory");
        return -1;
    }
    int64_t slot = find_slot(l, key);
    if (l->slots[slot]) {
        const cached_storage *c = &l->cache[l->slots[slot] - 1];
        if (c->nbytes != nbytes) {
            ct_error(CT_ERROR_FORMAT, OP_LOAD,
                     "data.pkl offset %zu: storage '%s' is referenced with %zu bytes, earlier with %zu", pos, key,
                     nbytes, c->nbytes);
            return -1;
        }
        return l->slots[slot] - 1;
    }
    if (strcmp(location, "cpu") != 0 && strncmp(location, "cuda", 4) != 0) {
        ct_error(CT_ERROR_NOT_IMPLEMENTED, OP_LOAD,
                 "data.pkl offset %zu: storage location '%.40s' is not supported (cpu and cuda storages load on the CPU)",
                 pos, location);
        return -1;
    }
    size_t klen = strlen(key);
    bool key_ok = klen > 0 && klen < 64;
    for (size_t i = 0; i < klen; i++)
        if (!((key[i] >= '0' && key[i] <= '9') || (key[i] >= 'a' && key[i] <= 'z') ||
              (key[i] >= 'A' && key[i] <= 'Z') || key[i] == '_'))
            key_ok = false;
    if (!key_ok) {
        ct_error(CT_ERROR_FORMAT, OP_LOAD, "data.pkl offset %zu: invalid storage key (letters, digits and _ only)",
                 pos);
        return -1;
    }
    if (l->swap && dtype == CT_DTYPE_UNDEFINED) {
        ct_error(CT_ERROR_NOT_IMPLEMENTED, OP_LOAD,
                 "data.pkl offset %zu: untyped storages in a big-endian file are not supported", pos);
        return -1;
    }
    char rec[80];
    snprintf(rec, sizeof rec, "data/%s", key);
    const ct_zip_entry *e = find_record(l, rec);
    if (!e) {
        ct_error(CT_ERROR_FORMAT, OP_LOAD, "data.pkl offset %zu: storage record '%s/%s' is missing", pos, l->root,
                 rec);
        return -1;
    }
    if (e->size != nbytes) {
        ct_error(CT_ERROR_FORMAT, OP_LOAD,
                 "data.pkl offset %zu: storage '%s' needs %zu bytes (%lld elements of %zu bytes) but its record holds %llu",
                 pos, key, nbytes, (long long)numel, esz, (unsigned long long)e->size);
        return -1;
    }
    if (l->ncache == l->capcache) {
        int64_t cap = l->capcache ? l->capcache * 2 : 16;
        cached_storage *n = realloc(l->cache, (size_t)cap * sizeof *n);
        if (!n) {
            ct_error(CT_ERROR_OUT_OF_MEMORY, OP_LOAD, "out of memory");
            return -1;
        }
        l->cache = n;
        l->capcache = cap;
    }
    ct_scope_begin();
    ct_tensor *base = ct_empty((int64_t[]){numel}, 1, dtype == CT_DTYPE_UNDEFINED ? CT_U8 : dtype, CT_CPU);
    if (base)
        base = ct_retain(base);
    ct_scope_end();
    if (!base) {
        if (ct_last_status() == CT_OK)
            ct_error(CT_ERROR_OUT_OF_MEMORY, OP_LOAD, "could not allocate %zu bytes for storage '%s'", nbytes, key);
        return -1;
    }
    if (nbytes && ct_zip_extract(&l->z, e, ct_tensor_data(base), OP_LOAD)) {
        ct_release(base);
        return -1;
    }
    if (l->swap && esz > 1)
        byteswap(ct_tensor_data(base), nbytes, esz);
    char *k = malloc(klen + 1);
    if (!k) {
        ct_release(base);
        ct_error(CT_ERROR_OUT_OF_MEMORY, OP_LOAD, "out of memory");
        return -1;
    }
    memcpy(k, key, klen + 1);
    l->cache[l->ncache] = (cached_storage){.key = k, .nbytes = nbytes, .base = base};
    l->slots[slot] = ++l->ncache;
    return l->ncache - 1;
}

static void release_base(void *ctx, void *data) {
    (void)data;
    ct_release(ctx);
}

/* The record's base of dtype: its own, or one of another dtype over its bytes (an
 * untyped storage read by a tensor of that dtype). */
static ct_tensor *storage_base(void *ctx, int64_t handle, ct_dtype dtype) {
    loader *l = ctx;
    cached_storage *c = &l->cache[handle];
    if (ct_tensor_dtype(c->base) == dtype)
        return c->base;
    for (int i = 0; i < c->nothers; i++)
        if (ct_tensor_dtype(c->others[i]) == dtype)
            return c->others[i];
    ct_tensor **others = ct_xrealloc(OP_LOAD, c->others, (size_t)(c->nothers + 1) * sizeof *others);
    if (!others)
        return NULL;
    c->others = others;
    /* ct_from_blob over the base's bytes; the new base holds a reference to the
     * record's base, which its deleter drops (a failed call never runs the deleter). */
    ct_scope_begin();
    ct_tensor *v = ct_from_blob(ct_tensor_data(c->base), (int64_t[]){(int64_t)(c->nbytes / ct_dtype_size(dtype))},
                                NULL, 1, dtype, release_base, ct_retain(c->base));
    if (v)
        v = ct_retain(v);
    else
        ct_release(c->base);
    ct_scope_end();
    if (v)
        c->others[c->nothers++] = v;
    return v;
}



/* The hooks' tensor: Note [Storages as tensors] in pickle.h, a tensor of its own over
 * the base's storage. */
static ct_tensor *storage_tensor(void *ctx, int64_t handle, ct_dtype dtype, const int64_t *shape,
                                 const int64_t *stride, int ndim, int64_t offset) {
    ct_tensor *base = storage_base(ctx, handle, dtype);
    return base ? ct_detach(ct_as_strided(base, shape, stride, ndim, offset)) : NULL;
}

static void loader_free(loader *l) {
    for (int64_t i = 0; i < l->ncache; i++) {
        free(l->cache[i].key);
        for (int j = 0; j < l->cache[i].nothers; j++)
            ct_release(l->cache[i].others[j]);
        free(l->cache[i].others);
        ct_release(l->cache[i].base);
    }
    free(l->cache);
    free(l->slots);
    ct_zip_close(&l->z);
}

static ct_value *load_zip(loader *l, const uint8_t *buf, size_t len) {
    if (ct_zip_open(&l->z, buf, len, OP_LOAD))
        return NULL;
    if (l->z.count == 0) {
        ct_error(CT_ERROR_FORMAT, OP_LOAD, "the zip archive is empty");
        return NULL;
    }
    /* The archive root folder is the text before the first '/' of the first entry. */
    const char *first = l->z.entries[0].name;
    const char *slash = strchr(first, '/');
    if (!slash || slash == first || (size_t)(slash - first) >= sizeof l->root) {
        ct_error(CT_ERROR_FORMAT, OP_LOAD, "file in archive is not in a subdirectory: %.100s", first);
        return NULL;
    }
    memcpy(l->root, first, (size_t)(slash - first));
    l->root[slash - first] = '\0';

    char text[64];
    const ct_zip_entry *ver = find_record(l, ".data/version");
    if (!ver)
        ver = find_record(l, "version");
    if (!ver) {
        ct_error(CT_ERROR_FORMAT, OP_LOAD, "the archive has no '%s/version' record; it is not a torch.save file",
                 l->root);
        return NULL;
    }
    if (read_small(l, ver, text, sizeof text))
        return NULL;
    char *end;
    long version = strtol(text, &end, 10);
    if (end == text || *end || version < 1 || version > 6) {
        ct_error(CT_ERROR_FORMAT, OP_LOAD,
                 "unsupported file format version '%.20s' (this reader supports 1 to 6; a newer PyTorch wrote it?)",
                 text);
        return NULL;
    }
    const ct_zip_entry *bo = find_record(l, "byteorder");
    bool file_little = true;
    if (bo) {
        if (read_small(l, bo, text, sizeof text))
            return NULL;
        if (strcmp(text, "big") == 0)
            file_little = false;
        else if (strcmp(text, "little") != 0) {
            ct_error(CT_ERROR_FORMAT, OP_LOAD, "byteorder record says '%.20s', expected 'little' or 'big'", text);
            return NULL;
        }
    }
    l->swap = file_little != host_little_endian();

    const ct_zip_entry *pk = find_record(l, "data.pkl");
    if (!pk) {
        ct_error(CT_ERROR_FORMAT, OP_LOAD, "the archive has no '%s/data.pkl' record", l->root);
        return NULL;
    }
    uint8_t *pkl = ct_xmalloc(OP_LOAD, (size_t)pk->size);
    if (!pkl)
        return NULL;
    ct_value *v = NULL;
    if (!ct_zip_extract(&l->z, pk, pkl, OP_LOAD)) {
        ct_pickle_hooks hooks = {l, load_storage, storage_tensor};
        v = ct_value_from_pickle(pkl, (size_t)pk->size, &hooks, "data.pkl");
        if (!v)
            rename_error("value_from_pickle", OP_LOAD);
    }
    free(pkl);
    return v;
}

ct_value *ct_pt_load_buffer(const uint8_t *buf, size_t len, const char *name) {
    if (!buf) {
        ct_error_null(OP_LOAD);
        return NULL;
    }
    const char *who = name ? name : "the buffer";
    if (!ct_pt_sniff(buf, len)) {
        if (len >= sizeof legacy_magic && memcmp(buf, legacy_magic, sizeof legacy_magic) == 0)
            ct_error(CT_ERROR_NOT_IMPLEMENTED, OP_LOAD,
                     "%s uses the legacy torch.save format (PyTorch < 1.6), which is not supported; load it in "
                     "PyTorch and save it again with torch.save (zip format, the default since 1.6)",
                     who);
        else if (len >= 262 && memcmp(buf + 257, "ustar", 5) == 0)
            ct_error(CT_ERROR_NOT_IMPLEMENTED, OP_LOAD,
                     "%s is a tar archive (the torch.save format of PyTorch < 0.4), which is not supported; load it "
                     "in PyTorch and save it again with torch.save",
                     who);
        else
            ct_error(CT_ERROR_FORMAT, OP_LOAD, "%s is not a torch.save zip archive (it does not start with PK\\3\\4)",
                     who);
        return NULL;
    }
    loader l;
    memset(&l, 0, sizeof l);
    ct_value *v = load_zip(&l, buf, len);
    loader_free(&l);
    return v;
}

ct_value *ct_load_pt(const char *path) {
    if (!path) {
        ct_error(CT_ERROR_NULL_ARGUMENT, OP_LOAD, "path is NULL");
        return NULL;
    }
    int fd = open(path, O_RDONLY);
    if (fd < 0) {
        ct_error(CT_ERROR_IO, OP_LOAD, "cannot open '%s': %s", path, strerror(errno));
        return NULL;
    }
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        ct_error(CT_ERROR_IO, OP_LOAD, "cannot read '%s': not a regular file", path);
        return NULL;
    }
    /* Mapped read-only: storages are copied out of it, so the mapping ends here. */
    size_t len = (size_t)sb.st_size;
    void *map = len ? mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0) : NULL;
    close(fd);
    if (len && map == MAP_FAILED) {
        ct_error(CT_ERROR_IO, OP_LOAD, "cannot map '%s': %s", path, strerror(errno));
        return NULL;
    }
    static const uint8_t empty[1];
    ct_value *v = ct_pt_load_buffer(len ? map : empty, len, path);
    if (len)
        munmap(map, len);
    return v;
}

/* ------------------------------------------------------------------ saving */

/* The archive's root folder: the file's basename without its extension, as
 * PyTorchStreamWriter names it ("archive" when that is empty). */
static void archive_root(const char *path, char *out, size_t cap) {
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    size_t n = strlen(base);
    const char *dot = strrchr(base, '.');
    if (dot && dot != base)
        n = (size_t)(dot - base);
    if (n == 0 || n >= cap) {
        snprintf(out, cap, "archive");
        return;
    }
    memcpy(out, base, n);
    out[n] = '\0';
}

static ct_status write_records(ct_zip_writer *w, const char *root, const ct_pickler *p) {
    char name[512];
    uint64_t names_hash = 1469598103934665603ull; /* FNV-1a over the record names */
    uLong crc = crc32(0L, Z_NULL, 0);
#define REC(rel, data, size)                                                   \
    do {                                                                       \
        snprintf(name, sizeof name, "%s/%s", root, rel);                       \
        for (const char *c = name; *c; c++)                                    \
            names_hash = (names_hash ^ (uint8_t)*c) * 1099511628211ull;        \
        crc = crc32(crc, (const Bytef *)(data), (uInt)((size) < 4096 ? (size) : 4096)); \
        if (ct_zip_write_entry(w, name, (data), (size)))                       \
            return ct_last_status();                                           \
    } while (0)
    REC("data.pkl", p->buf, p->len);
    REC(".format_version", "1", 1);
    REC(".storage_alignment", "64", 2);
    const char *order = host_little_endian() ? "little" : "big";
    REC("byteorder", order, strlen(order));
    for (int64_t i = 0; i < p->nstorages; i++) {
        char rel[40];
        snprintf(rel, sizeof rel, "data/%lld", (long long)i);
        REC(rel, p->storages[i].data, p->storages[i].nbytes);
    }
    REC("version", "3\n", 2);
    /* Readers do not check this id; it only has to look like torch's 40 digits. */
    char id[48];
    snprintf(id, sizeof id, "%020llu%020llu", (unsigned long long)(names_hash % 10000000000000000000ull),
             (unsigned long long)crc);
    REC(".data/serialization_id", id, 40);
#undef REC
    return CT_OK;
}

ct_status ct_pt_save_impl(const char *path, const ct_value *obj, bool force_zip64) {
    if (!path || !obj)
        return ct_error(CT_ERROR_NULL_ARGUMENT, OP_SAVE, "%s is NULL", path ? "obj" : "path");
    ct_pickler p;
    if (ct_pickle_dump(&p, obj, OP_SAVE)) {
        rename_error("value_to_pickle", OP_SAVE);
        ct_pickler_free(&p);
        return ct_last_status();
    }
    /* Written beside the target and renamed over it, so that a failure never leaves a
     * half-written checkpoint under the real name. */
    static _Atomic unsigned counter;
    size_t plen = strlen(path);
    char *tmp = ct_xmalloc(OP_SAVE, plen + 48);
    if (!tmp) {
        ct_pickler_free(&p);
        return CT_ERROR_OUT_OF_MEMORY;
    }
    snprintf(tmp, plen + 48, "%s.tmp%ld.%u", path, (long)getpid(), counter++);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_TRUNC, 0666);
    FILE *f = fd >= 0 ? fdopen(fd, "wb") : NULL;
    if (!f) {
        ct_status st = ct_error(CT_ERROR_IO, OP_SAVE, "cannot create '%s' (writing '%s' there first): %s", path, tmp,
                                strerror(errno));
        if (fd >= 0) {
            close(fd);
            unlink(tmp);
        }
        free(tmp);
        ct_pickler_free(&p);
        return st;
    }
    char root[256];
    archive_root(path, root, sizeof root);
    ct_zip_writer w;
    ct_zip_writer_init(&w, f, OP_SAVE);
    w.force_zip64 = force_zip64;
    ct_status st = write_records(&w, root, &p);
    if (st)
        ct_zip_writer_discard(&w);
    else
        st = ct_zip_writer_finish(&w);
    if (fclose(f) != 0 && !st)
        st = ct_error(CT_ERROR_IO, OP_SAVE, "cannot write '%s': %s", path, strerror(errno));
    if (!st && rename(tmp, path) != 0)
        st = ct_error(CT_ERROR_IO, OP_SAVE, "cannot write '%s': %s", path, strerror(errno));
    if (st)
        unlink(tmp);
    free(tmp);
    ct_pickler_free(&p);
    return st;
}

ct_status ct_save_pt(const char *path, const ct_value *obj) { return ct_pt_save_impl(path, obj, false); }
