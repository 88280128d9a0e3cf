/* The CPU runtime: the BLAS line of ct_build_info and the runtime environment tuning. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "cpu/blas.h"
#include "core/build_info.h"
#include "core/tensor_impl.h"
#include "cpu/cpu_backend.h"
#include "cpu/cpu_isa.h"

#ifdef CT_HAVE_OPENMP
#include <omp.h>
#endif
#ifdef CT_HAVE_OPENBLAS
#include <cblas.h>
#endif

const char *ct_blas_info(void) {
#ifdef CT_HAVE_OPENBLAS
    static char info[160];
    /* Note [Row strides of 2 KiB on AMD] in linalg.c: which products leave oneDNN */
    snprintf(info, sizeof info, "OpenBLAS, kernels %s%s", openblas_get_corename(),
             !ct_cpu_sgemm_onednn() ? ""
             : ct_cpu_is_intel()    ? "; float32 GEMM: oneDNN"
                                    : "; float32 GEMM: oneDNN, OpenBLAS across 2 KiB row strides");
    return info;
#else
    return "none";
#endif
}

/* Note [Runtime environment]
 * Some settings that matter for speed are read by other libraries once, when they
 * load, before any ctorch code runs, so ctorch can only set them for a fresh process
 * image (ct_runtime_tune_and_reexec). A variable the user has set is never changed.
 *
 * OPENBLAS_CORETYPE: OpenBLAS (Debian's is 0.3.21) picks its kernels from the CPU's
 * model number, and a model newer than it knows falls back to an old core: on the
 * Xeon of our GPU machine it reports Prescott (SSE3) or Haswell (AVX2) kernels where
 * the CPU has AVX-512, and its SkylakeX kernels run the CNN's GEMMs about twice as
 * fast there. So when the CPU has AVX-512 F/BW/DQ/VL but the library runs a core
 * without it, ctorch asks for SkylakeX (Cooperlake, its bfloat16 superset, where the
 * CPU has AVX-512 BF16); with AVX2 and FMA under an older core, for Haswell. The
 * decision uses the CPU's feature flags, not its model number, so it holds for models
 * OpenBLAS has never seen.
 *
 * CT_NO_REEXEC=1 turns all of this off (it is also set in the re-executed image, so
 * it cannot loop). */
static int set_if_unset(const char *name, const char *value) {
    if (getenv(name))
        return 0;
    return setenv(name, value, 0) == 0;
}

#if defined(CT_HAVE_OPENBLAS) && defined(__x86_64__) && defined(__GNUC__)
static bool core_in(const char *core, const char *const *list) {
    for (; *list; list++)
        if (strcasecmp(core, *list) == 0)
            return true;
    return false;
}

/* The OpenBLAS core this CPU can run that is better than the loaded one, or NULL. */
static const char *better_blas_core(void) {
    static const char *const avx512_cores[] = {"SkylakeX", "Cooperlake", "SapphireRapids", NULL};
    static const char *const avx2_cores[] = {"Haswell", "Zen", "SkylakeX", "Cooperlake", "SapphireRapids", NULL};
    const char *core = openblas_get_corename();
    if (!core)
        return NULL;
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl") && !core_in(core, avx512_cores))
        return __builtin_cpu_supports("avx512bf16") ? "Cooperlake" : "SkylakeX";
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && !core_in(core, avx2_cores))
        return "Haswell";
    return NULL;
}
#endif

int ct_runtime_tune_env(void) {
    int n = 0;
#if defined(CT_HAVE_OPENBLAS) && defined(__x86_64__) && defined(__GNUC__)
    const char *core = better_blas_core();
    if (core)
        n += set_if_unset("OPENBLAS_CORETYPE", core);
#endif
    return n;
}

void ct_runtime_tune_and_reexec(char **argv) {
    const char *off = getenv("CT_NO_REEXEC");
    if ((off && *off && strcmp(off, "0") != 0) || !argv || !argv[0])
        return;
    if (ct_runtime_tune_env() == 0)
        return;
    setenv("CT_NO_REEXEC", "1", 1); /* the new image must not loop */
    execv("/proc/self/exe", argv);
    /* exec failed (no /proc, say): carry on with the environment as it was loaded */
}

void ct_cpu_register_info(void) {
#ifdef CT_HAVE_OPENMP
    ct_build_info_set("OpenMP", "yes");
#else
    ct_build_info_set("OpenMP", "no");
#endif
    ct_build_info_set("BLAS", ct_blas_info());
#ifdef CT_HAVE_SLEEF
    ct_build_info_set("SLEEF", "yes");
#else
    ct_build_info_set("SLEEF", "no");
#endif
}
