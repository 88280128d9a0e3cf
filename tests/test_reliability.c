/* Regression tests for the reliability findings (fuzzing the public API and the
 * loaders, injected allocation failures): each test is one reproducer of
 * ../shared/repro/, asserting the error or the answer PyTorch gives. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "alloc.h"
#include "factory.h"
#include "util/value.h"
#include "tensor_impl.h"
#include "testutil.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ------------------------------------------------------------------ value trees */

/* ct_value_append.c: one child appended twice was freed twice. */
static void test_value_one_owner(void **state) {
    (void)state;
    ct_value *list = ct_value_new_list(), *other = ct_value_new_list(), *child = ct_value_new_list();
    assert_int_equal(ct_value_append(list, child), CT_OK);
    CT_ASSERT_ERR(ct_value_append(list, child) == CT_OK, CT_ERROR_VALUE, "already inside a list");
    CT_ASSERT_ERR(ct_value_append(other, child) == CT_OK, CT_ERROR_VALUE, "one owner");
    ct_value *d = ct_value_new_dict(), *k = ct_value_new_str("k");
    CT_ASSERT_ERR(ct_value_set(d, "k", child) == CT_OK, CT_ERROR_VALUE, "already inside a list");
    assert_int_equal(ct_value_len(list), 1);
    /* a container inside one of its own descendants */
    CT_ASSERT_ERR(ct_value_append(child, list) == CT_OK, CT_ERROR_VALUE, "cannot put a list inside itself");
    CT_ASSERT_ERR(ct_value_dict_set(d, k, k) == CT_OK, CT_ERROR_VALUE, "the key and the item are the same value");
    /* a popped value is free again */
    ct_value *popped = ct_value_pop(list);
    assert_ptr_equal(popped, child);
    assert_int_equal(ct_value_append(other, popped), CT_OK);
    assert_int_equal(ct_value_set(d, "list", list), CT_OK);
    ct_value_free(d);
    ct_value_free(other);
}

/* ------------------------------------------------------------------ loaders */

/* ct_load_pt_nul_key.c: a state_dict whose keys are "a\0x" and "a\0y". */
static const uint8_t nul_key_pt[704] = {
    80,75,3,4,20,0,0,0,0,0,0,0,0,0,245,173,235,105,42,1,0,0,42,1,0,0,16,0,0,0,97,114,99,104,105,118,
    101,47,100,97,116,97,46,112,107,108,128,2,99,99,111,108,108,101,99,116,105,111,110,115,10,79,
    114,100,101,114,101,100,68,105,99,116,10,41,82,88,3,0,0,0,97,0,120,99,116,111,114,99,104,46,95,
    117,116,105,108,115,10,95,114,101,98,117,105,108,100,95,116,101,110,115,111,114,95,118,50,10,40,
    40,88,7,0,0,0,115,116,111,114,97,103,101,99,116,111,114,99,104,10,70,108,111,97,116,83,116,111,
    114,97,103,101,10,88,1,0,0,0,48,88,3,0,0,0,99,112,117,75,16,116,81,75,0,40,75,4,116,40,75,1,116,
    137,99,99,111,108,108,101,99,116,105,111,110,115,10,79,114,100,101,114,101,100,68,105,99,116,10,
    41,82,116,82,115,88,3,0,0,0,97,0,121,99,116,111,114,99,104,46,95,117,116,105,108,115,10,95,114,
    101,98,117,105,108,100,95,116,101,110,115,111,114,95,118,50,10,40,40,88,7,0,0,0,115,116,111,114,
    97,103,101,99,116,111,114,99,104,10,70,108,111,97,116,83,116,111,114,97,103,101,10,88,1,0,0,0,
    48,88,3,0,0,0,99,112,117,75,16,116,81,75,4,40,75,2,116,40,75,1,116,137,99,99,111,108,108,101,99,
    116,105,111,110,115,10,79,114,100,101,114,101,100,68,105,99,116,10,41,82,116,82,115,46,80,75,3,
    4,20,0,0,0,0,0,0,0,0,0,140,206,14,16,64,0,0,0,64,0,0,0,14,0,0,0,97,114,99,104,105,118,101,47,
    100,97,116,97,47,48,0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,
    28,29,30,31,32,33,34,35,36,37,38,39,40,41,42,43,44,45,46,47,48,49,50,51,52,53,54,55,56,57,58,59,
    60,61,62,63,80,75,3,4,20,0,0,0,0,0,0,0,0,0,209,158,103,85,2,0,0,0,2,0,0,0,15,0,0,0,97,114,99,
    104,105,118,101,47,118,101,114,115,105,111,110,51,10,80,75,1,2,20,0,20,0,0,0,0,0,0,0,0,0,245,
    173,235,105,42,1,0,0,42,1,0,0,16,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,97,114,99,104,105,118,101,47,
    100,97,116,97,46,112,107,108,80,75,1,2,20,0,20,0,0,0,0,0,0,0,0,0,140,206,14,16,64,0,0,0,64,0,0,
    0,14,0,0,0,0,0,0,0,0,0,0,0,0,0,88,1,0,0,97,114,99,104,105,118,101,47,100,97,116,97,47,48,80,75,
    1,2,20,0,20,0,0,0,0,0,0,0,0,0,209,158,103,85,2,0,0,0,2,0,0,0,15,0,0,0,0,0,0,0,0,0,0,0,0,0,196,1,
    0,0,97,114,99,104,105,118,101,47,118,101,114,115,105,111,110,80,75,5,6,0,0,0,0,3,0,3,0,183,0,0,
    0,243,1,0,0,0,0,
};

static void test_pt_nul_key(void **state) {
    (void)state;
    CT_ASSERT_ERR(ct_load_buffer(nul_key_pt, sizeof nul_key_pt) != NULL, CT_ERROR_FORMAT,
                  "dict key 'a' contains a NUL character");
}

/* Physical memory, for a file twice its size. */
static int64_t ram_bytes(void) { return (int64_t)sysconf(_SC_PHYS_PAGES) * (int64_t)sysconf(_SC_PAGESIZE); }

/* A sparse file of size bytes holding head at its start; "" when that is impossible. */
static void sparse_file(char *path, size_t cap, int64_t size, const void *head, size_t nhead) {
    snprintf(path, cap, "ct_sparse_XXXXXX"); /* in the build folder: /tmp may be small */
    int fd = mkstemp(path);
    bool ok = fd >= 0 && ftruncate(fd, (off_t)size) == 0 && (nhead == 0 || pwrite(fd, head, nhead, 0) == (ssize_t)nhead);
    if (fd >= 0)
        close(fd);
    if (!ok) {
        if (fd >= 0)
            unlink(path);
        path[0] = '\0';
    }
}

/* ct_load_huge_file.c: a file twice the size of RAM is refused (zeros) or mapped (a
 * safetensors file) at once, not read whole. */
static void test_load_huge_file(void **state) {
    (void)state;
    int64_t size = 2 * ram_bytes();
    char path[512];
    sparse_file(path, sizeof path, size, NULL, 0);
    if (!path[0]) {
        print_message("sparse file of %lld bytes impossible here; skipped\n", (long long)size);
        return;
    }
    alarm(30);
    double t0 = now_s();
    CT_ASSERT_ERR(ct_load(path) != NULL, CT_ERROR_FORMAT, "not a checkpoint ctorch recognises");
    double dt = now_s() - t0;
    unlink(path);
    print_message("2x RAM (%lld bytes) of zeros refused in %.3f s\n", (long long)size, dt);
    assert_true(dt < 0.5);

    /* One uint8 tensor covering the whole file: loads as a view of the mapping. */
    char head[128];
    int64_t numel = size - (int64_t)sizeof head;
    int n = snprintf(head + 8, sizeof head - 8, "{\"x\":{\"dtype\":\"U8\",\"shape\":[%lld],\"data_offsets\":[0,%lld]}}",
                     (long long)numel, (long long)numel);
    memset(head + 8 + n, ' ', sizeof head - 8 - (size_t)n);
    uint64_t hlen = sizeof head - 8;
    for (int i = 0; i < 8; i++)
        head[i] = (char)(hlen >> (8 * i));
    sparse_file(path, sizeof path, size, head, sizeof head);
    assert_true(path[0] != '\0');
    t0 = now_s();
    ct_value *v = ct_load(path);
    dt = now_s() - t0;
    CT_ASSERT_OK(v);
    ct_tensor *x = ct_value_tensor(ct_value_get(v, "x"));
    CT_ASSERT_OK(x);
    assert_int_equal(ct_tensor_numel(x), numel);
    /* writable, copy-on-write: the file keeps its zeros */
    uint8_t *p = ct_tensor_data(x);
    p[numel - 1] = 7;
    assert_int_equal(p[numel - 1], 7);
    ct_release(x);
    ct_value_free(v);
    int fd = open(path, O_RDONLY);
    uint8_t last = 1;
    assert_int_equal(pread(fd, &last, 1, (off_t)(size - 1)), 1);
    close(fd);
    assert_int_equal(last, 0);
    unlink(path);
    alarm(0);
    print_message("2x RAM safetensors file mapped in %.3f s\n", dt);
    assert_true(dt < 0.5);
}

/* Streams are sniffed before they are read: /dev/zero and /dev/urandom never end. */
static void test_load_special_files(void **state) {
    (void)state;
    alarm(30);
    double t0 = now_s();
    CT_ASSERT_ERR(ct_load("/dev/zero") != NULL, CT_ERROR_FORMAT, "not a checkpoint ctorch recognises");
    CT_ASSERT_ERR(ct_load_safetensors("/dev/zero") != NULL, CT_ERROR_FORMAT, "");
    for (int i = 0; i < 20; i++) { /* random first bytes: refused, whatever they are */
        ct_value *v = ct_load("/dev/urandom");
        assert_null(v);
        assert_true(ct_last_status() == CT_ERROR_FORMAT || ct_last_status() == CT_ERROR_NOT_IMPLEMENTED);
    }
    CT_ASSERT_ERR(ct_load("/tmp") != NULL, CT_ERROR_IO, "is a directory");
    CT_ASSERT_ERR(ct_load("/dev/null") != NULL, CT_ERROR_FORMAT, "0 bytes");
    assert_true(now_s() - t0 < 5.0);
    alarm(0);
}

/* ------------------------------------------------------------------ printing */

/* ct_set_printoptions.c: precision 2^30 made every element a gigabyte of text. */
static void test_print_precision_bound(void **state) {
    (void)state;
    ct_tensor *t = ct_full(CT_SHAPE(4), ct_scalar_float(2.25), CT_F64, CT_CPU);
    CT_ASSERT_ERR(ct_set_printoptions(1 << 30, 7, -1, -1, -1) == CT_OK, CT_ERROR_VALUE, "precision must be at most 1074");
    char buf[128];
    alarm(10);
    assert_true(ct_to_string(t, buf, sizeof buf) > 0);
    assert_string_equal(buf, "tensor([2.2500, 2.2500, 2.2500, 2.2500], dtype=torch.float64)"); /* nothing changed */
    assert_int_equal(ct_set_printoptions(1074, -1, -1, -1, -1), CT_OK);
    int64_t n = ct_to_string(t, buf, sizeof buf);
    assert_true(n > 4 * 1074 && n < 4 * 1200);
    alarm(0);
    ct_reset_printoptions();
    ct_release(t);
}

/* ct_to_string.c (finding 25, the printer's part): a huge stride on a size-1 dim
 * overflowed when turned into bytes. */
static void test_print_huge_stride(void **state) {
    (void)state;
    int64_t shape[2] = {1, 2}, strides[2] = {(int64_t)1 << 62, 1};
    ct_tensor *a = ct_empty_strided(shape, strides, 2, CT_F64, CT_CPU);
    CT_ASSERT_OK(a);
    double *p = ct_tensor_data(a);
    p[0] = 0.0;
    p[1] = 0.0;
    char buf[128];
    assert_true(ct_to_string(a, buf, sizeof buf) > 0);
    assert_string_equal(buf, "tensor([[0., 0.]], dtype=torch.float64)");
    ct_release(a);
}

/* ------------------------------------------------------------------ autograd cycles */

/* ct_tensor_set_grad.c: t made its own grad (or a view of itself) owned itself. */
static void test_set_grad_self(void **state) {
    (void)state;
    int64_t before = ct_memory_allocated(CT_CPU);
    ct_tensor *t = ct_ones(CT_SHAPE(4), CT_F32, CT_CPU);
    CT_ASSERT_ERR(ct_tensor_set_grad(t, t) == CT_OK, CT_ERROR_RUNTIME, "can't assign Variable as its own grad");
    ct_tensor *v = ct_view(t, CT_SHAPE(2, 2));
    ct_tensor *r = ct_reshape(v, CT_SHAPE(4)); /* a view of t too */
    CT_ASSERT_ERR(ct_tensor_set_grad(t, r) == CT_OK, CT_ERROR_RUNTIME, "a view of a tensor as its own grad");
    ct_tensor *c = ct_clone(t);
    assert_int_equal(ct_tensor_set_grad(t, c), CT_OK);
    ct_release(c);
    ct_release(r);
    ct_release(v);
    ct_release(t);
    assert_int_equal(ct_memory_allocated(CT_CPU), before);
}

/* ct_clamp_tensor_.c: an in-place op whose self is also its min saved self in its own
 * node. The input is saved as it was before the op, and the gradient is right:
 * clamp(x, x, hi) = min(x, hi), whose derivative in hi is [x > hi]. */
static void test_inplace_input_alias(void **state) {
    (void)state;
    int64_t before = ct_memory_allocated(CT_CPU);
    ct_scope_begin();
    ct_tensor *x = ct_arange(ct_scalar_int(2), ct_scalar_int(33), ct_scalar_int(3), CT_F64, CT_CPU);
    ct_tensor *hi = ct_full(NULL, 0, ct_scalar_float(20), CT_F64, CT_CPU);
    ct_tensor_set_requires_grad(hi, true);
    ct_tensor *r = ct_clamp_tensor_(x, x, hi);
    CT_ASSERT_OK(r);
    assert_true(ct_test_at(x, 10) == 20.0 && ct_test_at(x, 0) == 2.0);
    assert_int_equal(ct_backward(ct_sum(r, NULL, 0, false, CT_DTYPE_UNDEFINED), NULL, false, false), CT_OK);
    ct_tensor *g = ct_tensor_grad(hi);
    CT_ASSERT_OK(g);
    assert_true(ct_test_at(g, 0) == 4.0); /* 23, 26, 29, 32 */
    /* a view of self as the bound */
    ct_tensor *y = ct_arange(ct_scalar_int(0), ct_scalar_int(4), ct_scalar_int(1), CT_F64, CT_CPU);
    ct_tensor *hi2 = ct_full(NULL, 0, ct_scalar_float(2), CT_F64, CT_CPU);
    ct_tensor_set_requires_grad(hi2, true);
    CT_ASSERT_OK(ct_clamp_tensor_(y, ct_view(y, CT_SHAPE(4)), hi2));
    assert_int_equal(ct_backward(ct_sum(y, NULL, 0, false, CT_DTYPE_UNDEFINED), NULL, false, false), CT_OK);
    assert_true(ct_test_at(ct_tensor_grad(hi2), 0) == 1.0); /* only 3 > 2 */
    ct_scope_end();
    assert_int_equal(ct_memory_allocated(CT_CPU), before);
}

/* Finding 24 (leaks in long fuzz runs): an in-place op on a view that was made to
 * require grad itself, over a base that does not, was accepted and gave the base a
 * CopySlices node that was never freed. PyTorch refuses it: the view is a leaf view. */
static void test_inplace_on_leaf_view(void **state) {
    (void)state;
    int64_t before = ct_memory_allocated(CT_CPU);
    ct_scope_begin();
    ct_tensor *z = ct_zeros(CT_SHAPE(2, 3), CT_F32, CT_CPU);
    ct_tensor *y = ct_transpose(z, 0, 1);
    CT_ASSERT_OK(ct_tensor_set_requires_grad(y, true));
    CT_ASSERT_ERR(ct_ceil_(ct_transpose(y, 0, 1)) != NULL, CT_ERROR_RUNTIME,
                  "a view of a leaf Variable that requires grad is being used in an in-place operation");
    ct_scope_end();
    assert_int_equal(ct_memory_allocated(CT_CPU), before);
}

/* Finding 24, the rest: a .grad whose history leads back to its tensor (set_grad(t,
 * f(t)), backward with create_graph, retained gradients of non-leaves, two tensors each
 * other's .grad) made the tensor own itself. Such a gradient is stored detached (Note
 * [Gradients that hold their tensor]); memory returns to where it was. */
static void test_grad_holding_its_tensor(void **state) {
    (void)state;
    int64_t before = ct_memory_allocated(CT_CPU);
    ct_scope_begin();
    /* set_grad(t, 2 t): the grad's MulBackward ends in t's accumulator */
    ct_tensor *t = ct_arange(ct_scalar_int(1), ct_scalar_int(5), ct_scalar_int(1), CT_F64, CT_CPU);
    CT_ASSERT_OK(ct_tensor_set_requires_grad(t, true));
    ct_tensor *g = ct_mul_scalar(t, ct_scalar_float(2));
    assert_true(ct_tensor_grad_fn_name(g) != NULL);
    assert_int_equal(ct_tensor_set_grad(t, g), CT_OK);
    ct_tensor *tg = ct_tensor_grad(t);
    assert_null(ct_tensor_grad_fn_name(tg));
    assert_false(ct_tensor_requires_grad(tg));
    assert_true(ct_test_at(tg, 3) == 8.0);
    assert_true(ct_tensor_data(tg) == ct_tensor_data(g)); /* the same values, not a copy */
    /* a grad whose history does not reach t keeps it */
    ct_tensor *w = ct_ones(CT_SHAPE(4), CT_F64, CT_CPU);
    CT_ASSERT_OK(ct_tensor_set_requires_grad(w, true));
    assert_int_equal(ct_tensor_set_grad(t, ct_exp(w)), CT_OK);
    assert_string_equal(ct_tensor_grad_fn_name(ct_tensor_grad(t)), "ExpBackward0");
    /* ... until w's grad leads back to t: t -> exp(w) -> w -> w.grad -> t */
    assert_int_equal(ct_tensor_set_grad(w, ct_sin(t)), CT_OK);
    assert_null(ct_tensor_grad_fn_name(ct_tensor_grad(w)));
    /* plain tensors as each other's grad */
    ct_tensor *a = ct_zeros(CT_SHAPE(3), CT_F32, CT_CPU), *b = ct_ones(CT_SHAPE(3), CT_F32, CT_CPU);
    assert_int_equal(ct_tensor_set_grad(a, b), CT_OK);
    assert_int_equal(ct_tensor_set_grad(b, a), CT_OK);
    ct_tensor *ag = ct_tensor_grad(a), *bg = ct_tensor_grad(b);
    assert_ptr_equal(ag, b);
    assert_true(bg != a && ct_tensor_data(bg) == ct_tensor_data(a));
    ct_scope_end();
    assert_int_equal(ct_memory_allocated(CT_CPU), before);

    /* backward with create_graph: d/dx sum(x^3) = 3 x^2 saves x */
    ct_scope_begin();
    ct_tensor *x = ct_arange(ct_scalar_int(1), ct_scalar_int(4), ct_scalar_int(1), CT_F64, CT_CPU);
    CT_ASSERT_OK(ct_tensor_set_requires_grad(x, true));
    ct_tensor *y = ct_mul(x, x); /* a non-leaf retaining its gradient 2 y z' ... */
    assert_int_equal(ct_tensor_retain_grad(y), CT_OK);
    ct_tensor *z = ct_sum(ct_mul(y, x), NULL, 0, false, CT_DTYPE_UNDEFINED);
    assert_int_equal(ct_backward(z, NULL, false, true), CT_OK);
    ct_tensor *gx = ct_tensor_grad(x), *gy = ct_tensor_grad(y);
    assert_null(ct_tensor_grad_fn_name(gx));
    assert_true(ct_test_at(gx, 0) == 3.0 && ct_test_at(gx, 2) == 27.0);
    assert_true(ct_test_at(gy, 1) == 2.0); /* dz/dy = x */
    /* a second backward with create_graph accumulates, still without history */
    assert_int_equal(ct_backward(ct_sum(ct_mul(x, x), NULL, 0, false, CT_DTYPE_UNDEFINED), NULL, false, true), CT_OK);
    gx = ct_tensor_grad(x);
    assert_null(ct_tensor_grad_fn_name(gx));
    assert_true(ct_test_at(gx, 2) == 33.0);
    ct_scope_end();
    assert_int_equal(ct_memory_allocated(CT_CPU), before);

    /* an in-place op closing the cycle: w.grad = u * u saves u, then u.mul_(w) gives u
     * a node that saves w; w's .grad goes detached, u's history stays */
    ct_scope_begin();
    ct_tensor *a0 = ct_full(CT_SHAPE(3), ct_scalar_float(3), CT_F64, CT_CPU);
    CT_ASSERT_OK(ct_tensor_set_requires_grad(a0, true));
    ct_tensor *u = ct_clone(a0);
    ct_tensor *w2 = ct_full(CT_SHAPE(3), ct_scalar_float(2), CT_F64, CT_CPU);
    CT_ASSERT_OK(ct_tensor_set_requires_grad(w2, true));
    assert_int_equal(ct_tensor_set_grad(w2, ct_mul(u, u)), CT_OK);
    assert_string_equal(ct_tensor_grad_fn_name(ct_tensor_grad(w2)), "MulBackward0");
    CT_ASSERT_OK(ct_mul_(u, w2));
    assert_string_equal(ct_tensor_grad_fn_name(u), "MulBackward0");
    ct_tensor *wg = ct_tensor_grad(w2);
    assert_null(ct_tensor_grad_fn_name(wg));
    assert_true(ct_test_at(wg, 1) == 9.0);
    /* and on a view of u: the base's CopySlices holds the node */
    ct_tensor *u2 = ct_clone(a0);
    assert_int_equal(ct_tensor_set_grad(w2, ct_mul(u2, u2)), CT_OK);
    CT_ASSERT_OK(ct_mul_(ct_view(u2, CT_SHAPE(3)), w2));
    assert_null(ct_tensor_grad_fn_name(ct_tensor_grad(w2)));
    assert_int_equal(ct_backward(ct_sum(u2, NULL, 0, false, CT_DTYPE_UNDEFINED), NULL, false, false), CT_OK);
    assert_true(ct_test_at(ct_tensor_grad(a0), 0) == 2.0);
    ct_scope_end();
    assert_int_equal(ct_memory_allocated(CT_CPU), before);
}

/* ------------------------------------------------------------------ allocation failures */

/* ct_scope_begin.c: no memory for a scope's mark aborted. */
static void *scope_thread(void *arg) {
    (void)arg;
    int *ok = calloc(1, sizeof *ok);
    assert_int_equal(ct_scope_begin(), CT_OK); /* the first scope needs no memory */
    /* the core's zeros: ct_zeros dispatches, and the dispatcher's own scope would make
     * the mark of scope 2 before the failure is injected */
    ct_tensor *outer = ct_zeros_impl(CT_SHAPE(2), CT_F32, CT_CPU);
    assert_int_equal(ct_memory_set_alloc_conf("fail_host_alloc:1"), CT_OK);
    ct_status st = ct_scope_begin(); /* its mark needs the first allocation */
    ct_memory_set_alloc_conf("fail_host_alloc:0");
    CT_ASSERT_ERR(st == CT_OK, CT_ERROR_OUT_OF_MEMORY, "no memory to open scope 2");
    assert_int_equal(ct_scope_depth(), 2);
    assert_int_equal(ct_scope_begin(), CT_ERROR_OUT_OF_MEMORY); /* merged as well, until it ends */
    ct_tensor *inner = ct_ones(CT_SHAPE(3), CT_F32, CT_CPU);
    assert_ptr_equal(ct_keep(inner), inner);
    ct_scope_end();
    ct_scope_end();
    assert_int_equal(ct_scope_depth(), 1);
    assert_true(ct_test_at(inner, 2) == 1.0); /* lives on in the enclosing scope */
    assert_int_equal(ct_scope_begin(), CT_OK); /* memory again: a scope of its own */
    ct_tensor *t = ct_ones(CT_SHAPE(1), CT_F32, CT_CPU);
    ct_keep(t);
    ct_scope_end();
    assert_true(ct_test_at(t, 0) == 1.0 && ct_test_at(outer, 1) == 0.0);
    ct_scope_end();
    assert_int_equal(ct_scope_depth(), 0);
    *ok = 1;
    return ok;
}

static void test_scope_begin_oom(void **state) {
    (void)state;
    pthread_t th; /* a fresh thread: its scope stack has no memory yet */
    assert_int_equal(pthread_create(&th, NULL, scope_thread, NULL), 0);
    void *r = NULL;
    pthread_join(th, &r);
    assert_non_null(r);
    assert_int_equal(*(int *)r, 1);
    free(r);
}

/* ct_dataloader_next.c: a worker whose start-up allocation failed waited forever. Every
 * host allocation of making a loader with two workers and taking its batches fails in
 * turn: ct_dataloader_new or ct_dataloader_next reports it, nothing hangs. */
static void test_dataloader_oom(void **state) {
    (void)state;
    ct_tensor *x = ct_rand(CT_SHAPE(8, 3), CT_F32, CT_CPU);
    ct_tensor *const fields_in[1] = {x};
    ct_dataset *ds = ct_tensor_dataset_new(fields_in, 1);
    CT_ASSERT_OK(ds);
    int errors = 0, clean = 0;
    alarm(60);
    for (int k = 1; k <= 60; k++) {
        ct_dataloader_options o = ct_dataloader_defaults(4);
        o.num_workers = 2;
        char conf[64];
        snprintf(conf, sizeof conf, "fail_host_alloc:%d", k);
        assert_int_equal(ct_memory_set_alloc_conf(conf), CT_OK);
        ct_clear_error();
        ct_dataloader *dl = ct_dataloader_new(ds, &o);
        int got = 0;
        for (int b = 0; dl && b < 3; b++) {
            ct_scope_begin();
            ct_tensor *batch[1];
            got = ct_dataloader_next(dl, batch);
            if (got < 0)
                b = 3;
            ct_scope_end();
        }
        ct_memory_set_alloc_conf("fail_host_alloc:0");
        if (!dl || got < 0) {
            assert_int_equal(ct_last_status(), CT_ERROR_OUT_OF_MEMORY);
            errors++;
        } else {
            clean++;
        }
        ct_dataloader_free(dl);
    }
    alarm(0);
    print_message("data loader: %d runs failed cleanly, %d absorbed or past the last allocation\n", errors, clean);
    assert_true(errors > 5);
    ct_dataset_free(ds);
    ct_release(x);
}

/* ------------------------------------------------------------------ sanitizer mode */

static void test_sanitize_mode(void **state) {
    (void)state;
    bool caching = ct_memory_caching(CT_CPU);
    assert_int_equal(ct_memory_set_alloc_conf("sanitize:True"), CT_OK);
    assert_false(ct_memory_caching(CT_CPU));
    assert_true(ct_alloc_sanitizing());
    int64_t before = ct_memory_allocated(CT_CPU);
    ct_tensor *t = ct_empty(CT_SHAPE(3), CT_F32, CT_CPU);
    assert_int_equal(ct_memory_allocated(CT_CPU) - before, 12); /* exactly, not 64 */
    ct_release(t);
    assert_int_equal(ct_memory_set_alloc_conf("sanitize:False"), CT_OK);
    assert_true(ct_memory_caching(CT_CPU));
    assert_false(ct_alloc_sanitizing());
    /* back to the build's default */
    ct_memory_set_alloc_conf(caching ? "sanitize:False" : "sanitize:True");
    assert_true(ct_memory_caching(CT_CPU) == caching);
    CT_ASSERT_ERR(ct_memory_set_alloc_conf("sanitize:yes") == CT_OK, CT_ERROR_VALUE, "Expected True or False");
    CT_ASSERT_ERR(ct_memory_set_alloc_conf("fail_host_alloc:-1") == CT_OK, CT_ERROR_VALUE, "whole number");
}

/* Found by the allocation-failure sweep of ctorch train: when the "state" key of an
 * optimizer's state dict could not be stored, its "param_groups" were never freed.
 * Every allocation of ct_optimizer_state_dict fails in turn; LeakSanitizer checks the
 * sanitizer build at exit. */
static void test_optimizer_state_dict_oom(void **state) {
    (void)state;
    ct_tensor *p = ct_ones(CT_SHAPE(3), CT_F32, CT_CPU);
    CT_ASSERT_OK(ct_tensor_set_requires_grad(p, true));
    ct_optim_options o = ct_sgd_options(0.1);
    o.momentum = 0.9;
    ct_optimizer *opt = ct_optimizer_new(CT_OPTIM_SGD, &p, 1, &o);
    CT_ASSERT_OK(opt);
    ct_tensor *g = ct_ones(CT_SHAPE(3), CT_F32, CT_CPU);
    assert_int_equal(ct_tensor_set_grad(p, g), CT_OK);
    assert_int_equal(ct_optimizer_step(opt), CT_OK); /* a momentum buffer in the state */
    int errors = 0;
    for (int k = 1; k <= 200; k++) {
        char conf[64];
        snprintf(conf, sizeof conf, "fail_host_alloc:%d", k);
        assert_int_equal(ct_memory_set_alloc_conf(conf), CT_OK);
        ct_clear_error();
        ct_value *sd = ct_optimizer_state_dict(opt);
        ct_memory_set_alloc_conf("fail_host_alloc:0");
        if (!sd) {
            assert_int_equal(ct_last_status(), CT_ERROR_OUT_OF_MEMORY);
            errors++;
        }
        ct_value_free(sd);
    }
    assert_true(errors > 10);
    ct_optimizer_free(opt);
    ct_release(g);
    ct_release(p);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_value_one_owner),
        cmocka_unit_test(test_pt_nul_key),
        cmocka_unit_test(test_load_huge_file),
        cmocka_unit_test(test_load_special_files),
        cmocka_unit_test(test_print_precision_bound),
        cmocka_unit_test(test_print_huge_stride),
        cmocka_unit_test(test_set_grad_self),
        cmocka_unit_test(test_inplace_input_alias),
        cmocka_unit_test(test_inplace_on_leaf_view),
        cmocka_unit_test(test_grad_holding_its_tensor),
        cmocka_unit_test(test_scope_begin_oom),
        cmocka_unit_test(test_dataloader_oom),
        cmocka_unit_test(test_optimizer_state_dict_oom),
        cmocka_unit_test(test_sanitize_mode),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
