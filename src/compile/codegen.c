/* Fusion of pointwise chains into generated C, compiled by the system's C compiler,
 * cached on disk and loaded with dlopen. */
#define _GNU_SOURCE /* mkdtemp, dlopen's RTLD_LOCAL on older libcs */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "compile/graph.h"
#include "observe/trace_log.h"
#include "ctorch/ops.h"
#include "cpu/vecmath.h"
#include "ctorch/profiler.h"
#include "tensor_impl.h"
#include "util/md5.h"

/* Note [Generated kernels]
 * A group is a run of consecutive live nodes of one float32 shape whose ops have a
 * pointwise C expression here (add, sub, mul, div, neg, abs, relu, sqrt, square, exp,
 * tanh, sigmoid, silu, gelu), whose tensor inputs are contiguous float32 tensors of
 * the group's shape (or of its last dims, broadcast: a bias) or 0-d numbers, and that
 * make no autograd history (a training step's graph, or inputs that do not require
 * grad) and run outside autocast. Each group is one C function:
 *
 *   - the elements are split into fixed chunks of CT_FUSE_CHUNK, shared by an OpenMP
 *     loop (schedule(static)); each chunk walks tiles of CT_FUSE_TILE elements, and
 *     each node of the group is one loop over the tile into a tile buffer, which the
 *     compiler vectorizes;
 *   - values read outside the group are stored to new contiguous tensors; the others
 *     live in tile buffers only;
 *   - exp and tanh call the library's own vector math (ct_vm_get: SLEEF, the routine the
 *     eager kernel calls for contiguous float32), passed in as a table of function
 *     pointers, so nothing in the generated code needs a symbol of the library.
 *
 * The expressions are the eager kernels' float32 expressions (src/cpu/binary.c,
 * unary.c), and both are built as ISO C without contraction (-std=c11
 * -ffp-contract=off), so a group computes the bits the nodes compute one by one
 * (test_compile checks them). The source is self-contained: its few declarations are
 * text of this file (kernel_prelude), not an installed header. */
/* Note [Generated layer_norm rows]
 * layer_norm over the last dim (weight and bias, when given, float32 vectors of the
 * row's length) joins a row group as softmax does. Its code is the eager float32
 * kernel's row (layernorm_fwd in src/cpu/nn_fused_impl.h) written out: the sum and then
 * the squared deviations in eight double lanes, element j in lane j % 8, the lanes
 * added in the kernel's fixed order, rstd = 1 / sqrt(var + eps) in double, then
 * (x - (float)mean) * (float)rstd * w + b in float. Both are ISO C without contraction,
 * so the row is the kernel's to the bit, whatever its ISA variant (the lanes are
 * plain C in both). A pointwise chain after it (GELU) runs on the row's buffer. */
#define CT_FUSE_CHUNK 16384
#define CT_FUSE_TILE 256
#define CT_FUSE_MAX_NODES 64

typedef void (*vm_fn)(float *out, const float *in, int64_t n);
typedef void (*group_fn)(float *const *out, const float *const *in, const float *num, int64_t n, const vm_fn *vm);

/* The table handed to the generated code: the vector routines of exp and tanh, and the
 * float32 softmax row's max and exp-sum (cpu/vecmath.h's ct_vm_red), cast to one type. */
enum { VM_EXP = 0, VM_TANH = 1, VM_MAX = 2, VM_EXPSUM = 3, VM_ERF = 4, VM_COUNT };
#define CT_FUSE_MAX_ROW 1024
#define CT_FUSE_MAX_ROW_NODES 16

typedef struct group {
    int first, last; /* node range (dead nodes inside are skipped) */
    int64_t row;     /* > 0: a row group (softmax over the last dim of this length) */
    int nnodes;
    int64_t numel;
    int64_t shape[CT_MAX_DIMS];
    int ndim;
    int nin, nnum, nout;
    int *in;  /* tensor inputs (value ids) */
    int *num; /* 0-d inputs */
    int *out; /* stored values */
    group_fn fn;
} group;

struct ct_fused {
    int ngroups;
    group *groups;
    int nunits;     /* translation units, each an object of its own (Note [Parallel units]) */
    void **handles; /* their dlopen handles */
    vm_fn vm[VM_COUNT];
};

int ct_codegen_group_first(const ct_graph *g, int k) { return g->fused->groups[k].first; }

/* ------------------------------------------------------------ what fuses */

static bool is_contig(const ct_gvalue *v) {
    int64_t st = 1;
    for (int d = v->ndim - 1; d >= 0; d--) {
        if (v->shape[d] != 1 && v->strides[d] != st)
            return false;
        st *= v->shape[d];
    }
    return true;
}

static int64_t numel_of(const ct_gvalue *v) {
    int64_t n = 1;
    for (int d = 0; d < v->ndim; d++)
        n *= v->shape[d];
    return n;
}

static bool same_shape(const ct_gvalue *v, const int64_t *shape, int ndim) {
    return v->ndim == ndim && memcmp(v->shape, shape, sizeof(int64_t) * (size_t)ndim) == 0;
}

/* Whether v broadcasts to shape by repeating itself whole (a bias over the last dims):
 * its shape without leading 1s is a suffix of shape. Element i of the result then reads
 * element i % numel(v) of a contiguous v. */
static bool suffix_broadcast(const ct_gvalue *v, const int64_t *shape, int ndim) {
    int lead = 0;
    while (lead < v->ndim && v->shape[lead] == 1)
        lead++;
    int k = v->ndim - lead;
    if (k > ndim)
        return false;
    for (int d = 0; d < k; d++)
        if (v->shape[lead + d] != shape[ndim - k + d])
            return false;
    return true;
}

static bool op_supported(const ct_gnode *n, const vm_fn *vm) {
    switch (n->op) {
    case CT_OP_add:
    case CT_OP_sub:
        return n->nin == 2 && n->nints == 0 && n->nscalars <= 1;
    case CT_OP_mul:
        return n->nin == 2 && n->nints == 0 && n->nscalars == 0;
    case CT_OP_div:
        return n->nin == 2 && n->nscalars == 0 && (n->nints == 0 || (n->nints == 1 && n->ints[0] == CT_ROUNDING_MODE_NONE));
    case CT_OP_neg:
    case CT_OP_abs:
    case CT_OP_relu:
        return n->nin == 1 && n->nints == 0 && n->nscalars == 0;
    case CT_OP_exp:
    case CT_OP_sigmoid:
        return n->nin == 1 && n->nints == 0 && n->nscalars == 0 && vm[VM_EXP];
    case CT_OP_tanh:
        return n->nin == 1 && n->nints == 0 && n->nscalars == 0 && vm[VM_TANH];
    case CT_OP_sqrt:
    case CT_OP_square:
        return n->nin == 1 && n->nints == 0 && n->nscalars == 0;
    case CT_OP_silu:
        return n->nin == 1 && n->nints == 0 && n->nscalars == 0 && vm[VM_EXP];
    case CT_OP_gelu:
        return n->nin == 1 && n->nints == 1 && n->nscalars == 0 &&
               ((n->ints[0] == CT_GELU_APPROXIMATE_TANH && vm[VM_EXP]) ||
                (n->ints[0] == CT_GELU_APPROXIMATE_NONE && vm[VM_ERF]));
    case CT_OP_layer_norm:
        /* over the last dim only: ints {ndims 1, normalized_shape}, the eps */
        return n->nin == 3 && n->nints == 2 && n->ints[0] == 1 && n->nscalars == 1 &&
               n->s[0].type == CT_SCALAR_FLOAT;
    case CT_OP_softmax:
    case CT_OP_log_softmax:
        /* the reduction layout: keepdim 0, one dim; the dim is checked against the shape */
        return n->nin == 1 && n->nints == 3 && n->ints[0] == 0 && n->ints[1] == 1 && n->nscalars == 0 &&
               (n->dtype == CT_DTYPE_UNDEFINED || n->dtype == CT_F32) && vm[VM_MAX] && vm[VM_EXPSUM];
    default:
        return false;
    }
}

static bool is_row_op(const ct_gnode *n) {
    return n->op == CT_OP_softmax || n->op == CT_OP_log_softmax || n->op == CT_OP_layer_norm;
}

/* Whether node n can join a group of this shape (the shape of its result). */
static bool fusible(const ct_graph *g, const ct_gnode *n, const vm_fn *vm) {
    if (n->dead || n->host || n->mode != CT_CALL_FUNCTIONAL || n->nout != 1 || n->out[0] < 0 || n->nlist || n->has_device ||
        !op_supported(n, vm))
        return false;
    if (n->included & ~n->excluded & ct_keyset_of(CT_KEY_AUTOCAST))
        return false;
    const ct_gvalue *o = &g->values[n->out[0]];
    if (o->dtype != CT_F32 || o->device.type != CT_DEVICE_CPU || !is_contig(o) || o->offset != 0)
        return false;
    const bool ln = n->op == CT_OP_layer_norm;
    if (is_row_op(n) && (o->ndim == 0 || o->shape[o->ndim - 1] > CT_FUSE_MAX_ROW || n->in[0] < 0 ||
                         g->values[n->in[0]].ndim == 0))
        return false;
    if (is_row_op(n) && !ln && n->ints[2] != -1 && n->ints[2] != o->ndim - 1)
        return false;
    if (ln && n->ints[1] != o->shape[o->ndim - 1])
        return false;
    for (int k = 0; k < n->nin; k++) {
        if (n->in[k] < 0) {
            if (ln && k > 0) /* no weight or no bias */
                continue;
            return false;
        }
        const ct_gvalue *v = &g->values[n->in[k]];
        if (ln && k > 0) {
            /* Note [Generated layer_norm rows]: weight and bias of the row's length */
            if (v->device.type != CT_DEVICE_CPU || v->dtype != CT_F32 || v->ndim != 1 || !is_contig(v) ||
                v->shape[0] != o->shape[o->ndim - 1])
                return false;
            if (!g->no_autograd && v->requires_grad && !(n->excluded & ct_keyset_of(CT_KEY_AUTOGRAD)))
                return false;
            continue;
        }
        if (v->device.type != CT_DEVICE_CPU)
            return false;
        if (!g->no_autograd && v->requires_grad && !(n->excluded & ct_keyset_of(CT_KEY_AUTOGRAD)))
            return false;
        if (v->ndim == 0) {
            if (v->dtype != CT_F32 && v->dtype != CT_F64 && v->dtype != CT_I64)
                return false;
            continue;
        }
        if (v->dtype != CT_F32 || !is_contig(v) ||
            !(same_shape(v, o->shape, o->ndim) || (!is_row_op(n) && suffix_broadcast(v, o->shape, o->ndim))))
            return false;
    }
    return true;
}

/* ------------------------------------------------------------ source */

typedef struct sbuf {
    char *p;
    size_t len, cap;
    bool oom;
} sbuf;

static void __attribute__((format(printf, 2, 3))) emit(sbuf *b, const char *fmt, ...) {
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        size_t room = b->cap - b->len;
        int n = vsnprintf(b->p ? b->p + b->len : NULL, b->p ? room : 0, fmt, ap);
        va_end(ap);
        if (n < 0) {
            b->oom = true;
            return;
        }
        if (b->p && (size_t)n < room) {
            b->len += (size_t)n;
            return;
        }
        size_t ncap = (b->cap ? b->cap * 2 : 8192) + (size_t)n;
        char *np = realloc(b->p, ncap);
        if (!np) {
            b->oom = true;
            return;
        }
        b->p = np;
        b->cap = ncap;
    }
}

static const char kernel_prelude[] =
    "/* Generated by ctorch's compiler (src/compile/codegen.c). */\n"
    "#include <math.h>\n"
    "#include <stdint.h>\n"
    "typedef void (*vm_fn)(float *out, const float *in, int64_t n);\n"
    "typedef float (*max_fn)(const float *in, int64_t n);\n"
    "typedef double (*expsum_fn)(float *out, const float *in, int64_t n, float m, const float *pf_in, const float *pf_out);\n"
    "#define CHUNK " "16384" "\n"
    "#define TILE " "256" "\n";

/* The operand k of node n in the tile loop: a tile buffer, an input tensor, or a number. */
static void operand(sbuf *b, const ct_graph *g, const group *gr, const ct_gnode *n, int k, const int *local) {
    int v = n->in[k];
    if (local[v] >= 0) {
        emit(b, "t%d[i]", local[v]);
        return;
    }
    for (int j = 0; j < gr->nnum; j++)
        if (gr->num[j] == v) {
            emit(b, "num[%d]", j);
            return;
        }
    for (int j = 0; j < gr->nin; j++)
        if (gr->in[j] == v) {
            const int64_t period = numel_of(&g->values[v]);
            if (period == gr->numel)
                emit(b, "in%d[i0 + i]", j);
            else /* a broadcast input (suffix_broadcast) */
                emit(b, "in%d[(i0 + i) %% %lld]", j, (long long)period);
            return;
        }
    emit(b, "0 /* unreachable */");
}

/* The same operand as a pointer to the tile's first element. */
static void operand_ptr(sbuf *b, const group *gr, const ct_gnode *n, const int *local) {
    int v = n->in[0];
    if (local[v] >= 0) {
        emit(b, "t%d", local[v]);
        return;
    }
    for (int j = 0; j < gr->nin; j++)
        if (gr->in[j] == v) {
            emit(b, "(in%d + i0)", j);
            return;
        }
    emit(b, "0 /* unreachable */");
}

static void emit_group(sbuf *b, const ct_graph *g, const group *gr, int k, int *local) {
    emit(b, "\nvoid ct_fused_%d(float *const *out, const float *const *in, const float *num, int64_t n, const vm_fn *vm) {\n", k);
    emit(b, "    (void)num; (void)vm; (void)in;\n");
    for (int j = 0; j < gr->nin; j++)
        emit(b, "    const float *in%d = in[%d];\n", j, j);
    /* one tile buffer per node */
    int nt = 0;
    for (int i = gr->first; i <= gr->last; i++)
        if (!g->nodes[i].dead && g->nodes[i].group == k)
            local[g->nodes[i].out[0]] = nt++;
    if (gr->row > 0) {
        /* a row group: one row per iteration (rows are independent) */
        emit(b, "    const int64_t nrows = n / %lld;\n", (long long)gr->row);
        emit(b, "#pragma omp parallel for schedule(static) if (nrows > 1)\n");
        emit(b, "    for (int64_t r = 0; r < nrows; r++) {\n");
        emit(b, "        float t[%d][%lld];\n", nt, (long long)gr->row);
        for (int j = 0; j < nt; j++)
            emit(b, "        float *t%d = t[%d];\n", j, j);
        emit(b, "        {\n");
        emit(b, "            const int64_t m = %lld, i0 = r * m;\n", (long long)gr->row);
    } else {
        emit(b, "    const int64_t nchunks = (n + CHUNK - 1) / CHUNK;\n");
        emit(b, "#pragma omp parallel for schedule(static) if (nchunks > 1)\n");
        emit(b, "    for (int64_t c = 0; c < nchunks; c++) {\n");
        emit(b, "        const int64_t lo = c * CHUNK, hi = lo + CHUNK < n ? lo + CHUNK : n;\n");
        emit(b, "        float t[%d][TILE];\n", nt);
        for (int j = 0; j < nt; j++)
            emit(b, "        float *t%d = t[%d];\n", j, j);
        emit(b, "        for (int64_t i0 = lo; i0 < hi; i0 += TILE) {\n");
        emit(b, "            const int64_t m = hi - i0 < TILE ? hi - i0 : TILE;\n");
    }
    for (int i = gr->first; i <= gr->last; i++) {
        const ct_gnode *n = &g->nodes[i];
        if (n->dead || n->group != k)
            continue;
        int o = local[n->out[0]];
        switch (n->op) {
        case CT_OP_exp:
        case CT_OP_tanh:
            /* the vector routine over the tile: its input must be in a buffer */
            emit(b, "            for (int64_t i = 0; i < m; i++) t%d[i] = ", o);
            operand(b, g, gr, n, 0, local);
            emit(b, ";\n            vm[%d](t%d, t%d, m);\n", n->op == CT_OP_exp ? VM_EXP : VM_TANH, o, o);
            continue;
        case CT_OP_softmax:
        case CT_OP_log_softmax: {
            /* Note [Float32 softmax rows] (src/cpu/reduce_loops.c), one chunk: the row's
             * max, the sum of exp(x - max) in the ISA's fixed order, then the scaling or
             * the shift, with the eager kernel's routines */
            const bool lg = n->op == CT_OP_log_softmax;
            emit(b, "            {\n                float *const t_out = t%d;\n                const float *x = ", o);
            operand_ptr(b, gr, n, local);
            emit(b, ";\n                const float mx = ((max_fn)vm[%d])(x, m);\n", VM_MAX);
            emit(b, "                if (mx == mx) {\n");
            emit(b, "                    const double s = ((expsum_fn)vm[%d])(%s, x, m, mx, 0, 0);\n", VM_EXPSUM,
                 lg ? "0" : "t_out");
            if (lg) {
                emit(b, "                    const float c = (float)log(s);\n");
                emit(b, "                    for (int64_t i = 0; i < m; i++) t_out[i] = (x[i] - mx) - c;\n");
            } else {
                emit(b, "                    const float c = (float)(1.0 / s);\n");
                emit(b, "                    for (int64_t i = 0; i < m; i++) t_out[i] *= c;\n");
            }
            emit(b, "                } else {\n");
            emit(b, "                    for (int64_t i = 0; i < m; i++) t_out[i] = NAN;\n");
            emit(b, "                }\n            }\n");
            continue;
        }
        case CT_OP_layer_norm: {
            /* Note [Generated layer_norm rows]: the eager kernel's row (layernorm_fwd in
             * src/cpu/nn_fused_impl.h): mean and biased variance in eight double lanes
             * added in its fixed order, then (x - mean) * rstd * w + b in float */
            int wi = -1, bi = -1;
            for (int j = 0; j < gr->nin; j++) {
                if (n->in[1] >= 0 && gr->in[j] == n->in[1])
                    wi = j;
                if (n->in[2] >= 0 && gr->in[j] == n->in[2])
                    bi = j;
            }
            emit(b, "            {\n                float *const t_out = t%d;\n                const float *x = ", o);
            operand_ptr(b, gr, n, local);
            emit(b, ";\n");
            if (wi >= 0)
                emit(b, "                const float *w = in%d;\n", wi);
            if (bi >= 0)
                emit(b, "                const float *bb = in%d;\n", bi);
            emit(b, "                double s[8] = {0}, ss[8] = {0};\n"
                    "                int64_t j = 0;\n"
                    "                const int64_t body = m / 8 * 8;\n"
                    "                for (; j < body; j += 8)\n"
                    "                    for (int l = 0; l < 8; l++) s[l] += (double)x[j + l];\n"
                    "                for (int l = 0; j < m; j++, l++) s[l] += (double)x[j];\n"
                    "                const double mean = (((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]))) / (double)m;\n"
                    "                for (j = 0; j < body; j += 8)\n"
                    "                    for (int l = 0; l < 8; l++) { const double d = (double)x[j + l] - mean; ss[l] += d * d; }\n"
                    "                for (int l = 0; j < m; j++, l++) { const double d = (double)x[j] - mean; ss[l] += d * d; }\n");
            emit(b, "                const double rstd = 1.0 / sqrt((((ss[0] + ss[1]) + (ss[2] + ss[3])) + ((ss[4] + ss[5]) + (ss[6] + ss[7]))) / (double)m + %a);\n",
                 n->s[0].v.f);
            emit(b, "                const float mf = (float)mean, rs = (float)rstd;\n");
            if (wi >= 0 && bi >= 0)
                emit(b, "                for (int64_t i = 0; i < m; i++) t_out[i] = (x[i] - mf) * rs * w[i] + bb[i];\n");
            else
                emit(b, "                for (int64_t i = 0; i < m; i++) { float v = (x[i] - mf) * rs;%s%s t_out[i] = v; }\n",
                     wi >= 0 ? " v *= w[i];" : "", bi >= 0 ? " v += bb[i];" : "");
            emit(b, "            }\n");
            continue;
        }
        case CT_OP_sigmoid:
            emit(b, "            for (int64_t i = 0; i < m; i++) t%d[i] = -", o);
            operand(b, g, gr, n, 0, local);
            emit(b, ";\n            vm[%d](t%d, t%d, m);\n", VM_EXP, o, o);
            emit(b, "            for (int64_t i = 0; i < m; i++) t%d[i] = 1.0f / (1.0f + t%d[i]);\n", o, o);
            continue;
        case CT_OP_silu:
        case CT_OP_gelu: {
            /* the eager kernels' vector chains (src/cpu/activation.c): t = PRE(x), the
             * routine over the tile, then POST(x, v); gelu's tanh form goes through exp
             * (Note [GELU through exp]) */
            const bool erf_form = n->op == CT_OP_gelu && n->ints[0] == CT_GELU_APPROXIMATE_NONE;
            emit(b, "            for (int64_t i = 0; i < m; i++) { const float x = ");
            operand(b, g, gr, n, 0, local);
            if (n->op == CT_OP_silu)
                emit(b, "; t%d[i] = -x; }\n", o);
            else if (erf_form)
                emit(b, "; t%d[i] = x * (%af); }\n", o, (double)(float)0.70710678118654752440);
            else
                emit(b, "; t%d[i] = -2.0f * ((%af) * (x + 0.044715f * x * x * x)); }\n", o,
                     (double)(float)0.79788456080286535588);
            emit(b, "            vm[%d](t%d, t%d, m);\n", erf_form ? VM_ERF : VM_EXP, o, o);
            emit(b, "            for (int64_t i = 0; i < m; i++) { const float x = ");
            operand(b, g, gr, n, 0, local);
            emit(b, erf_form ? "; t%d[i] = x * 0.5f * (1.0f + t%d[i]); }\n" : "; t%d[i] = x / (1.0f + t%d[i]); }\n", o, o);
            continue;
        }
        default:
            break;
        }
        emit(b, "            for (int64_t i = 0; i < m; i++) { ");
        if (n->nin == 1) {
            emit(b, "const float x = ");
            operand(b, g, gr, n, 0, local);
            emit(b, "; ");
        } else {
            emit(b, "const float a = ");
            operand(b, g, gr, n, 0, local);
            emit(b, ", b = ");
            operand(b, g, gr, n, 1, local);
            emit(b, "; ");
        }
        emit(b, "t%d[i] = ", o);
        switch (n->op) {
        case CT_OP_add:
        case CT_OP_sub: {
            /* eager: a +- (float)alpha * b */
            float alpha = n->nscalars ? (float)(n->s[0].type == CT_SCALAR_FLOAT ? n->s[0].v.f : (double)n->s[0].v.i) : 1.0f;
            emit(b, "a %c (%af) * b", n->op == CT_OP_add ? '+' : '-', (double)alpha);
            break;
        }
        case CT_OP_mul: emit(b, "a * b"); break;
        case CT_OP_div: emit(b, "a / b"); break;
        case CT_OP_neg: emit(b, "-x"); break;
        case CT_OP_abs: emit(b, "x < 0 ? -x : x"); break;
        case CT_OP_relu: emit(b, "x > 0 ? x : (x != x ? x : 0)"); break;
        case CT_OP_sqrt: emit(b, "sqrtf(x)"); break;
        case CT_OP_square: emit(b, "x * x"); break;
        default: emit(b, "x"); break;
        }
        emit(b, "; }\n");
    }
    /* stores */
    for (int j = 0; j < gr->nout; j++)
        emit(b, "            for (int64_t i = 0; i < m; i++) out[%d][i0 + i] = t%d[i];\n", j, local[gr->out[j]]);
    emit(b, "        }\n    }\n}\n");
    for (int i = gr->first; i <= gr->last; i++)
        if (!g->nodes[i].dead && g->nodes[i].group == k)
            local[g->nodes[i].out[0]] = -1;
}

/* ------------------------------------------------------------ the compiler and the cache */

/* Note [Compile cache]
 * Generated objects live in one directory: $CT_COMPILE_CACHE, else
 * $XDG_CACHE_HOME/ctorch/compile, else ~/.cache/ctorch/compile. An object's name is the
 * md5 of its source, the compiler's identity (its --version line), the flags and the
 * vector ISA the library runs; beside it, <name>.md5 holds the md5 of the object's
 * bytes. Loading reads the object, checks its bytes against that sum and only then
 * dlopens it, so a truncated or corrupted entry is compiled again, never executed.
 * A build writes to temporary names and renames them into place (object first, then
 * its sum), so concurrent processes never see half an entry; the source stays beside
 * the object as <name>.c, for reading. */
static const char *cc_flags = "-O3 -std=c11 -march=native -ffp-contract=off -fopenmp -fPIC -shared";

static const char *cc_path(void) {
    const char *cc = getenv("CT_COMPILE_CC");
    return cc && *cc ? cc : "cc";
}

static bool cache_dir(char *out, size_t cap) {
    const char *d = getenv("CT_COMPILE_CACHE");
    int n;
    if (d && *d) {
        n = snprintf(out, cap, "%s", d);
    } else if ((d = getenv("XDG_CACHE_HOME")) && *d) {
        n = snprintf(out, cap, "%s/ctorch/compile", d);
    } else if ((d = getenv("HOME")) && *d) {
        n = snprintf(out, cap, "%s/.cache/ctorch/compile", d);
    } else {
        n = snprintf(out, cap, "/tmp/ctorch-compile-%d", (int)getuid());
    }
    if (n < 0 || (size_t)n >= cap)
        return false;
    /* mkdir -p */
    for (char *p = out + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(out, 0700) != 0 && errno != EEXIST) {
            *p = '/';
            return false;
        }
        *p = '/';
    }
    return mkdir(out, 0700) == 0 || errno == EEXIST;
}

/* The compiler's --version line, read once. */
static const char *cc_identity(void) {
    static char ident[256];
    static bool done;
    if (done)
        return ident;
    char cmd[600];
    snprintf(cmd, sizeof cmd, "%s --version 2>/dev/null", cc_path());
    FILE *f = popen(cmd, "r");
    if (f) {
        if (!fgets(ident, sizeof ident, f))
            ident[0] = '\0';
        pclose(f);
    }
    done = true;
    return ident;
}

static bool file_md5(const char *path, char hex[33]) {
    FILE *f = fopen(path, "rb");
    if (!f)
        return false;
    ct_md5_ctx c;
    ct_md5_init(&c);
    char buf[65536];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0)
        ct_md5_update(&c, buf, n);
    bool ok = !ferror(f);
    fclose(f);
    uint8_t d[16];
    ct_md5_final(&c, d);
    for (int i = 0; i < 16; i++)
        snprintf(hex + 2 * i, 3, "%02x", d[i]);
    return ok;
}

/* True when path.md5 holds the md5 of path's bytes. */
static bool entry_valid(const char *so, const char *sum) {
    FILE *f = fopen(sum, "r");
    if (!f)
        return false;
    char want[40] = {0}, got[33];
    bool ok = fgets(want, sizeof want, f) != NULL;
    fclose(f);
    return ok && strlen(want) >= 32 && file_md5(so, got) && memcmp(want, got, 32) == 0;
}

static int run_cc(const char *src, const char *so, const char *log) {
    char cmd[4096];
    int n = snprintf(cmd, sizeof cmd, "%s %s -o '%s' '%s' -lm > '%s' 2>&1", cc_path(), cc_flags, so, src, log);
    if (n < 0 || (size_t)n >= sizeof cmd)
        return -1;
    int rc = system(cmd);
    return rc == -1 ? -1 : WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

/* Finds or builds the object for src; its path goes to so_out, and *hit says whether
 * the cache had it. False (with a warning on stderr) when it cannot be built. Safe to
 * run on several threads at once for different sources. */
static bool build_object(const char *src, size_t len, char *so_out, size_t cap, bool *hit) {
    *hit = false;
    char dir[1024];
    if (!cache_dir(dir, sizeof dir)) {
        fprintf(stderr, "[ct] warning: compile: cannot create the cache directory; running the graph without generated code\n");
        return false;
    }
    if (strchr(dir, '\'') || strchr(dir, '\n')) { /* the paths are quoted for the shell */
        fprintf(stderr, "[ct] warning: compile: the cache directory's name has a quote or a newline; running the graph "
                        "without generated code\n");
        return false;
    }
    ct_md5_ctx c;
    ct_md5_init(&c);
    ct_md5_update(&c, src, len);
    const char *id = cc_identity();
    ct_md5_update(&c, id, strlen(id));
    ct_md5_update(&c, cc_flags, strlen(cc_flags));
    const char *isa = ct_vm_isa();
    ct_md5_update(&c, isa, strlen(isa));
    uint8_t d[16];
    ct_md5_final(&c, d);
    char key[33];
    for (int i = 0; i < 16; i++)
        snprintf(key + 2 * i, 3, "%02x", d[i]);
    char sum[1100], tmp_src[1100], tmp_so[1100], tmp_sum[1100], log[1100];
    snprintf(so_out, cap, "%s/%s.so", dir, key);
    snprintf(sum, sizeof sum, "%s/%s.md5", dir, key);
    if (entry_valid(so_out, sum)) {
        *hit = true;
        return true;
    }
    const int pid = (int)getpid();
    snprintf(tmp_src, sizeof tmp_src, "%s/%s.%d.c", dir, key, pid);
    snprintf(tmp_so, sizeof tmp_so, "%s/%s.%d.so", dir, key, pid);
    snprintf(tmp_sum, sizeof tmp_sum, "%s/%s.%d.md5", dir, key, pid);
    snprintf(log, sizeof log, "%s/%s.%d.log", dir, key, pid);
    FILE *f = fopen(tmp_src, "w");
    bool ok = f && fwrite(src, 1, len, f) == len;
    if (f)
        ok = fclose(f) == 0 && ok;
    ok = ok && run_cc(tmp_src, tmp_so, log) == 0;
    char hex[33];
    ok = ok && file_md5(tmp_so, hex);
    if (ok) {
        f = fopen(tmp_sum, "w");
        ok = f && fprintf(f, "%s\n", hex) > 0;
        if (f)
            ok = fclose(f) == 0 && ok;
    }
    ok = ok && rename(tmp_so, so_out) == 0 && rename(tmp_sum, sum) == 0;
    if (!ok)
        fprintf(stderr, "[ct] warning: compile: %s could not build %s (see %s); running the graph without generated code\n",
                cc_path(), tmp_src, log);
    else {
        /* the source stays beside its object, for reading */
        char keep[1100];
        snprintf(keep, sizeof keep, "%s/%s.c", dir, key);
        if (rename(tmp_src, keep) != 0)
            remove(tmp_src);
        remove(log);
    }
    remove(tmp_so);
    remove(tmp_sum);
    return ok;
}

/* ------------------------------------------------------------ grouping */

void ct_codegen_free(ct_fused *f) {
    if (!f)
        return;
    for (int k = 0; k < f->ngroups; k++) {
        free(f->groups[k].in);
        free(f->groups[k].num);
        free(f->groups[k].out);
    }
    free(f->groups);
    for (int u = 0; f->handles && u < f->nunits; u++)
        if (f->handles[u])
            dlclose(f->handles[u]);
    free(f->handles);
    free(f);
}

/* Note [Parallel units]
 * The groups of a graph are cut into translation units of consecutive groups, one per
 * job (CT_COMPILE_JOBS, else the CPUs online, at most 16; never more units than groups),
 * each its own cache entry, built by its own compiler process at the same time as the
 * others and loaded with its own dlopen. Each unit repeats the prelude, which costs the
 * compiler 30-80 ms; a row group costs it about 90 ms. On the shared 2-core EPYC,
 * bench/compile, three alternating runs: the char GPT step's capture (nine groups)
 * took 607, 595 and 620 ms cold as one unit, 439, 398 and 464 ms as two. A group's
 * code does not depend on the unit it lands in, and the cache keys cover each unit's
 * source, so a graph's objects are found again as long as its groups and the job
 * count are the same. */
#define CT_COMPILE_MAX_JOBS 16

static int compile_jobs(void) {
    const char *e = getenv("CT_COMPILE_JOBS");
    long n = e && *e ? strtol(e, NULL, 10) : sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : n > CT_COMPILE_MAX_JOBS ? CT_COMPILE_MAX_JOBS : (int)n;
}

typedef struct unit_job {
    sbuf src;
    char so[1200];
    bool ok, hit;
} unit_job;

static void *unit_build(void *p) {
    unit_job *j = p;
    j->ok = !j->src.oom && build_object(j->src.p, j->src.len, j->so, sizeof j->so, &j->hit);
    return NULL;
}

/* Builds every unit, unit 0 on the calling thread and the others on threads of their
 * own (on the calling thread too when a thread cannot be started). */
static void build_units(unit_job *jobs, int n) {
    pthread_t *tid = calloc((size_t)n, sizeof *tid);
    bool *started = calloc((size_t)n, sizeof *started);
    (void)cc_identity(); /* read once, before the threads */
    for (int u = 1; u < n; u++)
        started[u] = tid && started && pthread_create(&tid[u], NULL, unit_build, &jobs[u]) == 0;
    unit_build(&jobs[0]);
    for (int u = 1; u < n; u++) {
        if (started && started[u])
            pthread_join(tid[u], NULL);
        else
            unit_build(&jobs[u]);
    }
    free(tid);
    free(started);
}

static bool push(int **arr, int *n, int v) {
    for (int i = 0; i < *n; i++)
        if ((*arr)[i] == v)
            return true;
    int *na = realloc(*arr, sizeof(int) * (size_t)(*n + 1));
    if (!na)
        return false;
    *arr = na;
    na[(*n)++] = v;
    return true;
}

/* The group's inputs (values from outside) and stores (values read outside it). */
static bool group_io(const ct_graph *g, group *gr, int k) {
    for (int i = gr->first; i <= gr->last; i++) {
        const ct_gnode *n = &g->nodes[i];
        if (n->dead || n->group != k)
            continue;
        for (int j = 0; j < n->nin; j++) {
            int v = n->in[j];
            if (v < 0) /* layer_norm without weight or bias */
                continue;
            const ct_gvalue *gv = &g->values[v];
            bool inside = gv->kind == CT_GV_NODE && gv->node >= gr->first && gv->node <= gr->last &&
                          g->nodes[gv->node].group == k;
            if (inside)
                continue;
            if (!(gv->ndim == 0 ? push(&gr->num, &gr->nnum, v) : push(&gr->in, &gr->nin, v)))
                return false;
        }
        /* stored: read by a node outside the group, the result, or an epilogue */
        int v = n->out[0], inner = 0;
        for (int j = gr->first; j <= gr->last; j++) {
            const ct_gnode *m = &g->nodes[j];
            if (m->dead || m->group != k)
                continue;
            for (int q = 0; q < m->nin; q++)
                inner += m->in[q] == v;
        }
        if (g->values[v].uses > inner && !push(&gr->out, &gr->nout, v))
            return false;
    }
    return true;
}

bool ct_codegen_graph(ct_graph *g) {
    vm_fn vm[VM_COUNT] = {(vm_fn)ct_vm_get(CT_VM_EXP), (vm_fn)ct_vm_get(CT_VM_TANH), NULL, NULL,
                          (vm_fn)ct_vm_get(CT_VM_ERF)};
    const ct_vm_red *vr = ct_vm_red_get();
    if (vr) {
        vm[VM_MAX] = (vm_fn)(void (*)(void))vr->max_f32; /* called through its own type */
        vm[VM_EXPSUM] = (vm_fn)(void (*)(void))vr->expsum_f32;
    }
    ct_fused *f = calloc(1, sizeof *f);
    if (!f)
        return false;
    memcpy(f->vm, vm, sizeof vm);
    /* runs of consecutive fusible live nodes of one shape, at least two long */
    int start = -1, count = 0;
    bool row = false; /* the run holds a softmax: a row group, at most CT_FUSE_MAX_ROW_NODES */
    int64_t shape[CT_MAX_DIMS];
    int ndim = 0;
    for (int i = 0; i <= g->nnodes; i++) {
        const ct_gnode *n = i < g->nnodes ? &g->nodes[i] : NULL;
        if (n && n->dead)
            continue;
        bool ok = n && fusible(g, n, vm);
        const bool row_op = ok && is_row_op(n);
        ok = ok && count < ((row || row_op) ? CT_FUSE_MAX_ROW_NODES : CT_FUSE_MAX_NODES);
        const ct_gvalue *o = ok ? &g->values[n->out[0]] : NULL;
        if (ok && count > 0 && !same_shape(o, shape, ndim))
            ok = false;
        if (ok) {
            if (count == 0) {
                start = i;
                ndim = o->ndim;
                memcpy(shape, o->shape, sizeof(int64_t) * (size_t)ndim);
            }
            row |= row_op;
            count++;
            continue;
        }
        /* one element is left to the kernels: their loops see it with stride 0 and take
         * the scalar libm path, not the vector routines the generated code calls */
        if (count >= 2 && numel_of(&g->values[g->nodes[start].out[0]]) > 1) {
            group *ng = realloc(f->groups, sizeof *ng * (size_t)(f->ngroups + 1));
            if (!ng)
                break;
            f->groups = ng;
            group *gr = &f->groups[f->ngroups];
            memset(gr, 0, sizeof *gr);
            gr->first = start;
            gr->last = i - 1;
            gr->nnodes = count;
            gr->ndim = ndim;
            memcpy(gr->shape, shape, sizeof(int64_t) * (size_t)ndim);
            gr->numel = numel_of(&g->values[g->nodes[start].out[0]]);
            gr->row = row ? shape[ndim - 1] : 0;
            for (int j = start; j < i; j++)
                if (!g->nodes[j].dead)
                    g->nodes[j].group = f->ngroups;
            f->ngroups++;
        }
        count = 0;
        row = false;
        /* this node may start the next run */
        if (n && fusible(g, n, vm)) {
            start = i;
            count = 1;
            row = is_row_op(n);
            o = &g->values[n->out[0]];
            ndim = o->ndim;
            memcpy(shape, o->shape, sizeof(int64_t) * (size_t)ndim);
        }
    }
    if (f->ngroups == 0) {
        free(f->groups);
        free(f);
        return false;
    }
    /* Note [Parallel units]: unit u holds groups [u * ngroups / nunits, (u + 1) * ...) */
    int nu = compile_jobs();
    nu = nu > f->ngroups ? f->ngroups : nu;
    unit_job *jobs = calloc((size_t)nu, sizeof *jobs);
    f->handles = calloc((size_t)nu, sizeof *f->handles);
    f->nunits = jobs && f->handles ? nu : 0;
    int *local = malloc(sizeof(int) * (size_t)g->nvalues);
    bool ok = local != NULL && f->nunits > 0;
    for (int v = 0; ok && v < g->nvalues; v++)
        local[v] = -1;
    for (int u = 0; ok && u < nu; u++) {
        emit(&jobs[u].src, "%s", kernel_prelude);
        for (int k = u * f->ngroups / nu; ok && k < (u + 1) * f->ngroups / nu; k++) {
            ok = group_io(g, &f->groups[k], k);
            if (ok)
                emit_group(&jobs[u].src, g, &f->groups[k], k, local);
        }
    }
    free(local);
    if (ok)
        build_units(jobs, nu);
    for (int u = 0; ok && u < nu; u++) {
        unit_job *j = &jobs[u];
        ok = j->ok;
        if (!ok)
            break;
        j->hit ? g->cache_hits++ : g->cache_misses++;
        if (ct_trace_log_enabled()) {
            /* Note [Compile events] in capture.c: TORCH_TRACE's name for generated source */
            char meta[200];
            const char *name = strrchr(j->so, '/') + 1;
            snprintf(meta, sizeof meta, "{\"filename\": \"%.*s.c\", \"groups\": %d}", (int)(strlen(name) - 3),
                     name, (u + 1) * f->ngroups / nu - u * f->ngroups / nu);
            ct_trace_log_write_env(__FILE__, __LINE__, "inductor_output_code", meta, g->env, j->src.p);
        }
        f->handles[u] = dlopen(j->so, RTLD_NOW | RTLD_LOCAL);
        if (!f->handles[u]) {
            fprintf(stderr, "[ct] warning: compile: cannot load %s: %s\n", j->so, dlerror());
            ok = false;
        }
        for (int k = u * f->ngroups / nu; ok && k < (u + 1) * f->ngroups / nu; k++) {
            char name[32];
            snprintf(name, sizeof name, "ct_fused_%d", k);
            void *sym = dlsym(f->handles[u], name);
            memcpy(&f->groups[k].fn, &sym, sizeof sym);
            ok = f->groups[k].fn != NULL;
        }
    }
    for (int u = 0; jobs && u < nu; u++)
        free(jobs[u].src.p);
    free(jobs);
    if (!ok) {
        for (int i = 0; i < g->nnodes; i++)
            g->nodes[i].group = -1;
        ct_codegen_free(f);
        return false;
    }
    g->fused = f;
    g->nfused_groups = f->ngroups;
    g->nfused_nodes = 0;
    for (int k = 0; k < f->ngroups; k++)
        g->nfused_nodes += f->groups[k].nnodes;
    return true;
}

/* ------------------------------------------------------------ running */

static bool plain_f32(const ct_tensor *t, int64_t numel) {
    return t && t->dtype == CT_F32 && t->device.type == CT_DEVICE_CPU && t->numel == numel &&
           ct_strides_contiguous(t->shape, t->strides, t->ndim);
}

/* Note [Reusing dying inputs]
 * A group's result may be written into the buffer of one of its inputs when that input
 * dies in the group: a value a node of the graph made (not an argument or a constant),
 * whose last reader is a node of this group, of the group's shape (not a broadcast
 * input), contiguous from its storage's start, without autograd state, and held by
 * nothing but the replay (the tensor's and its storage's only reference). The
 * generated loops make that safe: each tile (or row) reads its inputs' elements before
 * it stores the results of the same elements, and no tile reads another's. A replay
 * then allocates one buffer less per such group. */
static bool dies_here(const ct_graph *g, const group *gr, int k, int v, const ct_tensor *t) {
    const ct_gvalue *gv = &g->values[v];
    if (!t || gv->kind != CT_GV_NODE || gv->last_use < gr->first || gv->last_use > gr->last ||
        g->nodes[gv->last_use].group != k || !same_shape(gv, gr->shape, gr->ndim))
        return false;
    return t->ndim == gr->ndim && memcmp(t->shape, gr->shape, sizeof(int64_t) * (size_t)gr->ndim) == 0 &&
           t->offset == 0 && !t->is_view && !t->requires_grad && !t->grad_fn && !t->grad && !t->base &&
           atomic_load(&t->refcount) == 1 && t->storage && atomic_load(&t->storage->refcount) == 1 &&
           !t->storage->external;
}

ct_status ct_codegen_run_group(ct_graph *g, int k, ct_tensor **rt) {
    const ct_fused *f = g->fused;
    const group *gr = &f->groups[k];
    enum { MAXIO = 128 };
    const float *in[MAXIO];
    float num[MAXIO], *out[MAXIO];
    bool plain = gr->nin <= MAXIO && gr->nnum <= MAXIO && gr->nout <= MAXIO;
    for (int j = 0; plain && j < gr->nin; j++) {
        plain = plain_f32(rt[gr->in[j]], numel_of(&g->values[gr->in[j]]));
        if (plain)
            in[j] = (const float *)ct_tensor_ptr(rt[gr->in[j]]);
    }
    for (int j = 0; plain && j < gr->nnum; j++) {
        const ct_tensor *t = rt[gr->num[j]];
        plain = t && t->numel == 1 && t->device.type == CT_DEVICE_CPU;
        if (!plain)
            break;
        const void *p = ct_tensor_ptr(t);
        if (t->dtype == CT_F32)
            num[j] = *(const float *)p;
        else if (t->dtype == CT_F64)
            num[j] = (float)*(const double *)p;
        else if (t->dtype == CT_I64)
            num[j] = (float)*(const int64_t *)p;
        else
            plain = false;
    }
    if (!plain) {
        /* not the tensors the capture saw: each node runs its kernel */
        for (int i = gr->first; i <= gr->last; i++) {
            if (g->nodes[i].dead || g->nodes[i].group != k)
                continue;
            ct_status st = ct_graph_run_node(g, i, rt);
            if (st != CT_OK)
                return st;
        }
        return CT_OK;
    }
    bool taken[MAXIO] = {false};
    for (int j = 0; j < gr->nout; j++) {
        /* Note [Reusing dying inputs] */
        int reuse = -1;
        for (int q = 0; q < gr->nin && reuse < 0; q++)
            if (!taken[q] && dies_here(g, gr, k, gr->in[q], rt[gr->in[q]]))
                reuse = q;
        if (reuse >= 0) {
            taken[reuse] = true;
            ct_tensor *t = rt[gr->in[reuse]];
            rt[gr->out[j]] = ct_retain(t);
            out[j] = (float *)ct_tensor_ptr(t);
            continue;
        }
        ct_tensor *t = ct_empty(gr->shape, gr->ndim, CT_F32, CT_CPU);
        if (!t) {
            for (int q = 0; q < j; q++) {
                ct_release(rt[gr->out[q]]);
                rt[gr->out[q]] = NULL;
            }
            return ct_last_status();
        }
        rt[gr->out[j]] = ct_retain(t);
        out[j] = (float *)ct_tensor_ptr(t);
    }
    gr->fn(out, in, num, gr->numel, f->vm);
    return CT_OK;
}
