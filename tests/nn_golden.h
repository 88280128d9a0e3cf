/* The nn golden files (tests/golden/gen_nn.py, gen_rnn.py): cases of named float64 tensors. */
#ifndef CT_TEST_NN_GOLDEN_H
#define CT_TEST_NN_GOLDEN_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#define CT_NN_GOLDEN_FILE CT_TEST_DATA_DIR "/nn_golden.txt"
/* ------------------------------------------------------------------ golden file */

/* The most tensors one case holds (an RNN case: its state dict, inputs, outputs and
 * a gradient for each). */
#define CT_GOLDEN_MAX_TENSORS 128

typedef struct gt {
    char name[64];
    int ndim;
    int64_t shape[8];
    int64_t n;
    double *v;
} gt;

typedef struct gcase {
    char name[64];
    int n;
    gt t[CT_GOLDEN_MAX_TENSORS];
} gcase;

static gcase *cases;
static int ncases;

static inline int load_golden_file(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    char *line = NULL;
    size_t cap = 0;
    int ccap = 0;
    while (getline(&line, &cap, f) > 0) {
        char *save = NULL, *tok = strtok_r(line, " \n", &save);
        if (!tok)
            continue;
        if (strcmp(tok, "case") == 0) {
            if (ncases == ccap)
                cases = realloc(cases, sizeof(gcase) * (size_t)(ccap = ccap ? 2 * ccap : 64));
            gcase *c = &cases[ncases++];
            memset(c, 0, sizeof *c);
            snprintf(c->name, sizeof c->name, "%s", strtok_r(NULL, " \n", &save));
            continue;
        }
        gcase *c = &cases[ncases - 1];
        if (c->n == CT_GOLDEN_MAX_TENSORS)
            return -1;
        gt *t = &c->t[c->n++];
        snprintf(t->name, sizeof t->name, "%s", tok);
        t->ndim = atoi(strtok_r(NULL, " \n", &save));
        t->n = 1;
        for (int i = 0; i < t->ndim; i++) {
            t->shape[i] = atoll(strtok_r(NULL, " \n", &save));
            t->n *= t->shape[i];
        }
        t->v = malloc(sizeof(double) * (size_t)(t->n ? t->n : 1));
        for (int64_t i = 0; i < t->n; i++)
            t->v[i] = strtod(strtok_r(NULL, " \n", &save), NULL);
    }
    free(line);
    fclose(f);
    return ncases > 0 ? 0 : -1;
}

static inline int free_golden(void **state) {
    (void)state;
    for (int i = 0; i < ncases; i++)
        for (int j = 0; j < cases[i].n; j++)
            free(cases[i].t[j].v);
    free(cases);
    return 0;
}

static inline const gt *find(const gcase *c, const char *name) {
    for (int i = 0; i < c->n; i++)
        if (strcmp(c->t[i].name, name) == 0)
            return &c->t[i];
    return NULL;
}

/* While a case is pinned, T() hands out the same tensor for a name every time, so a
 * gradient test can mark inputs as requiring grad before running the forward. */
static const gcase *pinned_case;
static ct_tensor *pinned[CT_GOLDEN_MAX_TENSORS];

static inline ct_tensor *T(const gcase *c, const char *name) {
    const gt *t = find(c, name);
    if (!t)
        fail_msg("%s: no tensor %s", c->name, name);
    if (c == pinned_case && pinned[t - c->t])
        return pinned[t - c->t];
    return ct_from_data(t->v, t->shape, t->ndim, CT_F64);
}

/* Pins case c (NULL unpins): every tensor of the case made once, in the current scope. */
static inline void pin_case(const gcase *c) {
    pinned_case = NULL;
    memset(pinned, 0, sizeof pinned);
    if (!c)
        return;
    for (int i = 0; i < c->n; i++)
        pinned[i] = ct_from_data(c->t[i].v, c->t[i].shape, c->t[i].ndim, CT_F64);
    pinned_case = c;
}

static inline ct_tensor *I(const gcase *c, const char *name) { return ct_to_dtype(T(c, name), CT_I64); }

static inline void expect(const gcase *c, const char *name, const ct_tensor *got, double tol) {
    const gt *want = find(c, name);
    if (!want)
        fail_msg("%s: no tensor %s", c->name, name);
    if (!got)
        fail_msg("%s/%s: %s", c->name, name, ct_last_error());
    if (ct_tensor_dim(got) != want->ndim)
        fail_msg("%s/%s: got %d dims, want %d", c->name, name, ct_tensor_dim(got), want->ndim);
    for (int i = 0; i < want->ndim; i++)
        if (ct_tensor_size(got, i) != want->shape[i])
            fail_msg("%s/%s: size %d is %lld, want %lld", c->name, name, i, (long long)ct_tensor_size(got, i),
                     (long long)want->shape[i]);
    ct_tensor *g = ct_contiguous(ct_to_device(ct_to_dtype(got, CT_F64), CT_CPU)); /* read on the host */
    const double *p = ct_tensor_data(g);
    for (int64_t i = 0; i < want->n; i++) {
        double a = p[i], b = want->v[i];
        if (isnan(a) && isnan(b))
            continue;
        if (!(fabs(a - b) <= tol * (1 + fabs(b))))
            fail_msg("%s/%s[%lld]: got %.17g want %.17g", c->name, name, (long long)i, a, b);
    }
}

#endif
