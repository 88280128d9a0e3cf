/* ct_reshape against torch.reshape (PyTorch 1.13): for each recorded case, whether the
 * result is a view, its shape, strides and storage offset, or the error it raises.
 * The cases and their format are described in tests/golden/gen_reshape.py. */
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

static void test_reshape_matches_torch(void **state) {
    (void)state;
    const char *path = CT_TEST_DATA_DIR "/reshape_golden.txt";
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
        check_case(line, lineno);
        cases++;
    }
    fclose(f);
    assert_true(cases >= 40);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reshape_matches_torch),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
