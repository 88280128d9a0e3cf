/* The CPU backend's oneDNN engine and reorders (cpu/onednn.h). */
#include "cpu/onednn.h"

#ifdef CT_HAVE_DNNL
#include <pthread.h>
#include <stddef.h>

static dnnl_engine_t engine;
static pthread_once_t engine_once = PTHREAD_ONCE_INIT;

static void engine_create(void) {
    if (dnnl_engine_create(&engine, dnnl_cpu, 0) != dnnl_success)
        engine = NULL;
}

dnnl_engine_t ct_cpu_dnnl_engine(void) {
    pthread_once(&engine_once, engine_create);
    return engine;
}

dnnl_status_t ct_cpu_dnnl_reorder(dnnl_stream_t stream, dnnl_memory_t from, const dnnl_memory_desc_t *from_md,
                                  const dnnl_memory_desc_t *to, dnnl_memory_t *out) {
    dnnl_engine_t eng = ct_cpu_dnnl_engine();
    dnnl_primitive_desc_t pd = NULL;
    dnnl_primitive_t r = NULL;
    dnnl_status_t s = dnnl_memory_create(out, to, eng, DNNL_MEMORY_ALLOCATE);
    if (s == dnnl_success)
        s = dnnl_reorder_primitive_desc_create(&pd, from_md, eng, to, eng, NULL);
    if (s == dnnl_success)
        s = dnnl_primitive_create(&r, pd);
    dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, *out}};
    if (s == dnnl_success)
        s = dnnl_primitive_execute(r, stream, 2, args);
    if (s == dnnl_success)
        s = dnnl_stream_wait(stream);
    if (r)
        dnnl_primitive_destroy(r);
    if (pd)
        dnnl_primitive_desc_destroy(pd);
    return s;
}
#else
typedef int ct_cpu_onednn_unused; /* ISO C wants a declaration in every unit */
#endif
