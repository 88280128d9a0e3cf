/* Op schemas: the arguments and results of every op, by name and kind, and where each
 * travels in the op's ct_call (docs/dispatcher.md, "Op schemas"). */
#include "meta/op_info.h"

/* Note [Op schemas]
 * A schema is PyTorch's notation, read as a layout: in a dispatched op's ct_call each
 * Tensor argument is the next call->in[] entry, Tensor[] is call->list, each int, bool
 * or int[N] takes the next call->ints[] entries, each float or Scalar the next
 * call->s[] entry, ScalarType is call->dtype, Device is call->device (with
 * call->has_device set; the dispatcher takes a backend key from it), and result i is
 * call->out[i]. Arguments
 * of different kinds fill different arrays, so a schema lists them in the C function's
 * order except where two of one kind are packed in another order (the reductions pack
 * keepdim before the dims); the schema then follows the packing, which is what a
 * reader of the call needs. Where a wrapper packs something the C function does not
 * take (an output mask, a "was it given" flag, a count before a list), the schema
 * names it too.
 *
 * The ops of a signature class that names no parameters share one schema (below);
 * the others have a CT_SCHEMA line next to their row of ops.def. One table holds
 * both: an op with a class schema and a CT_SCHEMA line would be initialised twice,
 * which -Woverride-init (-Wextra) reports. test_op_schema parses every schema and
 * checks, for every op that dispatches, that real calls have the counts of inputs,
 * list entries, ints, scalars and outputs their schema says. */

#define ROW(name, schema) [CT_OP_##name] = schema,
/* reductions and scans: ints[] holds keepdim, the number of dims, the dims
 * (CT_RED_INT_* in src/meta/reduce.h); s[0] the order or correction */
#define RED_ARGS "Tensor self, bool keepdim, int ndims, int[ndims] dim"

#define CLASS_UNARY(n) ROW(n, #n "(Tensor self) -> Tensor")
#define CLASS_BINARY(n) ROW(n, #n "(Tensor self, Tensor other) -> Tensor")
#define CLASS_BINARY_ALPHA(n) ROW(n, #n "(Tensor self, Tensor other, Scalar alpha=1) -> Tensor")
#define CLASS_BINARY_PLAIN(n) CLASS_BINARY(n)
#define CLASS_REDUCE_DT(n) ROW(n, #n "(" RED_ARGS ", ScalarType? dtype) -> Tensor")
#define CLASS_REDUCE(n) ROW(n, #n "(" RED_ARGS ") -> Tensor")
#define CLASS_COUNT(n) CLASS_REDUCE(n)
#define CLASS_VAR(n) ROW(n, #n "(" RED_ARGS ", float correction) -> Tensor")
#define CLASS_VAR_MEAN(n) ROW(n, #n "(" RED_ARGS ", float correction) -> (Tensor, Tensor mean)")
#define CLASS_MINMAX(n) \
    ROW(n, #n "(" RED_ARGS ") -> Tensor; " #n ".dim(" RED_ARGS ") -> (Tensor values, Tensor indices)")
#define CLASS_ARG(n) CLASS_REDUCE(n)
#define CLASS_NORM(n) ROW(n, #n "(" RED_ARGS ", float ord, ScalarType? dtype) -> Tensor")
#define CLASS_SCAN_DT(n) CLASS_REDUCE_DT(n)
#define CLASS_SCAN_IDX(n) ROW(n, #n "(" RED_ARGS ") -> (Tensor values, Tensor indices)")
#define CLASS_UNARY_FN(n) CLASS_UNARY(n)
#define CLASS_UNARY_DECIMALS(n) ROW(n, #n "(Tensor self, int decimals=0) -> Tensor")
#define CLASS_BINARY_MODE(n) ROW(n, #n "(Tensor self, Tensor other, int rounding_mode=0) -> Tensor")
#define CLASS_TERNARY_VALUE(n) ROW(n, #n "(Tensor self, Tensor tensor1, Tensor tensor2, Scalar value) -> Tensor")
#define CLASS_CLAMP(n) ROW(n, #n "(Tensor self, Tensor? min, Tensor? max) -> Tensor")
#define CLASS_WHERE(n) ROW(n, #n "(Tensor condition, Tensor self, Tensor other) -> Tensor")
/* classes whose ops name their parameters on a CT_SCHEMA line */
#define CLASS_CUSTOM(n)
#define CLASS_UNARY_D1(n)
#define CLASS_UNARY_D2(n)
#define CLASS_UNARY_D3(n)
#define CLASS_UNARY_OPT_D3(n)
#define CLASS_UNARY_INT(n)
#define CLASS_TERNARY(n)

static const char *const schemas[CT_OP_COUNT] = {
#define CT_OP(name, sig, family, flags) CLASS_##sig(name)
#define CT_SCHEMA(name, schema) ROW(name, schema)
#include "ctorch/ops.def"
#undef CT_SCHEMA
#undef CT_OP
};

const char *ct_op_schema(ct_op op) { return op >= 0 && op < CT_OP_COUNT ? schemas[op] : NULL; }
