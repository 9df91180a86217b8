/*
 * host_sqlite.c: a host that brings its own SQLite symbol.
 *
 * It defines sqlite3_open itself (as a host linking its own libsqlite3
 * would) and links the static archive libdsh_session.a. That only links
 * because the archive's bundled SQLite (and everything else but dsh_*) is
 * local; with cargo's unprocessed archive the link fails with "multiple
 * definition of `sqlite3_open'". At run time both SQLites must work: the
 * host's symbol is the one the host calls, and the library still opens and
 * writes its own SQLite store.
 */
#define _XOPEN_SOURCE 700 /* mkdtemp */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dsh_session.h"

typedef struct sqlite3 sqlite3;
int sqlite3_open(const char *filename, sqlite3 **db);

/* The host's own "SQLite". */
int sqlite3_open(const char *filename, sqlite3 **db) {
  (void)filename;
  *db = NULL;
  return 42;
}

static int n_passed, n_failed;
static void check(int ok, const char *name, const char *detail) {
  if (ok) n_passed++; else n_failed++;
  printf("%s %s%s%s\n", ok ? "ok  " : "FAIL", name, ok ? "" : ": ", ok ? "" : detail);
}

int main(void) {
  sqlite3 *db = NULL;
  check(sqlite3_open("host.db", &db) == 42, "the host's sqlite3_open is the one called", "");

  char tmpl[] = "/tmp/dsh-host-sqlite-XXXXXX";
  char *dir = mkdtemp(tmpl);
  if (dir == NULL) { perror("mkdtemp"); return 1; }
  char path[4096], config[4200];
  snprintf(path, sizeof path, "%s/store.db", dir);
  snprintf(config, sizeof config, "{\"backend\":\"sqlite\",\"path\":\"%s\",\"batchWindowMs\":0}", path);

  dsh_buf out = DSH_BUF_INIT;
  dsh_store *store = NULL;
  dsh_session *s = NULL;
  dsh_status st = dsh_store_open(config, &store, &out);
  check(st == DSH_OK, "the library opens its own SQLite store", out.ptr ? out.ptr : "");
  dsh_buf_free(&out);
  if (store != NULL) {
    st = dsh_session_create(store, "{\"id\":\"host\"}", &s, &out);
    check(st == DSH_OK, "session_create", out.ptr ? out.ptr : "");
    dsh_buf_free(&out);
    if (s != NULL) {
      st = dsh_session_append(s, "turn/start", "{\"turn\":1}", NULL, &out);
      check(st == DSH_OK, "append", out.ptr ? out.ptr : "");
      dsh_buf_free(&out);
      st = dsh_session_flush(s, &out);
      check(st == DSH_OK, "flush to SQLite", out.ptr ? out.ptr : "");
      dsh_buf_free(&out);
      dsh_session_close(s, NULL);
    }
    st = dsh_build_info(&out);
    check(st == DSH_OK && strstr(out.ptr, "\"sqlite\":\"3.") != NULL, "build_info names the bundled SQLite",
          out.ptr ? out.ptr : "");
    dsh_buf_free(&out);
    dsh_store_close(store, NULL);
  }
  const char *suffixes[] = {"", "-wal", "-shm", "-journal"};
  for (size_t i = 0; i < sizeof suffixes / sizeof *suffixes; i++) {
    char f[4200];
    snprintf(f, sizeof f, "%s%s", path, suffixes[i]);
    unlink(f);
  }
  rmdir(dir);
  printf("%d passed, %d failed\n", n_passed, n_failed);
  return n_failed == 0 ? 0 : 1;
}
