/* TunableOp for cuBLASLt (docs/cuda.md, "TunableOp"): tuned products agree with the
 * heuristic's within the dtype's tolerance, each product is tuned once, the results
 * file round-trips (a process that reads it tunes nothing and gets the same bits), a
 * file from another setup or a malformed one is refused with the line at fault, a
 * capture takes the heuristic's algorithm and tunes nothing, and the environment
 * drives a fresh process: the first run writes the file at exit, the second reads it.
 * The settings and the file's errors run in every build with a CUDA backend; the rest
 * is skipped (exit code 77) without a GPU. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cuda_testutil.h"

#define CUDA0 CT_CUDA(0)
#define NPRODUCTS 7


/* call fails and its message holds needle */
#define expect_err(call, needle)                                                                                      \
    do {                                                                                                              \
        ct_status st_ = (call);                                                                                       \
        if (st_ == CT_OK || !strstr(ct_last_error(), (needle)))                                                      \
            fail_msg("%s: expected an error with '%s', got status %d: %s", #call, (needle), (int)st_,                 \
                     ct_last_error());                                                                                \
        ct_clear_error();                                                                                             \
    } while (0)

static char g_dir[256];

static void path_in_dir(char *buf, size_t n, const char *name) { snprintf(buf, n, "%s/%s", g_dir, name); }

static void write_text(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static ct_tensor *gpu_values(const int64_t *shape, int nd, ct_dtype dt, uint64_t seed) {
    return ct_to_device(ct_test_values(shape, nd, dt, -1, 1, seed), CUDA0);
}

/* The products: every dtype, a batch, a transposed operand, beta != 0 and the bias
 * epilogue. out[i] is the i-th result on the host. */
static const char *const product_names[NPRODUCTS] = {"f32 mm", "bf16 mm", "f16 bmm", "bf16 addmm+bias",
                                                     "f32 addmm beta", "f32 mm transposed", "f64 mm"};
static void run_products(ct_tensor **out) {
    ct_tensor *a32 = gpu_values(CT_SHAPE(96, 160), CT_F32, 1), *b32 = gpu_values(CT_SHAPE(160, 72), CT_F32, 2);
    ct_tensor *abf = gpu_values(CT_SHAPE(256, 384), CT_BF16, 3), *bbf = gpu_values(CT_SHAPE(384, 512), CT_BF16, 4);
    ct_tensor *a16 = gpu_values(CT_SHAPE(4, 64, 96), CT_F16, 5), *b16 = gpu_values(CT_SHAPE(4, 96, 80), CT_F16, 6);
    ct_tensor *bias = gpu_values(CT_SHAPE(512), CT_BF16, 7), *c32 = gpu_values(CT_SHAPE(96, 72), CT_F32, 8);
    ct_tensor *bt = gpu_values(CT_SHAPE(72, 160), CT_F32, 9);
    ct_tensor *a64 = gpu_values(CT_SHAPE(48, 64), CT_F64, 10), *b64 = gpu_values(CT_SHAPE(64, 40), CT_F64, 11);
    ct_tensor *r[NPRODUCTS] = {
        ct_mm(a32, b32),
        ct_mm(abf, bbf),
        ct_bmm(a16, b16),
        ct_addmm(bias, abf, bbf, ct_scalar_float(1.0), ct_scalar_float(1.0)),
        ct_addmm(c32, a32, b32, ct_scalar_float(0.5), ct_scalar_float(2.0)),
        ct_mm(a32, ct_t(bt)),
        ct_mm(a64, b64),
    };
    for (int i = 0; i < NPRODUCTS; i++) {
        if (!r[i])
            fail_msg("%s: %s", product_names[i], ct_last_error());
        out[i] = ct_to_device(r[i], CT_CPU);
    }
}

static ct_cuda_tunable_stats stats(void) {
    ct_cuda_tunable_stats s;
    assert_st(ct_cuda_tunable_get_stats(&s));
    return s;
}

static int reset(void **state) {
    (void)state;
    ct_cuda_tunable_enable(false);
    ct_cuda_tunable_tuning_enable(true);
    if (ct_cuda_is_available())
        ct_cuda_tunable_clear();
    ct_clear_error();
    return 0;
}

/* ------------------------------------------------------------------ every build */

static void test_settings(void **state) {
    (void)state;
    assert_false(ct_cuda_tunable_is_enabled());
    ct_cuda_tunable_enable(true);
    assert_true(ct_cuda_tunable_is_enabled());
    ct_cuda_tunable_enable(false);
    assert_true(ct_cuda_tunable_tuning_is_enabled());
    ct_cuda_tunable_tuning_enable(false);
    assert_false(ct_cuda_tunable_tuning_is_enabled());
    ct_cuda_tunable_tuning_enable(true);
    assert_string_equal(ct_cuda_tunable_get_filename(), "tunableop_results.csv");
    expect_err(ct_cuda_tunable_set_filename(NULL, true), "NULL");
    expect_err(ct_cuda_tunable_set_filename("", true), "1 to");
    char longname[2000];
    memset(longname, 'x', sizeof longname - 1);
    longname[sizeof longname - 1] = '\0';
    expect_err(ct_cuda_tunable_set_filename(longname, true), "1 to");
    expect_err(ct_cuda_tunable_set_max_tuning_duration(0), "at least 1");
    expect_err(ct_cuda_tunable_set_max_tuning_iterations(-3), "at least 1");
    expect_err(ct_cuda_tunable_get_stats(NULL), "NULL");
    char path[300];
    path_in_dir(path, sizeof path, "r.csv");
    assert_st(ct_cuda_tunable_set_filename(path, false));
    assert_string_equal(ct_cuda_tunable_get_filename(), path);
    /* the rest of the program keeps its files out of the working directory */
    path_in_dir(path, sizeof path, "default.csv");
    assert_st(ct_cuda_tunable_set_filename(path, true));
}

/* Without a device the functions that need one say so. */
static void test_no_device(void **state) {
    (void)state;
    if (ct_cuda_is_available())
        skip();
    ct_cuda_tunable_stats s;
    assert_int_not_equal(ct_cuda_tunable_get_stats(&s), CT_OK);
    assert_int_not_equal(ct_cuda_tunable_write_file(NULL), CT_OK);
    assert_int_not_equal(ct_cuda_tunable_read_file(NULL), CT_OK);
    assert_int_not_equal(ct_cuda_tunable_clear(), CT_OK);
    /* a well-formed file passes the checks and then has no device to go to */
    char path[300];
    path_in_dir(path, sizeof path, "good.csv");
    write_text(path, "Validator,CTORCH_VERSION,0.1.0\nValidator,CUBLASLT_VERSION,1\n"
                     "Validator,CUDA_RUNTIME_VERSION,1\nValidator,DEVICE,none\n");
    assert_int_equal(ct_cuda_tunable_read_file(path), CT_ERROR_DEVICE);
    ct_clear_error();
}

/* A malformed file is refused with the line at fault, before the backend and the
 * device are asked for: in every build. */
static void test_malformed_files(void **state) {
    (void)state;
    char path[300];
    path_in_dir(path, sizeof path, "bad.csv");
    expect_err(ct_cuda_tunable_read_file("/nonexistent/dir/results.csv"), "/nonexistent/dir/results.csv");
    const char *hex = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"
                      "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";
    static const struct {
        const char *text, *needle;
    } cases[] = {
        {"Validator,CTORCH_VERSION\n", ":1: expected Validator"},
        {"Validator,NO_SUCH,1\n", ":1: expected Validator"},
        {"Validator,CTORCH_VERSION,0.1.0\nGemm_f32,m1,%s,0.1,0.1\n", ":2: expected GemmLt_"},
        {"\nGemmLt_f32,m1,0011,0.1,0.1\n", ":2: expected GemmLt_"},
        {"GemmLt_f32,m1,%s,fast,0.1\n", ":1: expected GemmLt_"},
        {"GemmLt_f32,m1,%s,0.1,0.1,extra\n", ":1: expected GemmLt_"},
        {"GemmLt_f32,m1,%s,-1,0.1\n", ":1: expected GemmLt_"},
        {"GemmLt_f32,m1,%s,0.1,0.1\n", "no Validator,CTORCH_VERSION line"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char text[1024];
        snprintf(text, sizeof text, cases[i].text, hex);
        write_text(path, text);
        ct_status st = ct_cuda_tunable_read_file(path);
        if (st == CT_OK || !strstr(ct_last_error(), cases[i].needle))
            fail_msg("case %zu: expected '%s' in: %s", i, cases[i].needle, ct_last_error());
    }
    char text[1024];
    snprintf(text, sizeof text, "GemmLt_f32,m1,%.127sg,0.1,0.1\n", hex);
    write_text(path, text); /* a character that is no hex digit */
    expect_err(ct_cuda_tunable_read_file(path), ":1: expected GemmLt_");
    ct_clear_error();
}

/* ------------------------------------------------------------------ on a GPU */

static void assert_close_all(ct_tensor **got, ct_tensor **want, const char *what) {
    for (int i = 0; i < NPRODUCTS; i++) {
        double rtol, atol;
        ct_test_tolerance(ct_tensor_dtype(want[i]), &rtol, &atol);
        /* another algorithm sums in another order: a few roundings of the dtype, on
         * sums of up to 384 products of values in [-1, 1] */
        rtol *= 50;
        atol *= 50;
        char label[96];
        snprintf(label, sizeof label, "%s: %s", what, product_names[i]);
        ct_test_assert_close(got[i], want[i], rtol, atol, label, __FILE__, __LINE__);
    }
}

static void assert_same_bits(ct_tensor **got, ct_tensor **want, const char *what) {
    for (int i = 0; i < NPRODUCTS; i++)
        if (!ct_test_same_bits(got[i], want[i]))
            fail_msg("%s: %s: the bits differ", what, product_names[i]);
}

static int count_lines(const char *path, const char *prefix) {
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    char line[1024];
    int n = 0;
    while (fgets(line, sizeof line, f))
        n += strncmp(line, prefix, strlen(prefix)) == 0;
    fclose(f);
    return n;
}

static void test_tune_write_read(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *heur[NPRODUCTS], *tuned[NPRODUCTS], *again[NPRODUCTS], *loaded[NPRODUCTS];
    run_products(heur); /* TunableOp off: the heuristic's algorithms, and cuBLAS's handles */
    ct_cuda_tunable_stats s = stats();
    assert_int_equal(s.results, 0);
    assert_int_equal(s.tuned, 0);

    ct_cuda_tunable_enable(true);
    run_products(tuned);
    s = stats();
    assert_int_equal(s.tuned, NPRODUCTS); /* seven keys, each tuned once */
    assert_int_equal(s.results, NPRODUCTS);
    assert_int_equal(s.read, 0);
    assert_true(s.candidates >= NPRODUCTS);
    assert_true(s.tuning_ms > 0);
    assert_close_all(tuned, heur, "tuned against the heuristic");
    double spent = s.tuning_ms;

    run_products(again); /* tuned already: nothing more, the same algorithms */
    s = stats();
    assert_int_equal(s.tuned, NPRODUCTS);
    assert_true(s.tuning_ms == spent);
    assert_same_bits(again, tuned, "second run");

    char path[300];
    path_in_dir(path, sizeof path, "results.csv");
    assert_st(ct_cuda_tunable_write_file(path));
    assert_int_equal(count_lines(path, "Validator,"), 4);
    assert_int_equal(count_lines(path, "GemmLt_"), NPRODUCTS);

    /* a fresh table that reads the file and may not tune: same bits, no tuning */
    assert_st(ct_cuda_tunable_clear());
    assert_int_equal(stats().results, 0);
    ct_cuda_tunable_tuning_enable(false);
    assert_st(ct_cuda_tunable_read_file(path));
    s = stats();
    assert_int_equal(s.read, NPRODUCTS);
    assert_int_equal(s.tuned, 0);
    run_products(loaded);
    s = stats();
    assert_int_equal(s.tuned, 0);
    assert_int_equal(s.results, NPRODUCTS); /* every result read passed cuBLASLt's check */
    assert_true(s.tuning_ms == 0);
    assert_same_bits(loaded, tuned, "results read from the file");

    /* reading again adds nothing: the results already there win */
    assert_st(ct_cuda_tunable_read_file(path));
    assert_int_equal(stats().results, NPRODUCTS);

    /* disabled: back to the heuristic's algorithms */
    ct_cuda_tunable_enable(false);
    ct_tensor *off[NPRODUCTS];
    run_products(off);
    assert_same_bits(off, heur, "TunableOp off");
    ct_scope_end();
}

/* A file made elsewhere is refused, whole, naming the validator. */
static void test_refused_file(void **state) {
    (void)state;
    ct_scope_begin();
    ct_cuda_tunable_enable(true);
    ct_tensor *r[NPRODUCTS];
    run_products(r);
    char path[300], other[300];
    path_in_dir(path, sizeof path, "mine.csv");
    path_in_dir(other, sizeof other, "other.csv");
    assert_st(ct_cuda_tunable_write_file(path));
    static const char *const names[] = {"CTORCH_VERSION", "CUBLASLT_VERSION", "CUDA_RUNTIME_VERSION", "DEVICE"};
    for (int v = 0; v < 4; v++) {
        FILE *in = fopen(path, "r"), *out = fopen(other, "w");
        assert_non_null(in);
        assert_non_null(out);
        char line[1024], prefix[64];
        snprintf(prefix, sizeof prefix, "Validator,%s,", names[v]);
        while (fgets(line, sizeof line, in))
            if (strncmp(line, prefix, strlen(prefix)) == 0)
                fprintf(out, "%sfrom elsewhere\n", prefix);
            else
                fputs(line, out);
        fclose(in);
        fclose(out);
        assert_st(ct_cuda_tunable_clear());
        ct_status st = ct_cuda_tunable_read_file(other);
        assert_int_not_equal(st, CT_OK);
        if (!strstr(ct_last_error(), names[v]) || !strstr(ct_last_error(), "refused"))
            fail_msg("%s: %s", names[v], ct_last_error());
        assert_int_equal(stats().results, 0);
    }
    ct_clear_error();
    ct_scope_end();
}

/* Inside a capture the heuristic's algorithm is used and nothing is tuned; the next
 * eager run tunes. */
static void test_capture(void **state) {
    (void)state;
    ct_scope_begin();
    ct_tensor *a = gpu_values(CT_SHAPE(128, 256), CT_BF16, 21), *b = gpu_values(CT_SHAPE(256, 192), CT_BF16, 22);
    ct_tensor *want = ct_to_device(ct_mm(a, b), CT_CPU); /* warm-up, TunableOp off */
    ct_cuda_stream *stream = NULL;
    assert_st(ct_cuda_stream_create(0, 0, &stream));
    assert_st(ct_cuda_synchronize(0));
    assert_st(ct_cuda_set_stream(0, stream));
    ct_cuda_tunable_enable(true);
    ct_tensor *out = NULL;
    assert_st(ct_cuda_graph_begin(stream, NULL));
    out = ct_mm(a, b);
    ct_cuda_graph *g = NULL;
    ct_status st = ct_cuda_graph_end(stream, &g);
    assert_non_null(out);
    assert_st(st);
    assert_int_equal(stats().tuned, 0);
    assert_st(ct_cuda_graph_replay(g));
    assert_st(ct_cuda_stream_synchronize(stream));
    if (!ct_test_same_bits(ct_to_device(out, CT_CPU), want))
        fail_msg("the captured product differs from the heuristic's");
    ct_cuda_graph_free(g);
    assert_st(ct_cuda_set_stream(0, NULL));
    assert_st(ct_cuda_stream_destroy(stream));
    assert_non_null(ct_mm(a, b));
    assert_int_equal(stats().tuned, 1);
    ct_scope_end();
}

/* The environment drives a fresh process (this program with --child): the first run
 * tunes and writes the file at exit, the second reads it and tunes nothing. */
static void child_counts(const char *file, long long *tuned, long long *read) {
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "CT_TUNABLEOP=1 CT_TUNABLEOP_FILENAME='%s' /proc/%d/exe --child", file, (int)getpid());
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    char line[256] = "";
    char *got = fgets(line, sizeof line, p);
    int rc = pclose(p);
    if (!got || rc != 0 || sscanf(line, "tuned=%lld read=%lld", tuned, read) != 2)
        fail_msg("child: exit %d, said: %s", rc, line);
}

static void test_environment(void **state) {
    (void)state;
    char file[300], dev0[300];
    path_in_dir(file, sizeof file, "env.csv");
    path_in_dir(dev0, sizeof dev0, "env0.csv"); /* the device's ordinal goes in */
    unlink(dev0);
    long long tuned = -1, read = -1;
    child_counts(file, &tuned, &read);
    assert_int_equal(tuned, NPRODUCTS);
    assert_int_equal(read, 0);
    assert_int_equal(count_lines(dev0, "GemmLt_"), NPRODUCTS);
    child_counts(file, &tuned, &read);
    assert_int_equal(tuned, 0);
    assert_int_equal(read, NPRODUCTS);
    /* a file from another setup: refused with a warning, tuned again, rewritten */
    write_text(dev0, "Validator,CTORCH_VERSION,0.0.0\nValidator,CUBLASLT_VERSION,1\n"
                     "Validator,CUDA_RUNTIME_VERSION,1\nValidator,DEVICE,none\n");
    child_counts(file, &tuned, &read);
    assert_int_equal(tuned, NPRODUCTS);
    assert_int_equal(read, 0);
    assert_int_equal(count_lines(dev0, "GemmLt_"), NPRODUCTS);
}

static int child(void) {
    ct_scope_begin();
    ct_tensor *r[NPRODUCTS];
    run_products(r);
    for (int i = 0; i < NPRODUCTS; i++)
        if (!r[i])
            return 1;
    ct_cuda_tunable_stats s;
    if (ct_cuda_tunable_get_stats(&s) != CT_OK)
        return 1;
    printf("tuned=%lld read=%lld\n", (long long)s.tuned, (long long)s.read);
    ct_scope_end();
    return 0;
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "--child") == 0)
        return child();
    snprintf(g_dir, sizeof g_dir, "%s/ct_tunable_XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(g_dir)) {
        perror("mkdtemp");
        return 1;
    }
    const struct CMUnitTest always[] = {
        cmocka_unit_test_teardown(test_settings, reset),
        cmocka_unit_test_teardown(test_no_device, reset),
        cmocka_unit_test_teardown(test_malformed_files, reset),
    };
    int rc = cmocka_run_group_tests_name("every build", always, NULL, NULL);
    int skip = ct_test_require_gpu("test_cuda_tunable");
    if (!skip) {
        const struct CMUnitTest gpu[] = {
            cmocka_unit_test_setup_teardown(test_tune_write_read, reset, reset),
            cmocka_unit_test_setup_teardown(test_refused_file, reset, reset),
            cmocka_unit_test_setup_teardown(test_capture, reset, reset),
            cmocka_unit_test_setup_teardown(test_environment, reset, reset),
        };
        rc |= cmocka_run_group_tests_name("gpu", gpu, NULL, NULL);
    }
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", g_dir);
    return rc ? rc : skip;
}
