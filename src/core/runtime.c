/* The thread count every parallel region uses (ctorch's pool, Note [Threads on a busy
 * machine] in parallel.c, and OpenMP's, shared with OpenBLAS and oneDNN: Note [OpenBLAS
 * threads] in CMakeLists.txt), and ct_build_info, which the
 * registered backends fill with a line each. */
#include <stdatomic.h>
#include <stdio.h>
#include <pthread.h>
#include <string.h>

#include "build_config.h"
#include "core/build_info.h"
#include "core/parallel.h"
#include "core/tensor_impl.h"
#include "registry.h"
#ifdef CT_HAVE_OPENMP
#include <omp.h>
#endif

static _Atomic int num_threads = 0;

void ct_set_num_threads(int n) {
    if (n < 1)
        n = 1;
    num_threads = n;
#ifdef CT_HAVE_OPENMP
    omp_set_num_threads(n);
#endif
}

int ct_get_num_threads(void) {
    if (ct_in_parallel()) /* a chunk of a region: what it calls runs on its thread */
        return 1;
    if (num_threads > 0)
        return num_threads;
#ifdef CT_HAVE_OPENMP
    return omp_get_max_threads();
#else
    return 1;
#endif
}

/* ------------------------------------------------------------------ build info */

/* Note [Build info lines]
 * ct_build_info is the build's own lines (version, build type, compiler, system) and
 * one line per fact a backend registers when it registers: the CPU its OpenMP, BLAS
 * and SLEEF, the registry whether the CUDA backend loaded and, when not, why. A later
 * line with the same key replaces the earlier one. */
#define CT_INFO_LINES 16
static struct {
    char key[16];
    char value[192];
} lines[CT_INFO_LINES];
static int nlines;
static pthread_mutex_t info_lock = PTHREAD_MUTEX_INITIALIZER;
static char info[CT_INFO_LINES * 224 + 512];

void ct_build_info_set(const char *key, const char *value) {
    pthread_mutex_lock(&info_lock);
    int i = 0;
    while (i < nlines && strcmp(lines[i].key, key) != 0)
        i++;
    if (i < CT_INFO_LINES) {
        snprintf(lines[i].key, sizeof lines[i].key, "%s", key);
        snprintf(lines[i].value, sizeof lines[i].value, "%s", value ? value : "");
        if (i == nlines)
            nlines++;
    }
    pthread_mutex_unlock(&info_lock);
}

const char *ct_build_info(void) {
    ct_runtime_load_backend(CT_DEVICE_CUDA); /* Note [Registry]: the backends add their lines, CUDA's too */
    pthread_mutex_lock(&info_lock);
    int n = snprintf(info, sizeof info,
                     "ctorch %s\n"
                     "  build type: %s (%s)\n"
                     "  compiler:   %s\n"
                     "  system:     %s\n",
                     CT_VERSION_STRING, CT_BUILD_TYPE, CT_BUILD_DATE, CT_BUILD_COMPILER, CT_BUILD_SYSTEM);
    for (int i = 0; i < nlines && n > 0 && (size_t)n < sizeof info; i++) {
        char label[24];
        snprintf(label, sizeof label, "%.15s:", lines[i].key);
        n += snprintf(info + n, sizeof info - (size_t)n, "  %-11s %s\n", label, lines[i].value);
    }
    pthread_mutex_unlock(&info_lock);
    return info;
}
