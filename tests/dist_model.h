/* The small model, data and weight files the distributed training tests share. */
#ifndef CT_TEST_DIST_MODEL_H
#define CT_TEST_DIST_MODEL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctorch.h"

#define BATCH 12
#define IN 6
#define HID 16
#define OUT 3
#define STEPS 4

static inline ct_module *make_model(bool unused_layer) {
    ct_manual_seed(7);
    ct_module *layers[4] = {ct_nn_linear(IN, HID, true, CT_F32), ct_nn_tanh(), ct_nn_linear(HID, OUT, true, CT_F32),
                            NULL};
    int n = 3;
    if (unused_layer)
        layers[n++] = ct_nn_linear(OUT, OUT, true, CT_F32); /* run only by full_forward */
    return ct_nn_sequential(layers, n);
}

/* Row i of the global batch (step s): inputs and targets from a fixed formula. */
static inline ct_tensor *rows(int s, int64_t start, int64_t count, int width, int salt) {
    float *buf = calloc((size_t)(count * width), sizeof *buf);
    if (!buf)
        return NULL;
    for (int64_t i = 0; i < count; i++)
        for (int j = 0; j < width; j++) {
            int64_t g = (start + i) * 131 + j * 17 + s * 7 + salt;
            buf[i * width + j] = (float)((g * 2654435761u) % 1000) / 500.0f - 1.0f;
        }
    ct_tensor *t = ct_from_data(buf, CT_SHAPE(count, width), CT_F32);
    free(buf);
    return t;
}

/* The loss of rows [start, start + count) at step s: the mean over those rows. The
 * unused layer (the sequential's last child) is skipped by running the first three. */
static inline ct_tensor *loss_of(ct_module *m, int s, int64_t start, int64_t count, bool unused_layer) {
    ct_tensor *x = rows(s, start, count, IN, 0), *y = rows(s, start, count, OUT, 1);
    ct_tensor *h = x;
    for (int k = 0; k < 3; k++)
        h = ct_module_forward(ct_module_child_at(m, k, NULL), h);
    return ct_mse_loss(h, y, CT_REDUCTION_MEAN);
}

static inline int write_params(ct_module *m, const char *path) {
    ct_tensor *ps[8];
    int64_t n = ct_module_parameters(m, ps, NULL, 8);
    FILE *f = fopen(path, "wb");
    if (!f)
        return 1;
    for (int64_t i = 0; i < n; i++)
        fwrite(ct_tensor_data(ps[i]), 4, (size_t)ct_tensor_numel(ps[i]), f);
    fclose(f);
    return 0;
}

static inline long file_size(const char *path, unsigned char **data) {
    *data = NULL;
    FILE *f = fopen(path, "rb");
    if (!f)
        return -1;
    long n = -1;
    if (fseek(f, 0, SEEK_END) == 0)
        n = ftell(f);
    if (n > 0 && n < (1L << 30) && fseek(f, 0, SEEK_SET) == 0 && (*data = malloc((size_t)n)) != NULL) {
        if (fread(*data, 1, (size_t)n, f) != (size_t)n)
            n = -1;
    } else {
        n = -1;
    }
    fclose(f);
    return n;
}

/* max |a - b| over the floats of two files (0 when bit-identical), -1 if unreadable. */
static inline double compare(const char *dir, const char *a, const char *b, bool *identical) {
    char pa[160], pb[160];
    snprintf(pa, sizeof pa, "%s/%s", dir, a);
    snprintf(pb, sizeof pb, "%s/%s", dir, b);
    unsigned char *da = NULL, *db = NULL;
    long na = file_size(pa, &da), nb = file_size(pb, &db);
    double worst = -1;
    if (na > 0 && na == nb) {
        /* A loop rather than memcmp: some gcc builds cannot bound na and refuse the call. */
        *identical = true;
        for (long i = 0; i < na; i++)
            *identical &= da[i] == db[i];
        worst = 0;
        for (long i = 0; i < na / 4; i++) {
            double dif = ((float *)da)[i] - ((float *)db)[i];
            worst = dif > worst ? dif : -dif > worst ? -dif : worst;
        }
    }
    free(da);
    free(db);
    return worst;
}

#endif
