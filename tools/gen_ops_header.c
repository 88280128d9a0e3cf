/* Writes include/ctorch/ops_generated.h: the public prototypes of every op of the op
 * table (ctorch/ops.def) whose signature class generates its functions.
 *
 *   build/gen_ops_header include/ctorch/ops_generated.h   (no argument: to stdout)
 *   cmake --build build --target ops_generated_h           (the same)
 *
 * The header is committed so that the API can be read and grepped
 * (`grep -n 'ct_add(' include/`); the ctest test ops_generated_h fails when it differs
 * from this program's output (Note [Generated prototypes]). The definitions of the same
 * functions are the CT_DEF_* macros of src/ops/wrappers.c; a class added there needs
 * its prototypes here too. A host program in plain C, so that building and checking
 * ctorch needs nothing but a C compiler. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Note [Generated prototypes]
 * Each signature class lists its prototypes once, as templates in which '@' stands for
 * the op's name. The generator reads the op table with its own CT_OP and prints, class
 * by class (in the order below, with the class's rules as the section's comment), each
 * op of that class in table order under a comment naming it. Lines longer than
 * LINE_WIDTH wrap after a comma, aligned to the opening parenthesis. */
#define LINE_WIDTH 118

typedef struct op_row {
    const char *name;
    const char *sig;
} op_row;

static const op_row rows[] = {
#define CT_OP(name, sig, family, flags) {#name, #sig},
#include "ctorch/ops.def"
#undef CT_OP
};

#define MAX_PROTOS 12

typedef struct sig_class {
    const char *sig;     /* the second column of ops.def */
    const char *comment; /* the section's comment, lines without the comment markers */
    const char *protos[MAX_PROTOS];
} sig_class;

#define T "const ct_tensor *"
#define UNARY_PROTOS "ct_tensor *ct_@(" T "a)", "ct_tensor *ct_@_(ct_tensor *a)", "ct_tensor *ct_@_out(" T "a, ct_tensor *out)"
#define BINARY_PROTOS                                                                                        \
    "ct_tensor *ct_@(" T "a, " T "b)", "ct_tensor *ct_@_(ct_tensor *a, " T "b)",                             \
        "ct_tensor *ct_@_out(" T "a, " T "b, ct_tensor *out)", "ct_tensor *ct_@_scalar(" T "a, ct_scalar b)", \
        "ct_tensor *ct_@_scalar_(ct_tensor *a, ct_scalar b)"
#define REDUCE_ARGS T "a, const int64_t *dims, int ndims"

static const sig_class classes[] = {
    {"UNARY", "UNARY: out = NAME(a); in place; into out.", {UNARY_PROTOS}},
    {"BINARY", "BINARY: out = a NAME b with broadcasting and type promotion; b may be a scalar.", {BINARY_PROTOS}},
    {"BINARY_ALPHA",
     "BINARY_ALPHA: BINARY, plus out = a NAME alpha * b.",
     {BINARY_PROTOS, "ct_tensor *ct_@_alpha(" T "a, " T "b, ct_scalar alpha)",
      "ct_tensor *ct_@_alpha_(ct_tensor *a, " T "b, ct_scalar alpha)",
      "ct_tensor *ct_@_alpha_out(" T "a, " T "b, ct_scalar alpha, ct_tensor *out)"}},
    {"BINARY_PLAIN",
     "BINARY_PLAIN: out = NAME(a, b), and into out (no in-place or scalar forms).",
     {"ct_tensor *ct_@(" T "a, " T "b)", "ct_tensor *ct_@_out(" T "a, " T "b, ct_tensor *out)"}},
    /* reductions */
    {"REDUCE_DT",
     "---- reductions (docs/ops.md, Reductions). dims/ndims: the dims to reduce (negative\n"
     "allowed); NULL or ndims == 0 means every dim. dtype: CT_DTYPE_UNDEFINED for the\n"
     "default result dtype, else the input is converted to dtype before reducing.\n"
     "\n"
     "REDUCE_DT: sum, prod, mean, ... with an optional dtype.",
     {"ct_tensor *ct_@(" REDUCE_ARGS ", bool keepdim, ct_dtype dtype)",
      "ct_tensor *ct_@_out(" REDUCE_ARGS ", bool keepdim, ct_dtype dtype, ct_tensor *out)"}},
    {"REDUCE",
     "REDUCE: amax, amin, logsumexp, all, any.",
     {"ct_tensor *ct_@(" REDUCE_ARGS ", bool keepdim)", "ct_tensor *ct_@_out(" REDUCE_ARGS ", bool keepdim, ct_tensor *out)"}},
    {"COUNT", "COUNT: count_nonzero (int64 result, never keepdim, as PyTorch).", {"ct_tensor *ct_@(" REDUCE_ARGS ")"}},
    {"VAR",
     "VAR: var, std with Bessel's correction generalised: divide by max(0, N - correction)\n"
     "(correction 1 is the unbiased estimate, 0 the population one).",
     {"ct_tensor *ct_@(" REDUCE_ARGS ", double correction, bool keepdim)",
      "ct_tensor *ct_@_out(" REDUCE_ARGS ", double correction, bool keepdim, ct_tensor *out)"}},
    {"VAR_MEAN",
     "VAR_MEAN: var_mean, std_mean: both results at once; *r0 gets var/std, *r1 the mean\n"
     "(new references; both NULL on error).",
     {"ct_status ct_@(" REDUCE_ARGS ", double correction, bool keepdim, ct_tensor **r0, ct_tensor **r1)"}},
    {"MINMAX",
     "MINMAX: max, min. ct_NAME(a): the largest/smallest element as a 0-d tensor (NaN if\n"
     "any element is NaN). ct_NAME_dim: values and int64 indices along dim (the first\n"
     "occurrence among ties; the first NaN wins).",
     {"ct_tensor *ct_@(" T "a)", "ct_status ct_@_dim(" T "a, int64_t dim, bool keepdim, ct_tensor **values, ct_tensor **indices)",
      "ct_status ct_@_dim_out(" T "a, int64_t dim, bool keepdim, ct_tensor *values, ct_tensor *indices)"}},
    {"ARG",
     "ARG: argmax, argmin. ct_NAME(a): the index into the flattened tensor (0-d int64).",
     {"ct_tensor *ct_@(" T "a)", "ct_tensor *ct_@_dim(" T "a, int64_t dim, bool keepdim)",
      "ct_tensor *ct_@_dim_out(" T "a, int64_t dim, bool keepdim, ct_tensor *out)"}},
    {"NORM",
     "NORM: norm, linalg_vector_norm, linalg__powsum of order ord (docs/ops.md).",
     {"ct_tensor *ct_@(" T "a, double ord, const int64_t *dims, int ndims, bool keepdim, ct_dtype dtype)",
      "ct_tensor *ct_@_out(" T "a, double ord, const int64_t *dims, int ndims, bool keepdim, ct_dtype dtype, "
      "ct_tensor *out)"}},
    {"SCAN_DT",
     "SCAN_DT: cumsum, cumprod, softmax, log_softmax along dim.",
     {"ct_tensor *ct_@(" T "a, int64_t dim, ct_dtype dtype)",
      "ct_tensor *ct_@_out(" T "a, int64_t dim, ct_dtype dtype, ct_tensor *out)"}},
    {"SCAN_IDX",
     "SCAN_IDX: cummax, cummin: running values and the int64 index where each was found.",
     {"ct_status ct_@(" T "a, int64_t dim, ct_tensor **values, ct_tensor **indices)",
      "ct_status ct_@_out(" T "a, int64_t dim, ct_tensor *values, ct_tensor *indices)"}},
    /* more elementwise classes */
    {"UNARY_FN",
     "---- more elementwise classes (docs/ops.md, \"Signature classes\").\n"
     "\n"
     "UNARY_FN: out = NAME(a), no in-place or out= form (predicates such as isnan).",
     {"ct_tensor *ct_@(" T "a)"}},
    {"UNARY_D1",
     "UNARY_D1/D2/D3: UNARY with double parameters, in PyTorch's order\n"
     "(leaky_relu(a, negative_slope), softplus(a, beta, threshold), elu(a, alpha, scale,\n"
     "input_scale), ...).",
     {"ct_tensor *ct_@(" T "a, double p0)", "ct_tensor *ct_@_(ct_tensor *a, double p0)",
      "ct_tensor *ct_@_out(" T "a, double p0, ct_tensor *out)"}},
    {"UNARY_D2",
     "UNARY_D2: two double parameters.",
     {"ct_tensor *ct_@(" T "a, double p0, double p1)", "ct_tensor *ct_@_(ct_tensor *a, double p0, double p1)",
      "ct_tensor *ct_@_out(" T "a, double p0, double p1, ct_tensor *out)"}},
    {"UNARY_D3",
     "UNARY_D3: three double parameters.",
     {"ct_tensor *ct_@(" T "a, double p0, double p1, double p2)",
      "ct_tensor *ct_@_(ct_tensor *a, double p0, double p1, double p2)",
      "ct_tensor *ct_@_out(" T "a, double p0, double p1, double p2, ct_tensor *out)"}},
    {"UNARY_OPT_D3",
     "UNARY_OPT_D3: three optional double parameters; NULL takes the op's default\n"
     "(nan_to_num(a, nan, posinf, neginf)).",
     {"ct_tensor *ct_@(" T "a, const double *p0, const double *p1, const double *p2)",
      "ct_tensor *ct_@_(ct_tensor *a, const double *p0, const double *p1, const double *p2)",
      "ct_tensor *ct_@_out(" T "a, const double *p0, const double *p1, const double *p2, ct_tensor *out)"}},
    {"UNARY_INT",
     "UNARY_INT: UNARY with one integer parameter (gelu(a, ct_gelu_approximate)).",
     {"ct_tensor *ct_@(" T "a, int64_t p0)", "ct_tensor *ct_@_(ct_tensor *a, int64_t p0)",
      "ct_tensor *ct_@_out(" T "a, int64_t p0, ct_tensor *out)"}},
    {"UNARY_DECIMALS",
     "UNARY_DECIMALS: UNARY, plus rounding to a number of decimals (round(a, decimals=d)).",
     {UNARY_PROTOS, "ct_tensor *ct_@_decimals(" T "a, int64_t decimals)",
      "ct_tensor *ct_@_decimals_(ct_tensor *a, int64_t decimals)",
      "ct_tensor *ct_@_decimals_out(" T "a, int64_t decimals, ct_tensor *out)"}},
    {"BINARY_MODE",
     "BINARY_MODE: BINARY, plus a ct_rounding_mode (div(a, b, rounding_mode=...)).",
     {BINARY_PROTOS, "ct_tensor *ct_@_mode(" T "a, " T "b, ct_rounding_mode mode)",
      "ct_tensor *ct_@_mode_(ct_tensor *a, " T "b, ct_rounding_mode mode)",
      "ct_tensor *ct_@_mode_out(" T "a, " T "b, ct_rounding_mode mode, ct_tensor *out)",
      "ct_tensor *ct_@_scalar_mode(" T "a, ct_scalar b, ct_rounding_mode mode)",
      "ct_tensor *ct_@_scalar_mode_(ct_tensor *a, ct_scalar b, ct_rounding_mode mode)"}},
    {"TERNARY",
     "TERNARY: out = NAME(a, b, c) with broadcasting; c may be a scalar (lerp's weight).",
     {"ct_tensor *ct_@(" T "a, " T "b, " T "c)", "ct_tensor *ct_@_(ct_tensor *a, " T "b, " T "c)",
      "ct_tensor *ct_@_out(" T "a, " T "b, " T "c, ct_tensor *out)", "ct_tensor *ct_@_scalar(" T "a, " T "b, ct_scalar c)",
      "ct_tensor *ct_@_scalar_(ct_tensor *a, " T "b, ct_scalar c)",
      "ct_tensor *ct_@_scalar_out(" T "a, " T "b, ct_scalar c, ct_tensor *out)"}},
    {"TERNARY_VALUE",
     "TERNARY_VALUE: out = NAME(a, b, c, value) (addcmul: a + value * b * c).",
     {"ct_tensor *ct_@(" T "a, " T "b, " T "c, ct_scalar value)",
      "ct_tensor *ct_@_(ct_tensor *a, " T "b, " T "c, ct_scalar value)",
      "ct_tensor *ct_@_out(" T "a, " T "b, " T "c, ct_scalar value, ct_tensor *out)"}},
    {"CLAMP",
     "CLAMP: bounds as optional scalars (NULL: no bound) or optional tensors; at least\n"
     "one bound must be given. Scalar and tensor bounds take part in type promotion.",
     {"ct_tensor *ct_@(" T "a, const ct_scalar *min, const ct_scalar *max)",
      "ct_tensor *ct_@_(ct_tensor *a, const ct_scalar *min, const ct_scalar *max)",
      "ct_tensor *ct_@_out(" T "a, const ct_scalar *min, const ct_scalar *max, ct_tensor *out)",
      "ct_tensor *ct_@_tensor(" T "a, " T "min, " T "max)", "ct_tensor *ct_@_tensor_(ct_tensor *a, " T "min, " T "max)",
      "ct_tensor *ct_@_tensor_out(" T "a, " T "min, " T "max, ct_tensor *out)"}},
    {"WHERE",
     "WHERE: out = cond ? a : b elementwise; a and/or b may be scalars.",
     {"ct_tensor *ct_@(" T "cond, " T "a, " T "b)", "ct_tensor *ct_@_out(" T "cond, " T "a, " T "b, ct_tensor *out)",
      "ct_tensor *ct_@_scalar_self(" T "cond, ct_scalar a, " T "b)",
      "ct_tensor *ct_@_scalar_other(" T "cond, " T "a, ct_scalar b)",
      "ct_tensor *ct_@_scalars(" T "cond, ct_scalar a, ct_scalar b)"}},
};

#define COUNT_OF(a) (sizeof(a) / sizeof((a)[0]))

/* Prints one comment, each of its lines prefixed; an empty line stays " *". */
static void print_comment(const char *text) {
    printf("/* ");
    for (const char *p = text; *p; p++) {
        if (*p == '\n')
            printf(p[1] == '\n' ? "\n *" : "\n * ");
        else
            putchar(*p);
    }
    printf(" */\n");
}

/* Prints "CT_API <proto>;", '@' replaced by name, wrapped after commas to LINE_WIDTH
 * with continuation lines aligned one past the opening parenthesis. */
static void print_proto(const char *tmpl, const char *name) {
    char line[1024];
    size_t n = (size_t)snprintf(line, sizeof line, "CT_API ");
    for (const char *p = tmpl; *p && n + strlen(name) + 2 < sizeof line; p++) {
        if (*p == '@') {
            memcpy(line + n, name, strlen(name));
            n += strlen(name);
        } else {
            line[n++] = *p;
        }
    }
    line[n++] = ';';
    line[n] = '\0';
    if (n <= LINE_WIDTH) {
        puts(line);
        return;
    }
    const char *paren = strchr(line, '(');
    int indent = paren ? (int)(paren - line) + 1 : 4;
    const char *start = line; /* the rest to print */
    int col = 0;              /* the current line's width so far (its indent included) */
    while (*start) {
        /* the next piece: up to and including the next ", " (or the end) */
        const char *comma = strstr(start, ", ");
        size_t len = comma ? (size_t)(comma - start) + 1 : strlen(start);
        if (col > indent && col + 1 + (int)len > LINE_WIDTH) {
            printf("\n%*s", indent, "");
            col = indent;
        } else if (col > 0) {
            putchar(' ');
            col++;
        }
        fwrite(start, 1, len, stdout);
        col += (int)len;
        start += len;
        if (*start == ' ')
            start++;
    }
    putchar('\n');
}

static int generate(void) {
    /* every row must have a class here or be CUSTOM (written out in ops.h) */
    int status = 0;
    for (size_t i = 0; i < COUNT_OF(rows); i++) {
        bool known = strcmp(rows[i].sig, "CUSTOM") == 0;
        for (size_t c = 0; c < COUNT_OF(classes) && !known; c++)
            known = strcmp(rows[i].sig, classes[c].sig) == 0;
        if (!known) {
            fprintf(stderr, "gen_ops_header: op %s has signature class %s, which has no prototypes here\n",
                    rows[i].name, rows[i].sig);
            status = 1;
        }
    }
    if (status)
        return status;

    printf("/* Generated by tools/gen_ops_header.c from ctorch/ops.def: do not edit.\n"
           " * Regenerate with `cmake --build build --target ops_generated_h`; the ctest test\n"
           " * ops_generated_h fails while this file differs from the generator's output.\n"
           " *\n"
           " * The public functions of every op whose signature class (the second column of\n"
           " * ops.def) generates them, class by class, each op under its name. NAME in a\n"
           " * class's comment is the op's name. All follow the ownership and error rules of\n"
           " * core.h: results are new references owned by the innermost scope, NULL on error.\n"
           " * Included by ctorch/ops.h, which declares the CUSTOM ops by hand. */\n"
           "#ifndef CTORCH_OPS_GENERATED_H\n"
           "#define CTORCH_OPS_GENERATED_H\n");
    for (size_t c = 0; c < COUNT_OF(classes); c++) {
        printf("\n");
        print_comment(classes[c].comment);
        for (size_t i = 0; i < COUNT_OF(rows); i++) {
            if (strcmp(rows[i].sig, classes[c].sig) != 0)
                continue;
            printf("\n/* %s */\n", rows[i].name);
            for (int k = 0; k < MAX_PROTOS && classes[c].protos[k]; k++)
                print_proto(classes[c].protos[k], rows[i].name);
        }
    }
    printf("\n#endif /* CTORCH_OPS_GENERATED_H */\n");
    return ferror(stdout) ? 1 : 0;
}

/* With a path: written beside it first, then renamed over it, so that a failed run
 * leaves the old file. */
int main(int argc, char **argv) {
    if (argc > 2) {
        fprintf(stderr, "usage: gen_ops_header [output.h]\n");
        return 2;
    }
    if (argc < 2)
        return generate();
    char tmp[4096];
    if (snprintf(tmp, sizeof tmp, "%s.tmp", argv[1]) >= (int)sizeof tmp || !freopen(tmp, "w", stdout)) {
        fprintf(stderr, "gen_ops_header: cannot write %s\n", argv[1]);
        return 1;
    }
    int status = generate();
    if (fclose(stdout) != 0)
        status = 1;
    if (status == 0 && rename(tmp, argv[1]) != 0) {
        fprintf(stderr, "gen_ops_header: cannot rename %s to %s\n", tmp, argv[1]);
        status = 1;
    }
    if (status != 0)
        remove(tmp);
    return status;
}
