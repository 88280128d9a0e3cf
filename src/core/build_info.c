/* ct_build_info and the thread-count setting. */
#include <stdio.h>

#include "build_config.h"
#include "tensor_impl.h"

#ifdef CT_HAVE_OPENMP
#include <omp.h>
#endif

const char *ct_build_info(void) {
    static char info[1024];
    static _Atomic int done = 0;
    if (!done) {
        snprintf(info, sizeof info,
                 "ctorch %s\n"
                 "  build type: %s (%s)\n"
                 "  compiler:   %s\n"
                 "  system:     %s\n"
                 "  OpenMP:     %s\n"
                 "  BLAS:       %s\n"
                 "  SLEEF:      %s\n"
                 "  CUDA:       %s\n",
                 CT_VERSION_STRING, CT_BUILD_TYPE, CT_BUILD_DATE, CT_BUILD_COMPILER, CT_BUILD_SYSTEM,
#ifdef CT_HAVE_OPENMP
                 "yes",
#else
                 "no",
#endif
#ifdef CT_HAVE_OPENBLAS
                 "OpenBLAS",
#else
                 "none",
#endif
#ifdef CT_HAVE_SLEEF
                 "yes",
#else
                 "no",
#endif
                 CT_BUILD_CUDA);
        done = 1;
    }
    return info;
}

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
    if (num_threads > 0)
        return num_threads;
#ifdef CT_HAVE_OPENMP
    return omp_get_max_threads();
#else
    return 1;
#endif
}
