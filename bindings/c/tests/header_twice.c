/*
 * header_twice.c: compiled, never run, by the ctest tests header_c99,
 * header_c11 (-pedantic) and header_cxx17 (as C++): dsh_session.h must stand
 * on its own (it is the first include), survive being included twice, and
 * compile warning-free with -Wall -Wextra -Werror.
 */
#include "dsh_session.h"
#include "dsh_session.h"

#if !defined(DSH_VERSION_MAJOR) || !defined(DSH_VERSION_MINOR) || !defined(DSH_VERSION_PATCH) || \
    !defined(DSH_VERSION_STRING) || !defined(DSH_VERSION_NUMBER) || !defined(DSH_ABI_VERSION)
#error "dsh_session.h must define the DSH_VERSION_* and DSH_ABI_VERSION macros"
#endif

int dsh_header_check(void);

/* Uses the types, the initialiser and a status constant. */
int dsh_header_check(void) {
  dsh_buf buf = DSH_BUF_INIT;
  dsh_status status = DSH_OK;
  dsh_store *store = NULL;
  dsh_session *session = NULL;
  dsh_observer_fn observer = NULL;
  return (int)buf.len + status + (store == NULL) + (session == NULL) + (observer == NULL) + DSH_ABI_VERSION;
}
