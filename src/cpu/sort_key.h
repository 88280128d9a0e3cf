/* Sort keys of the CPU's sort, topk, kthvalue and unique: floating values as double
 * (NaN above every number), integers as int64 compared exactly (uint64 with its sign
 * bit flipped, so that signed comparison orders it), and the original position, so
 * that ties keep their order (a stable sort through qsort). */
#ifndef CT_CPU_SORT_KEY_H
#define CT_CPU_SORT_KEY_H

#include <stdint.h>

#include "core/dtype.h"

typedef struct {
    double v;   /* floating dtypes */
    int64_t iv; /* integer dtypes */
    int64_t i;  /* position along the sorted dim */
} ct_sort_key;

static inline void ct_sort_key_load(ct_sort_key *k, const char *p, ct_dtype d, int64_t i) {
    if (ct_dtype_is_floating(d)) {
        k->v = ct_load_double(p, d);
    } else {
        k->iv = ct_load_int64(p, d);
        if (d == CT_DTYPE_UINT64)
            k->iv = (int64_t)((uint64_t)k->iv ^ (UINT64_C(1) << 63));
    }
    k->i = i;
}

/* qsort comparators, ascending and descending (src/cpu/shape.c). */
int ct_sort_key_cmp_float(const void *a, const void *b);
int ct_sort_key_cmp_float_desc(const void *a, const void *b);
int ct_sort_key_cmp_int(const void *a, const void *b);
int ct_sort_key_cmp_int_desc(const void *a, const void *b);

#endif /* CT_CPU_SORT_KEY_H */
