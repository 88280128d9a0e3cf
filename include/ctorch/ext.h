/* ctorch's extension header: what code built on the op API may use beyond <ctorch.h>.
 *
 * The libraries over the op layer (ctorch's own nn, optim, data, io and the ctorch
 * tool) and code outside ctorch that adds layers, loaders or override kernels
 * (ct_op_override) need a few things a plain user does not: reporting an error the way
 * ctorch's own functions do, allocating with an error on failure, handing a reference
 * to the innermost scope, sizing a scratch shape array, refusing what an op refuses.
 * This header holds exactly those, and nothing that exposes ctorch's internal layouts:
 * a tensor stays an opaque handle read through core.h's accessors. docs/design.md
 * lists which folders may include what. */
#ifndef CTORCH_EXT_H
#define CTORCH_EXT_H

#include <stddef.h>

#include "core.h"

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define CT_PRINTF(f, a) __attribute__((format(printf, f, a)))
#define CT_UNLIKELY(x) __builtin_expect(!!(x), 0)
#else
#define CT_PRINTF(f, a)
#define CT_UNLIKELY(x) (x)
#endif

/* ------------------------------------------------------------ limits */

/* Note [Dimension limit in the extension header]
 * The most dimensions a tensor may have (ct_empty and every view refuse more), for
 * scratch shape arrays: int64_t shape[CT_MAX_DIMS]. <ctorch.h> never shows it (users
 * pass (shape, ndim) pairs), so raising it changes no user signature; it does change
 * this header, and code built on it is rebuilt with the library. The core defines the
 * same value next to the tensor layout (Note [Dimension limit] in tensor_impl.h, which
 * includes this header first), so two different values draw a "redefined" warning in
 * every core file, an error with CT_WERROR. */
#define CT_MAX_DIMS 8

/* ------------------------------------------------------------ errors */

/* Sets this thread's error to "op: message" (printf-style) and returns status, so that
 * a function reports and returns in one statement: return ct_error(CT_ERROR_VALUE,
 * "my_layer", "expected %d features, got %lld", n, (long long)m). */
CT_API ct_status ct_error(ct_status status, const char *op, const char *fmt, ...) CT_PRINTF(3, 4);
/* Records that op got a NULL argument, keeping an earlier pending error (the first
 * failure of a chain of calls stays the one reported); returns its status. */
CT_API ct_status ct_error_null(const char *op);

/* For functions returning tensors or statuses: a NULL argument propagates the first
 * error. */
#define CT_CHECK_ARG(op, t)                 \
    do {                                    \
        if (CT_UNLIKELY((t) == NULL)) {     \
            ct_error_null(op);              \
            return NULL;                    \
        }                                   \
    } while (0)
#define CT_CHECK_ARG_STATUS(op, t)          \
    do {                                    \
        if (CT_UNLIKELY((t) == NULL))       \
            return ct_error_null(op);       \
    } while (0)

/* malloc, calloc and realloc that set CT_ERROR_OUT_OF_MEMORY naming op when they
 * fail (ct_xrealloc then leaves p as it was). Free with free(). */
CT_API void *ct_xmalloc(const char *op, size_t n);
CT_API void *ct_xcalloc(const char *op, size_t n, size_t size);
CT_API void *ct_xrealloc(const char *op, void *p, size_t n);

/* ------------------------------------------------------------ ownership */

/* A new reference to t registered with the innermost scope (what an in-place function
 * returns). */
CT_API ct_tensor *ct_tensor_ref(const ct_tensor *t);
/* Hands a reference the caller owns to the innermost scope (no-op without one). */
CT_API ct_tensor *ct_scope_adopt(ct_tensor *t);

/* ------------------------------------------------------------ argument checks */

/* The argument rules of the scaled_dot_product_attention op (shapes, dtypes, mask,
 * devices), with its messages: CT_OK, or the error the op would report. For code
 * that computes attention another way (nn's path with dropout) and must refuse what
 * the op refuses. NULL query, key or value is an error; attn_mask may be NULL. */
CT_API ct_status ct_scaled_dot_product_attention_check(const ct_tensor *query, const ct_tensor *key,
                                                       const ct_tensor *value, const ct_tensor *attn_mask,
                                                       bool is_causal);

/* ------------------------------------------------------------ threads */

/* One range of ct_parallel_range: indices [begin, end). */
typedef void (*ct_parallel_range_fn)(void *ctx, int64_t begin, int64_t end);
/* A loop over [0, n) on ctorch's CPU threads, for a kernel whose iterations are
 * independent (where the range is cut must not change a result): when work > min_work
 * and ct_get_num_threads() > 1, fn runs over a few ranges per thread, which the
 * threads claim as they come free, so a thread the system has paused leaves its share
 * to the others (Note [Threads on a busy machine] in src/core/parallel.c); otherwise
 * fn(ctx, 0, n) runs on the calling thread. Inside fn ct_get_num_threads() is 1, so
 * what fn calls runs on its thread. Returns CT_OK when every index has run; n < 0 is
 * CT_ERROR_VALUE and a NULL fn CT_ERROR_NULL_ARGUMENT, and nothing runs. */
CT_API ct_status ct_parallel_range(int64_t n, int64_t work, int64_t min_work, ct_parallel_range_fn fn, void *ctx);

/* ------------------------------------------------------------ prepacked products */

/* A right-hand matrix prepared once for many products a @ w with the same shapes: a
 * recurrence multiplies its weights by a few rows at every step (Note [Prepacked
 * recurrent weights] in src/cpu/packed_mm.c). w is (k, n), any strides; rows is the
 * row count of the a's to come. On a CPU with AVX-512 in a build with oneDNN, the
 * first product copies w into the blocked layout oneDNN's kernels read and the
 * products read that copy, so w must not change while p lives; elsewhere the products
 * are plain ct_mm_out calls on w. CT_PACKED_MM=0 in the environment turns the packing
 * off, CT_PACKED_MM=1 packs on any CPU (slower without AVX-512: for tests). NULL with
 * an error set when w is NULL or not a matrix, or memory runs out. p holds a reference
 * to w. One product at a time per p. */
typedef struct ct_packed_mm ct_packed_mm;
CT_API ct_packed_mm *ct_packed_mm_new(ct_tensor *w, int64_t rows);
/* out = a @ w into out (rows, n), as ct_mm_out. The packed kernel takes float32 CPU
 * tensors with unit column strides and the row strides of the first packed call; any
 * other call, and one that autograd must record, is ct_mm_out(a, w, out). */
CT_API ct_tensor *ct_packed_mm_out(ct_packed_mm *p, ct_tensor *a, ct_tensor *out);
/* Whether p's products run the packed kernel (false before the first product). */
CT_API bool ct_packed_mm_is_packed(const ct_packed_mm *p);
CT_API void ct_packed_mm_free(ct_packed_mm *p);

/* One layer and direction of an LSTM's forward for inference, through oneDNN's LSTM
 * primitive as PyTorch's CPU inference runs it (Note [LSTM inference on oneDNN] in
 * src/cpu/rnn_onednn.c). x holds the layer's T * B input rows, time-major (tdim 0:
 * row t * B + b) or batch-major (tdim 1: row b * T + t), with unit column stride;
 * wih (4H, I), b (4H: b_ih + b_hh) or NULL, whh (4H, H), h0 and c0 (B, H), PyTorch's
 * gate order. Sets *hall to every step's h (T, B, H) and *cn to the last c (B, H),
 * registered with the innermost scope. CT_ERROR_NOT_IMPLEMENTED (an error set, nothing
 * computed) where it does not apply: a build without oneDNN, a CPU without AVX-512,
 * more than one thread (ct_get_num_threads), anything but float32 CPU tensors of those
 * shapes, or a tensor autograd would have to record; the caller then takes another
 * path. CT_ONEDNN_RNN=0 in the environment turns it off, CT_ONEDNN_RNN=1 runs it on
 * any CPU at any thread count. */
CT_API ct_status ct_lstm_layer_onednn(ct_tensor *x, int tdim, int64_t T, int64_t B, ct_tensor *wih, ct_tensor *b,
                                      ct_tensor *whh, ct_tensor *h0, ct_tensor *c0, bool reverse, ct_tensor **hall,
                                      ct_tensor **cn);

/* ------------------------------------------------------------ vector ISA */

/* ctorch's CPU library is built for the baseline x86-64 (SSE2); its loops are compiled
 * again for AVX2 and AVX-512 and run the widest this CPU has (Note [Loops per ISA] in
 * src/cpu/cpu_isa.h). A kernel over the op API can do the same: define its loop between
 * CT_TARGET_AVX2_BEGIN (or CT_TARGET_AVX512_BEGIN) and CT_TARGET_END, where the compiler
 * may use that ISA, and call the variant ct_cpu_vector_level() names. CT_ISA_VARIANTS
 * is defined where such regions compile (x86-64 with GCC or clang, CT_NO_ISA_LOOPS not
 * defined); elsewhere only the baseline exists. */
enum { CT_ISA_BASE = 0, CT_ISA_AVX2 = 1, CT_ISA_AVX512 = 2 };

/* The level the CPU kernels use: CT_ISA_AVX512 (F, DQ, BW and VL), CT_ISA_AVX2 (with FMA
 * and F16C) or CT_ISA_BASE; CT_CPU_ISA=scalar|avx2|avx512 in the environment caps it. */
CT_API int ct_cpu_vector_level(void);

#if defined(__x86_64__) && defined(__GNUC__) && !defined(CT_NO_ISA_LOOPS)
#define CT_ISA_VARIANTS 1
#endif
#if defined(__clang__)
#define CT_TARGET_AVX2_BEGIN _Pragma("clang attribute push(__attribute__((target(\"avx2,fma\"))), apply_to = function)")
#define CT_TARGET_AVX512_BEGIN \
    _Pragma("clang attribute push(__attribute__((target(\"avx512f,avx512dq,avx512bw,avx512vl\"))), apply_to = function)")
#define CT_TARGET_END _Pragma("clang attribute pop")
#else
#define CT_TARGET_AVX2_BEGIN _Pragma("GCC push_options") _Pragma("GCC target(\"avx2,fma\")")
#define CT_TARGET_AVX512_BEGIN _Pragma("GCC push_options") _Pragma("GCC target(\"avx512f,avx512dq,avx512bw,avx512vl\")")
#define CT_TARGET_END _Pragma("GCC pop_options")
#endif

/* ------------------------------------------------------------ messages */

/* Writes a shape as PyTorch prints it, "[2, 3]", into buf; returns buf. */
CT_API const char *ct_shape_str(const int64_t *shape, int ndim, char *buf, size_t cap);

#ifdef __cplusplus
}
#endif
#endif /* CTORCH_EXT_H */
