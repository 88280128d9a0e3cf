/* TunableOp's public functions (ctorch/cuda.h): the settings, which the environment
 * starts, and the results file, whose format is written and read here. The results
 * and the tuning itself live in the CUDA backend (Note [TunableOp] in
 * src/cuda/tunable.cu), reached through its runtime table.
 *
 * The file is text, one record per line, fields separated by commas:
 *
 *   Validator,CTORCH_VERSION,0.1.0
 *   Validator,CUBLASLT_VERSION,130000
 *   Validator,CUDA_RUNTIME_VERSION,13000
 *   Validator,DEVICE,NVIDIA H200 sm_90
 *   GemmLt_bfloat16_f32_TN,m768_n8192_k3072_...,<128 hex digits>,0.1214,0.1302
 *
 * A result line holds the product's signature and parameters (the key the backend
 * looks results up by), cuBLASLt's algorithm, and the mean milliseconds of one run with
 * it and with the heuristic's choice. Reading a file checks every line before it adds
 * anything, and refuses a file whose validators are not this process's. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/cuda_runtime.h"
#include "core/device.h"
#include "core/error.h"
#include "ctorch/ext.h"

static pthread_once_t env_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t name_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_bool enabled, tuning = true;
static atomic_int max_duration_ms = 30, max_iterations = 100;
static char filename[1024] = "tunableop_results.csv";
static bool insert_ordinal = true;
static atomic_bool loaded[64]; /* ct_tunable_load_device_file ran for the device */

static void write_at_exit(void);

static int env_int(const char *name, int fallback, int lo) {
    const char *v = getenv(name);
    if (!v || !*v)
        return fallback;
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (errno || *end || x < lo || x > 1000000) {
        fprintf(stderr, "ctorch: %s=%s is not a whole number >= %d: ignored\n", name, v, lo);
        return fallback;
    }
    return (int)x;
}

static void read_env(void) {
    const char *v = getenv("CT_TUNABLEOP");
    atomic_store(&enabled, v && strcmp(v, "1") == 0);
    v = getenv("CT_TUNABLEOP_TUNING");
    if (v && *v)
        atomic_store(&tuning, strcmp(v, "0") != 0);
    v = getenv("CT_TUNABLEOP_FILENAME");
    if (v && *v) {
        if (strlen(v) < sizeof filename)
            strcpy(filename, v);
        else
            fprintf(stderr, "ctorch: CT_TUNABLEOP_FILENAME is longer than %zu bytes: ignored\n", sizeof filename - 1);
    }
    atomic_store(&max_duration_ms, env_int("CT_TUNABLEOP_MAX_TUNING_DURATION_MS", 30, 1));
    atomic_store(&max_iterations, env_int("CT_TUNABLEOP_MAX_TUNING_ITERATIONS", 100, 1));
    atexit(write_at_exit);
}

static void init(void) { pthread_once(&env_once, read_env); }

void ct_cuda_tunable_enable(bool on) {
    init();
    atomic_store(&enabled, on);
}

bool ct_cuda_tunable_is_enabled(void) {
    init();
    return atomic_load(&enabled);
}

void ct_cuda_tunable_tuning_enable(bool on) {
    init();
    atomic_store(&tuning, on);
}

bool ct_cuda_tunable_tuning_is_enabled(void) {
    init();
    return atomic_load(&tuning);
}

ct_status ct_cuda_tunable_set_filename(const char *name, bool insert_device_ordinal) {
    const char *op = "cuda_tunable_set_filename";
    CT_CHECK_ARG_STATUS(op, name);
    init();
    if (!*name || strlen(name) >= sizeof filename)
        return ct_error(CT_ERROR_VALUE, op, "the file name must have 1 to %zu bytes", sizeof filename - 1);
    pthread_mutex_lock(&name_lock);
    strcpy(filename, name);
    insert_ordinal = insert_device_ordinal;
    pthread_mutex_unlock(&name_lock);
    return CT_OK;
}

const char *ct_cuda_tunable_get_filename(void) {
    init();
    return filename;
}

ct_status ct_cuda_tunable_set_max_tuning_duration(int ms) {
    if (ms < 1)
        return ct_error(CT_ERROR_VALUE, "cuda_tunable_set_max_tuning_duration", "expected at least 1 ms, got %d", ms);
    init();
    atomic_store(&max_duration_ms, ms);
    return CT_OK;
}

ct_status ct_cuda_tunable_set_max_tuning_iterations(int n) {
    if (n < 1)
        return ct_error(CT_ERROR_VALUE, "cuda_tunable_set_max_tuning_iterations", "expected at least 1, got %d", n);
    init();
    atomic_store(&max_iterations, n);
    return CT_OK;
}

void ct_tunable_settings_get(ct_tunable_settings *out) {
    init();
    out->enabled = atomic_load(&enabled);
    out->tuning = atomic_load(&tuning);
    out->max_duration_ms = atomic_load(&max_duration_ms);
    out->max_iterations = atomic_load(&max_iterations);
}

/* The device's results file: the ordinal goes before the last extension. */
static void device_filename(int device, char *buf, size_t n) {
    pthread_mutex_lock(&name_lock);
    if (!insert_ordinal) {
        snprintf(buf, n, "%s", filename);
    } else {
        const char *slash = strrchr(filename, '/'), *dot = strrchr(filename, '.');
        size_t stem = dot && (!slash || dot > slash) ? (size_t)(dot - filename) : strlen(filename);
        snprintf(buf, n, "%.*s%d%s", (int)stem, filename, device, filename + stem);
    }
    pthread_mutex_unlock(&name_lock);
}

/* The current device, or -1 with an error when there is none. */
static int current_device(const ct_cuda_runtime *rt, const char *op) {
    if (rt->device_count() <= 0) {
        ct_error(CT_ERROR_DEVICE, op, "no CUDA device is available");
        return -1;
    }
    return rt->current_device();
}

/* ------------------------------------------------------------------ the file */

static int hex_digit(char c) {
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* Splits line at commas into at most max fields (in place); the number found. */
static int split(char *line, char **f, int max) {
    int n = 0;
    f[n++] = line;
    for (char *p = line; *p; p++)
        if (*p == ',') {
            if (n == max)
                return max + 1;
            *p = '\0';
            f[n++] = p + 1;
        }
    return n;
}

static bool parse_ms(const char *s, double *out) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !(v >= 0) || v > 1e9)
        return false;
    *out = v;
    return true;
}

enum { V_CTORCH, V_CUBLASLT, V_RUNTIME, V_DEVICE, V_COUNT };
static const char *const validator_names[V_COUNT] = {"CTORCH_VERSION", "CUBLASLT_VERSION", "CUDA_RUNTIME_VERSION",
                                                     "DEVICE"};

typedef struct {
    ct_tunable_result *r;
    int64_t n, cap;
    char validators[V_COUNT][160];
    bool have[V_COUNT];
} parsed_file;

/* Reads and checks every line of path; CT_OK with the results and validators. */
static ct_status parse_file(const char *op, const char *path, parsed_file *pf) {
    memset(pf, 0, sizeof *pf);
    FILE *f = fopen(path, "r");
    if (!f)
        return ct_error(CT_ERROR_IO, op, "%s: %s", path, strerror(errno));
    char line[1024];
    ct_status st = CT_OK;
    for (int64_t no = 1; fgets(line, sizeof line, f); no++) {
        size_t len = strlen(line);
        if (len == sizeof line - 1 && line[len - 1] != '\n') {
            st = ct_error(CT_ERROR_VALUE, op, "%s:%lld: line longer than %zu bytes", path, (long long)no,
                          sizeof line - 2);
            break;
        }
        while (len && (line[len - 1] == '\n' || line[len - 1] == '\r'))
            line[--len] = '\0';
        if (!len)
            continue;
        char *fld[6];
        int nf = split(line, fld, 5);
        if (strcmp(fld[0], "Validator") == 0) {
            int v = 0;
            while (nf == 3 && v < V_COUNT && strcmp(fld[1], validator_names[v]) != 0)
                v++;
            if (nf != 3 || v == V_COUNT) {
                st = ct_error(CT_ERROR_VALUE, op,
                              "%s:%lld: expected Validator,<name>,<value> with a name of %s, %s, %s or %s", path,
                              (long long)no, validator_names[0], validator_names[1], validator_names[2],
                              validator_names[3]);
                break;
            }
            snprintf(pf->validators[v], sizeof pf->validators[v], "%s", fld[2]);
            pf->have[v] = true;
            continue;
        }
        ct_tunable_result r;
        memset(&r, 0, sizeof r);
        bool ok = nf == 5 && strncmp(fld[0], "GemmLt_", 7) == 0 && *fld[1] && strlen(fld[2]) == 128 &&
                  strlen(fld[0]) + strlen(fld[1]) + 2 <= sizeof r.key && parse_ms(fld[3], &r.ms) &&
                  parse_ms(fld[4], &r.default_ms);
        for (int i = 0; ok && i < 128; i++) {
            int d = hex_digit(fld[2][i]);
            ok = d >= 0;
            if (ok)
                r.algo[i / 16] |= (uint64_t)d << (4 * (15 - i % 16));
        }
        if (!ok) {
            st = ct_error(CT_ERROR_VALUE, op, "%s:%lld: expected GemmLt_<signature>,<params>,<algorithm: 128 hex "
                          "digits>,<ms>,<default ms>", path, (long long)no);
            break;
        }
        snprintf(r.key, sizeof r.key, "%s,%s", fld[0], fld[1]);
        if (pf->n == pf->cap) {
            int64_t cap = pf->cap ? 2 * pf->cap : 64;
            ct_tunable_result *g = realloc(pf->r, (size_t)cap * sizeof *g);
            if (!g) {
                st = ct_error(CT_ERROR_OUT_OF_MEMORY, op, "out of memory reading %s", path);
                break;
            }
            pf->r = g;
            pf->cap = cap;
        }
        pf->r[pf->n++] = r;
    }
    if (st == CT_OK && ferror(f))
        st = ct_error(CT_ERROR_IO, op, "%s: read error", path);
    fclose(f);
    for (int v = 0; st == CT_OK && v < V_COUNT; v++)
        if (!pf->have[v])
            st = ct_error(CT_ERROR_VALUE, op, "%s: no Validator,%s line: not a TunableOp results file", path,
                          validator_names[v]);
    if (st != CT_OK) {
        free(pf->r);
        pf->r = NULL;
    }
    return st;
}

static ct_status device_validators(const ct_cuda_runtime *rt, int device, char v[V_COUNT][160]) {
    ct_tunable_validators tv;
    if (rt->tunable_validators(device, &tv) != CT_OK)
        return ct_last_status();
    snprintf(v[V_CTORCH], 160, "%s", CT_VERSION_STRING);
    snprintf(v[V_CUBLASLT], 160, "%s", tv.cublaslt);
    snprintf(v[V_RUNTIME], 160, "%s", tv.runtime);
    snprintf(v[V_DEVICE], 160, "%s", tv.device);
    return CT_OK;
}

/* Checks pf's validators against the device's and adds its results; frees them. */
static ct_status add_parsed(const ct_cuda_runtime *rt, int device, const char *op, const char *path, parsed_file *pf) {
    char mine[V_COUNT][160];
    ct_status st = device_validators(rt, device, mine);
    for (int v = 0; st == CT_OK && v < V_COUNT; v++)
        if (strcmp(mine[v], pf->validators[v]) != 0)
            st = ct_error(CT_ERROR_VALUE, op, "%s was made with %s %s and this process has %s: its results are "
                          "refused", path, validator_names[v], pf->validators[v], mine[v]);
    if (st == CT_OK)
        st = rt->tunable_import(device, pf->r, pf->n);
    free(pf->r);
    pf->r = NULL;
    return st;
}

static ct_status write_from(const ct_cuda_runtime *rt, int device, const char *op, const char *path) {
    char mine[V_COUNT][160];
    if (device_validators(rt, device, mine) != CT_OK)
        return ct_last_status();
    ct_tunable_result *r = NULL;
    int64_t n = 0;
    if (rt->tunable_export(device, &r, &n) != CT_OK)
        return ct_last_status();
    FILE *f = fopen(path, "w");
    if (!f) {
        free(r);
        return ct_error(CT_ERROR_IO, op, "%s: %s", path, strerror(errno));
    }
    for (int v = 0; v < V_COUNT; v++)
        fprintf(f, "Validator,%s,%s\n", validator_names[v], mine[v]);
    for (int64_t i = 0; i < n; i++) {
        fprintf(f, "%s,", r[i].key);
        for (int w = 0; w < 8; w++)
            fprintf(f, "%016llx", (unsigned long long)r[i].algo[w]);
        fprintf(f, ",%.6f,%.6f\n", r[i].ms, r[i].default_ms);
    }
    free(r);
    bool bad = ferror(f) != 0;
    if (fclose(f) != 0 || bad)
        return ct_error(CT_ERROR_IO, op, "%s: write error", path);
    return CT_OK;
}

ct_status ct_cuda_tunable_read_file(const char *path) {
    const char *op = "cuda_tunable_read_file";
    init();
    char own[1100];
    const ct_cuda_runtime *rt = NULL;
    int device = -1;
    if (!path) {
        if (!(rt = ct_cuda_runtime_need(op)) || (device = current_device(rt, op)) < 0)
            return ct_last_status();
        device_filename(device, own, sizeof own);
        path = own;
    }
    /* A named file is checked before the backend and the device are asked for, so that
     * its errors show in any build and on any machine. */
    parsed_file pf;
    if (parse_file(op, path, &pf) != CT_OK)
        return ct_last_status();
    if ((!rt && !(rt = ct_cuda_runtime_need(op))) || (device < 0 && (device = current_device(rt, op)) < 0)) {
        free(pf.r);
        return ct_last_status();
    }
    return add_parsed(rt, device, op, path, &pf);
}

ct_status ct_cuda_tunable_write_file(const char *path) {
    const char *op = "cuda_tunable_write_file";
    init();
    const ct_cuda_runtime *rt = ct_cuda_runtime_need(op);
    int device = rt ? current_device(rt, op) : -1;
    if (device < 0)
        return ct_last_status();
    char own[1100];
    if (!path) {
        device_filename(device, own, sizeof own);
        path = own;
    }
    return write_from(rt, device, op, path);
}

ct_status ct_cuda_tunable_clear(void) {
    const char *op = "cuda_tunable_clear";
    const ct_cuda_runtime *rt = ct_cuda_runtime_need(op);
    int device = rt ? current_device(rt, op) : -1;
    if (device < 0)
        return ct_last_status();
    rt->tunable_clear(device);
    return CT_OK;
}

ct_status ct_cuda_tunable_get_stats(ct_cuda_tunable_stats *out) {
    const char *op = "cuda_tunable_get_stats";
    CT_CHECK_ARG_STATUS(op, out);
    memset(out, 0, sizeof *out);
    const ct_cuda_runtime *rt = ct_cuda_runtime_need(op);
    int device = rt ? current_device(rt, op) : -1;
    if (device < 0)
        return ct_last_status();
    rt->tunable_stats(device, out);
    return CT_OK;
}

void ct_tunable_load_device_file(int device) {
    if (device < 0 || device >= 64 || atomic_exchange(&loaded[device], true))
        return;
    const ct_cuda_runtime *rt = ct_cuda_runtime_get();
    if (!rt)
        return;
    char path[1100];
    device_filename(device, path, sizeof path);
    FILE *f = fopen(path, "r");
    if (!f)
        return; /* no results yet: the first run makes the file */
    fclose(f);
    parsed_file pf;
    if (parse_file("TunableOp", path, &pf) != CT_OK || add_parsed(rt, device, "TunableOp", path, &pf) != CT_OK) {
        /* a file named by the environment, not a call: warn and tune again */
        fprintf(stderr, "ctorch: %s; tuning again\n", ct_last_error());
        ct_clear_error();
    }
}

/* At exit, with tuning on: each device that tuned something writes its file. */
static void write_at_exit(void) {
    if (!atomic_load(&enabled) || !atomic_load(&tuning))
        return;
    const ct_cuda_runtime *rt = ct_cuda_runtime_get();
    if (!rt)
        return;
    int n = rt->device_count();
    for (int dev = 0; dev < n && dev < 64; dev++) {
        if (!rt->tunable_dirty(dev))
            continue;
        char path[1100];
        device_filename(dev, path, sizeof path);
        if (write_from(rt, dev, "TunableOp", path) != CT_OK) {
            fprintf(stderr, "ctorch: %s\n", ct_last_error());
            ct_clear_error();
        }
    }
}
