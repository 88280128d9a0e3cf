/* CUDA reductions: sum, nansum, mean, prod, amax/amin, max/min with indices,
 * argmax/argmin, count_nonzero, all/any, var/std (+ mean), logsumexp, vector norms and
 * the power sums, over the layout src/meta/reduce_iter.c plans for every backend.
 *
 * Note [GPU reductions]
 * One kernel template, instantiated per work dtype (float32, float64, int64) and fold
 * (a functor-like set of init/add/combine rules over one state struct). The problem is
 * the ct_reduce_iter's [kept dims] x [reduced dims]; a group of threads produces one
 * output element:
 * - group 1 (a thread per output) when the innermost kept dim is closer in memory than
 *   every reduced dim (sum over dim 0 of a row-major matrix: neighbouring threads read
 *   neighbouring columns, so loads coalesce);
 * - a warp (32) or a block (256) otherwise, the lanes striding through the reduced
 *   elements and combining through shared memory.
 * When there are too few outputs to fill the GPU, each output's reduced range is cut
 * into chunks handled by separate groups; their states go to scratch memory and a
 * second kernel combines them, again a group per output. Cut points and combining
 * order depend only on the shape and the device's SM count, so results are
 * deterministic run to run. A reduced dim of unit stride is read in 16-byte vectors.
 * Float work accumulates in double (as the CPU); integer work in uint64 with
 * two's-complement wrap-around. Sums are combined in a different order than the CPU's
 * cascade, so float results agree to rounding, not bit for bit; integer results,
 * extrema, indices and counts are exact. Arg-extrema return the first index of the
 * best value, a NaN being the best (the first NaN), as the CPU. var/std and logsumexp
 * take two passes like the CPU (mean, then squared deviations; max, then shifted
 * exponentials), the first pass leaving one double per output in scratch memory. */
#include <math.h>

#include "casts.cuh"

/* The folds: how elements combine into a state. */
enum {
    F_SUM,
    F_NANSUM, /* v: sum of non-NaN, u: their count */
    F_PROD,
    F_MAX,
    F_MIN,
    F_ARGMAX,
    F_ARGMIN,
    F_COUNT, /* u: nonzero elements (NaN counts) */
    F_DEV2,  /* v: sum of (x - m)^2, m the output's mean */
    F_EXPM,  /* v: sum of exp(x - m), m the output's shift */
    F_ABSSUM,
    F_SQ,
    F_POW, /* v: sum of |x|^p */
    F_ABSMAX,
    F_ABSMIN,
};

typedef struct rstate {
    double v;    /* float accumulator or best value */
    uint64_t u;  /* integer accumulator or count */
    int64_t i;   /* integer best value */
    int64_t idx; /* arg-extrema: walk index of the best value, -1 for none */
} rstate;

#define RED_THREADS 256

template <typename T, int K> static __device__ __forceinline__ rstate r_init() {
    rstate s;
    s.v = 0;
    s.u = 0;
    s.i = 0;
    s.idx = -1;
    if (K == F_PROD) {
        s.v = 1;
        s.u = 1;
    } else if (K == F_MAX) {
        s.v = -INFINITY;
        s.i = INT64_MIN;
    } else if (K == F_MIN || K == F_ABSMIN) {
        s.v = INFINITY;
        s.i = INT64_MAX;
    }
    return s;
}

/* An element as the double the work computes on; bfloat16 and float16 inputs are read
 * as they are (Note [Narrow reduction inputs] in src/meta/reduce.c) and widen exactly,
 * so they take float32's path. */
template <typename T> static __device__ __forceinline__ double r_val(T x) { return (double)x; }
template <> __device__ __forceinline__ double r_val<ct_bf16_s>(ct_bf16_s x) { return (double)ct_dev_b2f(x.x); }
template <> __device__ __forceinline__ double r_val<ct_half_s>(ct_half_s x) { return (double)ct_dev_h2f(x.x); }
template <typename T> struct r_f32_work {
    static constexpr bool value =
        std::is_same<T, float>::value || std::is_same<T, ct_bf16_s>::value || std::is_same<T, ct_half_s>::value;
};

/* Elements reach one state in increasing walk order, so strict comparisons keep the
 * first best element; combine() breaks ties by the smaller index. */
template <typename T, int K>
static __device__ __forceinline__ void r_add(rstate &s, T x, int64_t r, double m, double p) {
    if constexpr (std::is_integral<T>::value) {
        (void)m;
        (void)p;
        int64_t xi = (int64_t)x;
        if constexpr (K == F_SUM)
            s.u += (uint64_t)xi;
        else if constexpr (K == F_PROD)
            s.u *= (uint64_t)xi;
        else if constexpr (K == F_MAX)
            s.i = xi > s.i ? xi : s.i;
        else if constexpr (K == F_MIN)
            s.i = xi < s.i ? xi : s.i;
        else if constexpr (K == F_ARGMAX) {
            if (s.idx < 0 || xi > s.i)
                s.i = xi, s.idx = r;
        } else if constexpr (K == F_ARGMIN) {
            if (s.idx < 0 || xi < s.i)
                s.i = xi, s.idx = r;
        } else if constexpr (K == F_COUNT)
            s.u += xi != 0;
    } else {
        double d = r_val(x);
        if constexpr (K == F_SUM)
            s.v += d;
        else if constexpr (K == F_NANSUM) {
            if (d == d)
                s.v += d, s.u++;
        } else if constexpr (K == F_PROD)
            s.v *= d;
        else if constexpr (K == F_MAX || K == F_ABSMAX) {
            if (K == F_ABSMAX)
                d = fabs(d);
            if (s.v == s.v)
                s.v = (d != d || d > s.v) ? d : s.v;
        } else if constexpr (K == F_MIN || K == F_ABSMIN) {
            if (K == F_ABSMIN)
                d = fabs(d);
            if (s.v == s.v)
                s.v = (d != d || d < s.v) ? d : s.v;
        } else if constexpr (K == F_ARGMAX || K == F_ARGMIN) {
            if (s.idx >= 0 && s.v != s.v)
                return; /* a NaN was found: nothing replaces it */
            bool better = K == F_ARGMAX ? d > s.v : d < s.v;
            if (s.idx < 0 || d != d || better)
                s.v = d, s.idx = r;
        } else if constexpr (K == F_COUNT)
            s.u += d != 0;
        else if constexpr (K == F_DEV2)
            s.v += (d - m) * (d - m);
        else if constexpr (K == F_EXPM) {
            if constexpr (r_f32_work<T>::value)
                s.v += (double)expf((float)(d - m));
            else
                s.v += exp(d - m);
        } else if constexpr (K == F_ABSSUM)
            s.v += fabs(d);
        else if constexpr (K == F_SQ)
            s.v += d * d;
        else if constexpr (K == F_POW)
            s.v += pow(fabs(d), p);
    }
}

template <typename T, int K> static __device__ __forceinline__ rstate r_combine(rstate a, rstate b) {
    constexpr bool INT = std::is_integral<T>::value;
    if constexpr (K == F_ARGMAX || K == F_ARGMIN) {
        if (a.idx < 0)
            return b;
        if (b.idx < 0)
            return a;
        if constexpr (!INT) {
            bool an = a.v != a.v, bn = b.v != b.v;
            if (an || bn) {
                if (an && bn)
                    return a.idx < b.idx ? a : b;
                return an ? a : b;
            }
            if (a.v != b.v)
                return (K == F_ARGMAX ? a.v > b.v : a.v < b.v) ? a : b;
        } else {
            if (a.i != b.i)
                return (K == F_ARGMAX ? a.i > b.i : a.i < b.i) ? a : b;
        }
        return a.idx < b.idx ? a : b;
    } else {
        rstate s = a;
        if constexpr (K == F_MAX || K == F_MIN || K == F_ABSMAX || K == F_ABSMIN) {
            constexpr bool MX = K == F_MAX || K == F_ABSMAX;
            if constexpr (INT) {
                s.i = MX ? (a.i > b.i ? a.i : b.i) : (a.i < b.i ? a.i : b.i);
            } else {
                if (a.v != a.v)
                    s.v = a.v;
                else if (b.v != b.v)
                    s.v = b.v;
                else
                    s.v = MX ? (a.v > b.v ? a.v : b.v) : (a.v < b.v ? a.v : b.v);
            }
        } else if constexpr (K == F_PROD) {
            s.u = a.u * b.u;
            s.v = a.v * b.v;
        } else {
            s.u = a.u + b.u;
            s.v = a.v + b.v;
        }
        return s;
    }
}

/* Byte offset of flat index i over (shape, strides) of n dims, outermost first. */
static __device__ __forceinline__ int64_t unravel_off(int64_t i, int n, const int64_t *shape, const int64_t *strides) {
    int64_t off = 0;
    for (int k = n - 1; k >= 0; k--) {
        int64_t q = i / shape[k];
        off += (i - q * shape[k]) * strides[k];
        i = q;
    }
    return off;
}

/* What the first pass leaves per output (aux) for the second. pass: 0 single, 1 first
 * of two (writes aux), 2 second of two (reads aux). */
static __device__ __forceinline__ double shift_of(const ct_cuda_reduce_desc &d, double a) {
    if (d.kind == CT_CUDA_RED_LOGSUMEXP)
        return isinf(a) ? 0.0 : a; /* an infinite max would give inf - inf */
    return a;
}

template <typename T, int K>
static __device__ void r_final(const ct_cuda_reduce_desc &d, int64_t o, rstate s, double *aux, int pass) {
    constexpr bool INT = std::is_integral<T>::value;
    const double n = (double)d.red_numel;
    if (pass == 1) {
        aux[o] = d.kind == CT_CUDA_RED_VAR ? s.v / n : s.v;
        return;
    }
    char *o0 = d.out[0] + unravel_off(o, d.nk, d.kshape, d.kout[0]);
    char *o1 = d.nout > 1 && d.out[1] ? d.out[1] + unravel_off(o, d.nk, d.kshape, d.kout[1]) : NULL;
    const int dt0 = (int)d.out_dtype[0], dt1 = (int)d.out_dtype[1];
    switch (d.kind) {
    case CT_CUDA_RED_SUM:
    case CT_CUDA_RED_PROD:
        if (INT)
            cast_store_i64(o0, dt0, (int64_t)s.u);
        else
            cast_store_f64(o0, dt0, d.mean ? s.v / n : s.v);
        break;
    case CT_CUDA_RED_NANSUM: cast_store_f64(o0, dt0, d.mean ? s.v / (double)s.u : s.v); break;
    case CT_CUDA_RED_MAX:
    case CT_CUDA_RED_MIN:
        if (INT)
            cast_store_i64(o0, dt0, s.i);
        else
            cast_store_f64(o0, dt0, s.v);
        break;
    case CT_CUDA_RED_ARGMAX:
    case CT_CUDA_RED_ARGMIN:
        if (d.index_only) {
            cast_store_i64(o0, dt0, s.idx);
            break;
        }
        if (INT)
            cast_store_i64(o0, dt0, s.i);
        else
            cast_store_f64(o0, dt0, s.v);
        if (o1)
            cast_store_i64(o1, dt1, s.idx);
        break;
    case CT_CUDA_RED_COUNT: cast_store_i64(o0, dt0, (int64_t)s.u); break;
    case CT_CUDA_RED_ANY: cast_store_i64(o0, dt0, s.u > 0); break;
    case CT_CUDA_RED_ALL: cast_store_i64(o0, dt0, (int64_t)s.u == d.red_numel); break;
    case CT_CUDA_RED_VAR: {
        double div = n - d.p;
        double v = s.v / (div > 0 ? div : 0.0);
        cast_store_f64(o0, dt0, d.take_sqrt ? sqrt(v) : v);
        if (o1)
            cast_store_f64(o1, dt1, aux[o]);
        break;
    }
    case CT_CUDA_RED_LOGSUMEXP: {
        double m = aux[o], r = m;
        if (m == m)
            r = log(s.v) + shift_of(d, m);
        cast_store_f64(o0, dt0, r);
        break;
    }
    case CT_CUDA_RED_NORM: {
        double p = d.p, r;
        if (d.red_numel == 0)
            r = 0;
        else if (isinf(p))
            r = s.v;
        else if (p == 0)
            r = (double)s.u;
        else if (p == 1)
            r = s.v;
        else if (p == 2)
            r = sqrt(s.v);
        else
            r = pow(s.v, 1.0 / p);
        cast_store_f64(o0, dt0, r);
        break;
    }
    case CT_CUDA_RED_POWSUM: cast_store_f64(o0, dt0, s.v); break;
    default: break;
    }
}

/* Combines the states of each group of a block (group lanes in a row, lane 0 first)
 * through shared memory; lane 0 of each group gets its group's state. Every thread of
 * the block must call it. */
template <typename T, int K>
static __device__ __forceinline__ rstate group_combine(rstate s, rstate *sm, int group, int lane) {
    if (group == 1)
        return s;
    sm[threadIdx.x] = s;
    for (int st = group / 2; st > 0; st >>= 1) {
        __syncthreads();
        if (lane < st)
            sm[threadIdx.x] = r_combine<T, K>(sm[threadIdx.x], sm[threadIdx.x + st]);
    }
    __syncthreads();
    s = sm[threadIdx.x];
    __syncthreads(); /* the next round overwrites sm */
    return s;
}

/* Adds elements [r0, r1) of a contiguous run (element r at in + r * sizeof(T)) to a
 * lane's state: the unaligned head one element per lane, then 16-byte vectors, four in
 * flight per lane, then the tail. A lane's elements still arrive in increasing order.
 * The head is up to 15 / sizeof(T) elements: more than a group of 1 has lanes, so the
 * lanes walk it (a one-thread group once added only its first element: a 2-byte run
 * whose chunk started off a 16-byte boundary reduced to that element). */
template <typename T, int K>
static __device__ __forceinline__ void add_run(rstate &s, const char *in, int64_t r0, int64_t r1, int group, int lane,
                                               double m, double p) {
    constexpr int V = 16 / sizeof(T);
    const T *e = (const T *)in;
    int64_t head = (int64_t)(((16 - ((uintptr_t)(e + r0) & 15)) & 15) / sizeof(T));
    head = head < r1 - r0 ? head : r1 - r0;
    for (int64_t h = lane; h < head; h += group) /* a group of 1 takes the whole head */
        r_add<T, K>(s, e[r0 + h], r0 + h, m, p);
    const int64_t a0 = r0 + head, nv = (r1 - a0) / V;
    const ct_vec<T, V> *pv = (const ct_vec<T, V> *)(e + a0);
    int64_t j = lane;
    for (; j + 3 * group < nv; j += 4 * group) {
        ct_vec<T, V> x[4];
#pragma unroll
        for (int u = 0; u < 4; u++)
            x[u] = pv[j + u * group];
#pragma unroll
        for (int u = 0; u < 4; u++)
#pragma unroll
            for (int k = 0; k < V; k++)
                r_add<T, K>(s, x[u].v[k], a0 + (j + u * group) * V + k, m, p);
    }
    for (; j < nv; j += group) {
        ct_vec<T, V> x = pv[j];
#pragma unroll
        for (int k = 0; k < V; k++)
            r_add<T, K>(s, x.v[k], a0 + j * V + k, m, p);
    }
    for (int64_t r = a0 + nv * V + lane; r < r1; r += group)
        r_add<T, K>(s, e[r], r, m, p);
}

/* Work items are (output o, chunk c), item = c * out_numel + o, so that neighbouring
 * groups take neighbouring outputs. The loop bound is the same for every thread of a
 * block, which keeps __syncthreads() legal. */
template <typename T, int K>
static __global__ void __launch_bounds__(RED_THREADS)
    red_kernel(ct_cuda_reduce_desc d, int group, int64_t chunks, int64_t chunk_len, rstate *partial, double *aux,
               int pass) {
    __shared__ rstate sm[RED_THREADS];
    const int gpb = RED_THREADS / group;
    const int lane = (int)threadIdx.x % group, gib = (int)threadIdx.x / group;
    const int64_t items = d.out_numel * chunks;
    for (int64_t base = (int64_t)blockIdx.x * gpb; base < items; base += (int64_t)gridDim.x * gpb) {
        const int64_t item = base + gib;
        const bool active = item < items;
        rstate s = r_init<T, K>();
        int64_t o = 0, c = 0;
        if (active) {
            o = item % d.out_numel;
            c = item / d.out_numel;
            const char *in = d.in + unravel_off(o, d.nk, d.kshape, d.kin);
            const double m = pass == 2 ? shift_of(d, aux[o]) : 0.0;
            const int64_t r0 = c * chunk_len;
            const int64_t r1 = r0 + chunk_len < d.red_numel ? r0 + chunk_len : d.red_numel;
            if (d.nr == 1 && d.rstride[0] == (int64_t)sizeof(T)) {
                add_run<T, K>(s, in, r0, r1, group, lane, m, d.p);
            } else if (d.nr <= 1) {
                const int64_t rs = d.nr == 1 ? d.rstride[0] : 0;
                /* Eight loads in flight before their adds (a thread's chain of adds
                 * would otherwise leave one load in flight and the memory system
                 * idle); the adds keep the order of the plain loop below, so the
                 * result does not change. */
                int64_t r = r0 + lane;
                for (; r + 7 * group < r1; r += 8 * group) {
                    T v[8];
#pragma unroll
                    for (int u = 0; u < 8; u++)
                        v[u] = *(const T *)(in + (r + u * group) * rs);
#pragma unroll
                    for (int u = 0; u < 8; u++)
                        r_add<T, K>(s, v[u], r + u * group, m, d.p);
                }
                for (; r < r1; r += group)
                    r_add<T, K>(s, *(const T *)(in + r * rs), r, m, d.p);
            } else {
                for (int64_t r = r0 + lane; r < r1; r += group)
                    r_add<T, K>(s, *(const T *)(in + unravel_off(r, d.nr, d.rshape, d.rstride)), r, m, d.p);
            }
        }
        s = group_combine<T, K>(s, sm, group, lane);
        if (active && lane == 0) {
            if (chunks > 1)
                partial[o * chunks + c] = s;
            else
                r_final<T, K>(d, o, s, aux, pass);
        }
    }
}

/* Note [Column sums]
 * A sum over one strided dim whose outputs are neighbours in memory (a bias gradient:
 * the sum over the rows of a (rows, n) matrix) takes a tile kernel rather than
 * red_kernel's one thread per output reading one element per row. A block of 8 warps
 * covers 32 neighbouring 16-byte vectors of outputs (256 bfloat16 columns) and a chunk
 * of rows: lane l reads vector l of every 8th row, so a warp loads 512 contiguous bytes
 * a row; the 8 warps' sums then add in warp order in shared memory, and each chunk's
 * sums combine in chunk order (red_finish). The order depends on the shape only, so
 * results repeat run to run. Chunks are sized for 4 blocks an SM.
 *
 * On an H200, GPT-2's 48 bias gradients a bfloat16 step (sums over 32768 rows) took
 * 13.3 ms in red_kernel (0.4 TB/s); a thread per 16-byte vector of outputs over the
 * plan's chunks took 5.2 ms (a block an SM, 8 warps: too few loads in flight). The
 * tiles sum (32768, n) bfloat16 at 1.5, 2.8 and 3.2 TB/s for n = 768, 2304 and 3072
 * (PyTorch's sum(0) 1.2, 2.7 and 3.2 in the same run): about 1.5 ms a step. */
#define COLS_WARPS 8
#define COLS_UNROLL 8
template <typename T>
static __global__ void __launch_bounds__(32 * COLS_WARPS)
    red_cols_kernel(ct_cuda_reduce_desc d, int64_t chunks, int64_t chunk_len, rstate *partial) {
    constexpr int V = 16 / sizeof(T);
    __shared__ double sm[COLS_WARPS][V][32];
    const int lane = threadIdx.x & 31, warp = threadIdx.x / 32;
    const int64_t ov_count = d.out_numel / V, ov = (int64_t)blockIdx.x * 32 + lane, c = blockIdx.y;
    const int64_t rs = d.rstride[0];
    const int64_t o = ov * V;
    const int64_t r0 = c * chunk_len;
    const int64_t r1 = r0 + chunk_len < d.red_numel ? r0 + chunk_len : d.red_numel;
    double acc[V];
#pragma unroll
    for (int j = 0; j < V; j++)
        acc[j] = 0;
    if (ov < ov_count) {
        const char *in = d.in + unravel_off(o, d.nk, d.kshape, d.kin);
        int64_t r = r0 + warp;
        for (; r + (COLS_UNROLL - 1) * COLS_WARPS < r1; r += COLS_UNROLL * COLS_WARPS) {
            ct_vec<T, V> x[COLS_UNROLL];
#pragma unroll
            for (int u = 0; u < COLS_UNROLL; u++)
                x[u] = *(const ct_vec<T, V> *)(in + (r + u * COLS_WARPS) * rs);
#pragma unroll
            for (int u = 0; u < COLS_UNROLL; u++)
#pragma unroll
                for (int j = 0; j < V; j++)
                    acc[j] += r_val(x[u].v[j]);
        }
        for (; r < r1; r += COLS_WARPS) {
            ct_vec<T, V> x = *(const ct_vec<T, V> *)(in + r * rs);
#pragma unroll
            for (int j = 0; j < V; j++)
                acc[j] += r_val(x.v[j]);
        }
    }
#pragma unroll
    for (int j = 0; j < V; j++)
        sm[warp][j][lane] = acc[j];
    __syncthreads();
    /* warp w writes outputs j = w, w + 8, ... of each lane's vector */
    if (ov < ov_count)
        for (int j = warp; j < V; j += COLS_WARPS) {
            rstate st = r_init<T, F_SUM>();
            double v = sm[0][j][lane];
#pragma unroll
            for (int w = 1; w < COLS_WARPS; w++)
                v += sm[w][j][lane];
            st.v = v;
            if (chunks > 1)
                partial[(o + j) * chunks + c] = st;
            else
                r_final<T, F_SUM>(d, o + j, st, NULL, 0);
        }
}

/* Combines each output's chunk states: a group per output, lane l folding chunks l,
 * l + group, ... and the group combining its lanes, in an order fixed by the shape. */
template <typename T, int K>
static __global__ void __launch_bounds__(RED_THREADS)
    red_finish(ct_cuda_reduce_desc d, int group, int64_t chunks, const rstate *partial, double *aux, int pass) {
    __shared__ rstate sm[RED_THREADS];
    const int gpb = RED_THREADS / group;
    const int lane = (int)threadIdx.x % group, gib = (int)threadIdx.x / group;
    for (int64_t base = (int64_t)blockIdx.x * gpb; base < d.out_numel; base += (int64_t)gridDim.x * gpb) {
        const int64_t o = base + gib;
        const bool active = o < d.out_numel;
        rstate s = r_init<T, K>();
        if (active)
            for (int64_t c = lane; c < chunks; c += group)
                s = r_combine<T, K>(s, partial[o * chunks + c]);
        s = group_combine<T, K>(s, sm, group, lane);
        if (active && lane == 0)
            r_final<T, K>(d, o, s, aux, pass);
    }
}

typedef struct red_plan {
    int group;
    int64_t chunks, chunk_len;
    bool cols; /* red_cols_kernel's tiles (Note [Column sums]) */
} red_plan;

static int64_t abs64(int64_t x) { return x < 0 ? -x : x; }

/* Whether a sum is a column sum for red_cols_kernel: one reduced dim, the outputs'
 * last dim dense in whole 16-byte vectors, every stride and the base 16-byte aligned,
 * an input read with float32 work. */
static bool cols_layout(const ct_cuda_reduce_desc *d) {
    int64_t esz = d->in_dtype == CT_DTYPE_FLOAT32 ? 4
                  : d->in_dtype == CT_DTYPE_BFLOAT16 || d->in_dtype == CT_DTYPE_FLOAT16 ? 2
                                                                                          : 0;
    if (d->kind != CT_CUDA_RED_SUM || esz == 0 || d->nr != 1 || d->nk < 1 || d->red_numel < 2)
        return false;
    int64_t V = 16 / esz;
    bool ok = d->kin[d->nk - 1] == esz && d->kshape[d->nk - 1] % V == 0 && d->rstride[0] % 16 == 0 &&
              (uintptr_t)d->in % 16 == 0;
    for (int k = 0; ok && k + 1 < d->nk; k++)
        ok = d->kin[k] % 16 == 0;
    return ok;
}

static red_plan plan_of(const ct_cuda_reduce_desc *d, int device) {
    red_plan pl;
    int64_t O = d->out_numel, R = d->red_numel;
    if (cols_layout(d)) {
        /* chunks of at least 64 rows for about 4 blocks an SM (Note [Column sums]) */
        int64_t V = d->in_dtype == CT_DTYPE_FLOAT32 ? 4 : 8, tiles = (O / V + 31) / 32;
        int64_t want = ((int64_t)ct_cuda_sm_count(device) * 4 + tiles - 1) / tiles;
        int64_t len = (R + want - 1) / want;
        len = len < 64 ? 64 : len;
        pl.group = 1;
        pl.cols = true;
        pl.chunk_len = len;
        pl.chunks = (R + len - 1) / len;
        if (pl.chunks > 65535) {
            pl.chunk_len = (R + 65534) / 65535;
            pl.chunks = (R + pl.chunk_len - 1) / pl.chunk_len;
        }
        return pl;
    }
    pl.cols = false;
    bool outer = R <= 1;
    if (d->nk > 0 && d->nr > 0 && R > 1) {
        int64_t rmin = INT64_MAX;
        for (int k = 0; k < d->nr; k++)
            rmin = abs64(d->rstride[k]) < rmin ? abs64(d->rstride[k]) : rmin;
        outer = abs64(d->kin[d->nk - 1]) < rmin;
    }
    pl.group = outer ? 1 : R >= 4096 ? RED_THREADS : 32;
    pl.chunks = 1;
    /* Few outputs: split each one's range so the GPU fills up, keeping at least 64
     * elements per lane and chunk. */
    int64_t target = (int64_t)ct_cuda_sm_count(device) * 2048;
    int64_t threads = O * pl.group;
    if (threads < target && R >= (int64_t)pl.group * 128) {
        int64_t want = (target + threads - 1) / threads;
        int64_t most = R / ((int64_t)pl.group * 64);
        pl.chunks = want < most ? want : most;
        if (pl.chunks < 1)
            pl.chunks = 1;
    }
    pl.chunk_len = pl.chunks > 1 ? (R + pl.chunks - 1) / pl.chunks : (R > 0 ? R : 1);
    if (pl.chunks > 1)
        pl.chunks = (R + pl.chunk_len - 1) / pl.chunk_len; /* no empty chunk at the end */
    return pl;
}

static bool two_pass(const ct_cuda_reduce_desc *d) {
    return d->kind == CT_CUDA_RED_VAR || d->kind == CT_CUDA_RED_LOGSUMEXP;
}

static size_t align_up(size_t n) { return (n + 255) & ~(size_t)255; }

extern "C" size_t ct_cuda_reduce_scratch(const ct_cuda_reduce_desc *d, int device) {
    red_plan pl = plan_of(d, device);
    size_t bytes = 0;
    if (two_pass(d))
        bytes += align_up((size_t)d->out_numel * sizeof(double));
    if (pl.chunks > 1)
        bytes += align_up((size_t)d->out_numel * (size_t)pl.chunks * sizeof(rstate));
    return bytes;
}

template <typename T, int K>
static ct_status red_launch(const ct_cuda_reduce_desc *d, const red_plan &pl, rstate *partial, double *aux, int pass,
                            int device, const char *op) {
    cudaStream_t s = ct_stream_of(device);
    int64_t gpb = RED_THREADS / pl.group;
    int64_t items = d->out_numel * pl.chunks;
    int64_t blocks = (items + gpb - 1) / gpb;
    int64_t cap = (int64_t)ct_cuda_sm_count(device) * 32;
    if (blocks > cap)
        blocks = cap;
    if (blocks < 1)
        blocks = 1;
    bool cols = false;
    if constexpr (K == F_SUM && r_f32_work<T>::value)
        cols = pl.cols && pass == 0;
    if (cols) {
        dim3 grid((unsigned)((d->out_numel / (16 / (int64_t)sizeof(T)) + 31) / 32), (unsigned)pl.chunks);
        red_cols_kernel<T><<<grid, 32 * COLS_WARPS, 0, s>>>(*d, pl.chunks, pl.chunk_len, partial);
    } else {
        red_kernel<T, K><<<(unsigned)blocks, RED_THREADS, 0, s>>>(*d, pl.group, pl.chunks, pl.chunk_len, partial, aux,
                                                                 pass);
    }
    ct_status st = ct_cuda_check_launch(op);
    if (st != CT_OK || pl.chunks == 1)
        return st;
    /* The combine used to run one thread per output: with a thousand chunks that chain
     * of dependent loads took longer than reading 64 MB. */
    int fgroup = pl.chunks > 64 ? RED_THREADS : 32;
    int64_t fgpb = RED_THREADS / fgroup, fblocks = (d->out_numel + fgpb - 1) / fgpb;
    fblocks = fblocks > cap ? cap : fblocks;
    red_finish<T, K><<<(unsigned)fblocks, RED_THREADS, 0, s>>>(*d, fgroup, pl.chunks, partial, aux, pass);
    return ct_cuda_check_launch(op);
}

template <int K>
static ct_status red_by_dtype(const ct_cuda_reduce_desc *d, const red_plan &pl, rstate *partial, double *aux,
                              int pass, int device, const char *op) {
    switch (d->in_dtype) {
    case CT_DTYPE_FLOAT32: return red_launch<float, K>(d, pl, partial, aux, pass, device, op);
    case CT_DTYPE_FLOAT64: return red_launch<double, K>(d, pl, partial, aux, pass, device, op);
    case CT_DTYPE_BFLOAT16: return red_launch<ct_bf16_s, K>(d, pl, partial, aux, pass, device, op);
    case CT_DTYPE_FLOAT16: return red_launch<ct_half_s, K>(d, pl, partial, aux, pass, device, op);
    case CT_DTYPE_INT64:
        if constexpr (K == F_SUM || K == F_PROD || K == F_MAX || K == F_MIN || K == F_ARGMAX || K == F_ARGMIN ||
                      K == F_COUNT)
            return red_launch<int64_t, K>(d, pl, partial, aux, pass, device, op);
        break;
    default: break;
    }
    return ct_error(CT_ERROR_TYPE, op, "no CUDA reduction for work dtype %s", ct_dtype_name(d->in_dtype));
}

extern "C" ct_status ct_cuda_reduce_run(const ct_cuda_reduce_desc *d, void *scratch, int device, const char *op) {
    if (d->out_numel == 0)
        return CT_OK;
    red_plan pl = plan_of(d, device);
    char *p = (char *)scratch;
    double *aux = NULL;
    rstate *partial = NULL;
    if (two_pass(d)) {
        aux = (double *)p;
        p += align_up((size_t)d->out_numel * sizeof(double));
    }
    if (pl.chunks > 1)
        partial = (rstate *)p;
    if ((two_pass(d) || pl.chunks > 1) && !scratch)
        return ct_error(CT_ERROR_VALUE, op, "reduction scratch memory missing");
    switch (d->kind) {
    case CT_CUDA_RED_SUM: return red_by_dtype<F_SUM>(d, pl, partial, aux, 0, device, op);
    case CT_CUDA_RED_NANSUM: return red_by_dtype<F_NANSUM>(d, pl, partial, aux, 0, device, op);
    case CT_CUDA_RED_PROD: return red_by_dtype<F_PROD>(d, pl, partial, aux, 0, device, op);
    case CT_CUDA_RED_MAX: return red_by_dtype<F_MAX>(d, pl, partial, aux, 0, device, op);
    case CT_CUDA_RED_MIN: return red_by_dtype<F_MIN>(d, pl, partial, aux, 0, device, op);
    case CT_CUDA_RED_ARGMAX: return red_by_dtype<F_ARGMAX>(d, pl, partial, aux, 0, device, op);
    case CT_CUDA_RED_ARGMIN: return red_by_dtype<F_ARGMIN>(d, pl, partial, aux, 0, device, op);
    case CT_CUDA_RED_COUNT:
    case CT_CUDA_RED_ANY:
    case CT_CUDA_RED_ALL: return red_by_dtype<F_COUNT>(d, pl, partial, aux, 0, device, op);
    case CT_CUDA_RED_VAR: {
        ct_status st = red_by_dtype<F_SUM>(d, pl, partial, aux, 1, device, op);
        return st != CT_OK ? st : red_by_dtype<F_DEV2>(d, pl, partial, aux, 2, device, op);
    }
    case CT_CUDA_RED_LOGSUMEXP: {
        ct_status st = red_by_dtype<F_MAX>(d, pl, partial, aux, 1, device, op);
        return st != CT_OK ? st : red_by_dtype<F_EXPM>(d, pl, partial, aux, 2, device, op);
    }
    case CT_CUDA_RED_NORM: {
        double p = d->p;
        if (isinf(p))
            return p > 0 ? red_by_dtype<F_ABSMAX>(d, pl, partial, aux, 0, device, op)
                         : red_by_dtype<F_ABSMIN>(d, pl, partial, aux, 0, device, op);
        if (p == 0)
            return red_by_dtype<F_COUNT>(d, pl, partial, aux, 0, device, op);
        if (p == 1)
            return red_by_dtype<F_ABSSUM>(d, pl, partial, aux, 0, device, op);
        if (p == 2)
            return red_by_dtype<F_SQ>(d, pl, partial, aux, 0, device, op);
        return red_by_dtype<F_POW>(d, pl, partial, aux, 0, device, op);
    }
    case CT_CUDA_RED_POWSUM:
        return d->p == 2 ? red_by_dtype<F_SQ>(d, pl, partial, aux, 0, device, op)
                         : red_by_dtype<F_POW>(d, pl, partial, aux, 0, device, op);
    default: return ct_error(CT_ERROR_NOT_IMPLEMENTED, op, "no CUDA kernel for this reduction");
    }
}
