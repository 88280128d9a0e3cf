/* einsum and meshgrid: composites of views, bmm and ones-vector products, so their
 * gradients come from those ops'.
 *
 * Note [einsum]
 * Every subscript letter (and every dim an ellipsis covers) gets one slot of a
 * canonical layout: the ellipsis dims first, then the output letters in output
 * order, then the letters that are summed away. Each operand is brought into that
 * layout: a letter repeated within one operand takes the diagonal, the dims are
 * permuted into canonical order, and the letters it lacks become size-1 dims. The
 * operands are then combined left to right, two at a time, as one bmm: dims both
 * still need (they are in the output or in a later operand) form the batch, dims
 * only one side has form the rows or the columns, and dims no one needs any more are
 * contracted (a dim only one side has and no one needs is summed on that side
 * first). A sum over dims is itself a product with a ones vector, so einsum needs no
 * reduction op. Size-1 dims broadcast, as in PyTorch. The last step sums what is
 * left outside the output, drops those dims and moves the ellipsis dims to where the
 * output puts them. Results may be views of an operand (a transpose, a diagonal),
 * as in PyTorch. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctorch/ops.h"
#include "tensor_impl.h"

#define NLETTERS 52
#define ELL (-1)

static int letter_id(char c) {
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return 26 + (c - 'a');
    return -1;
}
static char letter_char(int id) { return (char)(id < 26 ? 'A' + id : 'a' + (id - 26)); }

/* Sums x over the dims flagged in which, keeping them as size-1 dims. */
static ct_tensor *sum_keep(const ct_tensor *x, const bool *which) {
    int nd = x->ndim;
    if (x->numel == 0) { /* the dims' products below may be past int64 */
        int64_t dims[CT_MAX_DIMS];
        int n = 0;
        for (int i = 0; i < nd; i++)
            if (which[i])
                dims[n++] = i;
        return n ? ct_sum(x, dims, n, true, CT_DTYPE_UNDEFINED) : ct_alias(x);
    }
    int64_t perm[CT_MAX_DIMS], full[CT_MAX_DIMS];
    int np = 0;
    int64_t m = 1, k = 1;
    bool any = false;
    for (int i = 0; i < nd; i++)
        if (!which[i]) {
            perm[np++] = i;
            m *= x->shape[i];
        }
    for (int i = 0; i < nd; i++)
        if (which[i]) {
            perm[np++] = i;
            k *= x->shape[i];
            any = true;
        }
    if (!any)
        return ct_alias(x);
    for (int i = 0; i < nd; i++)
        full[i] = which[i] ? 1 : x->shape[i];
    ct_tensor *y = ct_reshape(ct_permute(x, perm, nd), CT_SHAPE(1, m, k));
    ct_tensor *ones = ct_ones(CT_SHAPE(1, k, 1), x->dtype, x->device);
    return ct_reshape(ct_bmm(y, ones), full, nd);
}

typedef struct {
    int nterm;                   /* operands in the equation */
    int lab[CT_MAX_DIMS * 2][CT_MAX_DIMS + 1];
    int nlab[CT_MAX_DIMS * 2];   /* entries in lab (an ellipsis counts as one, ELL) */
    bool has_ell[CT_MAX_DIMS * 2];
    int out[NLETTERS + 1];       /* output letters, ELL for the ellipsis */
    int nout;
    bool out_has_ell;
} equation;

#define MAX_OPERANDS (CT_MAX_DIMS * 2)

static ct_status parse_ellipsis(const char *eq, size_t *i, bool *seen, const char *who, int opnum) {
    /* eq[*i] is '.'; an ellipsis is exactly three dots */
    if (strncmp(eq + *i, "...", 3) != 0) {
        if (opnum >= 0)
            return ct_error(CT_ERROR_VALUE, "einsum", "einsum(): found '.' for operand %d that is not part of any ellipsis",
                            opnum);
        return ct_error(CT_ERROR_VALUE, "einsum", "einsum(): found '.' for %s that is not part of any ellipsis (...)", who);
    }
    if (*seen) {
        if (opnum >= 0)
            return ct_error(CT_ERROR_VALUE, "einsum", "einsum(): found '.' for operand %d for which an ellipsis was already found",
                            opnum);
        return ct_error(CT_ERROR_VALUE, "einsum", "einsum(): found '.' for %s but an ellipsis (...) was already found", who);
    }
    *seen = true;
    *i += 2;
    return CT_OK;
}

static ct_status parse_equation(const char *eq, int n, equation *e) {
    memset(e, 0, sizeof *e);
    const char *arrow = strstr(eq, "->");
    size_t lhs_len = arrow ? (size_t)(arrow - eq) : strlen(eq);
    int cur = 0;
    for (size_t i = 0; i < lhs_len; i++) {
        char c = eq[i];
        if (c == ' ')
            continue;
        if (c == ',') {
            if (++cur >= MAX_OPERANDS)
                return ct_error(CT_ERROR_NOT_IMPLEMENTED, "einsum", "einsum(): at most %d operands are supported", MAX_OPERANDS);
            continue;
        }
        if (c == '.') {
            ct_status st = parse_ellipsis(eq, &i, &e->has_ell[cur], "operand", cur);
            if (st)
                return st;
            if (e->nlab[cur] > CT_MAX_DIMS)
                return ct_error(CT_ERROR_VALUE, "einsum", "einsum(): too many subscripts for operand %d", cur);
            e->lab[cur][e->nlab[cur]++] = ELL;
            continue;
        }
        int id = letter_id(c);
        if (id < 0)
            return ct_error(CT_ERROR_VALUE, "einsum",
                            "einsum(): invalid subscript given at index %zu in the equation string, subscripts must be in [a-zA-Z]", i);
        if (e->nlab[cur] > CT_MAX_DIMS)
            return ct_error(CT_ERROR_VALUE, "einsum", "einsum(): too many subscripts for operand %d", cur);
        e->lab[cur][e->nlab[cur]++] = id;
    }
    e->nterm = cur + 1;
    if (n > e->nterm)
        return ct_error(CT_ERROR_VALUE, "einsum", "Number of einsum subscripts, %d, must be equal to the number of operands, %d.",
                        e->nterm, n);
    if (n < e->nterm)
        return ct_error(CT_ERROR_VALUE, "einsum", "einsum(): fewer operands were provided than specified in the equation");
    int uses[NLETTERS] = {0};
    bool any_ell = false;
    for (int t = 0; t < e->nterm; t++) {
        any_ell = any_ell || e->has_ell[t];
        for (int j = 0; j < e->nlab[t]; j++)
            if (e->lab[t][j] != ELL)
                uses[e->lab[t][j]]++;
    }
    if (arrow) {
        e->out_has_ell = false;
        bool seen[NLETTERS] = {false};
        for (size_t i = lhs_len + 2; eq[i]; i++) {
            char c = eq[i];
            if (c == ' ')
                continue;
            if (c == '.') {
                ct_status st = parse_ellipsis(eq, &i, &e->out_has_ell, "output", -1);
                if (st)
                    return st;
                e->out[e->nout++] = ELL;
                continue;
            }
            int id = letter_id(c);
            if (id < 0)
                return ct_error(CT_ERROR_VALUE, "einsum",
                                "einsum(): invalid subscript given at index %zu in the equation string, subscripts must be in [a-zA-Z]", i);
            if (seen[id])
                return ct_error(CT_ERROR_VALUE, "einsum", "einsum(): output subscript %c appears more than once in the output", c);
            if (!uses[id])
                return ct_error(CT_ERROR_VALUE, "einsum",
                                "einsum(): output subscript %c does not appear in the equation for any input operand", c);
            seen[id] = true;
            e->out[e->nout++] = id;
        }
    } else {
        /* Implicit output: the ellipsis, then the letters used once, in ASCII order. */
        if (any_ell) {
            e->out[e->nout++] = ELL;
            e->out_has_ell = true;
        }
        for (int id = 0; id < NLETTERS; id++)
            if (uses[id] == 1)
                e->out[e->nout++] = id;
    }
    return CT_OK;
}

ct_tensor *ct_einsum(const char *equation_str, const ct_tensor *const *operands, int n) {
    if (!equation_str) {
        ct_error_null("einsum");
        return NULL;
    }
    if (n <= 0 || !operands) {
        ct_error(CT_ERROR_VALUE, "einsum", "einsum(): must provide at least one operand");
        return NULL;
    }
    for (int i = 0; i < n; i++)
        CT_CHECK_ARG("einsum", operands[i]);
    equation e;
    if (parse_equation(equation_str, n, &e))
        return NULL;
    for (int i = 1; i < n; i++)
        if (operands[i]->dtype != operands[0]->dtype) {
            ct_error(CT_ERROR_TYPE, "einsum", "einsum(): expected all operands to have the same dtype, got %s and %s",
                     ct_dtype_name(operands[0]->dtype), ct_dtype_name(operands[i]->dtype));
            return NULL;
        }
    /* How many dims each ellipsis covers. */
    int ell_dims = 0, ne[MAX_OPERANDS] = {0};
    for (int t = 0; t < n; t++) {
        int letters = e.nlab[t] - (e.has_ell[t] ? 1 : 0), nd = operands[t]->ndim;
        if (!e.has_ell[t] && letters != nd) {
            ct_error(CT_ERROR_VALUE, "einsum",
                     "einsum(): the number of subscripts in the equation (%d) does not match the number of dimensions "
                     "(%d) for operand %d and no ellipsis was given",
                     letters, nd, t);
            return NULL;
        }
        if (e.has_ell[t] && letters > nd) {
            ct_error(CT_ERROR_VALUE, "einsum",
                     "einsum(): the number of subscripts in the equation (%d) is more than the number of dimensions "
                     "(%d) for operand %d",
                     letters, nd, t);
            return NULL;
        }
        ne[t] = e.has_ell[t] ? nd - letters : 0;
        if (ne[t] > ell_dims)
            ell_dims = ne[t];
    }
    /* Canonical slots: ellipsis dims, output letters, then the other letters. */
    int slot[NLETTERS], L = ell_dims;
    bool in_out[CT_MAX_DIMS * 4] = {false};
    for (int id = 0; id < NLETTERS; id++)
        slot[id] = -1;
    for (int i = 0; i < e.nout; i++)
        if (e.out[i] != ELL)
            slot[e.out[i]] = L++;
    int nout_letters = L - ell_dims;
    for (int t = 0; t < n; t++)
        for (int j = 0; j < e.nlab[t]; j++)
            if (e.lab[t][j] != ELL && slot[e.lab[t][j]] < 0)
                slot[e.lab[t][j]] = L++;
    if (L > CT_MAX_DIMS) {
        ct_error(CT_ERROR_NOT_IMPLEMENTED, "einsum", "einsum(): at most %d distinct dims are supported, got %d",
                 CT_MAX_DIMS, L);
        return NULL;
    }
    for (int i = 0; i < L; i++)
        in_out[i] = i < ell_dims ? e.out_has_ell : i < ell_dims + nout_letters;
    int slot_letter[CT_MAX_DIMS];
    for (int id = 0; id < NLETTERS; id++)
        if (slot[id] >= 0)
            slot_letter[slot[id]] = id;

    ct_scope_begin();
    ct_tensor *result = NULL;
    const ct_tensor *canon[MAX_OPERANDS];
    bool present[MAX_OPERANDS][CT_MAX_DIMS];
    int64_t seen_size[CT_MAX_DIMS];
    for (int i = 0; i < L; i++)
        seen_size[i] = 1;
    memset(present, 0, sizeof present);
    for (int t = 0; t < n; t++) {
        const ct_tensor *x = operands[t];
        int dl[CT_MAX_DIMS], nd = 0; /* canonical slot of each dim of x */
        for (int j = 0; j < e.nlab[t]; j++) {
            if (e.lab[t][j] == ELL)
                for (int k = 0; k < ne[t]; k++)
                    dl[nd++] = ell_dims - ne[t] + k;
            else
                dl[nd++] = slot[e.lab[t][j]];
        }
        /* Repeated letters: take diagonals until each slot appears once. */
        bool again = true;
        while (again && x) {
            again = false;
            /* x is NULL after an error: both loops stop (a third repeat read x) */
            for (int a = 0; x && a < nd && !again; a++)
                for (int b = a + 1; x && b < nd && !again; b++)
                    if (dl[a] == dl[b]) {
                        if (x->shape[a] != x->shape[b]) {
                            ct_error(CT_ERROR_VALUE, "einsum",
                                     "einsum(): subscript %c is repeated for operand %d but the sizes don't match, %lld != %lld",
                                     letter_char(slot_letter[dl[a]]), t, (long long)x->shape[b], (long long)x->shape[a]);
                            x = NULL;
                            break;
                        }
                        /* diagonal drops a and b and appends their shared dim */
                        x = ct_diagonal(x, 0, a, b);
                        int s = dl[a], m = 0;
                        for (int k = 0; k < nd; k++)
                            if (k != a && k != b)
                                dl[m++] = dl[k];
                        dl[m++] = s;
                        nd = m;
                        again = true;
                    }
        }
        if (!x)
            goto done;
        /* Sizes must agree (or be 1) across operands. */
        for (int k = 0; k < nd; k++) {
            int64_t s = x->shape[k];
            present[t][dl[k]] = true;
            if (s == 1)
                continue;
            if (seen_size[dl[k]] != 1 && seen_size[dl[k]] != s) {
                if (dl[k] < ell_dims)
                    ct_error(CT_ERROR_VALUE, "einsum",
                             "einsum(): dimension %d covered by ellipsis in operand %d has size %lld which does not "
                             "broadcast with previously seen ellipsis with size %lld for the respective dimension",
                             dl[k] - (ell_dims - ne[t]), t, (long long)s, (long long)seen_size[dl[k]]);
                else
                    ct_error(CT_ERROR_VALUE, "einsum",
                             "einsum(): subscript %c has size %lld for operand %d which does not broadcast with "
                             "previously seen size %lld",
                             letter_char(slot_letter[dl[k]]), (long long)s, t, (long long)seen_size[dl[k]]);
                goto done;
            }
            seen_size[dl[k]] = s;
        }
        /* Permute into canonical order, then insert the missing slots. */
        int64_t perm[CT_MAX_DIMS];
        int np = 0;
        for (int sl = 0; sl < L; sl++)
            for (int k = 0; k < nd; k++)
                if (dl[k] == sl)
                    perm[np++] = k;
        x = ct_permute(x, perm, nd);
        for (int sl = 0; sl < L && x; sl++)
            if (!present[t][sl])
                x = ct_unsqueeze(x, sl);
        if (!x)
            goto done;
        canon[t] = x;
    }
    const ct_tensor *cur = canon[0];
    for (int t = 1; t < n && cur; t++) {
        const ct_tensor *a = cur, *b = canon[t];
        bool needed[CT_MAX_DIMS], sum_a[CT_MAX_DIMS] = {false}, sum_b[CT_MAX_DIMS] = {false};
        bool any_a = false, any_b = false;
        for (int sl = 0; sl < L; sl++) {
            needed[sl] = in_out[sl];
            for (int u = t + 1; u < n; u++)
                needed[sl] = needed[sl] || present[u][sl];
            if (!needed[sl] && a->shape[sl] != 1 && b->shape[sl] == 1)
                any_a = sum_a[sl] = true;
            if (!needed[sl] && b->shape[sl] != 1 && a->shape[sl] == 1)
                any_b = sum_b[sl] = true;
        }
        if (any_a)
            a = sum_keep(a, sum_a);
        if (any_b)
            b = sum_keep(b, sum_b);
        if (!a || !b) {
            cur = NULL;
            break;
        }
        /* Classify: batch (both), rows (a only), columns (b only), contracted. */
        int64_t pa[CT_MAX_DIMS], pb[CT_MAX_DIMS], rshape[CT_MAX_DIMS];
        int order[CT_MAX_DIMS], nb = 0, nl = 0, nr = 0, nk = 0;
        int bat[CT_MAX_DIMS], lft[CT_MAX_DIMS], rgt[CT_MAX_DIMS], con[CT_MAX_DIMS];
        int64_t B = 1, M = 1, N = 1, K = 1;
        for (int sl = 0; sl < L; sl++) {
            int64_t sa = a->shape[sl], sb = b->shape[sl];
            if (!needed[sl] && sa == sb && sa != 1) {
                con[nk++] = sl;
                K *= sa;
            } else if (sa == sb) {
                bat[nb++] = sl;
                B *= sa;
            } else if (sb == 1) {
                lft[nl++] = sl;
                M *= sa;
            } else {
                rgt[nr++] = sl;
                N *= sb;
            }
        }
        int q = 0, m = 0;
        for (int i = 0; i < nb; i++)
            pa[q++] = bat[i], pb[m++] = bat[i], rshape[i] = a->shape[bat[i]], order[i] = bat[i];
        for (int i = 0; i < nl; i++)
            pa[q++] = lft[i], rshape[nb + i] = a->shape[lft[i]], order[nb + i] = lft[i];
        for (int i = 0; i < nk; i++)
            pa[q++] = con[i], pb[m++] = con[i];
        for (int i = 0; i < nr; i++)
            pb[m++] = rgt[i], rshape[nb + nl + i] = b->shape[rgt[i]], order[nb + nl + i] = rgt[i];
        /* each side's size-1 dims for the other side's rows/columns go last */
        for (int i = 0; i < nr; i++)
            pa[q++] = rgt[i];
        for (int i = 0; i < nl; i++)
            pb[m++] = lft[i];
        ct_tensor *am = ct_reshape(ct_permute(a, pa, L), CT_SHAPE(B, M, K));
        ct_tensor *bm = ct_reshape(ct_permute(b, pb, L), CT_SHAPE(B, K, N));
        ct_tensor *prod = ct_bmm(am, bm);
        int nres = nb + nl + nr;
        ct_tensor *r = prod ? ct_reshape(prod, rshape, nres) : NULL;
        /* Back to canonical order; contracted slots become size-1 dims. */
        int64_t back[CT_MAX_DIMS];
        int nbk = 0;
        for (int sl = 0; sl < L; sl++)
            for (int i = 0; i < nres; i++)
                if (order[i] == sl)
                    back[nbk++] = i;
        r = r ? ct_permute(r, back, nres) : NULL;
        for (int i = 0; i < nk && r; i++)
            r = ct_unsqueeze(r, con[i]);
        cur = r;
    }
    if (!cur)
        goto done;
    /* Sum what is outside the output, drop those dims, place the ellipsis. */
    bool rest[CT_MAX_DIMS] = {false}, any = false;
    for (int sl = 0; sl < L; sl++)
        if (!in_out[sl] && cur->shape[sl] != 1)
            any = rest[sl] = true;
    if (any && !(cur = sum_keep(cur, rest)))
        goto done;
    int64_t oshape[CT_MAX_DIMS];
    int ond = 0;
    for (int sl = 0; sl < L; sl++)
        if (in_out[sl])
            oshape[ond++] = cur->shape[sl];
    ct_tensor *o = ct_reshape(cur, oshape, ond);
    if (o && e.out_has_ell && ell_dims > 0) {
        int64_t perm[CT_MAX_DIMS];
        int np = 0, letter = 0;
        for (int i = 0; i < e.nout; i++) {
            if (e.out[i] == ELL)
                for (int k = 0; k < ell_dims; k++)
                    perm[np++] = k;
            else
                perm[np++] = ell_dims + letter++;
        }
        o = ct_permute(o, perm, ond);
    }
    result = o;
done:
    ct_keep(result);
    ct_scope_end();
    return result;
}

/* ------------------------------------------------------------------ meshgrid */

ct_status ct_meshgrid(const ct_tensor *const *tensors, int n, const char *indexing, ct_tensor **out) {
    if (!tensors || n <= 0)
        return ct_error(CT_ERROR_VALUE, "meshgrid", "meshgrid expects a non-empty TensorList");
    if (!out)
        return ct_error_null("meshgrid");
    for (int i = 0; i < n; i++)
        CT_CHECK_ARG_STATUS("meshgrid", tensors[i]);
    bool xy;
    if (!indexing || strcmp(indexing, "ij") == 0)
        xy = false;
    else if (strcmp(indexing, "xy") == 0)
        xy = true;
    else
        return ct_error(CT_ERROR_VALUE, "meshgrid", "torch.meshgrid: indexing must be one of \"xy\" or \"ij\", but received: %s",
                        indexing);
    if (n > CT_MAX_DIMS)
        return ct_error(CT_ERROR_NOT_IMPLEMENTED, "meshgrid", "meshgrid of more than %d tensors", CT_MAX_DIMS);
    for (int i = 0; i < n; i++) {
        if (tensors[i]->ndim > 1) {
            char s[96];
            return ct_error(CT_ERROR_VALUE, "meshgrid",
                            "torch.meshgrid: Expected 0D or 1D tensor in the tensor list but got a tensor of shape %s",
                            ct_shape_str(tensors[i]->shape, tensors[i]->ndim, s, sizeof s));
        }
        if (tensors[i]->dtype != tensors[0]->dtype)
            return ct_error(CT_ERROR_TYPE, "meshgrid", "meshgrid expects all tensors to have the same dtype");
        if (!ct_device_equal(tensors[i]->device, tensors[0]->device))
            return ct_error(CT_ERROR_DEVICE, "meshgrid", "meshgrid expects all tensors to have the same device");
    }
    /* xy: the first two inputs trade places in the output's dims. */
    int pos[CT_MAX_DIMS];
    int64_t shape[CT_MAX_DIMS];
    for (int i = 0; i < n; i++)
        pos[i] = i;
    if (xy && n >= 2)
        pos[0] = 1, pos[1] = 0;
    for (int i = 0; i < n; i++)
        shape[pos[i]] = tensors[i]->numel;
    ct_scope_begin();
    ct_tensor *res[CT_MAX_DIMS] = {NULL};
    bool ok = true;
    for (int i = 0; i < n && ok; i++) {
        int64_t vs[CT_MAX_DIMS];
        for (int k = 0; k < n; k++)
            vs[k] = k == pos[i] ? -1 : 1;
        res[i] = ct_expand(ct_reshape(tensors[i], vs, n), shape, n);
        ok = res[i] != NULL;
    }
    for (int i = 0; i < n && ok; i++)
        out[i] = ct_keep(res[i]);
    ct_scope_end();
    return ok ? CT_OK : ct_last_status();
}
