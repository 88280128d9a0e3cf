/* IDX reader (valid, truncated, corrupted files), datasets, the DataLoader (order,
 * shuffling, workers, errors, shutdown), and the character dataset. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "testutil.h"
#include "ctorch/data.h"
#include "error.h"

static char tmpdir[256];

static int make_tmpdir(void **state) {
    (void)state;
    snprintf(tmpdir, sizeof tmpdir, "/tmp/ct_test_data_XXXXXX");
    return mkdtemp(tmpdir) ? 0 : -1;
}

static int remove_tmpdir(void **state) {
    (void)state;
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
    return system(cmd) == 0 ? 0 : -1;
}

static const char *tmp_path(const char *name) {
    static char buf[4][512];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/%s", tmpdir, name);
    return buf[k];
}

static void write_file(const char *path, const unsigned char *data, size_t n, bool gz) {
    if (gz) {
        gzFile f = gzopen(path, "wb");
        assert_non_null(f);
        if (n)
            assert_int_equal(gzwrite(f, data, (unsigned)n), (int)n);
        assert_int_equal(gzclose(f), Z_OK);
    } else {
        FILE *f = fopen(path, "wb");
        assert_non_null(f);
        if (n)
            assert_int_equal(fwrite(data, 1, n, f), n);
        fclose(f);
    }
}

static unsigned char *read_file(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc((size_t)len + 1);
    assert_int_equal(fread(b, 1, (size_t)len, f), (size_t)len);
    fclose(f);
    *n = (size_t)len;
    return b;
}

/* An IDX header into h; returns its length. */
static size_t idx_header(unsigned char *h, int code, int ndim, const uint32_t *dims) {
    h[0] = h[1] = 0;
    h[2] = (unsigned char)code;
    h[3] = (unsigned char)ndim;
    for (int d = 0; d < ndim; d++) {
        h[4 + 4 * d] = (unsigned char)(dims[d] >> 24);
        h[5 + 4 * d] = (unsigned char)(dims[d] >> 16);
        h[6 + 4 * d] = (unsigned char)(dims[d] >> 8);
        h[7 + 4 * d] = (unsigned char)dims[d];
    }
    return 4 + 4 * (size_t)ndim;
}

/* A small uint8 image file: 3 images of 4x5, pixel = 7 * flat index mod 256. */
static size_t sample_images(unsigned char *buf) {
    size_t h = idx_header(buf, 0x08, 3, (const uint32_t[]){3, 4, 5});
    for (int i = 0; i < 60; i++)
        buf[h + (size_t)i] = (unsigned char)(7 * i);
    return h + 60;
}

static void test_idx_uint8_plain_and_gzip(void **state) {
    (void)state;
    unsigned char buf[256];
    size_t n = sample_images(buf);
    for (int gz = 0; gz <= 1; gz++) {
        const char *p = tmp_path(gz ? "img.gz" : "img");
        write_file(p, buf, n, gz);
        ct_tensor *t = ct_idx_load(p);
        CT_ASSERT_OK(t);
        CT_ASSERT_SHAPE(t, 3, 4, 5);
        assert_int_equal(ct_tensor_dtype(t), CT_U8);
        for (int i = 0; i < 60; i++)
            assert_true(ct_test_at(t, i) == (double)((7 * i) & 255));
        ct_release(t);
    }
}

/* Multi-byte dtypes are big-endian in the file. */
static void test_idx_dtypes_big_endian(void **state) {
    (void)state;
    unsigned char buf[256];
    struct {
        int code;
        ct_dtype dtype;
        size_t esize;
    } cases[] = {{0x09, CT_I8, 1}, {0x0B, CT_I16, 2}, {0x0C, CT_I32, 4}, {0x0D, CT_F32, 4}, {0x0E, CT_F64, 8}};
    const double vals[3] = {-2, 5, 100};
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        size_t h = idx_header(buf, cases[c].code, 1, (const uint32_t[]){3});
        for (int i = 0; i < 3; i++) {
            unsigned char le[8] = {0};
            if (cases[c].dtype == CT_I8) {
                int8_t v = (int8_t)vals[i];
                memcpy(le, &v, 1);
            } else if (cases[c].dtype == CT_I16) {
                int16_t v = (int16_t)vals[i];
                memcpy(le, &v, 2);
            } else if (cases[c].dtype == CT_I32) {
                int32_t v = (int32_t)vals[i];
                memcpy(le, &v, 4);
            } else if (cases[c].dtype == CT_F32) {
                float v = (float)vals[i];
                memcpy(le, &v, 4);
            } else {
                double v = vals[i];
                memcpy(le, &v, 8);
            }
            for (size_t b = 0; b < cases[c].esize; b++) /* host is little-endian on the CI machines */
                buf[h + (size_t)i * cases[c].esize + b] = le[cases[c].esize - 1 - b];
        }
        const char *p = tmp_path("typed");
        write_file(p, buf, h + 3 * cases[c].esize, false);
        ct_tensor *t = ct_idx_load(p);
        CT_ASSERT_OK(t);
        assert_int_equal(ct_tensor_dtype(t), cases[c].dtype);
        for (int i = 0; i < 3; i++)
            assert_true(ct_test_at(t, i) == vals[i]);
        ct_release(t);
    }
}

static void expect_format_error(const unsigned char *data, size_t n, bool gz, const char *needle) {
    const char *p = tmp_path("bad");
    write_file(p, data, n, gz);
    ct_tensor *t = ct_idx_load(p);
    CT_ASSERT_ERR(t != NULL, CT_ERROR_FORMAT, needle);
}

static void test_idx_malformed(void **state) {
    (void)state;
    unsigned char buf[256];
    size_t n = sample_images(buf);
    for (int gz = 0; gz <= 1; gz++) {
        unsigned char b[256];
        memcpy(b, buf, n);
        b[1] = 1;
        expect_format_error(b, n, gz, "bad magic");
        memcpy(b, buf, n);
        b[2] = 0x0A;
        expect_format_error(b, n, gz, "unknown IDX element type 0x0a");
        memcpy(b, buf, n);
        b[3] = 0;
        expect_format_error(b, n, gz, "0 dimensions");
        b[3] = 9;
        expect_format_error(b, n, gz, "9 dimensions");
        expect_format_error(buf, 3, gz, "truncated header");
        expect_format_error(buf, 10, gz, "truncated header");
        expect_format_error(buf, n - 1, gz, "needs 60 bytes of data, the file has 59");
        memcpy(b, buf, n);
        b[n] = 1;
        expect_format_error(b, n + 1, gz, "size mismatch");
        /* huge claimed sizes: refused without a huge allocation */
        size_t h = idx_header(b, 0x08, 1, (const uint32_t[]){0xFFFFFFFFu});
        expect_format_error(b, h + 10, gz, "needs 4294967295 bytes of data, the file has 10");
        h = idx_header(b, 0x0E, 4, (const uint32_t[]){0xFFFFFFFFu, 0xFFFFFFFFu, 0xFFFFFFFFu, 2});
        expect_format_error(b, h, gz, "overflow");
    }
    /* an empty file */
    expect_format_error(buf, 0, false, "truncated header");
    /* a missing file */
    CT_ASSERT_ERR(ct_idx_load(tmp_path("nope")) != NULL, CT_ERROR_IO, "cannot open");
    CT_ASSERT_ERR(ct_idx_load(NULL) != NULL, CT_ERROR_NULL_ARGUMENT, "path");
}

/* Every prefix of a valid file (plain and compressed) fails cleanly, and seeded
 * random corruptions either load a tensor of the right size or fail with an error. */
static void test_idx_truncations_and_corruptions(void **state) {
    (void)state;
    unsigned char buf[256];
    size_t n = sample_images(buf);
    for (size_t k = 0; k < n; k++)
        expect_format_error(buf, k, false, "truncated");
    const char *gzp = tmp_path("whole.gz");
    write_file(gzp, buf, n, true);
    size_t gzn;
    unsigned char *gzb = read_file(gzp, &gzn);
    const char *p = tmp_path("cut.gz");
    for (size_t k = 1; k < gzn; k++) {
        write_file(p, gzb, k, false);
        ct_tensor *t = ct_idx_load(p);
        /* a cut gzip stream reads as fewer bytes or as corrupt */
        assert_null(t);
        assert_true(ct_last_status() == CT_ERROR_FORMAT);
        ct_clear_error();
    }
    uint32_t rng = 12345;
    int loaded = 0, failed = 0;
    for (int trial = 0; trial < 400; trial++) {
        unsigned char m[512];
        const bool gz = trial % 2;
        const unsigned char *src = gz ? gzb : buf;
        size_t len = gz ? gzn : n;
        memcpy(m, src, len);
        int flips = 1 + trial % 3;
        for (int f = 0; f < flips; f++) {
            rng = rng * 1664525u + 1013904223u;
            size_t at = (rng >> 8) % len;
            rng = rng * 1664525u + 1013904223u;
            m[at] ^= (unsigned char)(1u << ((rng >> 16) % 8));
        }
        write_file(p, m, len, false);
        ct_tensor *t = ct_idx_load(p);
        if (t) {
            loaded++;
            ct_release(t);
        } else {
            failed++;
            assert_true(ct_last_status() == CT_ERROR_FORMAT);
            assert_true(strlen(ct_last_error()) > 10);
            ct_clear_error();
        }
    }
    assert_true(failed > 50); /* header flips and gzip CRC checks catch most */
    assert_true(loaded > 0);  /* a flipped pixel is still a valid file */
    free(gzb);
}

static void write_mnist(const char *dir, const char *split, int n_images, int n_labels, bool gz) {
    unsigned char buf[4096];
    char path[512];
    size_t h = idx_header(buf, 0x08, 3, (const uint32_t[]){(uint32_t)n_images, 28, 28});
    for (int i = 0; i < n_images * 784; i++)
        buf[h + (size_t)i] = (unsigned char)(i % 251);
    snprintf(path, sizeof path, "%s/%s-images-idx3-ubyte%s", dir, split, gz ? ".gz" : "");
    write_file(path, buf, h + (size_t)n_images * 784, gz);
    h = idx_header(buf, 0x08, 1, (const uint32_t[]){(uint32_t)n_labels});
    for (int i = 0; i < n_labels; i++)
        buf[h + (size_t)i] = (unsigned char)(9 - i);
    snprintf(path, sizeof path, "%s/%s-labels-idx1-ubyte%s", dir, split, gz ? ".gz" : "");
    write_file(path, buf, h + (size_t)n_labels, gz);
}

static void test_mnist_load(void **state) {
    (void)state;
    write_mnist(tmpdir, "train", 3, 3, true);
    write_mnist(tmpdir, "t10k", 2, 3, false);
    ct_tensor *x, *y;
    assert_int_equal(ct_mnist_load(tmpdir, true, &x, &y), CT_OK);
    CT_ASSERT_SHAPE(x, 3, 28, 28);
    CT_ASSERT_SHAPE(y, 3);
    assert_int_equal(ct_tensor_dtype(x), CT_U8);
    assert_int_equal(ct_tensor_dtype(y), CT_I64);
    assert_true(ct_test_at(y, 2) == 7);
    assert_true(ct_test_at(x, 800) == 800 % 251);
    ct_release(x);
    ct_release(y);
    CT_ASSERT_ERR(ct_mnist_load(tmpdir, false, &x, &y) == CT_OK, CT_ERROR_FORMAT, "2 images but 3 labels");
    assert_null(x);
    CT_ASSERT_ERR(ct_mnist_load(tmp_path("missing"), true, &x, &y) == CT_OK, CT_ERROR_IO,
                  "no train-images-idx3-ubyte");
    CT_ASSERT_ERR(ct_mnist_load(NULL, true, &x, &y) == CT_OK, CT_ERROR_NULL_ARGUMENT, "dir");
    CT_ASSERT_ERR(ct_mnist_load(tmpdir, true, NULL, &y) == CT_OK, CT_ERROR_NULL_ARGUMENT, "images");
}

/* ------------------------------------------------------------ datasets, loader */

static ct_dataset *range_dataset(int64_t n, ct_tensor **xs, ct_tensor **ys) {
    *xs = ct_arange(ct_scalar_int(0), ct_scalar_int(2 * n), ct_scalar_int(1), CT_I64, CT_CPU);
    ct_tensor *x2 = ct_reshape(*xs, CT_SHAPE(n, 2));
    ct_release(*xs);
    *xs = x2;
    *ys = ct_arange(ct_scalar_int(0), ct_scalar_int(n), ct_scalar_int(1), CT_F32, CT_CPU);
    ct_tensor *f[2] = {*xs, *ys};
    ct_dataset *ds = ct_tensor_dataset_new(f, 2);
    CT_ASSERT_OK(ds);
    return ds;
}

/* All sample indices of one epoch, in batch order; checks x/y agree. */
static int64_t run_epoch(ct_dataloader *dl, int64_t *seen, int64_t *sizes) {
    ct_tensor *b[2];
    int64_t count = 0, nb = 0;
    int r;
    ct_scope_begin();
    while ((r = ct_dataloader_next(dl, b)) == 1) {
        int64_t bs = ct_tensor_size(b[1], 0);
        assert_int_equal(ct_tensor_size(b[0], 1), 2);
        for (int64_t i = 0; i < bs; i++) {
            int64_t idx = (int64_t)ct_test_at(b[1], i);
            assert_true(ct_test_at(b[0], 2 * i) == 2.0 * (double)idx);
            assert_true(ct_test_at(b[0], 2 * i + 1) == 2.0 * (double)idx + 1);
            seen[count++] = idx;
        }
        if (sizes)
            sizes[nb] = bs;
        nb++;
    }
    assert_int_equal(r, 0);
    assert_int_equal(nb, ct_dataloader_len(dl));
    ct_scope_end();
    return count;
}

static void test_loader_batches_in_order(void **state) {
    (void)state;
    ct_tensor *xs, *ys;
    ct_dataset *ds = range_dataset(10, &xs, &ys);
    assert_int_equal(ct_dataset_len(ds), 10);
    assert_int_equal(ct_dataset_num_fields(ds), 2);
    ct_dataloader_options o = ct_dataloader_defaults(4);
    ct_dataloader *dl = ct_dataloader_new(ds, &o);
    CT_ASSERT_OK(dl);
    assert_int_equal(ct_dataloader_len(dl), 3);
    int64_t seen[16], sizes[4];
    assert_int_equal(run_epoch(dl, seen, sizes), 10);
    for (int i = 0; i < 10; i++)
        assert_int_equal(seen[i], i);
    assert_int_equal(sizes[2], 2);
    assert_int_equal(ct_dataloader_epoch(dl), 1);
    ct_dataloader_free(dl);
    o.drop_last = true;
    dl = ct_dataloader_new(ds, &o);
    assert_int_equal(ct_dataloader_len(dl), 2);
    assert_int_equal(run_epoch(dl, seen, sizes), 8);
    ct_dataloader_free(dl);
    ct_dataset_free(ds);
    ct_release(xs);
    ct_release(ys);
}

static bool is_permutation(const int64_t *v, int64_t n) {
    bool seen[1024] = {false};
    for (int64_t i = 0; i < n; i++) {
        if (v[i] < 0 || v[i] >= n || seen[v[i]])
            return false;
        seen[v[i]] = true;
    }
    return true;
}

/* The order depends on (seed, epoch) only: every worker count gives the same batches. */
static void test_loader_shuffle_deterministic(void **state) {
    (void)state;
    enum { N = 203 };
    ct_tensor *xs, *ys;
    ct_dataset *ds = range_dataset(N, &xs, &ys);
    int64_t ref[3][N], got[N];
    const int workers[] = {0, 1, 3};
    for (int w = 0; w < 3; w++) {
        ct_dataloader_options o = ct_dataloader_defaults(16);
        o.shuffle = true;
        o.seed = 42;
        o.num_workers = workers[w];
        ct_dataloader *dl = ct_dataloader_new(ds, &o);
        CT_ASSERT_OK(dl);
        for (int e = 0; e < 3; e++) {
            int64_t *dst = w == 0 ? ref[e] : got;
            assert_int_equal(run_epoch(dl, dst, NULL), N);
            assert_true(is_permutation(dst, N));
            if (w > 0)
                assert_memory_equal(ref[e], got, sizeof got);
        }
        /* set_epoch replays an epoch */
        assert_int_equal(ct_dataloader_set_epoch(dl, 1), CT_OK);
        assert_int_equal(run_epoch(dl, got, NULL), N);
        assert_memory_equal(ref[1], got, sizeof got);
        ct_dataloader_free(dl);
    }
    /* epochs differ, and another seed gives another order */
    assert_true(memcmp(ref[0], ref[1], sizeof ref[0]) != 0);
    ct_dataloader_options o = ct_dataloader_defaults(16);
    o.shuffle = true;
    o.seed = 43;
    ct_dataloader *dl = ct_dataloader_new(ds, &o);
    run_epoch(dl, got, NULL);
    assert_true(memcmp(ref[0], got, sizeof got) != 0);
    ct_dataloader_free(dl);
    ct_dataset_free(ds);
    ct_release(xs);
    ct_release(ys);
}

/* A dataset that fails on one index, counts calls, and checks it runs on workers. */
typedef struct counting {
    int64_t bad;
    pthread_mutex_t mu;
    int64_t calls;
    bool freed;
} counting;

static ct_status counting_get(void *ctx, int64_t index, ct_tensor **fields) {
    counting *c = ctx;
    pthread_mutex_lock(&c->mu);
    c->calls++;
    pthread_mutex_unlock(&c->mu);
    if (index == c->bad) {
        ct_error(CT_ERROR_VALUE, "my_dataset", "sample %lld is broken", (long long)index);
        return CT_ERROR_VALUE;
    }
    fields[0] = ct_full(CT_SHAPE(3), ct_scalar_float((double)index), CT_F64, CT_CPU);
    return fields[0] ? CT_OK : ct_last_status();
}

static void counting_free(void *ctx) {
    ((counting *)ctx)->freed = true;
}

static void test_loader_errors_from_workers(void **state) {
    (void)state;
    for (int w = 0; w <= 2; w += 2) {
        counting c = {.bad = 5};
        pthread_mutex_init(&c.mu, NULL);
        ct_dataset *ds = ct_dataset_new(12, 1, counting_get, &c, counting_free);
        CT_ASSERT_OK(ds);
        ct_dataloader_options o = ct_dataloader_defaults(4);
        o.num_workers = w;
        ct_dataloader *dl = ct_dataloader_new(ds, &o);
        ct_tensor *b[1];
        ct_scope_begin();
        assert_int_equal(ct_dataloader_next(dl, b), 1);
        assert_true(ct_test_at(b[0], 3 * 3) == 3.0);
        CT_ASSERT_ERR(ct_dataloader_next(dl, b) == 1, CT_ERROR_VALUE, "sample 5 is broken");
        assert_int_equal(ct_dataloader_next(dl, b), 1); /* the loader goes on */
        assert_true(ct_test_at(b[0], 0) == 8.0);
        assert_int_equal(ct_dataloader_next(dl, b), 0);
        ct_scope_end();
        ct_dataloader_free(dl);
        ct_dataset_free(ds);
        assert_true(c.freed);
        pthread_mutex_destroy(&c.mu);
    }
}

/* Freeing a loader whose workers have batches ready (and one being made) is clean;
 * ASan's leak check covers the references. */
static void test_loader_shutdown_mid_epoch(void **state) {
    (void)state;
    int64_t before = ct_memory_allocated(CT_CPU);
    ct_tensor *xs, *ys;
    ct_dataset *ds = range_dataset(500, &xs, &ys);
    for (int k = 0; k < 5; k++) {
        ct_dataloader_options o = ct_dataloader_defaults(8);
        o.num_workers = 3;
        o.shuffle = true;
        ct_dataloader *dl = ct_dataloader_new(ds, &o);
        ct_tensor *b[2];
        ct_scope_begin();
        for (int i = 0; i < k; i++)
            assert_int_equal(ct_dataloader_next(dl, b), 1);
        ct_scope_end();
        if (k == 4)
            usleep(2000); /* let the queue fill */
        ct_dataloader_free(dl);
    }
    ct_dataset_free(ds);
    ct_release(xs);
    ct_release(ys);
    assert_int_equal(ct_memory_allocated(CT_CPU), before);
}

static ct_status sum_collate(void *ctx, ct_tensor *const *samples, int64_t batch, int nfields, ct_tensor **out) {
    int *calls = ctx;
    (*calls)++;
    double total = 0;
    for (int64_t b = 0; b < batch; b++)
        total += ct_test_at(samples[b * nfields + 1], 0);
    out[0] = ct_scalar_tensor(ct_scalar_float(total), CT_F64, CT_CPU);
    out[1] = ct_scalar_tensor(ct_scalar_int(batch), CT_I64, CT_CPU);
    return CT_OK;
}

static void test_loader_custom_collate(void **state) {
    (void)state;
    ct_tensor *xs, *ys;
    ct_dataset *ds = range_dataset(7, &xs, &ys);
    int calls = 0;
    ct_dataloader_options o = ct_dataloader_defaults(3);
    o.collate = sum_collate;
    o.collate_ctx = &calls;
    ct_dataloader *dl = ct_dataloader_new(ds, &o);
    ct_tensor *b[2];
    ct_scope_begin();
    assert_int_equal(ct_dataloader_next(dl, b), 1);
    assert_true(ct_test_at(b[0], 0) == 0 + 1 + 2);
    assert_int_equal(ct_dataloader_next(dl, b), 1);
    assert_int_equal(ct_dataloader_next(dl, b), 1);
    assert_true(ct_test_at(b[0], 0) == 6);
    assert_true(ct_test_at(b[1], 0) == 1);
    ct_scope_end();
    assert_int_equal(calls, 3);
    ct_dataloader_free(dl);
    ct_dataset_free(ds);
    ct_release(xs);
    ct_release(ys);
}

static ct_status ragged_get(void *ctx, int64_t index, ct_tensor **fields) {
    (void)ctx;
    fields[0] = ct_zeros(CT_SHAPE(1 + index), CT_F32, CT_CPU);
    return CT_OK;
}

static void test_loader_and_dataset_errors(void **state) {
    (void)state;
    ct_dataset *ragged = ct_dataset_new(4, 1, ragged_get, NULL, NULL);
    ct_dataloader_options o = ct_dataloader_defaults(2);
    ct_dataloader *dl = ct_dataloader_new(ragged, &o);
    ct_tensor *b[1];
    CT_ASSERT_ERR(ct_dataloader_next(dl, b) == 1, CT_ERROR_VALUE,
                  "stack expects each tensor to be equal size, but got [1] at entry 0 and [2] at entry 1");
    ct_dataloader_free(dl);
    ct_tensor *f[1];
    CT_ASSERT_ERR(ct_dataset_get(ragged, 4, f) == CT_OK, CT_ERROR_INDEX, "index 4 is out of range");
    CT_ASSERT_ERR(ct_dataset_get(ragged, -1, f) == CT_OK, CT_ERROR_INDEX, "out of range");
    CT_ASSERT_ERR(ct_dataset_get(NULL, 0, f) == CT_OK, CT_ERROR_NULL_ARGUMENT, "dataset");
    CT_ASSERT_ERR(ct_dataset_get(ragged, 0, NULL) == CT_OK, CT_ERROR_NULL_ARGUMENT, "fields");

    o.batch_size = 0;
    CT_ASSERT_ERR(ct_dataloader_new(ragged, &o) != NULL, CT_ERROR_VALUE,
                  "batch_size should be a positive integer value, but got batch_size=0");
    o = ct_dataloader_defaults(2);
    o.num_workers = -1;
    CT_ASSERT_ERR(ct_dataloader_new(ragged, &o) != NULL, CT_ERROR_VALUE, "num_workers");
    o.num_workers = 2;
    o.prefetch_factor = 0;
    CT_ASSERT_ERR(ct_dataloader_new(ragged, &o) != NULL, CT_ERROR_VALUE, "prefetch_factor");
    CT_ASSERT_ERR(ct_dataloader_new(NULL, &o) != NULL, CT_ERROR_NULL_ARGUMENT, "dataset");
    CT_ASSERT_ERR(ct_dataloader_new(ragged, NULL) != NULL, CT_ERROR_NULL_ARGUMENT, "options");
    CT_ASSERT_ERR(ct_dataloader_next(NULL, b) == 1, CT_ERROR_NULL_ARGUMENT, "loader");
    CT_ASSERT_ERR(ct_dataloader_set_epoch(NULL, 0) == CT_OK, CT_ERROR_NULL_ARGUMENT, "loader");
    o = ct_dataloader_defaults(2);
    dl = ct_dataloader_new(ragged, &o);
    CT_ASSERT_ERR(ct_dataloader_set_epoch(dl, -1) == CT_OK, CT_ERROR_VALUE, "epoch");
    CT_ASSERT_ERR(ct_dataloader_next(dl, NULL) == 1, CT_ERROR_NULL_ARGUMENT, "fields");
    ct_dataloader_free(dl);
    ct_dataloader_free(NULL);
    ct_dataset_free(ragged);

    CT_ASSERT_ERR(ct_dataset_new(3, 1, NULL, NULL, NULL) != NULL, CT_ERROR_NULL_ARGUMENT, "get");
    CT_ASSERT_ERR(ct_dataset_new(-1, 1, ragged_get, NULL, NULL) != NULL, CT_ERROR_VALUE, "length >= 0");
    CT_ASSERT_ERR(ct_dataset_new(3, 0, ragged_get, NULL, NULL) != NULL, CT_ERROR_VALUE, "nfields >= 1");
    ct_tensor *a = ct_zeros(CT_SHAPE(3, 2), CT_F32, CT_CPU), *c = ct_zeros(CT_SHAPE(4), CT_F32, CT_CPU);
    ct_tensor *s = ct_scalar_tensor(ct_scalar_int(1), CT_I64, CT_CPU);
    ct_tensor *pair[2] = {a, c};
    CT_ASSERT_ERR(ct_tensor_dataset_new(pair, 2) != NULL, CT_ERROR_VALUE, "Size mismatch between tensors");
    pair[1] = s;
    CT_ASSERT_ERR(ct_tensor_dataset_new(pair, 2) != NULL, CT_ERROR_VALUE, "0-d");
    pair[1] = NULL;
    CT_ASSERT_ERR(ct_tensor_dataset_new(pair, 2) != NULL, CT_ERROR_NULL_ARGUMENT, "tensor 1");
    CT_ASSERT_ERR(ct_tensor_dataset_new(NULL, 2) != NULL, CT_ERROR_NULL_ARGUMENT, "tensors");
    CT_ASSERT_ERR(ct_tensor_dataset_new(pair, 0) != NULL, CT_ERROR_VALUE, "at least one");
    assert_int_equal(ct_dataset_len(NULL), -1);
    ct_release(a);
    ct_release(c);
    ct_release(s);
}

/* An empty dataset has no batches; each call ends an epoch. */
static void test_loader_empty_dataset(void **state) {
    (void)state;
    ct_dataset *ds = ct_dataset_new(0, 1, ragged_get, NULL, NULL);
    ct_dataloader_options o = ct_dataloader_defaults(2);
    o.num_workers = 1;
    ct_dataloader *dl = ct_dataloader_new(ds, &o);
    ct_tensor *b[1];
    assert_int_equal(ct_dataloader_len(dl), 0);
    assert_int_equal(ct_dataloader_next(dl, b), 0);
    assert_int_equal(ct_dataloader_next(dl, b), 0);
    assert_int_equal(ct_dataloader_epoch(dl), 2);
    ct_dataloader_free(dl);
    ct_dataset_free(ds);
}

/* ------------------------------------------------------------ text */

static void test_char_dataset(void **state) {
    (void)state;
    const char *text = "hello world, hello tensors\n";
    size_t len = strlen(text);
    ct_char_dataset *ds = ct_char_dataset_from_text(text, len, 0.25);
    CT_ASSERT_OK(ds);
    /* " \n,dehlnorstw" */
    assert_int_equal(ct_char_dataset_vocab_size(ds), 13);
    assert_int_equal(ct_char_dataset_byte(ds, 0), '\n');
    assert_int_equal(ct_char_dataset_byte(ds, 1), ' ');
    assert_int_equal(ct_char_dataset_byte(ds, 12), 'w');
    assert_int_equal(ct_char_dataset_byte(ds, 13), -1);
    assert_int_equal(ct_char_dataset_len(ds, CT_SPLIT_TRAIN), (int64_t)(27 * 0.75));
    assert_int_equal(ct_char_dataset_len(ds, CT_SPLIT_TRAIN) + ct_char_dataset_len(ds, CT_SPLIT_VAL), 27);
    ct_tensor *ids = ct_char_dataset_encode(ds, "hello", 5);
    CT_ASSERT_OK(ids);
    assert_int_equal(ct_tensor_dtype(ids), CT_I64);
    char out[32];
    assert_int_equal(ct_char_dataset_decode(ds, ids, out, sizeof out), 5);
    assert_string_equal(out, "hello");
    assert_int_equal(ct_char_dataset_decode(ds, ids, out, 3), 5); /* truncated, snprintf-style */
    assert_string_equal(out, "he");
    ct_release(ids);
    ct_tensor *all = ct_char_dataset_tokens(ds, CT_SPLIT_TRAIN);
    char train[32];
    ct_char_dataset_decode(ds, all, train, sizeof train);
    assert_memory_equal(train, text, (size_t)ct_tensor_numel(all));
    ct_release(all);

    /* batches: y is x shifted by one, windows come from the split, same (seed, index)
     * gives the same batch */
    ct_tensor *x, *y, *x2, *y2;
    assert_int_equal(ct_char_dataset_batch(ds, CT_SPLIT_TRAIN, 4, 6, 7, 0, &x, &y), CT_OK);
    CT_ASSERT_SHAPE(x, 4, 6);
    CT_ASSERT_SHAPE(y, 4, 6);
    for (int b = 0; b < 4; b++) {
        char xs[8], ys[8];
        ct_scope_begin();
        ct_char_dataset_decode(ds, ct_select(x, 0, b), xs, sizeof xs);
        ct_char_dataset_decode(ds, ct_select(y, 0, b), ys, sizeof ys);
        ct_scope_end();
        const char *at = strstr(text, xs);
        assert_non_null(at);
        assert_true(at - text + 7 <= (long)ct_char_dataset_len(ds, CT_SPLIT_TRAIN));
        assert_memory_equal(ys, at + 1, 6);
    }
    assert_int_equal(ct_char_dataset_batch(ds, CT_SPLIT_TRAIN, 4, 6, 7, 0, &x2, &y2), CT_OK);
    for (int i = 0; i < 24; i++)
        assert_true(ct_test_at(x, i) == ct_test_at(x2, i));
    ct_release(x2);
    ct_release(y2);
    int differ = 0;
    for (uint64_t idx = 1; idx < 6; idx++) {
        assert_int_equal(ct_char_dataset_batch(ds, CT_SPLIT_TRAIN, 4, 6, 7, idx, &x2, &y2), CT_OK);
        for (int i = 0; i < 24; i++)
            differ += ct_test_at(x, i) != ct_test_at(x2, i);
        ct_release(x2);
        ct_release(y2);
    }
    assert_true(differ > 0);
    ct_release(x);
    ct_release(y);

    /* errors */
    CT_ASSERT_ERR(ct_char_dataset_encode(ds, "hi!", 3) != NULL, CT_ERROR_VALUE, "byte 0x69 ('i') at position 1");
    ct_tensor *bad = ct_full(CT_SHAPE(2), ct_scalar_int(13), CT_I64, CT_CPU);
    CT_ASSERT_ERR(ct_char_dataset_decode(ds, bad, out, sizeof out) >= 0, CT_ERROR_INDEX, "token id 13");
    ct_release(bad);
    ct_tensor *fl = ct_zeros(CT_SHAPE(2), CT_F32, CT_CPU);
    CT_ASSERT_ERR(ct_char_dataset_decode(ds, fl, out, sizeof out) >= 0, CT_ERROR_TYPE, "integers");
    ct_release(fl);
    CT_ASSERT_ERR(ct_char_dataset_batch(ds, CT_SPLIT_VAL, 2, 7, 0, 0, &x, &y) == CT_OK, CT_ERROR_VALUE,
                  "the val split has 7 tokens; a block of 7 needs at least 8");
    assert_null(x);
    CT_ASSERT_ERR(ct_char_dataset_batch(ds, CT_SPLIT_TRAIN, 0, 4, 0, 0, &x, &y) == CT_OK, CT_ERROR_VALUE, ">= 1");
    CT_ASSERT_ERR(ct_char_dataset_batch(ds, (ct_text_split)5, 1, 4, 0, 0, &x, &y) == CT_OK, CT_ERROR_VALUE, "split");
    CT_ASSERT_ERR(ct_char_dataset_batch(NULL, CT_SPLIT_TRAIN, 1, 4, 0, 0, &x, &y) == CT_OK, CT_ERROR_NULL_ARGUMENT,
                  "dataset");
    CT_ASSERT_ERR(ct_char_dataset_len(ds, (ct_text_split)2) >= 0, CT_ERROR_VALUE, "split");
    CT_ASSERT_ERR(ct_char_dataset_tokens(NULL, CT_SPLIT_TRAIN) != NULL, CT_ERROR_NULL_ARGUMENT, "dataset");
    CT_ASSERT_ERR(ct_char_dataset_from_text(text, len, 1.0) != NULL, CT_ERROR_VALUE, "val_fraction");
    CT_ASSERT_ERR(ct_char_dataset_from_text(text, 0, 0.1) != NULL, CT_ERROR_VALUE, "empty");
    CT_ASSERT_ERR(ct_char_dataset_from_text(NULL, 3, 0.1) != NULL, CT_ERROR_NULL_ARGUMENT, "text");
    CT_ASSERT_ERR(ct_char_dataset_from_file(tmp_path("none.txt"), 0.1) != NULL, CT_ERROR_IO, "cannot open");
    CT_ASSERT_ERR(ct_char_dataset_from_file(NULL, 0.1) != NULL, CT_ERROR_NULL_ARGUMENT, "path");
    ct_char_dataset_free(ds);
    ct_char_dataset_free(NULL);

    /* from a file: the same dataset */
    const char *p = tmp_path("text.txt");
    write_file(p, (const unsigned char *)text, len, false);
    ds = ct_char_dataset_from_file(p, 0.25);
    CT_ASSERT_OK(ds);
    assert_int_equal(ct_char_dataset_vocab_size(ds), 13);
    ct_char_dataset_free(ds);
    write_file(p, (const unsigned char *)"", 0, false);
    CT_ASSERT_ERR(ct_char_dataset_from_file(p, 0.1) != NULL, CT_ERROR_VALUE, "is empty");
}

/* ------------------------------------------------------------ tokens */

static void put32(unsigned char *p, int32_t v) {
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)((uint32_t)v >> (8 * i));
}

/* An llm.c shard of n tokens: token i is (i * 7 + 1) % 50257, tok[bad] = badval if bad >= 0. */
static size_t make_shard(unsigned char *buf, int32_t magic, int32_t version, int32_t ntok, int n, int bad,
                         int badval) {
    memset(buf, 0, 1024);
    put32(buf, magic);
    put32(buf + 4, version);
    put32(buf + 8, ntok);
    for (int i = 0; i < n; i++) {
        int t = i == bad ? badval : (i * 7 + 1) % 50257;
        buf[1024 + 2 * i] = (unsigned char)(t & 255);
        buf[1024 + 2 * i + 1] = (unsigned char)(t >> 8);
    }
    return 1024 + 2 * (size_t)n;
}

static void test_token_dataset(void **state) {
    (void)state;
    static unsigned char buf[1024 + 2 * 400];
    const char *p = tmp_path("shard.bin");
    write_file(p, buf, make_shard(buf, 20240520, 1, 400, 400, -1, 0), false);
    ct_token_dataset *ds = ct_token_dataset_open(p, 0.25);
    CT_ASSERT_OK(ds);
    assert_int_equal(ct_token_dataset_format(ds), CT_TOKENS_SHARD);
    assert_int_equal(ct_token_dataset_vocab_size(ds), 50257);
    assert_int_equal(ct_token_dataset_len(ds, CT_SPLIT_TRAIN), 300);
    assert_int_equal(ct_token_dataset_len(ds, CT_SPLIT_VAL), 100);
    ct_tensor *x, *y, *x2, *y2;
    assert_int_equal(ct_token_dataset_batch(ds, CT_SPLIT_VAL, 3, 16, 5, 2, &x, &y), CT_OK);
    CT_ASSERT_SHAPE(x, 3, 16);
    assert_int_equal(ct_tensor_dtype(x), CT_I64);
    for (int b = 0; b < 3; b++) {
        /* invert t = (i * 7 + 1) % 50257 for i < 400: the window's position */
        int64_t t0 = ct_test_at(x, b * 16), i0 = -1;
        for (int i = 0; i < 400; i++)
            if ((i * 7 + 1) % 50257 == t0)
                i0 = i;
        assert_true(i0 >= 300 && i0 + 17 <= 400); /* inside the val split */
        for (int j = 0; j < 16; j++) {
            assert_true(ct_test_at(x, b * 16 + j) == (double)(((i0 + j) * 7 + 1) % 50257));
            assert_true(ct_test_at(y, b * 16 + j) == (double)(((i0 + j + 1) * 7 + 1) % 50257));
        }
    }
    assert_int_equal(ct_token_dataset_batch(ds, CT_SPLIT_VAL, 3, 16, 5, 2, &x2, &y2), CT_OK);
    for (int i = 0; i < 48; i++)
        assert_true(ct_test_at(x, i) == ct_test_at(x2, i));
    ct_release(x);
    ct_release(y);
    ct_release(x2);
    ct_release(y2);
    CT_ASSERT_ERR(ct_token_dataset_batch(ds, CT_SPLIT_VAL, 1, 100, 0, 0, &x, &y) == CT_OK, CT_ERROR_VALUE,
                  "the val split has 100 tokens; a block of 100 needs at least 101");
    assert_null(x);
    CT_ASSERT_ERR(ct_token_dataset_batch(ds, (ct_text_split)3, 1, 4, 0, 0, &x, &y) == CT_OK, CT_ERROR_VALUE, "split");
    CT_ASSERT_ERR(ct_token_dataset_batch(ds, CT_SPLIT_TRAIN, 1, 4, 0, (uint64_t)1 << 41, &x, &y) == CT_OK,
                  CT_ERROR_VALUE, "2^40");
    CT_ASSERT_ERR(ct_token_dataset_batch(NULL, CT_SPLIT_TRAIN, 1, 4, 0, 0, &x, &y) == CT_OK, CT_ERROR_NULL_ARGUMENT,
                  "dataset");
    CT_ASSERT_ERR(ct_token_dataset_batch(ds, CT_SPLIT_TRAIN, 1, 4, 0, 0, NULL, &y) == CT_OK, CT_ERROR_NULL_ARGUMENT,
                  "x");
    ct_token_dataset_free(ds);

    /* malformed shards: each names what is wrong */
    write_file(p, buf, make_shard(buf, 20240520, 7, 400, 400, -1, 0), false);
    CT_ASSERT_ERR(ct_token_dataset_open(p, 0) != NULL, CT_ERROR_FORMAT, "token shard version 7 is not supported");
    write_file(p, buf, make_shard(buf, 20240520, 1, 401, 400, -1, 0), false);
    CT_ASSERT_ERR(ct_token_dataset_open(p, 0) != NULL, CT_ERROR_FORMAT, "the header says 401 tokens");
    write_file(p, buf, make_shard(buf, 20240520, 1, -5, 400, -1, 0), false);
    CT_ASSERT_ERR(ct_token_dataset_open(p, 0) != NULL, CT_ERROR_FORMAT, "the header says -5 tokens");
    write_file(p, buf, make_shard(buf, 20240520, 1, 400, 400, 123, 50257), false);
    CT_ASSERT_ERR(ct_token_dataset_open(p, 0) != NULL, CT_ERROR_FORMAT,
                  "token 50257 at position 123 is outside GPT-2's vocabulary");
    write_file(p, buf, make_shard(buf, 20240520, 1, 0, 0, -1, 0), false);
    CT_ASSERT_ERR(ct_token_dataset_open(p, 0) != NULL, CT_ERROR_VALUE, "holds no tokens");
    write_file(p, buf, 600, false); /* the magic, a short header */
    CT_ASSERT_ERR(ct_token_dataset_open(p, 0) != NULL, CT_ERROR_FORMAT, "needs a 1024-byte header");
    CT_ASSERT_ERR(ct_token_dataset_open(p, 1.0) != NULL, CT_ERROR_VALUE, "val_fraction");
    CT_ASSERT_ERR(ct_token_dataset_open(tmp_path("none.bin"), 0) != NULL, CT_ERROR_IO, "cannot open");
    CT_ASSERT_ERR(ct_token_dataset_open(NULL, 0) != NULL, CT_ERROR_NULL_ARGUMENT, "path");
    write_file(p, buf, 0, false);
    CT_ASSERT_ERR(ct_token_dataset_open(p, 0) != NULL, CT_ERROR_VALUE, "is empty");
    CT_ASSERT_ERR(ct_token_dataset_vocab_size(NULL) >= 0, CT_ERROR_NULL_ARGUMENT, "dataset");

    /* any other file: bytes */
    const char *text = "abcabcabcabcabcabcabcabcabcabcabcabcabcabc\xff";
    write_file(p, (const unsigned char *)text, strlen(text), false);
    ds = ct_token_dataset_open(p, 0);
    CT_ASSERT_OK(ds);
    assert_int_equal(ct_token_dataset_format(ds), CT_TOKENS_BYTES);
    assert_int_equal(ct_token_dataset_vocab_size(ds), 256);
    assert_int_equal(ct_token_dataset_len(ds, CT_SPLIT_TRAIN), (int64_t)strlen(text));
    assert_int_equal(ct_token_dataset_len(ds, CT_SPLIT_VAL), 0);
    assert_int_equal(ct_token_dataset_batch(ds, CT_SPLIT_TRAIN, 2, 42, 1, 0, &x, &y), CT_OK);
    assert_true(ct_test_at(x, 0) == 'a' && ct_test_at(y, 41) == 255); /* the only window: offset 0 */
    ct_release(x);
    ct_release(y);
    ct_token_dataset_free(ds);
    ct_token_dataset_free(NULL);
}

/* llm.c's tokenizer file: header, then per token a length byte and its bytes. */
static void test_tokenizer(void **state) {
    (void)state;
    static unsigned char buf[2048];
    const char *p = tmp_path("tok.bin");
    memset(buf, 0, 1024);
    put32(buf, 20240328);
    put32(buf + 4, 2);
    put32(buf + 8, 3);
    put32(buf + 12, 2);
    size_t n = 1024;
    const char *toks[3] = {"Hello", ",", " world"};
    for (int i = 0; i < 3; i++) {
        buf[n++] = (unsigned char)strlen(toks[i]);
        memcpy(buf + n, toks[i], strlen(toks[i]));
        n += strlen(toks[i]);
    }
    write_file(p, buf, n, false);
    ct_tokenizer *tk = ct_tokenizer_load(p);
    CT_ASSERT_OK(tk);
    assert_int_equal(ct_tokenizer_vocab_size(tk), 3);
    assert_int_equal(ct_tokenizer_eot(tk), 2);
    size_t len = 0;
    assert_string_equal(ct_tokenizer_decode(tk, 2, &len), " world");
    assert_int_equal(len, 6);
    CT_ASSERT_ERR(ct_tokenizer_decode(tk, 3, &len) != NULL, CT_ERROR_INDEX, "token id 3 is outside");
    assert_int_equal(len, 0);
    CT_ASSERT_ERR(ct_tokenizer_decode(NULL, 0, NULL) != NULL, CT_ERROR_NULL_ARGUMENT, "tokenizer");
    ct_tokenizer_free(tk);
    ct_tokenizer_free(NULL);

    write_file(p, buf, n - 2, false); /* the last token runs past the end */
    CT_ASSERT_ERR(ct_tokenizer_load(p) != NULL, CT_ERROR_FORMAT, "token 2 runs past the end");
    put32(buf + 4, 3);
    write_file(p, buf, n, false);
    CT_ASSERT_ERR(ct_tokenizer_load(p) != NULL, CT_ERROR_FORMAT, "tokenizer version 3");
    put32(buf + 4, 1);
    put32(buf + 8, 0);
    write_file(p, buf, n, false);
    CT_ASSERT_ERR(ct_tokenizer_load(p) != NULL, CT_ERROR_FORMAT, "vocabulary size 0");
    put32(buf, 1234);
    write_file(p, buf, n, false);
    CT_ASSERT_ERR(ct_tokenizer_load(p) != NULL, CT_ERROR_FORMAT, "is not a tokenizer file");
    put32(buf, 20240328);
    put32(buf + 8, 3);
    buf[1024] = 0; /* an empty token */
    write_file(p, buf, n, false);
    CT_ASSERT_ERR(ct_tokenizer_load(p) != NULL, CT_ERROR_FORMAT, "token 0 runs past the end of the file or is empty");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_idx_uint8_plain_and_gzip),
        cmocka_unit_test(test_idx_dtypes_big_endian),
        cmocka_unit_test(test_idx_malformed),
        cmocka_unit_test(test_idx_truncations_and_corruptions),
        cmocka_unit_test(test_mnist_load),
        cmocka_unit_test(test_loader_batches_in_order),
        cmocka_unit_test(test_loader_shuffle_deterministic),
        cmocka_unit_test(test_loader_errors_from_workers),
        cmocka_unit_test(test_loader_shutdown_mid_epoch),
        cmocka_unit_test(test_loader_custom_collate),
        cmocka_unit_test(test_loader_and_dataset_errors),
        cmocka_unit_test(test_loader_empty_dataset),
        cmocka_unit_test(test_char_dataset),
        cmocka_unit_test(test_token_dataset),
        cmocka_unit_test(test_tokenizer),
    };
    return cmocka_run_group_tests(tests, make_tmpdir, remove_tmpdir);
}
