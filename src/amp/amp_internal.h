/* The amp module's registration (src/registry.c calls it). */
#ifndef CT_AMP_INTERNAL_H
#define CT_AMP_INTERNAL_H

#include "dispatch/call.h"

/* Registers the AUTOCAST kernel of every op of the policy table (src/amp/autocast.def)
 * and the composites' cast hook (Note [Autocast of composites] in autocast.c). */
void ct_amp_register(void);

/* The casts the AUTOCAST kernel makes for a call on keys ks, made by the caller (Note
 * [Autocast under capture] in src/compile/capture.c): 1 when the call is autocast (c's
 * inputs replaced by their casts, or its dtype set; *list, when not NULL afterwards, is
 * a new array of the cast list entries for the caller to free), 0 when it runs as
 * called, -1 on error. c is a copy of the call: the casts belong to the current scope. */
int ct_autocast_prepare(ct_keyset ks, ct_call *c, const ct_tensor ***list);

#endif /* CT_AMP_INTERNAL_H */
