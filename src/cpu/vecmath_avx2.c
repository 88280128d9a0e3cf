/* SLEEF's AVX2 routines (this file alone is built with -mavx2 -mfma; vecmath.c calls
 * it only on CPUs that have both). */
#include "cpu/vecmath.h"

#if defined(CT_HAVE_SLEEF) && defined(__x86_64__) && defined(__AVX2__)
#include <immintrin.h>
#include <sleef.h>

#define W 8
#define VEC __m256
#define LOAD(p) _mm256_loadu_ps(p)
#define STORE(p, v) _mm256_storeu_ps((p), (v))
#define STREAM(p, v) _mm256_stream_ps((p), (v))
#define SL(name, acc) Sleef_##name##f8_##acc##avx2
#define TABLE ct_vm_avx2
#define RED_TABLE ct_vm_red_avx2
#define TAIL_MASK(cnt) _mm256_cmpgt_epi32(_mm256_set1_epi32(cnt), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7))
#define TAIL_LOAD_SUB(p, cnt, vm)                                                               \
    _mm256_blendv_ps(_mm256_set1_ps(-INFINITY), _mm256_sub_ps(_mm256_maskload_ps((p), TAIL_MASK(cnt)), (vm)), \
                     _mm256_castsi256_ps(TAIL_MASK(cnt)))
#define TAIL_STORE(p, cnt, v) _mm256_maskstore_ps((p), TAIL_MASK(cnt), (v))
#define VZERO() _mm256_setzero_ps()
#define VSET1(x) _mm256_set1_ps(x)
#define VADD(a, b) _mm256_add_ps((a), (b))
#define VSUB(a, b) _mm256_sub_ps((a), (b))
#define VMAX(a, b) _mm256_max_ps((a), (b))
#define VHASNAN(a) _mm256_movemask_ps(_mm256_cmp_ps((a), (a), _CMP_UNORD_Q))
#define DVEC __m256d
#define DW 4
#define DZERO() _mm256_setzero_pd()
#define DADD(a, b) _mm256_add_pd((a), (b))
#define DSTORE(p, v) _mm256_storeu_pd((p), (v))
#define CVT_LO(v) _mm256_cvtps_pd(_mm256_castps256_ps128(v))
#define CVT_HI(v) _mm256_cvtps_pd(_mm256_extractf128_ps((v), 1))
#define VEXP(v) Sleef_expf8_u10avx2(v)
#include "cpu/vecmath_impl.h"
#elif defined(CT_HAVE_SLEEF) && defined(__x86_64__) && defined(__GNUC__)
#error "vecmath_avx2.c must be built with -mavx2 -mfma (see CMakeLists.txt)"
#else
typedef int ct_vecmath_avx2_unused;
#endif
