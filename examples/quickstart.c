/*
 * quickstart.c: one agent-like session through the dsh-session C ABI.
 *
 * The store is an embedded SQLite database (target/quickstart/quickstart.db,
 * or the path given as the first argument). On the first run a user asks a
 * question, the model streams an answer with a tool call, the tool runs, the
 * model answers; then a compaction replaces the first turn's messages with a
 * summary, and the session is forked. Every later run reopens the session it
 * wrote (crash repair runs on open) and adds one more turn. The derived
 * message lists are printed: that is what an agent would send to its model.
 *
 * Build and run: ./scripts/quickstart.sh
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dsh_session.h"

/* Stop with the library's error object when a call fails. */
static void check(const char *what, dsh_status st, dsh_buf *out) {
    if (st != DSH_OK) {
        fprintf(stderr, "%s failed: %s %s\n", what, dsh_status_name(st), out->ptr ? out->ptr : "");
        dsh_buf_free(out);
        exit(1);
    }
}

/* Append one event and print its seq and type. */
static void append(dsh_session *s, const char *type, const char *data, const char *intent) {
    dsh_buf out = DSH_BUF_INIT;
    check(type, dsh_session_append(s, type, data, intent, &out), &out);
    printf("  appended %s\n", out.ptr);
    dsh_buf_free(&out);
}

static void print_derived(const char *title, dsh_session *s) {
    dsh_buf out = DSH_BUF_INIT;
    check("derive", dsh_session_derive(s, &out), &out);
    printf("\n%s:\n%s\n", title, out.ptr);
    dsh_buf_free(&out);
}

/* A later run: one more question and answer on the reopened session. */
static void follow_up(dsh_session *s) {
    dsh_buf out = DSH_BUF_INIT;
    /* The next turn number: one more than the turns already closed. */
    check("events", dsh_session_events(s, 0, UINT64_MAX, &out), &out);
    long turn = 1;
    for (const char *p = out.ptr; (p = strstr(p, "\"type\":\"turn/end\"")) != NULL; p++) turn++;
    dsh_buf_free(&out);
    char data[512];
    printf("\nturn %ld:\n", turn);
    snprintf(data, sizeof data, "{\"turn\":%ld}", turn);
    append(s, "turn/start", data, NULL);
    snprintf(data, sizeof data,
             "{\"id\":\"u%ld\",\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"Anything else?\"}],"
             "\"source\":{\"kind\":\"user\"}}", turn);
    append(s, "user/message", data, "{\"surfaceOp\":\"append\"}");
    snprintf(data, sizeof data,
             "{\"turn\":%ld,\"step\":1,\"message\":{\"role\":\"assistant\",\"content\":[{\"type\":\"text\","
             "\"text\":\"Nothing else: the log keeps every event.\"}],\"source\":{\"kind\":\"model\",\"provider\":"
             "\"deepseek\",\"model\":\"deepseek-chat\"},\"id\":\"a%ld\"}}", turn, turn);
    append(s, "assistant/message", data, "{\"surfaceOp\":\"append\",\"sourceEventSeqs\":[]}");
    snprintf(data, sizeof data, "{\"turn\":%ld,\"reason\":{\"kind\":\"completed\"}}", turn);
    append(s, "turn/end", data, NULL);
    print_derived("derived messages after this run's turn", s);
}

int main(int argc, char **argv) {
    dsh_buf out = DSH_BUF_INIT;
    dsh_store *store = NULL;
    printf("dsh-session %s (ABI %u)\n", dsh_version(), dsh_abi_version());

    /* An embedded SQLite store (or, given a postgresql:// URL, a PostgreSQL
     * one); appends are written behind, flush is the barrier. The path or
     * URL is put in the JSON as is: keep it free of quotes and backslashes. */
    const char *path = argc > 1 ? argv[1] : "target/quickstart/quickstart.db";
    char config[1024];
    if (strncmp(path, "postgresql://", 13) == 0 || strncmp(path, "postgres://", 11) == 0)
        snprintf(config, sizeof config, "{\"backend\":\"postgres\",\"url\":\"%s\"}", path);
    else
        snprintf(config, sizeof config, "{\"backend\":\"sqlite\",\"path\":\"%s\"}", path);
    check("store_open", dsh_store_open(config, &store, &out), &out);
    printf("store: %s at %s\n", out.ptr, strncmp(path, "postgres", 8) == 0 ? "the PostgreSQL URL" : path);
    dsh_buf_free(&out);

    dsh_session *s = NULL;
    dsh_status st = dsh_session_open(store, "demo", &s, &out);
    if (st == DSH_OK) {
        printf("reopened session demo: %s\n", out.ptr);
        dsh_buf_free(&out);
        print_derived("derived messages as stored", s);
        follow_up(s);
        check("flush", dsh_session_flush(s, &out), &out);
        dsh_buf_free(&out);
        check("close", dsh_session_close(s, &out), &out);
        dsh_buf_free(&out);
        check("store list", dsh_store_list(store, &out), &out);
        printf("\nstored sessions: %s\n", out.ptr);
        dsh_buf_free(&out);
        check("store close", dsh_store_close(store, &out), &out);
        dsh_buf_free(&out);
        return 0;
    }
    check("session_open", st == DSH_E_NOT_FOUND ? DSH_OK : st, &out);
    dsh_buf_free(&out);

    check("session_create", dsh_session_create(store, "{\"id\":\"demo\",\"cwd\":\"/home/demo\"}", &s, &out), &out);
    printf("created session: %s\n", out.ptr);
    dsh_buf_free(&out);

    printf("\nturn 1:\n");
    append(s, "turn/start", "{\"turn\":1}", NULL);                                                     /* 0 */
    append(s, "user/message",
           "{\"id\":\"u1\",\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"What is in README.md?\"}],"
           "\"source\":{\"kind\":\"user\"}}",
           "{\"surfaceOp\":\"append\"}");                                                                  /* 1 */
    append(s, "step/start", "{\"turn\":1,\"step\":1}", NULL);                                          /* 2 */
    append(s, "request/header",
           "{\"header\":{\"config\":{\"provider\":\"deepseek\",\"model\":\"deepseek-chat\"},"
           "\"system\":\"You are a helpful agent.\"},\"reason\":\"initial\"}",
           NULL);                                                                                        /* 3 */
    append(s, "assistant/chunk",
           "{\"turn\":1,\"step\":1,\"chunk\":{\"type\":\"text-delta\",\"index\":0,\"text\":\"Let me look.\"}}",
           NULL);                                                                                        /* 4 */
    append(s, "assistant/chunk",
           "{\"turn\":1,\"step\":1,\"chunk\":{\"type\":\"tool-call-delta\",\"index\":1,\"id\":\"c1\","
           "\"name\":\"read\",\"argumentsDelta\":\"{\\\"path\\\":\\\"README.md\\\"}\"}}",
           NULL);                                                                                        /* 5 */
    append(s, "assistant/message",
           "{\"turn\":1,\"step\":1,\"message\":{\"role\":\"assistant\",\"content\":["
           "{\"type\":\"text\",\"text\":\"Let me look.\"},"
           "{\"type\":\"tool-call\",\"id\":\"c1\",\"name\":\"read\",\"arguments\":\"{\\\"path\\\":\\\"README.md\\\"}\"}],"
           "\"source\":{\"kind\":\"model\",\"provider\":\"deepseek\",\"model\":\"deepseek-chat\"},\"id\":\"a1\"},"
           "\"usage\":{\"inputTokens\":120,\"outputTokens\":30}}",
           "{\"surfaceOp\":\"append\",\"sourceEventSeqs\":[4,5]}");                                       /* 6 */
    append(s, "tool/call", "{\"turn\":1,\"step\":1,\"callId\":\"c1\",\"name\":\"read\",\"arguments\":\"{}\"}",
           NULL);                                                                                        /* 7 */
    append(s, "tool/result",
           "{\"turn\":1,\"step\":1,\"message\":{\"source\":{\"kind\":\"tool\",\"callId\":\"c1\"},"
           "\"content\":[{\"type\":\"tool-result\",\"toolCallId\":\"c1\",\"content\":["
           "{\"type\":\"text\",\"text\":\"# dsh-session\\nA native session engine.\"}]}],"
           "\"role\":\"user\",\"id\":\"t1\"}}",
           "{\"surfaceOp\":\"append\",\"sourceEventSeqs\":[7]}");                                         /* 8 */
    append(s, "step/end", "{\"turn\":1,\"step\":1}", NULL);                                            /* 9 */
    append(s, "step/start", "{\"turn\":1,\"step\":2}", NULL);                                          /* 10 */
    append(s, "assistant/message",
           "{\"turn\":1,\"step\":2,\"message\":{\"role\":\"assistant\",\"content\":["
           "{\"type\":\"text\",\"text\":\"README.md describes a native session engine.\"}],"
           "\"source\":{\"kind\":\"model\",\"provider\":\"deepseek\",\"model\":\"deepseek-chat\"},\"id\":\"a2\"}}",
           "{\"surfaceOp\":\"append\",\"sourceEventSeqs\":[]}");                                          /* 11 */
    append(s, "step/end", "{\"turn\":1,\"step\":2}", NULL);                                            /* 12 */
    append(s, "turn/end", "{\"turn\":1,\"reason\":{\"kind\":\"completed\"}}", NULL);                   /* 13 */
    print_derived("derived messages after turn 1", s);

    /* A validation dry run: this replace forgets to cite node 6, so it is refused. */
    check("validate", dsh_session_validate(s, "user/message", "{\"id\":\"x\",\"role\":\"user\",\"content\":[],"
                                           "\"source\":{\"kind\":\"user\"}}",
                                           "{\"surfaceOp\":{\"op\":\"replace\",\"start\":1,\"end\":8},"
                                           "\"sourceEventSeqs\":[1,8]}",
                                           &out) == DSH_E_REJECTED ? DSH_OK : DSH_E_INTERNAL,
          &out);
    printf("\nvalidate refused an incomplete replace: %s\n", out.ptr);
    dsh_buf_free(&out);

    printf("\ncompaction:\n");
    append(s, "compaction/start", "{\"turn\":null}", NULL);                                            /* 14 */
    append(s, "user/message",
           "{\"id\":\"sum1\",\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":"
           "\"Summary: the user asked about README.md; it was read (a native session engine).\"}],"
           "\"source\":{\"kind\":\"compaction\"}}",
           "{\"surfaceOp\":{\"op\":\"replace\",\"start\":1,\"end\":8},\"sourceEventSeqs\":[1,6,8]}");       /* 15 */
    append(s, "compaction/end", "{\"turn\":null}", NULL);                                              /* 16 */
    print_derived("derived messages after the compaction (the log keeps every event)", s);

    check("surface", dsh_session_surface(s, &out), &out);
    printf("\nsurface: %s\n", out.ptr);
    dsh_buf_free(&out);

    dsh_session *child = NULL;
    check("fork", dsh_session_fork(s, -1, "{\"id\":\"demo-fork\"}", &child, &out), &out);
    printf("\nforked: %s\n", out.ptr);
    dsh_buf_free(&out);
    append(child, "turn/start", "{\"turn\":2}", NULL);
    append(child, "user/message",
           "{\"id\":\"u2\",\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"And in the fork?\"}],"
           "\"source\":{\"kind\":\"user\"}}",
           "{\"surfaceOp\":\"append\"}");
    print_derived("derived messages of the fork", child);

    check("info", dsh_session_info(s, &out), &out);
    printf("\nsource info: %s\n", out.ptr);
    dsh_buf_free(&out);

    check("flush", dsh_session_flush(s, &out), &out);
    dsh_buf_free(&out);
    check("close child", dsh_session_close(child, &out), &out);
    dsh_buf_free(&out);
    check("close", dsh_session_close(s, &out), &out);
    dsh_buf_free(&out);
    check("store list", dsh_store_list(store, &out), &out);
    printf("\nstored sessions: %s\n", out.ptr);
    dsh_buf_free(&out);
    check("store close", dsh_store_close(store, &out), &out);
    dsh_buf_free(&out);
    return 0;
}
