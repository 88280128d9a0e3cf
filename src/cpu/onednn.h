/* What the CPU backend's oneDNN primitives share (packed_mm.c, rnn_onednn.c): one CPU
 * engine and the reorder of user memory into a primitive's layout. Only with
 * CT_HAVE_DNNL. */
#ifndef CT_CPU_ONEDNN_H
#define CT_CPU_ONEDNN_H

#ifdef CT_HAVE_DNNL
#include <dnnl.h>

/* The process's CPU engine, made on first use; NULL when oneDNN cannot make one. */
dnnl_engine_t ct_cpu_dnnl_engine(void);

/* *out = a new memory of layout `to` holding `from` (layout from_md) reordered, run on
 * stream and waited for. On failure *out may hold a memory the caller destroys. */
dnnl_status_t ct_cpu_dnnl_reorder(dnnl_stream_t stream, dnnl_memory_t from, const dnnl_memory_desc_t *from_md,
                                  const dnnl_memory_desc_t *to, dnnl_memory_t *out);
#endif

#endif
