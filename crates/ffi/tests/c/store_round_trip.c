/*
 * store_round_trip.c: a C host of both file stores, in plain C99 (no
 * threads, no POSIX), so that it builds for Windows as well as for Unix.
 * scripts/test-windows.sh cross-builds it against dsh_session.dll and runs
 * it under Wine.
 *
 *   store_round_trip DIR   in DIR (made beforehand; relative paths with /
 *                          are fine on Windows too), for a SQLite store
 *                          (DIR/store.db) and a JSONL store (DIR/jsonl):
 *       open the store, create a session, append a turn, flush, fork it,
 *       close; check that a second store on the same path is refused
 *       while the first is open (the store's lock); reopen the store and
 *       both sessions and check their events.
 *
 * It prints one `ok` / `FAIL` line per check and ends with the plain line
 * `N passed, M failed`; the exit status is non-zero when a check failed.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "dsh_session.h"

static int passed, failed;

static void expect(int ok, const char *what, const dsh_buf *out) {
    if (ok) {
        passed++;
        printf("ok %s\n", what);
    } else {
        failed++;
        printf("FAIL %s: %s\n", what, out && out->ptr ? out->ptr : "");
    }
}

/* How many events a JSON array of events holds. */
static int count_events(const char *json) {
    int n = 0;
    for (const char *p = json; p && (p = strstr(p, "\"type\":\"")) != NULL; p++) n++;
    return n;
}

static void append(dsh_session *s, const char *type, const char *data, const char *intent,
                   const char *label) {
    dsh_buf out = DSH_BUF_INIT;
    char what[160];
    snprintf(what, sizeof what, "%s: append %s", label, type);
    expect(dsh_session_append(s, type, data, intent, &out) == DSH_OK, what, &out);
    dsh_buf_free(&out);
}

static int events_of(dsh_session *s) {
    dsh_buf out = DSH_BUF_INIT;
    int n = -1;
    if (dsh_session_events(s, 0, UINT64_MAX, &out) == DSH_OK) n = count_events(out.ptr);
    dsh_buf_free(&out);
    return n;
}

static void round_trip(const char *label, const char *config) {
    dsh_buf out = DSH_BUF_INIT;
    dsh_store *store = NULL;
    dsh_session *s = NULL, *child = NULL;
    char what[160];

    snprintf(what, sizeof what, "%s: store opens", label);
    expect(dsh_store_open(config, &store, &out) == DSH_OK, what, &out);
    dsh_buf_free(&out);
    if (!store) return;

    dsh_store *second = NULL;
    snprintf(what, sizeof what, "%s: a second store on the same path is refused (locked)", label);
    expect(dsh_store_open(config, &second, &out) == DSH_E_CONFLICT && !second, what, &out);
    dsh_buf_free(&out);

    snprintf(what, sizeof what, "%s: session created", label);
    expect(dsh_session_create(store, "{\"id\":\"host\",\"cwd\":\"/work/demo\"}", &s, &out) == DSH_OK,
           what, &out);
    dsh_buf_free(&out);
    if (!s) return;
    append(s, "turn/start", "{\"turn\":1}", NULL, label);
    append(s, "user/message",
           "{\"id\":\"u1\",\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"Hello from C\"}],"
           "\"source\":{\"kind\":\"user\"}}",
           "{\"surfaceOp\":\"append\"}", label);
    append(s, "assistant/message",
           "{\"turn\":1,\"step\":1,\"message\":{\"role\":\"assistant\",\"content\":[{\"type\":\"text\","
           "\"text\":\"Hello, host.\"}],\"source\":{\"kind\":\"model\",\"provider\":\"deepseek\","
           "\"model\":\"deepseek-chat\"},\"id\":\"a1\"}}",
           "{\"surfaceOp\":\"append\",\"sourceEventSeqs\":[]}", label);
    append(s, "turn/end", "{\"turn\":1,\"reason\":{\"kind\":\"completed\"}}", NULL, label);

    snprintf(what, sizeof what, "%s: flush", label);
    expect(dsh_session_flush(s, &out) == DSH_OK, what, &out);
    dsh_buf_free(&out);

    snprintf(what, sizeof what, "%s: fork", label);
    expect(dsh_session_fork(s, -1, "{\"id\":\"host-fork\"}", &child, &out) == DSH_OK, what, &out);
    dsh_buf_free(&out);
    if (child) {
        dsh_session_close(child, &out);
        dsh_buf_free(&out);
    }
    snprintf(what, sizeof what, "%s: session closes", label);
    expect(dsh_session_close(s, &out) == DSH_OK, what, &out);
    dsh_buf_free(&out);
    snprintf(what, sizeof what, "%s: store closes", label);
    expect(dsh_store_close(store, &out) == DSH_OK, what, &out);
    dsh_buf_free(&out);

    /* Reopen: what was flushed is there, in the session and its fork. */
    store = NULL;
    snprintf(what, sizeof what, "%s: store reopens (the lock went with its holder)", label);
    expect(dsh_store_open(config, &store, &out) == DSH_OK, what, &out);
    dsh_buf_free(&out);
    if (!store) return;
    s = NULL;
    snprintf(what, sizeof what, "%s: session reopens", label);
    expect(dsh_session_open(store, "host", &s, &out) == DSH_OK, what, &out);
    dsh_buf_free(&out);
    if (s) {
        int n = events_of(s);
        snprintf(what, sizeof what, "%s: the reopened session holds its 4 events (%d)", label, n);
        expect(n >= 4, what, NULL);
        dsh_session_close(s, &out);
        dsh_buf_free(&out);
    }
    child = NULL;
    snprintf(what, sizeof what, "%s: the fork reopens", label);
    expect(dsh_session_open(store, "host-fork", &child, &out) == DSH_OK, what, &out);
    dsh_buf_free(&out);
    if (child) {
        int n = events_of(child);
        snprintf(what, sizeof what, "%s: the fork holds its parent's events (%d)", label, n);
        expect(n >= 4, what, NULL);
        dsh_session_close(child, &out);
        dsh_buf_free(&out);
    }
    snprintf(what, sizeof what, "%s: store lists both sessions", label);
    int listed = dsh_store_list(store, &out) == DSH_OK && out.ptr && strstr(out.ptr, "\"host\"") &&
                 strstr(out.ptr, "\"host-fork\"");
    expect(listed, what, &out);
    dsh_buf_free(&out);
    dsh_store_close(store, &out);
    dsh_buf_free(&out);
}

int main(int argc, char **argv) {
    if (argc != 2 || strchr(argv[1], '"') || strchr(argv[1], '\\')) {
        fprintf(stderr, "usage: store_round_trip DIR (without quotes or backslashes)\n");
        return 2;
    }
    char config[1024];
    printf("# dsh-session %s (ABI %u)\n", dsh_version(), dsh_abi_version());
    snprintf(config, sizeof config, "{\"backend\":\"sqlite\",\"path\":\"%s/store.db\"}", argv[1]);
    round_trip("sqlite", config);
    snprintf(config, sizeof config, "{\"backend\":\"jsonl\",\"path\":\"%s/jsonl\"}", argv[1]);
    round_trip("jsonl", config);
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
