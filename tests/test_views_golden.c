/* View ops against PyTorch 1.13, case by case.
 *
 * reshape_golden.txt (tests/golden/gen_reshape.py): whether torch.reshape returned a
 * view, the result's shape, strides and storage offset, or the error it raised.
 * views_golden.txt (tests/golden/gen_views.py): the same metadata plus the element
 * values for chains of every view op. Both scripts describe the op language. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "tensor_impl.h"

/* Parses space-separated integers ("-" is the empty list); returns the count. */
static int parse_ints(const char *s, int64_t *out, int cap) {
    int n = 0;
    while (*s == ' ')
        s++;
    if (*s == '-' && (s[1] == '\0' || s[1] == ' '))
        return 0;
    while (*s) {
        char *end;
        long long v = strtoll(s, &end, 10);
        if (end == s)
            break;
        assert_true(n < cap);
        out[n++] = v;
        s = end;
        while (*s == ' ')
            s++;
    }
    return n;
}

static ct_tensor *apply_op(ct_tensor *x, const char *op) {
    char name[16];
    int len = 0;
    while (op[len] && op[len] != ' ' && len < 15) {
        name[len] = op[len];
        len++;
    }
    name[len] = '\0';
    int64_t a[16];
    int n = parse_ints(op + len, a, 16);
    if (strcmp(name, "base") == 0) {
        ct_tensor *t = ct_empty(a, n, CT_F64, CT_CPU);
        CT_ASSERT_OK(t);
        double *p = ct_tensor_data(t);
        for (int64_t i = 0; i < ct_tensor_numel(t); i++)
            p[i] = (double)i;
        return t;
    }
    if (strcmp(name, "tr") == 0)
        return ct_transpose(x, (int)a[0], (int)a[1]);
    if (strcmp(name, "perm") == 0)
        return ct_permute(x, a, n);
    if (strcmp(name, "sl") == 0)
        return ct_slice(x, (int)a[0], a[1], a[2], a[3]);
    if (strcmp(name, "sel") == 0)
        return ct_select(x, (int)a[0], a[1]);
    if (strcmp(name, "ex") == 0)
        return ct_expand(x, a, n);
    if (strcmp(name, "us") == 0)
        return ct_unsqueeze(x, (int)a[0]);
    if (strcmp(name, "narrow") == 0)
        return ct_narrow(x, (int)a[0], a[1], a[2]);
    if (strcmp(name, "unfold") == 0)
        return ct_unfold(x, (int)a[0], a[1], a[2]);
    if (strcmp(name, "diag") == 0)
        return ct_diagonal(x, a[0], (int)a[1], (int)a[2]);
    if (strcmp(name, "sq") == 0)
        return ct_squeeze(x);
    if (strcmp(name, "sqd") == 0)
        return ct_squeeze_dim(x, (int)a[0]);
    if (strcmp(name, "flat") == 0)
        return ct_flatten(x, (int)a[0], (int)a[1]);
    if (strcmp(name, "unflat") == 0)
        return ct_unflatten(x, (int)a[0], a + 1, n - 1);
    if (strcmp(name, "mv") == 0)
        return ct_movedim(x, (int)a[0], (int)a[1]);
    if (strcmp(name, "t") == 0)
        return ct_t(x);
    if (strcmp(name, "view") == 0)
        return ct_view(x, a, n);
    if (strcmp(name, "rs") == 0)
        return ct_reshape(x, a, n);
    if (strcmp(name, "as") == 0)
        return ct_as_strided(x, a + 1, a + 1 + a[0], (int)a[0], a[1 + 2 * a[0]]);
    fail_msg("unknown op '%s'", name);
    return NULL;
}

/* Splits line at '|' into at most cap fields (in place). */
static int split(char *line, char **fields, int cap, char sep) {
    int n = 0;
    fields[n++] = line;
    for (char *p = line; *p && n < cap; p++)
        if (*p == sep) {
            *p = '\0';
            fields[n++] = p + 1;
        }
    return n;
}

static void check_case(char *line, int lineno) {
    char *f[6];
    int nf = split(line, f, 6, '|');
    assert_true(nf >= 4);
    ct_scope_begin();
    char desc[512], *ops[8];
    snprintf(desc, sizeof desc, "%s", f[0]); /* f[0] is split below; messages quote it whole */
    int nops = split(f[0], ops, 8, ';');
    f[0] = desc;
    ct_tensor *x = NULL;
    for (int i = 0; i < nops; i++) {
        x = apply_op(x, ops[i]);
        CT_ASSERT_OK(x);
    }
    int64_t target[16];
    int nt = parse_ints(f[1], target, 16);
    ct_tensor *y = ct_reshape(x, target, nt);
    if (strcmp(f[2], "err") == 0) {
        if (y || !strstr(ct_last_error(), f[3]))
            fail_msg("line %d (%s -> %s): expected error '%s', got '%s'", lineno, f[0], f[1], f[3],
                     y ? "success" : ct_last_error());
        ct_clear_error();
        ct_scope_end();
        return;
    }
    assert_int_equal(nf, 6);
    if (!y)
        fail_msg("line %d (%s -> %s): unexpected error '%s'", lineno, f[0], f[1], ct_last_error());
    int64_t shape[16], strides[16];
    int ns = parse_ints(f[3], shape, 16), nst = parse_ints(f[4], strides, 16);
    bool view = strcmp(f[2], "1") == 0;
    bool shared = ct_tensor_shares_storage(y, x);
    if (shared != view)
        fail_msg("line %d (%s -> %s): torch %s, ctorch %s", lineno, f[0], f[1], view ? "views" : "copies",
                 shared ? "views" : "copies");
    assert_int_equal(y->is_view, view);
    assert_int_equal(ct_tensor_dim(y), ns);
    assert_int_equal(nst, ns);
    for (int i = 0; i < ns; i++) {
        if (ct_tensor_shape(y)[i] != shape[i] || ct_tensor_strides(y)[i] != strides[i])
            fail_msg("line %d (%s -> %s): dim %d is size %lld stride %lld, torch has %lld, %lld", lineno, f[0],
                     f[1], i, (long long)ct_tensor_shape(y)[i], (long long)ct_tensor_strides(y)[i],
                     (long long)shape[i], (long long)strides[i]);
    }
    assert_int_equal(ct_tensor_storage_offset(y), strtoll(f[5], NULL, 10));
    /* Same elements in the same logical order as the input. */
    for (int64_t k = 0; k < ct_tensor_numel(x); k++)
        assert_true(ct_test_at(y, k) == ct_test_at(x, k));
    ct_scope_end();
}

typedef void (*case_fn)(char *line, int lineno);

static int run_file(const char *path, case_fn check) {
    FILE *f = fopen(path, "r");
    if (!f)
        fail_msg("cannot open %s", path);
    char line[512];
    int lineno = 0, cases = 0;
    while (fgets(line, sizeof line, f)) {
        lineno++;
        line[strcspn(line, "\r\n")] = '\0';
        if (!line[0] || line[0] == '#')
            continue;
        check(line, lineno);
        cases++;
    }
    fclose(f);
    return cases;
}

static void test_reshape_matches_torch(void **state) {
    (void)state;
    assert_true(run_file(CT_TEST_DATA_DIR "/reshape_golden.txt", check_case) >= 40);
}

/* Where ctorch words an error differently on purpose (docs/tensors.md), the part of
 * torch's message to look for. */
static const char *expected_part(const char *torch_msg) {
    const char *p = strstr(torch_msg, "(expected to be in range of");
    if (p)
        return p; /* narrow's start: "start out of range (...)" instead of "Dimension ..." */
    if (strncmp(torch_msg, "expand(", 7) == 0 && (p = strstr(torch_msg, "): ")))
        return p + 3; /* torch prints the tensor type before the message */
    return torch_msg;
}

static void check_view_case(char *line, int lineno) {
    char *f[6];
    int nf = split(line, f, 6, '|');
    ct_scope_begin();
    char desc[512], *ops[8];
    snprintf(desc, sizeof desc, "%s", f[0]);
    int nops = split(f[0], ops, 8, ';');
    ct_tensor *base = apply_op(NULL, ops[0]), *y = base;
    CT_ASSERT_OK(base);
    for (int i = 1; i < nops && y; i++)
        y = apply_op(y, ops[i]);
    if (nf == 3 && strcmp(f[1], "err") == 0) {
        const char *want = expected_part(f[2]);
        if (y || !strstr(ct_last_error(), want))
            fail_msg("line %d (%s): expected error '%s', got '%s'", lineno, desc, want,
                     y ? "success" : ct_last_error());
        ct_clear_error();
        ct_scope_end();
        return;
    }
    assert_int_equal(nf, 6);
    if (!y)
        fail_msg("line %d (%s): unexpected error '%s'", lineno, desc, ct_last_error());
    int64_t shape[16], strides[16], vals[64];
    int ns = parse_ints(f[1], shape, 16), nst = parse_ints(f[2], strides, 16), nv = parse_ints(f[5], vals, 64);
    assert_int_equal(ct_tensor_dim(y), ns);
    assert_int_equal(nst, ns);
    for (int i = 0; i < ns; i++)
        if (ct_tensor_shape(y)[i] != shape[i] || ct_tensor_strides(y)[i] != strides[i])
            fail_msg("line %d (%s): dim %d is size %lld stride %lld, torch has %lld, %lld", lineno, desc, i,
                     (long long)ct_tensor_shape(y)[i], (long long)ct_tensor_strides(y)[i], (long long)shape[i],
                     (long long)strides[i]);
    if (ct_tensor_storage_offset(y) != strtoll(f[3], NULL, 10))
        fail_msg("line %d (%s): storage offset %lld, torch has %s", lineno, desc,
                 (long long)ct_tensor_storage_offset(y), f[3]);
    if (ct_tensor_shares_storage(y, base) != (strcmp(f[4], "1") == 0))
        fail_msg("line %d (%s): storage sharing differs from torch", lineno, desc);
    assert_int_equal(ct_tensor_numel(y), nv);
    for (int64_t k = 0; k < nv; k++)
        if (ct_test_at(y, k) != (double)vals[k])
            fail_msg("line %d (%s): element %lld is %g, torch has %lld", lineno, desc, (long long)k,
                     ct_test_at(y, k), (long long)vals[k]);
    ct_scope_end();
}

static void test_views_match_torch(void **state) {
    (void)state;
    assert_true(run_file(CT_TEST_DATA_DIR "/views_golden.txt", check_view_case) >= 90);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reshape_matches_torch),
        cmocka_unit_test(test_views_match_torch),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
