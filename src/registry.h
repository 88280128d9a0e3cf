/* The registry of built-in modules (Note [Registry] in registry.c). */
#ifndef CT_REGISTRY_H
#define CT_REGISTRY_H

#include <stdbool.h>

/* Registers every built-in module once; later calls return at once. Called by the
 * dispatcher's and the device table's lazy set-up. False, with an out-of-memory error
 * set, when the registration ran out of memory; the next call tries again. */
bool ct_runtime_init(void);
/* ct_runtime_init, and for CUDA the loadable backend too, which is looked for the first
 * time a CUDA device is asked for, not at start-up (Note [Lazy CUDA backend]). type is
 * a ct_device_type. Called by the device table; false as ct_runtime_init. */
bool ct_runtime_load_backend(int type);

#endif /* CT_REGISTRY_H */
