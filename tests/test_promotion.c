/* Type promotion against PyTorch's own answers (tests/data/promotion.txt). */
#include <stdio.h>
#include <string.h>

#include "api/wrapped.h"
#include "testutil.h"

static ct_tensor *operand(const char *kind, ct_dtype d) {
    if (strcmp(kind, "t") == 0)
        return ct_zeros(CT_SHAPE(2), d, CT_CPU);
    if (strcmp(kind, "z") == 0)
        return ct_zeros(NULL, 0, d, CT_CPU);
    /* a Python scalar of that kind */
    return ct_wrapped_scalar(d == CT_BOOL ? ct_scalar_bool(true) : d == CT_I64 ? ct_scalar_int(3) : ct_scalar_float(2.5));
}

static void test_against_pytorch(void **state) {
    (void)state;
    FILE *f = fopen(CT_TEST_DATA_DIR "/promotion.txt", "r");
    assert_non_null(f);
    char line[256];
    int checked = 0, errors = 0;
    while (fgets(line, sizeof line, f)) {
        char w[6][32];
        int n = sscanf(line, "%31s %31s %31s %31s %31s %31s", w[0], w[1], w[2], w[3], w[4], w[5]);
        ct_scope_begin();
        /* "ERR": PyTorch raises, ctorch answers CT_DTYPE_UNDEFINED with an error set */
        if (n < 4)
            fail_msg("bad line in promotion.txt: %s", line);
        ct_dtype want = ct_dtype_from_name(w[n - 1]); /* UNDEFINED for ERR */
        ct_clear_error();
        if (strcmp(w[0], "promote") == 0 && n == 4) {
            ct_dtype r = ct_promote_types(ct_dtype_from_name(w[1]), ct_dtype_from_name(w[2]));
            if (r != want || (r == CT_DTYPE_UNDEFINED && ct_last_status() != CT_ERROR_TYPE))
                fail_msg("promote_types(%s, %s) = %s, PyTorch says %s", w[1], w[2], ct_dtype_name(r), w[3]);
            errors += r == CT_DTYPE_UNDEFINED;
        } else if (strcmp(w[0], "result") == 0 && n == 6) {
            const ct_tensor *ops[2] = {operand(w[1], ct_dtype_from_name(w[2])),
                                       operand(w[3], ct_dtype_from_name(w[4]))};
            ct_dtype r = ct_result_type(ops, 2);
            if (r != want || (r == CT_DTYPE_UNDEFINED && ct_last_status() != CT_ERROR_TYPE))
                fail_msg("result_type(%s %s, %s %s) = %s, PyTorch says %s", w[1], w[2], w[3], w[4],
                         ct_dtype_name(r), w[5]);
            errors += r == CT_DTYPE_UNDEFINED;
        } else if (strcmp(w[0], "cancast") == 0 && n == 4) {
            bool r = ct_can_cast(ct_dtype_from_name(w[1]), ct_dtype_from_name(w[2]));
            if (r != (w[3][0] == '1'))
                fail_msg("can_cast(%s, %s) = %d, PyTorch says %s", w[1], w[2], r, w[3]);
        } else {
            fail_msg("bad line in promotion.txt: %s", line);
        }
        ct_scope_end();
        checked++;
    }
    fclose(f);
    printf("%d answers of PyTorch's, %d of them errors\n", checked, errors);
    assert_true(checked >= 300);
}

/* uint16/uint32/uint64 promote only with floats (PyTorch 2.x), otherwise an error. */
static void test_barebones_unsigned(void **state) {
    (void)state;
    assert_int_equal(ct_promote_types(CT_U16, CT_U16), CT_U16);
    assert_int_equal(ct_promote_types(CT_U32, CT_F32), CT_F32);
    assert_int_equal(ct_promote_types(CT_BF16, CT_U64), CT_BF16);
    CT_ASSERT_ERR(ct_promote_types(CT_U16, CT_I8) != CT_DTYPE_UNDEFINED, CT_ERROR_TYPE,
                  "Promotion for uint16, uint32, uint64 types is not supported");
    CT_ASSERT_ERR(ct_promote_types(CT_BOOL, CT_U32) != CT_DTYPE_UNDEFINED, CT_ERROR_TYPE, "uint32");
    CT_ASSERT_ERR(ct_promote_types((ct_dtype)42, CT_F32) != CT_DTYPE_UNDEFINED, CT_ERROR_TYPE, "invalid dtype");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_against_pytorch),
        cmocka_unit_test(test_barebones_unsigned),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
