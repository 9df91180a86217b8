/* The C API of dsh-session; the include path comes from pkg-config (dsh-session.pc). */
#include <dsh_session.h>
