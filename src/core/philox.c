/* The public form of the Philox block function (ct_philox4x32 in ctorch/core.h); the
 * function itself is ct_philox_block in random.h, inlined where kernels draw. */
#include "ctorch/core.h"
#include "random.h"

void ct_philox4x32(uint64_t seed, uint64_t counter, uint32_t out[4]) { ct_philox_block(seed, counter, out); }
