/* View operations: new shape/stride/offset metadata over the same storage.
 *
 * Every function here (except the copy path of reshape and flatten) returns a tensor
 * made by ct_tensor_make_view, so it shares the input's storage and therefore its
 * version counter (Note [Version counter] in tensor_impl.h). Apart from that copy,
 * nothing here touches element data, which is why all of them work on META tensors. */
#include <string.h>

#include "view.h"

/* ------------------------------------------------------------------ argument checks */

static bool check_ndim(const char *op, int ndim) {
    if (ndim < 0) {
        ct_error(CT_ERROR_VALUE, op, "the number of dimensions must be non-negative, got %d", ndim);
        return false;
    }
    if (ndim > CT_MAX_DIMS) {
        ct_error(CT_ERROR_VALUE, op, "ctorch supports at most %d dimensions, got %d", CT_MAX_DIMS, ndim);
        return false;
    }
    return true;
}

/* A (pointer, count) argument: the count must fit the dimension limit and the pointer
 * may be NULL only for an empty list. */
static bool check_list(const char *op, const char *what, const int64_t *list, int n) {
    if (!check_ndim(op, n))
        return false;
    if (n > 0 && !list) {
        ct_error(CT_ERROR_NULL_ARGUMENT, op, "%s is NULL but its length is %d", what, n);
        return false;
    }
    return true;
}

/* Stride arithmetic that cannot trap: the sizes and strides of tensors without
 * elements are unconstrained (as_strided accepts any stride, a view of an empty tensor
 * any sizes), so their products may leave int64. Such metadata never reaches an
 * element, so two's complement wrapping is as good as any value and keeps the
 * behaviour defined. */
static int64_t wmul(int64_t a, int64_t b) { return (int64_t)((uint64_t)a * (uint64_t)b); }
static int64_t wadd(int64_t a, int64_t b) { return (int64_t)((uint64_t)a + (uint64_t)b); }

/* Sizes are multiplied left to right and must stay in int64 at every step, as
 * PyTorch's numel check does: (0, 2^40, 2^40) is a valid empty shape, (2^40, 2^40, 0)
 * is not. */
static ct_tensor *view_of(const char *op, const ct_tensor *t, int64_t offset, const int64_t *shape,
                          const int64_t *strides, int ndim) {
    if (ct_shape_numel(shape, ndim) < 0) {
        char buf[256];
        ct_error(CT_ERROR_VALUE, op, "the number of elements of shape %s overflows",
                 ct_shape_str(shape, ndim, buf, sizeof buf));
        return NULL;
    }
    return ct_tensor_make_view(t, offset, shape, strides, ndim);
}

/* ------------------------------------------------------------------ view / reshape */

/* Resolves a -1 in shape against numel (torch's infer_size). Writes the result to out. */
static bool infer_size(const char *op, const int64_t *shape, int ndim, int64_t numel, int64_t *out) {
    int infer = -1;
    int64_t known = 1;
    bool has_zero = false, overflow = false;
    char buf[256];
    for (int i = 0; i < ndim; i++) {
        out[i] = shape[i];
        if (shape[i] == -1) {
            if (infer >= 0) {
                ct_error(CT_ERROR_VALUE, op, "only one dimension can be inferred");
                return false;
            }
            infer = i;
        } else if (shape[i] < 0) {
            ct_error(CT_ERROR_VALUE, op, "invalid shape dimension %lld at index %d of shape %s", (long long)shape[i],
                     i, ct_shape_str(shape, ndim, buf, sizeof buf));
            return false;
        } else if (shape[i] == 0) {
            has_zero = true;
        } else if (!overflow) {
            if (known > INT64_MAX / shape[i])
                overflow = true;
            else
                known *= shape[i];
        }
    }
    /* A product too large for int64 can never equal numel unless a zero size makes it 0. */
    if (has_zero)
        known = 0;
    else if (overflow)
        goto invalid;
    if (known == numel || (infer >= 0 && known > 0 && numel % known == 0)) {
        if (infer >= 0) {
            if (known == 0) {
                ct_error(CT_ERROR_VALUE, op,
                         "cannot reshape tensor of 0 elements into shape %s because the unspecified dimension size "
                         "-1 can be any value and is ambiguous",
                         ct_shape_str(shape, ndim, buf, sizeof buf));
                return false;
            }
            out[infer] = numel / known;
        }
        return true;
    }
invalid:
    ct_error(CT_ERROR_VALUE, op, "shape '%s' is invalid for input of size %lld",
             ct_shape_str(shape, ndim, buf, sizeof buf),
             (long long)numel);
    return false;
}

/* Note [When a view can change the shape]
 * Walk the old dims from the innermost outwards, grouping them into runs in which each
 * dim steps exactly over the whole of the dims inside it (size-1 dims never break a
 * run, whatever their stride). Inside a run the elements are evenly spaced, so the new
 * shape may split or merge dims there freely; it may not place a new dim across two
 * runs. So the new dims, also walked from the innermost, must fill each run exactly:
 * consume new dims until their product reaches the run's element count (size-1 new
 * dims always fit), giving each the stride it would have inside the run. If the
 * products ever disagree, no strides exist and only a copy can produce the shape.
 * This is PyTorch's rule (computeStride in ATen), including its two conventions for
 * tensors without elements: the old strides are kept when the shape does not change,
 * and contiguous strides (sizes clamped to at least 1) are used otherwise. */
static bool view_strides(const int64_t *oshape, const int64_t *ostrides, int ondim, int64_t numel,
                         const int64_t *nshape, int nndim, int64_t *out) {
    if (ondim == 0) {
        for (int i = 0; i < nndim; i++)
            out[i] = 1;
        return true;
    }
    if (numel == 0) {
        if (ondim == nndim && memcmp(oshape, nshape, (size_t)nndim * sizeof *nshape) == 0) {
            memcpy(out, ostrides, (size_t)nndim * sizeof *out);
            return true;
        }
        int64_t s = 1;
        for (int i = nndim - 1; i >= 0; i--) {
            out[i] = s;
            s = wmul(s, nshape[i] > 1 ? nshape[i] : 1);
        }
        return true;
    }
    int nd = nndim - 1;                   /* next new dim to place, innermost first */
    int64_t run_stride = ostrides[ondim - 1]; /* stride of the run's innermost element */
    int64_t run_numel = 1, placed = 1;
    for (int od = ondim - 1; od >= 0; od--) {
        run_numel *= oshape[od];
        bool run_ends = od == 0 || (oshape[od - 1] != 1 && ostrides[od - 1] != wmul(run_numel, run_stride));
        if (!run_ends)
            continue;
        while (nd >= 0 && (placed < run_numel || nshape[nd] == 1)) {
            out[nd] = wmul(placed, run_stride);
            placed *= nshape[nd];
            nd--;
        }
        if (placed != run_numel)
            return false;
        if (od > 0) {
            run_stride = ostrides[od - 1];
            run_numel = 1;
            placed = 1;
        }
    }
    return nd == -1;
}

/* Checks the arguments of view/reshape and resolves the shape and the view strides.
 * *viewable tells whether strides exist. */
static bool plan_reshape(const char *op, const ct_tensor *t, const int64_t *shape, int ndim, int64_t *size,
                         int64_t *strides, bool *viewable) {
    if (!check_list(op, "shape", shape, ndim) || !infer_size(op, shape, ndim, t->numel, size))
        return false;
    if (ct_shape_numel(size, ndim) < 0) { /* see view_of */
        char buf[256];
        ct_error(CT_ERROR_VALUE, op, "the number of elements of shape %s overflows",
                 ct_shape_str(size, ndim, buf, sizeof buf));
        return false;
    }
    *viewable = view_strides(t->shape, t->strides, t->ndim, t->numel, size, ndim, strides);
    return true;
}

ct_tensor *ct_view_impl(const ct_tensor *t, const int64_t *shape, int ndim) {
    CT_CHECK_ARG("view", t);
    int64_t size[CT_MAX_DIMS], strides[CT_MAX_DIMS];
    bool viewable;
    if (!plan_reshape("view", t, shape, ndim, size, strides, &viewable))
        return NULL;
    if (!viewable) {
        ct_error(CT_ERROR_VALUE, "view",
                 "view size is not compatible with input tensor's size and stride (at least one dimension spans "
                 "across two contiguous subspaces). Use .reshape(...) instead.");
        return NULL;
    }
    return view_of("view", t, t->offset, size, strides, ndim);
}

ct_tensor *ct_reshape_impl(const ct_tensor *t, const int64_t *shape, int ndim) {
    CT_CHECK_ARG("reshape", t);
    int64_t size[CT_MAX_DIMS], strides[CT_MAX_DIMS];
    bool viewable;
    if (!plan_reshape("reshape", t, shape, ndim, size, strides, &viewable))
        return NULL;
    if (viewable)
        return view_of("reshape", t, t->offset, size, strides, ndim);
    /* As torch.reshape: a contiguous copy reinterpreted in the new shape. The result
     * owns its storage and is not a view of anything (torch's _unsafe_view). */
    ct_scope_begin();
    ct_tensor *copy = ct_clone_impl(t);
    ct_tensor *out = NULL;
    if (copy)
        out = ct_tensor_make(copy->storage, copy->offset, size, NULL, ndim, copy->dtype, copy->device);
    if (out) {
        out->requires_grad = t->requires_grad;
        out->inference = t->inference;
    }
    ct_keep(out);
    ct_scope_end();
    return out;
}



/* ------------------------------------------------------------------ reordering dims */

ct_tensor *ct_permute_impl(const ct_tensor *t, const int64_t *dims, int ndim) {
    CT_CHECK_ARG("permute", t);
    if (ndim != t->ndim) {
        ct_error(CT_ERROR_VALUE, "permute",
                 "number of dimensions in the tensor input does not match the length of the desired ordering of "
                 "dimensions i.e. input.dim() = %d is not equal to len(dims) = %d",
                 t->ndim, ndim);
        return NULL;
    }
    if (!check_list("permute", "dims", dims, ndim))
        return NULL;
    int64_t size[CT_MAX_DIMS], strides[CT_MAX_DIMS];
    bool seen[CT_MAX_DIMS] = {false};
    for (int i = 0; i < ndim; i++) {
        int d;
        if (ct_wrap_dim("permute", dims[i], ndim, &d))
            return NULL;
        if (seen[d]) {
            ct_error(CT_ERROR_VALUE, "permute", "duplicate dims are not allowed.");
            return NULL;
        }
        seen[d] = true;
        size[i] = t->shape[d];
        strides[i] = t->strides[d];
    }
    return view_of("permute", t, t->offset, size, strides, ndim);
}

static ct_tensor *transpose_impl(const char *op, const ct_tensor *t, int dim0, int dim1) {
    int a, b;
    if (ct_wrap_dim(op, dim0, t->ndim, &a) || ct_wrap_dim(op, dim1, t->ndim, &b))
        return NULL;
    int64_t size[CT_MAX_DIMS], strides[CT_MAX_DIMS];
    memcpy(size, t->shape, sizeof size);
    memcpy(strides, t->strides, sizeof strides);
    if (t->ndim > 0) {
        size[a] = t->shape[b];
        size[b] = t->shape[a];
        strides[a] = t->strides[b];
        strides[b] = t->strides[a];
    }
    return view_of(op, t, t->offset, size, strides, t->ndim);
}

ct_tensor *ct_transpose_impl(const ct_tensor *t, int dim0, int dim1) {
    CT_CHECK_ARG("transpose", t);
    return transpose_impl("transpose", t, dim0, dim1);
}

ct_tensor *ct_t_impl(const ct_tensor *t) {
    CT_CHECK_ARG("t", t);
    if (t->ndim > 2) {
        ct_error(CT_ERROR_VALUE, "t", "t() expects a tensor with <= 2 dimensions, but self is %dD", t->ndim);
        return NULL;
    }
    return transpose_impl("t", t, 0, t->ndim < 2 ? 0 : 1);
}

ct_tensor *ct_movedim_impl(const ct_tensor *t, int source, int destination) {
    CT_CHECK_ARG("movedim", t);
    int src, dst;
    if (ct_wrap_dim("movedim", source, t->ndim, &src) || ct_wrap_dim("movedim", destination, t->ndim, &dst))
        return NULL;
    int64_t size[CT_MAX_DIMS], strides[CT_MAX_DIMS];
    /* The other dims keep their relative order around the moved one. */
    for (int i = 0, from = 0; i < t->ndim; i++) {
        if (i == dst) {
            size[i] = t->shape[src];
            strides[i] = t->strides[src];
            continue;
        }
        if (from == src)
            from++;
        size[i] = t->shape[from];
        strides[i] = t->strides[from];
        from++;
    }
    return view_of("movedim", t, t->offset, size, strides, t->ndim);
}

/* ------------------------------------------------------------------ expand / squeeze */

ct_tensor *ct_expand_impl(const ct_tensor *t, const int64_t *shape, int ndim) {
    CT_CHECK_ARG("expand", t);
    if (!check_list("expand", "shape", shape, ndim))
        return NULL;
    char want[256], have[256];
    if (ndim < t->ndim) {
        ct_error(CT_ERROR_VALUE, "expand",
                 "the number of sizes provided (%d) must be greater or equal to the number of dimensions in the "
                 "tensor (%d)",
                 ndim, t->ndim);
        return NULL;
    }
    int64_t size[CT_MAX_DIMS], strides[CT_MAX_DIMS];
    /* Align the trailing dims; new leading dims behave as size-1 dims. */
    for (int i = ndim - 1; i >= 0; i--) {
        int d = i - (ndim - t->ndim);
        int64_t cur = d >= 0 ? t->shape[d] : 1;
        int64_t stride;
        if (d >= 0)
            stride = t->strides[d];
        else
            /* A new size-1 dim steps over everything inside it, as a contiguous one
             * would (0 when nothing is inside, as torch for 0-d inputs). */
            stride = i + 1 < ndim ? wmul(size[i + 1], strides[i + 1]) : 0;
        int64_t target = shape[i];
        if (target == -1) {
            if (d < 0) {
                ct_error(CT_ERROR_VALUE, "expand",
                         "The expanded size of the tensor (-1) isn't allowed in a leading, non-existing dimension %d",
                         i);
                return NULL;
            }
            target = cur;
        }
        if (target != cur) {
            if (cur != 1) {
                ct_error(CT_ERROR_VALUE, "expand",
                         "The expanded size of the tensor (%lld) must match the existing size (%lld) at "
                         "non-singleton dimension %d.  Target sizes: %s.  Tensor sizes: %s",
                         (long long)target, (long long)cur, i, ct_shape_str(shape, ndim, want, sizeof want),
                         ct_shape_str(t->shape, t->ndim, have, sizeof have));
                return NULL;
            }
            if (target < 0) {
                ct_error(CT_ERROR_VALUE, "expand",
                         "The expanded size of the tensor (%lld) must be non-negative (or -1 to keep a size) at "
                         "dimension %d.  Target sizes: %s",
                         (long long)target, i, ct_shape_str(shape, ndim, want, sizeof want));
                return NULL;
            }
            stride = 0;
        }
        size[i] = target;
        strides[i] = stride;
    }
    return view_of("expand", t, t->offset, size, strides, ndim);
}


ct_tensor *ct_squeeze_impl(const ct_tensor *t) {
    CT_CHECK_ARG("squeeze", t);
    int64_t size[CT_MAX_DIMS], strides[CT_MAX_DIMS];
    int n = 0;
    for (int i = 0; i < t->ndim; i++) {
        if (t->shape[i] == 1)
            continue;
        size[n] = t->shape[i];
        strides[n] = t->strides[i];
        n++;
    }
    return view_of("squeeze", t, t->offset, size, strides, n);
}

ct_tensor *ct_squeeze_dim_impl(const ct_tensor *t, int dim) {
    CT_CHECK_ARG("squeeze", t);
    int d;
    if (ct_wrap_dim("squeeze", dim, t->ndim, &d))
        return NULL;
    if (t->ndim == 0 || t->shape[d] != 1)
        return view_of("squeeze", t, t->offset, t->shape, t->strides, t->ndim);
    int64_t size[CT_MAX_DIMS], strides[CT_MAX_DIMS];
    for (int i = 0, n = 0; i < t->ndim; i++) {
        if (i == d)
            continue;
        size[n] = t->shape[i];
        strides[n] = t->strides[i];
        n++;
    }
    return view_of("squeeze", t, t->offset, size, strides, t->ndim - 1);
}

ct_tensor *ct_unsqueeze_impl(const ct_tensor *t, int dim) {
    CT_CHECK_ARG("unsqueeze", t);
    int d;
    if (ct_wrap_dim("unsqueeze", dim, t->ndim + 1, &d) || !check_ndim("unsqueeze", t->ndim + 1))
        return NULL;
    int64_t size[CT_MAX_DIMS], strides[CT_MAX_DIMS];
    for (int i = 0, from = 0; i <= t->ndim; i++) {
        if (i == d) {
            size[i] = 1;
            /* Steps over the dim it lands before, as it would in a contiguous tensor. */
            strides[i] = d < t->ndim ? wmul(t->shape[d], t->strides[d]) : 1;
        } else {
            size[i] = t->shape[from];
            strides[i] = t->strides[from];
            from++;
        }
    }
    return view_of("unsqueeze", t, t->offset, size, strides, t->ndim + 1);
}

/* ------------------------------------------------------------------ flatten / unflatten */

ct_tensor *ct_flatten_impl(const ct_tensor *t, int start_dim, int end_dim) {
    CT_CHECK_ARG("flatten", t);
    int s, e;
    if (ct_wrap_dim("flatten", start_dim, t->ndim, &s) || ct_wrap_dim("flatten", end_dim, t->ndim, &e))
        return NULL;
    if (t->ndim == 0)
        return ct_reshape_impl(t, CT_SHAPE(1));
    if (s > e) {
        ct_error(CT_ERROR_VALUE, "flatten", "flatten() has invalid args: start_dim cannot come after end_dim");
        return NULL;
    }
    if (s == e)
        return ct_tensor_ref(t); /* torch returns the input itself here */
    int64_t size[CT_MAX_DIMS];
    int n = 0;
    for (int i = 0; i < s; i++)
        size[n++] = t->shape[i];
    int64_t merged = 1;
    for (int i = s; i <= e; i++)
        merged = wmul(merged, t->shape[i]);
    size[n++] = merged;
    for (int i = e + 1; i < t->ndim; i++)
        size[n++] = t->shape[i];
    return ct_reshape_impl(t, size, n);
}

ct_tensor *ct_unflatten_impl(const ct_tensor *t, int dim, const int64_t *sizes, int nsizes) {
    CT_CHECK_ARG("unflatten", t);
    int d;
    if (ct_wrap_dim("unflatten", dim, t->ndim, &d))
        return NULL;
    if (nsizes == 0) {
        ct_error(CT_ERROR_VALUE, "unflatten", "sizes must be non-empty");
        return NULL;
    }
    if (!check_list("unflatten", "sizes", sizes, nsizes))
        return NULL;
    if (t->ndim == 0) {
        ct_error(CT_ERROR_INDEX, "unflatten", "Dimension specified as %d but tensor has no dimensions", d);
        return NULL;
    }
    if (!check_ndim("unflatten", t->ndim - 1 + nsizes))
        return NULL;
    int64_t inferred[CT_MAX_DIMS];
    if (!infer_size("unflatten", sizes, nsizes, t->shape[d], inferred)) {
        /* Say which dim the sizes failed to describe, as torch does. */
        char buf[256];
        if (strstr(ct_last_error(), "is invalid for input of size"))
            ct_error(CT_ERROR_VALUE, "unflatten",
                     "Provided sizes %s don't multiply up to the size of dim %d (%lld) in the input tensor",
                     ct_shape_str(sizes, nsizes, buf, sizeof buf), d, (long long)t->shape[d]);
        else if (strstr(ct_last_error(), "only one dimension can be inferred"))
            ct_error(CT_ERROR_VALUE, "unflatten",
                     "unflatten got an unexpected error: only one dimension can be inferred");
        return NULL;
    }
    int64_t size[CT_MAX_DIMS];
    int n = 0;
    for (int i = 0; i < d; i++)
        size[n++] = t->shape[i];
    for (int i = 0; i < nsizes; i++)
        size[n++] = inferred[i];
    for (int i = d + 1; i < t->ndim; i++)
        size[n++] = t->shape[i];
    return ct_view_impl(t, size, n);
}

/* ------------------------------------------------------------------ slicing */

static ct_tensor *slice_impl(const char *op, const ct_tensor *t, int d, int64_t start, int64_t end, int64_t step) {
    int64_t n = t->shape[d];
    /* Python's rules: negatives count from the end, then clamp into [0, n]. */
    if (start < 0)
        start = start < -n ? 0 : start + n;
    if (end < 0)
        end = end < -n ? 0 : end + n;
    if (start > n)
        start = n;
    if (end < start)
        end = start;
    else if (end > n)
        end = n;
    int64_t len = end - start;
    int64_t size[CT_MAX_DIMS], strides[CT_MAX_DIMS];
    memcpy(size, t->shape, sizeof size);
    memcpy(strides, t->strides, sizeof strides);
    size[d] = len == 0 ? 0 : (len - 1) / step + 1;
    strides[d] = wmul(t->strides[d], step);
    return view_of(op, t, wadd(t->offset, wmul(start, t->strides[d])), size, strides, t->ndim);
}

ct_tensor *ct_slice_impl(const ct_tensor *t, int dim, int64_t start, int64_t end, int64_t step) {
    CT_CHECK_ARG("slice", t);
    if (t->ndim == 0) {
        ct_error(CT_ERROR_INDEX, "slice", "slice() cannot be applied to a 0-dim tensor.");
        return NULL;
    }
    int d;
    if (ct_wrap_dim("slice", dim, t->ndim, &d))
        return NULL;
    if (step <= 0) {
        ct_error(CT_ERROR_VALUE, "slice", "slice step must be positive");
        return NULL;
    }
    return slice_impl("slice", t, d, start, end, step);
}

ct_tensor *ct_narrow_impl(const ct_tensor *t, int dim, int64_t start, int64_t length) {
    CT_CHECK_ARG("narrow", t);
    if (t->ndim == 0) {
        ct_error(CT_ERROR_VALUE, "narrow", "narrow() cannot be applied to a 0-dim tensor.");
        return NULL;
    }
    int d;
    if (ct_wrap_dim("narrow", dim, t->ndim, &d))
        return NULL;
    int64_t n = t->shape[d];
    /* start lies in [-n, n] (n: an empty narrow at the end); a negative one counts from
     * the end, as in PyTorch 2.x */
    if (start < -n || start > n) {
        ct_error(CT_ERROR_INDEX, "narrow", "start out of range (expected to be in range of [%lld, %lld], but got %lld)",
                 (long long)-n, (long long)n, (long long)start);
        return NULL;
    }
    if (start < 0)
        start += n;
    if (length < 0 || start > n - length) {
        ct_error(CT_ERROR_VALUE, "narrow", "start (%lld) + length (%lld) exceeds dimension size (%lld).",
                 (long long)start, (long long)length, (long long)n);
        return NULL;
    }
    return slice_impl("narrow", t, d, start, start + length, 1);
}

ct_tensor *ct_select_impl(const ct_tensor *t, int dim, int64_t index) {
    CT_CHECK_ARG("select", t);
    if (t->ndim == 0) {
        ct_error(CT_ERROR_INDEX, "select", "select() cannot be applied to a 0-dim tensor.");
        return NULL;
    }
    int d;
    if (ct_wrap_dim("select", dim, t->ndim, &d))
        return NULL;
    int64_t n = t->shape[d];
    if (index < -n || index >= n) {
        char buf[256];
        ct_error(CT_ERROR_INDEX, "select", "select(): index %lld out of range for tensor of size %s at dimension %d",
                 (long long)index, ct_shape_str(t->shape, t->ndim, buf, sizeof buf), d);
        return NULL;
    }
    if (index < 0)
        index += n;
    int64_t size[CT_MAX_DIMS], strides[CT_MAX_DIMS];
    for (int i = 0, k = 0; i < t->ndim; i++) {
        if (i == d)
            continue;
        size[k] = t->shape[i];
        strides[k] = t->strides[i];
        k++;
    }
    return view_of("select", t, wadd(t->offset, wmul(index, t->strides[d])), size, strides, t->ndim - 1);
}

ct_tensor *ct_unfold_impl(const ct_tensor *t, int dim, int64_t size, int64_t step) {
    CT_CHECK_ARG("unfold", t);
    int d;
    if (ct_wrap_dim("unfold", dim, t->ndim, &d))
        return NULL;
    int64_t max_size = t->ndim == 0 ? 1 : t->shape[d];
    if (size > max_size) {
        ct_error(CT_ERROR_VALUE, "unfold", "maximum size for tensor at dimension %d is %lld but size is %lld", d,
                 (long long)max_size, (long long)size);
        return NULL;
    }
    if (size < 0) {
        ct_error(CT_ERROR_VALUE, "unfold", "size is %lld but must be >= 0", (long long)size);
        return NULL;
    }
    if (step <= 0) {
        ct_error(CT_ERROR_VALUE, "unfold", "step is %lld but must be > 0", (long long)step);
        return NULL;
    }
    if (!check_ndim("unfold", t->ndim + 1))
        return NULL;
    int64_t shape[CT_MAX_DIMS], strides[CT_MAX_DIMS];
    memcpy(shape, t->shape, sizeof shape);
    memcpy(strides, t->strides, sizeof strides);
    /* The windows replace dim; the elements of a window become a new last dim. */
    if (t->ndim > 0) {
        shape[d] = (t->shape[d] - size) / step + 1;
        strides[d] = wmul(step, t->strides[d]);
    }
    shape[t->ndim] = size;
    strides[t->ndim] = t->ndim == 0 ? 1 : t->strides[d];
    return view_of("unfold", t, t->offset, shape, strides, t->ndim + 1);
}

ct_tensor *ct_diagonal_impl(const ct_tensor *t, int64_t offset, int dim1, int dim2) {
    CT_CHECK_ARG("diagonal", t);
    int a, b;
    if (ct_wrap_dim("diagonal", dim1, t->ndim, &a) || ct_wrap_dim("diagonal", dim2, t->ndim, &b))
        return NULL;
    if (a == b) {
        ct_error(CT_ERROR_VALUE, "diagonal", "diagonal dimensions cannot be identical %d, %d", dim1, dim2);
        return NULL;
    }
    /* A positive offset drops leading columns (along dim2), a negative one leading rows
     * (along dim1); offsets past the edge leave an empty diagonal. */
    int64_t rows = t->shape[a], cols = t->shape[b], n;
    if (offset >= 0)
        n = offset >= cols ? 0 : (rows < cols - offset ? rows : cols - offset);
    else
        n = offset <= -rows ? 0 : (rows + offset < cols ? rows + offset : cols);
    int64_t start = t->offset;
    if (n > 0)
        start = wadd(start, offset >= 0 ? wmul(offset, t->strides[b]) : wmul(-offset, t->strides[a]));
    int64_t shape[CT_MAX_DIMS], strides[CT_MAX_DIMS];
    int k = 0;
    for (int i = 0; i < t->ndim; i++) {
        if (i == a || i == b)
            continue;
        shape[k] = t->shape[i];
        strides[k] = t->strides[i];
        k++;
    }
    shape[k] = n;
    strides[k] = wadd(t->strides[a], t->strides[b]);
    return view_of("diagonal", t, start, shape, strides, k + 1);
}

/* ------------------------------------------------------------------ as_strided / alias */

ct_tensor *ct_as_strided_impl(const ct_tensor *t, const int64_t *shape, const int64_t *strides, int ndim,
                         int64_t storage_offset) {
    CT_CHECK_ARG("as_strided", t);
    if (!check_list("as_strided", "shape", shape, ndim) || !check_list("as_strided", "strides", strides, ndim))
        return NULL;
    char sbuf[256], tbuf[256];
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0) {
            ct_error(CT_ERROR_VALUE, "as_strided", "Trying to create tensor with negative dimension %lld: %s",
                     (long long)shape[i], ct_shape_str(shape, ndim, sbuf, sizeof sbuf));
            return NULL;
        }
    }
    for (int i = 0; i < ndim; i++) {
        if (strides[i] < 0) {
            ct_error(CT_ERROR_VALUE, "as_strided", "Negative strides are not supported at the moment, got strides: %s",
                     ct_shape_str(strides, ndim, sbuf, sizeof sbuf));
            return NULL;
        }
    }
    if (ct_shape_numel(shape, ndim) < 0) {
        ct_error(CT_ERROR_VALUE, "as_strided", "Storage size calculation overflowed with sizes=%s and strides=%s",
                 ct_shape_str(shape, ndim, sbuf, sizeof sbuf), ct_shape_str(strides, ndim, tbuf, sizeof tbuf));
        return NULL;
    }
    int64_t offset = storage_offset < 0 ? t->offset : storage_offset;
    /* Elements the view reaches, counted from the start of the storage; none when it
     * is empty, wherever its offset points. */
    int64_t esize = (int64_t)ct_dtype_size(t->dtype);
    int64_t need = 0;
    if (ct_shape_numel(shape, ndim) != 0) {
        need = offset;
        bool overflow = false;
        for (int i = 0; i < ndim && !overflow; i++) {
            int64_t ext = shape[i] - 1;
            if (strides[i] != 0 && ext > (INT64_MAX - need) / strides[i])
                overflow = true;
            else
                need += ext * strides[i];
        }
        if (overflow || need == INT64_MAX || need + 1 > INT64_MAX / esize) {
            ct_error(CT_ERROR_VALUE, "as_strided", "Storage size calculation overflowed with sizes=%s and strides=%s",
                     ct_shape_str(shape, ndim, sbuf, sizeof sbuf), ct_shape_str(strides, ndim, tbuf, sizeof tbuf));
            return NULL;
        }
        need = (need + 1) * esize;
    }
    if ((uint64_t)need > (uint64_t)t->storage->nbytes) {
        ct_error(CT_ERROR_VALUE, "as_strided",
                 "setStorage: sizes %s, strides %s, storage offset %lld, and itemsize %lld requiring a storage size "
                 "of %lld are out of bounds for storage of size %llu",
                 ct_shape_str(shape, ndim, sbuf, sizeof sbuf), ct_shape_str(strides, ndim, tbuf, sizeof tbuf),
                 (long long)offset, (long long)esize, (long long)need, (unsigned long long)t->storage->nbytes);
        return NULL;
    }
    return view_of("as_strided", t, offset, shape, strides, ndim);
}

ct_tensor *ct_alias_impl(const ct_tensor *t) {
    CT_CHECK_ARG("alias", t);
    return view_of("alias", t, t->offset, t->shape, t->strides, t->ndim);
}
