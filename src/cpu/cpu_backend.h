/* The CPU backend's entry points for the registry and the core's device interface. */
#ifndef CT_CPU_BACKEND_H
#define CT_CPU_BACKEND_H

#include "core/device.h"

/* Registers the CPU backend: its device interface and stubs (register.c). */
void ct_cpu_register(void);
/* The parts, one per file: copy.c (the device interface), shape.c. */
void ct_cpu_register_device(void);
void ct_cpu_register_shape(void);
/* pad.c: pad's stub (src/meta/pad.c). */
void ct_cpu_register_pad(void);
/* advindex.c: the stubs of index and index_put (src/meta/advindex.c). */
void ct_cpu_register_advindex(void);
/* indexing.c: the stubs of scatter, index_copy, index_fill, take, masked_select,
 * masked_scatter, kthvalue and unique (src/meta/indexing.c). */
void ct_cpu_register_indexing(void);
/* ct_device_iface.random_fill of the CPU (src/cpu/random.c). */
ct_status ct_cpu_random_fill(const ct_random_job *job, int device_index);

#endif /* CT_CPU_BACKEND_H */
