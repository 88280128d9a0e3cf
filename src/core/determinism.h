/* The deterministic-algorithms switch (ct_use_deterministic_algorithms), read by the
 * backends before they launch a kernel whose result depends on the order of atomic
 * updates. See docs/core.md, "Deterministic algorithms". */
#ifndef CT_CORE_DETERMINISM_H
#define CT_CORE_DETERMINISM_H

#include "ctorch/core.h"
#include "core/backend_api.h"

CT_BACKEND_BEGIN

/* PyTorch's alertNotDeterministic: CT_OK when the switch is off; otherwise an error
 * naming op (PyTorch's name for the kernel, e.g. "index_add_cuda_"). Callers with a
 * deterministic kernel take it instead of asking. */
ct_status ct_alert_not_deterministic(const char *op);

CT_BACKEND_END

#endif /* CT_CORE_DETERMINISM_H */
