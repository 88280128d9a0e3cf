/* ctorch io: checkpoints in safetensors and PyTorch .pt formats.
 *
 * Loaded files become a tree of ct_value nodes: tensors, dicts (insertion-ordered,
 * string or integer keys), lists, tuples, ints, floats, strings, bools and None. A
 * state_dict is a dict of tensors; a training checkpoint is any nesting of these.
 * Nothing a file names is ever executed: see docs/serialization.md. */
#ifndef CTORCH_IO_H
#define CTORCH_IO_H

#include "core.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ct_value ct_value;

typedef enum ct_value_type {
    CT_VALUE_NONE = 0,
    CT_VALUE_BOOL,
    CT_VALUE_INT,
    CT_VALUE_FLOAT,
    CT_VALUE_STRING,
    CT_VALUE_BYTES,
    CT_VALUE_TENSOR,
    CT_VALUE_LIST,
    CT_VALUE_TUPLE,
    CT_VALUE_DICT,
} ct_value_type;

/* ------------------------------------------------------------ loading */

/* Reads a checkpoint, choosing the format by content (safetensors, torch.save zip),
 * never by file name. NULL on error (ct_last_error says what and where). A
 * safetensors file gives a dict of its tensors by name, after a "__metadata__" entry
 * (a dict of string -> string) when the file has metadata; ct_module_load_state_dict
 * ignores that entry, ct_load_state_dict_file leaves it out. */
CT_API ct_value *ct_load(const char *path);
CT_API ct_value *ct_load_safetensors(const char *path);
CT_API ct_value *ct_load_pt(const char *path);
/* Same, from memory (the bytes are copied as needed; buf may be freed afterwards). */
CT_API ct_value *ct_load_buffer(const void *buf, size_t len);
/* A state dict file, as safetensors.torch.load_file reads one: a dict of name ->
 * tensor and nothing else, from a safetensors file (its "__metadata__" left out) or a
 * torch.save file of a flat dict of tensors (model.state_dict()). Anything else in a
 * torch.save file (nested dicts, optimizer state, an epoch count) is a CT_ERROR_TYPE
 * naming the first entry that is not a tensor: read such checkpoints with ct_load. */
CT_API ct_value *ct_load_state_dict_file(const char *path);
/* safe_open(path).metadata(): the "__metadata__" dict of string -> string of a
 * safetensors file (empty when it has none), validated as ct_load validates it; no
 * tensor is made. */
CT_API ct_value *ct_load_safetensors_metadata(const char *path);

/* ------------------------------------------------------------ pickles */

/* How a pickle's persistent ids (torch.save's storages) become tensors: the loader's
 * side of ct_value_from_pickle. storage resolves a persistent id ('storage', type,
 * key, location, numel) when the pickle names it: dtype is the storage's element
 * type, or CT_DTYPE_UNDEFINED for torch.UntypedStorage (numel then counts bytes); pos
 * is the opcode's offset in the pickle, for messages; it returns a handle >= 0, or -1
 * with an error set. tensor makes a tensor of dtype over the storage of a handle, of
 * the given size and stride at offset (in elements of dtype; the reader has checked
 * that every element lies inside the storage), owned by the innermost scope as an
 * op's result is, or NULL with an error set. */
typedef struct ct_pickle_hooks {
    void *ctx;
    int64_t (*storage)(void *ctx, size_t pos, const char *key, ct_dtype dtype, int64_t numel, const char *location);
    ct_tensor *(*tensor)(void *ctx, int64_t storage, ct_dtype dtype, const int64_t *shape, const int64_t *stride,
                         int ndim, int64_t offset);
} ct_pickle_hooks;

/* Reads a pickle into a value tree; nothing it names is ever imported or called
 * (docs/serialization.md, "The restricted unpickler"). With hooks, it reads what
 * torch.load(weights_only=True) reads: the protocol-2 opcodes of that unpickler, its
 * allowlist of globals (tensors, Parameters, OrderedDicts, torch.Size, devices, bytes)
 * and tensors over the storages the hooks resolve. With hooks NULL it reads plain data
 * (dicts, lists, tuples, str, bytes, int, float, bool, None) of protocols 2 to 5, as
 * Python's pickle.dump writes it: a persistent id is an error, an integer beyond 64
 * bits reads as an (inexact) float. A shared object (the memo) is copied at each use;
 * nesting deeper than CT_VALUE_MAX_DEPTH (a container holding itself, too) and
 * sharing that expands beyond a bound proportional to len are errors. On failure:
 * NULL and a CT_ERROR_FORMAT error "value_from_pickle: <what> offset N: ...", what
 * naming the data (NULL: "pickle"). */
CT_API ct_value *ct_value_from_pickle(const void *data, size_t len, const ct_pickle_hooks *hooks,
                                      const char *what);

/* Numbers the storage of t for a pickle's persistent id: tensors that share a storage
 * should get one number. t may be on any device with data (not meta): the location
 * written is "cpu", so a function that keeps the bytes copies other devices' storages
 * to the host. Returns the number (>= 0), or -1 with an error set. */
typedef int64_t (*ct_pickle_storage_fn)(void *ctx, ct_tensor *t);

/* Writes v as a protocol-2 pickle, as torch.save writes the same objects (the
 * choices are in docs/serialization.md): dicts of str -> tensor as OrderedDicts,
 * tensors as _rebuild_tensor_v2 (v3 for uint16/32/64) over the persistent id
 * ('storage', <class>, str(storage(ctx, t)), 'cpu', numel), bytes through
 * _codecs.encode. Only ct_value_from_pickle's with-hooks subset is written, so that
 * torch.load(weights_only=True) and ctorch read it back. A tree holding a tensor needs
 * storage (NULL: only tensor-free trees are written). Returns the bytes (malloc'd:
 * free them with free()) and their count in *len, or NULL with an error: a meta
 * tensor, nesting deeper than CT_VALUE_MAX_DEPTH, storage's own error. */
CT_API void *ct_value_to_pickle(const ct_value *v, ct_pickle_storage_fn storage, void *ctx, size_t *len);

/* ------------------------------------------------------------ saving */

/* dict: a CT_VALUE_DICT of name -> contiguous or strided tensor. metadata: NULL or a dict
 * of string -> string, stored as "__metadata__". */
CT_API ct_status ct_save_safetensors(const char *path, const ct_value *dict, const ct_value *metadata);
/* Any ct_value tree, written as torch.save does (zip, 64-byte aligned records) so that
 * torch.load(path, weights_only=True) reads it back. Shared storages stay shared.
 * Tensors of other devices (CUDA) are written from a host copy of their storage, with
 * location "cpu" (torch.load puts them on the CPU, as map_location="cpu" would). */
CT_API ct_status ct_save_pt(const char *path, const ct_value *obj);

/* ------------------------------------------------------------ values */

CT_API void ct_value_free(ct_value *v);
CT_API ct_value_type ct_value_kind(const ct_value *v);
CT_API const char *ct_value_type_name(ct_value_type type);

/* Scalars (0 / NULL for the wrong kind). */
CT_API bool ct_value_bool(const ct_value *v);
CT_API int64_t ct_value_int(const ct_value *v);
CT_API double ct_value_float(const ct_value *v); /* ints convert */
/* Strings and bytes: NUL-terminated, length in *len if len is not NULL. */
CT_API const char *ct_value_str(const ct_value *v, size_t *len);
/* A new reference (owned by the innermost scope) to the tensor, or NULL. */
CT_API ct_tensor *ct_value_tensor(const ct_value *v);

/* Containers: lists, tuples and dicts. */
CT_API int64_t ct_value_len(const ct_value *v);
/* i-th element of a list/tuple, i-th value of a dict (borrowed). */
CT_API ct_value *ct_value_at(const ct_value *v, int64_t i);
/* i-th key of a dict (borrowed; a string or int value). */
CT_API ct_value *ct_value_key_at(const ct_value *v, int64_t i);
/* Dict lookup by string key (borrowed), NULL when absent. */
CT_API ct_value *ct_value_get(const ct_value *v, const char *key);

/* Builders: the container takes ownership of every value added to it. */
CT_API ct_value *ct_value_none(void);
CT_API ct_value *ct_value_new_bool(bool b);
CT_API ct_value *ct_value_new_int(int64_t i);
CT_API ct_value *ct_value_new_float(double f);
CT_API ct_value *ct_value_new_str(const char *s);
/* A string of len bytes (copied; it may hold NULs), and bytes (CT_VALUE_BYTES). */
CT_API ct_value *ct_value_new_strn(const char *s, size_t len);
CT_API ct_value *ct_value_new_bytes(const void *data, size_t len);
CT_API ct_value *ct_value_new_tensor(ct_tensor *t); /* retains t */
CT_API ct_value *ct_value_new_list(void);
CT_API ct_value *ct_value_new_tuple(void);
CT_API ct_value *ct_value_new_dict(void);
CT_API ct_status ct_value_append(ct_value *list_or_tuple, ct_value *item);
/* Sets (or replaces) a string key, keeping first-insertion order. */
CT_API ct_status ct_value_set(ct_value *dict, const char *key, ct_value *item);
/* The same with an integer key, as torch.optim's state dicts use ({0: {...}, 1: ...}). */
CT_API ct_status ct_value_set_int(ct_value *dict, int64_t key, ct_value *item);
/* del dict[key]: removes the entry and frees its value; the others keep their order.
 * A key that is not there is an error (CT_ERROR_INDEX), as Python's KeyError. O(len). */
CT_API ct_status ct_value_dict_remove(ct_value *dict, const char *key);
/* dict.pop(key): the same, but the value is handed to the caller (free it with
 * ct_value_free, or put it in another container); NULL with an error when absent. */
CT_API ct_value *ct_value_dict_pop(ct_value *dict, const char *key);

/* A deep copy; tensors in the copy are new references to the same tensors. */
CT_API ct_value *ct_value_clone(const ct_value *v);

/* Deepest nesting the loaders read and ct_save_pt and ct_value_to_json write, so that
 * freeing, cloning and printing a loaded tree can recurse without exhausting the C
 * stack. */
#define CT_VALUE_MAX_DEPTH 256

/* ------------------------------------------------------------ JSON */

/* Parses text[0..len) as exactly one JSON value (RFC 8259, strictly: no comments, no
 * trailing commas, UTF-8 text), surrounded by optional whitespace. Objects become
 * dicts in their order (a repeated key is an error), arrays lists, integers ints (one
 * outside int64 is an error), other numbers floats, true/false bools, null None;
 * nesting deeper than 128 levels is refused. On failure: NULL and a CT_ERROR_FORMAT
 * error "value_from_json: invalid JSON in <what>: <reason> at byte N", what naming
 * the text (NULL: "text"). */
CT_API ct_value *ct_value_from_json(const char *text, size_t len, const char *what);
/* Writes v as compact JSON (no spaces; dicts in insertion order, int keys as strings,
 * as Python's json.dumps) into buf, NUL-terminated when cap > 0, truncated to cap - 1
 * bytes; returns the full length (call with cap 0 to size the buffer), or -1 with an
 * error for what JSON cannot hold: tensors, bytes, NaN and infinities, strings that
 * are not UTF-8, nesting deeper than CT_VALUE_MAX_DEPTH. Strings escape '"', '\\'
 * and control characters only. */
CT_API int64_t ct_value_to_json(const ct_value *v, char *buf, size_t cap);
/* Offset of the first byte of s[0..len) that is not part of well-formed UTF-8
 * (overlong forms, surrogates and code points above U+10FFFF count as malformed), or
 * -1 when all of it is. */
CT_API int64_t ct_utf8_invalid_at(const void *s, size_t len);

#ifdef __cplusplus
}
#endif
#endif /* CTORCH_IO_H */
