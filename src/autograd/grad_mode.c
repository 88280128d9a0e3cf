/* Grad mode, inference mode and anomaly mode.
 *
 * Note [Grad mode]
 * Turning grad mode off (or entering inference mode) puts the AUTOGRAD key into this
 * thread's exclude set, so ops skip the autograd kernel entirely and record nothing.
 * The two settings are kept apart so that leaving one does not undo the other. */
#include <stdatomic.h>
#include <stdint.h>

#include "autograd/node.h"

static CT_THREAD_LOCAL bool tls_grad_disabled;
static CT_THREAD_LOCAL int tls_inference_depth;
/* Grad mode saved by each of the 64 innermost inference-mode levels, one bit each
 * (Note [Thread-local storage]). */
static CT_THREAD_LOCAL uint64_t tls_inference_saved_grad;
static atomic_bool anomaly;

static void apply_exclusion(void) {
    ct_keyset ex = ct_tls_excluded();
    if (tls_grad_disabled || tls_inference_depth > 0)
        ex |= CT_KEYSET(CT_KEY_AUTOGRAD);
    else
        ex &= ~CT_KEYSET(CT_KEY_AUTOGRAD);
    ct_tls_set_excluded(ex);
}

bool ct_set_grad_enabled(bool enabled) {
    bool prev = !tls_grad_disabled;
    tls_grad_disabled = !enabled;
    apply_exclusion();
    return prev;
}

bool ct_is_grad_enabled(void) { return !tls_grad_disabled && tls_inference_depth == 0; }

void ct_inference_mode_begin(void) {
    if (tls_inference_depth < 64) {
        uint64_t bit = (uint64_t)1 << tls_inference_depth;
        tls_inference_saved_grad = tls_grad_disabled ? tls_inference_saved_grad | bit : tls_inference_saved_grad & ~bit;
    }
    tls_inference_depth++;
    ct_tls_inference_mode = true;
    apply_exclusion();
}

void ct_inference_mode_end(void) {
    if (tls_inference_depth == 0)
        return; /* unbalanced end: ignored, as ct_scope_end does */
    tls_inference_depth--;
    if (tls_inference_depth < 64)
        tls_grad_disabled = (tls_inference_saved_grad >> tls_inference_depth) & 1;
    ct_tls_inference_mode = tls_inference_depth > 0;
    apply_exclusion();
}

bool ct_is_inference_mode_enabled(void) { return tls_inference_depth > 0; }

void ct_set_anomaly_enabled(bool enabled) { atomic_store(&anomaly, enabled); }
bool ct_anomaly_enabled(void) { return atomic_load(&anomaly); }
