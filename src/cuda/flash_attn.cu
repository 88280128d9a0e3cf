/* Flash attention on tensor cores (sm_80 and later): FlashAttention-2's algorithm.
 *
 * Note [Flash attention kernels]
 * Forward: a block of 4 warps takes 64 query rows of one (batch, head), 16 rows a warp,
 * and streams the keys and values through shared memory in tiles of 64 rows, the next
 * tile loading (cp.async) while the current one is used. Scores S = Q K^T and the
 * output O += P V are mma.sync m16n8k16 products of bfloat16/float16 tiles accumulated
 * in float32; the softmax is the online one, in float32 and base 2: each row keeps its
 * running maximum m and sum l, and O is rescaled when m grows. The probabilities go
 * from the accumulator registers of S straight into the A operand of P V (the two
 * fragment layouts agree), so no (L, S) matrix exists anywhere, not even per block.
 * The row's log-sum-exp (natural log) is saved for the backward pass.
 *
 * Backward: a block takes 64 keys (16 a warp) and loops over the query tiles that see
 * them, recomputing P^T = exp(K Q^T * scale - lse) tile by tile; dV += P^T dO and
 * dK += dS^T Q stay in registers, dS^T = P^T * (V dO^T - delta) goes through shared
 * memory to give the tile's dQ += dS K, added to a float32 buffer with atomics (the
 * query rows are shared by all the key blocks). delta = rowsum(dO * O) is computed
 * first, and the float32 dQ is scaled and converted last.
 *
 * Tiles live in shared memory as rows of 16-byte chunks, chunk c of row r stored at
 * c ^ (r % 8), so that the 8 rows an ldmatrix reads hit 8 different bank groups.
 * The head dim is padded to 64 or 128 (zeros loaded past d), so any d <= 128 that is a
 * multiple of 8 runs. Causal masking is top-left (key j <= query i), as the math path;
 * blocks above the diagonal are skipped, the diagonal one masked.
 *
 * Note [Flash attention tile sizes]
 * mma.sync at this size is bound by shared memory reads: each ldmatrix of a K or V
 * fragment (512 bytes a warp) feeds one product per 16-row m-tile the warp owns. The
 * forward gives a warp MT m-tiles: 2 for head dims up to 64 (128 query rows a block),
 * 1 for 128 (the output accumulator, 16 MT x D floats a warp, would not fit the
 * registers). Measured on an H200 at GPT-2's shape (B 32, H 12, T 1024, D 64, causal,
 * bfloat16): forward 0.323 ms (160 TFLOP/s) with MT = 2, 0.327 ms with MT = 1, so the
 * forward is not bound by those reads alone (the softmax's exponentials and the
 * shuffles share the issue slots). The backward's block of 64 keys (16 a warp) keeps
 * dK and dV in registers; with MUFU.EX2 for the exponentials instead of exp2f and one
 * float2 atomic (sm_90) instead of two float atomics for dQ, it went from 1.20 ms to
 * 0.96 ms (107 to 134 TFLOP/s, counting 2.5 times the forward's FLOPs).
 *
 * Note [Flash attention dropout]
 * With dropout the forward drops probabilities after they are summed into the row's
 * normaliser l (the softmax is of the undropped scores, as in the formula) and before
 * P V, and scales the output by 1 / (1 - p) with 1 / l. The draws follow Note [Flash
 * attention dropout draws] (src/core/random.h): a thread's 16 keys of a row in a tile
 * come from two Philox blocks of its own, 16 bits a key. The forward writes the mask
 * as bits, one 64-bit word per row and key tile (the quad's four threads OR theirs
 * together), and the backward reads its query rows' words with the tile's
 * log-sum-exp instead of drawing again: B H L S / 8 bytes kept for the backward (50 MB
 * a layer at GPT-2's B 32, H 12, T 1024; 3 MB at the char model's B 64, H 6, T 256).
 * With Z = mask / (1 - p) the backward is dV += (Z * P)^T dO and dS = P * (Z * dP -
 * delta); delta = rowsum(dO * O) is unchanged because O is the dropped output. In a
 * CUDA graph the forward draws from the graph's words (Note [Random numbers in a
 * graph]) and the backward reads the bits the same replay's forward wrote.
 *
 * Measured on an H200 at GPT-2's shape (B 32, H 12, T 1024, causal, bfloat16, dropout
 * 0.1; forward, forward + backward): with dropout's own draws (53 bits an element in
 * the (B, H, L, S) order, one Philox block per two keys, drawn again in the backward)
 * 1.36 and 4.04 ms, against 0.34 and 1.80 ms without dropout in that run; with these
 * draws and the bits 0.70 and 1.97 ms (0.34 and 1.43 ms without dropout; PyTorch's
 * flash kernels 0.29 and 1.26 ms with dropout, 0.24 and 1.09 without, same run). At
 * the char model's shape (B 64, H 6, T 256) 0.08 and 0.24 ms against PyTorch's 0.05
 * and 0.27. The forward's draws are still its largest cost with dropout: 10 Philox
 * rounds for 8 keys (PyTorch's kernels draw 16 keys a block, 8 bits each). */
#include <cuda_bf16.h>
#include <string.h>
#include <cuda_fp16.h>

#include "flash_attn.h"
#include "kernels.cuh"
#include "philox.cuh"

#define FA_THREADS 128
#define FA_BR 64 /* query rows per block (forward) / per step (backward) */
#define FA_BC 64 /* key rows per step (forward) / per block (backward) */

namespace {

/* ------------------------------------------------------------------ PTX helpers */

template <typename T> __device__ __forceinline__ uint32_t pack2(float a, float b);
template <> __device__ __forceinline__ uint32_t pack2<__nv_bfloat16>(float a, float b) {
    __nv_bfloat162 v = __floats2bfloat162_rn(a, b);
    return *reinterpret_cast<uint32_t *>(&v);
}
template <> __device__ __forceinline__ uint32_t pack2<__half>(float a, float b) {
    __half2 v = __floats2half2_rn(a, b);
    return *reinterpret_cast<uint32_t *>(&v);
}
template <typename T> __device__ __forceinline__ float to_f(T x);
template <> __device__ __forceinline__ float to_f<__nv_bfloat16>(__nv_bfloat16 x) { return __bfloat162float(x); }
template <> __device__ __forceinline__ float to_f<__half>(__half x) { return __half2float(x); }

/* c += a b for a 16x16 A (row-major fragment), a 16x8 B (column-major fragment). */
template <typename T> __device__ __forceinline__ void mma(float *c, const uint32_t *a, const uint32_t *b);
template <> __device__ __forceinline__ void mma<__nv_bfloat16>(float *c, const uint32_t *a, const uint32_t *b) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
template <> __device__ __forceinline__ void mma<__half>(float *c, const uint32_t *a, const uint32_t *b) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

__device__ __forceinline__ void ldsm4(uint32_t *r, uint32_t addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}
__device__ __forceinline__ void ldsm4t(uint32_t *r, uint32_t addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}

/* 16 bytes global -> shared, zeros when !pred. */
__device__ __forceinline__ void cp16(uint32_t dst, const void *src, bool pred) {
    int n = pred ? 16 : 0;
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(n));
}
__device__ __forceinline__ void cp_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N> __device__ __forceinline__ void cp_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }

__device__ __forceinline__ uint32_t smem_addr(const void *p) {
    return (uint32_t)__cvta_generic_to_shared(p);
}

/* ------------------------------------------------------------------ tiles */

/* Byte offset of chunk c (8 elements) of row r in a tile with D elements a row. */
template <int D> __device__ __forceinline__ uint32_t toff(int r, int c) {
    return (uint32_t)(r * D * 2 + ((c ^ (r & 7)) << 4));
}

/* Rows [r0, r0 + 64) of a (rows, d) matrix with row stride rs into a 64 x D tile
 * (zeros past n rows and past d columns). */
template <typename T, int D>
__device__ __forceinline__ void load_tile(uint32_t tile, const T *base, int64_t rs, int r0, int n, int d) {
    constexpr int NC = D / 8;
    for (int i = threadIdx.x; i < 64 * NC; i += FA_THREADS) {
        int r = i / NC, c = i % NC;
        bool ok = r0 + r < n && c * 8 < d;
        const T *src = ok ? base + (int64_t)(r0 + r) * rs + c * 8 : base;
        cp16(tile + toff<D>(r, c), src, ok);
    }
}

/* A operand: rows [m0, m0 + 16) x columns [16 kk, 16 kk + 16) of a row-major tile. */
template <int D> __device__ __forceinline__ void lda(uint32_t *a, uint32_t tile, int m0, int kk) {
    int lane = threadIdx.x & 31;
    ldsm4(a, tile + toff<D>(m0 + (lane & 15), kk * 2 + (lane >> 4)));
}
/* A operand from a tile stored transposed ([k][m]): A[m][k] = tile[k][m]. */
template <int D> __device__ __forceinline__ void lda_t(uint32_t *a, uint32_t tile, int m0, int kk) {
    int lane = threadIdx.x & 31, i = lane >> 3;
    ldsm4t(a, tile + toff<D>(kk * 16 + (i >> 1) * 8 + (lane & 7), m0 / 8 + (i & 1)));
}
/* B operands of two n8 tiles (n0, n0 + 8) for k in [16 kk, 16 kk + 16), with B[k][n] =
 * tile[n][k] (the tile's rows are B's columns: K for Q K^T). b[0..1]: n0, b[2..3]: n0 + 8. */
template <int D> __device__ __forceinline__ void ldb(uint32_t *b, uint32_t tile, int n0, int kk) {
    int lane = threadIdx.x & 31, i = lane >> 3;
    ldsm4(b, tile + toff<D>(n0 + (i >> 1) * 8 + (lane & 7), kk * 2 + (i & 1)));
}
/* The same with B[k][n] = tile[k][n] (V for P V). */
template <int D> __device__ __forceinline__ void ldb_t(uint32_t *b, uint32_t tile, int n0, int kk) {
    int lane = threadIdx.x & 31, i = lane >> 3;
    ldsm4t(b, tile + toff<D>(kk * 16 + (i & 1) * 8 + (lane & 7), n0 / 8 + (i >> 1)));
}

/* 2^x with one MUFU.EX2 (relative error about 2^-22; exp2(-inf) = 0). */
__device__ __forceinline__ float fast_exp2(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
    return y;
}

__device__ __forceinline__ float quad_max(float x) {
    x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
    return fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
}
__device__ __forceinline__ float quad_sum(float x) {
    x += __shfl_xor_sync(0xffffffffu, x, 1);
    return x + __shfl_xor_sync(0xffffffffu, x, 2);
}

/* p[0] += a, p[1] += b (p 8-byte aligned): one vector atomic on sm_90. */
__device__ __forceinline__ void add2(float *p, float a, float b) {
#if __CUDA_ARCH__ >= 900
    atomicAdd((float2 *)p, make_float2(a, b));
#else
    atomicAdd(p, a);
    atomicAdd(p + 1, b);
#endif
}

struct fa_params {
    const void *q, *k, *v, *o, *go;
    void *out, *gq, *gk, *gv;
    float *lse, *dq, *delta;
    int64_t q_str[3], k_str[3], v_str[3], o_str[3], go_str[3];
    int64_t out_w[3], gq_w[3], gk_w[3], gv_w[3];
    int h, lq, lk, d;
    bool causal;
    float scale, scale_log2;
    bool dropout; /* Note [Flash attention dropout] */
    float drop_scale;
    uint32_t threshold;
    uint64_t seed, offset;
    const uint64_t *state;
    uint64_t *mask;
    int mask_words;
};

#define FA_LOG2E 1.4426950408889634f
#define FA_LN2 0.6931471805599453f

/* ------------------------------------------------------------------ forward */

/* MT: 16-row m-tiles per warp, so a block takes BR = 64 MT query rows and each K or V
 * fragment read from shared memory feeds MT products (Note [Flash attention tile
 * sizes]). */
template <typename T, int D, int MT> __global__ void __launch_bounds__(FA_THREADS) fa_fwd(const fa_params p) {
    extern __shared__ __align__(16) unsigned char smem[];
    constexpr int BR = 64 * MT, KT = FA_BC * D * 2;
    const uint32_t sq = smem_addr(smem), sk0 = sq + BR * D * 2, sv0 = sk0 + 2 * KT;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    /* one (batch, head) after the other, so that its keys and values stay in L2; in
     * causal attention its longest rows first */
    const int nqb = (p.lq + BR - 1) / BR;
    const int bh = (int)(blockIdx.x / nqb), b = bh / p.h, h = bh % p.h;
    const int qb = p.causal ? nqb - 1 - (int)(blockIdx.x % nqb) : (int)(blockIdx.x % nqb);
    const int q0 = qb * BR;
    const T *q = (const T *)p.q + b * p.q_str[0] + h * p.q_str[1];
    const T *k = (const T *)p.k + b * p.k_str[0] + h * p.k_str[1];
    const T *v = (const T *)p.v + b * p.v_str[0] + h * p.v_str[1];
    uint64_t seed = p.seed, offset = p.offset;
    if (p.dropout)
        graph_state(p.state, &seed, &offset);

    int nkv = (p.lk + FA_BC - 1) / FA_BC;
    if (p.causal) {
        int last = min(q0 + BR, p.lq) - 1;
        nkv = min(nkv, last / FA_BC + 1);
    }
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
        load_tile<T, D>(sq + mt * 64 * D * 2, q, p.q_str[2], q0 + mt * 64, p.lq, p.d);
    if (nkv > 0) {
        load_tile<T, D>(sk0, k, p.k_str[2], 0, p.lk, p.d);
        load_tile<T, D>(sv0, v, p.v_str[2], 0, p.lk, p.d);
    }
    cp_commit();

    float o[MT][D / 8][4];
    float m[MT][2], l[MT][2];
#pragma unroll
    for (int mt = 0; mt < MT; mt++) {
#pragma unroll
        for (int i = 0; i < D / 8; i++)
            o[mt][i][0] = o[mt][i][1] = o[mt][i][2] = o[mt][i][3] = 0.f;
        m[mt][0] = m[mt][1] = -INFINITY;
        l[mt][0] = l[mt][1] = 0.f;
    }
    uint32_t qf[MT][D / 16][4];
    const int wrow = warp * 16 * MT;  /* the warp's first row in the block */
    const int row0 = q0 + wrow + g; /* this thread's rows: row0 + 16 mt (+ 8) */

    for (int j = 0; j < nkv; j++) {
        const uint32_t sk = sk0 + (j & 1) * KT, sv = sv0 + (j & 1) * KT;
        if (j + 1 < nkv) {
            const uint32_t nk = sk0 + ((j + 1) & 1) * KT, nv = sv0 + ((j + 1) & 1) * KT;
            load_tile<T, D>(nk, k, p.k_str[2], (j + 1) * FA_BC, p.lk, p.d);
            load_tile<T, D>(nv, v, p.v_str[2], (j + 1) * FA_BC, p.lk, p.d);
            cp_commit();
            cp_wait<1>();
        } else {
            cp_wait<0>();
        }
        __syncthreads();
        if (j == 0) {
#pragma unroll
            for (int mt = 0; mt < MT; mt++)
#pragma unroll
                for (int kk = 0; kk < D / 16; kk++)
                    lda<D>(qf[mt][kk], sq, wrow + mt * 16, kk);
        }
        float s[MT][FA_BC / 8][4];
#pragma unroll
        for (int mt = 0; mt < MT; mt++)
#pragma unroll
            for (int i = 0; i < FA_BC / 8; i++)
                s[mt][i][0] = s[mt][i][1] = s[mt][i][2] = s[mt][i][3] = 0.f;
#pragma unroll
        for (int kk = 0; kk < D / 16; kk++) {
#pragma unroll
            for (int np = 0; np < FA_BC / 16; np++) {
                uint32_t bf[4];
                ldb<D>(bf, sk, np * 16, kk);
#pragma unroll
                for (int mt = 0; mt < MT; mt++) {
                    mma<T>(s[mt][2 * np], qf[mt][kk], bf);
                    mma<T>(s[mt][2 * np + 1], qf[mt][kk], bf + 2);
                }
            }
        }
        const int k0 = j * FA_BC;
        const bool need_mask = k0 + FA_BC > p.lk || (p.causal && k0 + FA_BC - 1 > q0 + wrow);
#pragma unroll
        for (int mt = 0; mt < MT; mt++) {
            float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
            for (int nt = 0; nt < FA_BC / 8; nt++)
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    float x = s[mt][nt][e] * p.scale_log2;
                    if (need_mask) {
                        int col = k0 + nt * 8 + t * 2 + (e & 1), row = row0 + mt * 16 + (e >> 1) * 8;
                        if (col >= p.lk || (p.causal && col > row))
                            x = -INFINITY;
                    }
                    s[mt][nt][e] = x;
                    mx[e >> 1] = fmaxf(mx[e >> 1], x);
                }
            float base[2], alpha[2];
#pragma unroll
            for (int r = 0; r < 2; r++) {
                float mn = fmaxf(m[mt][r], quad_max(mx[r]));
                base[r] = mn == -INFINITY ? 0.f : mn;
                alpha[r] = fast_exp2(m[mt][r] - base[r]);
                m[mt][r] = mn;
            }
            float rs[2] = {0.f, 0.f};
#pragma unroll
            for (int nt = 0; nt < FA_BC / 8; nt++)
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    float x = fast_exp2(s[mt][nt][e] - base[e >> 1]);
                    s[mt][nt][e] = x;
                    rs[e >> 1] += x;
                }
#pragma unroll
            for (int r = 0; r < 2; r++)
                l[mt][r] = l[mt][r] * alpha[r] + rs[r];
            if (p.dropout) { /* after the sums: the normaliser is the undropped one */
#pragma unroll
                for (int r = 0; r < 2; r++) {
                    const int row = row0 + mt * 16 + r * 8;
                    uint64_t bits = 0; /* this thread's keys of the tile's 64 */
                    if (row < p.lq) {
                        /* Note [Flash attention dropout draws]: this thread's 16 keys of
                         * the row from two Philox blocks */
                        const uint64_t c = offset + (((uint64_t)bh * p.lq + row) * p.mask_words + j) * 8 + 2 * t;
                        uint32_t w[2][4];
                        philox_block(seed, c, w[0]);
                        philox_block(seed, c + 1, w[1]);
#pragma unroll
                        for (int nt = 0; nt < FA_BC / 8; nt++)
#pragma unroll
                            for (int e = 0; e < 2; e++) {
                                const int col = k0 + nt * 8 + t * 2 + e;
                                if (col < p.lk && !(p.causal && col > row) &&
                                    ((w[nt / 4][nt % 4] >> (16 * e)) & 0xffffu) < p.threshold)
                                    bits |= 1ull << (nt * 8 + t * 2 + e);
                                else
                                    s[mt][nt][2 * r + e] = 0.f;
                            }
                    }
                    /* the quad's four threads hold the row's 64 keys: one word */
                    bits |= __shfl_xor_sync(0xffffffffu, bits, 1);
                    bits |= __shfl_xor_sync(0xffffffffu, bits, 2);
                    if (t == 0 && row < p.lq)
                        p.mask[((int64_t)bh * p.lq + row) * p.mask_words + j] = bits;
                }
            }
#pragma unroll
            for (int i = 0; i < D / 8; i++) {
                o[mt][i][0] *= alpha[0];
                o[mt][i][1] *= alpha[0];
                o[mt][i][2] *= alpha[1];
                o[mt][i][3] *= alpha[1];
            }
        }
#pragma unroll
        for (int kk = 0; kk < FA_BC / 16; kk++) {
            uint32_t a[MT][4];
#pragma unroll
            for (int mt = 0; mt < MT; mt++) {
                a[mt][0] = pack2<T>(s[mt][2 * kk][0], s[mt][2 * kk][1]);
                a[mt][1] = pack2<T>(s[mt][2 * kk][2], s[mt][2 * kk][3]);
                a[mt][2] = pack2<T>(s[mt][2 * kk + 1][0], s[mt][2 * kk + 1][1]);
                a[mt][3] = pack2<T>(s[mt][2 * kk + 1][2], s[mt][2 * kk + 1][3]);
            }
#pragma unroll
            for (int dp = 0; dp < D / 16; dp++) {
                uint32_t bf[4];
                ldb_t<D>(bf, sv, dp * 16, kk);
#pragma unroll
                for (int mt = 0; mt < MT; mt++) {
                    mma<T>(o[mt][2 * dp], a[mt], bf);
                    mma<T>(o[mt][2 * dp + 1], a[mt], bf + 2);
                }
            }
        }
        __syncthreads(); /* the next step loads into the other stage; the one after into this */
    }
    if (nkv == 0)
        cp_wait<0>();

    T *out = (T *)p.out + b * p.out_w[0] + h * p.out_w[1];
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int r = 0; r < 2; r++) {
            float lt = quad_sum(l[mt][r]);
            float inv = lt > 0.f ? 1.f / lt : 0.f;
            if (p.dropout)
                inv *= p.drop_scale;
            int row = row0 + mt * 16 + r * 8;
            if (row >= p.lq)
                continue;
#pragma unroll
            for (int nt = 0; nt < D / 8; nt++) {
                int col = nt * 8 + t * 2;
                if (col < p.d)
                    *(uint32_t *)(out + (int64_t)row * p.out_w[2] + col) =
                        pack2<T>(o[mt][nt][2 * r] * inv, o[mt][nt][2 * r + 1] * inv);
            }
            if (t == 0)
                p.lse[(int64_t)bh * p.lq + row] = lt > 0.f ? (m[mt][r] + log2f(lt)) * FA_LN2 : -INFINITY;
        }
}

/* ------------------------------------------------------------------ backward */

/* delta[row] = sum_d dO[row][d] * O[row][d], one warp a row; dq zeroed alongside. */
template <typename T> __global__ void fa_bwd_pre(const fa_params p, int64_t rows) {
    int64_t w = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    int lane = threadIdx.x & 31;
    if (w >= rows)
        return;
    int64_t bh = w / p.lq, row = w % p.lq, b = bh / p.h, h = bh % p.h;
    const T *go = (const T *)p.go + b * p.go_str[0] + h * p.go_str[1] + row * p.go_str[2];
    const T *o = (const T *)p.o + b * p.o_str[0] + h * p.o_str[1] + row * p.o_str[2];
    float acc = 0.f;
    for (int c = lane; c < p.d; c += 32) {
        acc += to_f<T>(go[c]) * to_f<T>(o[c]);
        p.dq[w * p.d + c] = 0.f;
    }
    for (int s = 16; s > 0; s >>= 1)
        acc += __shfl_xor_sync(0xffffffffu, acc, s);
    if (lane == 0)
        p.delta[w] = acc;
}

/* gq = dq scale, a pair of elements a thread: dq (b h lq, d) dense, gq through gq_w.
 * 32-bit indices (the launch checks that rows * d / 2 fits). */
template <typename T> __global__ void fa_bwd_post(const fa_params p, uint32_t rows) {
    const uint32_t half = (uint32_t)p.d / 2, n = rows * half;
    for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        const uint32_t r = i / half, c = (i - r * half) * 2, bh = r / (uint32_t)p.lq, row = r - bh * (uint32_t)p.lq;
        const uint32_t b = bh / (uint32_t)p.h, h = bh - b * (uint32_t)p.h;
        const float2 v = *(const float2 *)(p.dq + (int64_t)r * p.d + c);
        *(uint32_t *)((T *)p.gq + b * p.gq_w[0] + h * p.gq_w[1] + row * p.gq_w[2] + c) =
            pack2<T>(v.x * p.scale, v.y * p.scale);
    }
}

template <typename T, int D> __global__ void __launch_bounds__(FA_THREADS) fa_bwd(const fa_params p) {
    extern __shared__ __align__(16) unsigned char smem[];
    constexpr int TILE = 64 * D * 2;
    const uint32_t sk = smem_addr(smem), sv = sk + TILE, sq = sk + 2 * TILE, sgo = sk + 3 * TILE,
                   sds = sk + 4 * TILE;
    float *s_lse = (float *)(smem + 4 * TILE + 64 * 64 * 2), *s_delta = s_lse + FA_BR;
    uint64_t *s_mask = (uint64_t *)(s_delta + FA_BR); /* the step's queries' words of this block's keys */
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const int nkb = (p.lk + FA_BC - 1) / FA_BC;
    const int bh = (int)(blockIdx.x / nkb), b = bh / p.h, h = bh % p.h;
    const int k0 = (int)(blockIdx.x % nkb) * FA_BC;
    const T *q = (const T *)p.q + b * p.q_str[0] + h * p.q_str[1];
    const T *k = (const T *)p.k + b * p.k_str[0] + h * p.k_str[1];
    const T *v = (const T *)p.v + b * p.v_str[0] + h * p.v_str[1];
    const T *go = (const T *)p.go + b * p.go_str[0] + h * p.go_str[1];
    const float *lse = p.lse + (int64_t)bh * p.lq, *delta = p.delta + (int64_t)bh * p.lq;
    float *dq = p.dq + (int64_t)bh * p.lq * p.d;

    load_tile<T, D>(sk, k, p.k_str[2], k0, p.lk, p.d);
    load_tile<T, D>(sv, v, p.v_str[2], k0, p.lk, p.d);
    cp_commit();

    float dk[D / 8][4], dv[D / 8][4];
#pragma unroll
    for (int i = 0; i < D / 8; i++)
#pragma unroll
        for (int e = 0; e < 4; e++)
            dk[i][e] = dv[i][e] = 0.f;
    const int krow0 = k0 + warp * 16 + g; /* this thread's keys: krow0, krow0 + 8 */
    const int nqb = (p.lq + FA_BR - 1) / FA_BR;
    const int first = p.causal ? k0 / FA_BR : 0;

    for (int i = first; i < nqb; i++) {
        const int q0 = i * FA_BR;
        load_tile<T, D>(sq, q, p.q_str[2], q0, p.lq, p.d);
        load_tile<T, D>(sgo, go, p.go_str[2], q0, p.lq, p.d);
        cp_commit();
        if (threadIdx.x < FA_BR) {
            int r = q0 + threadIdx.x;
            s_lse[threadIdx.x] = r < p.lq ? lse[r] * FA_LOG2E : INFINITY;
            s_delta[threadIdx.x] = r < p.lq ? delta[r] : 0.f;
            if (p.dropout)
                s_mask[threadIdx.x] = r < p.lq ? p.mask[((int64_t)bh * p.lq + r) * p.mask_words + k0 / 64] : 0;
        }
        cp_wait<0>();
        __syncthreads();

        /* S^T = K Q^T and dP^T = V dO^T, this warp's 16 keys x 64 queries */
        float s[FA_BR / 8][4], dp[FA_BR / 8][4];
#pragma unroll
        for (int n = 0; n < FA_BR / 8; n++)
#pragma unroll
            for (int e = 0; e < 4; e++)
                s[n][e] = dp[n][e] = 0.f;
#pragma unroll
        for (int kk = 0; kk < D / 16; kk++) {
            uint32_t ka[4], va[4];
            lda<D>(ka, sk, warp * 16, kk);
            lda<D>(va, sv, warp * 16, kk);
#pragma unroll
            for (int np = 0; np < FA_BR / 16; np++) {
                uint32_t bq[4], bo[4];
                ldb<D>(bq, sq, np * 16, kk);
                ldb<D>(bo, sgo, np * 16, kk);
                mma<T>(s[2 * np], ka, bq);
                mma<T>(s[2 * np + 1], ka, bq + 2);
                mma<T>(dp[2 * np], va, bo);
                mma<T>(dp[2 * np + 1], va, bo + 2);
            }
        }
        /* P^T and dS^T = P^T * (dP^T - delta) */
        const bool need_mask = k0 + FA_BC > p.lk || (p.causal && k0 + warp * 16 + 15 > q0);
#pragma unroll
        for (int nt = 0; nt < FA_BR / 8; nt++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                int cl = nt * 8 + t * 2 + (e & 1);
                float pv = fast_exp2(s[nt][e] * p.scale_log2 - s_lse[cl]);
                if (need_mask) {
                    int kr = krow0 + (e >> 1) * 8;
                    if (kr >= p.lk || (p.causal && kr > q0 + cl))
                        pv = 0.f;
                }
                if (p.dropout) { /* Note [Flash attention dropout] */
                    const int kb = krow0 + (e >> 1) * 8 - k0;
                    const float z = (s_mask[cl] >> kb) & 1 ? p.drop_scale : 0.f;
                    s[nt][e] = pv * z;
                    dp[nt][e] = pv * (dp[nt][e] * z - s_delta[cl]);
                } else {
                    s[nt][e] = pv;
                    dp[nt][e] = pv * (dp[nt][e] - s_delta[cl]);
                }
            }
        /* dV += P^T dO, dK += dS^T Q (k: the 64 queries) */
#pragma unroll
        for (int kk = 0; kk < FA_BR / 16; kk++) {
            uint32_t pa[4] = {pack2<T>(s[2 * kk][0], s[2 * kk][1]), pack2<T>(s[2 * kk][2], s[2 * kk][3]),
                              pack2<T>(s[2 * kk + 1][0], s[2 * kk + 1][1]),
                              pack2<T>(s[2 * kk + 1][2], s[2 * kk + 1][3])};
            uint32_t da[4] = {pack2<T>(dp[2 * kk][0], dp[2 * kk][1]), pack2<T>(dp[2 * kk][2], dp[2 * kk][3]),
                              pack2<T>(dp[2 * kk + 1][0], dp[2 * kk + 1][1]),
                              pack2<T>(dp[2 * kk + 1][2], dp[2 * kk + 1][3])};
            /* dS^T to shared memory for dQ: row = key (local), chunk = query / 8 */
            {
                int r = warp * 16 + g;
                unsigned char *base = smem + 4 * TILE;
                *(uint32_t *)(base + toff<64>(r, 2 * kk) + t * 4) = da[0];
                *(uint32_t *)(base + toff<64>(r + 8, 2 * kk) + t * 4) = da[1];
                *(uint32_t *)(base + toff<64>(r, 2 * kk + 1) + t * 4) = da[2];
                *(uint32_t *)(base + toff<64>(r + 8, 2 * kk + 1) + t * 4) = da[3];
            }
#pragma unroll
            for (int dd = 0; dd < D / 16; dd++) {
                uint32_t bo[4], bq[4];
                ldb_t<D>(bo, sgo, dd * 16, kk);
                ldb_t<D>(bq, sq, dd * 16, kk);
                mma<T>(dv[2 * dd], pa, bo);
                mma<T>(dv[2 * dd + 1], pa, bo + 2);
                mma<T>(dk[2 * dd], da, bq);
                mma<T>(dk[2 * dd + 1], da, bq + 2);
            }
        }
        __syncthreads();
        /* dQ[q0 + 16 warp + .., :] += dS K, this warp's 16 queries x D (k: the 64 keys) */
        {
            uint32_t aa[FA_BC / 16][4];
#pragma unroll
            for (int kk = 0; kk < FA_BC / 16; kk++)
                lda_t<64>(aa[kk], sds, warp * 16, kk);
            const int qr = q0 + warp * 16 + g;
#pragma unroll
            for (int dd = 0; dd < D / 16; dd++) {
                float acc[2][4] = {{0.f, 0.f, 0.f, 0.f}, {0.f, 0.f, 0.f, 0.f}};
#pragma unroll
                for (int kk = 0; kk < FA_BC / 16; kk++) {
                    uint32_t bk[4];
                    ldb_t<D>(bk, sk, dd * 16, kk);
                    mma<T>(acc[0], aa[kk], bk);
                    mma<T>(acc[1], aa[kk], bk + 2);
                }
#pragma unroll
                for (int x = 0; x < 2; x++) {
                    int col = dd * 16 + x * 8 + t * 2;
                    if (col >= p.d)
                        continue;
                    if (qr < p.lq)
                        add2(dq + (int64_t)qr * p.d + col, acc[x][0], acc[x][1]);
                    if (qr + 8 < p.lq)
                        add2(dq + (int64_t)(qr + 8) * p.d + col, acc[x][2], acc[x][3]);
                }
            }
        }
        __syncthreads(); /* before the next step overwrites Q, dO, dS^T, lse and delta */
    }
    cp_wait<0>();

    T *gk = (T *)p.gk + b * p.gk_w[0] + h * p.gk_w[1], *gv = (T *)p.gv + b * p.gv_w[0] + h * p.gv_w[1];
#pragma unroll
    for (int r = 0; r < 2; r++) {
        int row = krow0 + r * 8;
        if (row >= p.lk)
            continue;
#pragma unroll
        for (int nt = 0; nt < D / 8; nt++) {
            int col = nt * 8 + t * 2;
            if (col >= p.d)
                continue;
            *(uint32_t *)(gk + (int64_t)row * p.gk_w[2] + col) =
                pack2<T>(dk[nt][2 * r] * p.scale, dk[nt][2 * r + 1] * p.scale);
            *(uint32_t *)(gv + (int64_t)row * p.gv_w[2] + col) = pack2<T>(dv[nt][2 * r], dv[nt][2 * r + 1]);
        }
    }
}

/* ------------------------------------------------------------------ launch */

fa_params make_params(const ct_cuda_flash_geom *g) {
    fa_params p;
    memset(&p, 0, sizeof p);
    for (int i = 0; i < 3; i++) {
        p.q_str[i] = g->q_str[i];
        p.k_str[i] = g->k_str[i];
        p.v_str[i] = g->v_str[i];
        p.o_str[i] = g->o_str[i];
        p.go_str[i] = g->go_str[i];
        p.out_w[i] = g->out_w[i];
        p.gq_w[i] = g->gq_w[i];
        p.gk_w[i] = g->gk_w[i];
        p.gv_w[i] = g->gv_w[i];
    }
    p.h = (int)g->h;
    p.lq = (int)g->lq;
    p.lk = (int)g->lk;
    p.d = (int)g->d;
    p.causal = g->causal;
    p.scale = (float)g->scale;
    p.scale_log2 = (float)(g->scale * 1.4426950408889634);
    p.dropout = g->dropout;
    p.drop_scale = (float)g->drop_scale;
    p.threshold = g->threshold;
    p.seed = g->seed;
    p.offset = g->offset;
    p.state = g->state;
    p.mask = g->mask;
    p.mask_words = (int)g->mask_words;
    return p;
}

template <typename T, int D, int MT> ct_status launch_fwd(const fa_params &p, int64_t bh, cudaStream_t s) {
    size_t sm = (64 * MT + 4 * FA_BC) * (size_t)D * 2;
    if (cudaFuncSetAttribute(fa_fwd<T, D, MT>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)sm) != cudaSuccess)
        return ct_cuda_check_launch("_flash_attention_forward");
    unsigned grid = (unsigned)(((p.lq + 64 * MT - 1) / (64 * MT)) * bh);
    fa_fwd<T, D, MT><<<grid, FA_THREADS, sm, s>>>(p);
    return ct_cuda_check_launch("_flash_attention_forward");
}

template <typename T, int D> ct_status launch_bwd(const fa_params &p, int64_t bh, cudaStream_t s) {
    size_t sm = 4 * (size_t)64 * D * 2 + 64 * 64 * 2 + 2 * FA_BR * sizeof(float) + FA_BR * sizeof(uint64_t);
    if (cudaFuncSetAttribute(fa_bwd<T, D>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)sm) != cudaSuccess)
        return ct_cuda_check_launch("_flash_attention_backward");
    unsigned grid = (unsigned)(((p.lk + FA_BC - 1) / FA_BC) * bh);
    fa_bwd<T, D><<<grid, FA_THREADS, sm, s>>>(p);
    return ct_cuda_check_launch("_flash_attention_backward");
}

template <typename T> ct_status fwd_t(const fa_params &p, int64_t bh, cudaStream_t s) {
    return p.d <= 64 ? launch_fwd<T, 64, 2>(p, bh, s) : launch_fwd<T, 128, 1>(p, bh, s);
}

template <typename T> ct_status bwd_t(const fa_params &p, int64_t bh, cudaStream_t s, int device) {
    const char *op = "_flash_attention_backward";
    int64_t rows = bh * p.lq;
    if (rows * p.d / 2 >= ((int64_t)1 << 32)) /* fa_bwd_post's 32-bit indices */
        return ct_error(CT_ERROR_NOT_IMPLEMENTED, op,
                        "flash attention's backward on CUDA takes fewer than 2^33 query elements, but got %lld",
                        (long long)(rows * p.d));
    if (rows > 0) {
        unsigned blocks = (unsigned)((rows * 32 + 255) / 256);
        fa_bwd_pre<T><<<blocks, 256, 0, s>>>(p, rows);
        ct_status st = ct_cuda_check_launch(op);
        if (st)
            return st;
    }
    if (p.lk > 0) {
        ct_status st = p.d <= 64 ? launch_bwd<T, 64>(p, bh, s) : launch_bwd<T, 128>(p, bh, s);
        if (st)
            return st;
    }
    const int64_t n = rows * p.d / 2;
    if (n > 0) {
        fa_bwd_post<T><<<ct_grid_for(n, device), CT_CUDA_THREADS, 0, s>>>(p, (uint32_t)rows);
        return ct_cuda_check_launch(op);
    }
    return CT_OK;
}

} // namespace

extern "C" bool ct_cuda_flash_fits(const void *ptr, const int64_t *str) {
    return ((uintptr_t)ptr & 15) == 0 && str[0] % 8 == 0 && str[1] % 8 == 0 && str[2] % 8 == 0;
}

extern "C" ct_status ct_cuda_flash_fwd(ct_dtype dt, const void *q, const void *k, const void *v, void *out,
                                       float *lse, const ct_cuda_flash_geom *g, int device) {
    int64_t bh = g->b * g->h;
    if (bh == 0 || g->lq == 0)
        return CT_OK;
    fa_params p = make_params(g);
    p.q = q, p.k = k, p.v = v, p.out = out, p.lse = lse;
    cudaStream_t s = ct_stream_of(device);
    return dt == CT_DTYPE_BFLOAT16 ? fwd_t<__nv_bfloat16>(p, bh, s) : fwd_t<__half>(p, bh, s);
}

extern "C" ct_status ct_cuda_flash_bwd(ct_dtype dt, const void *go, const void *q, const void *k, const void *v,
                                       const void *out, const float *lse, void *gq, void *gk, void *gv,
                                       float *dq_acc, float *delta, const ct_cuda_flash_geom *g, int device) {
    int64_t bh = g->b * g->h;
    if (bh == 0)
        return CT_OK;
    fa_params p = make_params(g);
    p.go = go, p.q = q, p.k = k, p.v = v, p.o = out, p.lse = (float *)lse;
    p.gq = gq, p.gk = gk, p.gv = gv, p.dq = dq_acc, p.delta = delta;
    cudaStream_t s = ct_stream_of(device);
    return dt == CT_DTYPE_BFLOAT16 ? bwd_t<__nv_bfloat16>(p, bh, s, device) : bwd_t<__half>(p, bh, s, device);
}
