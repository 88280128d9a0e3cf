/* Loads the shared library with dlopen, as a plugin or a language binding would, runs an
 * op on two threads, and checks the size of the library's TLS block: it uses the
 * initial-exec TLS model (Note [Thread-local storage] in src/core/error.h), so a
 * dlopen'ed copy must fit glibc's static TLS surplus. Not linked against ctorch. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "ctorch.h"

/* Well below glibc's surplus (about 1.6 KiB, shared with other libraries). */
#define CT_TLS_BUDGET 512

static const char *lib_path;
static void *lib;

typedef ct_tensor *(*ones_fn)(const int64_t *, int, ct_dtype, ct_device);
typedef ct_tensor *(*add_fn)(const ct_tensor *, const ct_tensor *);
typedef void *(*data_fn)(const ct_tensor *);
typedef void (*release_fn)(ct_tensor *);
typedef int64_t (*allocated_fn)(ct_device);

static void *sym(const char *name) {
    void *p = dlsym(lib, name);
    if (!p)
        fail_msg("dlsym %s: %s", name, dlerror());
    return p;
}

/* 1 + 1 through the loaded library; 0 when the answer is right. */
static void *add_once(void *arg) {
    (void)arg;
    ones_fn ones = (ones_fn)sym("ct_ones");
    add_fn add = (add_fn)sym("ct_add");
    data_fn data = (data_fn)sym("ct_tensor_data");
    release_fn release = (release_fn)sym("ct_release");
    int64_t shape[1] = {4};
    ct_tensor *a = ones(shape, 1, CT_DTYPE_FLOAT32, CT_CPU);
    intptr_t bad = a == NULL;
    for (int i = 0; !bad && i < 100; i++) {
        ct_tensor *r = add(a, a);
        bad = !r || ((float *)data(r))[3] != 2.0f;
        release(r);
    }
    release(a);
    return (void *)bad;
}

static void test_dlopen_and_run(void **state) {
    (void)state;
    lib = dlopen(lib_path, RTLD_NOW | RTLD_LOCAL);
    if (!lib)
        fail_msg("dlopen %s: %s", lib_path, dlerror());
    assert_null(add_once(NULL));
    pthread_t th;
    void *r;
    assert_int_equal(pthread_create(&th, NULL, add_once, NULL), 0);
    pthread_join(th, &r);
    assert_null(r);
    allocated_fn allocated = (allocated_fn)sym("ct_memory_allocated");
    assert_int_equal(allocated(CT_CPU), 0);
}

static int find_tls(struct dl_phdr_info *info, size_t size, void *out) {
    (void)size;
    if (!info->dlpi_name || !strstr(info->dlpi_name, "libctorch"))
        return 0;
    for (int i = 0; i < info->dlpi_phnum; i++)
        if (info->dlpi_phdr[i].p_type == PT_TLS)
            *(size_t *)out = info->dlpi_phdr[i].p_memsz;
    return 1;
}

static void test_tls_block_is_small(void **state) {
    (void)state;
    size_t tls = SIZE_MAX;
    dl_iterate_phdr(find_tls, &tls);
    assert_true(tls != SIZE_MAX); /* the library is loaded and has thread-locals */
    if (tls > CT_TLS_BUDGET)
        fail_msg("libctorch's TLS block is %zu bytes; keep it under %d (Note [Thread-local storage])", tls,
                 CT_TLS_BUDGET);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s path/to/libctorch.so\n", argv[0]);
        return 2;
    }
    lib_path = argv[1];
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dlopen_and_run),
        cmocka_unit_test(test_tls_block_is_small),
    };
    /* The library stays loaded: its process-wide state (kernel tables, the allocator's
     * cache) lives until exit, where the leak checker still sees it. */
    return cmocka_run_group_tests(tests, NULL, NULL);
}
