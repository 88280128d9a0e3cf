/* Model parameters in and out of checkpoints, shared by the training commands. */
#include <string.h>

#include "commands.h"
#include "ctorch/ext.h"

ct_value *ct_cli_params_dict(const char *const *names, ct_tensor *const *params, int n) {
    ct_value *d = ct_value_new_dict();
    ct_scope_begin();
    for (int i = 0; i < n; i++) /* host copies of parameters on a GPU: checkpoints hold CPU tensors */
        ct_value_set(d, names[i], ct_value_new_tensor(ct_detach(ct_to_device(params[i], CT_CPU))));
    ct_scope_end();
    return d;
}

ct_status ct_cli_load_params(const ct_value *model, const char *const *names, ct_tensor *const *params, int n,
                             const char *path) {
    ct_status st = CT_OK;
    for (int i = 0; i < n && st == CT_OK; i++) {
        ct_scope_begin();
        ct_tensor *t = model ? ct_value_tensor(ct_value_get(model, names[i])) : NULL;
        bool prev = ct_set_grad_enabled(false);
        if (!t)
            st = ct_error(CT_ERROR_FORMAT, "train", "%s has no tensor '%s' (a checkpoint of another model?)", path,
                          names[i]);
        /* copy_ would broadcast a smaller tensor: the shapes must match exactly */
        else if (ct_tensor_dim(t) != ct_tensor_dim(params[i]) ||
                 memcmp(ct_tensor_shape(t), ct_tensor_shape(params[i]),
                        sizeof(int64_t) * (size_t)ct_tensor_dim(t)) != 0)
            st = ct_error(CT_ERROR_VALUE, "train", "'%s' in %s has another shape than this model's: pass the model "
                          "options it was trained with", names[i], path);
        else if (!ct_copy_(params[i], t))
            st = ct_last_status();
        ct_set_grad_enabled(prev);
        ct_scope_end();
    }
    return st;
}
