/* Profiler (Chrome trace), structured log (TORCH_TRACE format), md5, trace-report.
 *
 * Run with --child, the program runs a few ops and exits: the CT_PROFILE / CT_TRACE
 * tests run it that way in a child process with the variable set. */
#include <dirent.h>
#include <pthread.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "alloc_fake.h"
#include "util/md5.h"
#include "util/json.h"
#include "util/value.h"
#include "cpu/blas.h"
#include "cpu/cpu_isa.h"
#include "testutil.h"

/* ------------------------------------------------------------------ helpers */

static char *slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    if (buf) {
        buf[n] = '\0';
        if (len)
            *len = (size_t)n;
    }
    return buf;
}

static ct_value *load_json(const char *path) {
    size_t len;
    char *text = slurp(path, &len);
    if (!text)
        fail_msg("cannot read %s", path);
    ct_value *v = ct_json_parse(text, len, "test", path);
    if (!v)
        fail_msg("%s is not valid JSON: %s", path, ct_last_error());
    free(text);
    return v;
}

static const char *str_of(const ct_value *obj, const char *key) {
    ct_value *v = ct_value_get(obj, key);
    ct_clear_error();
    return v && v->type == CT_VALUE_STRING ? v->u.s.data : NULL;
}

static double num_of(const ct_value *obj, const char *key) {
    ct_value *v = ct_value_get(obj, key);
    ct_clear_error();
    assert_non_null(v);
    return ct_value_float(v);
}

static ct_value *events_of(ct_value *doc) {
    assert_int_equal(doc->type, CT_VALUE_DICT);
    ct_value *ev = ct_value_get(doc, "traceEvents");
    assert_non_null(ev);
    assert_int_equal(ev->type, CT_VALUE_LIST);
    return ev;
}

/* The first complete event named name (after index `after`), or NULL. */
static ct_value *find_span(ct_value *events, const char *name, int64_t *index) {
    for (int64_t i = index ? *index + 1 : 0; i < ct_value_len(events); i++) {
        ct_value *e = ct_value_at(events, i);
        const char *ph = str_of(e, "ph"), *n = str_of(e, "name");
        if (ph && n && strcmp(ph, "X") == 0 && strcmp(n, name) == 0) {
            if (index)
                *index = i;
            return e;
        }
    }
    return NULL;
}

static int64_t count_ph(ct_value *events, const char *ph, const char *name) {
    int64_t n = 0;
    for (int64_t i = 0; i < ct_value_len(events); i++) {
        ct_value *e = ct_value_at(events, i);
        const char *p = str_of(e, "ph"), *nm = str_of(e, "name");
        if (p && strcmp(p, ph) == 0 && (!name || (nm && strcmp(nm, name) == 0)))
            n++;
    }
    return n;
}

static void assert_nested(const ct_value *outer, const ct_value *inner) {
    assert_true(num_of(outer, "tid") == num_of(inner, "tid"));
    double os = num_of(outer, "ts"), oe = os + num_of(outer, "dur");
    double is = num_of(inner, "ts"), ie = is + num_of(inner, "dur");
    assert_true(os <= is + 1e-6);
    assert_true(ie <= oe + 1e-6);
}

/* Every pair of complete events on one thread is nested or disjoint. */
static void assert_spans_well_nested(ct_value *events) {
    int64_t n = ct_value_len(events);
    for (int64_t i = 0; i < n; i++) {
        ct_value *a = ct_value_at(events, i);
        if (strcmp(str_of(a, "ph"), "X") != 0)
            continue;
        for (int64_t j = i + 1; j < n; j++) {
            ct_value *b = ct_value_at(events, j);
            if (strcmp(str_of(b, "ph"), "X") != 0 || num_of(a, "tid") != num_of(b, "tid"))
                continue;
            double as = num_of(a, "ts"), ae = as + num_of(a, "dur");
            double bs = num_of(b, "ts"), be = bs + num_of(b, "dur");
            bool disjoint = ae <= bs + 1e-6 || be <= as + 1e-6;
            bool nested = (as <= bs + 1e-6 && be <= ae + 1e-6) || (bs <= as + 1e-6 && ae <= be + 1e-6);
            if (!disjoint && !nested)
                fail_msg("spans %s and %s overlap without nesting", str_of(a, "name"), str_of(b, "name"));
        }
    }
}

static char g_tmp[256];

static int make_tmp(void **state) {
    (void)state;
    snprintf(g_tmp, sizeof g_tmp, "/tmp/ct_profiler_XXXXXX");
    return mkdtemp(g_tmp) ? 0 : -1;
}

static void rm_tree(const char *path) {
    DIR *d = opendir(path);
    if (d) {
        struct dirent *de;
        while ((de = readdir(d)) != NULL) {
            if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
                continue;
            char sub[1024];
            snprintf(sub, sizeof sub, "%s/%s", path, de->d_name);
            rm_tree(sub);
        }
        closedir(d);
        rmdir(path);
    } else {
        unlink(path);
    }
}

static int rm_tmp(void **state) {
    (void)state;
    rm_tree(g_tmp);
    return 0;
}

static bool file_exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* ------------------------------------------------------------------ md5 */

static void md5_known_vectors(void **state) {
    (void)state;
    /* RFC 1321, appendix A.5 */
    static const char *const vec[][2] = {
        {"", "d41d8cd98f00b204e9800998ecf8427e"},
        {"a", "0cc175b9c0f1b6a831c399e269772661"},
        {"abc", "900150983cd24fb0d6963f7d28e17f72"},
        {"message digest", "f96b697d7cb7938d525a2f31aaf161d0"},
        {"abcdefghijklmnopqrstuvwxyz", "c3fcd3d76192e4007dfb496cca67e13b"},
        {"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789", "d174ab98d277d9f5a5611c2c9f419d9f"},
        {"12345678901234567890123456789012345678901234567890123456789012345678901234567890",
         "57edf4a22be3c955ac49da2e2107b67a"},
    };
    char hex[33];
    for (size_t i = 0; i < sizeof vec / sizeof vec[0]; i++) {
        ct_md5_hex(vec[i][0], strlen(vec[i][0]), hex);
        assert_string_equal(hex, vec[i][1]);
    }
    /* a million 'a', fed in uneven pieces: block boundaries inside updates */
    char *m = malloc(1000000);
    assert_non_null(m);
    memset(m, 'a', 1000000);
    ct_md5_ctx c;
    uint8_t d[16];
    ct_md5_init(&c);
    size_t off = 0, step = 1;
    while (off < 1000000) {
        size_t n = step < 1000000 - off ? step : 1000000 - off;
        ct_md5_update(&c, m + off, n);
        off += n;
        step = step * 7 % 131 + 1;
    }
    ct_md5_final(&c, d);
    static const uint8_t want[16] = {0x77, 0x07, 0xd6, 0xae, 0x4e, 0x02, 0x7c, 0x70,
                                     0xee, 0xa2, 0xa9, 0x35, 0xc2, 0x29, 0x6f, 0x21};
    assert_memory_equal(d, want, 16);
    /* lengths around the 56-byte padding edge agree between one-shot and byte-wise */
    for (size_t len = 50; len < 70; len++) {
        char one[33], two[33];
        ct_md5_hex(m, len, one);
        ct_md5_init(&c);
        for (size_t i = 0; i < len; i++)
            ct_md5_update(&c, m + i, 1);
        ct_md5_final(&c, d);
        for (int i = 0; i < 16; i++)
            snprintf(two + 2 * i, 3, "%02x", d[i]);
        assert_string_equal(one, two);
    }
    free(m);
}

/* ------------------------------------------------------------------ profiler */

/* An override of add that calls mul first: an op inside an op. */
static ct_status add_calls_mul(ct_keyset ks, ct_call *call, void *ud) {
    (void)ud;
    ct_tensor *t = ct_mul(ct_call_input(call, 0), ct_call_input(call, 1));
    if (!t)
        return ct_last_status();
    return ct_call_next(ks, call);
}

static void profiler_spans_and_nesting(void **state) {
    (void)state;
    char path[512];
    snprintf(path, sizeof path, "%s/trace.json", g_tmp);
    ct_tensor *a = ct_ones(CT_SHAPE(4, 5), CT_DTYPE_FLOAT32, CT_CPU);
    ct_tensor *b = ct_ones(CT_SHAPE(5, 3), CT_DTYPE_FLOAT32, CT_CPU);
    CT_ASSERT_OK(a);
    CT_ASSERT_OK(b);
    int64_t h = ct_op_override(ct_op_find("add"), CT_KEY_CPU, add_calls_mul, NULL, 0);
    assert_true(h > 0);
    assert_false(ct_profiler_enabled());
    assert_int_equal(ct_profiler_start(path), CT_OK);
    assert_true(ct_profiler_enabled());
    ct_scope_begin();
    ct_tensor *c = ct_mm(a, b); /* (4, 3) */
    CT_ASSERT_OK(c);
    CT_ASSERT_OK(ct_add(c, c));
    assert_int_equal(ct_profiler_range_push("outer"), CT_OK);
    CT_ASSERT_OK(ct_relu(c));
    assert_int_equal(ct_profiler_range_pop(), CT_OK);
    ct_scope_end();
    assert_int_equal(ct_profiler_stop(), CT_OK);
    assert_false(ct_profiler_enabled());
    assert_int_equal(ct_op_override_remove(h), CT_OK);
    ct_release(a);
    ct_release(b);

    ct_value *doc = load_json(path);
    ct_value *ev = events_of(doc);
    ct_value *mm = find_span(ev, "mm", NULL), *add = find_span(ev, "add", NULL), *mul = find_span(ev, "mul", NULL);
    ct_value *relu = find_span(ev, "relu", NULL), *outer = find_span(ev, "outer", NULL);
    assert_non_null(mm);
    assert_non_null(add);
    assert_non_null(mul);
    assert_non_null(relu);
    assert_non_null(outer);
    assert_nested(add, mul);
    assert_nested(outer, relu);
    assert_spans_well_nested(ev);
    assert_string_equal(str_of(mm, "cat"), "op");
    assert_string_equal(str_of(outer, "cat"), "user_annotation");
    /* args: shapes, dtypes, device, bytes the op asked for (4 x 3 float32) */
    ct_value *args = ct_value_get(mm, "args");
    assert_non_null(args);
    ct_value *dims = ct_value_get(args, "Input Dims");
    assert_non_null(dims);
    assert_int_equal(ct_value_len(dims), 2);
    assert_int_equal(ct_value_int(ct_value_at(ct_value_at(dims, 0), 0)), 4);
    assert_int_equal(ct_value_int(ct_value_at(ct_value_at(dims, 0), 1)), 5);
    assert_int_equal(ct_value_int(ct_value_at(ct_value_at(dims, 1), 1)), 3);
    ct_value *types = ct_value_get(args, "Input type");
    assert_string_equal(ct_value_str(ct_value_at(types, 0), NULL), "float32");
    assert_string_equal(str_of(args, "Device"), "cpu");
    assert_int_equal((int64_t)num_of(args, "Bytes allocated"), 4 * 3 * 4);
    /* add's bytes include the nested mul's temporary */
    assert_int_equal((int64_t)num_of(ct_value_get(add, "args"), "Bytes allocated"), 2 * 4 * 3 * 4);
    /* memory: instant events with sizes and a counter track; thread names */
    assert_true(count_ph(ev, "i", "[memory]") >= 4);
    assert_true(count_ph(ev, "C", "Memory allocated (cpu)") >= 4);
    assert_true(count_ph(ev, "M", "thread_name") >= 1);
    assert_int_equal(count_ph(ev, "M", "process_name"), 1);
    /* sorted by start time */
    double last = -1;
    for (int64_t i = 0; i < ct_value_len(ev); i++) {
        ct_value *e = ct_value_at(ev, i);
        if (strcmp(str_of(e, "ph"), "M") == 0)
            continue;
        double ts = num_of(e, "ts");
        assert_true(ts >= last);
        last = ts;
    }
    ct_value_free(doc);
}

static void profiler_sessions_are_separate(void **state) {
    (void)state;
    char p1[512], p2[512];
    snprintf(p1, sizeof p1, "%s/one.json", g_tmp);
    snprintf(p2, sizeof p2, "%s/two.json", g_tmp);
    ct_tensor *a = ct_ones(CT_SHAPE(3), CT_DTYPE_FLOAT32, CT_CPU);
    assert_int_equal(ct_profiler_start(p1), CT_OK);
    ct_release(ct_neg(a));
    assert_int_equal(ct_profiler_stop(), CT_OK);
    ct_release(ct_exp(a)); /* while off: in neither trace */
    assert_int_equal(ct_profiler_range_push("off range"), CT_OK);
    assert_int_equal(ct_profiler_start(p2), CT_OK);
    assert_int_equal(ct_profiler_range_pop(), CT_OK); /* pushed while off: not recorded */
    ct_release(ct_sqrt(a));
    assert_int_equal(ct_profiler_stop(), CT_OK);
    ct_release(a);
    ct_value *d1 = load_json(p1), *d2 = load_json(p2);
    ct_value *e1 = events_of(d1), *e2 = events_of(d2);
    assert_non_null(find_span(e1, "neg", NULL));
    assert_null(find_span(e1, "exp", NULL));
    assert_null(find_span(e1, "sqrt", NULL));
    assert_non_null(find_span(e2, "sqrt", NULL));
    assert_null(find_span(e2, "neg", NULL));
    assert_null(find_span(e2, "exp", NULL));
    assert_null(find_span(e2, "off range", NULL));
    ct_value_free(d1);
    ct_value_free(d2);
}

static void *thread_ops(void *arg) {
    (void)arg;
    ct_scope_begin();
    ct_tensor *a = ct_ones(CT_SHAPE(8), CT_DTYPE_FLOAT32, CT_CPU);
    for (int i = 0; i < 20; i++)
        a = ct_add(a, a);
    ct_scope_end();
    return NULL;
}

static void profiler_threads(void **state) {
    (void)state;
    char path[512];
    snprintf(path, sizeof path, "%s/threads.json", g_tmp);
    assert_int_equal(ct_profiler_start(path), CT_OK);
    pthread_t th[2];
    for (int i = 0; i < 2; i++)
        assert_int_equal(pthread_create(&th[i], NULL, thread_ops, NULL), 0);
    thread_ops(NULL);
    for (int i = 0; i < 2; i++)
        pthread_join(th[i], NULL);
    assert_int_equal(ct_profiler_stop(), CT_OK);
    ct_value *doc = load_json(path);
    ct_value *ev = events_of(doc);
    /* 60 adds over three threads, each thread named */
    assert_int_equal(count_ph(ev, "X", "add"), 60);
    double tids[8];
    int ntids = 0;
    for (int64_t i = 0; i < ct_value_len(ev); i++) {
        ct_value *e = ct_value_at(ev, i);
        if (strcmp(str_of(e, "ph"), "X") != 0)
            continue;
        double t = num_of(e, "tid");
        bool seen = false;
        for (int k = 0; k < ntids; k++)
            seen |= tids[k] == t;
        if (!seen && ntids < 8)
            tids[ntids++] = t;
    }
    assert_int_equal(ntids, 3);
    for (int k = 0; k < ntids; k++) {
        bool named = false;
        for (int64_t i = 0; i < ct_value_len(ev); i++) {
            ct_value *e = ct_value_at(ev, i);
            if (strcmp(str_of(e, "ph"), "M") == 0 && strcmp(str_of(e, "name"), "thread_name") == 0 &&
                num_of(e, "tid") == tids[k])
                named = true;
        }
        assert_true(named);
    }
    assert_spans_well_nested(ev);
    ct_value_free(doc);
}

static void profiler_errors(void **state) {
    (void)state;
    char path[512];
    snprintf(path, sizeof path, "%s/err.json", g_tmp);
    CT_ASSERT_ERR(ct_profiler_start(NULL) == CT_OK, CT_ERROR_NULL_ARGUMENT, "path");
    CT_ASSERT_ERR(ct_profiler_start("") == CT_OK, CT_ERROR_VALUE, "empty");
    CT_ASSERT_ERR(ct_profiler_start("/nonexistent-dir/x/trace.json") == CT_OK, CT_ERROR_IO, "cannot open");
    CT_ASSERT_ERR(ct_profiler_stop() == CT_OK, CT_ERROR_RUNTIME, "not recording");
    assert_int_equal(ct_profiler_start(path), CT_OK);
    CT_ASSERT_ERR(ct_profiler_start(path) == CT_OK, CT_ERROR_RUNTIME, "already recording");
    assert_int_equal(ct_profiler_stop(), CT_OK);
    CT_ASSERT_ERR(ct_profiler_range_pop() == CT_OK, CT_ERROR_RUNTIME, "no range");
    CT_ASSERT_ERR(ct_profiler_range_push(NULL) == CT_OK, CT_ERROR_NULL_ARGUMENT, "name");
    CT_ASSERT_ERR(ct_profiler_range_push("bad \xff name") == CT_OK, CT_ERROR_VALUE, "UTF-8");
    int pushed = 0;
    while (ct_profiler_range_push("deep") == CT_OK)
        pushed++;
    assert_int_equal(pushed, 64);
    assert_int_equal(ct_last_status(), CT_ERROR_RUNTIME);
    while (pushed--)
        assert_int_equal(ct_profiler_range_pop(), CT_OK);
    CT_ASSERT_ERR(ct_profiler_range_pop() == CT_OK, CT_ERROR_RUNTIME, "no range");
}

/* ------------------------------------------------------------------ structured log */

static const char *glog_pattern =
    "^V[0-9]{4} [0-9]{2}:[0-9]{2}:[0-9]{2}\\.[0-9]{6} [0-9]+ src/[A-Za-z0-9_/.]+\\.c:[0-9]+\\] \\{.*\\}$";

/* Every line of the log is a glog line or a payload line; returns the event lines. */
static int check_log_lines(const char *path, char ***lines_out) {
    char *text = slurp(path, NULL);
    assert_non_null(text);
    regex_t re;
    assert_int_equal(regcomp(&re, glog_pattern, REG_EXTENDED | REG_NOSUB), 0);
    char **lines = NULL;
    int n = 0;
    for (char *save = NULL, *l = strtok_r(text, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
        if (l[0] == '\t')
            continue;
        if (regexec(&re, l, 0, NULL, 0) != 0)
            fail_msg("log line does not match the format: %s", l);
        lines = realloc(lines, sizeof *lines * (size_t)(n + 1));
        lines[n++] = strdup(l);
    }
    regfree(&re);
    free(text);
    *lines_out = lines;
    return n;
}

static int count_lines_with(char **lines, int n, const char *needle) {
    int k = 0;
    for (int i = 0; i < n; i++)
        k += strstr(lines[i], needle) != NULL;
    return k;
}

static void free_lines(char **lines, int n) {
    for (int i = 0; i < n; i++)
        free(lines[i]);
    free(lines);
}

static void trace_log_events(void **state) {
    (void)state;
    assert_false(ct_trace_log_enabled());
    assert_null(ct_trace_log_path());
    assert_int_equal(ct_trace_log_event("ignored_while_off", NULL, NULL), CT_OK);
    assert_int_equal(ct_trace_log_start(g_tmp), CT_OK);
    assert_true(ct_trace_log_enabled());
    char path[1024];
    snprintf(path, sizeof path, "%s", ct_trace_log_path());
    char prefix[600];
    snprintf(prefix, sizeof prefix, "%s/dedicated_log_ctorch_trace_%ld_", g_tmp, (long)getpid());
    assert_memory_equal(path, prefix, strlen(prefix));
    assert_string_equal(path + strlen(path) - 4, ".log");

    ct_scope_begin();
    ct_tensor *f = ct_ones(CT_SHAPE(4, 4), CT_DTYPE_FLOAT32, CT_CPU);
    ct_tensor *i = ct_ones(CT_SHAPE(2, 2), CT_DTYPE_INT64, CT_CPU);
    for (int k = 0; k < 3; k++) { /* the same decision thrice: one line */
        CT_ASSERT_OK(ct_mm(f, f));
        CT_ASSERT_OK(ct_mm(i, i));
    }
    ct_scope_end();
    int64_t h = ct_op_override(ct_op_find("add"), CT_KEY_CPU, add_calls_mul, NULL, 0);
    assert_true(h > 0);
    assert_int_equal(ct_op_override_remove(h), CT_OK);
    char logpath[600];
    snprintf(logpath, sizeof logpath, "%s/ops.txt", g_tmp);
    assert_int_equal(ct_set_op_logging(true, logpath), CT_OK);
    assert_int_equal(ct_set_op_logging(false, NULL), CT_OK);
    assert_int_equal(ct_trace_log_event("my_event", "{\"step\": 3}", "first line\nsecond line"), CT_OK);
    assert_int_equal(ct_trace_log_stop(), CT_OK);
    assert_false(ct_trace_log_enabled());

    char **lines;
    int n = check_log_lines(path, &lines);
    assert_int_equal(count_lines_with(lines, n, "{\"ctorch_start\": {"), 1);
    assert_true(strstr(lines[0], "ctorch_start") != NULL);
    assert_int_equal(count_lines_with(lines, n, "\"num_threads\": "), 1);
    assert_int_equal(count_lines_with(lines, n, "\"kernel_choice\""), 2);
    assert_int_equal(count_lines_with(lines, n, "\"choice\": \"generic\", \"dtype\": \"int64\", \"m\": 2"), 1);
    assert_int_equal(count_lines_with(lines, n, "\"dtype\": \"float32\", \"m\": 4, \"n\": 4, \"k\": 4"), 1);
    assert_int_equal(count_lines_with(lines, n, "{\"op_override\": {\"op\": \"add\", \"key\": \"CPU\""), 1);
    assert_int_equal(count_lines_with(lines, n, "{\"op_override_removed\": {\"op\": \"add\""), 1);
    assert_int_equal(count_lines_with(lines, n, "{\"op_logging\": {\"enabled\": true"), 1);
    assert_int_equal(count_lines_with(lines, n, "{\"op_logging\": {\"enabled\": false"), 1);
    assert_int_equal(count_lines_with(lines, n, "ignored_while_off"), 0);
    char hex[33], want[80];
    ct_md5_hex("first line\nsecond line", strlen("first line\nsecond line"), hex);
    snprintf(want, sizeof want, "{\"my_event\": {\"step\": 3}, \"has_payload\": \"%s\"}", hex);
    assert_int_equal(count_lines_with(lines, n, want), 1);
    free_lines(lines, n);
    /* the payload follows as tab-prefixed lines */
    char *text = slurp(path, NULL);
    assert_non_null(strstr(text, "\n\tfirst line\n\tsecond line\n"));
    free(text);
}

/* Note [Row strides of 2 KiB on AMD] (src/cpu/linalg.c): a float32 product with A
 * transposed and A's rows 512 floats apart goes to OpenBLAS on a CPU that is not
 * Intel's, where oneDNN is the float32 GEMM; 520 floats apart it stays on oneDNN.
 * The structured log names the choice. */
static void gemm_choice_by_row_stride(void **state) {
    (void)state;
    if (!ct_cpu_sgemm_onednn())
        skip(); /* a build without oneDNN: every float32 product is OpenBLAS's */
    assert_int_equal(ct_trace_log_start(g_tmp), CT_OK);
    char path[1024];
    snprintf(path, sizeof path, "%s", ct_trace_log_path());
    ct_scope_begin();
    ct_tensor *b = ct_ones(CT_SHAPE(8, 4), CT_F32, CT_CPU);
    CT_ASSERT_OK(ct_mm(ct_t(ct_ones(CT_SHAPE(8, 512), CT_F32, CT_CPU)), b)); /* C (512, 4) */
    CT_ASSERT_OK(ct_mm(ct_t(ct_ones(CT_SHAPE(8, 520), CT_F32, CT_CPU)), b)); /* C (520, 4) */
    ct_scope_end();
    assert_int_equal(ct_trace_log_stop(), CT_OK);
    char **lines;
    int n = check_log_lines(path, &lines);
    const char *first = ct_cpu_is_intel() ? "\"choice\": \"onednn\", \"dtype\": \"float32\", \"m\": 512"
                                          : "\"choice\": \"blas\", \"dtype\": \"float32\", \"m\": 512";
    assert_int_equal(count_lines_with(lines, n, first), 1);
    assert_int_equal(count_lines_with(lines, n, "\"choice\": \"onednn\", \"dtype\": \"float32\", \"m\": 520"), 1);
    free_lines(lines, n);
}

static void trace_log_alloc_oom(void **state) {
    (void)state;
    static fake_device dev;
    static ct_alloc_device_iface iface;
    memset(&dev, 0, sizeof dev);
    dev.fail_all = true;
    iface = fake_iface(&dev);
    char ppath[512];
    snprintf(ppath, sizeof ppath, "%s/oom.json", g_tmp);
    if (ct_alloc_set_device_interface(CT_DEVICE_CPU, &iface) != CT_OK)
        fail_msg("cannot install the fake device: %s", ct_last_error());
    assert_int_equal(ct_trace_log_start(g_tmp), CT_OK);
    char path[1024];
    snprintf(path, sizeof path, "%s", ct_trace_log_path());
    assert_int_equal(ct_profiler_start(ppath), CT_OK);
    assert_null(ct_alloc(CT_CPU, 4096));
    assert_int_equal(ct_last_status(), CT_ERROR_OUT_OF_MEMORY);
    assert_int_equal(ct_profiler_stop(), CT_OK);
    assert_int_equal(ct_trace_log_stop(), CT_OK);
    assert_int_equal(ct_alloc_set_device_interface(CT_DEVICE_CPU, NULL), CT_OK);

    char **lines;
    int n = check_log_lines(path, &lines);
    assert_int_equal(count_lines_with(lines, n, "{\"alloc_retry\": {\"device\": \"cpu\""), 1);
    assert_int_equal(count_lines_with(lines, n, "{\"alloc_oom\": {\"device\": \"cpu\""), 1);
    free_lines(lines, n);
    ct_value *doc = load_json(ppath);
    ct_value *ev = events_of(doc);
    assert_int_equal(count_ph(ev, "i", "[OutOfMemory]"), 1);
    assert_int_equal(count_ph(ev, "i", "[alloc retry]"), 1);
    ct_value_free(doc);
}

static void trace_log_errors(void **state) {
    (void)state;
    CT_ASSERT_ERR(ct_trace_log_start(NULL) == CT_OK, CT_ERROR_NULL_ARGUMENT, "dir");
    CT_ASSERT_ERR(ct_trace_log_start("") == CT_OK, CT_ERROR_VALUE, "empty");
    CT_ASSERT_ERR(ct_trace_log_start("/nonexistent-dir/x") == CT_OK, CT_ERROR_IO, "cannot create");
    CT_ASSERT_ERR(ct_trace_log_stop() == CT_OK, CT_ERROR_RUNTIME, "not open");
    assert_int_equal(ct_trace_log_start(g_tmp), CT_OK);
    CT_ASSERT_ERR(ct_trace_log_start(g_tmp) == CT_OK, CT_ERROR_RUNTIME, "already open");
    CT_ASSERT_ERR(ct_trace_log_event(NULL, NULL, NULL) == CT_OK, CT_ERROR_NULL_ARGUMENT, "event");
    CT_ASSERT_ERR(ct_trace_log_event("", NULL, NULL) == CT_OK, CT_ERROR_VALUE, "identifier");
    CT_ASSERT_ERR(ct_trace_log_event("two words", NULL, NULL) == CT_OK, CT_ERROR_VALUE, "identifier");
    CT_ASSERT_ERR(ct_trace_log_event("e", "[1, 2]", NULL) == CT_OK, CT_ERROR_VALUE, "JSON object");
    CT_ASSERT_ERR(ct_trace_log_event("e", "{\"a\": ", NULL) == CT_OK, CT_ERROR_FORMAT, "invalid JSON");
    CT_ASSERT_ERR(ct_trace_log_event("e", "{\"a\":\n1}", NULL) == CT_OK, CT_ERROR_VALUE, "one line");
    CT_ASSERT_ERR(ct_trace_log_event("e", NULL, "\xc3") == CT_OK, CT_ERROR_VALUE, "UTF-8");
    assert_int_equal(ct_trace_log_stop(), CT_OK);
    ct_trace_report_summary s;
    CT_ASSERT_ERR(ct_trace_report(NULL, g_tmp, &s) == CT_OK, CT_ERROR_NULL_ARGUMENT, "NULL");
    CT_ASSERT_ERR(ct_trace_report(g_tmp, NULL, &s) == CT_OK, CT_ERROR_NULL_ARGUMENT, "NULL");
    CT_ASSERT_ERR(ct_trace_report(g_tmp, g_tmp, NULL) == CT_OK, CT_ERROR_NULL_ARGUMENT, "NULL");
    CT_ASSERT_ERR(ct_trace_report("/nonexistent-dir/x", g_tmp, &s) == CT_OK, CT_ERROR_IO, "cannot read");
    char empty[600];
    snprintf(empty, sizeof empty, "%s/empty", g_tmp);
    mkdir(empty, 0777);
    CT_ASSERT_ERR(ct_trace_report(empty, g_tmp, &s) == CT_OK, CT_ERROR_VALUE, "no .log files");
}

/* ------------------------------------------------------------------ trace-report */

static int64_t count_file_lines(const char *path) {
    char *t = slurp(path, NULL);
    assert_non_null(t);
    int64_t n = 0;
    for (char *p = t; *p; p++)
        n += *p == '\n';
    free(t);
    return n;
}

static void trace_report_output(void **state) {
    (void)state;
    char logdir[600], out[600], p[1200];
    snprintf(logdir, sizeof logdir, "%s/logs", g_tmp);
    snprintf(out, sizeof out, "%s/report", g_tmp);
    assert_int_equal(mkdir(logdir, 0777), 0);
    assert_int_equal(ct_trace_log_start(logdir), CT_OK);
    const char *payload = "alpha\n\tbeta <b>\n";
    assert_int_equal(ct_trace_log_event("artifact", "{\"name\": \"x\"}", payload), CT_OK);
    assert_int_equal(ct_trace_log_event("artifact", NULL, NULL), CT_OK);
    assert_int_equal(ct_trace_log_stop(), CT_OK);
    ct_trace_report_summary s;
    assert_int_equal(ct_trace_report(logdir, out, &s), CT_OK);
    assert_int_equal(s.files, 1);
    assert_int_equal(s.ok, 3); /* ctorch_start + two artifacts */
    assert_int_equal(s.fail_glog, 0);
    assert_int_equal(s.fail_json, 0);
    assert_int_equal(s.fail_payload_md5, 0);
    const char *names[] = {"index.html", "raw.jsonl", "raw.log"};
    for (int i = 0; i < 3; i++) {
        snprintf(p, sizeof p, "%s/%s", out, names[i]);
        assert_true(file_exists(p));
    }
    char hex[33];
    ct_md5_hex(payload, strlen(payload), hex);
    snprintf(p, sizeof p, "%s/payloads/%s.txt", out, hex);
    size_t len;
    char *back = slurp(p, &len);
    assert_non_null(back);
    assert_string_equal(back, payload); /* the payload survives the tab prefixing */
    free(back);
    /* raw.jsonl: one JSON object per event, with the source position */
    snprintf(p, sizeof p, "%s/raw.jsonl", out);
    char *jl = slurp(p, NULL);
    int n = 0;
    for (char *save = NULL, *l = strtok_r(jl, "\n", &save); l; l = strtok_r(NULL, "\n", &save), n++) {
        ct_value *v = ct_json_parse(l, strlen(l), "test", "raw.jsonl");
        assert_non_null(v);
        assert_non_null(str_of(v, "pathname"));
        assert_true(num_of(v, "lineno") > 0);
        ct_value_free(v);
    }
    free(jl);
    assert_int_equal(n, 3);
    snprintf(p, sizeof p, "%s/index.html", out);
    char *html = slurp(p, NULL);
    assert_non_null(strstr(html, "artifact"));
    assert_null(strstr(html, "md5 mismatch"));
    free(html);
}

static void trace_report_detects_md5_mismatch(void **state) {
    (void)state;
    char logdir[600], out[600], p[1200];
    snprintf(logdir, sizeof logdir, "%s/bad", g_tmp);
    snprintf(out, sizeof out, "%s/bad_report", g_tmp);
    assert_int_equal(mkdir(logdir, 0777), 0);
    snprintf(p, sizeof p, "%s/dedicated_log_ctorch_trace_1_abc.log", logdir);
    char good[33];
    ct_md5_hex("hello", 5, good);
    FILE *f = fopen(p, "w");
    assert_non_null(f);
    fprintf(f, "V1122 07:00:00.000001 1 src/x.c:1] {\"ok_event\": {}, \"has_payload\": \"%s\"}\n\thello\n", good);
    fprintf(f, "V1122 07:00:00.000002 1 src/x.c:2] {\"tampered\": {}, \"has_payload\": \"%s\"}\n\thellO\n", good);
    fprintf(f, "this is not a log line\n");
    fprintf(f, "V1122 07:00:00.000003 1 src/x.c:3] {not json\n");
    fclose(f);
    ct_trace_report_summary s;
    assert_int_equal(ct_trace_report(logdir, out, &s), CT_OK);
    assert_int_equal(s.ok, 1);
    assert_int_equal(s.fail_payload_md5, 1);
    assert_int_equal(s.fail_glog, 1);
    assert_int_equal(s.fail_json, 1);
    snprintf(p, sizeof p, "%s/index.html", out);
    char *html = slurp(p, NULL);
    assert_non_null(html);
    assert_non_null(strstr(html, "md5 mismatch"));
    assert_non_null(strstr(html, "payload md5 mismatch: has_payload"));
    free(html);
    snprintf(p, sizeof p, "%s/raw.jsonl", out);
    assert_int_equal(count_file_lines(p), 2);
    /* a single file works as input too */
    snprintf(p, sizeof p, "%s/dedicated_log_ctorch_trace_1_abc.log", logdir);
    char out2[700];
    snprintf(out2, sizeof out2, "%s/single", g_tmp);
    assert_int_equal(ct_trace_report(p, out2, &s), CT_OK);
    assert_int_equal(s.fail_payload_md5, 1);
}

/* ------------------------------------------------------------------ environment */

static int child_main(void) {
    ct_scope_begin();
    ct_tensor *a = ct_ones(CT_SHAPE(3, 3), CT_DTYPE_FLOAT32, CT_CPU);
    ct_tensor *b = ct_mm(a, a);
    ct_tensor *c = ct_add(b, a);
    int ok = a && b && c;
    ct_scope_end();
    return ok ? 0 : 1;
}

/* Runs this program with --child and one variable set; returns its pid. */
static pid_t run_child(const char *var, const char *value) {
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        setenv(var, value, 1);
        char *argv[] = {"test_profiler", "--child", NULL};
        execv("/proc/self/exe", argv);
        _exit(127);
    }
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    return pid;
}

static void ct_profile_env(void **state) {
    (void)state;
    char path[512];
    snprintf(path, sizeof path, "%s/env.json", g_tmp);
    run_child("CT_PROFILE", path);
    ct_value *doc = load_json(path);
    ct_value *ev = events_of(doc);
    assert_non_null(find_span(ev, "mm", NULL));
    assert_non_null(find_span(ev, "add", NULL));
    assert_true(count_ph(ev, "C", NULL) >= 2);
    assert_spans_well_nested(ev);
    ct_value_free(doc);
}

static void ct_trace_env(void **state) {
    (void)state;
    char dir[600];
    snprintf(dir, sizeof dir, "%s/envlog", g_tmp);
    assert_int_equal(mkdir(dir, 0777), 0);
    pid_t pid = run_child("CT_TRACE", dir);
    char prefix[64], path[1200] = "";
    snprintf(prefix, sizeof prefix, "dedicated_log_ctorch_trace_%ld_", (long)pid);
    DIR *d = opendir(dir);
    assert_non_null(d);
    struct dirent *de;
    int nfiles = 0;
    while ((de = readdir(d)) != NULL)
        if (strncmp(de->d_name, prefix, strlen(prefix)) == 0) {
            snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
            nfiles++;
        }
    closedir(d);
    assert_int_equal(nfiles, 1);
    char **lines;
    int n = check_log_lines(path, &lines);
    assert_int_equal(count_lines_with(lines, n, "{\"ctorch_start\": "), 1);
    assert_int_equal(count_lines_with(lines, n, "\"kernel_choice\""), 1);
    free_lines(lines, n);
    ct_trace_report_summary s;
    char out[700];
    snprintf(out, sizeof out, "%s/envreport", g_tmp);
    assert_int_equal(ct_trace_report(dir, out, &s), CT_OK);
    assert_int_equal(s.fail_payload_md5 + s.fail_glog + s.fail_json, 0);
    assert_int_equal(s.ok, 2);
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "--child") == 0)
        return child_main();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(md5_known_vectors),
        /* first: the fake device needs no CPU memory in use */
        cmocka_unit_test_setup_teardown(trace_log_alloc_oom, make_tmp, rm_tmp),
        cmocka_unit_test_setup_teardown(gemm_choice_by_row_stride, make_tmp, rm_tmp),
        cmocka_unit_test_setup_teardown(profiler_spans_and_nesting, make_tmp, rm_tmp),
        cmocka_unit_test_setup_teardown(profiler_sessions_are_separate, make_tmp, rm_tmp),
        cmocka_unit_test_setup_teardown(profiler_threads, make_tmp, rm_tmp),
        cmocka_unit_test_setup_teardown(profiler_errors, make_tmp, rm_tmp),
        cmocka_unit_test_setup_teardown(trace_log_events, make_tmp, rm_tmp),
        cmocka_unit_test_setup_teardown(trace_log_errors, make_tmp, rm_tmp),
        cmocka_unit_test_setup_teardown(trace_report_output, make_tmp, rm_tmp),
        cmocka_unit_test_setup_teardown(trace_report_detects_md5_mismatch, make_tmp, rm_tmp),
        cmocka_unit_test_setup_teardown(ct_profile_env, make_tmp, rm_tmp),
        cmocka_unit_test_setup_teardown(ct_trace_env, make_tmp, rm_tmp),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
