/*
 * host_system_libs.c: a host that uses the system's SQLite and zstd next to
 * the static archive libdsh_session.a, which bundles its own of both.
 *
 *   cc host_system_libs.c libdsh_session.a -lsqlite3 -lzstd -lpthread -ldl -lm
 *
 * The two copies must not meet. The host's calls reach the system
 * libraries (their versions are the system headers', and with shared
 * system libraries the functions live in libsqlite3.so / libzstd.so), and
 * the library's own SQLite and zstd serve the library: it writes and reads
 * back a SQLite store and a zstd JSONL store. The host also defines zstd's
 * tracing hooks (ZSTD_trace_*, weak references inside every zstd built
 * with GCC or Clang): the system zstd calls them, the library's never may,
 * since it would hand the host's tracer a context of another zstd version.
 *
 * Against cargo's unprocessed archive the same program fails: linked with
 * static system libraries it does not link (multiple definition of
 * sqlite3_*), linked with shared ones it runs with the host's calls
 * bound to the bundled copies. Prints "ok"/"FAIL" per check, then
 * "N passed, M failed"; exits 1 when a check failed.
 */
#define _GNU_SOURCE /* dladdr, mkdtemp */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sqlite3.h>
#include <zstd.h>

#include "dsh_session.h"

static int n_passed, n_failed;
static void check(int ok, const char *name, const char *detail) {
  if (ok) n_passed++; else n_failed++;
  printf("%s %s%s%s\n", ok ? "ok  " : "FAIL", name, ok ? "" : ": ", ok ? "" : detail);
}

/* zstd's tracing hooks, as a host that traces its zstd defines them
   (zstd/lib/common/zstd_trace.h). Returning 0 asks for no trace. */
static volatile int trace_calls;
unsigned long long ZSTD_trace_compress_begin(const void *cctx);
void ZSTD_trace_compress_end(unsigned long long ctx, const void *trace);
unsigned long long ZSTD_trace_decompress_begin(const void *dctx);
void ZSTD_trace_decompress_end(unsigned long long ctx, const void *trace);
unsigned long long ZSTD_trace_compress_begin(const void *cctx) {
  (void)cctx;
  __atomic_add_fetch(&trace_calls, 1, __ATOMIC_SEQ_CST);
  return 0;
}
void ZSTD_trace_compress_end(unsigned long long ctx, const void *trace) {
  (void)ctx, (void)trace;
  __atomic_add_fetch(&trace_calls, 1, __ATOMIC_SEQ_CST);
}
unsigned long long ZSTD_trace_decompress_begin(const void *dctx) {
  (void)dctx;
  __atomic_add_fetch(&trace_calls, 1, __ATOMIC_SEQ_CST);
  return 0;
}
void ZSTD_trace_decompress_end(unsigned long long ctx, const void *trace) {
  (void)ctx, (void)trace;
  __atomic_add_fetch(&trace_calls, 1, __ATOMIC_SEQ_CST);
}

#ifdef HOST_SHARED_SYSTEM_LIBS
/* The file (shared object or the executable) that defines `fn`. */
static const char *defined_in(void *fn) {
  Dl_info info;
  if (dladdr(fn, &info) == 0 || info.dli_fname == NULL) return "?";
  return info.dli_fname;
}
#endif

static char detail[8192];

/* The host's SQLite: the system's, working. */
static void host_sqlite(void) {
  snprintf(detail, sizeof detail, "sqlite3_libversion() = %s, <sqlite3.h> says %s", sqlite3_libversion(),
           SQLITE_VERSION);
  check(strcmp(sqlite3_libversion(), SQLITE_VERSION) == 0 &&
            sqlite3_libversion_number() == SQLITE_VERSION_NUMBER &&
            strcmp(sqlite3_sourceid(), SQLITE_SOURCE_ID) == 0,
        "the host's sqlite3_libversion/_number/_sourceid are the system SQLite's", detail);
#ifdef HOST_SHARED_SYSTEM_LIBS
  const char *where = defined_in((void *)sqlite3_open);
  snprintf(detail, sizeof detail, "sqlite3_open is defined in %s", where);
  check(strstr(where, "libsqlite3.so") != NULL, "the host's sqlite3_open is libsqlite3.so's", detail);
#endif
  sqlite3 *db = NULL;
  sqlite3_stmt *st = NULL;
  int ok = sqlite3_open(":memory:", &db) == SQLITE_OK &&
           sqlite3_exec(db, "create table t(x); insert into t values (41);", NULL, NULL, NULL) == SQLITE_OK &&
           sqlite3_prepare_v2(db, "select x + 1, sqlite_version() from t", -1, &st, NULL) == SQLITE_OK &&
           sqlite3_step(st) == SQLITE_ROW;
  if (ok) {
    const char *version = (const char *)sqlite3_column_text(st, 1);
    snprintf(detail, sizeof detail, "x + 1 = %d, sqlite_version() = %s", sqlite3_column_int(st, 0),
             version ? version : "NULL");
    ok = sqlite3_column_int(st, 0) == 42 && version != NULL && strcmp(version, SQLITE_VERSION) == 0;
  } else {
    snprintf(detail, sizeof detail, "%s", db ? sqlite3_errmsg(db) : "no database");
  }
  check(ok, "the host's SQLite runs a query in memory (sqlite_version() is the system's)", detail);
  sqlite3_finalize(st);
  sqlite3_close(db);
}

/* The host's zstd: the system's, working, and calling the host's hooks. */
static void host_zstd(void) {
  snprintf(detail, sizeof detail, "ZSTD_versionNumber() = %u, <zstd.h> says %u", ZSTD_versionNumber(),
           (unsigned)ZSTD_VERSION_NUMBER);
  check(ZSTD_versionNumber() == ZSTD_VERSION_NUMBER, "the host's ZSTD_versionNumber is the system zstd's", detail);
#ifdef HOST_SHARED_SYSTEM_LIBS
  const char *where = defined_in((void *)ZSTD_compress);
  snprintf(detail, sizeof detail, "ZSTD_compress is defined in %s", where);
  check(strstr(where, "libzstd.so") != NULL, "the host's ZSTD_compress is libzstd.so's", detail);
#endif
  const char text[] = "the host's own bytes, the host's own bytes, the host's own bytes";
  char frame[256], back[256];
  int before = trace_calls;
  size_t n = ZSTD_compress(frame, sizeof frame, text, sizeof text, 3);
  size_t m = ZSTD_isError(n) ? n : ZSTD_decompress(back, sizeof back, frame, n);
  check(!ZSTD_isError(n) && !ZSTD_isError(m) && m == sizeof text && memcmp(back, text, m) == 0,
        "the host's zstd compresses and decompresses", ZSTD_isError(n) ? ZSTD_getErrorName(n) : "round trip");
  snprintf(detail, sizeof detail, "%d calls", trace_calls - before);
  check(trace_calls - before >= 2, "the host's ZSTD_trace_* hooks are live: its own zstd calls them", detail);
}

static char *call(const char *what, dsh_status st, dsh_buf *out) {
  snprintf(detail, sizeof detail, "%s: %s %s", what, dsh_status_name(st), out->ptr ? out->ptr : "");
  check(st == DSH_OK, what, detail);
  return st == DSH_OK ? out->ptr : NULL;
}

/* The library on a store of `backend` under `dir`: create, append, flush,
   reopen, derive. Its SQLite and zstd are its own. */
static void library_store(const char *dir, const char *backend, const char *file) {
  char config[4400], what[128], json[512];
  snprintf(config, sizeof config, "{\"backend\":\"%s\",\"path\":\"%s/%s\",\"batchWindowMs\":0}", backend, dir, file);
  dsh_buf out = DSH_BUF_INIT;
  dsh_store *store = NULL;
  dsh_session *s = NULL;
  snprintf(what, sizeof what, "%s: the library opens a store", backend);
  if (call(what, dsh_store_open(config, &store, &out), &out) == NULL) return;
  dsh_buf_free(&out);
  snprintf(what, sizeof what, "%s: create, append a message, flush", backend);
  int ok = dsh_session_create(store, "{\"id\":\"host\"}", &s, &out) == DSH_OK;
  dsh_buf_free(&out);
  snprintf(json, sizeof json,
           "{\"id\":\"u1\",\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"%s\"}],"
           "\"source\":{\"kind\":\"user\"}}",
           "stored next to the host's own SQLite and zstd");
  ok = ok && dsh_session_append(s, "turn/start", "{\"turn\":1}", NULL, &out) == DSH_OK;
  dsh_buf_free(&out);
  ok = ok && dsh_session_append(s, "user/message", json, "{\"surfaceOp\":\"append\"}", &out) == DSH_OK;
  dsh_buf_free(&out);
  ok = ok && dsh_session_flush(s, &out) == DSH_OK;
  snprintf(detail, sizeof detail, "%s", out.ptr ? out.ptr : "");
  check(ok, what, detail);
  dsh_buf_free(&out);
  dsh_session_close(s, NULL);
  s = NULL;
  dsh_store_close(store, NULL);
  store = NULL;

  snprintf(what, sizeof what, "%s: reopen the store", backend);
  if (call(what, dsh_store_open(config, &store, &out), &out) == NULL) return;
  dsh_buf_free(&out);
  snprintf(what, sizeof what, "%s: reopen the session", backend);
  if (call(what, dsh_session_open(store, "host", &s, &out), &out) != NULL) {
    dsh_buf_free(&out);
    snprintf(what, sizeof what, "%s: derive", backend);
    char *derived = call(what, dsh_session_derive(s, &out), &out);
    snprintf(what, sizeof what, "%s: the message read back is the one written", backend);
    snprintf(detail, sizeof detail, "%s", derived ? derived : "");
    check(derived != NULL && strstr(derived, "stored next to the host's own SQLite and zstd") != NULL, what, detail);
    dsh_buf_free(&out);
    dsh_session_close(s, NULL);
  }
  dsh_buf_free(&out);
  dsh_store_close(store, NULL);
}

int main(void) {
  host_sqlite();
  host_zstd();

  dsh_buf out = DSH_BUF_INIT;
  char *info = call("dsh_build_info", dsh_build_info(&out), &out);
  const char *bundled = info ? strstr(info, "\"sqlite\":\"") : NULL;
  check(bundled != NULL, "the library names its bundled SQLite", info ? info : "");
  if (bundled != NULL) {
    bundled += strlen("\"sqlite\":\"");
    printf("# the host's SQLite %s, the library's %.*s; the host's zstd %s\n", sqlite3_libversion(),
           (int)strcspn(bundled, "\""), bundled, ZSTD_versionString());
    if (strncmp(bundled, SQLITE_VERSION "\"", strlen(SQLITE_VERSION) + 1) == 0)
      printf("# the two SQLite versions are equal: the version checks cannot tell the copies apart\n");
  }
  dsh_buf_free(&out);

  char tmpl[] = "/tmp/dsh-host-system-libs-XXXXXX";
  char *dir = mkdtemp(tmpl);
  if (dir == NULL) {
    perror("mkdtemp");
    return 1;
  }
  int before = trace_calls;
  library_store(dir, "sqlite", "store.db");
  library_store(dir, "jsonl", "logs");
  snprintf(detail, sizeof detail, "%d calls while the library wrote and read SQLite rows and zstd frames",
           trace_calls - before);
  check(trace_calls == before, "the library's zstd never calls the host's ZSTD_trace_* hooks", detail);

  char rm[4200];
  snprintf(rm, sizeof rm, "rm -rf '%s'", dir);
  if (system(rm) != 0) fprintf(stderr, "could not remove %s\n", dir);
  printf("%d passed, %d failed\n", n_passed, n_failed);
  return n_failed == 0 ? 0 : 1;
}
