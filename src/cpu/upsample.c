/* The CPU stubs of upsample and upsample_backward (src/meta/upsample.c): the plan's
 * weighted sums over each output element's taps, per plane (Note [upsample]). Sums run
 * in double and round once to the element type; the backward adds each output
 * gradient back along the same taps, one rounding per addition for the reduced
 * floating types and float32 (double for float64). */
#include <string.h>

#include "cpu/cpu_backend.h"
#include "meta/indexing.h"
#include "meta/stubs.h"

/* Element i of a contiguous floating buffer of dtype dt, as double. */
#define AT(base, i) ct_load_double((const char *)(base) + (size_t)(i) * esz, dt)

static ct_status cpu_upsample(ct_tensor *out, const ct_tensor *in, const ct_upsample_plan *p) {
    ct_dtype dt = in->dtype;
    size_t esz = ct_dtype_size(dt);
    const char *src = ct_tensor_ptr(in);
    char *dst = ct_tensor_ptr(out);
    int nt = p->ntaps;
    int64_t iplane = p->in[0] * p->in[1], oplane = p->out[0] * p->out[1];
    for (int64_t c = 0; c < p->planes; c++) {
        const char *ip = src + (size_t)(c * iplane) * esz;
        char *op = dst + (size_t)(c * oplane) * esz;
        for (int64_t oy = 0; oy < p->out[0]; oy++)
            for (int64_t ox = 0; ox < p->out[1]; ox++) {
                double acc = 0;
                for (int a = 0; a < nt; a++) {
                    double wy = p->w[0][oy * nt + a];
                    if (wy == 0)
                        continue;
                    int64_t row = p->idx[0][oy * nt + a] * p->in[1];
                    double r = 0;
                    for (int b = 0; b < nt; b++)
                        r += p->w[1][ox * nt + b] * AT(ip, row + p->idx[1][ox * nt + b]);
                    acc += wy * r;
                }
                ct_store_double(op + (size_t)(oy * p->out[1] + ox) * esz, dt, acc);
            }
    }
    return CT_OK;
}

static ct_status cpu_upsample_backward(ct_tensor *gin, const ct_tensor *g, const ct_upsample_plan *p) {
    ct_dtype dt = g->dtype;
    size_t esz = ct_dtype_size(dt);
    const char *src = ct_tensor_ptr(g);
    char *dst = ct_tensor_ptr(gin);
    memset(dst, 0, (size_t)gin->numel * esz);
    int nt = p->ntaps;
    int64_t iplane = p->in[0] * p->in[1], oplane = p->out[0] * p->out[1];
    for (int64_t c = 0; c < p->planes; c++) {
        char *ip = dst + (size_t)(c * iplane) * esz;
        const char *gp = src + (size_t)(c * oplane) * esz;
        for (int64_t oy = 0; oy < p->out[0]; oy++)
            for (int64_t ox = 0; ox < p->out[1]; ox++) {
                double v = AT(gp, oy * p->out[1] + ox);
                for (int a = 0; a < nt; a++) {
                    double wy = p->w[0][oy * nt + a];
                    if (wy == 0)
                        continue;
                    int64_t row = p->idx[0][oy * nt + a] * p->in[1];
                    for (int b = 0; b < nt; b++) {
                        double wx = p->w[1][ox * nt + b];
                        if (wx == 0)
                            continue;
                        char *e = ip + (size_t)(row + p->idx[1][ox * nt + b]) * esz;
                        ct_store_double(e, dt, ct_load_double(e, dt) + wy * wx * v);
                    }
                }
            }
    }
    return CT_OK;
}

void ct_cpu_register_upsample(void) {
    ct_stub_upsample[CT_DEVICE_CPU] = cpu_upsample;
    ct_stub_upsample_backward[CT_DEVICE_CPU] = cpu_upsample_backward;
}
