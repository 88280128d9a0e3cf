/* libFuzzer target: ct_load_buffer (format detection and every reader behind it), then
 * the safetensors reader directly, copying and viewing (zero-copy over a heap copy
 * standing in for a file mapping, so ASan sees any tensor reaching past the input). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ctorch.h"
#include "io/safetensors.h"
#include "util/value.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Reads every byte of every tensor in the tree. */
static unsigned touch(const ct_value *v, int depth) {
    unsigned sum = 0;
    if (!v || depth > CT_VALUE_MAX_DEPTH)
        return 0;
    ct_value_type k = ct_value_kind(v);
    if (k == CT_VALUE_TENSOR) {
        ct_tensor *t = ct_value_tensor(v);
        const uint8_t *p = ct_tensor_data(t);
        size_t n = (size_t)ct_tensor_numel(t) * ct_tensor_element_size(t);
        for (size_t i = 0; p && i < n; i++)
            sum += p[i];
        ct_release(t);
    } else if (k == CT_VALUE_LIST || k == CT_VALUE_TUPLE || k == CT_VALUE_DICT) {
        for (int64_t i = 0; i < ct_value_len(v); i++)
            sum += touch(ct_value_at(v, i), depth + 1);
    } else if (k == CT_VALUE_STRING || k == CT_VALUE_BYTES) {
        size_t n;
        const char *s = ct_value_str(v, &n);
        for (size_t i = 0; i < n; i++)
            sum += (unsigned char)s[i];
    }
    return sum;
}

static volatile unsigned sink;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    ct_value *v = ct_load_buffer(data, size);
    sink += touch(v, 0);
    ct_value_free(v);

    v = ct_safetensors_load_buffer(data, size, NULL, NULL);
    sink += touch(v, 0);
    ct_value_free(v);

    ct_mapping *m = calloc(1, sizeof *m);
    uint8_t *copy = malloc(size ? size : 1);
    if (m && copy) {
        memcpy(copy, data, size);
        atomic_init(&m->refs, 1);
        m->data = copy;
        m->len = size;
        v = ct_safetensors_load_buffer(copy, size, m, "fuzz");
        ct_mapping_release(m); /* the tensors keep their own references */
        sink += touch(v, 0);
        ct_value_free(v);
    } else {
        free(m);
        free(copy);
    }
    ct_clear_error();
    return 0;
}
