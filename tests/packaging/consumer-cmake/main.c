/*
 * main.c: the consumer's program. Built twice by this project, against
 * dsh::session and dsh::session_static (and by scripts/test-packaging.sh with
 * pkg-config). Checks that the library it runs with is the one its header
 * describes, then runs a short session on a memory store.
 */
#include <stdio.h>
#include <string.h>

#include <dsh_session.h>

static int fail(const char *what, dsh_status st, dsh_buf *out) {
  fprintf(stderr, "%s: %s %s\n", what, dsh_status_name(st), out->ptr ? out->ptr : "");
  dsh_buf_free(out);
  return 1;
}

int main(void) {
  if (dsh_abi_version() != DSH_ABI_VERSION || strcmp(dsh_version(), DSH_VERSION_STRING) != 0) {
    fprintf(stderr, "library %s (ABI %u) does not match the header %s (ABI %d)\n", dsh_version(),
            (unsigned)dsh_abi_version(), DSH_VERSION_STRING, DSH_ABI_VERSION);
    return 1;
  }
  dsh_buf out = DSH_BUF_INIT;
  dsh_store *store = NULL;
  dsh_session *s = NULL;
  dsh_status st = dsh_store_open(NULL, &store, &out);
  if (st != DSH_OK) return fail("store_open", st, &out);
  dsh_buf_free(&out);
  st = dsh_session_create(store, "{\"id\":\"consumer\"}", &s, &out);
  if (st != DSH_OK) return fail("session_create", st, &out);
  dsh_buf_free(&out);
  st = dsh_session_append(s, "user/message",
                          "{\"id\":\"u1\",\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"hi\"}],"
                          "\"source\":{\"kind\":\"user\"}}",
                          "{\"surfaceOp\":\"append\"}", &out);
  if (st != DSH_OK) return fail("append", st, &out);
  dsh_buf_free(&out);
  st = dsh_session_derive(s, &out);
  if (st != DSH_OK || strstr(out.ptr, "\"id\":\"u1\"") == NULL) return fail("derive", st, &out);
  printf("consumer: dsh-session %s (ABI %u): derived %s\n", dsh_version(), (unsigned)dsh_abi_version(), out.ptr);
  dsh_buf_free(&out);
  dsh_session_close(s, NULL);
  dsh_store_close(store, NULL);
  return 0;
}
