/* SLEEF's AVX2 routines (this file alone is built with -mavx2 -mfma; vecmath.c calls
 * it only on CPUs that have both). */
#include "cpu/vecmath.h"

#if defined(CT_HAVE_SLEEF) && defined(__x86_64__) && defined(__AVX2__)
#include <immintrin.h>
#include <sleef.h>

#define W 8
#define LOAD(p) _mm256_loadu_ps(p)
#define STORE(p, v) _mm256_storeu_ps((p), (v))
#define SL(name, acc) Sleef_##name##f8_##acc##avx2
#define TABLE ct_vm_avx2
#include "cpu/vecmath_impl.h"
#elif defined(CT_HAVE_SLEEF) && defined(__x86_64__) && defined(__GNUC__)
#error "vecmath_avx2.c must be built with -mavx2 -mfma (see CMakeLists.txt)"
#else
typedef int ct_vecmath_avx2_unused;
#endif
