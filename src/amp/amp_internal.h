/* The amp module's registration (src/registry.c calls it). */
#ifndef CT_AMP_INTERNAL_H
#define CT_AMP_INTERNAL_H

/* Registers the AUTOCAST kernel of every op of the policy table (src/amp/autocast.def)
 * and the composites' cast hook (Note [Autocast of composites] in autocast.c). */
void ct_amp_register(void);

#endif /* CT_AMP_INTERNAL_H */
