/* Products with a right-hand matrix prepared once (ct_packed_mm in ctorch/ext.h).
 *
 * Note [Prepacked recurrent weights]
 * A recurrent layer multiplies the state (batch rows, 32 in bench/rnn) by the same
 * hidden-to-gates weights at every step: (32 x 512) @ (512 x 2048) 128 times a layer,
 * and the same shapes again, transposed, in the backward. An sgemm call copies its
 * right operand into the blocked layout its kernel reads at every call, so each step
 * rereads and rewrites the 4 MiB of weights for 67 MFLOP of work. oneDNN's matmul
 * primitive can take weights already in its layout (format "any", reordered once).
 * One thread of the GPU machine's Xeon (AVX-512), 128 such products, medians of 7, two
 * rounds: dnnl_sgemm in four 512-column blocks (the way Note [GEMM chunks] in linalg.c
 * cuts them) 100 and 88 ms, one dnnl_sgemm call 97 and 92 ms; the matmul primitive on
 * packed weights 66 and 70 ms in one call (its brgemm kernel), 68 and 60 ms in four
 * blocks (oneDNN picks its jit gemm for 512 columns and reads the packed copy as
 * well). On the 2-core EPYC (AVX2, where oneDNN 2.6 has no brgemm) the packed primitive
 * is slower than the plain call: 235 against 121 ms in one call, 178 against 153 ms in
 * four blocks. So the weights are packed where the CPU has AVX-512 (CT_PACKED_MM=1
 * packs anyway, for tests elsewhere).
 *
 * The columns are cut into blocks as Note [GEMM chunks] cuts a product (by the shape
 * alone), each block a primitive with its own slice of the packed weights, scratchpad
 * and stream, run as the chunks of a ctorch region with OpenMP at one thread: a
 * product's bits do not depend on the thread count, and a busy core holds up one block
 * at a time, not every product. */
#include <stdlib.h>
#include <string.h>

#include "core/parallel.h"
#include "cpu/blas.h"
#include "ctorch.h"
#include "ctorch/ext.h"

#include "cpu/cpu_isa.h"
#include "cpu/onednn.h"


typedef struct pm_block pm_block;

struct ct_packed_mm {
    ct_tensor *w;
    int64_t rows, k, n;
    int state; /* 0 before the first product, 1 packed, -1 plain ct_mm_out */
    int64_t lda, ldc, bs, nblocks;
    pm_block *blocks;
};

#ifdef CT_HAVE_DNNL
struct pm_block {
    dnnl_primitive_t prim;
    dnnl_memory_t src, wei, dst, scratch;
    dnnl_stream_t stream;
    bool ok;
};

/* CT_PACKED_MM: "0" never packs, "1" always packs, else where the CPU has AVX-512: the
 * hardware decides, not CT_CPU_ISA, which caps ctorch's own loops and not oneDNN's, so
 * a lower ctorch level gives the same products (test_loops_isa). */
static int pm_env(void) {
    const char *e = getenv("CT_PACKED_MM");
    return e && strcmp(e, "0") == 0 ? 0 : e && strcmp(e, "1") == 0 ? 1 : -1;
}

static void pm_block_free(pm_block *b) {
    if (b->prim)
        dnnl_primitive_destroy(b->prim);
    if (b->src)
        dnnl_memory_destroy(b->src);
    if (b->wei)
        dnnl_memory_destroy(b->wei);
    if (b->dst)
        dnnl_memory_destroy(b->dst);
    if (b->scratch)
        dnnl_memory_destroy(b->scratch);
    if (b->stream)
        dnnl_stream_destroy(b->stream);
    memset(b, 0, sizeof *b);
}

#define PM_TRY(x)                  \
    do {                           \
        if ((x) != dnnl_success)   \
            goto fail;             \
    } while (0)

typedef struct {
    ct_packed_mm *p;
    const float *w;
    int64_t ws0, ws1;
} pm_build;

/* Block c's primitive, and its slice of w reordered into the layout the primitive
 * chose; the block stays !ok when oneDNN refuses anything. */
static void pm_build_block(void *ctx, int64_t c) {
    const pm_build *bd = ctx;
    ct_packed_mm *p = bd->p;
    pm_block *b = &p->blocks[c];
    int64_t n0 = c * p->bs, nb = p->n - n0 < p->bs ? p->n - n0 : p->bs;
    dnnl_primitive_attr_t attr = NULL;
    dnnl_primitive_desc_t pd = NULL;
    dnnl_engine_t pm_engine = ct_cpu_dnnl_engine();
    dnnl_memory_t wuser = NULL;
    dnnl_memory_desc_t smd, wany, wmd, dmd;
    dnnl_matmul_desc_t md;
    const dnnl_memory_desc_t *wq, *sq;
    PM_TRY(dnnl_memory_desc_init_by_strides(&smd, 2, (dnnl_dims_t){p->rows, p->k}, dnnl_f32,
                                            (dnnl_dims_t){p->lda, 1}));
    PM_TRY(dnnl_memory_desc_init_by_tag(&wany, 2, (dnnl_dims_t){p->k, nb}, dnnl_f32, dnnl_format_tag_any));
    PM_TRY(dnnl_memory_desc_init_by_strides(&wmd, 2, (dnnl_dims_t){p->k, nb}, dnnl_f32,
                                            (dnnl_dims_t){bd->ws0, bd->ws1}));
    PM_TRY(dnnl_memory_desc_init_by_strides(&dmd, 2, (dnnl_dims_t){p->rows, nb}, dnnl_f32,
                                            (dnnl_dims_t){p->ldc, 1}));
    PM_TRY(dnnl_matmul_desc_init(&md, &smd, &wany, NULL, &dmd));
    PM_TRY(dnnl_primitive_attr_create(&attr));
    PM_TRY(dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user));
    PM_TRY(dnnl_primitive_desc_create(&pd, &md, attr, pm_engine, NULL));
    wq = dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
    sq = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
    PM_TRY(dnnl_memory_create(&b->scratch, sq, pm_engine, DNNL_MEMORY_ALLOCATE));
    PM_TRY(dnnl_memory_create(&b->src, &smd, pm_engine, DNNL_MEMORY_NONE));
    PM_TRY(dnnl_memory_create(&b->dst, &dmd, pm_engine, DNNL_MEMORY_NONE));
    PM_TRY(dnnl_stream_create(&b->stream, pm_engine, dnnl_stream_default_flags));
    PM_TRY(dnnl_primitive_create(&b->prim, pd));
    PM_TRY(dnnl_memory_create(&wuser, &wmd, pm_engine, (void *)(bd->w + n0 * bd->ws1)));
    PM_TRY(ct_cpu_dnnl_reorder(b->stream, wuser, &wmd, wq, &b->wei));
    b->ok = true;
fail:
    if (!b->ok)
        pm_block_free(b);
    if (wuser)
        dnnl_memory_destroy(wuser);
    if (pd)
        dnnl_primitive_desc_destroy(pd);
    if (attr)
        dnnl_primitive_attr_destroy(attr);
}

/* Packs w for products whose a and out rows are lda and ldc apart; false (and p plain
 * from then on) where the packed kernel does not apply or oneDNN refuses. */
static bool pm_pack(ct_packed_mm *p, int64_t lda, int64_t ldc) {
    int force = pm_env();
    if (force == 0 || (force < 0 && !ct_cpu_has_avx512()) || !ct_cpu_sgemm_onednn() || ct_tensor_dtype(p->w) != CT_F32 ||
        ct_tensor_device(p->w).type != CT_DEVICE_CPU || p->rows < 1 || p->k < 1 || p->n < 1)
        return false;
    if (!ct_cpu_dnnl_engine())
        return false;
    p->bs = ct_cpu_gemm_block(p->rows, p->n, p->k, p->n); /* column blocks, as Note [GEMM chunks] */
    p->nblocks = (p->n + p->bs - 1) / p->bs;
    p->lda = lda, p->ldc = ldc;
    if (!(p->blocks = calloc((size_t)p->nblocks, sizeof *p->blocks)))
        return false;
    pm_build bd = {p, ct_tensor_data(p->w), ct_tensor_stride(p->w, 0), ct_tensor_stride(p->w, 1)};
    ct_parallel_for(p->nblocks, ct_get_num_threads(), pm_build_block, &bd);
    for (int64_t c = 0; c < p->nblocks; c++)
        if (!p->blocks[c].ok) {
            for (int64_t i = 0; i < p->nblocks; i++)
                pm_block_free(&p->blocks[i]);
            free(p->blocks);
            p->blocks = NULL;
            return false;
        }
    return true;
}

typedef struct {
    ct_packed_mm *p;
    const float *a;
    float *out;
} pm_run;

static void pm_run_block(void *ctx, int64_t c) {
    const pm_run *r = ctx;
    pm_block *b = &r->p->blocks[c];
    bool ok = dnnl_memory_set_data_handle(b->src, (void *)r->a) == dnnl_success &&
              dnnl_memory_set_data_handle(b->dst, r->out + c * r->p->bs) == dnnl_success;
    dnnl_exec_arg_t args[4] = {{DNNL_ARG_SRC, b->src},
                               {DNNL_ARG_WEIGHTS, b->wei},
                               {DNNL_ARG_DST, b->dst},
                               {DNNL_ARG_SCRATCHPAD, b->scratch}};
    b->ok = ok && dnnl_primitive_execute(b->prim, b->stream, 4, args) == dnnl_success &&
            dnnl_stream_wait(b->stream) == dnnl_success;
}
#else
struct pm_block {
    int unused;
};
static bool pm_pack(ct_packed_mm *p, int64_t lda, int64_t ldc) {
    (void)p, (void)lda, (void)ldc;
    return false;
}
#endif

ct_packed_mm *ct_packed_mm_new(ct_tensor *w, int64_t rows) {
    CT_CHECK_ARG("packed_mm", w);
    if (ct_tensor_dim(w) != 2) {
        ct_error(CT_ERROR_VALUE, "packed_mm", "expected a matrix, got %d dimensions", ct_tensor_dim(w));
        return NULL;
    }
    if (rows < 0) {
        ct_error(CT_ERROR_VALUE, "packed_mm", "rows must be at least 0, got %lld", (long long)rows);
        return NULL;
    }
    ct_packed_mm *p = ct_xcalloc("packed_mm", 1, sizeof *p);
    if (!p)
        return NULL;
    p->w = ct_retain(w);
    p->rows = rows, p->k = ct_tensor_size(w, 0), p->n = ct_tensor_size(w, 1);
    return p;
}

/* Whether the memory spans of two matrices (first to last element) intersect: a
 * recurrence reads one step's row block of a buffer and writes the next one's. */
static bool pm_overlap(const ct_tensor *a, const ct_tensor *b) {
    if (!ct_tensor_shares_storage(a, b) || ct_tensor_numel(a) == 0 || ct_tensor_numel(b) == 0)
        return false;
    const char *pa = ct_tensor_data(a), *pb = ct_tensor_data(b);
    int64_t ea = 1, eb = 1; /* extents in elements */
    for (int d = 0; d < 2; d++) {
        ea += (ct_tensor_size(a, d) - 1) * ct_tensor_stride(a, d);
        eb += (ct_tensor_size(b, d) - 1) * ct_tensor_stride(b, d);
    }
    return pa < pb + (size_t)eb * ct_tensor_element_size(b) && pb < pa + (size_t)ea * ct_tensor_element_size(a);
}

/* Whether a product may take the packed kernel: float32 CPU operands of p's shapes
 * with unit column strides, nothing for autograd to record. */
static bool pm_fits(const ct_packed_mm *p, const ct_tensor *a, const ct_tensor *out) {
    if (ct_tensor_dtype(a) != CT_F32 || ct_tensor_dtype(out) != CT_F32 ||
        ct_tensor_device(a).type != CT_DEVICE_CPU || ct_tensor_device(out).type != CT_DEVICE_CPU ||
        ct_tensor_dim(a) != 2 || ct_tensor_dim(out) != 2 || ct_tensor_size(a, 0) != p->rows ||
        ct_tensor_size(a, 1) != p->k || ct_tensor_size(out, 0) != p->rows || ct_tensor_size(out, 1) != p->n ||
        ct_tensor_stride(a, 1) != 1 || ct_tensor_stride(out, 1) != 1 || ct_tensor_stride(a, 0) < p->k ||
        ct_tensor_stride(out, 0) < p->n || pm_overlap(a, out) || pm_overlap(p->w, out))
        return false; /* an output that overlaps an operand is ct_mm_out's to refuse */
    return !(ct_is_grad_enabled() &&
             (ct_tensor_requires_grad(a) || ct_tensor_requires_grad(p->w) || ct_tensor_requires_grad(out)));
}

ct_tensor *ct_packed_mm_out(ct_packed_mm *p, ct_tensor *a, ct_tensor *out) {
    CT_CHECK_ARG("packed_mm", p);
    CT_CHECK_ARG("packed_mm", a);
    CT_CHECK_ARG("packed_mm", out);
    bool fits = p->state >= 0 && pm_fits(p, a, out);
    if (fits && p->state == 0)
        p->state = pm_pack(p, ct_tensor_stride(a, 0), ct_tensor_stride(out, 0)) ? 1 : -1;
#ifdef CT_HAVE_DNNL
    if (fits && p->state == 1 && ct_tensor_stride(a, 0) == p->lda && ct_tensor_stride(out, 0) == p->ldc) {
        pm_run r = {p, ct_tensor_data(a), ct_tensor_data(out)};
        ct_parallel_for(p->nblocks, ct_get_num_threads(), pm_run_block, &r);
        bool ok = true;
        for (int64_t c = 0; c < p->nblocks; c++)
            ok = ok && p->blocks[c].ok;
        if (ok) {
            ct_tensor_bump_version(out);
            return ct_tensor_ref(out);
        }
        ct_error(CT_ERROR_RUNTIME, "packed_mm", "oneDNN's matmul failed");
        return NULL;
    }
#endif
    return ct_mm_out(a, p->w, out);
}

bool ct_packed_mm_is_packed(const ct_packed_mm *p) { return p && p->state == 1; }

void ct_packed_mm_free(ct_packed_mm *p) {
    if (!p)
        return;
#ifdef CT_HAVE_DNNL
    for (int64_t i = 0; p->blocks && i < p->nblocks; i++)
        pm_block_free(&p->blocks[i]);
#endif
    free(p->blocks);
    ct_release(p->w);
    free(p);
}
