/* The real Fashion-MNIST files (Debian package dataset-fashion-mnist) through
 * ct_mnist_load: shapes, dtypes, the first labels, one image's pixel sum. Skipped
 * (exit code 77) when the package is not installed. */
#include <stdio.h>
#include <stdlib.h>

#include "testutil.h"

#define FASHION_DIR "/usr/share/datasets/fashion-mnist"

static void test_fashion_mnist(void **state) {
    (void)state;
    static const int train_first[12] = {9, 0, 0, 3, 0, 2, 7, 2, 5, 5, 0, 9};
    static const int test_first[12] = {9, 2, 1, 1, 6, 1, 4, 6, 5, 7, 4, 5};
    for (int train = 1; train >= 0; train--) {
        ct_tensor *x, *y;
        assert_int_equal(ct_mnist_load(FASHION_DIR, train, &x, &y), CT_OK);
        const int64_t n = train ? 60000 : 10000;
        CT_ASSERT_SHAPE(x, n, 28, 28);
        CT_ASSERT_SHAPE(y, n);
        assert_int_equal(ct_tensor_dtype(x), CT_U8);
        assert_int_equal(ct_tensor_dtype(y), CT_I64);
        for (int i = 0; i < 12; i++)
            assert_int_equal((int)ct_test_at(y, i), train ? train_first[i] : test_first[i]);
        /* ten classes, all present */
        int counts[10] = {0};
        const int64_t *lab = ct_tensor_data(y);
        for (int64_t i = 0; i < n; i++) {
            assert_true(lab[i] >= 0 && lab[i] < 10);
            counts[lab[i]]++;
        }
        for (int c = 0; c < 10; c++)
            assert_int_equal(counts[c], n / 10);
        if (train) {
            const uint8_t *px = ct_tensor_data(x);
            long sum = 0;
            for (int i = 0; i < 784; i++)
                sum += px[i];
            assert_int_equal(sum, 76247);
        }
        ct_release(x);
        ct_release(y);
    }
}

int main(void) {
    FILE *f = fopen(FASHION_DIR "/train-images-idx3-ubyte.gz", "rb");
    if (!f) {
        printf("skipped: %s not found (Debian package dataset-fashion-mnist)\n", FASHION_DIR);
        return 77;
    }
    fclose(f);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fashion_mnist),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
