/* SLEEF's AVX-512 routines (this file alone is built with -mavx512f -mavx512dq;
 * vecmath.c calls it only on CPUs that have both). */
#include "cpu/vecmath.h"

#if defined(CT_HAVE_SLEEF) && defined(__x86_64__) && defined(__AVX512F__)
#include <immintrin.h>
#include <sleef.h>

#define W 16
#define LOAD(p) _mm512_loadu_ps(p)
#define STORE(p, v) _mm512_storeu_ps((p), (v))
#define SL(name, acc) Sleef_##name##f16_##acc##avx512f
#define TABLE ct_vm_avx512
#include "cpu/vecmath_impl.h"
#elif defined(CT_HAVE_SLEEF) && defined(__x86_64__) && defined(__GNUC__)
#error "vecmath_avx512.c must be built with -mavx512f -mavx512dq (see CMakeLists.txt)"
#else
typedef int ct_vecmath_avx512_unused;
#endif
