/* Shared helpers for the cmocka tests. */
#ifndef CT_TESTUTIL_H
#define CT_TESTUTIL_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "ctorch.h"

/* Asserts t is non-NULL, printing ctorch's error otherwise. */
#define CT_ASSERT_OK(t) ct_test_assert_ok((t) != NULL, #t, __FILE__, __LINE__)
/* Asserts the expression returned NULL/error with status st and a message containing needle. */
#define CT_ASSERT_ERR(ok, st, needle) ct_test_assert_err((ok), (st), (needle), #ok, __FILE__, __LINE__)

void ct_test_assert_ok(int ok, const char *expr, const char *file, int line);
void ct_test_assert_err(int ok, ct_status st, const char *needle, const char *expr, const char *file, int line);
/* Uniform in [0, 1) from a small xorshift generator over *state (nonzero), so that
 * sample data does not depend on ctorch's own generator. */
double ct_test_unit(uint64_t *state);
/* Element at a flat (row-major logical) index, as double. */
double ct_test_at(const ct_tensor *t, int64_t flat);
/* Asserts the tensor's shape equals shape[0..ndim). */
void ct_test_assert_shape(const ct_tensor *t, const int64_t *shape, int ndim, const char *file, int line);
#define CT_ASSERT_SHAPE(t, ...) ct_test_assert_shape((t), CT_SHAPE(__VA_ARGS__), __FILE__, __LINE__)
/* Attention's formula with a flash op's dropout mask (docs/nn.md), in float64 on the
 * CPU: softmax(q k^T sc, causal) * Z @ v, Z the mask's bits / (1 - p) (the mask may be on
 * any device); differentiable in q, k and v. */
ct_tensor *ct_test_masked_attention(const ct_tensor *q, const ct_tensor *k, const ct_tensor *v,
                                    const ct_tensor *mask, bool causal, double sc, double p);
/* Same dtype, shape and values bit for bit (NaN equal to NaN). */
bool ct_test_same_bits(const ct_tensor *a, const ct_tensor *b);
/* A sample through ct_compile (docs/compile.md, "Every op's samples"): fn(in) called
 * eagerly, then through ct_compile three times (run, capture, replay); every result
 * must equal the eager one bit for bit and the last call must be a replay. Fails the
 * test naming what. */
void ct_test_through_compile(ct_tensor *(*fn)(ct_tensor *const *, int, void *), void *ud, ct_tensor *const *in,
                             int n, const char *what);
/* The same where the captured program may round differently from the eager call (a
 * layer that runs fused kernels eagerly and ops under capture): the capture's result
 * within tol (absolute and relative) of the eager one, the replay's bit for bit the
 * capture's. */
/* A sample ct_compile refuses by design (Note [What cannot be captured]): the first
 * call runs, the capture (second call) fails with an error that names op. */
void ct_test_compile_refused(ct_tensor *(*fn)(ct_tensor *const *, int, void *), void *ud, ct_tensor *const *in,
                             int n, const char *what, const char *op);
void ct_test_through_compile_tol(ct_tensor *(*fn)(ct_tensor *const *, int, void *), void *ud, ct_tensor *const *in,
                                 int n, const char *what, double tol);

#endif
