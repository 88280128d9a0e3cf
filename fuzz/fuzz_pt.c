/* libFuzzer target: the torch.save reader (zip container, restricted unpickler,
 * storages and tensor bounds). An input starting with "PK" is loaded as a file; any
 * other input is taken as data.pkl and wrapped in a valid archive with storages "0"
 * (64 bytes) and "1" (6 bytes), so that mutations reach the unpickler past the zip
 * CRCs. The first and last reachable element of every tensor are read, so ASan sees a
 * tensor reaching past its storage. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ctorch.h"
#include "io/pt.h"
#include "util/value.h"
#include "io/zip.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static unsigned touch(const ct_value *v, int depth) {
    unsigned sum = 0;
    if (!v || depth > CT_VALUE_MAX_DEPTH)
        return 0;
    ct_value_type k = ct_value_kind(v);
    if (k == CT_VALUE_TENSOR) {
        ct_tensor *t = ct_value_tensor(v);
        int nd = ct_tensor_dim(t);
        const int64_t *shape = ct_tensor_shape(t), *strides = ct_tensor_strides(t);
        const uint8_t *p = ct_tensor_data(t);
        size_t esz = ct_tensor_element_size(t);
        if (p && ct_tensor_numel(t) > 0) {
            /* first and last reachable element */
            int64_t last = 0;
            for (int i = 0; i < nd; i++)
                last += (shape[i] - 1) * strides[i];
            sum += p[0] + p[(size_t)last * esz + esz - 1];
        }
        ct_release(t);
    } else if (k == CT_VALUE_LIST || k == CT_VALUE_TUPLE || k == CT_VALUE_DICT) {
        for (int64_t i = 0; i < ct_value_len(v); i++)
            sum += touch(ct_value_at(v, i), depth + 1);
    } else if (k == CT_VALUE_STRING || k == CT_VALUE_BYTES) {
        size_t n;
        const char *s = ct_value_str(v, &n);
        for (size_t i = 0; i < n; i++)
            sum += (uint8_t)s[i];
    }
    return sum;
}

/* data as archive/data.pkl of a small archive, in a heap buffer of exactly its size. */
static uint8_t *wrap_pickle(const uint8_t *data, size_t size, size_t *len) {
    static const uint8_t storage[64] = {1, 2, 3, 4, 5, 6, 7, 8};
    char *buf = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&buf, &n);
    if (!f)
        return NULL;
    ct_zip_writer w;
    ct_zip_writer_init(&w, f, "fuzz");
    ct_zip_write_entry(&w, "archive/data.pkl", data, size);
    ct_zip_write_entry(&w, "archive/data/0", storage, sizeof storage);
    ct_zip_write_entry(&w, "archive/data/1", storage, 6);
    ct_zip_write_entry(&w, "archive/version", "3\n", 2);
    ct_zip_writer_finish(&w);
    fclose(f);
    uint8_t *exact = malloc(n ? n : 1);
    if (exact)
        memcpy(exact, buf, n);
    free(buf);
    *len = n;
    return exact;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    uint8_t *copy;
    if (size >= 2 && data[0] == 'P' && data[1] == 'K') {
        /* A heap copy of exactly size bytes, so reads past the input are caught. */
        copy = malloc(size);
        if (!copy)
            return 0;
        memcpy(copy, data, size);
    } else {
        copy = wrap_pickle(data, size, &size);
        if (!copy)
            return 0;
    }
    ct_value *v = ct_pt_load_buffer(copy, size, "fuzz.pt");
    free(copy);
    if (v) {
        volatile unsigned s = touch(v, 0);
        (void)s;
        ct_value_free(v);
    }
    ct_clear_error();
    return 0;
}
