/*
 * crash_host.c: a C host of dsh-session for the SIGKILL crash trials
 * (tests/c_crash.rs), using nothing but the C ABI.
 *
 *   crash_host write CONFIG SEED   open (or create) session "crash" and
 *       append turns with streamed chunks forever, flushing at random
 *       points; prints "EV <event json>" for every committed event and
 *       "ACK <n>" once a flush returned DSH_OK for the first n events.
 *       Runs until it is killed.
 *   crash_host dump CONFIG         open session "crash" (crash repair
 *       runs) and print "INFO <info json>" and "EVENTS <events json>",
 *       or "NOTFOUND" when nothing is stored.
 *
 * Every line is flushed as soon as it is printed, so what the driver read
 * before the kill was printed before it.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dsh_session.h"

static void die(const char *what, dsh_status st, const dsh_buf *out) {
  fprintf(stderr, "%s: %s %s\n", what, dsh_status_name(st),
          out->ptr ? out->ptr : "");
  exit(2);
}

/* A small deterministic generator. */
static uint64_t rng_state;
static uint64_t below(uint64_t n) {
  rng_state = rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
  return (rng_state >> 33) % (n ? n : 1);
}

/* Append one event; print it; return its seq. */
static uint64_t emit(dsh_session *s, const char *type, const char *data,
                     const char *intent) {
  dsh_buf out = DSH_BUF_INIT;
  dsh_status st = dsh_session_append(s, type, data, intent, &out);
  if (st != DSH_OK) die(type, st, &out);
  printf("EV %s\n", out.ptr);
  fflush(stdout);
  const char *p = strstr(out.ptr, "\"seq\":");
  uint64_t seq = p ? strtoull(p + 6, NULL, 10) : 0;
  dsh_buf_free(&out);
  return seq;
}

static void flush_ack(dsh_session *s, uint64_t next) {
  dsh_buf out = DSH_BUF_INIT;
  dsh_status st = dsh_session_flush(s, &out);
  if (st != DSH_OK) die("flush", st, &out);
  dsh_buf_free(&out);
  printf("ACK %llu\n", (unsigned long long)next);
  fflush(stdout);
}

static dsh_store *open_store(const char *config) {
  dsh_store *store = NULL;
  dsh_buf out = DSH_BUF_INIT;
  dsh_status st = dsh_store_open(config, &store, &out);
  if (st != DSH_OK) die("store open", st, &out);
  dsh_buf_free(&out);
  return store;
}

/* The number after "key": in a JSON text (0 when absent or null). */
static uint64_t number_of(const char *json, const char *key) {
  char pat[64];
  snprintf(pat, sizeof pat, "\"%s\":", key);
  const char *p = strstr(json, pat);
  return p ? strtoull(p + strlen(pat), NULL, 10) : 0;
}

static void write_forever(const char *config, uint64_t seed) {
  rng_state = seed;
  dsh_store *store = open_store(config);
  dsh_session *s = NULL;
  dsh_buf out = DSH_BUF_INIT;
  dsh_status st = dsh_session_open(store, "crash", &s, &out);
  if (st == DSH_E_NOT_FOUND) {
    dsh_buf_free(&out);
    st = dsh_session_create(store, "{\"id\":\"crash\"}", &s, &out);
  }
  if (st != DSH_OK) die("session open/create", st, &out);
  dsh_buf_free(&out);
  st = dsh_session_info(s, &out);
  if (st != DSH_OK) die("info", st, &out);
  uint64_t turn = number_of(out.ptr, "length") + 1;
  dsh_buf_free(&out);

  char data[8192], intent[4096], filler[4096];
  for (;; turn++) {
    snprintf(data, sizeof data, "{\"turn\":%llu}", (unsigned long long)turn);
    emit(s, "turn/start", data, NULL);
    snprintf(data, sizeof data,
             "{\"id\":\"u%llu\",\"role\":\"user\",\"content\":[{\"type\":\"text\","
             "\"text\":\"question %llu\"}],\"source\":{\"kind\":\"user\"}}",
             (unsigned long long)turn, (unsigned long long)turn);
    emit(s, "user/message", data, "{\"surfaceOp\":\"append\"}");
    snprintf(data, sizeof data, "{\"turn\":%llu,\"step\":1}", (unsigned long long)turn);
    emit(s, "step/start", data, NULL);
    uint64_t chunks = 3 + below(20), last = 0;
    for (uint64_t i = 0; i < chunks; i++) {
      size_t n = (size_t)below(200);
      memset(filler, 'x', n);
      filler[n] = 0;
      snprintf(data, sizeof data,
               "{\"turn\":%llu,\"step\":1,\"chunk\":{\"type\":\"text-delta\","
               "\"index\":0,\"text\":\"word %llu %s\"}}",
               (unsigned long long)turn, (unsigned long long)i, filler);
      last = emit(s, "assistant/chunk", data, NULL);
      if (below(8) == 0) flush_ack(s, last + 1);
    }
    snprintf(data, sizeof data,
             "{\"turn\":%llu,\"step\":1,\"message\":{\"id\":\"a%llu\",\"role\":"
             "\"assistant\",\"content\":[{\"type\":\"text\",\"text\":\"answer\"}],"
             "\"source\":{\"kind\":\"model\",\"provider\":\"p\",\"model\":\"m\"}}}",
             (unsigned long long)turn, (unsigned long long)turn);
    snprintf(intent, sizeof intent, "{\"surfaceOp\":\"append\",\"sourceEventSeqs\":[%llu]}",
             (unsigned long long)last);
    emit(s, "assistant/message", data, intent);
    snprintf(data, sizeof data, "{\"turn\":%llu,\"step\":1}", (unsigned long long)turn);
    emit(s, "step/end", data, NULL);
    snprintf(data, sizeof data, "{\"turn\":%llu,\"reason\":{\"kind\":\"completed\"}}",
             (unsigned long long)turn);
    uint64_t end = emit(s, "turn/end", data, NULL);
    flush_ack(s, end + 1);
  }
}


static int dump(const char *config) {
  dsh_store *store = open_store(config);
  dsh_session *s = NULL;
  dsh_buf out = DSH_BUF_INIT;
  dsh_status st = dsh_session_open(store, "crash", &s, &out);
  if (st == DSH_E_NOT_FOUND) {
    printf("NOTFOUND\n");
    dsh_buf_free(&out);
    dsh_store_close(store, &out);
    dsh_buf_free(&out);
    return 0;
  }
  if (st != DSH_OK) die("open after the kill", st, &out);
  dsh_buf_free(&out);
  st = dsh_session_info(s, &out);
  if (st != DSH_OK) die("info", st, &out);
  printf("INFO %s\n", out.ptr);
  dsh_buf_free(&out);
  st = dsh_session_events(s, 0, UINT64_MAX, &out);
  if (st != DSH_OK) die("events", st, &out);
  printf("EVENTS %s\n", out.ptr);
  dsh_buf_free(&out);
  st = dsh_session_close(s, &out);
  if (st != DSH_OK) die("session close", st, &out);
  dsh_buf_free(&out);
  st = dsh_store_close(store, &out);
  if (st != DSH_OK) die("store close", st, &out);
  dsh_buf_free(&out);
  return 0;
}

int main(int argc, char **argv) {
  if (argc == 4 && strcmp(argv[1], "write") == 0) {
    write_forever(argv[2], strtoull(argv[3], NULL, 10)); /* until killed */
    return 1;
  }
  if (argc == 3 && strcmp(argv[1], "dump") == 0) return dump(argv[2]);
  fprintf(stderr, "usage: crash_host write CONFIG SEED | crash_host dump CONFIG\n");
  return 2;
}
