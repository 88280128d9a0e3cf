/* Loops of the fused nn kernels for one compute type, included by src/cpu/nn_fused.c
 * once per type with T (float or double), WD (its ct_dtype) and FN(name) defined.
 * Accumulations run in double whatever T is. */

/* ------------------------------------------------------------------ avg_pool2d */

typedef struct {
    const T *x;
    T *y;
    const ct_avgpool_geom *g;
} FN(avgpool_job);

static void FN(avgpool_fwd_planes)(void *ctx, int64_t p0, int64_t p1) {
    const FN(avgpool_job) *jb = ctx;
    const T *x = jb->x;
    T *y = jb->y;
    const ct_avgpool_geom *g = jb->g;
    for (int64_t p = p0; p < p1; p++) {
        const T *xp = x + p * g->h * g->w;
        T *yp = y + p * g->oh * g->ow;
        for (int64_t oy = 0; oy < g->oh; oy++)
            for (int64_t ox = 0; ox < g->ow; ox++) {
                ct_avgpool_window win;
                double acc = 0;
                if (!ct_avgpool_window_of(g, oy, ox, &win)) {
                    yp[oy * g->ow + ox] = 0;
                    continue;
                }
                for (int64_t i = win.h0; i < win.h1; i++)
                    for (int64_t j = win.w0; j < win.w1; j++)
                        acc += xp[i * g->w + j];
                yp[oy * g->ow + ox] = (T)(acc / (double)win.divisor);
            }
    }
}

static void FN(avgpool_fwd)(const T *x, T *y, const ct_avgpool_geom *g) {
    int64_t planes = g->n * g->c;
    FN(avgpool_job) j = {x, y, g};
    ct_parallel_range(planes, planes * g->oh * g->ow, 32768, FN(avgpool_fwd_planes), &j);
}

static void FN(avgpool_bwd_planes)(void *ctx, int64_t p0, int64_t p1) {
    const FN(avgpool_job) *jb = ctx;
    const T *gy = jb->x;
    T *gx = jb->y;
    const ct_avgpool_geom *g = jb->g;
    for (int64_t p = p0; p < p1; p++) {
        T *xp = gx + p * g->h * g->w;
        const T *yp = gy + p * g->oh * g->ow;
        for (int64_t oy = 0; oy < g->oh; oy++)
            for (int64_t ox = 0; ox < g->ow; ox++) {
                ct_avgpool_window win;
                if (!ct_avgpool_window_of(g, oy, ox, &win))
                    continue;
                T v = (T)(yp[oy * g->ow + ox] / (double)win.divisor);
                for (int64_t i = win.h0; i < win.h1; i++)
                    for (int64_t j = win.w0; j < win.w1; j++)
                        xp[i * g->w + j] += v;
            }
    }
}

static void FN(avgpool_bwd)(const T *gy, T *gx, const ct_avgpool_geom *g) {
    int64_t planes = g->n * g->c;
    FN(avgpool_job) j = {gy, gx, g};
    ct_parallel_range(planes, planes * g->oh * g->ow, 32768, FN(avgpool_bwd_planes), &j);
}

/* ------------------------------------------------------------------ adaptive_avg_pool2d */

/* Output cell o of n over an input of size len: [floor(o*len/n), ceil((o+1)*len/n)). */
static inline int64_t FN(ada_start)(int64_t o, int64_t n, int64_t len) { return (o * len) / n; }
static inline int64_t FN(ada_end)(int64_t o, int64_t n, int64_t len) { return ((o + 1) * len + n - 1) / n; }

typedef struct {
    const T *in;
    T *out;
    const ct_adapool_geom *g;
    bool backward;
} FN(adapool_job);

static void FN(adapool_planes)(void *ctx, int64_t p0, int64_t p1) {
    const FN(adapool_job) *jb = ctx;
    const T *in = jb->in;
    T *out = jb->out;
    const ct_adapool_geom *g = jb->g;
    bool backward = jb->backward;
    for (int64_t p = p0; p < p1; p++) {
        for (int64_t oy = 0; oy < g->oh; oy++) {
            int64_t hs = FN(ada_start)(oy, g->oh, g->h), he = FN(ada_end)(oy, g->oh, g->h);
            for (int64_t ox = 0; ox < g->ow; ox++) {
                int64_t ws = FN(ada_start)(ox, g->ow, g->w), we = FN(ada_end)(ox, g->ow, g->w);
                double cnt = (double)((he - hs) * (we - ws));
                if (!backward) {
                    const T *xp = in + p * g->h * g->w;
                    double acc = 0;
                    for (int64_t i = hs; i < he; i++)
                        for (int64_t j = ws; j < we; j++)
                            acc += xp[i * g->w + j];
                    out[(p * g->oh + oy) * g->ow + ox] = (T)(acc / cnt);
                } else {
                    T *xp = out + p * g->h * g->w;
                    T v = (T)(in[(p * g->oh + oy) * g->ow + ox] / cnt);
                    for (int64_t i = hs; i < he; i++)
                        for (int64_t j = ws; j < we; j++)
                            xp[i * g->w + j] += v;
                }
            }
        }
    }
}

static void FN(adapool)(const T *in, T *out, const ct_adapool_geom *g, bool backward) {
    int64_t planes = g->n * g->c;
    FN(adapool_job) j = {in, out, g, backward};
    ct_parallel_range(planes, planes * g->oh * g->ow, 32768, FN(adapool_planes), &j);
}

/* ------------------------------------------------------------------ rms_norm */

/* The operands of the row-wise norm loops (rms_norm, layer_norm). */
typedef struct {
    const T *x, *w, *b, *gy;
    T *y;
    double *stats;
    int64_t cols;
    double eps;
} FN(norm_job);

static void FN(rmsnorm_fwd_rows)(void *ctx, int64_t r0, int64_t r1) {
    const FN(norm_job) *jb = ctx;
    const T *x = jb->x, *w = jb->w;
    T *y = jb->y;
    int64_t cols = jb->cols;
    double eps = jb->eps;
    for (int64_t r = r0; r < r1; r++) {
        const T *xr = x + r * cols;
        T *yr = y + r * cols;
        double ss = 0;
        for (int64_t j = 0; j < cols; j++)
            ss += (double)xr[j] * xr[j];
        T rstd = (T)(1.0 / sqrt(ss / (double)cols + eps));
        if (w)
            for (int64_t j = 0; j < cols; j++)
                yr[j] = xr[j] * rstd * w[j];
        else
            for (int64_t j = 0; j < cols; j++)
                yr[j] = xr[j] * rstd;
    }
}

static void FN(rmsnorm_fwd)(const T *x, const T *w, T *y, int64_t rows, int64_t cols, double eps) {
    FN(norm_job) j = {.x = x, .w = w, .y = y, .cols = cols, .eps = eps};
    ct_parallel_range(rows, rows * cols, 32768, FN(rmsnorm_fwd_rows), &j);
}

/* With r = 1/sqrt(mean(x^2) + eps), xhat = x r and y = xhat w:
 *   dx = r (g w - xhat mean(g w xhat)),  dw = sum over rows of g xhat. */
static void FN(rmsnorm_bwd_rows)(void *ctx, int64_t r0, int64_t r1) {
    const FN(norm_job) *jb = ctx;
    const T *x = jb->x, *w = jb->w, *gy = jb->gy;
    T *gx = jb->y;
    int64_t cols = jb->cols;
    double eps = jb->eps;
    for (int64_t r = r0; r < r1; r++) {
        const T *xr = x + r * cols, *gr = gy + r * cols;
        T *dr = gx + r * cols;
        double ss = 0, dot = 0;
        for (int64_t j = 0; j < cols; j++)
            ss += (double)xr[j] * xr[j];
        double rstd = 1.0 / sqrt(ss / (double)cols + eps);
        for (int64_t j = 0; j < cols; j++)
            dot += (double)gr[j] * (w ? (double)w[j] : 1.0) * xr[j] * rstd;
        double m = dot / (double)cols;
        for (int64_t j = 0; j < cols; j++) {
            double xh = (double)xr[j] * rstd;
            dr[j] = (T)(rstd * ((double)gr[j] * (w ? (double)w[j] : 1.0) - xh * m));
        }
    }
}

static void FN(rmsnorm_bwd)(const T *gy, const T *x, const T *w, T *gx, double *gw, int64_t rows, int64_t cols,
                            double eps) {
    FN(norm_job) jb = {.x = x, .w = w, .gy = gy, .y = gx, .cols = cols, .eps = eps};
    ct_parallel_range(rows, rows * cols, 32768, FN(rmsnorm_bwd_rows), &jb);
    if (gw) /* rows in order: the sum does not depend on the thread count */
        for (int64_t r = 0; r < rows; r++) {
            const T *xr = x + r * cols, *gr = gy + r * cols;
            double ss = 0;
            for (int64_t j = 0; j < cols; j++)
                ss += (double)xr[j] * xr[j];
            double rstd = 1.0 / sqrt(ss / (double)cols + eps);
            for (int64_t j = 0; j < cols; j++)
                gw[j] += (double)gr[j] * xr[j] * rstd;
        }
}

/* ------------------------------------------------------------------ layer_norm */

/* Row sums in eight independent double accumulators: no serial chain of additions,
 * so the loop vectorizes, and the result does not depend on the thread count. */
#define CT_LANES 8
static double FN(lanes_total)(const double *acc) {
    return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

/* Mean and 1 / sqrt(biased variance + eps) of one row, accumulated in double. */
static void FN(row_stats)(const T *xr, int64_t cols, double eps, double *mean, double *rstd) {
    double s[CT_LANES] = {0}, ss[CT_LANES] = {0};
    int64_t j = 0, body = cols / CT_LANES * CT_LANES;
    for (; j < body; j += CT_LANES)
        for (int l = 0; l < CT_LANES; l++)
            s[l] += (double)xr[j + l];
    for (int l = 0; j < cols; j++, l++)
        s[l] += (double)xr[j];
    double m = FN(lanes_total)(s) / (double)cols;
    for (j = 0; j < body; j += CT_LANES)
        for (int l = 0; l < CT_LANES; l++) {
            double d = (double)xr[j + l] - m;
            ss[l] += d * d;
        }
    for (int l = 0; j < cols; j++, l++) {
        double d = (double)xr[j] - m;
        ss[l] += d * d;
    }
    *mean = m;
    *rstd = 1.0 / sqrt(FN(lanes_total)(ss) / (double)cols + eps);
}

static void FN(layernorm_fwd_rows)(void *ctx, int64_t r0, int64_t r1) {
    const FN(norm_job) *jb = ctx;
    const T *x = jb->x, *w = jb->w, *b = jb->b;
    T *y = jb->y;
    int64_t cols = jb->cols;
    double eps = jb->eps;
    for (int64_t r = r0; r < r1; r++) {
        const T *xr = x + r * cols;
        T *yr = y + r * cols;
        double mean, rstd;
        FN(row_stats)(xr, cols, eps, &mean, &rstd);
        const T m = (T)mean, rs = (T)rstd;
        if (w && b)
            for (int64_t j = 0; j < cols; j++)
                yr[j] = (xr[j] - m) * rs * w[j] + b[j];
        else
            for (int64_t j = 0; j < cols; j++) {
                T v = (xr[j] - m) * rs;
                if (w)
                    v *= w[j];
                if (b)
                    v += b[j];
                yr[j] = v;
            }
    }
}

static void FN(layernorm_fwd)(const T *x, const T *w, const T *b, T *y, int64_t rows, int64_t cols, double eps) {
    FN(norm_job) j = {.x = x, .w = w, .b = b, .y = y, .cols = cols, .eps = eps};
    ct_parallel_range(rows, rows * cols, 65536, FN(layernorm_fwd_rows), &j);
}

static void FN(layernorm_bwd_rows)(void *ctx, int64_t r0, int64_t r1) {
    const FN(norm_job) *jb = ctx;
    const T *x = jb->x, *w = jb->w, *gy = jb->gy;
    T *gx = jb->y;
    double *stats = jb->stats;
    int64_t cols = jb->cols;
    double eps = jb->eps;
    for (int64_t r = r0; r < r1; r++) {
        const T *xr = x + r * cols, *gr = gy + r * cols;
        T *dr = gx + r * cols;
        double mean, rstd;
        FN(row_stats)(xr, cols, eps, &mean, &rstd);
        stats[2 * r] = mean;
        stats[2 * r + 1] = rstd;
        const T m = (T)mean, rs = (T)rstd;
        double sg[CT_LANES] = {0}, sgx[CT_LANES] = {0};
        for (int64_t j0 = 0; j0 < cols; j0 += CT_LANES) {
            int64_t n = cols - j0 < CT_LANES ? cols - j0 : CT_LANES;
            for (int64_t l = 0; l < n; l++) {
                T gh = w ? gr[j0 + l] * w[j0 + l] : gr[j0 + l];
                sg[l] += gh;
                sgx[l] += (double)gh * (double)((xr[j0 + l] - m) * rs);
            }
        }
        const T a = (T)(FN(lanes_total)(sg) / (double)cols), c = (T)(FN(lanes_total)(sgx) / (double)cols);
        for (int64_t j = 0; j < cols; j++) {
            T gh = w ? gr[j] * w[j] : gr[j];
            dr[j] = rs * (gh - a - (xr[j] - m) * rs * c);
        }
    }
}

typedef struct {
    const T *gy, *x;
    const double *stats;
    double *gw, *gb;
    int64_t rows, cols;
} FN(layernorm_wjob);

/* Each range owns blocks of 64 columns and runs down the rows in order, so the sums do
 * not depend on the thread count. */
static void FN(layernorm_bwd_cols)(void *ctx, int64_t b0, int64_t b1) {
    const FN(layernorm_wjob) *jb = ctx;
    const T *x = jb->x, *gy = jb->gy;
    const double *stats = jb->stats;
    double *gw = jb->gw, *gb = jb->gb;
    int64_t rows = jb->rows, cols = jb->cols;
    for (int64_t bi = b0; bi < b1; bi++) {
        int64_t j0 = bi * 64, j1 = j0 + 64 < cols ? j0 + 64 : cols;
        for (int64_t r = 0; r < rows; r++) {
            const T *xr = x + r * cols, *gr = gy + r * cols;
            const T m = (T)stats[2 * r], rs = (T)stats[2 * r + 1];
            if (gw)
                for (int64_t j = j0; j < j1; j++)
                    gw[j] += (double)(gr[j] * ((xr[j] - m) * rs));
            if (gb)
                for (int64_t j = j0; j < j1; j++)
                    gb[j] += (double)gr[j];
        }
    }
}

/* With xhat = (x - mean) r, r = 1/sqrt(var + eps), y = xhat w + b and gh = g w:
 *   dx = r (gh - mean(gh) - xhat mean(gh xhat)),  dw = sum over rows of g xhat,
 *   db = sum over rows of g. stats gets (mean, r) per row for the weight pass. */
static void FN(layernorm_bwd)(const T *gy, const T *x, const T *w, T *gx, double *stats, double *gw, double *gb,
                              int64_t rows, int64_t cols, double eps) {
    FN(norm_job) jr = {.x = x, .w = w, .gy = gy, .y = gx, .stats = stats, .cols = cols, .eps = eps};
    ct_parallel_range(rows, rows * cols, 65536, FN(layernorm_bwd_rows), &jr);
    if (!gw && !gb)
        return;
    FN(layernorm_wjob) jw = {gy, x, stats, gw, gb, rows, cols};
    ct_parallel_range((cols + 63) / 64, rows * cols, 65536, FN(layernorm_bwd_cols), &jw);
}

/* ------------------------------------------------------------------ attention */

/* x[i] = exp(x[i]): SLEEF's vector routine for float32 where there is one. */
static void FN(exp_inplace)(T *x, int64_t n) {
    if (sizeof(T) == sizeof(float)) {
        ct_vm_f32_fn vexp = ct_vm_get(CT_VM_EXP); /* cached by vecmath.c */
        if (vexp) {
            vexp((float *)(void *)x, (const float *)(const void *)x, n);
            return;
        }
        for (int64_t i = 0; i < n; i++)
            x[i] = (T)expf((float)x[i]);
        return;
    }
    for (int64_t i = 0; i < n; i++)
        x[i] = (T)exp((double)x[i]);
}

/* Probabilities of queries q0 .. q0+bq of batch b against keys 0 .. sk into p
 * (bq x sk, row-major): softmax(q k^T * scale + mask). A row whose keys are all
 * masked comes out NaN, as the reference formula gives. */
static void FN(sdpa_probs)(const T *q, const T *k, const ct_sdpa_geom *g, const ct_sdpa_mask *m, int64_t b,
                           int64_t q0, int64_t bq, int64_t sk, T *p) {
    const T *qb = q + (b * g->l + q0) * g->e, *kb = k + b * g->s * g->e;
    ct_cpu_gemm(WD, false, true, bq, sk, g->e, m->scale, qb, g->e, kb, g->e, 0.0, p, sk);
    for (int64_t i = 0; i < bq; i++) {
        T *row = p + i * sk;
        int64_t qi = q0 + i;
        /* causal: keys after the query get probability 0 exactly; only the first nv
         * keys take part in the softmax */
        int64_t nv = m->causal && qi + 1 < sk ? qi + 1 : sk;
        for (int64_t j = nv; j < sk; j++)
            row[j] = 0;
        if (m->data) {
            const char *mp = m->data + (m->boff[b] + qi * m->sl) * (int64_t)m->esz;
            for (int64_t j = 0; j < nv; j++) {
                double mv = ct_load_double(mp + j * m->ss * (int64_t)m->esz, m->dtype);
                if (m->dtype == CT_DTYPE_BOOL) {
                    if (mv == 0)
                        row[j] = (T)-INFINITY;
                } else {
                    row[j] += (T)mv;
                }
            }
        }
        T mx = (T)-INFINITY;
        for (int64_t j = 0; j < nv; j++)
            if (row[j] > mx)
                mx = row[j];
        for (int64_t j = 0; j < nv; j++)
            row[j] -= mx;
        FN(exp_inplace)(row, nv);
        double sum = 0;
        for (int64_t j = 0; j < nv; j++)
            sum += row[j];
        T inv = (T)(1.0 / sum);
        for (int64_t j = 0; j < nv; j++)
            row[j] *= inv;
    }
}

typedef struct {
    const T *q, *k, *v, *gy;
    T *y, *gq, *gk, *gv, *bufs;
    const ct_sdpa_geom *g;
    const ct_sdpa_mask *m;
} FN(sdpa_job);

/* Task t: block t % nblk of queries of batch t / nblk, with the running thread's
 * scratch. */
static void FN(sdpa_fwd_task)(void *ctx, int64_t t) {
    const FN(sdpa_job) *j = ctx;
    const T *q = j->q, *k = j->k, *v = j->v;
    T *y = j->y;
    const ct_sdpa_geom *g = j->g;
    const ct_sdpa_mask *m = j->m;
    int64_t nblk = (g->l + CT_SDPA_BLOCK - 1) / CT_SDPA_BLOCK;
    {
        int tid = ct_parallel_thread();
        int64_t b = t / nblk, q0 = (t % nblk) * CT_SDPA_BLOCK;
        int64_t bq = g->l - q0 < CT_SDPA_BLOCK ? g->l - q0 : CT_SDPA_BLOCK;
        /* causal: keys past the block's last query get zero weight; skip them */
        int64_t sk = m->causal && q0 + bq < g->s ? q0 + bq : g->s;
        T *p = j->bufs + (size_t)tid * CT_SDPA_BLOCK * (size_t)g->s;
        FN(sdpa_probs)(q, k, g, m, b, q0, bq, sk, p);
        ct_cpu_gemm(WD, false, false, bq, g->ev, sk, 1.0, p, sk, v + b * g->s * g->ev, g->ev, 0.0,
                    y + (b * g->l + q0) * g->ev, g->ev);
    }
}

static void FN(sdpa_fwd)(const T *q, const T *k, const T *v, T *y, const ct_sdpa_geom *g, const ct_sdpa_mask *m,
                         T *bufs, int nth) {
    int64_t nblk = (g->l + CT_SDPA_BLOCK - 1) / CT_SDPA_BLOCK;
    FN(sdpa_job) j = {.q = q, .k = k, .v = v, .y = y, .bufs = bufs, .g = g, .m = m};
    ct_parallel_for(g->b * nblk, nth, FN(sdpa_fwd_task), &j);
}

/* Per batch: recompute each block's probabilities P, then
 *   dV += P^T dY,  dP = dY V^T,  dS = P (dP - rowsum(P dP)),
 *   dQ = scale dS K,  dK += scale dS^T Q. */
static void FN(sdpa_bwd_batch)(void *ctx, int64_t b) {
    const FN(sdpa_job) *jb = ctx;
    const T *gy = jb->gy, *q = jb->q, *k = jb->k, *v = jb->v;
    T *gq = jb->gq, *gk = jb->gk, *gv = jb->gv;
    const ct_sdpa_geom *g = jb->g;
    const ct_sdpa_mask *m = jb->m;
    {
        int tid = ct_parallel_thread();
        T *p = jb->bufs + (size_t)tid * 2 * CT_SDPA_BLOCK * (size_t)g->s, *dp = p + CT_SDPA_BLOCK * g->s;
        const T *kb = k + b * g->s * g->e, *vb = v + b * g->s * g->ev;
        T *gkb = gk + b * g->s * g->e, *gvb = gv + b * g->s * g->ev;
        for (int64_t q0 = 0; q0 < g->l; q0 += CT_SDPA_BLOCK) {
            int64_t bq = g->l - q0 < CT_SDPA_BLOCK ? g->l - q0 : CT_SDPA_BLOCK;
            int64_t sk = m->causal && q0 + bq < g->s ? q0 + bq : g->s;
            const T *gyb = gy + (b * g->l + q0) * g->ev, *qb = q + (b * g->l + q0) * g->e;
            FN(sdpa_probs)(q, k, g, m, b, q0, bq, sk, p);
            ct_cpu_gemm(WD, true, false, sk, g->ev, bq, 1.0, p, sk, gyb, g->ev, 1.0, gvb, g->ev);
            ct_cpu_gemm(WD, false, true, bq, sk, g->ev, 1.0, gyb, g->ev, vb, g->ev, 0.0, dp, sk);
            for (int64_t i = 0; i < bq; i++) {
                T *pr = p + i * sk, *dr = dp + i * sk;
                double d = 0;
                for (int64_t j = 0; j < sk; j++)
                    d += (double)pr[j] * dr[j];
                for (int64_t j = 0; j < sk; j++)
                    dr[j] = pr[j] * (dr[j] - (T)d);
            }
            ct_cpu_gemm(WD, false, false, bq, g->e, sk, m->scale, dp, sk, kb, g->e, 0.0, gq + (b * g->l + q0) * g->e,
                        g->e);
            ct_cpu_gemm(WD, true, false, sk, g->e, bq, m->scale, dp, sk, qb, g->e, 1.0, gkb, g->e);
        }
    }
}

static void FN(sdpa_bwd)(const T *gy, const T *q, const T *k, const T *v, T *gq, T *gk, T *gv,
                         const ct_sdpa_geom *g, const ct_sdpa_mask *m, T *bufs, int nth) {
    FN(sdpa_job) j = {.q = q, .k = k, .v = v, .gy = gy, .gq = gq, .gk = gk, .gv = gv, .bufs = bufs, .g = g, .m = m};
    ct_parallel_for(g->b, nth, FN(sdpa_bwd_batch), &j);
}

/* ------------------------------------------------------------------ nll_loss */

/* Returns the index of an out-of-range target, or -1. */
static int64_t FN(nll_fwd)(const T *x, const int64_t *t, const T *w, T *out, const ct_nll_geom *g, int reduction,
                           int64_t ignore, double *total_w) {
    double acc = 0, tw = 0;
    for (int64_t i = 0; i < g->n; i++)
        for (int64_t j = 0; j < g->inner; j++) {
            int64_t c = t[i * g->inner + j];
            double v = 0;
            if (c != ignore) {
                if (c < 0 || c >= g->c)
                    return i * g->inner + j;
                double wc = w ? (double)w[c] : 1.0;
                v = -wc * (double)x[(i * g->c + c) * g->inner + j];
                tw += wc;
            }
            if (reduction == CT_REDUCTION_NONE)
                out[i * g->inner + j] = (T)v;
            else
                acc += v;
        }
    if (reduction == CT_REDUCTION_SUM)
        out[0] = (T)acc;
    else if (reduction == CT_REDUCTION_MEAN)
        out[0] = (T)(acc / tw);
    *total_w = tw;
    return -1;
}

static int64_t FN(nll_bwd)(const T *gy, const int64_t *t, const T *w, T *gx, const ct_nll_geom *g, int reduction,
                           int64_t ignore) {
    double tw = 0;
    if (reduction == CT_REDUCTION_MEAN)
        for (int64_t i = 0; i < g->n * g->inner; i++) {
            int64_t c = t[i];
            if (c == ignore)
                continue;
            if (c < 0 || c >= g->c)
                return i;
            tw += w ? (double)w[c] : 1.0;
        }
    for (int64_t i = 0; i < g->n; i++)
        for (int64_t j = 0; j < g->inner; j++) {
            int64_t c = t[i * g->inner + j];
            if (c == ignore)
                continue;
            if (c < 0 || c >= g->c)
                return i * g->inner + j;
            double wc = w ? (double)w[c] : 1.0;
            double go = reduction == CT_REDUCTION_NONE ? (double)gy[i * g->inner + j] : (double)gy[0];
            if (reduction == CT_REDUCTION_MEAN)
                go /= tw;
            gx[(i * g->c + c) * g->inner + j] = (T)(-wc * go);
        }
    return -1;
}

/* ------------------------------------------------------------------ embedding */

static int64_t FN(embedding_bwd)(const T *gy, const ct_tensor *idx, T *gw, int64_t num, int64_t dim, int64_t pad) {
    int64_t n = idx->numel;
    const char *ip = ct_tensor_data(idx);
    for (int64_t i = 0; i < n; i++) {
        int64_t r = idx->dtype == CT_DTYPE_INT64 ? ((const int64_t *)ip)[i] : ((const int32_t *)ip)[i];
        if (r < 0 || r >= num)
            return i;
        if (r == pad)
            continue;
        T *dst = gw + r * dim;
        const T *src = gy + i * dim;
        for (int64_t j = 0; j < dim; j++)
            dst[j] += src[j];
    }
    return -1;
}
