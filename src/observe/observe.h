/* The observers' registration (src/observe: op logging, the profiler, the structured
 * log, the allocator snapshot). */
#ifndef CT_OBSERVE_H
#define CT_OBSERVE_H

/* Installs the dispatcher's observer and the LOGGING key's kernel, and applies the
 * environment (CT_TRACE, CT_LOG_OPS, CT_PROFILE); called once by the registry. */
void ct_observe_register(void);

#endif /* CT_OBSERVE_H */
