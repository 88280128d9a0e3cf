/* SLEEF's AVX-512 routines (this file alone is built with -mavx512f -mavx512dq;
 * vecmath.c calls it only on CPUs that have both). */
#include "cpu/vecmath.h"

#if defined(CT_HAVE_SLEEF) && defined(__x86_64__) && defined(__AVX512F__)
#include <immintrin.h>
#include <sleef.h>

#define W 16
#define VEC __m512
#define LOAD(p) _mm512_loadu_ps(p)
#define STORE(p, v) _mm512_storeu_ps((p), (v))
#define SL(name, acc) Sleef_##name##f16_##acc##avx512f
#define TABLE ct_vm_avx512
#define RED_TABLE ct_vm_red_avx512
#define TAIL_MASK(cnt) ((__mmask16)((1u << (cnt)) - 1u))
#define TAIL_LOAD_SUB(p, cnt, vm) \
    _mm512_mask_sub_ps(_mm512_set1_ps(-INFINITY), TAIL_MASK(cnt), _mm512_maskz_loadu_ps(TAIL_MASK(cnt), (p)), (vm))
#define TAIL_STORE(p, cnt, v) _mm512_mask_storeu_ps((p), TAIL_MASK(cnt), (v))
#define VZERO() _mm512_setzero_ps()
#define VSET1(x) _mm512_set1_ps(x)
#define VADD(a, b) _mm512_add_ps((a), (b))
#define VSUB(a, b) _mm512_sub_ps((a), (b))
#define VMAX(a, b) _mm512_max_ps((a), (b))
#define VHASNAN(a) ((int)_mm512_cmp_ps_mask((a), (a), _CMP_UNORD_Q))
#define DVEC __m512d
#define DW 8
#define DZERO() _mm512_setzero_pd()
#define DADD(a, b) _mm512_add_pd((a), (b))
#define DSTORE(p, v) _mm512_storeu_pd((p), (v))
#define CVT_LO(v) _mm512_cvtps_pd(_mm512_castps512_ps256(v))
#define CVT_HI(v) _mm512_cvtps_pd(_mm512_extractf32x8_ps((v), 1))
#include "cpu/vecmath_impl.h"
#elif defined(CT_HAVE_SLEEF) && defined(__x86_64__) && defined(__GNUC__)
#error "vecmath_avx512.c must be built with -mavx512f -mavx512dq (see CMakeLists.txt)"
#else
typedef int ct_vecmath_avx512_unused;
#endif
