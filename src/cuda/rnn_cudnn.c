/* cuDNN's recurrence on CUDA: the kernels of _cudnn_rnn and _cudnn_rnn_backward
 * (ctorch/nn.h), which ct_lstm, ct_gru and the plain RNNs take for CUDA inputs (Note
 * [Recurrent layers on cuDNN] in src/nn/rnn_cudnn.c).
 *
 * Note [cuDNN at run time]
 * cuDNN is not a build dependency: no Debian package carries its headers, and the
 * library comes with NVIDIA's packages and with PyTorch's wheels. The backend opens
 * libcudnn.so.9 (the path in CT_CUDNN_LIBRARY first, then libcudnn.so) with dlopen the
 * first time it is asked, and takes the functions of cuDNN's C API it calls (the RNN
 * API of cuDNN 8 and 9) with dlsym. Their prototypes and the enum values below are
 * the documented API's, declared here. Without the library (or with one that lacks a
 * function) ct_backends_cudnn_version() is 0, the layers keep their own CUDA path, and
 * a direct call of the ops fails with an error that says what was looked for.
 *
 * Weights travel as one vector in the module's order (weight_ih, weight_hh, bias_ih,
 * bias_hh per layer and direction: PyTorch's parameter list flattened); each call copies
 * them into the weight space cuDNN lays out (cudnnGetRNNWeightParams gives each gate's
 * matrix (hidden, in) and bias), and the backward copies the weight gradient back the
 * same way. Gates that lie next to each other on both sides are copied at once, so an
 * LSTM layer and direction costs about four device copies. cuDNN's gate order is
 * PyTorch's: i, f, g, o for the LSTM, r, z, n for the GRU. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/factory.h"
#include "core/view.h"
#include "ctorch/nn.h"
#include "cuda/cuda_ops.h"
#include "dispatch/dispatch_internal.h"

/* ------------------------------------------------------------------ the library */

typedef void *cudnn_handle;
typedef void *cudnn_desc;

/* The documented enum values this file passes. */
enum {
    CUDNN_DATA_FLOAT = 0,
    CUDNN_DATA_HALF = 2,
    CUDNN_DATA_BFLOAT16 = 9,
    CUDNN_DEFAULT_MATH = 0, /* TF32 allowed for float32 */
    CUDNN_TENSOR_OP_MATH = 1,
    CUDNN_FMA_MATH = 3, /* float32 in full precision */
    CUDNN_RNN_ALGO_STANDARD = 0,
    CUDNN_RNN_NO_BIAS = 0,
    CUDNN_RNN_DOUBLE_BIAS = 2,
    CUDNN_UNIDIRECTIONAL = 0,
    CUDNN_BIDIRECTIONAL = 1,
    CUDNN_LINEAR_INPUT = 0,
    CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_UNPACKED = 0,
    CUDNN_RNN_DATA_LAYOUT_BATCH_MAJOR_UNPACKED = 2,
    CUDNN_RNN_PADDED_IO_ENABLED = 1,
    CUDNN_FWD_MODE_INFERENCE = 0,
    CUDNN_FWD_MODE_TRAINING = 1,
    CUDNN_WGRAD_MODE_ADD = 0,
};

/* X(return type, name, parameters) for every function taken from the library. */
#define CUDNN_FUNCTIONS(X)                                                                                          \
    X(size_t, cudnnGetVersion, (void))                                                                             \
    X(const char *, cudnnGetErrorString, (int))                                                                    \
    X(int, cudnnCreate, (cudnn_handle *))                                                                          \
    X(int, cudnnSetStream, (cudnn_handle, void *))                                                                 \
    X(int, cudnnCreateTensorDescriptor, (cudnn_desc *))                                                            \
    X(int, cudnnDestroyTensorDescriptor, (cudnn_desc))                                                             \
    X(int, cudnnSetTensorNdDescriptor, (cudnn_desc, int, int, const int *, const int *))                           \
    X(int, cudnnCreateDropoutDescriptor, (cudnn_desc *))                                                           \
    X(int, cudnnDestroyDropoutDescriptor, (cudnn_desc))                                                            \
    X(int, cudnnSetDropoutDescriptor, (cudnn_desc, cudnn_handle, float, void *, size_t, unsigned long long))       \
    X(int, cudnnCreateRNNDescriptor, (cudnn_desc *))                                                               \
    X(int, cudnnDestroyRNNDescriptor, (cudnn_desc))                                                                \
    X(int, cudnnSetRNNDescriptor_v8,                                                                               \
      (cudnn_desc, int, int, int, int, int, int, int, int, int32_t, int32_t, int32_t, int32_t, cudnn_desc,        \
       uint32_t))                                                                                                  \
    X(int, cudnnCreateRNNDataDescriptor, (cudnn_desc *))                                                           \
    X(int, cudnnDestroyRNNDataDescriptor, (cudnn_desc))                                                            \
    X(int, cudnnSetRNNDataDescriptor, (cudnn_desc, int, int, int, int, int, const int *, void *))                  \
    X(int, cudnnGetRNNWeightSpaceSize, (cudnn_handle, cudnn_desc, size_t *))                                       \
    X(int, cudnnGetRNNTempSpaceSizes, (cudnn_handle, cudnn_desc, int, cudnn_desc, size_t *, size_t *))             \
    X(int, cudnnGetRNNWeightParams,                                                                                \
      (cudnn_handle, cudnn_desc, int32_t, size_t, const void *, int32_t, cudnn_desc, void **, cudnn_desc, void **)) \
    X(int, cudnnRNNForward,                                                                                        \
      (cudnn_handle, cudnn_desc, int, const int32_t *, cudnn_desc, const void *, cudnn_desc, void *, cudnn_desc,   \
       const void *, void *, cudnn_desc, const void *, void *, size_t, const void *, size_t, void *, size_t,       \
       void *))                                                                                                    \
    X(int, cudnnRNNBackwardData_v8,                                                                                \
      (cudnn_handle, cudnn_desc, const int32_t *, cudnn_desc, const void *, const void *, cudnn_desc, void *,      \
       cudnn_desc, const void *, const void *, void *, cudnn_desc, const void *, const void *, void *, size_t,     \
       const void *, size_t, void *, size_t, void *))                                                              \
    X(int, cudnnRNNBackwardWeights_v8,                                                                             \
      (cudnn_handle, cudnn_desc, int, const int32_t *, cudnn_desc, const void *, cudnn_desc, const void *,         \
       cudnn_desc, const void *, size_t, void *, size_t, void *, size_t, void *))

static struct {
#define CUDNN_FIELD(ret, name, params) ret(*name) params;
    CUDNN_FUNCTIONS(CUDNN_FIELD)
#undef CUDNN_FIELD
    int64_t version;
    char why[256]; /* why none was loaded */
} dnn;

static pthread_once_t dnn_once = PTHREAD_ONCE_INIT;

static void dnn_load(void) {
    const char *env = getenv("CT_CUDNN_LIBRARY");
    const char *names[] = {env && *env ? env : NULL, "libcudnn.so.9", "libcudnn.so"};
    void *lib = NULL;
    for (size_t i = 0; i < sizeof names / sizeof *names && !lib; i++)
        if (names[i])
            lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        snprintf(dnn.why, sizeof dnn.why, "no libcudnn was found (%s%slibcudnn.so.9, libcudnn.so: %s)",
                 env && *env ? env : "", env && *env ? ", " : "", dlerror());
        return;
    }
#define CUDNN_TAKE(ret, name, params)                                                                              \
    if (!(*(void **)&dnn.name = dlsym(lib, #name))) {                                                               \
        snprintf(dnn.why, sizeof dnn.why, "the libcudnn found has no %s (cuDNN 8 or later is needed)", #name);      \
        dlclose(lib);                                                                                              \
        return;                                                                                                    \
    }
    CUDNN_FUNCTIONS(CUDNN_TAKE)
#undef CUDNN_TAKE
    dnn.version = (int64_t)dnn.cudnnGetVersion();
    if (dnn.version < 8000) {
        snprintf(dnn.why, sizeof dnn.why, "the libcudnn found is version %lld; cuDNN 8 or later is needed",
                 (long long)dnn.version);
        dnn.version = 0;
    }
}

int64_t ct_cudnn_version(void) {
    pthread_once(&dnn_once, dnn_load);
    return dnn.version;
}

const char *ct_cudnn_why(void) {
    ct_cudnn_version();
    return dnn.why[0] ? dnn.why : "cuDNN loaded";
}

static ct_status dnn_need(const char *op) {
    if (ct_cudnn_version() > 0)
        return CT_OK;
    return ct_error(CT_ERROR_NOT_IMPLEMENTED, op, "cuDNN is not available: %s; CT_CUDNN_LIBRARY names the library",
                    dnn.why);
}

static ct_status dnn_check(int s, const char *op, const char *what) {
    if (s == 0)
        return CT_OK;
    /* allocation failures: 2 in cuDNN 8, 4003 (host) and 4004 (device) in cuDNN 9 */
    bool oom = s == 2 || s == 4003 || s == 4004;
    return ct_error(oom ? CT_ERROR_OUT_OF_MEMORY : CT_ERROR_RUNTIME, op, "cuDNN's %s failed: %s (status %d)", what,
                    dnn.cudnnGetErrorString(s), s);
}

/* One handle per thread and device (a handle must not be used by two threads at once). */
static _Thread_local cudnn_handle handles[CT_CUDA_MAX_DEVICES];

static cudnn_handle dnn_handle(int device, const char *op) {
    if (!handles[device] && dnn_check(dnn.cudnnCreate(&handles[device]), op, "cudnnCreate") != CT_OK)
        return NULL;
    if (dnn_check(dnn.cudnnSetStream(handles[device], ct_cuda_raw_stream(device)), op, "cudnnSetStream") != CT_OK)
        return NULL;
    return handles[device];
}

/* After a call's checks: the library, the device, and this thread's handle on the
 * device's current stream; NULL with the error. */
static cudnn_handle dnn_start(const char *op, int device) {
    if (dnn_need(op) != CT_OK || !ct_cuda_use_device(op, device))
        return NULL;
    return dnn_handle(device, op);
}

/* ------------------------------------------------------------------ arguments */

typedef struct {
    int mode, gates;
    int64_t T, B, I, H, L, D, nweight;
    bool batch_first, biases;
    ct_dtype dtype;
    ct_device dev;
} rnn_geom;

static int64_t weight_count(const rnn_geom *g) {
    int64_t n = 0, gh = g->gates * g->H;
    for (int64_t l = 0; l < g->L; l++) {
        int64_t in = l == 0 ? g->I : g->D * g->H;
        n += g->D * (gh * in + gh * g->H + (g->biases ? 2 * gh : 0));
    }
    return n;
}

static ct_status same_place(const char *op, const char *name, const ct_tensor *t, const rnn_geom *g) {
    if (t->dtype != g->dtype)
        return ct_error(CT_ERROR_TYPE, op, "expected %s to have dtype %s like input, but got %s", name,
                        ct_dtype_name(g->dtype), ct_dtype_name(t->dtype));
    if (!ct_device_equal(t->device, g->dev))
        return ct_error(CT_ERROR_DEVICE, op, "expected %s on the device of input (cuda:%d), but it is not", name,
                        g->dev.index);
    return CT_OK;
}

static ct_status state_shape(const char *op, const char *name, const ct_tensor *t, const rnn_geom *g) {
    ct_status st = same_place(op, name, t, g);
    if (st == CT_OK && (t->ndim != 3 || t->shape[0] != g->L * g->D || t->shape[1] != g->B || t->shape[2] != g->H))
        st = ct_error(CT_ERROR_VALUE, op, "expected %s of shape (%lld, %lld, %lld)", name, (long long)(g->L * g->D),
                      (long long)g->B, (long long)g->H);
    return st;
}

/* The call's geometry from its ints and in[]: input, weight, hx, cx. */
static ct_status check(const char *op, ct_call *call, const ct_tensor *lengths, rnn_geom *g) {
    const ct_tensor *x = call->in[0], *w = call->in[1], *hx = call->in[2], *cx = call->in[3];
    const int64_t *v = call->ints;
    if (v[0] < CT_CUDNN_RNN_RELU || v[0] > CT_CUDNN_RNN_GRU)
        return ct_error(CT_ERROR_VALUE, op, "mode must be one of CT_CUDNN_RNN_*, but got %lld", (long long)v[0]);
    *g = (rnn_geom){.mode = (int)v[0], .H = v[1], .L = v[2], .D = v[3] ? 2 : 1, .batch_first = v[4] != 0,
                    .biases = v[5] != 0, .dtype = x->dtype, .dev = x->device};
    g->gates = g->mode == CT_CUDNN_RNN_LSTM ? 4 : g->mode == CT_CUDNN_RNN_GRU ? 3 : 1;
    if (x->device.type != CT_DEVICE_CUDA)
        return ct_error(CT_ERROR_DEVICE, op, "runs on CUDA (cuDNN), but input is not a CUDA tensor");
    if (x->dtype != CT_DTYPE_FLOAT32 && x->dtype != CT_DTYPE_FLOAT16 && x->dtype != CT_DTYPE_BFLOAT16)
        return ct_error(CT_ERROR_TYPE, op, "takes float32, float16 or bfloat16 input, but got %s",
                        ct_dtype_name(x->dtype));
    if (x->ndim != 3)
        return ct_error(CT_ERROR_VALUE, op, "expected a 3-D input (%s, input_size), but got %d dims",
                        g->batch_first ? "batch, seq" : "seq, batch", x->ndim);
    g->T = x->shape[g->batch_first ? 1 : 0];
    g->B = x->shape[g->batch_first ? 0 : 1];
    g->I = x->shape[2];
    if (g->T < 1 || g->B < 1 || g->I < 1 || g->H < 1 || g->L < 1)
        return ct_error(CT_ERROR_VALUE, op, "takes no empty sequence, batch, input, hidden size or layer count");
    if (g->T > INT32_MAX || g->B > INT32_MAX || g->I > INT32_MAX || g->H > INT32_MAX / 4 || g->L > 1 << 16)
        return ct_error(CT_ERROR_VALUE, op, "sizes past cuDNN's 32-bit limits");
    g->nweight = weight_count(g);
    ct_status st = same_place(op, "weight", w, g);
    if (st == CT_OK && (w->ndim != 1 || w->numel != g->nweight))
        st = ct_error(CT_ERROR_VALUE, op, "expected weight to be a vector of the %lld parameters of the layers",
                      (long long)g->nweight);
    if (st == CT_OK)
        st = state_shape(op, "hx", hx, g);
    if (st == CT_OK && (g->mode == CT_CUDNN_RNN_LSTM) != (cx != NULL))
        st = ct_error(CT_ERROR_VALUE, op, g->mode == CT_CUDNN_RNN_LSTM ? "the LSTM needs cx" : "only the LSTM takes cx");
    if (st == CT_OK && cx)
        st = state_shape(op, "cx", cx, g);
    if (st == CT_OK && lengths) {
        if (lengths->device.type != CT_DEVICE_CPU || lengths->dtype != CT_DTYPE_INT64 || lengths->ndim != 1 ||
            lengths->shape[0] != g->B)
            return ct_error(CT_ERROR_VALUE, op, "expected lengths as an int64 CPU tensor of %lld entries",
                            (long long)g->B);
    }
    return st;
}

/* ------------------------------------------------------------------ descriptors */

typedef struct {
    cudnn_desc rnn, drop, x, y, h, m, b;
    ct_tensor *dev_len; /* int32 (B) on the device */
    size_t wsize, work, reserve;
} rnn_descs;

static void descs_free(rnn_descs *d) {
    if (d->rnn)
        dnn.cudnnDestroyRNNDescriptor(d->rnn);
    if (d->drop)
        dnn.cudnnDestroyDropoutDescriptor(d->drop);
    if (d->x)
        dnn.cudnnDestroyRNNDataDescriptor(d->x);
    if (d->y)
        dnn.cudnnDestroyRNNDataDescriptor(d->y);
    cudnn_desc t[3] = {d->h, d->m, d->b};
    for (int i = 0; i < 3; i++)
        if (t[i])
            dnn.cudnnDestroyTensorDescriptor(t[i]);
}

static ct_status descs_make(rnn_descs *d, const rnn_geom *g, const ct_tensor *lengths, cudnn_handle h, bool train,
                            const char *op) {
    memset(d, 0, sizeof *d);
    int dt = g->dtype == CT_DTYPE_FLOAT32 ? CUDNN_DATA_FLOAT : g->dtype == CT_DTYPE_FLOAT16 ? CUDNN_DATA_HALF
                                                                                            : CUDNN_DATA_BFLOAT16;
    int math = g->dtype != CT_DTYPE_FLOAT32 ? CUDNN_TENSOR_OP_MATH
               : ct_cuda_allow_tf32()      ? CUDNN_DEFAULT_MATH
                                           : CUDNN_FMA_MATH;
    int32_t *len = malloc((size_t)g->B * sizeof *len);
    if (!len)
        return ct_error(CT_ERROR_OUT_OF_MEMORY, op, "out of host memory");
    const int64_t *given = lengths ? (const int64_t *)ct_tensor_ptr(lengths) : NULL;
    const int64_t ls = lengths ? lengths->strides[0] : 0;
    ct_status st = CT_OK;
    for (int64_t b = 0; b < g->B && st == CT_OK; b++) {
        int64_t n = given ? given[b * ls] : g->T;
        if (n < 1 || n > g->T)
            st = ct_error(CT_ERROR_VALUE, op, "length %lld of sequence %lld is outside [1, %lld]", (long long)n,
                          (long long)b, (long long)g->T);
        len[b] = (int32_t)n;
    }
    uint64_t fill = 0; /* zeros at the outputs' padded steps, in every dtype */
    int layout = g->batch_first ? CUDNN_RNN_DATA_LAYOUT_BATCH_MAJOR_UNPACKED : CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_UNPACKED;
    int hdim[3] = {(int)(g->L * g->D), (int)g->B, (int)g->H}, hstr[3] = {(int)(g->B * g->H), (int)g->H, 1};
#define DNN(call, what)                                                                                            \
    if (st == CT_OK)                                                                                               \
    st = dnn_check(call, op, what)
    DNN(dnn.cudnnCreateDropoutDescriptor(&d->drop), "cudnnCreateDropoutDescriptor");
    DNN(dnn.cudnnSetDropoutDescriptor(d->drop, h, 0.0f, NULL, 0, 0), "cudnnSetDropoutDescriptor");
    DNN(dnn.cudnnCreateRNNDescriptor(&d->rnn), "cudnnCreateRNNDescriptor");
    DNN(dnn.cudnnSetRNNDescriptor_v8(d->rnn, CUDNN_RNN_ALGO_STANDARD, g->mode,
                                     g->biases ? CUDNN_RNN_DOUBLE_BIAS : CUDNN_RNN_NO_BIAS,
                                     g->D == 2 ? CUDNN_BIDIRECTIONAL : CUDNN_UNIDIRECTIONAL, CUDNN_LINEAR_INPUT, dt,
                                     CUDNN_DATA_FLOAT, math, (int32_t)g->I, (int32_t)g->H, (int32_t)g->H,
                                     (int32_t)g->L, d->drop, CUDNN_RNN_PADDED_IO_ENABLED),
        "cudnnSetRNNDescriptor_v8");
    DNN(dnn.cudnnCreateRNNDataDescriptor(&d->x), "cudnnCreateRNNDataDescriptor");
    DNN(dnn.cudnnSetRNNDataDescriptor(d->x, dt, layout, (int)g->T, (int)g->B, (int)g->I, len, &fill),
        "cudnnSetRNNDataDescriptor");
    DNN(dnn.cudnnCreateRNNDataDescriptor(&d->y), "cudnnCreateRNNDataDescriptor");
    DNN(dnn.cudnnSetRNNDataDescriptor(d->y, dt, layout, (int)g->T, (int)g->B, (int)(g->D * g->H), len, &fill),
        "cudnnSetRNNDataDescriptor");
    DNN(dnn.cudnnCreateTensorDescriptor(&d->h), "cudnnCreateTensorDescriptor");
    DNN(dnn.cudnnSetTensorNdDescriptor(d->h, dt, 3, hdim, hstr), "cudnnSetTensorNdDescriptor");
    DNN(dnn.cudnnCreateTensorDescriptor(&d->m), "cudnnCreateTensorDescriptor");
    DNN(dnn.cudnnCreateTensorDescriptor(&d->b), "cudnnCreateTensorDescriptor");
    DNN(dnn.cudnnGetRNNWeightSpaceSize(h, d->rnn, &d->wsize), "cudnnGetRNNWeightSpaceSize");
    DNN(dnn.cudnnGetRNNTempSpaceSizes(h, d->rnn, train ? CUDNN_FWD_MODE_TRAINING : CUDNN_FWD_MODE_INFERENCE, d->x,
                                      &d->work, &d->reserve),
        "cudnnGetRNNTempSpaceSizes");
#undef DNN
    if (st == CT_OK) {
        d->dev_len = ct_empty_impl((int64_t[]){g->B}, 1, CT_DTYPE_INT32, g->dev);
        st = d->dev_len ? ct_cuda_memcpy(ct_tensor_ptr(d->dev_len), len, (size_t)g->B * sizeof *len, 0,
                                         g->dev.index, op)
                        : ct_last_status();
    }
    free(len);
    return st;
}

/* Copies between the module-order vector flat and cuDNN's weight space ws (to_ws:
 * flat -> ws), gate by gate, joining copies that continue each other. */
static ct_status copy_weights(const rnn_geom *g, const rnn_descs *d, cudnn_handle h, char *ws, char *flat,
                              bool to_ws, const char *op) {
    const size_t esz = ct_dtype_size(g->dtype);
    const int64_t G = g->gates, H = g->H;
    char *pend_dst = NULL, *pend_src = NULL;
    size_t pend_n = 0;
    ct_status st = CT_OK;
    int64_t off = 0;
    for (int64_t l = 0; l < g->L && st == CT_OK; l++)
        for (int64_t dir = 0; dir < g->D && st == CT_OK; dir++) {
            const int64_t in = l == 0 ? g->I : g->D * H;
            const int64_t wih = off, whh = wih + G * H * in, bih = whh + G * H * H, bhh = bih + G * H;
            off = g->biases ? bhh + G * H : bih;
            for (int64_t id = 0; id < 2 * G && st == CT_OK; id++) {
                void *m = NULL, *b = NULL;
                st = dnn_check(dnn.cudnnGetRNNWeightParams(h, d->rnn, (int32_t)(l * g->D + dir), d->wsize, ws,
                                                           (int32_t)id, d->m, &m, d->b, &b),
                               op, "cudnnGetRNNWeightParams");
                const bool rec = id >= G;
                const int64_t gate = id % G, cols = rec ? H : in;
                char *part[2] = {m, g->biases ? b : NULL};
                char *mine[2] = {flat + (size_t)((rec ? whh : wih) + gate * H * cols) * esz,
                                 flat + (size_t)((rec ? bhh : bih) + gate * H) * esz};
                size_t n[2] = {(size_t)(H * cols) * esz, (size_t)H * esz};
                for (int k = 0; k < 2 && st == CT_OK; k++) {
                    if (!part[k])
                        continue;
                    char *dst = to_ws ? part[k] : mine[k], *src = to_ws ? mine[k] : part[k];
                    if (pend_n && dst == pend_dst + pend_n && src == pend_src + pend_n) {
                        pend_n += n[k];
                        continue;
                    }
                    if (pend_n)
                        st = ct_cuda_memcpy(pend_dst, pend_src, pend_n, 2, g->dev.index, op);
                    pend_dst = dst, pend_src = src, pend_n = n[k];
                }
            }
        }
    if (st == CT_OK && pend_n)
        st = ct_cuda_memcpy(pend_dst, pend_src, pend_n, 2, g->dev.index, op);
    return st;
}

static ct_tensor *bytes(size_t n, ct_device dev) { return ct_empty_impl((int64_t[]){n ? (int64_t)n : 1}, 1, CT_U8, dev); }

/* ------------------------------------------------------------------ kernels */

/* Hands the kernel's results (NULL: an optional result left unset) to the call. */
static ct_status set_outputs(ct_call *call, ct_tensor *const *t, int n) {
    ct_status st = CT_OK;
    for (int i = 0; i < n && st == CT_OK; i++)
        if (t[i])
            st = ct_call_set_output(call, i, t[i]);
    return st;
}

static ct_status rnn_forward_kernel(ct_keyset ks, ct_call *call, void *ud) {
    (void)ks, (void)ud;
    const char *op = "_cudnn_rnn";
    const ct_tensor *lengths = call->nlist > 0 ? call->list[0] : NULL;
    rnn_geom g;
    ct_status st = check(op, call, lengths, &g);
    if (st != CT_OK)
        return st;
    cudnn_handle h = dnn_start(op, g.dev.index);
    if (!h)
        return ct_last_status();
    const bool train = call->ints[6] != 0, lstm = g.mode == CT_CUDNN_RNN_LSTM;
    rnn_descs d;
    ct_scope_begin();
    st = descs_make(&d, &g, lengths, h, train, op);
    const ct_tensor *x = st == CT_OK ? ct_contiguous_impl(call->in[0]) : NULL;
    const ct_tensor *w = x ? ct_contiguous_impl(call->in[1]) : NULL, *hx = w ? ct_contiguous_impl(call->in[2]) : NULL;
    const ct_tensor *cx = hx && lstm ? ct_contiguous_impl(call->in[3]) : NULL;
    int64_t oshape[3] = {g.batch_first ? g.B : g.T, g.batch_first ? g.T : g.B, g.D * g.H};
    ct_tensor *ws = x ? bytes(d.wsize, g.dev) : NULL, *work = ws ? bytes(d.work, g.dev) : NULL;
    ct_tensor *res = work && train ? bytes(d.reserve, g.dev) : NULL;
    ct_tensor *out = work ? ct_empty_impl(oshape, 3, g.dtype, g.dev) : NULL;
    ct_tensor *hy = out ? ct_empty_like_impl(call->in[2]) : NULL, *cy = hy && lstm ? ct_empty_like_impl(hy) : NULL;
    if (st == CT_OK && (!hx || (lstm && !cx) || !hy || (lstm && !cy) || (train && !res)))
        st = ct_last_status();
    if (st == CT_OK)
        st = copy_weights(&g, &d, h, ct_tensor_ptr(ws), ct_tensor_ptr(w), true, op);
    if (st == CT_OK)
        st = dnn_check(dnn.cudnnRNNForward(h, d.rnn, train ? CUDNN_FWD_MODE_TRAINING : CUDNN_FWD_MODE_INFERENCE,
                                           (const int32_t *)ct_tensor_ptr(d.dev_len), d.x, ct_tensor_ptr(x), d.y,
                                           ct_tensor_ptr(out), d.h, ct_tensor_ptr(hx), ct_tensor_ptr(hy), d.h,
                                           cx ? ct_tensor_ptr(cx) : NULL, cy ? ct_tensor_ptr(cy) : NULL, d.wsize,
                                           ct_tensor_ptr(ws), d.work, ct_tensor_ptr(work),
                                           train ? d.reserve : 0, res ? ct_tensor_ptr(res) : NULL),
                       op, "cudnnRNNForward");
    if (st == CT_OK)
        st = set_outputs(call, (ct_tensor *[]){out, hy, cy, res}, 4);
    ct_scope_end();
    descs_free(&d);
    return st;
}

static ct_status rnn_backward_kernel(ct_keyset ks, ct_call *call, void *ud) {
    (void)ks, (void)ud;
    const char *op = "_cudnn_rnn_backward";
    if (call->nlist < 5 || call->nlist > 6)
        return ct_error(CT_ERROR_VALUE, op, "expected output, grad_output, grad_hy, grad_cy, reserve and lengths");
    const ct_tensor *y0 = call->list[0], *gy0 = call->list[1], *ghy0 = call->list[2], *gcy0 = call->list[3];
    const ct_tensor *res = call->list[4], *lengths = call->nlist > 5 ? call->list[5] : NULL;
    rnn_geom g;
    ct_status st = check(op, call, lengths, &g);
    const bool lstm = g.mode == CT_CUDNN_RNN_LSTM;
    if (st == CT_OK && (!y0 || !gy0 || !ghy0 || !res || (lstm && !gcy0)))
        st = ct_error(CT_ERROR_NULL_ARGUMENT, op, "output, grad_output, grad_hy, reserve (and grad_cy for the "
                                                  "LSTM) must not be NULL");
    int64_t oshape[3] = {g.batch_first ? g.B : g.T, g.batch_first ? g.T : g.B, g.D * g.H};
    for (int i = 0; i < 2 && st == CT_OK; i++) {
        const ct_tensor *t = i ? gy0 : y0;
        st = same_place(op, i ? "grad_output" : "output", t, &g);
        if (st == CT_OK && (t->ndim != 3 || memcmp(t->shape, oshape, sizeof oshape) != 0))
            st = ct_error(CT_ERROR_VALUE, op, "expected %s of shape (%lld, %lld, %lld)", i ? "grad_output" : "output",
                          (long long)oshape[0], (long long)oshape[1], (long long)oshape[2]);
    }
    if (st == CT_OK)
        st = state_shape(op, "grad_hy", ghy0, &g);
    if (st == CT_OK && lstm)
        st = state_shape(op, "grad_cy", gcy0, &g);
    if (st != CT_OK)
        return st;
    cudnn_handle h = dnn_start(op, g.dev.index);
    if (!h)
        return ct_last_status();
    rnn_descs d;
    ct_scope_begin();
    st = descs_make(&d, &g, lengths, h, true, op);
    if (st == CT_OK && (res->dtype != CT_U8 || !ct_device_equal(res->device, g.dev) || res->ndim != 1 ||
                        (size_t)res->numel < d.reserve))
        st = ct_error(CT_ERROR_VALUE, op, "reserve is not the one a training forward of this shape returned");
    const ct_tensor *x = st == CT_OK ? ct_contiguous_impl(call->in[0]) : NULL;
    const ct_tensor *w = x ? ct_contiguous_impl(call->in[1]) : NULL, *hx = w ? ct_contiguous_impl(call->in[2]) : NULL;
    const ct_tensor *cx = hx && lstm ? ct_contiguous_impl(call->in[3]) : NULL;
    const ct_tensor *y = hx ? ct_contiguous_impl(y0) : NULL, *gy = y ? ct_contiguous_impl(gy0) : NULL;
    const ct_tensor *ghy = gy ? ct_contiguous_impl(ghy0) : NULL, *gcy = ghy && lstm ? ct_contiguous_impl(gcy0) : NULL;
    const ct_tensor *rc = ghy ? ct_contiguous_impl(res) : NULL;
    ct_tensor *ws = rc ? bytes(d.wsize, g.dev) : NULL, *dws = ws ? ct_zeros_impl((int64_t[]){d.wsize ? (int64_t)d.wsize : 1}, 1, CT_U8, g.dev) : NULL;
    ct_tensor *work = dws ? bytes(d.work, g.dev) : NULL;
    /* cuDNN leaves the gradient of padded input steps as it finds it */
    ct_tensor *dx = work ? (lengths ? ct_zeros_impl(x->shape, 3, g.dtype, g.dev) : ct_empty_like_impl(x)) : NULL;
    ct_tensor *dhx = dx ? ct_empty_like_impl(hx) : NULL, *dcx = dhx && lstm ? ct_empty_like_impl(hx) : NULL;
    ct_tensor *dw = dhx ? ct_empty_like_impl(w) : NULL;
    if (st == CT_OK && (!dw || (lstm && (!cx || !gcy || !dcx))))
        st = ct_last_status();
    if (st == CT_OK)
        st = copy_weights(&g, &d, h, ct_tensor_ptr(ws), ct_tensor_ptr(w), true, op);
    if (st == CT_OK)
        st = dnn_check(dnn.cudnnRNNBackwardData_v8(
                           h, d.rnn, (const int32_t *)ct_tensor_ptr(d.dev_len), d.y, ct_tensor_ptr(y),
                           ct_tensor_ptr(gy), d.x, ct_tensor_ptr(dx), d.h, ct_tensor_ptr(hx), ct_tensor_ptr(ghy),
                           ct_tensor_ptr(dhx), d.h, cx ? ct_tensor_ptr(cx) : NULL, gcy ? ct_tensor_ptr(gcy) : NULL,
                           dcx ? ct_tensor_ptr(dcx) : NULL, d.wsize, ct_tensor_ptr(ws), d.work, ct_tensor_ptr(work),
                           d.reserve, ct_tensor_ptr(rc)),
                       op, "cudnnRNNBackwardData_v8");
    if (st == CT_OK)
        st = dnn_check(dnn.cudnnRNNBackwardWeights_v8(h, d.rnn, CUDNN_WGRAD_MODE_ADD,
                                                      (const int32_t *)ct_tensor_ptr(d.dev_len), d.x,
                                                      ct_tensor_ptr(x), d.h, ct_tensor_ptr(hx), d.y, ct_tensor_ptr(y),
                                                      d.wsize, ct_tensor_ptr(dws), d.work, ct_tensor_ptr(work),
                                                      d.reserve, ct_tensor_ptr(rc)),
                       op, "cudnnRNNBackwardWeights_v8");
    if (st == CT_OK)
        st = copy_weights(&g, &d, h, ct_tensor_ptr(dws), ct_tensor_ptr(dw), false, op);
    if (st == CT_OK)
        st = set_outputs(call, (ct_tensor *[]){dx, dhx, dcx, dw}, 4);
    ct_scope_end();
    descs_free(&d);
    return st;
}

void ct_cuda_register_cudnn_rnn(void) {
    ct_dispatch_register_default(CT_OP__cudnn_rnn, CT_KEY_CUDA, rnn_forward_kernel, NULL);
    ct_dispatch_register_default(CT_OP__cudnn_rnn_backward, CT_KEY_CUDA, rnn_backward_kernel, NULL);
}
