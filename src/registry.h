/* The registry of built-in modules (Note [Registry] in registry.c). */
#ifndef CT_REGISTRY_H
#define CT_REGISTRY_H

/* Registers every built-in module once; later calls return at once. Called by the
 * dispatcher's and the device table's lazy set-up. */
void ct_runtime_init(void);

#endif /* CT_REGISTRY_H */
