/* Helpers for the module families. */
#ifndef CT_NN_MODULE_INTERNAL_H
#define CT_NN_MODULE_INTERNAL_H

#include "ctorch.h"

/* The dtype a layer is made in: floating, CT_DTYPE_UNDEFINED meaning the default. */
ct_status ct_nn_layer_dtype(const char *op, ct_dtype *dtype);
/* kernel given, groups positive and dividing both channel counts (the conv modules). */
ct_status ct_nn_conv_check(const char *op, const int64_t *kernel, int64_t in_channels, int64_t out_channels,
                           int64_t groups);
/* A module with a ctx of size bytes (zeroed, freed with the module); NULL on error. */
ct_module *ct_nn_module_with_ctx(const char *type, ct_module_forward_fn forward, size_t size);
/* Makes a tensor of shape, registers it as parameter name of m (m keeps the only
 * reference) and returns it borrowed; NULL on error. */
ct_tensor *ct_nn_new_param(ct_module *m, const char *name, const int64_t *shape, int ndim, ct_dtype dtype);
/* nn.Linear's and nn.Conv*'s reset_parameters: kaiming_uniform_(a = sqrt(5)) for w, and
 * U(-1/sqrt(fan_in), 1/sqrt(fan_in)) for b (may be NULL). */
ct_status ct_nn_reset_weight_bias(ct_tensor *w, ct_tensor *b);

/* nn.LayerNorm(normalized_shape, eps, elementwise_affine, bias): without bias, the
 * weight alone (the Transformer layers' bias=False). */
ct_module *ct_nn_layer_norm_bias(const int64_t *normalized_shape, int n, double eps, bool elementwise_affine,
                                 bool bias, ct_dtype dtype);

/* Python's repr of a float ("1e-05", "0.1", "1.0"), written as snprintf writes;
 * returns the length. For extra_repr functions. */
int ct_nn_float_repr(double f, char *buf, size_t cap);
/* Makes m print as a ModuleList does (runs of equal children once). */
void ct_nn_module_set_list_repr(ct_module *m);

#endif
