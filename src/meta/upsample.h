/* The plan of an upsample call (Note [upsample] in upsample.c): per spatial dim, the
 * input coordinates and weights each output coordinate reads. */
#ifndef CT_META_UPSAMPLE_H
#define CT_META_UPSAMPLE_H

#include <stdint.h>

#include "core/backend_api.h"

CT_BACKEND_BEGIN

/* upsample's modes, in the order of the op's int mode. */
enum { CT_UPSAMPLE_NEAREST = 0, CT_UPSAMPLE_NEAREST_EXACT, CT_UPSAMPLE_LINEAR, CT_UPSAMPLE_CUBIC, CT_UPSAMPLE_MODE_COUNT };

/* An input of (planes, in[0], in[1]) read as an output of (planes, out[0], out[1]):
 * output coordinate o of dim d reads the ntaps input coordinates idx[d][o * ntaps + t]
 * with weights w[d][o * ntaps + t]. A 1-D upsample is dim 1 of a plan whose dim 0 has
 * size 1 and one tap of weight 1 (the others 0). */
typedef struct ct_upsample_plan {
    int ntaps;
    int64_t planes, in[2], out[2];
    int64_t *idx[2];
    double *w[2];
} ct_upsample_plan;

CT_BACKEND_END

#endif /* CT_META_UPSAMPLE_H */
