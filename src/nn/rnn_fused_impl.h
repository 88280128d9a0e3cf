/* The pointwise kernels of the fused recurrence (src/nn/rnn_fused.c), included once per
 * element type: RF_T is the type, RF_SFX the functions' suffix, RF_EXP and RF_TANH its
 * exp and tanh. Each call is one time step over the batch; rows past their sequence's
 * length (mask[b]) keep the state and pass the gradient through. Gate order is
 * PyTorch's: i, f, g, o (LSTM) and r, z, n (GRU). */

#define RF_CAT_(a, b) a##b
#define RF_CAT(a, b) RF_CAT_(a, b)
#define RF_SIG(x) ((RF_T)1 / ((RF_T)1 + RF_EXP(-(x))))

/* One row of the LSTM forward. The pointers never overlap (the step's gates, the
 * projection, the previous and this step's states); restrict tells the vectorizer,
 * which otherwise gives up on the number of overlap checks the loop would need. */
static void RF_CAT(lstm_fwd_row_, RF_SFX)(int64_t H, const RF_T *restrict x, RF_T *restrict a,
                                          const RF_T *restrict cp, RF_T *restrict c, RF_T *restrict tc,
                                          RF_T *restrict h) {
    for (int64_t j = 0; j < H; j++) {
        RF_T i = RF_SIG(a[j] + x[j]);
        RF_T f = RF_SIG(a[H + j] + x[H + j]);
        RF_T g = RF_TANH(a[2 * H + j] + x[2 * H + j]);
        RF_T o = RF_SIG(a[3 * H + j] + x[3 * H + j]);
        RF_T cn = f * cp[j] + i * g;
        RF_T t = RF_TANH(cn);
        a[j] = i, a[H + j] = f, a[2 * H + j] = g, a[3 * H + j] = o;
        c[j] = cn, tc[j] = t, h[j] = o * t;
    }
}

/* LSTM forward: a holds h_prev @ W_hh^T on entry and the activated gates on exit. */
static void RF_CAT(lstm_fwd_rows_, RF_SFX)(void *ctx, int64_t b0, int64_t b1) {
    const rf_step *s = ctx;
    const int64_t B = s->B, H = s->H, G = 4 * H;
    (void)B;
    for (int64_t b = b0; b < b1; b++) {
        const RF_T *hp = (const RF_T *)s->hp + b * H, *cp = (const RF_T *)s->cp + b * H;
        RF_T *h = (RF_T *)s->h + b * H, *c = (RF_T *)s->c + b * H, *tc = (RF_T *)s->tc + b * H;
        if (s->mask && s->mask[b]) {
            memcpy(h, hp, sizeof(RF_T) * (size_t)H);
            memcpy(c, cp, sizeof(RF_T) * (size_t)H);
            continue;
        }
        RF_CAT(lstm_fwd_row_, RF_SFX)(H, (const RF_T *)s->xp + b * s->xs_b, (RF_T *)s->a + b * G, cp, c, tc, h);
    }
}
static void RF_CAT(lstm_fwd_, RF_SFX)(const rf_step *s) {
    (void)ct_parallel_range(s->B, s->B > 1 ? s->B * s->H : 0, RF_PAR_MIN - 1, RF_CAT(lstm_fwd_rows_, RF_SFX), (void *)s);
}

/* LSTM backward of one step: dh = dh_out + dhrec + carry, dc += dc_out; writes the
 * gates' pre-activation gradients dg, the carry (masked rows: dh) and dc for the step
 * before. */
static void RF_CAT(lstm_bwd_rows_, RF_SFX)(void *ctx, int64_t b0, int64_t b1) {
    const rf_bstep *s = ctx;
    const int64_t B = s->B, H = s->H, G = 4 * H;
    (void)B;
    for (int64_t b = b0; b < b1; b++) {
        const RF_T *dho = (const RF_T *)s->dh_out + b * H, *dhr = (const RF_T *)s->dhrec + b * H;
        const RF_T *dco = (const RF_T *)s->dc_out + b * H;
        RF_T *carry = (RF_T *)s->carry + b * H, *dc = (RF_T *)s->dc + b * H, *dg = (RF_T *)s->dg + b * s->ldg;
        if (s->mask && s->mask[b]) {
            for (int64_t j = 0; j < H; j++) {
                carry[j] = dho[j] + dhr[j] + carry[j];
                dc[j] += dco[j];
                dg[j] = dg[H + j] = dg[2 * H + j] = dg[3 * H + j] = 0;
            }
            continue;
        }
        const RF_T *a = (const RF_T *)s->a + b * G, *cp = (const RF_T *)s->cp + b * H;
        const RF_T *tc = (const RF_T *)s->tc + b * H;
        for (int64_t j = 0; j < H; j++) {
            RF_T dh = dho[j] + dhr[j] + carry[j];
            RF_T i = a[j], f = a[H + j], g = a[2 * H + j], o = a[3 * H + j], t = tc[j];
            RF_T dcj = dc[j] + dco[j] + dh * o * ((RF_T)1 - t * t);
            dg[j] = dcj * g * i * ((RF_T)1 - i);
            dg[H + j] = dcj * cp[j] * f * ((RF_T)1 - f);
            dg[2 * H + j] = dcj * i * ((RF_T)1 - g * g);
            dg[3 * H + j] = dh * t * o * ((RF_T)1 - o);
            dc[j] = dcj * f;
            carry[j] = 0;
        }
    }
}
static void RF_CAT(lstm_bwd_, RF_SFX)(const rf_bstep *s) {
    (void)ct_parallel_range(s->B, s->B > 1 ? s->B * s->H : 0, RF_PAR_MIN - 1, RF_CAT(lstm_bwd_rows_, RF_SFX), (void *)s);
}

/* One row of the GRU forward (restrict as for the LSTM's). */
static void RF_CAT(gru_fwd_row_, RF_SFX)(int64_t H, const RF_T *restrict x, RF_T *restrict a,
                                         const RF_T *restrict bh, const RF_T *restrict hp, RF_T *restrict ghn,
                                         RF_T *restrict h) {
    for (int64_t j = 0; j < H; j++) {
        RF_T hr = a[j] + bh[j], hz = a[H + j] + bh[H + j], hn = a[2 * H + j] + bh[2 * H + j];
        RF_T r = RF_SIG(x[j] + hr);
        RF_T z = RF_SIG(x[H + j] + hz);
        RF_T n = RF_TANH(x[2 * H + j] + r * hn);
        a[j] = r, a[H + j] = z, a[2 * H + j] = n;
        ghn[j] = hn;
        h[j] = n + z * (hp[j] - n);
    }
}

/* GRU forward: a holds h_prev @ W_hh^T on entry (b_hh added here) and r, z, n on exit;
 * ghn keeps the n gate's recurrent part (with its bias) for the backward. */
static void RF_CAT(gru_fwd_rows_, RF_SFX)(void *ctx, int64_t b0, int64_t b1) {
    const rf_step *s = ctx;
    const int64_t B = s->B, H = s->H, G = 3 * H;
    const RF_T *bh = (const RF_T *)s->bhh; /* zeros without biases */
    (void)B;
    for (int64_t b = b0; b < b1; b++) {
        const RF_T *hp = (const RF_T *)s->hp + b * H;
        RF_T *h = (RF_T *)s->h + b * H, *ghn = (RF_T *)s->ghn + b * H;
        if (s->mask && s->mask[b]) {
            memcpy(h, hp, sizeof(RF_T) * (size_t)H);
            continue;
        }
        RF_CAT(gru_fwd_row_, RF_SFX)(H, (const RF_T *)s->xp + b * s->xs_b, (RF_T *)s->a + b * G, bh, hp, ghn, h);
    }
}
static void RF_CAT(gru_fwd_, RF_SFX)(const rf_step *s) {
    (void)ct_parallel_range(s->B, s->B > 1 ? s->B * s->H : 0, RF_PAR_MIN - 1, RF_CAT(gru_fwd_rows_, RF_SFX), (void *)s);
}

/* GRU backward of one step: dx gets the input projection's gradient, dg the recurrent
 * product's (they differ in the n gate: dg's is dx's times r), carry dh * z. */
static void RF_CAT(gru_bwd_rows_, RF_SFX)(void *ctx, int64_t b0, int64_t b1) {
    const rf_bstep *s = ctx;
    const int64_t B = s->B, H = s->H, G = 3 * H;
    (void)B;
    for (int64_t b = b0; b < b1; b++) {
        const RF_T *dho = (const RF_T *)s->dh_out + b * H, *dhr = (const RF_T *)s->dhrec + b * H;
        RF_T *carry = (RF_T *)s->carry + b * H, *dg = (RF_T *)s->dg + b * s->ldg, *dx = (RF_T *)s->dx + b * s->ldg;
        if (s->mask && s->mask[b]) {
            for (int64_t j = 0; j < H; j++) {
                carry[j] = dho[j] + dhr[j] + carry[j];
                dg[j] = dg[H + j] = dg[2 * H + j] = 0;
                dx[j] = dx[H + j] = dx[2 * H + j] = 0;
            }
            continue;
        }
        const RF_T *a = (const RF_T *)s->a + b * G, *hp = (const RF_T *)s->hp + b * H;
        const RF_T *ghn = (const RF_T *)s->ghn + b * H;
        for (int64_t j = 0; j < H; j++) {
            RF_T dh = dho[j] + dhr[j] + carry[j];
            RF_T r = a[j], z = a[H + j], n = a[2 * H + j];
            RF_T dn = dh * ((RF_T)1 - z) * ((RF_T)1 - n * n);
            RF_T dz = dh * (hp[j] - n) * z * ((RF_T)1 - z);
            RF_T dr = dn * ghn[j] * r * ((RF_T)1 - r);
            dx[j] = dg[j] = dr;
            dx[H + j] = dg[H + j] = dz;
            dx[2 * H + j] = dn;
            dg[2 * H + j] = dn * r;
            carry[j] = dh * z;
        }
    }
}
static void RF_CAT(gru_bwd_, RF_SFX)(const rf_bstep *s) {
    (void)ct_parallel_range(s->B, s->B > 1 ? s->B * s->H : 0, RF_PAR_MIN - 1, RF_CAT(gru_bwd_rows_, RF_SFX), (void *)s);
}

/* Elman RNN forward: h holds h_prev @ W_hh^T on entry, the new state on exit. */
static void RF_CAT(rnn_fwd_rows_, RF_SFX)(void *ctx, int64_t b0, int64_t b1) {
    const rf_step *s = ctx;
    const int64_t B = s->B, H = s->H;
    const bool relu = s->relu;
    (void)B;
    for (int64_t b = b0; b < b1; b++) {
        const RF_T *hp = (const RF_T *)s->hp + b * H;
        RF_T *h = (RF_T *)s->h + b * H;
        if (s->mask && s->mask[b]) {
            memcpy(h, hp, sizeof(RF_T) * (size_t)H);
            continue;
        }
        const RF_T *x = (const RF_T *)s->xp + b * s->xs_b;
        for (int64_t j = 0; j < H; j++) {
            RF_T v = h[j] + x[j];
            h[j] = relu ? (v > 0 ? v : (RF_T)0) : RF_TANH(v);
        }
    }
}
static void RF_CAT(rnn_fwd_, RF_SFX)(const rf_step *s) {
    (void)ct_parallel_range(s->B, s->B > 1 ? s->B * s->H : 0, RF_PAR_MIN - 1, RF_CAT(rnn_fwd_rows_, RF_SFX), (void *)s);
}

static void RF_CAT(rnn_bwd_rows_, RF_SFX)(void *ctx, int64_t b0, int64_t b1) {
    const rf_bstep *s = ctx;
    const int64_t B = s->B, H = s->H;
    const bool relu = s->relu;
    (void)B;
    for (int64_t b = b0; b < b1; b++) {
        const RF_T *dho = (const RF_T *)s->dh_out + b * H, *dhr = (const RF_T *)s->dhrec + b * H;
        RF_T *carry = (RF_T *)s->carry + b * H, *dg = (RF_T *)s->dg + b * s->ldg;
        if (s->mask && s->mask[b]) {
            for (int64_t j = 0; j < H; j++) {
                carry[j] = dho[j] + dhr[j] + carry[j];
                dg[j] = 0;
            }
            continue;
        }
        const RF_T *h = (const RF_T *)s->h + b * H;
        for (int64_t j = 0; j < H; j++) {
            RF_T dh = dho[j] + dhr[j] + carry[j];
            dg[j] = relu ? (h[j] > 0 ? dh : (RF_T)0) : dh * ((RF_T)1 - h[j] * h[j]);
            carry[j] = 0;
        }
    }
}
static void RF_CAT(rnn_bwd_, RF_SFX)(const rf_bstep *s) {
    (void)ct_parallel_range(s->B, s->B > 1 ? s->B * s->H : 0, RF_PAR_MIN - 1, RF_CAT(rnn_bwd_rows_, RF_SFX), (void *)s);
}

#undef RF_SIG
#undef RF_CAT
#undef RF_CAT_
