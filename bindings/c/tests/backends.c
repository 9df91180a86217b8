/*
 * backends.c: the backends a build of the library has, through the C ABI.
 *
 *   backends [MISSING...]     MISSING: sqlite, jsonl, postgres
 *
 * The build must have every backend but the MISSING ones (cargo features
 * of crates/ffi, CMake's DSH_BACKENDS). dsh_build_info lists exactly those
 * (memory always); a store configuration naming a missing backend is
 * refused with DSH_E_INVALID_ARGUMENT, rule config.backend-not-built, a
 * message that lists the backends the build has, and nothing created; the
 * sqlite and jsonl backends the build has write a session and read it
 * back; a postgres backend it has tries to connect (to a closed port here)
 * and fails for that reason, not for the build's. Prints "ok"/"FAIL" per
 * check, then "N passed, M failed"; exits 1 when a check failed, 2 on a
 * bad command line.
 */
#define _XOPEN_SOURCE 700 /* mkdtemp */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dsh_session.h"

static int n_passed, n_failed;
static char detail[8192];
static void check(int ok, const char *name) {
  if (ok) n_passed++; else n_failed++;
  printf("%s %s%s%s\n", ok ? "ok  " : "FAIL", name, ok ? "" : ": ", ok ? "" : detail);
}

/* The backends that can be left out of a build, in the order the library
   lists backends (after memory). */
static const char *const optional[] = {"sqlite", "jsonl", "postgres"};
#define N_OPTIONAL (sizeof optional / sizeof *optional)

static int exists(const char *path) {
  struct stat st;
  return lstat(path, &st) == 0;
}

/* A configuration naming `backend` under `dir`; `target` gets the path it
   would create (empty for postgres). */
static void config_for(const char *backend, const char *dir, char *config, size_t n, char *target, size_t tn) {
  target[0] = '\0';
  if (strcmp(backend, "postgres") == 0) {
    /* Port 1 on loopback: a connection is refused at once. */
    snprintf(config, n, "{\"backend\":\"postgres\",\"url\":\"postgresql://dsh@127.0.0.1:1/dsh?connect_timeout=5\"}");
  } else {
    snprintf(target, tn, "%s/%s", dir, strcmp(backend, "sqlite") == 0 ? "store.db" : "logs");
    snprintf(config, n, "{\"backend\":\"%s\",\"path\":\"%s\",\"batchWindowMs\":0}", backend, target);
  }
}

/* A backend the build has: sqlite and jsonl write and read back a session. */
static void use_backend(const char *backend, const char *dir) {
  char config[4400], target[4200], name[256];
  config_for(backend, dir, config, sizeof config, target, sizeof target);
  dsh_buf out = DSH_BUF_INIT;
  dsh_store *store = NULL;
  dsh_status st = dsh_store_open(config, &store, &out);
  if (strcmp(backend, "postgres") == 0) {
    snprintf(detail, sizeof detail, "%s %s", dsh_status_name(st), out.ptr ? out.ptr : "");
    check(st == DSH_E_IO && strstr(out.ptr, "config.backend-not-built") == NULL,
          "postgres: a store is tried (the closed port refuses it: DSH_E_IO)");
    dsh_buf_free(&out);
    dsh_store_close(store, NULL);
    return;
  }
  snprintf(detail, sizeof detail, "%s %s", dsh_status_name(st), out.ptr ? out.ptr : "");
  snprintf(name, sizeof name, "%s: the store opens", backend);
  check(st == DSH_OK && store != NULL, name);
  dsh_buf_free(&out);
  if (store == NULL) return;
  dsh_session *s = NULL;
  int ok = dsh_session_create(store, "{\"id\":\"b\"}", &s, &out) == DSH_OK;
  dsh_buf_free(&out);
  ok = ok && dsh_session_append(s, "turn/start", "{\"turn\":1}", NULL, &out) == DSH_OK;
  dsh_buf_free(&out);
  ok = ok && dsh_session_flush(s, &out) == DSH_OK;
  snprintf(detail, sizeof detail, "%s", out.ptr ? out.ptr : "");
  dsh_buf_free(&out);
  dsh_session_close(s, NULL);
  dsh_store_close(store, NULL);
  store = NULL;
  ok = ok && dsh_store_open(config, &store, &out) == DSH_OK;
  dsh_buf_free(&out);
  ok = ok && dsh_store_list(store, &out) == DSH_OK && strstr(out.ptr, "\"id\":\"b\"") != NULL;
  if (out.ptr != NULL) snprintf(detail, sizeof detail, "%s", out.ptr);
  snprintf(name, sizeof name, "%s: a session written is listed after a reopen", backend);
  check(ok, name);
  dsh_buf_free(&out);
  dsh_store_close(store, NULL);
}

/* A backend the build lacks: refused before anything is touched. */
static void refuse_backend(const char *backend, const char *dir, const char *has) {
  char config[4400], target[4200], name[256], want[512];
  config_for(backend, dir, config, sizeof config, target, sizeof target);
  dsh_buf out = DSH_BUF_INIT;
  dsh_store *store = (dsh_store *)&out; /* set to NULL on failure */
  dsh_status st = dsh_store_open(config, &store, &out);
  snprintf(detail, sizeof detail, "%s %s", dsh_status_name(st), out.ptr ? out.ptr : "");
  snprintf(name, sizeof name, "%s: refused with DSH_E_INVALID_ARGUMENT, rule config.backend-not-built", backend);
  check(st == DSH_E_INVALID_ARGUMENT && store == NULL && out.ptr != NULL &&
            strstr(out.ptr, "\"rule\":\"config.backend-not-built\"") != NULL,
        name);
  snprintf(want, sizeof want, "it has: %s\"", has);
  snprintf(name, sizeof name, "%s: the message names it and lists the backends the build has (%s)", backend, has);
  char no[64];
  snprintf(no, sizeof no, "no %s backend", backend);
  check(out.ptr != NULL && strstr(out.ptr, no) != NULL && strstr(out.ptr, want) != NULL, name);
  if (target[0] != '\0') {
    snprintf(detail, sizeof detail, "%s exists", target);
    snprintf(name, sizeof name, "%s: nothing created", backend);
    check(!exists(target), name);
  }
  dsh_buf_free(&out);
  if (st == DSH_OK) dsh_store_close(store, NULL);
}

int main(int argc, char **argv) {
  int missing[N_OPTIONAL] = {0};
  for (int i = 1; i < argc; i++) {
    size_t k = 0;
    while (k < N_OPTIONAL && strcmp(argv[i], optional[k]) != 0) k++;
    if (k == N_OPTIONAL) {
      fprintf(stderr, "usage: backends [sqlite|jsonl|postgres]... (the backends the build lacks)\n");
      return 2;
    }
    missing[k] = 1;
  }
  char has[256] = "memory";
  for (size_t k = 0; k < N_OPTIONAL; k++) {
    if (!missing[k]) {
      strcat(has, ", ");
      strcat(has, optional[k]);
    }
  }
  printf("# expecting the backends %s\n", has);

  dsh_buf out = DSH_BUF_INIT;
  dsh_status st = dsh_build_info(&out);
  snprintf(detail, sizeof detail, "%s %s", dsh_status_name(st), out.ptr ? out.ptr : "");
  const char *features = st == DSH_OK ? strstr(out.ptr, "\"features\":[") : NULL;
  check(features != NULL, "dsh_build_info has a features array");
  if (features == NULL) {
    printf("%d passed, %d failed\n", n_passed, n_failed);
    return 1;
  }
  printf("# dsh_build_info: %s\n", out.ptr);
  char list[512];
  snprintf(list, sizeof list, "%.*s", (int)(strchr(features, ']') - features + 1), features);
  char name[256], quoted[64];
  snprintf(detail, sizeof detail, "%s", list);
  check(strstr(list, "\"memory\"") != NULL, "dsh_build_info lists memory");
  for (size_t k = 0; k < N_OPTIONAL; k++) {
    snprintf(quoted, sizeof quoted, "\"%s\"", optional[k]);
    snprintf(name, sizeof name, "dsh_build_info %s %s", missing[k] ? "leaves out" : "lists", optional[k]);
    check((strstr(list, quoted) == NULL) == missing[k], name);
  }
  snprintf(detail, sizeof detail, "%s", out.ptr);
  check((strstr(out.ptr, "\"sqlite\":null") != NULL) == missing[0],
        missing[0] ? "dsh_build_info says \"sqlite\":null" : "dsh_build_info names the bundled SQLite's version");
  dsh_buf_free(&out);

  dsh_store *store = NULL;
  st = dsh_store_open("{\"backend\":\"memory\"}", &store, &out);
  snprintf(detail, sizeof detail, "%s %s", dsh_status_name(st), out.ptr ? out.ptr : "");
  check(st == DSH_OK, "memory: the store opens");
  dsh_buf_free(&out);
  dsh_store_close(store, NULL);

  char tmpl[] = "/tmp/dsh-backends-XXXXXX";
  char *dir = mkdtemp(tmpl);
  if (dir == NULL) {
    perror("mkdtemp");
    return 1;
  }
  for (size_t k = 0; k < N_OPTIONAL; k++) {
    if (missing[k]) refuse_backend(optional[k], dir, has);
    else use_backend(optional[k], dir);
  }
  char rm[4200];
  snprintf(rm, sizeof rm, "rm -rf '%s'", dir);
  if (system(rm) != 0) fprintf(stderr, "could not remove %s\n", dir);
  printf("%d passed, %d failed\n", n_passed, n_failed);
  return n_failed == 0 ? 0 : 1;
}
