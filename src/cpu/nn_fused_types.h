/* nn_fused_impl.h for float and double, its functions named NAME_f32 / NAME_f64 plus
 * CT_NN_SUFFIX (empty, _avx2 or _avx512); included by src/cpu/nn_fused.c once per ISA. */
#define T float
#define WD CT_DTYPE_FLOAT32
#define FN(name) CT_CAT(CT_CAT(name, _f32), CT_NN_SUFFIX)
#include "cpu/nn_fused_impl.h"
#undef T
#undef WD
#undef FN

#define T double
#define WD CT_DTYPE_FLOAT64
#define FN(name) CT_CAT(CT_CAT(name, _f64), CT_NN_SUFFIX)
#include "cpu/nn_fused_impl.h"
#undef T
#undef WD
#undef FN
