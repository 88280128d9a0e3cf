/* Internal layout of ct_value trees and the helpers the loaders share. */
#ifndef CT_IO_VALUE_H
#define CT_IO_VALUE_H

#include "ctorch.h"

/* Note [Value trees]
 * A ct_value owns everything below it: containers own their items (and a dict its
 * keys), a tensor node owns one reference made with ct_retain, so a tree outlives
 * every scope. Nothing is shared between nodes: a loader that meets the same Python
 * object twice (a pickle memo hit) stores a ct_value_clone of it, and tensors inside a
 * clone share their storage, which is what aliasing means for a checkpoint. Dicts keep
 * insertion order; past a few entries they also keep an open-addressing index so that
 * building a state_dict of thousands of names stays linear.
 *
 * Each value records the container that holds it, so that the builders refuse a value
 * that already has one (it would be freed twice) and a container put inside itself or
 * inside one of its own descendants (freeing would never end). */
struct ct_value {
    ct_value_type type;
    ct_value *parent; /* the container holding it (as an item or a key), or NULL */
    union {
        bool b;
        int64_t i;
        double f;
        struct {
            char *data; /* NUL-terminated; bytes may also contain NULs */
            size_t len;
        } s;
        ct_tensor *t;
        struct {
            ct_value **items; /* list/tuple elements, dict values */
            ct_value **keys;  /* dicts only: CT_VALUE_STRING or CT_VALUE_INT keys */
            int64_t len, cap;
            int64_t *index; /* dicts: slots holding item position + 1, 0 = empty */
            int64_t index_cap;
        } c;
    } u;
};

/* Dict insertion with a string or int key value; takes ownership of key and item,
 * even on failure. A key already present keeps its position and gets the new item. */
ct_status ct_value_dict_set(ct_value *dict, ct_value *key, ct_value *item);
ct_status ct_value_dict_set_int(ct_value *dict, int64_t key, ct_value *item);
/* Position of key in dict, or -1 (no error set). key is a string or int value. */
int64_t ct_value_dict_find(const ct_value *dict, const ct_value *key);
int64_t ct_value_dict_find_str(const ct_value *dict, const char *key, size_t len);
/* Dict lookup by int key (borrowed), NULL when absent (no error set). */
ct_value *ct_value_get_int(const ct_value *dict, int64_t key);

/* Removes and returns the last element of a list or tuple (NULL when empty). Handy
 * for a pickle stack kept as a list. */
ct_value *ct_value_pop(ct_value *list);

/* ct_value_new_strn, ct_value_new_bytes, ct_value_clone and CT_VALUE_MAX_DEPTH are
 * public (ctorch/io.h). */

#endif /* CT_IO_VALUE_H */
