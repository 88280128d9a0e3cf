#include <string.h>

#include "dtype.h"
#include "error.h"

static const struct {
    const char *name;
} dtype_info[CT_DTYPE_COUNT] = {
    [CT_DTYPE_BOOL] = {"bool"},         [CT_DTYPE_UINT8] = {"uint8"},     [CT_DTYPE_INT8] = {"int8"},
    [CT_DTYPE_INT16] = {"int16"},       [CT_DTYPE_INT32] = {"int32"},     [CT_DTYPE_INT64] = {"int64"},
    [CT_DTYPE_UINT16] = {"uint16"},     [CT_DTYPE_UINT32] = {"uint32"},   [CT_DTYPE_UINT64] = {"uint64"},
    [CT_DTYPE_FLOAT16] = {"float16"},   [CT_DTYPE_BFLOAT16] = {"bfloat16"}, [CT_DTYPE_FLOAT32] = {"float32"},
    [CT_DTYPE_FLOAT64] = {"float64"},
};

const char *ct_dtype_name(ct_dtype d) { return ct_dtype_valid(d) ? dtype_info[d].name : "undefined"; }

const char *ct_dtype_pt_name(ct_dtype d) {
    static const char *const names[CT_DTYPE_COUNT] = {
        [CT_DTYPE_BOOL] = "Bool",     [CT_DTYPE_UINT8] = "Byte",        [CT_DTYPE_INT8] = "Char",
        [CT_DTYPE_INT16] = "Short",   [CT_DTYPE_INT32] = "Int",         [CT_DTYPE_INT64] = "Long",
        [CT_DTYPE_UINT16] = "UInt16", [CT_DTYPE_UINT32] = "UInt32",     [CT_DTYPE_UINT64] = "UInt64",
        [CT_DTYPE_FLOAT16] = "Half",  [CT_DTYPE_BFLOAT16] = "BFloat16", [CT_DTYPE_FLOAT32] = "Float",
        [CT_DTYPE_FLOAT64] = "Double",
    };
    return ct_dtype_valid(d) ? names[d] : "Undefined";
}

size_t ct_dtype_size(ct_dtype d) { return ct_dtype_itemsize(d); }

ct_dtype ct_dtype_from_name(const char *name) {
    static const struct {
        const char *alias;
        ct_dtype d;
    } aliases[] = {{"float", CT_DTYPE_FLOAT32}, {"double", CT_DTYPE_FLOAT64}, {"half", CT_DTYPE_FLOAT16},
                   {"long", CT_DTYPE_INT64},    {"int", CT_DTYPE_INT32},      {"short", CT_DTYPE_INT16}};
    if (!name)
        return CT_DTYPE_UNDEFINED;
    if (strncmp(name, "torch.", 6) == 0)
        name += 6;
    for (int d = 0; d < CT_DTYPE_COUNT; d++)
        if (strcmp(name, dtype_info[d].name) == 0)
            return (ct_dtype)d;
    for (size_t i = 0; i < sizeof aliases / sizeof aliases[0]; i++)
        if (strcmp(name, aliases[i].alias) == 0)
            return aliases[i].d;
    return CT_DTYPE_UNDEFINED;
}

bool ct_dtype_is_floating(ct_dtype d) {
    return d == CT_DTYPE_FLOAT16 || d == CT_DTYPE_BFLOAT16 || d == CT_DTYPE_FLOAT32 || d == CT_DTYPE_FLOAT64;
}

bool ct_dtype_is_integral(ct_dtype d, bool include_bool) {
    if (d == CT_DTYPE_BOOL)
        return include_bool;
    return ct_dtype_valid(d) && !ct_dtype_is_floating(d);
}

bool ct_dtype_is_signed(ct_dtype d) {
    return d == CT_DTYPE_INT8 || d == CT_DTYPE_INT16 || d == CT_DTYPE_INT32 || d == CT_DTYPE_INT64 ||
           ct_dtype_is_floating(d);
}

static _Atomic int default_dtype = CT_DTYPE_FLOAT32;

ct_dtype ct_get_default_dtype(void) { return (ct_dtype)default_dtype; }

int ct_set_default_dtype(ct_dtype d) {
    if (!ct_dtype_is_floating(d))
        return ct_error(CT_ERROR_TYPE, "set_default_dtype", "only floating-point types are supported as the default type, got %s",
                        ct_dtype_name(d));
    default_dtype = d;
    return CT_OK;
}

/* Note [Half and bfloat16 rounding]
 * Both conversions round to nearest, ties to even, as c10::Half and c10::BFloat16 do.
 * float -> half handles overflow to inf, subnormal results and NaN (canonical quiet NaN,
 * sign kept). Conversions from double go through float first, which is
 * what PyTorch does (a double rounding that a direct conversion would not have). */
static inline uint32_t f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}
static inline float bits_f32(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

uint16_t ct_float_to_half(float f) {
    uint32_t x = f32_bits(f);
    uint32_t sign = (x >> 16) & 0x8000u;
    uint32_t ax = x & 0x7fffffffu;
    if (ax > 0x7f800000u) /* NaN: the canonical quiet NaN, sign kept (as c10::Half) */
        return (uint16_t)(sign | 0x7e00u);
    if (ax >= 0x477ff000u) /* rounds to >= 65520: overflow to inf */
        return (uint16_t)(sign | 0x7c00u);
    if (ax < 0x38800000u) { /* result is subnormal or zero in half */
        /* Add 0.5 in float so the FPU rounds the value at half's subnormal step (2^-24). */
        float r = bits_f32(ax) + 0.5f;
        return (uint16_t)(sign | (f32_bits(r) - 0x3f000000u));
    }
    uint32_t mant_odd = (ax >> 13) & 1u;
    ax += 0xc8000fffu + mant_odd; /* rebias exponent (-112 << 23) and round to even */
    return (uint16_t)(sign | (ax >> 13));
}

float ct_half_to_float(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t mant = h & 0x3ffu;
    if (exp == 0x1f) /* inf, or NaN: payload kept and made quiet, as c10::Half does */
        return bits_f32(sign | 0x7f800000u | (mant << 13) | (mant ? 0x00400000u : 0u));
    if (exp == 0) {
        if (mant == 0)
            return bits_f32(sign);
        /* subnormal: value = mant * 2^-24 */
        float v = (float)mant * 5.9604644775390625e-08f;
        return bits_f32(sign | f32_bits(v));
    }
    return bits_f32(sign | ((exp + 112u) << 23) | (mant << 13));
}

uint16_t ct_float_to_bfloat16(float f) {
    uint32_t x = f32_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) /* NaN: PyTorch returns the canonical quiet NaN */
        return (uint16_t)0x7fc0u;
    uint32_t rounding_bias = 0x7fffu + ((x >> 16) & 1u);
    return (uint16_t)((x + rounding_bias) >> 16);
}

float ct_bfloat16_to_float(uint16_t b) { return bits_f32((uint32_t)b << 16); }
