/* libFuzzer target: the pickle reader without hooks (plain data, as `ctorch memviz`
 * reads memory snapshots) and the writer. Whatever the reader accepts, the writer must
 * write and the reader must read back to the same tree (compared as JSON where JSON can
 * hold it). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ctorch.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    ct_value *v = ct_value_from_pickle(data, size, NULL, "fuzz");
    if (!v)
        return 0;
    size_t len = 0;
    void *bytes = ct_value_to_pickle(v, NULL, NULL, &len);
    if (!bytes)
        abort(); /* a plain tree read back must be writable */
    ct_value *back = ct_value_from_pickle(bytes, len, NULL, "fuzz");
    free(bytes);
    if (!back)
        abort();
    int64_t n1 = ct_value_to_json(v, NULL, 0), n2 = ct_value_to_json(back, NULL, 0);
    if (n1 != n2)
        abort();
    if (n1 > 0 && n1 < (1 << 20)) {
        char *a = malloc((size_t)n1 + 1), *b = malloc((size_t)n1 + 1);
        if (a && b) {
            ct_value_to_json(v, a, (size_t)n1 + 1);
            ct_value_to_json(back, b, (size_t)n1 + 1);
            if (memcmp(a, b, (size_t)n1) != 0)
                abort();
        }
        free(a);
        free(b);
    }
    ct_value_free(back);
    ct_value_free(v);
    ct_clear_error();
    return 0;
}
