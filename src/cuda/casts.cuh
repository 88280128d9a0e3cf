/* The element conversions of Note [Casts] (src/core/copy.c) on the device: copy.cu
 * converts tensors with them, reduce.cu and scan.cu store their results with them, so
 * a value lands in any dtype with the bits the CPU would give it. */
#ifndef CT_CUDA_CASTS_CUH
#define CT_CUDA_CASTS_CUH

#include "kernels.cuh"

/* A loaded element: signed integers (and bool) as int64, uint64 as uint64, floating
 * values as double (exact for every source dtype). */
typedef struct {
    int kind; /* 0 int64, 1 uint64, 2 double */
    int64_t i;
    uint64_t u;
    double f;
} cast_val;

static __device__ __forceinline__ cast_val cast_load(const char *p, int dt) {
    cast_val v;
    v.kind = 0;
    v.i = 0;
    v.u = 0;
    v.f = 0;
    switch (dt) {
    case CT_DTYPE_BOOL: v.i = *(const uint8_t *)p != 0; break;
    case CT_DTYPE_UINT8: v.i = *(const uint8_t *)p; break;
    case CT_DTYPE_INT8: v.i = *(const int8_t *)p; break;
    case CT_DTYPE_INT16: v.i = *(const int16_t *)p; break;
    case CT_DTYPE_INT32: v.i = *(const int32_t *)p; break;
    case CT_DTYPE_INT64: v.i = *(const int64_t *)p; break;
    case CT_DTYPE_UINT16: v.i = *(const uint16_t *)p; break;
    case CT_DTYPE_UINT32: v.i = *(const uint32_t *)p; break;
    case CT_DTYPE_UINT64: v.kind = 1; v.u = *(const uint64_t *)p; break;
    case CT_DTYPE_FLOAT16: v.kind = 2; v.f = ct_dev_h2f(*(const uint16_t *)p); break;
    case CT_DTYPE_BFLOAT16: v.kind = 2; v.f = ct_dev_b2f(*(const uint16_t *)p); break;
    case CT_DTYPE_FLOAT32: v.kind = 2; v.f = *(const float *)p; break;
    default: v.kind = 2; v.f = *(const double *)p; break;
    }
    return v;
}

/* NaN, infinities and out-of-range values: see Note [Casts]. */
static __device__ __forceinline__ int64_t f2i64(double v) {
    if (!(v > -9223372036854775808.0 && v < 9223372036854775808.0))
        return INT64_MIN;
    return (int64_t)v;
}
static __device__ __forceinline__ int32_t f2i32(double v) {
    if (!(v > -2147483649.0 && v < 2147483648.0))
        return INT32_MIN;
    return (int32_t)v;
}
static __device__ __forceinline__ uint64_t f2u64(double v) {
    if (v >= 9223372036854775808.0 && v < 18446744073709551616.0)
        return (uint64_t)v;
    return (uint64_t)f2i64(v);
}

/* The value as an integer through int64 (wrap-around as in C), or the float rule. */
static __device__ __forceinline__ int64_t as_i64(const cast_val &v) {
    return v.kind == 0 ? v.i : v.kind == 1 ? (int64_t)v.u : f2i64(v.f);
}
static __device__ __forceinline__ int64_t as_i32(const cast_val &v) {
    return v.kind == 0 ? v.i : v.kind == 1 ? (int64_t)v.u : (int64_t)f2i32(v.f);
}
static __device__ __forceinline__ double as_f64(const cast_val &v) {
    return v.kind == 0 ? (double)v.i : v.kind == 1 ? (double)v.u : v.f;
}
/* Integers round straight to float32 (not through double), as the CPU does. */
static __device__ __forceinline__ float as_f32(const cast_val &v) {
    return v.kind == 0 ? (float)v.i : v.kind == 1 ? (float)v.u : (float)v.f;
}

static __device__ __forceinline__ void cast_store(char *p, int dt, const cast_val &v) {
    switch (dt) {
    case CT_DTYPE_BOOL:
        *(uint8_t *)p = v.kind == 0 ? v.i != 0 : v.kind == 1 ? v.u != 0 : v.f != 0;
        break;
    case CT_DTYPE_UINT8: *(uint8_t *)p = (uint8_t)as_i64(v); break;
    case CT_DTYPE_INT8: *(int8_t *)p = (int8_t)as_i32(v); break;
    case CT_DTYPE_INT16: *(int16_t *)p = (int16_t)as_i32(v); break;
    case CT_DTYPE_INT32: *(int32_t *)p = (int32_t)as_i32(v); break;
    case CT_DTYPE_INT64: *(int64_t *)p = as_i64(v); break;
    case CT_DTYPE_UINT16: *(uint16_t *)p = (uint16_t)as_i64(v); break;
    case CT_DTYPE_UINT32: *(uint32_t *)p = (uint32_t)as_i64(v); break;
    case CT_DTYPE_UINT64: *(uint64_t *)p = v.kind == 2 ? f2u64(v.f) : v.kind == 1 ? v.u : (uint64_t)v.i; break;
    case CT_DTYPE_FLOAT16: *(uint16_t *)p = ct_dev_f2h(as_f32(v)); break;
    case CT_DTYPE_BFLOAT16: *(uint16_t *)p = ct_dev_f2b(as_f32(v)); break;
    case CT_DTYPE_FLOAT32: *(float *)p = as_f32(v); break;
    default: *(double *)p = as_f64(v); break;
    }
}

/* Stores a double / an int64 into dtype dt at p. */
static __device__ __forceinline__ void cast_store_f64(char *p, int dt, double v) {
    cast_val c;
    c.kind = 2;
    c.i = 0;
    c.u = 0;
    c.f = v;
    cast_store(p, dt, c);
}
static __device__ __forceinline__ void cast_store_i64(char *p, int dt, int64_t v) {
    cast_val c;
    c.kind = 0;
    c.i = v;
    c.u = 0;
    c.f = 0;
    cast_store(p, dt, c);
}

#endif
