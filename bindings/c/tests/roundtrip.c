/*
 * roundtrip.c: the C ABI round trip on the durable backends (SQLite, JSONL).
 *
 * Version/ABI functions against the header macros; then per backend: write a
 * turn, read it back after closing and reopening the store (events, derived
 * messages and the pure derive of the same log agree byte for byte), fork
 * the reopened session. Prints one line per check and ends with the plain
 * line "N passed, M failed"; exits non-zero when a check failed.
 * Linked once against dsh::session and once against dsh::session_static.
 */
#define _XOPEN_SOURCE 700 /* mkdtemp, nftw */
#include <ftw.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dsh_session.h"

static int n_passed, n_failed;

static int check(int ok, const char *name, const char *fmt, ...) {
  if (ok) {
    n_passed++;
    printf("ok   %s\n", name);
    return 1;
  }
  n_failed++;
  printf("FAIL %s: ", name);
  va_list ap;
  va_start(ap, fmt);
  vprintf(fmt, ap);
  va_end(ap);
  printf("\n");
  return 0;
}

/* Run a call that must succeed; returns a malloc'ed copy of its output (or NULL). */
static char *call(const char *name, dsh_status st, dsh_buf *out) {
  char *copy = NULL;
  if (check(st == DSH_OK && out->ptr != NULL && out->ptr[out->len] == 0, name, "%s %s",
            dsh_status_name(st), out->ptr ? out->ptr : "(no output)")) {
    copy = malloc(out->len + 1);
    memcpy(copy, out->ptr, out->len + 1);
  }
  dsh_buf_free(out);
  return copy;
}

static void test_version(void) {
  dsh_buf out = DSH_BUF_INIT;
  check(dsh_abi_version() == DSH_ABI_VERSION, "dsh_abi_version() == DSH_ABI_VERSION", "library %u, header %d",
        (unsigned)dsh_abi_version(), DSH_ABI_VERSION);
  check(strcmp(dsh_version(), DSH_VERSION_STRING) == 0, "dsh_version() == DSH_VERSION_STRING",
        "library %s, header %s", dsh_version(), DSH_VERSION_STRING);
  check(DSH_VERSION_NUMBER == DSH_VERSION_MAJOR * 1000000 + DSH_VERSION_MINOR * 1000 + DSH_VERSION_PATCH,
        "DSH_VERSION_NUMBER agrees with MAJOR/MINOR/PATCH", "%d", DSH_VERSION_NUMBER);
  check(DSH_ABI_VERSION == (DSH_VERSION_MAJOR == 0 ? DSH_VERSION_MINOR : DSH_VERSION_MAJOR),
        "DSH_ABI_VERSION is the minor before 1.0, the major after", "%d", DSH_ABI_VERSION);
  char *info = call("dsh_build_info", dsh_build_info(&out), &out);
  if (info != NULL) {
    char want[64];
    snprintf(want, sizeof want, "\"abi\":%d", DSH_ABI_VERSION);
    check(strstr(info, want) != NULL, "build_info.abi == DSH_ABI_VERSION", "%s", info);
    snprintf(want, sizeof want, "\"version\":\"%s\"", DSH_VERSION_STRING);
    check(strstr(info, want) != NULL, "build_info.version == DSH_VERSION_STRING", "%s", info);
    free(info);
  }
}

static const char *TURN =
    "[{\"type\":\"turn/start\",\"data\":{\"turn\":1}},"
    "{\"type\":\"user/message\",\"data\":{\"id\":\"u1\",\"role\":\"user\",\"content\":[{\"type\":\"text\","
    "\"text\":\"caf\\u00e9 \\ud83d\\ude00 1e400 -0\"}],\"source\":{\"kind\":\"user\"}},"
    "\"intent\":{\"surfaceOp\":\"append\"}},"
    "{\"type\":\"step/start\",\"data\":{\"turn\":1,\"step\":1}},"
    "{\"type\":\"assistant/message\",\"data\":{\"turn\":1,\"step\":1,\"message\":{\"role\":\"assistant\","
    "\"content\":[{\"type\":\"text\",\"text\":\"hello\"}],\"source\":{\"kind\":\"model\",\"provider\":\"deepseek\","
    "\"model\":\"deepseek-chat\"},\"id\":\"a1\"},\"usage\":{\"inputTokens\":12,\"outputTokens\":1.5e0}},"
    "\"intent\":{\"surfaceOp\":\"append\",\"sourceEventSeqs\":[]}},"
    "{\"type\":\"step/end\",\"data\":{\"turn\":1,\"step\":1}},"
    "{\"type\":\"turn/end\",\"data\":{\"turn\":1,\"reason\":{\"kind\":\"completed\"}}}]";

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
  (void)sb, (void)flag, (void)ftw;
  return remove(path);
}

static void test_backend(const char *backend, const char *leaf) {
  char tmpl[] = "/tmp/dsh-roundtrip-XXXXXX";
  char *dir = mkdtemp(tmpl);
  if (!check(dir != NULL, "mkdtemp", "")) return;
  char config[4200], name[128];
  snprintf(config, sizeof config, "{\"backend\":\"%s\",\"path\":\"%s/%s\"}", backend, dir, leaf);
  printf("# %s store at %s/%s\n", backend, dir, leaf);
  dsh_buf out = DSH_BUF_INIT;
  dsh_store *st = NULL;
  dsh_session *s = NULL, *child = NULL;
  char *events = NULL, *derived = NULL, *pure = NULL, *again = NULL, *opened = NULL, *list = NULL;

#define NAME(what) (snprintf(name, sizeof name, "%s: %s", backend, what), name)
  free(call(NAME("store_open"), dsh_store_open(config, &st, &out), &out));
  if (st == NULL) goto done;
  free(call(NAME("session_create"), dsh_session_create(st, "{\"id\":\"rt\"}", &s, &out), &out));
  if (s == NULL) goto close_store;
  free(call(NAME("append_batch (one turn)"), dsh_session_append_batch(s, TURN, &out), &out));
  events = call(NAME("events"), dsh_session_events(s, 0, UINT64_MAX, &out), &out);
  derived = call(NAME("derive"), dsh_session_derive(s, &out), &out);
  free(call(NAME("flush"), dsh_session_flush(s, &out), &out));
  free(call(NAME("session_close"), dsh_session_close(s, &out), &out));
  s = NULL;
  free(call(NAME("store_close"), dsh_store_close(st, &out), &out));
  st = NULL;

  /* Reopen: everything comes back from disk. */
  free(call(NAME("store_open again"), dsh_store_open(config, &st, &out), &out));
  if (st == NULL) goto done;
  list = call(NAME("store_list"), dsh_store_list(st, &out), &out);
  check(list && strstr(list, "\"id\":\"rt\""), NAME("store_list names rt"), "%s", list ? list : "");
  opened = call(NAME("session_open"), dsh_session_open(st, "rt", &s, &out), &out);
  check(opened && strstr(opened, "\"repaired\":[]"), NAME("a closed turn needs no repair"), "%s",
        opened ? opened : "");
  if (s == NULL) goto close_store;
  again = call(NAME("events after reopen"), dsh_session_events(s, 0, UINT64_MAX, &out), &out);
  /* Opening a stored session appends session/end-seed (as the reference's load does), so the
   * reopened log is the written one plus that marker: compare the common prefix. */
  check(events && again && strncmp(events, again, strlen(events) - 1) == 0 && strstr(again, "session/end-seed"),
        NAME("events identical after reopen (+ session/end-seed)"), "\n#  %s\n#  %s", events ? events : "",
        again ? again : "");
  free(again);
  again = call(NAME("derive after reopen"), dsh_session_derive(s, &out), &out);
  check(derived && again && strcmp(derived, again) == 0, NAME("derive identical after reopen"), "\n#  %s\n#  %s",
        derived ? derived : "", again ? again : "");
  if (events != NULL) {
    pure = call(NAME("dsh_derive_messages(events)"), dsh_derive_messages(events, &out), &out);
    check(derived && pure && strcmp(derived, pure) == 0, NAME("pure derive == session derive"), "\n#  %s\n#  %s",
          derived ? derived : "", pure ? pure : "");
  }
  free(again);
  again = NULL;
  free(call(NAME("fork"), dsh_session_fork(s, -1, "{\"id\":\"rt-fork\"}", &child, &out), &out));
  if (child != NULL) {
    again = call(NAME("fork derive"), dsh_session_derive(child, &out), &out);
    check(derived && again && strcmp(derived, again) == 0, NAME("fork derives the same messages"), "%s",
          again ? again : "");
    free(call(NAME("fork flush"), dsh_session_flush(child, &out), &out));
    free(call(NAME("fork close"), dsh_session_close(child, &out), &out));
  }
  free(call(NAME("session_close again"), dsh_session_close(s, &out), &out));
  s = NULL;
  /* The windowed open answers like the full one. */
  free(call(NAME("session_open_windowed"), dsh_session_open_windowed(st, "rt", "{\"window\":1}", &s, &out), &out));
  if (s != NULL) {
    free(again);
    again = call(NAME("derive after a windowed open"), dsh_session_derive(s, &out), &out);
    check(derived && again && strcmp(derived, again) == 0, NAME("windowed derive identical"), "\n#  %s\n#  %s",
          derived ? derived : "", again ? again : "");
    free(call(NAME("windowed session_close"), dsh_session_close(s, &out), &out));
  }

close_store:
  free(call(NAME("store_close again"), dsh_store_close(st, &out), &out));
done:
  free(events), free(derived), free(pure), free(again), free(opened), free(list);
  check(nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS) == 0, NAME("remove the temporary store"), "%s", dir);
#undef NAME
}

int main(void) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  test_version();
  test_backend("sqlite", "store.db");
  test_backend("jsonl", "logs");
  printf("%d passed, %d failed\n", n_passed, n_failed);
  return n_failed == 0 ? 0 : 1;
}
