/* Note [Deterministic algorithms]
 * torch.use_deterministic_algorithms: one process-wide switch. The CPU kernels are
 * deterministic whatever it says (Note [Threads] in docs/design.md: partials combine in
 * a fixed order), so only GPU kernels consult it. A kernel that adds through atomics
 * in no fixed order either has a deterministic alternative, which it takes while the
 * switch is on (flash attention's backward routes to the math path, embedding's
 * backward always sorts), or calls ct_alert_not_deterministic, which fails with the
 * op's name as PyTorch does. */
#include <stdatomic.h>

#include "core/determinism.h"
#include "core/error.h"

static atomic_bool g_deterministic;

void ct_use_deterministic_algorithms(bool mode) { atomic_store(&g_deterministic, mode); }

bool ct_are_deterministic_algorithms_enabled(void) { return atomic_load(&g_deterministic); }

ct_status ct_alert_not_deterministic(const char *op) {
    if (!atomic_load_explicit(&g_deterministic, memory_order_relaxed))
        return CT_OK;
    return ct_error(CT_ERROR_RUNTIME, op ? op : "op",
                    "%s does not have a deterministic implementation, but you set "
                    "'ct_use_deterministic_algorithms(true)'. You can turn off determinism just for this operation, "
                    "or use a deterministic alternative.",
                    op ? op : "this operation");
}
