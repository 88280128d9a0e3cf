/* libFuzzer target: the token loaders (llm.c token shards, any file as bytes, llm.c's
 * tokenizer file) and the other text file ctorch reads, TunableOp's results file. The
 * input is written to a file, since the loaders read paths; every accepted file must
 * give batches and decodable ids without reading out of bounds, and the results file
 * is parsed whole (this build has no device, so it goes no further). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ctorch.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char path[64];

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!path[0])
        snprintf(path, sizeof path, "/tmp/fuzz_tokens_%d.bin", (int)getpid());
    FILE *f = fopen(path, "wb");
    if (!f)
        return 0;
    size_t wrote = fwrite(data, 1, size, f);
    fclose(f);
    if (wrote != size)
        return 0;
    ct_token_dataset *ds = ct_token_dataset_open(path, 0.5);
    if (ds) {
        ct_tensor *x = NULL, *y = NULL;
        int64_t n = ct_token_dataset_len(ds, CT_SPLIT_VAL);
        if (n > 1 && ct_token_dataset_batch(ds, CT_SPLIT_VAL, 2, n - 1, 1, 0, &x, &y) == CT_OK) {
            ct_release(x);
            ct_release(y);
        }
        ct_token_dataset_free(ds);
    }
    ct_tokenizer *tk = ct_tokenizer_load(path);
    if (tk) {
        size_t len = 0;
        volatile unsigned sum = 0;
        for (int64_t i = 0; i < ct_tokenizer_vocab_size(tk); i++) {
            const char *s = ct_tokenizer_decode(tk, i, &len);
            for (size_t j = 0; s && j < len; j++)
                sum += (unsigned char)s[j];
        }
        (void)sum;
        ct_tokenizer_free(tk);
    }
    ct_clear_error();
    (void)ct_cuda_tunable_read_file(path);
    ct_clear_error();
    return 0;
}
