/* The dispatcher: op look-up, overrides (unconditional, conditional, stacked,
 * removed), logging, META and key sets. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "testutil.h"

static int calls;

/* Replaces add on CPU: writes a + b + 100 so the test can tell it ran. */
static ct_status add_plus_100(ct_keyset ks, ct_call *call, void *ud) {
    (void)ks;
    calls++;
    assert_ptr_equal(ud, &calls);
    const ct_tensor *a = ct_call_input(call, 0), *b = ct_call_input(call, 1);
    ct_scope_begin();
    ct_tensor *r = ct_add_scalar(ct_add(a, b), ct_scalar_int(100));
    ct_status st = r ? ct_call_set_output(call, 0, r) : ct_last_status();
    ct_scope_end();
    return st;
}

/* Handles only large inputs; passes small ones to the kernel it replaced. */
static ct_status mul_large_only(ct_keyset ks, ct_call *call, void *ud) {
    (void)ud;
    const ct_tensor *a = ct_call_input(call, 0);
    if (ct_tensor_numel(a) < 1000)
        return ct_call_next(ks, call);
    calls++;
    ct_tensor *r = ct_zeros(ct_tensor_shape(a), ct_tensor_dim(a), ct_tensor_dtype(a), CT_CPU);
    return ct_call_set_output(call, 0, r);
}

static void test_op_find(void **state) {
    (void)state;
    assert_int_equal(ct_op_find("add"), CT_OP_add);
    assert_string_equal(ct_op_name(CT_OP_sigmoid), "sigmoid");
    assert_int_equal(ct_op_find("no_such_op"), -1);
    assert_int_equal(ct_op_find(NULL), -1);
    assert_string_equal(ct_op_name(-5), "unknown_op");
}

static void test_unconditional_override_and_removal(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *a = ct_ones(CT_SHAPE(3), CT_F32, CT_CPU);
    calls = 0;
    /* The override computes with other ops (add), which run their own kernels. */
    int64_t h = ct_op_override(CT_OP_mul, CT_KEY_CPU, add_plus_100, &calls, 0);
    assert_true(h > 0);
    ct_tensor *r = ct_mul(a, a); /* now computes a + a + 100 */
    CT_ASSERT_OK(r);
    assert_true(ct_test_at(r, 0) == 102.0);
    assert_int_equal(calls, 1);
    /* A second override at the same place needs ALLOW_MULTIPLE. */
    CT_ASSERT_ERR(ct_op_override(CT_OP_mul, CT_KEY_CPU, add_plus_100, &calls, 0) > 0, CT_ERROR_RUNTIME,
                  "already has an override");
    assert_int_equal(ct_op_override_remove(h), CT_OK);
    r = ct_mul(a, a);
    assert_true(ct_test_at(r, 0) == 1.0);
    assert_int_equal(calls, 1);
    CT_ASSERT_ERR(ct_op_override_remove(h) == CT_OK, CT_ERROR_VALUE, "no override with handle");
    ct_scope_end();
}

static void test_conditional_override(void **state) {
    (void)state;
    ct_scope_begin();
    calls = 0;
    int64_t h = ct_op_override(CT_OP_mul, CT_KEY_CPU, mul_large_only, NULL, 0);
    assert_true(h > 0);
    ct_tensor *small = ct_full(CT_SHAPE(10), ct_scalar_float(3), CT_F32, CT_CPU);
    ct_tensor *big = ct_full(CT_SHAPE(2000), ct_scalar_float(3), CT_F32, CT_CPU);
    assert_true(ct_test_at(ct_mul(small, small), 0) == 9.0); /* fell back to the default */
    assert_int_equal(calls, 0);
    assert_true(ct_test_at(ct_mul(big, big), 0) == 0.0); /* the override ran */
    assert_int_equal(calls, 1);
    /* Stacked: the newest runs first, and ct_call_next walks down the stack. */
    int64_t h2 = ct_op_override(CT_OP_mul, CT_KEY_CPU, mul_large_only, NULL, CT_OVERRIDE_ALLOW_MULTIPLE);
    assert_true(h2 > h);
    assert_true(ct_test_at(ct_mul(small, small), 0) == 9.0);
    assert_int_equal(ct_op_override_remove(h), CT_OK); /* remove the lower one first */
    assert_true(ct_test_at(ct_mul(big, big), 0) == 0.0);
    assert_int_equal(ct_op_override_remove(h2), CT_OK);
    assert_true(ct_test_at(ct_mul(big, big), 0) == 9.0);
    ct_scope_end();
}

static void test_override_errors(void **state) {
    (void)state;
    CT_ASSERT_ERR(ct_op_override(-1, CT_KEY_CPU, mul_large_only, NULL, 0) > 0, CT_ERROR_VALUE, "unknown op");
    CT_ASSERT_ERR(ct_op_override(CT_OP_add, (ct_dispatch_key)99, mul_large_only, NULL, 0) > 0, CT_ERROR_VALUE,
                  "unknown dispatch key");
    CT_ASSERT_ERR(ct_op_override(CT_OP_add, CT_KEY_CPU, NULL, NULL, 0) > 0, CT_ERROR_NULL_ARGUMENT, "kernel");
    CT_ASSERT_ERR(ct_op_override_remove(0) == CT_OK, CT_ERROR_VALUE, "invalid override handle");
}

/* An override on the META key: lets a user see every op a model would run. */
static ct_status count_meta(ct_keyset ks, ct_call *call, void *ud) {
    (*(int *)ud)++;
    return ct_call_next(ks, call);
}

static void test_meta_backend(void **state) {
    (void)state;
    ct_scope_begin();
    int seen = 0;
    int64_t h = ct_op_override(CT_OP_exp, CT_KEY_META, count_meta, &seen, 0);
    int64_t before = ct_memory_allocated(CT_CPU);
    ct_tensor *x = ct_empty(CT_SHAPE(4096, 4096), CT_F32, CT_META);
    ct_tensor *w = ct_empty(CT_SHAPE(4096), CT_I32, CT_META);
    ct_tensor *y = ct_exp(ct_add(x, w));
    CT_ASSERT_SHAPE(y, 4096, 4096);
    assert_int_equal(ct_tensor_dtype(y), CT_F32);
    assert_true(ct_tensor_device(y).type == CT_DEVICE_META);
    assert_null(ct_tensor_data(y));
    assert_int_equal(ct_memory_allocated(CT_CPU), before); /* no data anywhere */
    assert_int_equal(seen, 1);
    ct_op_override_remove(h);
    ct_scope_end();
}

static void test_logging_to_file(void **state) {
    (void)state;
    char path[] = "/tmp/ct_log_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    ct_scope_begin();
    assert_int_equal(ct_set_op_logging(true, path), CT_OK);
    assert_true(ct_op_logging_enabled());
    ct_tensor *a = ct_ones(CT_SHAPE(2, 3), CT_F32, CT_CPU);
    ct_tensor *b = ct_ones(CT_SHAPE(3), CT_I64, CT_CPU);
    ct_add(a, b);
    ct_mul_(a, a);
    ct_add(a, ct_ones(CT_SHAPE(5), CT_F32, CT_CPU)); /* an error is logged too */
    ct_clear_error();
    assert_int_equal(ct_set_op_logging(false, NULL), CT_OK);
    ct_sub(a, a); /* not logged */
    ct_scope_end();
    FILE *f = fopen(path, "r");
    char buf[2048] = {0};
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    unlink(path);
    assert_true(n > 0);
    assert_non_null(strstr(buf, "[ct] add(f32[2, 3] cpu, i64[3] cpu) -> f32[2, 3] cpu\n"));
    assert_non_null(strstr(buf, "[ct] mul_(f32[2, 3] cpu, f32[2, 3] cpu) -> f32[2, 3] cpu\n"));
    assert_non_null(strstr(buf, "-> error: add: The size of tensor"));
    assert_null(strstr(buf, "sub"));
    CT_ASSERT_ERR(ct_set_op_logging(true, "/nonexistent-dir/x.log") == CT_OK, CT_ERROR_IO, "cannot open");
    ct_set_op_logging(false, NULL);
}

static void test_keysets(void **state) {
    (void)state;
    ct_keyset ks = CT_KEYSET(CT_KEY_CPU) | CT_KEYSET(CT_KEY_AUTOGRAD) | CT_KEYSET(CT_KEY_LOGGING);
    assert_int_equal(ct_keyset_highest(ks), CT_KEY_LOGGING);
    assert_int_equal(ct_keyset_highest(ct_keyset_below(ks, CT_KEY_LOGGING)), CT_KEY_AUTOGRAD);
    assert_int_equal(ct_keyset_highest(ct_keyset_below(ks, CT_KEY_AUTOGRAD)), CT_KEY_CPU);
    assert_int_equal(ct_keyset_highest(0), CT_KEY_COUNT);
    assert_string_equal(ct_dispatch_key_name(CT_KEY_AUTOGRAD), "Autograd");
}

/* Note [Key numbers and priorities]: the numbers of the existing keys are ABI, kept
 * forever; a new key is appended. Renumbering one fails here at compile time. */
_Static_assert(CT_KEY_CPU == 0, "dispatch key numbers are ABI: append new keys, never renumber");
_Static_assert(CT_KEY_META == 1, "dispatch key numbers are ABI: append new keys, never renumber");
_Static_assert(CT_KEY_CUDA == 2, "dispatch key numbers are ABI: append new keys, never renumber");
_Static_assert(CT_KEY_AUTOGRAD == 3, "dispatch key numbers are ABI: append new keys, never renumber");
_Static_assert(CT_KEY_AUTOCAST == 4, "dispatch key numbers are ABI: append new keys, never renumber");
_Static_assert(CT_KEY_TRACE == 5, "dispatch key numbers are ABI: append new keys, never renumber");
_Static_assert(CT_KEY_LOGGING == 6, "dispatch key numbers are ABI: append new keys, never renumber");
_Static_assert(CT_KEY_COUNT <= CT_KEY_CAPACITY, "a ct_keyset has CT_KEY_CAPACITY bits");

/* The first line of path made of key names joined by " > " (highest first), as keys;
 * returns how many. */
static int read_priority_line(const char *path, ct_dispatch_key *keys) {
    FILE *f = fopen(path, "r");
    if (!f)
        fail_msg("cannot read %s", path);
    char line[512];
    int n = 0;
    while (n == 0 && fgets(line, sizeof line, f)) {
        char *p = line;
        while (*p == ' ' || *p == '*' || *p == '/')
            p++;
        if (!strstr(p, " > "))
            continue;
        for (char *tok = strtok(p, " >*/\n"); tok; tok = strtok(NULL, " >*/\n")) {
            int k = 0;
            while (k < CT_KEY_COUNT && strcasecmp(ct_dispatch_key_name((ct_dispatch_key)k), tok) != 0)
                k++;
            if (k == CT_KEY_COUNT) { /* not a line of key names */
                n = 0;
                break;
            }
            keys[n++] = (ct_dispatch_key)k;
        }
    }
    fclose(f);
    return n;
}

/* The priority order is the one docs/dispatcher.md and dispatch.h state, the ranks
 * are a permutation, and the key-set helpers follow the ranks. */
static void test_key_priority(void **state) {
    (void)state;
    bool rank_used[CT_KEY_CAPACITY] = {false};
    for (int k = 0; k < CT_KEY_COUNT; k++) {
        int r = ct_dispatch_key_rank[k];
        assert_true(r < CT_KEY_COUNT);
        assert_false(rank_used[r]);
        rank_used[r] = true;
        assert_int_equal(ct_keyset_of((ct_dispatch_key)k), 1u << r);
        assert_int_equal(ct_keyset_highest(ct_keyset_of((ct_dispatch_key)k)), k);
    }
    static const char *const files[] = {CT_SOURCE_DIR "/docs/dispatcher.md", CT_SOURCE_DIR "/include/ctorch/dispatch.h"};
    for (size_t f = 0; f < sizeof files / sizeof files[0]; f++) {
        ct_dispatch_key order[CT_KEY_CAPACITY];
        int n = read_priority_line(files[f], order);
        if (n != CT_KEY_COUNT)
            fail_msg("%s: no line listing the %d keys as \"A > B > ...\" (found %d)", files[f], CT_KEY_COUNT, n);
        for (int i = 0; i + 1 < n; i++) {
            ct_dispatch_key hi = order[i], lo = order[i + 1];
            if (ct_dispatch_key_rank[hi] <= ct_dispatch_key_rank[lo])
                fail_msg("%s says %s > %s; the library ranks them %d and %d", files[f], ct_dispatch_key_name(hi),
                         ct_dispatch_key_name(lo), ct_dispatch_key_rank[hi], ct_dispatch_key_rank[lo]);
            ct_keyset ks = ct_keyset_of(hi) | ct_keyset_of(lo);
            assert_int_equal(ct_keyset_highest(ks), hi);
            assert_int_equal(ct_keyset_below(ks, hi), ct_keyset_of(lo));
            assert_int_equal(ct_keyset_below(ks, lo), 0);
            assert_true(ct_keyset_has(ks, lo) && !ct_keyset_has(ct_keyset_below(ks, hi), hi));
        }
    }
}

static void test_device_mismatch(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *a = ct_ones(CT_SHAPE(3), CT_F32, CT_CPU);
    ct_tensor *m = ct_empty(CT_SHAPE(3), CT_F32, CT_META);
    CT_ASSERT_ERR(ct_add(a, m) != NULL, CT_ERROR_DEVICE, "Expected all tensors to be on the same device");
    /* a 0-d CPU tensor may join a tensor on another device, as in PyTorch */
    ct_tensor *r = ct_add(m, ct_ones(NULL, 0, CT_F32, CT_CPU));
    CT_ASSERT_OK(r);
    assert_true(ct_tensor_device(r).type == CT_DEVICE_META);
    ct_scope_end();
}

/* Allocations made inside an op are attributed to it in allocator traces. */
static void test_allocator_context(void **state) {
    (void)state;
    char path[] = "/tmp/ct_snap_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    assert_int_equal(ct_memory_record_history(true, 1000), CT_OK);
    ct_scope_begin();
    ct_tensor *a = ct_ones(CT_SHAPE(64), CT_F32, CT_CPU);
    ct_tensor *b = ct_sigmoid(a);
    CT_ASSERT_OK(b);
    assert_int_equal(ct_memory_snapshot(CT_CPU, path, CT_SNAPSHOT_JSON), CT_OK);
    ct_scope_end();
    ct_memory_record_history(false, 0);
    FILE *f = fopen(path, "r");
    static char buf[1 << 20];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = 0;
    fclose(f);
    unlink(path);
    assert_non_null(strstr(buf, "sigmoid"));
}

/* Every op with a CPU kernel has a META shape rule and, in a build with the CUDA
 * backend (add has a CUDA kernel), a CUDA kernel: no op falls off the GPU. */
static void test_kernel_coverage(void **state) {
    (void)state;
    bool cuda = ct_op_has_kernel(CT_OP_add, CT_KEY_CUDA);
    int cpu_ops = 0;
    for (ct_op op = 0; op < CT_OP_COUNT; op++) {
        if (!ct_op_has_kernel(op, CT_KEY_CPU))
            continue;
        cpu_ops++;
        if (!ct_op_has_kernel(op, CT_KEY_META))
            fail_msg("%s has a CPU kernel but no META rule", ct_op_name(op));
        if (cuda && !ct_op_has_kernel(op, CT_KEY_CUDA))
            fail_msg("%s has a CPU kernel but no CUDA kernel", ct_op_name(op));
    }
    assert_true(cpu_ops > 100);
    /* composites have none; overrides do not count; bad arguments answer false */
    assert_false(ct_op_has_kernel(CT_OP_linear, CT_KEY_CPU));
    int64_t h = ct_op_override(CT_OP_add, CT_KEY_LOGGING, add_plus_100, NULL, 0);
    assert_true(h > 0);
    assert_false(ct_op_has_kernel(CT_OP_add, CT_KEY_LOGGING));
    assert_int_equal(ct_op_override_remove(h), CT_OK);
    assert_false(ct_op_has_kernel(-1, CT_KEY_CPU));
    assert_false(ct_op_has_kernel(CT_OP_add, (ct_dispatch_key)99));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kernel_coverage),  cmocka_unit_test(test_op_find),          cmocka_unit_test(test_unconditional_override_and_removal),
        cmocka_unit_test(test_conditional_override), cmocka_unit_test(test_override_errors),
        cmocka_unit_test(test_meta_backend),     cmocka_unit_test(test_logging_to_file),
        cmocka_unit_test(test_keysets),          cmocka_unit_test(test_key_priority),
        cmocka_unit_test(test_device_mismatch),
        cmocka_unit_test(test_allocator_context),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
