/* ctorch core: dtypes, devices, errors, scopes, tensors, views, creation.
 *
 * Everything here is part of the stable C ABI: handles are opaque, integers are sized,
 * and no internal struct is visible. Include <ctorch.h> rather than this file.
 */
#ifndef CTORCH_CORE_H
#define CTORCH_CORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32)
#define CT_API __declspec(dllexport)
#else
#define CT_API __attribute__((visibility("default")))
#endif

/* ---------------------------------------------------------------- version */

#define CT_VERSION_MAJOR 0
#define CT_VERSION_MINOR 1
#define CT_VERSION_PATCH 0
#define CT_VERSION_STRING "0.1.0"

/* The library's version string ("0.1.0"); compare with CT_VERSION_STRING to detect a
 * header/library mismatch. */
CT_API const char *ct_version(void);
/* One line per build setting (compiler, BLAS, OpenMP, CUDA, ...). */
CT_API const char *ct_build_info(void);
/* One line per device backend: what it has ("cpu: 2 threads", "cuda: 1 device (runtime
 * 13.0, ...)") or, for one that is not loaded, why ("cuda: not loaded: libcudart.so.13:
 * cannot open shared object file"). Asking may initialise a device's driver. */
CT_API const char *ct_backend_info(void);

/* ---------------------------------------------------------------- dtypes */

typedef enum ct_dtype {
    CT_DTYPE_UNDEFINED = -1, /* "infer it", where a function says so */
    CT_DTYPE_BOOL = 0,
    CT_DTYPE_UINT8,
    CT_DTYPE_INT8,
    CT_DTYPE_INT16,
    CT_DTYPE_INT32,
    CT_DTYPE_INT64,
    CT_DTYPE_UINT16,
    CT_DTYPE_UINT32,
    CT_DTYPE_UINT64,
    CT_DTYPE_FLOAT16,
    CT_DTYPE_BFLOAT16,
    CT_DTYPE_FLOAT32,
    CT_DTYPE_FLOAT64,
    CT_DTYPE_COUNT
} ct_dtype;

/* PyTorch's short spellings. */
#define CT_BOOL CT_DTYPE_BOOL
#define CT_U8 CT_DTYPE_UINT8
#define CT_I8 CT_DTYPE_INT8
#define CT_I16 CT_DTYPE_INT16
#define CT_I32 CT_DTYPE_INT32
#define CT_I64 CT_DTYPE_INT64
#define CT_U16 CT_DTYPE_UINT16
#define CT_U32 CT_DTYPE_UINT32
#define CT_U64 CT_DTYPE_UINT64
#define CT_F16 CT_DTYPE_FLOAT16
#define CT_BF16 CT_DTYPE_BFLOAT16
#define CT_F32 CT_DTYPE_FLOAT32
#define CT_F64 CT_DTYPE_FLOAT64

/* "float32", "bfloat16", ... (PyTorch's names without "torch."); "undefined" otherwise. */
CT_API const char *ct_dtype_name(ct_dtype dtype);
/* Parses a name as ct_dtype_name prints it, plus the aliases "float", "double",
 * "half", "long", "int", "short"; returns CT_DTYPE_UNDEFINED for anything else. */
CT_API ct_dtype ct_dtype_from_name(const char *name);
CT_API size_t ct_dtype_size(ct_dtype dtype);
CT_API bool ct_dtype_is_floating(ct_dtype dtype);
/* Integer dtypes; bool counts only when include_bool is set (as torch's is_integral). */
CT_API bool ct_dtype_is_integral(ct_dtype dtype, bool include_bool);
CT_API bool ct_dtype_is_signed(ct_dtype dtype);
/* The dtype floating-point factories use when none is given (float32 at start). */
CT_API ct_dtype ct_get_default_dtype(void);
CT_API int ct_set_default_dtype(ct_dtype dtype); /* float16/bfloat16/float32/float64 only */

/* Scalar conversions, rounding to nearest even (as c10::Half / c10::BFloat16). */
CT_API uint16_t ct_float_to_half(float f);
CT_API float ct_half_to_float(uint16_t h);
CT_API uint16_t ct_float_to_bfloat16(float f);
CT_API float ct_bfloat16_to_float(uint16_t b);

/* ---------------------------------------------------------------- devices */

typedef enum ct_device_type {
    CT_DEVICE_CPU = 0,
    CT_DEVICE_CUDA = 1,
    CT_DEVICE_META = 2, /* shapes and dtypes only, no data */
} ct_device_type;

typedef struct ct_device {
    int32_t type;  /* ct_device_type */
    int32_t index; /* 0 for CPU and META */
} ct_device;

static inline ct_device ct_device_make(ct_device_type type, int32_t index) {
    ct_device d;
    d.type = (int32_t)type;
    d.index = index;
    return d;
}
#define CT_CPU ct_device_make(CT_DEVICE_CPU, 0)
#define CT_META ct_device_make(CT_DEVICE_META, 0)
#define CT_CUDA(i) ct_device_make(CT_DEVICE_CUDA, (i))

static inline bool ct_device_equal(ct_device a, ct_device b) {
    return a.type == b.type && a.index == b.index;
}
/* "cpu", "meta", "cuda:0"; written into buf (always NUL-terminated). */
CT_API const char *ct_device_str(ct_device device, char *buf, size_t cap);

/* ---------------------------------------------------------------- errors */

typedef enum ct_status {
    CT_OK = 0,
    CT_ERROR_VALUE,           /* bad argument value: shape, size, option (ValueError/RuntimeError) */
    CT_ERROR_INDEX,           /* dimension or index out of range (IndexError) */
    CT_ERROR_TYPE,            /* unsupported dtype or dtype mismatch (TypeError) */
    CT_ERROR_DEVICE,          /* device mismatch or unavailable device */
    CT_ERROR_OUT_OF_MEMORY,   /* an allocation failed */
    CT_ERROR_IO,              /* a file could not be read or written */
    CT_ERROR_FORMAT,          /* a file's content is malformed or unsafe */
    CT_ERROR_NOT_IMPLEMENTED, /* a valid request ctorch does not support yet */
    CT_ERROR_NULL_ARGUMENT,   /* a required argument was NULL */
    CT_ERROR_RUNTIME,         /* anything else a user can cause (autograd misuse, ...) */
} ct_status;

/* torch.device(str): "cpu", "cuda", "cuda:1", "meta" into *out; anything else is an
 * error. Parsing does not check that the device exists. */
CT_API ct_status ct_device_parse(const char *s, ct_device *out);

/* The device nn layer constructors create their parameters and buffers on (PyTorch's
 * torch.set_default_device / `with torch.device(d):`); CPU at start. Per thread, as
 * PyTorch's. Factories given a device keep it: in C every factory names its device,
 * so only the layer constructors (ct_nn_*) read this one. Setting it checks the device
 * type and index, not whether the device is there: a layer made on an absent device
 * fails with the backend's error. */
CT_API ct_device ct_get_default_device(void);
CT_API ct_status ct_set_default_device(ct_device device);

/* The message of the most recent error on this thread, "op: what went wrong", or ""
 * when none is pending. Functions that fail return NULL or a non-zero ct_status and
 * set it. A function given a NULL tensor returns NULL and keeps the pending error, so a
 * chain of calls reports its first failure. */
CT_API const char *ct_last_error(void);
CT_API ct_status ct_last_status(void);
CT_API void ct_clear_error(void);
CT_API const char *ct_status_name(ct_status status);

/* ---------------------------------------------------------------- scalars */

typedef enum ct_scalar_type {
    CT_SCALAR_BOOL = 0,
    CT_SCALAR_INT = 1,
    CT_SCALAR_FLOAT = 2,
} ct_scalar_type;

/* A Python-number-like value for scalar arguments (fill values, bounds, alpha, ...). */
typedef struct ct_scalar {
    int32_t type; /* ct_scalar_type */
    int32_t reserved;
    union {
        double f;
        int64_t i;
        uint8_t b;
    } v;
} ct_scalar;

static inline ct_scalar ct_scalar_float(double x) {
    ct_scalar s;
    s.type = CT_SCALAR_FLOAT;
    s.reserved = 0;
    s.v.f = x;
    return s;
}
static inline ct_scalar ct_scalar_int(int64_t x) {
    ct_scalar s;
    s.type = CT_SCALAR_INT;
    s.reserved = 0;
    s.v.i = x;
    return s;
}
static inline ct_scalar ct_scalar_bool(bool x) {
    ct_scalar s;
    s.type = CT_SCALAR_BOOL;
    s.reserved = 0;
    s.v.i = 0;
    s.v.b = (uint8_t)(x ? 1 : 0);
    return s;
}
static inline double ct_scalar_to_double(ct_scalar s) {
    return s.type == CT_SCALAR_FLOAT ? s.v.f : s.type == CT_SCALAR_INT ? (double)s.v.i : (double)s.v.b;
}

/* ---------------------------------------------------------------- ownership */

typedef struct ct_tensor ct_tensor;

/* Every function returning a ct_tensor* returns a new reference owned by the innermost
 * open scope; with no scope open, the caller owns it and calls ct_release.
 *
 *   ct_scope_begin();
 *   ct_tensor *y = ct_add(ct_mul(a, b), c);   // temporaries die at scope end
 *   ct_keep(y);                                // y survives into the enclosing scope
 *   ct_scope_end();
 */
/* ct_scope_begin never fails to open a scope: when there is no memory to record it (only
 * possible below the first scope), it returns CT_ERROR_OUT_OF_MEMORY and the scope's
 * tensors are released when the enclosing scope ends instead. Pair it with
 * ct_scope_end either way. */
CT_API ct_status ct_scope_begin(void);
CT_API void ct_scope_end(void);
/* Number of scopes open on this thread. */
CT_API int ct_scope_depth(void);
/* Hands t (owned by the innermost scope) to the enclosing scope, or to the caller when
 * it is the outermost one. Returns t. */
CT_API ct_tensor *ct_keep(ct_tensor *t);
/* A reference that no scope will release: for parameters, state, globals. */
CT_API ct_tensor *ct_retain(ct_tensor *t);
CT_API void ct_release(ct_tensor *t);

/* The ownership debug mode (docs/debugging.md), also set by CT_DEBUG=refs and on by
 * default in sanitizer mode: released tensors are poisoned and never recycled, a use
 * of one makes the op fail with an error naming where it was released, a second
 * release is reported with both sites, and at exit the tensors still alive are listed
 * with the op that made each. Turn it on before making the tensors it should watch. */
CT_API ct_status ct_debug_set_refs(bool on);
CT_API bool ct_debug_refs_enabled(void);
/* Lists the tensors made while the mode was on and still alive, with the op that made
 * each, on f (stderr when NULL); returns how many there are. */
CT_API int64_t ct_debug_report_live(FILE *f);

/* ---------------------------------------------------------------- properties */

CT_API int ct_tensor_dim(const ct_tensor *t);
/* Sizes and strides (in elements) accept negative dims, Python-style; -1 on error. */
CT_API int64_t ct_tensor_size(const ct_tensor *t, int dim);
CT_API int64_t ct_tensor_stride(const ct_tensor *t, int dim);
/* Pointers into t's own arrays, valid while t lives. */
CT_API const int64_t *ct_tensor_shape(const ct_tensor *t);
CT_API const int64_t *ct_tensor_strides(const ct_tensor *t);
CT_API int64_t ct_tensor_numel(const ct_tensor *t);
CT_API ct_dtype ct_tensor_dtype(const ct_tensor *t);
CT_API ct_device ct_tensor_device(const ct_tensor *t);
CT_API size_t ct_tensor_element_size(const ct_tensor *t);
/* Offset of the first element in the storage, in elements. */
CT_API int64_t ct_tensor_storage_offset(const ct_tensor *t);
CT_API size_t ct_tensor_storage_nbytes(const ct_tensor *t);
/* Address of the first element: NULL on META and for an empty CUDA storage; an empty
 * CPU tensor has a valid address that holds no element (Note [Empty storage]). */
CT_API void *ct_tensor_data(const ct_tensor *t);
CT_API bool ct_tensor_is_contiguous(const ct_tensor *t);
/* True when a and b view the same storage. */
CT_API bool ct_tensor_shares_storage(const ct_tensor *a, const ct_tensor *b);
/* Bumped by every in-place write; shared by all views of a storage. */
CT_API int64_t ct_tensor_version(const ct_tensor *t);
CT_API void ct_tensor_bump_version(ct_tensor *t);
CT_API bool ct_tensor_requires_grad(const ct_tensor *t);
/* requires_grad_: only for floating-point tensors. Returns t (no new reference). */
CT_API ct_tensor *ct_tensor_set_requires_grad(ct_tensor *t, bool requires_grad);

/* ---------------------------------------------------------------- scalars out */

/* The value of a one-element tensor, converted. */
CT_API ct_status ct_item_double(const ct_tensor *t, double *out);
CT_API ct_status ct_item_int64(const ct_tensor *t, int64_t *out);
/* Element at a full index (negative indices allowed), converted to/from double. */
CT_API ct_status ct_tensor_get(const ct_tensor *t, const int64_t *index, double *out);
CT_API ct_status ct_tensor_set(ct_tensor *t, const int64_t *index, double value);

/* ---------------------------------------------------------------- creation */

/* The factories, fills, random ops and ct_to_device below are ops of the table: they go
 * through the dispatcher with the device they create on, so the op log, overrides and
 * captures see them (docs/factories.md). ct_from_data and ct_from_blob do not. */

/* Shape literal helper: ct_zeros(CT_SHAPE(2, 3), CT_F32, CT_CPU). For a 0-d tensor
 * pass (NULL, 0). */
#define CT_SHAPE(...) \
    ((const int64_t[]){__VA_ARGS__}), ((int)(sizeof((const int64_t[]){__VA_ARGS__}) / sizeof(int64_t)))

/* Index/dims literal helper (no count): ct_tensor_get(t, CT_INDEX(1, 2), &v). */
#define CT_INDEX(...) ((const int64_t[]){__VA_ARGS__})

CT_API ct_tensor *ct_empty(const int64_t *shape, int ndim, ct_dtype dtype, ct_device device);
CT_API ct_tensor *ct_empty_strided(const int64_t *shape, const int64_t *strides, int ndim, ct_dtype dtype,
                                   ct_device device);
CT_API ct_tensor *ct_zeros(const int64_t *shape, int ndim, ct_dtype dtype, ct_device device);
CT_API ct_tensor *ct_ones(const int64_t *shape, int ndim, ct_dtype dtype, ct_device device);
/* dtype CT_DTYPE_UNDEFINED infers it from the value, as torch.full: bool, int64 or the
 * default float dtype. */
CT_API ct_tensor *ct_full(const int64_t *shape, int ndim, ct_scalar value, ct_dtype dtype, ct_device device);
/* [start, end) by step; dtype CT_DTYPE_UNDEFINED: int64 if all three are integers,
 * else the default float dtype. */
CT_API ct_tensor *ct_arange(ct_scalar start, ct_scalar end, ct_scalar step, ct_dtype dtype, ct_device device);
CT_API ct_tensor *ct_linspace(double start, double end, int64_t steps, ct_dtype dtype, ct_device device);
CT_API ct_tensor *ct_logspace(double start, double end, int64_t steps, double base, ct_dtype dtype,
                              ct_device device);
/* m < 0 means m = n. */
CT_API ct_tensor *ct_eye(int64_t n, int64_t m, ct_dtype dtype, ct_device device);
/* A contiguous CPU tensor holding a copy of data (numel * element size bytes). */
CT_API ct_tensor *ct_from_data(const void *data, const int64_t *shape, int ndim, ct_dtype dtype);
/* A CPU tensor over caller memory, no copy. strides may be NULL (contiguous). When the
 * last reference goes, deleter(ctx, data) is called if given; when the call fails
 * (NULL), it never is: data stays the caller's. */
CT_API ct_tensor *ct_from_blob(void *data, const int64_t *shape, const int64_t *strides, int ndim, ct_dtype dtype,
                               void (*deleter)(void *ctx, void *data), void *ctx);
/* A 0-d tensor. dtype CT_DTYPE_UNDEFINED infers it as ct_full does. */
CT_API ct_tensor *ct_scalar_tensor(ct_scalar value, ct_dtype dtype, ct_device device);

/* *_like: same shape, dtype and device as t (dtype CT_DTYPE_UNDEFINED keeps t's). */
CT_API ct_tensor *ct_empty_like(const ct_tensor *t, ct_dtype dtype);
CT_API ct_tensor *ct_zeros_like(const ct_tensor *t, ct_dtype dtype);
CT_API ct_tensor *ct_ones_like(const ct_tensor *t, ct_dtype dtype);
CT_API ct_tensor *ct_full_like(const ct_tensor *t, ct_scalar value, ct_dtype dtype);
CT_API ct_tensor *ct_rand_like(const ct_tensor *t, ct_dtype dtype);
CT_API ct_tensor *ct_randn_like(const ct_tensor *t, ct_dtype dtype);

/* In-place fill; returns a new reference to t. */
CT_API ct_tensor *ct_fill_(ct_tensor *t, ct_scalar value);
CT_API ct_tensor *ct_zero_(ct_tensor *t);

/* ---------------------------------------------------------------- random */

/* Counter-based Philox4x32-10 streams: a seed and an offset fully determine the
 * numbers, whatever the thread count. ct_manual_seed resets the default generator. */
CT_API void ct_manual_seed(uint64_t seed);
CT_API uint64_t ct_initial_seed(void);

CT_API ct_tensor *ct_rand(const int64_t *shape, int ndim, ct_dtype dtype, ct_device device);
CT_API ct_tensor *ct_randn(const int64_t *shape, int ndim, ct_dtype dtype, ct_device device);
/* Integers in [low, high); dtype CT_DTYPE_UNDEFINED means int64. */
CT_API ct_tensor *ct_randint(int64_t low, int64_t high, const int64_t *shape, int ndim, ct_dtype dtype,
                             ct_device device);
/* A random permutation of 0..n-1; dtype CT_DTYPE_UNDEFINED means int64. */
CT_API ct_tensor *ct_randperm(int64_t n, ct_dtype dtype, ct_device device);
/* In place; each returns a new reference to t. */
CT_API ct_tensor *ct_uniform_(ct_tensor *t, double from, double to);
CT_API ct_tensor *ct_normal_(ct_tensor *t, double mean, double std);
CT_API ct_tensor *ct_bernoulli_(ct_tensor *t, double p);
/* Draws 0/1 with the probabilities in p (same shape and dtype as p). */
CT_API ct_tensor *ct_bernoulli(const ct_tensor *p);
/* torch.multinomial: num_samples category indices (int64) per row of probs (1-D (n)
 * or 2-D (rows, n), floating, non-negative, finite, each row with a positive sum; not
 * necessarily normalized), with or without replacement, from the default generator.
 * Result (num_samples) or (rows, num_samples), on probs' device; no gradient. */
CT_API ct_tensor *ct_multinomial(const ct_tensor *probs, int64_t num_samples, bool replacement);
/* Block `counter` of the Philox4x32-10 stream keyed by seed: four uniformly
 * distributed 32-bit words, the same on every device, thread count and run. The random
 * ops above take their numbers from these blocks (docs/random.md says which word goes
 * to which element); code that wants draws of its own that are reproducible and
 * independent of the default generator's offset (a data loader's shuffle, a batch's
 * windows) calls it with counters it picks itself. */
CT_API void ct_philox4x32(uint64_t seed, uint64_t counter, uint32_t out[4]);

/* ---------------------------------------------------------------- views */

/* Views share t's storage and version counter. Dims may be negative; a -1 in a
 * view/reshape shape is inferred. */
CT_API ct_tensor *ct_view(const ct_tensor *t, const int64_t *shape, int ndim);
/* A view when the strides allow it, a copy otherwise (as torch.reshape). */
CT_API ct_tensor *ct_reshape(const ct_tensor *t, const int64_t *shape, int ndim);
CT_API ct_tensor *ct_view_as(const ct_tensor *t, const ct_tensor *other);
CT_API ct_tensor *ct_reshape_as(const ct_tensor *t, const ct_tensor *other);
CT_API ct_tensor *ct_permute(const ct_tensor *t, const int64_t *dims, int ndim);
CT_API ct_tensor *ct_transpose(const ct_tensor *t, int dim0, int dim1);
/* 2-D transpose; 0-d and 1-d tensors come back as they are. */
CT_API ct_tensor *ct_t(const ct_tensor *t);
CT_API ct_tensor *ct_movedim(const ct_tensor *t, int source, int destination);
/* -1 keeps a size; new leading dims may be added. */
CT_API ct_tensor *ct_expand(const ct_tensor *t, const int64_t *shape, int ndim);
CT_API ct_tensor *ct_expand_as(const ct_tensor *t, const ct_tensor *other);
/* Removes all size-1 dims. */
CT_API ct_tensor *ct_squeeze(const ct_tensor *t);
/* Removes dim if its size is 1; otherwise returns a view unchanged. */
CT_API ct_tensor *ct_squeeze_dim(const ct_tensor *t, int dim);
CT_API ct_tensor *ct_unsqueeze(const ct_tensor *t, int dim);
CT_API ct_tensor *ct_flatten(const ct_tensor *t, int start_dim, int end_dim);
CT_API ct_tensor *ct_unflatten(const ct_tensor *t, int dim, const int64_t *sizes, int nsizes);
CT_API ct_tensor *ct_narrow(const ct_tensor *t, int dim, int64_t start, int64_t length);
/* t[start:end:step] along dim, Python clamping rules; step > 0. Use INT64_MAX for
 * "to the end". */
CT_API ct_tensor *ct_slice(const ct_tensor *t, int dim, int64_t start, int64_t end, int64_t step);
CT_API ct_tensor *ct_select(const ct_tensor *t, int dim, int64_t index);
CT_API ct_tensor *ct_unfold(const ct_tensor *t, int dim, int64_t size, int64_t step);
CT_API ct_tensor *ct_diagonal(const ct_tensor *t, int64_t offset, int dim1, int dim2);
/* storage_offset < 0 keeps t's. */
CT_API ct_tensor *ct_as_strided(const ct_tensor *t, const int64_t *shape, const int64_t *strides, int ndim,
                                int64_t storage_offset);
/* A tensor sharing t's storage and metadata (torch.Tensor.alias / detach without grad). */
CT_API ct_tensor *ct_alias(const ct_tensor *t);

/* ---------------------------------------------------------------- copies */

/* t itself (new reference) when already contiguous, else a contiguous copy. */
CT_API ct_tensor *ct_contiguous(const ct_tensor *t);
/* A contiguous copy with its own storage. */
CT_API ct_tensor *ct_clone(const ct_tensor *t);
/* Copies src into dst, broadcasting src and converting dtype; returns a new reference
 * to dst. Overlapping src and dst are handled. */
CT_API ct_tensor *ct_copy_(ct_tensor *dst, const ct_tensor *src);
/* t itself when the dtype matches, else a converted copy. */
CT_API ct_tensor *ct_to_dtype(const ct_tensor *t, ct_dtype dtype);
/* Copy to a device (CPU <-> CUDA, META); t itself when it is already there. */
CT_API ct_tensor *ct_to_device(const ct_tensor *t, ct_device device);
/* Tensor.set_(source): t becomes an alias of src (its storage, offset, shape and
 * strides), keeping its identity, .grad and requires_grad; for moving parameters into
 * a flat buffer (ZeRO, FSDP) under no_grad. src must have t's dtype and device and t
 * must not be a view; views of t made before keep the old storage. Not recorded by
 * autograd. Returns a new reference to t. */
CT_API ct_tensor *ct_tensor_set_(ct_tensor *t, const ct_tensor *src);

/* ---------------------------------------------------------------- printing */

/* PyTorch's repr: "tensor([[1., 2.],\n        [3., 4.]])", with dtype and device
 * suffixes, scientific notation when needed and "..." summaries for large tensors.
 * Writes at most cap bytes (NUL-terminated) and returns the full length, snprintf-style
 * (negative on error). */
CT_API int64_t ct_to_string(const ct_tensor *t, char *buf, size_t cap);
CT_API ct_status ct_fprint(FILE *f, const ct_tensor *t);
CT_API ct_status ct_print(const ct_tensor *t);

/* torch.set_printoptions: a negative argument leaves that option alone; sci_mode is
 * -1 automatic, 0 off, 1 on. A precision above 1074 (a double's last decimal digit) is
 * refused with CT_ERROR_VALUE, leaving every option as it was. */
CT_API ct_status ct_set_printoptions(int precision, int64_t threshold, int edgeitems, int linewidth, int sci_mode);
CT_API void ct_reset_printoptions(void);

/* ---------------------------------------------------------------- threads */

CT_API void ct_set_num_threads(int n);
CT_API int ct_get_num_threads(void);

/* ---------------------------------------------------------------- determinism */

/* torch.use_deterministic_algorithms: while on, an op whose GPU kernel is not
 * run-to-run deterministic (atomic additions in no fixed order) takes a deterministic
 * kernel where there is one, and otherwise fails with an error naming it. CPU kernels
 * are deterministic either way. Off by default. docs/core.md, "Deterministic
 * algorithms". */
CT_API void ct_use_deterministic_algorithms(bool mode);
CT_API bool ct_are_deterministic_algorithms_enabled(void);

/* Speed settings that other libraries read only when they load: OPENBLAS_CORETYPE
 * where OpenBLAS does not know the CPU's model and falls back to older kernels (see
 * docs/building.md). ct_runtime_tune_env sets those not already set in the
 * environment and returns how many it set; they reach child processes, not this one.
 * ct_runtime_tune_and_reexec(argv), called first thing in main, also re-executes the
 * program (/proc/self/exe with argv) when it set any, so they take effect; it returns
 * when nothing needed setting, when CT_NO_REEXEC=1, or when the exec fails. */
CT_API int ct_runtime_tune_env(void);
/* The BLAS library and the kernels it runs on this CPU, e.g. "OpenBLAS, kernels
 * SkylakeX" (OpenBLAS picks them at load; OPENBLAS_CORETYPE overrides it). */
CT_API const char *ct_blas_info(void);
CT_API void ct_runtime_tune_and_reexec(char **argv);

#ifdef __cplusplus
}
#endif
#endif /* CTORCH_CORE_H */
