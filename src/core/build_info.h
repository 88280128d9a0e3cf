/* Lines of ct_build_info that backends register (Note [Build info lines] in runtime.c). */
#ifndef CT_CORE_BUILD_INFO_H
#define CT_CORE_BUILD_INFO_H
#include "core/backend_api.h"

CT_BACKEND_BEGIN

/* Sets the line "key: value" (key up to 15 characters); a later call with the same key
 * replaces it. */
void ct_build_info_set(const char *key, const char *value);

CT_BACKEND_END

#endif /* CT_CORE_BUILD_INFO_H */
