/* The compiler's entry points for the registry. */
#ifndef CT_COMPILE_INTERNAL_H
#define CT_COMPILE_INTERNAL_H

/* Registers the TRACE kernel (Note [Capture protocol] in capture.c) and the host-read
 * hook (Note [Host reads under capture] in src/core/error.h). */
void ct_compile_register(void);

#endif /* CT_COMPILE_INTERNAL_H */
