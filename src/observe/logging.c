/* The LOGGING key: one line per op call, for seeing what a program really runs.
 *
 *   [ct] add(f32[2, 3] cpu, f32[3] cpu) -> f32[2, 3] cpu
 *   [ct] full(0, 2, 3, device=cpu) -> f32[2, 3] cpu
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dispatch/dispatch_internal.h"
#include "observe/trace_log.h"

void ct_op_logging_init_from_env(void); /* for observe.c */

static FILE *log_file;
static bool log_owned;
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic bool log_on;

static const char *short_dtype(ct_dtype d) {
    static const char *const names[CT_DTYPE_COUNT] = {"b8", "u8", "i8", "i16", "i32", "i64", "u16",
                                                      "u32", "u64", "f16", "bf16", "f32", "f64"};
    return (int)d >= 0 && d < CT_DTYPE_COUNT ? names[d] : "?";
}

static void describe(FILE *f, const ct_tensor *t) {
    if (!t) {
        fputs("None", f);
        return;
    }
    char shape[160], dev[32];
    fprintf(f, "%s%s %s", short_dtype(t->dtype), ct_shape_str(t->shape, t->ndim, shape, sizeof shape),
            ct_device_str(t->device, dev, sizeof dev));
    if (t->requires_grad)
        fputs(" grad", f);
}

static ct_status logging_kernel(ct_keyset ks, ct_call *call, void *user_data) {
    (void)user_data;
    ct_status st = ct_redispatch(ct_keyset_below(ks, CT_KEY_LOGGING), call);
    pthread_mutex_lock(&log_lock);
    FILE *f = log_file ? log_file : stderr;
    fprintf(f, "[ct] %s%s(", ct_op_name(call->op),
            call->mode == CT_CALL_INPLACE ? "_" : call->mode == CT_CALL_OUT ? "_out" : "");
    const char *sep = "";
    for (int i = 0; i < call->nin; i++, sep = ", ") {
        fputs(sep, f);
        describe(f, call->in[i]);
    }
    for (int i = 0; i < call->nscalars; i++, sep = ", ")
        fprintf(f, "%s%g", sep, ct_scalar_to_double(call->s[i]));
    for (int i = 0; i < call->nints; i++, sep = ", ")
        fprintf(f, "%s%lld", sep, (long long)call->ints[i]);
    if (call->has_device) { /* a factory's device, to_device's target */
        char dev[32];
        fprintf(f, "%sdevice=%s", sep, ct_device_str(call->device, dev, sizeof dev));
    }
    fputs(") -> ", f);
    if (st != CT_OK) {
        fprintf(f, "error: %s\n", ct_last_error());
    } else {
        for (int i = 0; i < call->nout; i++) {
            if (i)
                fputs(", ", f);
            describe(f, call->out[i]);
        }
        fputc('\n', f);
    }
    fflush(f);
    pthread_mutex_unlock(&log_lock);
    return st;
}

ct_status ct_set_op_logging(bool enabled, const char *path) {
    ct_dispatch_ensure_init();
    pthread_mutex_lock(&log_lock);
    if (log_owned && log_file)
        fclose(log_file);
    log_file = NULL;
    log_owned = false;
    if (enabled && path) {
        log_file = fopen(path, "a");
        if (!log_file) {
            pthread_mutex_unlock(&log_lock);
            return ct_error(CT_ERROR_IO, "set_op_logging", "cannot open '%s' for writing", path);
        }
        log_owned = true;
    }
    log_on = enabled;
    pthread_mutex_unlock(&log_lock);
    ct_dispatch_set_global_key(CT_KEY_LOGGING, enabled);
    ct_trace_log_op_logging(enabled, enabled ? path : NULL, "api");
    return CT_OK;
}

bool ct_op_logging_enabled(void) { return log_on; }

void ct_op_logging_init_from_env(void) {
    ct_dispatch_register_fallback(CT_KEY_LOGGING, logging_kernel);
    const char *v = getenv("CT_LOG_OPS");
    if (!v || !*v || strcmp(v, "0") == 0)
        return;
    const char *path = getenv("CT_LOG_OPS_FILE");
    if (path && *path) {
        log_file = fopen(path, "a");
        log_owned = log_file != NULL;
    }
    log_on = true;
    ct_dispatch_set_global_key(CT_KEY_LOGGING, true);
    ct_trace_log_op_logging(true, path && *path ? path : NULL, "env");
}
