/*
 * abi_misuse.c: drives the C ABI of dsh-session the wrong way on purpose.
 *
 * NULL for every pointer argument, non-UTF-8 text, invalid JSON, double close,
 * calls on closed handles, double dsh_buf_free, several threads on one handle,
 * plus one realistic round trip. Prints one line per check and ends with the
 * plain line "N passed, M failed"; exits non-zero when a check failed.
 * Built and run by tests/c_abi.rs (also under valgrind / ASan, see there).
 */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dsh_session.h"

#if defined(__GNUC__)
#define NOINLINE __attribute__((noinline))
#else
#define NOINLINE
#endif

static int n_passed, n_failed;
/* Pre-filled into `out`: the library must overwrite it (never read or free it). */
static char garbage[] = "garbage";

static void check(int ok, const char *name, const char *fmt, ...) {
  if (ok) {
    n_passed++;
    printf("ok   %s\n", name);
    return;
  }
  n_failed++;
  printf("FAIL %s: ", name);
  va_list ap;
  va_start(ap, fmt);
  vprintf(fmt, ap);
  va_end(ap);
  printf("\n");
}

/* A filled buffer: NUL-terminated at len, no inner NUL, JSON-looking. */
static int json_ok(const dsh_buf *b) {
  if (b->ptr == NULL || b->len == 0 || b->ptr[b->len] != 0 || strlen(b->ptr) != b->len)
    return 0;
  char first = b->ptr[0], last = b->ptr[b->len - 1];
  if (first == '{') return last == '}';
  if (first == '[') return last == ']';
  if (first == '"') return b->len > 1 && last == '"';
  return strchr("-0123456789tfn", first) != NULL;
}

/* Does the error object carry `"rule":"<rule>"`? A rule ending in '.' is a prefix. */
static int rule_is(const char *json, const char *rule) {
  const char *p = strstr(json, "\"rule\":\"");
  if (p == NULL) return 0;
  p += strlen("\"rule\":\"");
  size_t n = strlen(rule);
  if (strncmp(p, rule, n) != 0) return 0;
  return rule[n - 1] == '.' || p[n] == '"';
}

/* The first integer after `"key":` in json, or -1. */
static long long json_int(const char *json, const char *key) {
  char pat[64];
  snprintf(pat, sizeof pat, "\"%s\":", key);
  const char *p = strstr(json, pat);
  return p ? strtoll(p + strlen(pat), NULL, 10) : -1;
}

/*
 * Check one call: status `want`; when `out` is given it must hold valid JSON,
 * and on errors an object with the same "code" and (if rule != NULL) that rule.
 * Frees `out` twice (the second free must be a no-op that leaves it zeroed).
 */
static NOINLINE int expect(const char *name, dsh_status got, dsh_buf *out, dsh_status want,
                           const char *rule) {
  int ok = got == want;
  const char *why = "";
  if (!ok) why = "wrong status";
  if (ok && out != NULL) {
    char code[32];
    snprintf(code, sizeof code, "\"code\":%d", (int)got);
    const char *c = out->ptr ? strstr(out->ptr, code) : NULL;
    char after = c ? c[strlen(code)] : 0;
    if (!json_ok(out)) ok = 0, why = "out is not NUL-terminated JSON";
    else if (want != DSH_OK && after != ',' && after != '}')
      ok = 0, why = "error lacks its code";
    else if (want != DSH_OK && strstr(out->ptr, "\"rule\":\"") == NULL) ok = 0, why = "error lacks rule";
    else if (want != DSH_OK && rule != NULL && !rule_is(out->ptr, rule)) ok = 0, why = "wrong rule";
  }
  check(ok, name, "%s: got %s (%d), want %s, rule %s, out=%s", why, dsh_status_name(got), (int)got,
        dsh_status_name(want), rule ? rule : "-", out && out->ptr ? out->ptr : "(none)");
  if (out != NULL && out->ptr == garbage) {
    check(0, name, "out was not overwritten");
    *out = (dsh_buf)DSH_BUF_INIT;
  }
  if (out != NULL) {
    dsh_buf_free(out);
    dsh_buf_free(out);
    if (out->ptr != NULL || out->len != 0 || out->cap != 0) check(0, name, "buffer not zeroed by free");
  }
  return ok;
}

/* Run CALL (which names `OUT`) with a buffer, then again with out = NULL. */
#define EXPECT2(name, want, rule, CALL)                                     \
  do {                                                                      \
    dsh_buf b_ = {garbage, 7, 7}; /* overwritten, never freed */           \
    dsh_buf *OUT = &b_;                                                     \
    expect(name, (CALL), OUT, want, rule);                                  \
    OUT = NULL;                                                             \
    expect(name " [out=NULL]", (CALL), NULL, want, NULL);                   \
  } while (0)

#define IA DSH_E_INVALID_ARGUMENT
#define USER_MSG(id)                                                                             \
  "{\"id\":\"" id "\",\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"hi\"}]," \
  "\"source\":{\"kind\":\"user\"}}"
#define APPEND_INTENT "{\"surfaceOp\":\"append\"}"

/* Small helpers that own their buffer, so LeakSanitizer sees anything forgotten. */
static NOINLINE dsh_store *open_store(void) {
  dsh_store *st = NULL;
  dsh_buf b = DSH_BUF_INIT;
  /* The host type the program appends is declared, as a host would. */
  expect("store_open(eventTypes)", dsh_store_open("{\"eventTypes\":[\"plugin/x\"]}", &st, &b), &b, DSH_OK, NULL);
  return st;
}

static NOINLINE dsh_session *create(dsh_store *st, const char *opts) {
  dsh_session *s = NULL;
  dsh_buf b = DSH_BUF_INIT;
  expect("session_create", dsh_session_create(st, opts, &s, &b), &b, DSH_OK, NULL);
  return s;
}

static NOINLINE void close_session(const char *name, dsh_session *s, dsh_status want) {
  dsh_buf b = DSH_BUF_INIT;
  expect(name, dsh_session_close(s, &b), &b, want, want == DSH_E_CLOSED ? "handle.closed" : NULL);
}

static NOINLINE void close_store(const char *name, dsh_store *st, dsh_status want) {
  dsh_buf b = DSH_BUF_INIT;
  expect(name, dsh_store_close(st, &b), &b, want, want == DSH_E_CLOSED ? "handle.closed" : NULL);
}

static NOINLINE long long session_length(dsh_session *s) {
  dsh_buf b = DSH_BUF_INIT;
  long long n = -1;
  if (dsh_session_info(s, &b) == DSH_OK && json_ok(&b)) n = json_int(b.ptr, "length");
  dsh_buf_free(&b);
  return n;
}

static int notices;
static pthread_mutex_t notices_lock = PTHREAD_MUTEX_INITIALIZER;
static void observer(void *user_data, const char *id, const char *kind, const char *payload) {
  (void)user_data, (void)id, (void)kind, (void)payload;
  pthread_mutex_lock(&notices_lock);
  notices++;
  pthread_mutex_unlock(&notices_lock);
}

/* ---------------------------------------------------------------- library */

static NOINLINE void test_library(void) {
  static const struct { dsh_status code; const char *name; } names[] = {
      {DSH_OK, "DSH_OK"}, {DSH_E_INVALID_JSON, "DSH_E_INVALID_JSON"},
      {DSH_E_REJECTED, "DSH_E_REJECTED"}, {DSH_E_CORRUPT, "DSH_E_CORRUPT"},
      {DSH_E_SCHEMA_MISMATCH, "DSH_E_SCHEMA_MISMATCH"}, {DSH_E_IO, "DSH_E_IO"},
      {DSH_E_NOT_FOUND, "DSH_E_NOT_FOUND"}, {DSH_E_CONFLICT, "DSH_E_CONFLICT"},
      {DSH_E_INVALID_ARGUMENT, "DSH_E_INVALID_ARGUMENT"}, {DSH_E_CLOSED, "DSH_E_CLOSED"},
      {DSH_E_INTERNAL, "DSH_E_INTERNAL"}, {10, "DSH_E_UNKNOWN"}, {-1, "DSH_E_UNKNOWN"},
      {98, "DSH_E_UNKNOWN"}, {100, "DSH_E_UNKNOWN"}};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    const char *got = dsh_status_name(names[i].code);
    char label[64];
    snprintf(label, sizeof label, "status_name(%d) == %s", (int)names[i].code, names[i].name);
    check(got != NULL && strcmp(got, names[i].name) == 0, label, "got %s", got ? got : "NULL");
  }
  check(strcmp(dsh_version(), DSH_VERSION_STRING) == 0, "version() == DSH_VERSION_STRING", "got %s",
        dsh_version());
  check(dsh_abi_version() == DSH_ABI_VERSION, "abi_version() == DSH_ABI_VERSION", "got %u",
        (unsigned)dsh_abi_version());
  dsh_buf b = DSH_BUF_INIT;
  dsh_status s = dsh_build_info(&b);
  check(s == DSH_OK && json_ok(&b) && strstr(b.ptr, "\"version\":\"" DSH_VERSION_STRING "\""),
        "build_info names the version", "got %d %s", (int)s, b.ptr ? b.ptr : "(null)");
  dsh_buf_free(&b);
  expect("build_info(out=NULL)", dsh_build_info(NULL), NULL, DSH_OK, NULL);
  dsh_buf_free(NULL);
  check(1, "buf_free(NULL) is a no-op", "");
  dsh_buf zero = DSH_BUF_INIT;
  dsh_buf_free(&zero);
  check(zero.ptr == NULL, "buf_free(zeroed buffer) is a no-op", "");
}

/* ------------------------------------------------------------ NULL args */

static NOINLINE void test_null_pure(void) {
  EXPECT2("fold_surface(events=NULL)", IA, "arg.", dsh_fold_surface(NULL, OUT));
  EXPECT2("derive_messages(events=NULL)", IA, "arg.", dsh_derive_messages(NULL, OUT));
  EXPECT2("repair_events(events=NULL)", IA, "arg.", dsh_repair_events(NULL, OUT));
  EXPECT2("derive_event_message(event=NULL)", IA, "arg.", dsh_derive_event_message(NULL, OUT));
  EXPECT2("fold_surface([])", DSH_OK, NULL, dsh_fold_surface("[]", OUT));
  EXPECT2("derive_messages([])", DSH_OK, NULL, dsh_derive_messages("[]", OUT));
  EXPECT2("repair_events([])", DSH_OK, NULL, dsh_repair_events("[]", OUT));
  EXPECT2("derive_event_message({})", DSH_OK, NULL, dsh_derive_event_message("{}", OUT));
}

static NOINLINE void test_null_store(void) {
  dsh_store *st = (dsh_store *)&n_passed; /* garbage: must become NULL */
  EXPECT2("store_open(store=NULL)", IA, "arg.", dsh_store_open(NULL, NULL, OUT));
  dsh_buf b = DSH_BUF_INIT;
  expect("store_open(config=\"{\") fails", dsh_store_open("{", &st, &b), &b, DSH_E_INVALID_JSON, "json.parse");
  check(st == NULL, "store_open failure sets *store = NULL", "got %p", (void *)st);
  expect("store_open(config=NULL, out=NULL)", dsh_store_open(NULL, &st, NULL), NULL, DSH_OK, NULL);
  check(st != NULL, "store_open(out=NULL) gives a handle", "");
  EXPECT2("store_list(store=NULL)", IA, "arg.", dsh_store_list(NULL, OUT));
  EXPECT2("store_list", DSH_OK, NULL, dsh_store_list(st, OUT));
  EXPECT2("store_repair(store=NULL)", IA, "arg.", dsh_store_repair(NULL, "x", NULL, OUT));
  EXPECT2("store_repair(id=NULL)", IA, "arg.", dsh_store_repair(st, NULL, NULL, OUT));
  EXPECT2("store_repair(options=\"{\")", DSH_E_INVALID_JSON, "json.parse", dsh_store_repair(st, "x", "{", OUT));
  EXPECT2("store_repair(salvage=1)", IA, "arg.repair-option", dsh_store_repair(st, "x", "{\"salvage\":1}", OUT));
  EXPECT2("store_repair(unknown key)", IA, "arg.option-unknown", dsh_store_repair(st, "x", "{\"fix\":true}", OUT));
  EXPECT2("store_repair(no session)", DSH_E_NOT_FOUND, "load.not-found", dsh_store_repair(st, "x", NULL, OUT));
  EXPECT2("store_close(store=NULL)", IA, "arg.", dsh_store_close(NULL, OUT));
  EXPECT2("set_observer(store=NULL)", IA, "arg.", dsh_store_set_observer(NULL, observer, NULL, OUT));
  EXPECT2("set_observer(callback=NULL)", DSH_OK, NULL, dsh_store_set_observer(st, NULL, NULL, OUT));
  EXPECT2("set_observer(user_data=NULL)", DSH_OK, NULL, dsh_store_set_observer(st, observer, NULL, OUT));
  dsh_session *s = create(st, NULL);
  if (s != NULL) {
    /* A store without eventTypes refuses an undeclared type (strict admission). */
    EXPECT2("undeclared type refused", DSH_E_REJECTED, "admit.unknown-type",
            dsh_session_append(s, "plugin/x", "{}", NULL, OUT));
    EXPECT2("observer sees appends", DSH_OK, NULL,
            dsh_session_append(s, "plugin/x", "{}", "{\"ignorable\":true}", OUT));
    pthread_mutex_lock(&notices_lock);
    check(notices >= 2, "observer was called", "notices=%d", notices);
    pthread_mutex_unlock(&notices_lock);
    close_session("session_close", s, DSH_OK);
  }
  expect("set_observer(remove)", dsh_store_set_observer(st, NULL, NULL, NULL), NULL, DSH_OK, NULL);
  expect("store_close(out=NULL)", dsh_store_close(st, NULL), NULL, DSH_OK, NULL);
}

static NOINLINE void test_null_session(dsh_store *st) {
  dsh_session *s = create(st, "{\"id\":\"nulls\"}"), *o = (dsh_session *)&n_passed;
  if (s == NULL) return;
  /* create */
  EXPECT2("session_create(store=NULL)", IA, "arg.", dsh_session_create(NULL, NULL, &o, OUT));
  check(o == NULL, "session_create failure sets *session = NULL", "");
  EXPECT2("session_create(session=NULL)", IA, "arg.", dsh_session_create(st, NULL, NULL, OUT));
  expect("session_create(options=NULL, out=NULL)", dsh_session_create(st, NULL, &o, NULL), NULL, DSH_OK, NULL);
  close_session("close created session", o, DSH_OK);
  /* open: "nulls2" is stored but not open (it needs an event of a known type:
     sessions materialize lazily, and a stored unknown type refuses to load) */
  o = create(st, "{\"id\":\"nulls2\"}");
  expect("append to nulls2", dsh_session_append(o, "user/message", USER_MSG("n1"), APPEND_INTENT, NULL),
         NULL, DSH_OK, NULL);
  close_session("close created session", o, DSH_OK);
  EXPECT2("session_open(store=NULL)", IA, "arg.", dsh_session_open(NULL, "nulls2", &o, OUT));
  EXPECT2("session_open(id=NULL)", IA, "arg.", dsh_session_open(st, NULL, &o, OUT));
  EXPECT2("session_open(session=NULL)", IA, "arg.", dsh_session_open(st, "nulls2", NULL, OUT));
  expect("session_open(out=NULL)", dsh_session_open(st, "nulls2", &o, NULL), NULL, DSH_OK, NULL);
  expect("session_close(out=NULL)", dsh_session_close(o, NULL), NULL, DSH_OK, NULL);
  o = (dsh_session *)&n_passed;
  dsh_buf b = DSH_BUF_INIT;
  expect("session_open(unknown id)", dsh_session_open(st, "nope", &o, &b), &b, DSH_E_NOT_FOUND, NULL);
  check(o == NULL, "session_open failure sets *session = NULL", "");
  /* fork */
  o = (dsh_session *)&n_passed;
  EXPECT2("session_fork(source=NULL)", IA, "arg.", dsh_session_fork(NULL, -1, NULL, &o, OUT));
  check(o == NULL, "session_fork failure sets *child = NULL", "");
  EXPECT2("session_fork(child=NULL)", IA, "arg.", dsh_session_fork(s, -1, NULL, NULL, OUT));
  expect("session_fork(options=NULL, out=NULL)", dsh_session_fork(s, -1, NULL, &o, NULL), NULL, DSH_OK, NULL);
  close_session("close forked session", o, DSH_OK);
  o = (dsh_session *)&n_passed;
  expect("session_fork(boundary=99) fails", dsh_session_fork(s, 99, NULL, &o, &b), &b, IA, NULL);
  check(o == NULL, "session_fork out-of-range sets *child = NULL", "");
  /* append / validate / batch */
  EXPECT2("append(session=NULL)", IA, "arg.", dsh_session_append(NULL, "plugin/x", "{}", NULL, OUT));
  EXPECT2("append(type=NULL)", IA, "arg.", dsh_session_append(s, NULL, "{}", NULL, OUT));
  EXPECT2("append(data=NULL)", IA, "arg.", dsh_session_append(s, "plugin/x", NULL, NULL, OUT));
  EXPECT2("append(intent=NULL)", DSH_OK, NULL, dsh_session_append(s, "plugin/x", "{}", NULL, OUT));
  EXPECT2("validate(session=NULL)", IA, "arg.", dsh_session_validate(NULL, "plugin/x", "{}", NULL, OUT));
  EXPECT2("validate(type=NULL)", IA, "arg.", dsh_session_validate(s, NULL, "{}", NULL, OUT));
  EXPECT2("validate(data=NULL)", IA, "arg.", dsh_session_validate(s, "plugin/x", NULL, NULL, OUT));
  EXPECT2("validate(intent=NULL)", DSH_OK, NULL, dsh_session_validate(s, "plugin/x", "{}", NULL, OUT));
  EXPECT2("append_batch(session=NULL)", IA, "arg.", dsh_session_append_batch(NULL, "[]", OUT));
  EXPECT2("append_batch(batch=NULL)", IA, "arg.", dsh_session_append_batch(s, NULL, OUT));
  EXPECT2("append_batch([])", DSH_OK, NULL, dsh_session_append_batch(s, "[]", OUT));
  /* the (session, out) readers */
  EXPECT2("flush(session=NULL)", IA, "arg.", dsh_session_flush(NULL, OUT));
  EXPECT2("info(session=NULL)", IA, "arg.", dsh_session_info(NULL, OUT));
  EXPECT2("events(session=NULL)", IA, "arg.", dsh_session_events(NULL, 0, UINT64_MAX, OUT));
  EXPECT2("surface(session=NULL)", IA, "arg.", dsh_session_surface(NULL, OUT));
  EXPECT2("derive(session=NULL)", IA, "arg.", dsh_session_derive(NULL, OUT));
  EXPECT2("request_header(session=NULL)", IA, "arg.", dsh_session_request_header(NULL, OUT));
  EXPECT2("request_context(session=NULL)", IA, "arg.", dsh_session_request_context(NULL, OUT));
  EXPECT2("session_close(session=NULL)", IA, "arg.", dsh_session_close(NULL, OUT));
  EXPECT2("flush", DSH_OK, NULL, dsh_session_flush(s, OUT));
  EXPECT2("info", DSH_OK, NULL, dsh_session_info(s, OUT));
  EXPECT2("events(all)", DSH_OK, NULL, dsh_session_events(s, 0, UINT64_MAX, OUT));
  EXPECT2("surface", DSH_OK, NULL, dsh_session_surface(s, OUT));
  EXPECT2("derive", DSH_OK, NULL, dsh_session_derive(s, OUT));
  EXPECT2("request_header", DSH_OK, NULL, dsh_session_request_header(s, OUT));
  EXPECT2("request_context", DSH_OK, NULL, dsh_session_request_context(s, OUT));
  close_session("session_close", s, DSH_OK);
}

/* ------------------------------------------------- bad UTF-8 and bad JSON */

static NOINLINE void test_bad_text(dsh_store *st) {
  static const char *const utf8[] = {"\xff\xfe", "{\"id\":\"\xc3\"}", "\"\xed\xa0\x80\""};
  static const char *const json[] = {"{", "", "[1,]", "{} x", "nul"};
  dsh_session *s = create(st, "{\"id\":\"bad\"}"), *o = NULL;
  dsh_store *so = NULL;
  if (s == NULL) return;
  for (size_t i = 0; i < sizeof utf8 / sizeof utf8[0]; i++) {
    const char *t = utf8[i], *r = "arg.utf8";
    printf("#    bad UTF-8 input %u\n", (unsigned)i);
    EXPECT2("store_open(config=bad UTF-8)", IA, r, dsh_store_open(t, &so, OUT));
    EXPECT2("session_create(options=bad UTF-8)", IA, r, dsh_session_create(st, t, &o, OUT));
    EXPECT2("session_open(id=bad UTF-8)", IA, r, dsh_session_open(st, t, &o, OUT));
    EXPECT2("session_fork(options=bad UTF-8)", IA, r, dsh_session_fork(s, -1, t, &o, OUT));
    EXPECT2("append(type=bad UTF-8)", IA, r, dsh_session_append(s, t, "{}", NULL, OUT));
    EXPECT2("append(data=bad UTF-8)", IA, r, dsh_session_append(s, "plugin/x", t, NULL, OUT));
    EXPECT2("append(intent=bad UTF-8)", IA, r, dsh_session_append(s, "plugin/x", "{}", t, OUT));
    EXPECT2("validate(type=bad UTF-8)", IA, r, dsh_session_validate(s, t, "{}", NULL, OUT));
    EXPECT2("validate(data=bad UTF-8)", IA, r, dsh_session_validate(s, "plugin/x", t, NULL, OUT));
    EXPECT2("validate(intent=bad UTF-8)", IA, r, dsh_session_validate(s, "plugin/x", "{}", t, OUT));
    EXPECT2("append_batch(batch=bad UTF-8)", IA, r, dsh_session_append_batch(s, t, OUT));
    EXPECT2("fold_surface(bad UTF-8)", IA, r, dsh_fold_surface(t, OUT));
    EXPECT2("derive_messages(bad UTF-8)", IA, r, dsh_derive_messages(t, OUT));
    EXPECT2("repair_events(bad UTF-8)", IA, r, dsh_repair_events(t, OUT));
    EXPECT2("derive_event_message(bad UTF-8)", IA, r, dsh_derive_event_message(t, OUT));
  }
  for (size_t i = 0; i < sizeof json / sizeof json[0]; i++) {
    const char *t = json[i], *r = "json.parse";
    const dsh_status J = DSH_E_INVALID_JSON;
    printf("#    invalid JSON input '%s'\n", t);
    EXPECT2("store_open(config=bad JSON)", J, r, dsh_store_open(t, &so, OUT));
    EXPECT2("session_create(options=bad JSON)", J, r, dsh_session_create(st, t, &o, OUT));
    EXPECT2("session_fork(options=bad JSON)", J, r, dsh_session_fork(s, -1, t, &o, OUT));
    EXPECT2("append(data=bad JSON)", J, r, dsh_session_append(s, "plugin/x", t, NULL, OUT));
    EXPECT2("append(intent=bad JSON)", J, r, dsh_session_append(s, "plugin/x", "{}", t, OUT));
    EXPECT2("validate(data=bad JSON)", J, r, dsh_session_validate(s, "plugin/x", t, NULL, OUT));
    EXPECT2("validate(intent=bad JSON)", J, r, dsh_session_validate(s, "plugin/x", "{}", t, OUT));
    EXPECT2("append_batch(batch=bad JSON)", J, r, dsh_session_append_batch(s, t, OUT));
    EXPECT2("fold_surface(bad JSON)", J, r, dsh_fold_surface(t, OUT));
    EXPECT2("derive_messages(bad JSON)", J, r, dsh_derive_messages(t, OUT));
    EXPECT2("repair_events(bad JSON)", J, r, dsh_repair_events(t, OUT));
    EXPECT2("derive_event_message(bad JSON)", J, r, dsh_derive_event_message(t, OUT));
  }
  check(o == NULL && so == NULL, "failed create/open/fork left the out-handle NULL", "");
  check(session_length(s) == 0, "rejected input committed nothing", "length=%lld", session_length(s));
  close_session("session_close", s, DSH_OK);
}

/* ------------------------------------------------------- closed handles */

static NOINLINE void test_closed(void) {
  dsh_store *st = open_store();
  if (st == NULL) return;
  dsh_session *s = create(st, "{\"id\":\"x\"}"), *o = NULL;
  dsh_session *keep = create(st, "{\"id\":\"keep\"}");
  if (s == NULL || keep == NULL) return;
  const dsh_status C = DSH_E_CLOSED;
  const char *r = "handle.closed";
  close_session("session_close", s, DSH_OK);
  /* no handle is created below until the checks end, so `s` cannot be reused */
  close_session("session_close twice", s, C);
  EXPECT2("append(closed)", C, r, dsh_session_append(s, "plugin/x", "{}", NULL, OUT));
  EXPECT2("append_batch(closed)", C, r, dsh_session_append_batch(s, "[]", OUT));
  EXPECT2("validate(closed)", C, r, dsh_session_validate(s, "plugin/x", "{}", NULL, OUT));
  EXPECT2("flush(closed)", C, r, dsh_session_flush(s, OUT));
  EXPECT2("info(closed)", C, r, dsh_session_info(s, OUT));
  EXPECT2("events(closed)", C, r, dsh_session_events(s, 0, UINT64_MAX, OUT));
  EXPECT2("surface(closed)", C, r, dsh_session_surface(s, OUT));
  EXPECT2("derive(closed)", C, r, dsh_session_derive(s, OUT));
  EXPECT2("request_header(closed)", C, r, dsh_session_request_header(s, OUT));
  EXPECT2("request_context(closed)", C, r, dsh_session_request_context(s, OUT));
  EXPECT2("session_fork(closed)", C, r, dsh_session_fork(s, -1, NULL, &o, OUT));
  check(o == NULL, "fork of a closed session gives no child", "");
  close_store("store_close", st, DSH_OK);
  close_store("store_close twice", st, C);
  EXPECT2("store_list(closed)", C, r, dsh_store_list(st, OUT));
  EXPECT2("store_repair(closed)", C, r, dsh_store_repair(st, "x", NULL, OUT));
  EXPECT2("set_observer(closed)", C, r, dsh_store_set_observer(st, NULL, NULL, OUT));
  EXPECT2("session_create(closed store)", C, r, dsh_session_create(st, NULL, &o, OUT));
  EXPECT2("session_open(closed store)", C, r, dsh_session_open(st, "x", &o, OUT));
  check(o == NULL, "create/open on a closed store give no handle", "");
  /* a session keeps its store alive */
  EXPECT2("append after store_close", DSH_OK, NULL, dsh_session_append(keep, "plugin/x", "{}", NULL, OUT));
  EXPECT2("derive after store_close", DSH_OK, NULL, dsh_session_derive(keep, OUT));
  EXPECT2("flush after store_close", DSH_OK, NULL, dsh_session_flush(keep, OUT));
  dsh_buf b = DSH_BUF_INIT;
  expect("fork after store_close", dsh_session_fork(keep, -1, NULL, &o, &b), &b, DSH_OK, NULL);
  close_session("close fork (store already closed)", o, DSH_OK);
  close_session("close session after its store", keep, DSH_OK);
  /* the other order: sessions, then the store */
  st = open_store();
  s = create(st, NULL);
  keep = create(st, NULL);
  close_session("close session before store", s, DSH_OK);
  close_session("close session before store", keep, DSH_OK);
  close_store("store_close after its sessions", st, DSH_OK);
}

/* --------------------------------------------------------------- threads */

#define THREADS 8
#define PER_THREAD 500

struct job {
  dsh_session *s;
  int id, n, errors;
  volatile int *stop; /* reader: run until *stop (read under job_lock) */
};
static pthread_mutex_t job_lock = PTHREAD_MUTEX_INITIALIZER;

static void *appender(void *arg) {
  struct job *j = arg;
  for (int i = 0; i < j->n; i++) {
    char data[48];
    snprintf(data, sizeof data, "{\"i\":%d}", j->id * 100000 + i);
    dsh_buf b = DSH_BUF_INIT;
    dsh_buf *out = i % 5 == 4 ? NULL : &b; /* some calls without out */
    if (dsh_session_append(j->s, "plugin/x", data, NULL, out) != DSH_OK || (out && !json_ok(out)))
      j->errors++;
    dsh_buf_free(&b);
  }
  return NULL;
}

static void *reader(void *arg) {
  struct job *j = arg;
  for (int k = 0;; k++) {
    pthread_mutex_lock(&job_lock);
    int stop = *j->stop;
    pthread_mutex_unlock(&job_lock);
    if (stop && k >= 20) break;
    dsh_buf b = DSH_BUF_INIT;
    if (dsh_session_derive(j->s, &b) != DSH_OK || !json_ok(&b)) j->errors++;
    dsh_buf_free(&b);
    if (dsh_session_surface(j->s, &b) != DSH_OK || !json_ok(&b)) j->errors++;
    dsh_buf_free(&b);
    if (dsh_session_events(j->s, (uint64_t)k, (uint64_t)k + 50, &b) != DSH_OK || !json_ok(&b)) j->errors++;
    dsh_buf_free(&b);
    if (dsh_session_info(j->s, &b) != DSH_OK || !json_ok(&b)) j->errors++;
    dsh_buf_free(&b);
    j->n++;
  }
  return NULL;
}

/* Every event has seq == its index, and each writer's own events are in its order. */
static NOINLINE void check_log(const char *name, dsh_session *s, long long want) {
  dsh_buf b = DSH_BUF_INIT;
  dsh_status st = dsh_session_events(s, 0, UINT64_MAX, &b);
  long long n = 0, bad = 0, last[THREADS];
  for (int t = 0; t < THREADS; t++) last[t] = -1;
  if (st == DSH_OK && json_ok(&b)) {
    for (const char *p = strstr(b.ptr, "\"seq\":"); p; p = strstr(p + 1, "\"seq\":"), n++) {
      if (strtoll(p + 6, NULL, 10) != n) bad++;
      const char *d = strstr(p, "\"i\":");
      long long v = d ? strtoll(d + 4, NULL, 10) : -1, t = v / 100000, i = v % 100000;
      if (v < 0 || t >= THREADS || i != last[t] + 1) bad++;
      else last[t] = i;
    }
  }
  dsh_buf_free(&b);
  long long len = session_length(s);
  check(st == DSH_OK && n == want && len == want && bad == 0, name,
        "status %d, %lld events (length %lld), want %lld, %lld out of order", (int)st, n, len, want,
        bad);
}

static NOINLINE void test_threads(dsh_store *st) {
  pthread_t tid[THREADS + 1];
  struct job jobs[THREADS + 1];
  volatile int stop = 0;
  int errors = 0;
  /* 8 threads, one session */
  dsh_session *one = create(st, "{\"id\":\"shared\"}");
  for (int t = 0; t < THREADS; t++) {
    jobs[t] = (struct job){one, t, PER_THREAD, 0, NULL};
    pthread_create(&tid[t], NULL, appender, &jobs[t]);
  }
  for (int t = 0; t < THREADS; t++) pthread_join(tid[t], NULL), errors += jobs[t].errors;
  check(errors == 0, "8 threads append to one session: every call DSH_OK", "%d errors", errors);
  check_log("one session holds 8*500 events, seqs 0..n-1, per-thread order kept", one,
            THREADS * PER_THREAD);
  close_session("session_close", one, DSH_OK);
  /* 8 threads, one session each, one store */
  dsh_session *own[THREADS];
  errors = 0;
  for (int t = 0; t < THREADS; t++) {
    own[t] = create(st, NULL);
    jobs[t] = (struct job){own[t], t, PER_THREAD, 0, NULL};
    pthread_create(&tid[t], NULL, appender, &jobs[t]);
  }
  for (int t = 0; t < THREADS; t++) pthread_join(tid[t], NULL), errors += jobs[t].errors;
  check(errors == 0, "8 threads append to 8 sessions of one store: every call DSH_OK", "%d errors",
        errors);
  for (int t = 0; t < THREADS; t++) {
    check_log("own session holds 500 events", own[t], PER_THREAD);
    close_session("session_close", own[t], DSH_OK);
  }
  /* readers (derive/surface/events/info) while 2 threads append */
  dsh_session *rw = create(st, NULL);
  dsh_buf b = DSH_BUF_INIT;
  expect("append user/message", dsh_session_append(rw, "user/message", USER_MSG("r1"), APPEND_INTENT, &b),
         &b, DSH_OK, NULL);
  jobs[THREADS] = (struct job){rw, 0, 0, 0, &stop};
  pthread_create(&tid[THREADS], NULL, reader, &jobs[THREADS]);
  for (int t = 0; t < 2; t++) {
    jobs[t] = (struct job){rw, t, PER_THREAD, 0, NULL};
    pthread_create(&tid[t], NULL, appender, &jobs[t]);
  }
  for (int t = 0; t < 2; t++) pthread_join(tid[t], NULL);
  pthread_mutex_lock(&job_lock);
  stop = 1;
  pthread_mutex_unlock(&job_lock);
  pthread_join(tid[THREADS], NULL);
  errors = jobs[0].errors + jobs[1].errors + jobs[THREADS].errors;
  printf("#    reader made %d rounds of derive/surface/events/info\n", jobs[THREADS].n);
  check(errors == 0, "reader thread concurrent with 2 appenders: every call DSH_OK",
        "%d errors (%d reader rounds)", errors, jobs[THREADS].n);
  check(session_length(rw) == 1 + 2 * PER_THREAD, "reader/appender session length", "length %lld",
        session_length(rw));
  close_session("session_close", rw, DSH_OK);
}

/* ------------------------------------------------------------ round trip */

#define EXPECT_TEXT(name, CALL, text)                                                   \
  do {                                                                                  \
    dsh_buf b_ = DSH_BUF_INIT;                                                          \
    dsh_buf *OUT = &b_;                                                                 \
    dsh_status s_ = (CALL);                                                             \
    int ok_ = s_ == DSH_OK && json_ok(&b_) && strstr(b_.ptr, text) != NULL;             \
    check(ok_, name, "status %d, out=%s, want it to contain %s", (int)s_,               \
          b_.ptr ? b_.ptr : "(null)", text);                                            \
    dsh_buf_free(&b_);                                                                  \
  } while (0)

static NOINLINE void test_round_trip(void) {
  dsh_store *st = open_store();
  dsh_session *s = NULL, *c = NULL;
  dsh_buf b = DSH_BUF_INIT;
  EXPECT_TEXT("rt: create {\"id\":\"s\"}", dsh_session_create(st, "{\"id\":\"s\"}", &s, OUT), "\"id\":\"s\"");
  if (s == NULL) return;
  expect("rt: create duplicate id", dsh_session_create(st, "{\"id\":\"s\"}", &c, &b), &b, DSH_E_CONFLICT, NULL);
  check(c == NULL, "rt: failed create sets *session = NULL", "");
  EXPECT_TEXT("rt: append user/message",
              dsh_session_append(s, "user/message", USER_MSG("u1"), APPEND_INTENT, OUT), "\"seq\":0");
  EXPECT_TEXT("rt: derive", dsh_session_derive(s, OUT), "\"text\":\"hi\"");
  EXPECT_TEXT("rt: fork at -1 {\"id\":\"c\"}", dsh_session_fork(s, -1, "{\"id\":\"c\"}", &c, OUT),
              "\"id\":\"c\"");
  if (c == NULL) return;
  EXPECT_TEXT("rt: fork child derives the message", dsh_session_derive(c, OUT), "\"id\":\"u1\"");
  EXPECT_TEXT("rt: validate", dsh_session_validate(c, "plugin/x", "{\"i\":1}", NULL, OUT), "\"type\":\"plugin/x\"");
  EXPECT_TEXT("rt: append_batch",
              dsh_session_append_batch(
                  c, "[{\"type\":\"plugin/x\",\"data\":{\"i\":1}},{\"type\":\"user/message\",\"data\":"
                  USER_MSG("u2") ",\"intent\":" APPEND_INTENT "}]", OUT),
              "\"id\":\"u2\"");
  EXPECT_TEXT("rt: flush", dsh_session_flush(c, OUT), "\"ok\":true");
  EXPECT_TEXT("rt: info", dsh_session_info(c, OUT), "\"id\":\"c\"");
  EXPECT_TEXT("rt: surface", dsh_session_surface(c, OUT), "\"nodes\":[");
  dsh_status rs = dsh_session_request_header(c, &b);
  check(rs == DSH_OK && json_ok(&b) && strcmp(b.ptr, "null") == 0, "rt: request_header is null",
        "status %d, out=%s", (int)rs, b.ptr ? b.ptr : "(null)");
  dsh_buf_free(&b);
  rs = dsh_session_request_context(c, &b);
  check(rs == DSH_OK && json_ok(&b) && strcmp(b.ptr, "null") == 0, "rt: request_context is null",
        "status %d, out=%s", (int)rs, b.ptr ? b.ptr : "(null)");
  dsh_buf_free(&b);
  EXPECT_TEXT("rt: store_list names the child", dsh_store_list(st, OUT), "\"id\":\"c\"");
  close_session("rt: close s", s, DSH_OK);
  close_session("rt: close c", c, DSH_OK);
  EXPECT_TEXT("rt: reopen s", dsh_session_open(st, "s", &s, OUT), "\"header\":");
  close_session("rt: close reopened s", s, DSH_OK);
  close_store("rt: store_close", st, DSH_OK);
}

int main(void) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  test_library();
  test_null_pure();
  test_null_store();
  dsh_store *st = open_store();
  if (st != NULL) {
    test_null_session(st);
    test_bad_text(st);
    test_threads(st);
    close_store("store_close", st, DSH_OK);
  }
  test_closed();
  test_round_trip();
  printf("%d passed, %d failed\n", n_passed, n_failed);
  return n_failed == 0 ? 0 : 1;
}
