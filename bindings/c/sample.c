/*
 * sample.c: a small C host of dsh-session.
 *
 * Opens an SQLite store in a fresh temporary directory (or in the directory
 * given as the first argument), creates a session, runs one agent turn with
 * a tool call, compacts the turn with a surface replace, prints the derived
 * message list, forks the session, flushes and closes everything.
 *
 * Build it against an installed prefix with either of
 *   cc sample.c $(pkg-config --cflags --libs dsh-session) -Wl,-rpath,$(pkg-config --variable=libdir dsh-session)
 *   cc sample.c $(pkg-config --cflags --libs dsh-session-static)
 * or in this repository with CMake (target dsh_sample, ctest c_sample).
 */
#define _XOPEN_SOURCE 700 /* mkdtemp */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dsh_session.h"

/* Every call: on failure print the library's error object and stop. */
static void check(const char *what, dsh_status st, dsh_buf *out) {
  if (st == DSH_OK) return;
  fprintf(stderr, "%s failed: %s %s\n", what, dsh_status_name(st), out->ptr ? out->ptr : "");
  dsh_buf_free(out);
  exit(1);
}

/* Append one event; returns its seq (read from the committed event). */
static long append(dsh_session *s, const char *type, const char *data, const char *intent) {
  dsh_buf out = DSH_BUF_INIT;
  check(type, dsh_session_append(s, type, data, intent, &out), &out);
  const char *p = strstr(out.ptr, "\"seq\":");
  long seq = p ? strtol(p + 6, NULL, 10) : -1;
  printf("  %2ld %s\n", seq, type);
  dsh_buf_free(&out);
  return seq;
}

/* Print the result of a read-only call such as dsh_session_derive. */
static void show(const char *title, dsh_status (*fn)(dsh_session *, dsh_buf *), dsh_session *s) {
  dsh_buf out = DSH_BUF_INIT;
  check(title, fn(s, &out), &out);
  printf("%s: %s\n", title, out.ptr);
  dsh_buf_free(&out);
}

int main(int argc, char **argv) {
  if (dsh_abi_version() != DSH_ABI_VERSION) {
    fprintf(stderr, "library ABI %u, header ABI %d\n", (unsigned)dsh_abi_version(), DSH_ABI_VERSION);
    return 1;
  }
  printf("dsh-session %s (ABI %u)\n", dsh_version(), (unsigned)dsh_abi_version());

  /* The store: one SQLite database file in a temporary directory. */
  char tmp[] = "/tmp/dsh-sample-XXXXXX";
  const char *dir = argc > 1 ? argv[1] : mkdtemp(tmp);
  if (dir == NULL) { perror("mkdtemp"); return 1; }
  char db[4096], config[4200];
  snprintf(db, sizeof db, "%s/sample.db", dir);
  snprintf(config, sizeof config, "{\"backend\":\"sqlite\",\"path\":\"%s\"}", db);

  dsh_buf out = DSH_BUF_INIT;
  dsh_store *store = NULL;
  check("store_open", dsh_store_open(config, &store, &out), &out);
  dsh_buf_free(&out);

  dsh_session *s = NULL;
  check("session_create", dsh_session_create(store, "{\"cwd\":\"/home/sample\"}", &s, &out), &out);
  printf("session: %s\n", out.ptr);
  dsh_buf_free(&out);

  /* One turn: the user asks, the model calls a tool, the tool answers, the model answers. */
  printf("turn 1:\n");
  append(s, "turn/start", "{\"turn\":1}", NULL);
  long user = append(s, "user/message",
      "{\"id\":\"u1\",\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"How big is data.csv?\"}],"
      "\"source\":{\"kind\":\"user\"}}",
      "{\"surfaceOp\":\"append\"}");
  append(s, "step/start", "{\"turn\":1,\"step\":1}", NULL);
  long call = append(s, "assistant/message",
      "{\"turn\":1,\"step\":1,\"message\":{\"role\":\"assistant\",\"content\":["
      "{\"type\":\"tool-call\",\"id\":\"c1\",\"name\":\"stat\",\"arguments\":\"{\\\"path\\\":\\\"data.csv\\\"}\"}],"
      "\"source\":{\"kind\":\"model\",\"provider\":\"deepseek\",\"model\":\"deepseek-chat\"},\"id\":\"a1\"}}",
      "{\"surfaceOp\":\"append\",\"sourceEventSeqs\":[]}");
  long tool = append(s, "tool/call",
      "{\"turn\":1,\"step\":1,\"callId\":\"c1\",\"name\":\"stat\",\"arguments\":\"{\\\"path\\\":\\\"data.csv\\\"}\"}",
      NULL);
  char intent[256];
  snprintf(intent, sizeof intent, "{\"surfaceOp\":\"append\",\"sourceEventSeqs\":[%ld]}", tool);
  long result = append(s, "tool/result",
      "{\"turn\":1,\"step\":1,\"message\":{\"source\":{\"kind\":\"tool\",\"callId\":\"c1\"},"
      "\"content\":[{\"type\":\"tool-result\",\"toolCallId\":\"c1\",\"content\":["
      "{\"type\":\"text\",\"text\":\"data.csv: 1204 bytes\"}]}],\"role\":\"user\",\"id\":\"t1\"}}",
      intent);
  append(s, "step/end", "{\"turn\":1,\"step\":1}", NULL);
  append(s, "step/start", "{\"turn\":1,\"step\":2}", NULL);
  long answer = append(s, "assistant/message",
      "{\"turn\":1,\"step\":2,\"message\":{\"role\":\"assistant\",\"content\":["
      "{\"type\":\"text\",\"text\":\"data.csv is 1204 bytes.\"}],"
      "\"source\":{\"kind\":\"model\",\"provider\":\"deepseek\",\"model\":\"deepseek-chat\"},\"id\":\"a2\"}}",
      "{\"surfaceOp\":\"append\",\"sourceEventSeqs\":[]}");
  append(s, "step/end", "{\"turn\":1,\"step\":2}", NULL);
  append(s, "turn/end", "{\"turn\":1,\"reason\":{\"kind\":\"completed\"}}", NULL);
  show("derived", dsh_session_derive, s);

  /* Compaction: one summary replaces the surface nodes user..answer, citing each of them. */
  printf("compaction:\n");
  append(s, "compaction/start", "{\"turn\":null}", NULL);
  snprintf(intent, sizeof intent,
           "{\"surfaceOp\":{\"op\":\"replace\",\"start\":%ld,\"end\":%ld},\"sourceEventSeqs\":[%ld,%ld,%ld,%ld]}",
           user, answer, user, call, result, answer);
  append(s, "user/message",
      "{\"id\":\"sum1\",\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":"
      "\"Summary: the user asked for the size of data.csv; it is 1204 bytes.\"}],"
      "\"source\":{\"kind\":\"compaction\"}}",
      intent);
  append(s, "compaction/end", "{\"turn\":null}", NULL);
  show("derived after compaction", dsh_session_derive, s);
  show("surface", dsh_session_surface, s);

  /* Fork at the last event: the child starts with the compacted history. */
  dsh_session *child = NULL;
  check("fork", dsh_session_fork(s, -1, "{\"id\":\"sample-fork\"}", &child, &out), &out);
  printf("fork: %s\n", out.ptr);
  dsh_buf_free(&out);
  show("fork derived", dsh_session_derive, child);

  /* Flush is the durability barrier; close drains and releases the handles. */
  check("flush", dsh_session_flush(s, &out), &out);
  dsh_buf_free(&out);
  check("close fork", dsh_session_close(child, &out), &out);
  dsh_buf_free(&out);
  check("close", dsh_session_close(s, &out), &out);
  dsh_buf_free(&out);
  check("store list", dsh_store_list(store, &out), &out);
  printf("stored sessions: %s\n", out.ptr);
  dsh_buf_free(&out);
  check("store close", dsh_store_close(store, &out), &out);
  dsh_buf_free(&out);

  if (argc <= 1) { /* our own temporary directory: remove it */
    const char *suffixes[] = {"", "-wal", "-shm", "-journal"};
    for (size_t i = 0; i < sizeof suffixes / sizeof *suffixes; i++) {
      char f[4200];
      snprintf(f, sizeof f, "%s%s", db, suffixes[i]);
      unlink(f);
    }
    rmdir(dir);
  }
  printf("sample done\n");
  return 0;
}
