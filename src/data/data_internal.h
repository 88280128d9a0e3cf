/* What the text and token datasets share: reading a whole file and nanoGPT's random
 * training windows. */
#ifndef CT_DATA_INTERNAL_H
#define CT_DATA_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ctorch.h"
#include "ctorch/ext.h"

/* The bytes of the file at path (malloc'ed, *len of them), or NULL with the error set
 * (op names the caller in the message). An empty file is an error. */
char *ct_data_read_file(const char *op, const char *path, size_t *len);

/* The offset in [0, range) of window b of batch `index`: one Philox block per window,
 * counter (index, b), so every (seed, index, b) has its own draw and a batch can be
 * reproduced from its index alone. Callers keep index < 2^40 and b < 2^24. */
static inline int64_t ct_data_window_offset(uint64_t seed, uint64_t index, int64_t b, uint64_t range) {
    uint32_t w[4];
    ct_philox4x32(seed, (index << 24) | (uint64_t)b, w);
    return (int64_t)((((uint64_t)w[1] << 32) | w[0]) % range);
}

/* The range [*start, *start + *len) of a split of n tokens whose first ntrain train;
 * false with the error set for a split that is neither. */
static inline bool ct_data_split_range(const char *op, ct_text_split split, int64_t n, int64_t ntrain,
                                       int64_t *start, int64_t *len) {
    if (split != CT_SPLIT_TRAIN && split != CT_SPLIT_VAL) {
        ct_error(CT_ERROR_VALUE, op, "split must be CT_SPLIT_TRAIN or CT_SPLIT_VAL, got %d", (int)split);
        return false;
    }
    *start = split == CT_SPLIT_TRAIN ? 0 : ntrain;
    *len = split == CT_SPLIT_TRAIN ? ntrain : n - ntrain;
    return true;
}

/* The checks of a batch request shared by the datasets: batch, block and index in
 * range and a split of n tokens long enough for one window. split_name is "train" or
 * "val". */
ct_status ct_data_check_batch(const char *op, const char *split_name, int64_t n, int64_t batch, int64_t block,
                              uint64_t index);

/* What the loader reads of a sampler (src/data/sampler.c): the range of its indices
 * ([0, range)), and a batch sampler's sampler, batch size and drop_last. */
int64_t ct_data_sampler_range(const ct_sampler *s);
const ct_sampler *ct_data_batch_sampler_parts(const ct_batch_sampler *bs, int64_t *batch_size, bool *drop_last);

#endif
