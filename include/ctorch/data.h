/* ctorch data: datasets, a batching loader with background workers, and readers for
 * IDX files (MNIST, Fashion-MNIST) and text as a character dataset.
 *
 *   ct_tensor *x, *y;
 *   ct_mnist_load("/usr/share/datasets/fashion-mnist", true, &x, &y);
 *   ct_tensor *fields[2] = {x, y};
 *   ct_dataset *ds = ct_tensor_dataset_new(fields, 2);
 *   ct_dataloader_options o = ct_dataloader_defaults(64);
 *   o.shuffle = true; o.num_workers = 2;
 *   ct_dataloader *dl = ct_dataloader_new(ds, &o);
 *   ct_tensor *batch[2];
 *   for (ct_dataloader_iter_begin(dl);;) {               // one epoch
 *       ct_scope_begin();                                 // one scope per step
 *       int r = ct_dataloader_next(dl, batch);
 *       if (r == 1) { ... }
 *       ct_scope_end();
 *       if (r != 1) break;
 *   }
 *
 * See docs/data.md. */
#ifndef CTORCH_DATA_H
#define CTORCH_DATA_H

#include "core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------ IDX files */

/* Reads an IDX file (plain or gzip-compressed, told apart by content) into a CPU
 * tensor of the file's dtype (uint8, int8, int16, int32, float32, float64) and shape.
 * Every header field is checked against the data actually present; a malformed file
 * is a CT_ERROR_FORMAT naming the problem. */
CT_API ct_tensor *ct_idx_load(const char *path);
/* The MNIST layout in dir: "{train,t10k}-{images-idx3,labels-idx1}-ubyte" with or
 * without ".gz". images: uint8 (N, 28, 28) (any (N, H, W) is accepted); labels: int64
 * (N). Both are new references (owned by the innermost scope); nothing on error. */
CT_API ct_status ct_mnist_load(const char *dir, bool train, ct_tensor **images, ct_tensor **labels);

/* ------------------------------------------------------------ datasets */

typedef struct ct_dataset ct_dataset;

/* Writes the nfields tensors of sample `index` (0 <= index < length) to fields[] as
 * new references (owned by the innermost scope, as any tensor function returns them).
 * Called from loader worker threads when num_workers > 0, so it must be thread-safe. */
typedef ct_status (*ct_dataset_get_fn)(void *ctx, int64_t index, ct_tensor **fields);

/* A dataset of `length` samples of nfields tensors each. free_ctx (may be NULL) is
 * called on ctx by ct_dataset_free. */
CT_API ct_dataset *ct_dataset_new(int64_t length, int nfields, ct_dataset_get_fn get, void *ctx,
                                  void (*free_ctx)(void *ctx));
/* torch.utils.data.TensorDataset: sample i is (t[0][i], ..., t[n-1][i]). The tensors
 * (retained) must agree in their first dimension. */
CT_API ct_dataset *ct_tensor_dataset_new(ct_tensor *const *tensors, int n);
CT_API void ct_dataset_free(ct_dataset *ds);
CT_API int64_t ct_dataset_len(const ct_dataset *ds);
CT_API int ct_dataset_num_fields(const ct_dataset *ds);
/* One sample, with the index checked. */
CT_API ct_status ct_dataset_get(const ct_dataset *ds, int64_t index, ct_tensor **fields);

/* torch.utils.data.Subset: sample i is ds's sample indices[i]. ds is borrowed and must
 * outlive the subset; the n indices are copied and each must be in [0, len(ds)). */
CT_API ct_dataset *ct_subset_new(ct_dataset *ds, const int64_t *indices, int64_t n);
/* torch.utils.data.random_split: n subsets (written to out[0..n), each freed with
 * ct_dataset_free, ds borrowed) of a random permutation of ds's indices, fixed by seed.
 * lengths are sample counts (whole numbers summing to len(ds)) or, when each is in
 * [0, 1] and they sum to 1, fractions: floor(len * fraction) each, and the remainder
 * handed out one by one from the first subset on, as PyTorch does. */
CT_API ct_status ct_random_split(ct_dataset *ds, const double *lengths, int n, uint64_t seed, ct_dataset **out);
/* torch.utils.data.ConcatDataset: the samples of ds[0], then those of ds[1], ... The n
 * datasets are borrowed and must have the same number of fields. */
CT_API ct_dataset *ct_concat_dataset_new(ct_dataset *const *ds, int n);

/* ------------------------------------------------------------ samplers
 * torch.utils.data's samplers: which sample indices an epoch visits, in which order.
 * A sampler's indices for epoch e are a function of (seed, e) only (Philox, as the
 * loader's shuffle), so ct_dataloader_set_epoch replays them. */

typedef struct ct_sampler ct_sampler;

/* SequentialSampler: 0, 1, ..., n - 1. */
CT_API ct_sampler *ct_sequential_sampler_new(int64_t n);
/* RandomSampler over n samples. Without replacement: a permutation of the n indices
 * (num_samples beyond n chains whole permutations, then part of one); with it,
 * num_samples independent uniform draws. num_samples <= 0 means n. */
CT_API ct_sampler *ct_random_sampler_new(int64_t n, bool replacement, int64_t num_samples, uint64_t seed);
/* WeightedRandomSampler: num_samples indices i in [0, n) drawn with probability
 * proportional to weights[i] (copied), with or without replacement (then num_samples
 * <= the number of categories, as torch.multinomial). */
CT_API ct_sampler *ct_weighted_random_sampler_new(const double *weights, int64_t n, int64_t num_samples,
                                                  bool replacement, uint64_t seed);
CT_API void ct_sampler_free(ct_sampler *s);
/* Indices per epoch. */
CT_API int64_t ct_sampler_len(const ct_sampler *s);
/* Writes epoch `epoch`'s ct_sampler_len(s) indices to out. */
CT_API ct_status ct_sampler_indices(const ct_sampler *s, int64_t epoch, int64_t *out);

/* BatchSampler: the sampler's indices cut into batches of batch_size, the last one
 * smaller unless drop_last. The sampler is borrowed and must outlive it. */
typedef struct ct_batch_sampler ct_batch_sampler;
CT_API ct_batch_sampler *ct_batch_sampler_new(const ct_sampler *sampler, int64_t batch_size, bool drop_last);
CT_API void ct_batch_sampler_free(ct_batch_sampler *bs);
/* Batches per epoch. */
CT_API int64_t ct_batch_sampler_len(const ct_batch_sampler *bs);

/* ------------------------------------------------------------ loader */

/* Builds the batch fields out[0..nfields) (new references) from samples[b * nfields + f]
 * for b < batch. The default stacks each field along a new first dimension. */
typedef ct_status (*ct_collate_fn)(void *ctx, ct_tensor *const *samples, int64_t batch, int nfields,
                                   ct_tensor **out);

typedef struct ct_dataloader_options {
    int64_t batch_size;  /* >= 1 */
    bool shuffle;        /* a new permutation each epoch, fixed by (seed, epoch) */
    bool drop_last;      /* drop a last, smaller batch */
    uint64_t seed;
    int num_workers;     /* 0: batches are made by the caller's thread, on demand */
    int prefetch_factor; /* batches each worker may have ready ahead (2) */
    ct_collate_fn collate; /* NULL: stack */
    void *collate_ctx;
    /* torch's sampler= (exclusive with shuffle) and batch_sampler= (exclusive with
     * shuffle, sampler and drop_last; batch_size must be 1 or the batch sampler's).
     * Borrowed: they must outlive the loader. NULL: shuffle/seed decide the order. */
    const ct_sampler *sampler;
    const ct_batch_sampler *batch_sampler;
    int32_t reserved[4];
} ct_dataloader_options;

CT_API ct_dataloader_options ct_dataloader_defaults(int64_t batch_size);

typedef struct ct_dataloader ct_dataloader;

/* ds is borrowed and must outlive the loader. Workers start at once and prefetch the
 * first epoch's batches. */
CT_API ct_dataloader *ct_dataloader_new(ct_dataset *ds, const ct_dataloader_options *o);
/* Stops the workers (waiting for the batch each is making) and frees everything. */
CT_API void ct_dataloader_free(ct_dataloader *dl);
/* Batches per epoch. */
CT_API int64_t ct_dataloader_len(const ct_dataloader *dl);
/* The next batch of the current epoch into fields[0..nfields) (new references owned
 * by the innermost scope): returns 1. At the end of an epoch returns 0 and moves to
 * the next epoch (the following call starts it). -1 on error (a failing get or
 * collate: the batch is skipped and the error is the worker's). The batch order
 * depends on the seed and the epoch only, never on num_workers. */
CT_API int ct_dataloader_next(ct_dataloader *dl, ct_tensor **fields);
/* Starts a loop over the loader, as PyTorch's iter(loader) at each `for`: when the
 * current epoch has been partly consumed (a loop that broke out early), it restarts
 * at that epoch's first batch; otherwise (a fresh loader, or an epoch that ended) it
 * does nothing, so the batches already prefetched are kept. The epoch number and its
 * order do not change. See docs/data.md for the loop with a scope per step. */
CT_API ct_status ct_dataloader_iter_begin(ct_dataloader *dl);
/* Restarts at the beginning of `epoch` (0-based): to resume, or to replay one. */
CT_API ct_status ct_dataloader_set_epoch(ct_dataloader *dl, int64_t epoch);
CT_API int64_t ct_dataloader_epoch(const ct_dataloader *dl);

/* ------------------------------------------------------------ text */

/* A text as a sequence of byte tokens: the vocabulary is the set of bytes present,
 * in byte order (nanoGPT's shakespeare_char uses the sorted characters). The first
 * (1 - val_fraction) of the tokens are the training split, the rest validation. */
typedef struct ct_char_dataset ct_char_dataset;
typedef enum ct_text_split { CT_SPLIT_TRAIN = 0, CT_SPLIT_VAL = 1 } ct_text_split;

CT_API ct_char_dataset *ct_char_dataset_from_text(const char *text, size_t len, double val_fraction);
CT_API ct_char_dataset *ct_char_dataset_from_file(const char *path, double val_fraction);
CT_API void ct_char_dataset_free(ct_char_dataset *ds);
CT_API int ct_char_dataset_vocab_size(const ct_char_dataset *ds);
/* The byte of token id (0 <= id < vocab size), or -1. */
CT_API int ct_char_dataset_byte(const ct_char_dataset *ds, int id);
/* Number of tokens in a split. */
CT_API int64_t ct_char_dataset_len(const ct_char_dataset *ds, ct_text_split split);
/* All tokens of a split, int64 (n). */
CT_API ct_tensor *ct_char_dataset_tokens(const ct_char_dataset *ds, ct_text_split split);
/* Token ids (int64, (len)) of a string; a byte outside the vocabulary is an error. */
CT_API ct_tensor *ct_char_dataset_encode(const ct_char_dataset *ds, const char *s, size_t len);
/* Writes the bytes of integer token ids (any shape, read in order) to buf, at most
 * cap - 1 of them plus a NUL. Returns the number of tokens (snprintf-style), or -1. */
CT_API int64_t ct_char_dataset_decode(const ct_char_dataset *ds, const ct_tensor *ids, char *buf, size_t cap);
/* nanoGPT's get_batch: batch windows of block + 1 tokens at random offsets of the
 * split; x (batch, block) and y, the same windows shifted by one, int64. The offsets
 * are a function of (seed, index) only, so batch `index` can be reproduced. */
CT_API ct_status ct_char_dataset_batch(const ct_char_dataset *ds, ct_text_split split, int64_t batch, int64_t block,
                                       uint64_t seed, uint64_t index, ct_tensor **x, ct_tensor **y);

/* ------------------------------------------------------------ tokens
 * Token ids for language models (docs/data.md, "Token shards"). A file whose first
 * int32 is 20240520 is read as an llm.c token shard (version 1: GPT-2 ids as uint16,
 * vocabulary 50257); any other file as bytes (vocabulary 256). The first
 * (1 - val_fraction) of the tokens are the training split, the rest validation. */
typedef struct ct_token_dataset ct_token_dataset;
typedef enum ct_token_format { CT_TOKENS_BYTES = 0, CT_TOKENS_SHARD = 1 } ct_token_format;

CT_API ct_token_dataset *ct_token_dataset_open(const char *path, double val_fraction);
CT_API void ct_token_dataset_free(ct_token_dataset *ds);
CT_API ct_token_format ct_token_dataset_format(const ct_token_dataset *ds);
/* 50257 for a GPT-2 shard, 256 for bytes; -1 for NULL. */
CT_API int64_t ct_token_dataset_vocab_size(const ct_token_dataset *ds);
CT_API int64_t ct_token_dataset_len(const ct_token_dataset *ds, ct_text_split split);
/* As ct_char_dataset_batch: batch windows at random offsets of the split, x (batch,
 * block) and y shifted by one, int64 on the CPU, a function of (seed, index) only. */
CT_API ct_status ct_token_dataset_batch(const ct_token_dataset *ds, ct_text_split split, int64_t batch,
                                        int64_t block, uint64_t seed, uint64_t index, ct_tensor **x, ct_tensor **y);

/* llm.c's tokenizer file (gpt2_tokenizer.bin): the text of each token id, for printing
 * samples. Decoding only; there is no encoder. */
typedef struct ct_tokenizer ct_tokenizer;
CT_API ct_tokenizer *ct_tokenizer_load(const char *path);
CT_API void ct_tokenizer_free(ct_tokenizer *tk);
CT_API int64_t ct_tokenizer_vocab_size(const ct_tokenizer *tk);
/* The end-of-text id (version 2 files), else -1. */
CT_API int64_t ct_tokenizer_eot(const ct_tokenizer *tk);
/* The bytes of token id (*len of them, NUL-terminated), or NULL with the error set. */
CT_API const char *ct_tokenizer_decode(const ct_tokenizer *tk, int64_t id, size_t *len);

#ifdef __cplusplus
}
#endif
#endif /* CTORCH_DATA_H */
