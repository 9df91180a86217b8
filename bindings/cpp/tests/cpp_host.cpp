/*
 * cpp_host.cpp: the C++ header (include/dsh_session.hpp) as a host uses it.
 *
 * JSON escaping and the builders; the error object's parse; a memory store
 * (append of text that needs escaping, derive, the pure functions, the
 * error path thrown and not thrown, a rejected batch, the observer); a
 * SQLite store in a temporary directory whose name needs escaping (write,
 * flush, fork, close, reopen, a turn left open repaired by store::repair's
 * dry run and by the open, inspect, remove, a windowed open); appends from
 * several threads while the observer is replaced; closing twice, moved-from
 * and default-constructed objects. Prints one line per check and ends with
 * the plain line "N passed, M failed"; exits non-zero when a check failed.
 * Registered with ctest, also under valgrind.
 */
#include "dsh_session.hpp"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <type_traits>
#include <vector>

namespace {

int n_passed = 0, n_failed = 0;

bool check(bool ok, const std::string &name, const std::string &detail = "") {
  if (ok) {
    ++n_passed;
    std::cout << "ok   " << name << '\n';
  } else {
    ++n_failed;
    std::cout << "FAIL " << name << (detail.empty() ? "" : ": ") << detail << '\n';
  }
  return ok;
}

bool contains(std::string_view text, std::string_view part) { return text.find(part) != std::string_view::npos; }

// Run f, which must throw a dsh::error with this status and rule.
template <class F>
void expect_throw(const std::string &name, dsh_status status, const std::string &rule, F &&f) {
  try {
    f();
    check(false, name, "no exception");
  } catch (const dsh::error &e) {
    check(e.status() == status && e.rule() == rule, name, e.what());
  } catch (const std::exception &e) {
    check(false, name, std::string("another exception: ") + e.what());
  }
}

// A try_ result that must be this failure.
template <class R>
void expect_fail(const std::string &name, const R &r, dsh_status status, const std::string &rule) {
  if (r) {
    check(false, name, "succeeded");
  } else {
    check(r.status() == status && r.error().status() == status && r.error().rule() == rule, name,
          r.error().what());
  }
}

// A text a host cannot put into JSON by hand: quotes, backslashes, control
// characters, non-ASCII (2, 3 and 4 bytes of UTF-8), and a literal "\n".
const std::string TRICKY = "say \"hi\" to C:\\dir\\file\n\ttab\r \x01\x1f \x7f caf\xc3\xa9 \xe4\xb8\xad \xf0\x9f\x98\x80 \\n";

std::string user_message(const std::string &id, const std::string &text) {
  return dsh::json_object()
      .string("id", id)
      .string("role", "user")
      .raw("content", dsh::json_array().raw(dsh::json_object().string("type", "text").string("text", text).str()).str())
      .raw("source", dsh::json_object().string("kind", "user").str())
      .str();
}

const char *const APPEND = R"({"surfaceOp":"append"})";

std::string turn(int n, const std::string &text) {
  const std::string t = std::to_string(n);
  return dsh::json_array()
      .raw(R"({"type":"turn/start","data":{"turn":)" + t + "}}")
      .raw(dsh::json_object()
               .string("type", "user/message")
               .raw("data", user_message("u" + t, text))
               .raw("intent", APPEND)
               .str())
      .raw(R"({"type":"step/start","data":{"turn":)" + t + R"(,"step":1}})")
      .raw(R"({"type":"assistant/message","data":{"turn":)" + t +
           R"(,"step":1,"message":{"role":"assistant","content":[{"type":"text","text":"hello"}],)"
           R"("source":{"kind":"model","provider":"deepseek","model":"deepseek-chat"},"id":"a)" +
           t + R"("}},"intent":{"surfaceOp":"append","sourceEventSeqs":[]}})")
      .raw(R"({"type":"step/end","data":{"turn":)" + t + R"(,"step":1}})")
      .raw(R"({"type":"turn/end","data":{"turn":)" + t + R"(,"reason":{"kind":"completed"}}})")
      .str();
}

void test_types() {
  static_assert(!std::is_copy_constructible_v<dsh::store> && std::is_nothrow_move_constructible_v<dsh::store> &&
                std::is_nothrow_move_assignable_v<dsh::store> && std::is_nothrow_destructible_v<dsh::store>);
  static_assert(!std::is_copy_constructible_v<dsh::session> && std::is_nothrow_move_constructible_v<dsh::session> &&
                std::is_nothrow_move_assignable_v<dsh::session> && std::is_nothrow_destructible_v<dsh::session>);
  static_assert(!std::is_copy_constructible_v<dsh::buffer> && std::is_nothrow_move_constructible_v<dsh::buffer>);
  static_assert(std::is_nothrow_copy_constructible_v<dsh::error> && std::is_base_of_v<std::runtime_error, dsh::error>);
  check(true, "types: move-only handles and buffer, noexcept moves and destructors, nothrow-copyable error");
}

void test_version() {
  check(dsh::abi_compatible() && dsh::abi_version() == DSH_ABI_VERSION, "abi_version() == DSH_ABI_VERSION");
  check(std::string_view(dsh::version()) == DSH_VERSION_STRING, "version() == DSH_VERSION_STRING", dsh::version());
  const dsh::buffer info = dsh::build_info();
  check(contains(info, "\"abi\":" + std::to_string(DSH_ABI_VERSION)), "build_info names the ABI", info.str());
  check(std::string_view(dsh::status_name(DSH_E_REJECTED)) == "DSH_E_REJECTED", "status_name");
}

void test_json() {
  struct {
    std::string_view in, out;
  } cases[] = {
      {"", R"("")"},
      {"plain", R"("plain")"},
      {"a\"b\\c/d", R"("a\"b\\c/d")"},
      {"\b\f\n\r\t", R"("\b\f\n\r\t")"},
      {std::string_view("\x00\x01\x1f\x7f", 4), "\"\\u0000\\u0001\\u001f\x7f\""},
      {"caf\xc3\xa9 \xe4\xb8\xad \xf0\x9f\x98\x80 \xf4\x8f\xbf\xbf", "\"caf\xc3\xa9 \xe4\xb8\xad \xf0\x9f\x98\x80 \xf4\x8f\xbf\xbf\""},
      {"\xff", R"("\ufffd")"},                                   // never UTF-8
      {"a\xe4\xb8", R"("a\ufffd\ufffd")"},                       // truncated
      {"\xc0\xaf", R"("\ufffd\ufffd")"},                         // overlong
      {"\xed\xa0\x80", R"("\ufffd\ufffd\ufffd")"},               // a surrogate
      {"\xf4\x90\x80\x80", R"("\ufffd\ufffd\ufffd\ufffd")"},     // above U+10FFFF
      {"\xe4\xb8\xad\x80", "\"\xe4\xb8\xad\\ufffd\""},           // a stray continuation byte
  };
  int i = 0;
  for (const auto &c : cases) {
    const std::string got = dsh::json_string(c.in);
    check(got == c.out, "json_string case " + std::to_string(i++), got + " != " + std::string(c.out));
  }
  std::string out = "x=";
  dsh::append_json_string(out, "q\"");
  check(out == R"(x="q\"")", "append_json_string appends", out);

  const std::string obj = dsh::json_object()
                              .string("s", "a\"b")
                              .number("n", -12)
                              .number("u", std::uint64_t{18446744073709551615u})
                              .boolean("t", true)
                              .boolean("f", false)
                              .null("z")
                              .raw("a", dsh::json_array().string("x").number(1).boolean(false).null().str())
                              .string("k\ney", "")
                              .str();
  check(obj == R"({"s":"a\"b","n":-12,"u":18446744073709551615,"t":true,"f":false,"z":null,"a":["x",1,false,null],"k\ney":""})",
        "json_object / json_array", obj);
  check(dsh::json_object().str() == "{}" && dsh::json_array().str() == "[]", "empty builders");
}

void test_error_parse() {
  const dsh::error e(DSH_E_REJECTED,
                     R"( { "status" : "DSH_E_REJECTED", "code":2, "extra":{"a":[1,2.5e3,{"b":null}],"c":"}"},)"
                     R"( "rule":"x.y", "message":"a \"q\" \\ \/ \u00e9 \ud83d\ude00 \ud800 \n", "index":3,)"
                     R"( "referenceCode":"OPEN_TURN", "cause":"c.d" } )");
  check(e.status() == DSH_E_REJECTED && std::string_view(e.status_name()) == "DSH_E_REJECTED", "error: status");
  check(e.rule() == "x.y", "error: rule", e.rule());
  check(e.message() == "a \"q\" \\ / \xc3\xa9 \xf0\x9f\x98\x80 \xef\xbf\xbd \n", "error: message unescaped", e.message());
  check(e.index() && *e.index() == 3, "error: index");
  check(e.reference_code() == "OPEN_TURN" && e.cause() == "c.d", "error: referenceCode, cause");
  check(std::string_view(e.what()) == "DSH_E_REJECTED x.y: " + e.message() + " (index 3)", "error: what()", e.what());
  const dsh::error copy = e;  // shares the fields
  check(copy.rule() == "x.y" && &copy.rule() == &e.rule(), "error: copies share their fields");
  const dsh::error odd(DSH_E_IO, "not an object");
  check(odd.rule().empty() && odd.message() == "not an object" && !odd.index() && odd.json() == "not an object",
        "error: text that is not an error object becomes the message");
}

void test_memory_store() {
  dsh::store st = dsh::store::open();  // nullptr config: memory
  check(contains(st.open_result(), "memory"), "memory store: open_result", st.open_result().str());
  dsh::session s = dsh::session::create(st, R"({"id":"mem"})");
  check(contains(s.open_result(), R"("id":"mem")"), "create: open_result is the header", s.open_result().str());

  // Append text that needs escaping; the library keeps it byte for byte.
  const dsh::buffer committed = s.append("user/message", user_message("u1", TRICKY), APPEND);
  check(contains(committed, dsh::json_string(TRICKY)), "append: the committed event holds the escaped text",
        committed.str());
  const dsh::buffer derived = s.derive();
  check(contains(derived, dsh::json_string(TRICKY)), "derive: the text comes back byte for byte", derived.str());
  std::ostringstream printed;
  printed << derived;
  check(printed.str() == derived.view() && derived.c_str()[derived.size()] == '\0', "buffer: << and c_str()");

  const dsh::buffer validated = s.validate("user/message", user_message("u2", "v"), APPEND);
  check(contains(validated, R"("seq":1)"), "validate: the event append would commit", validated.str());
  check(contains(s.info(), R"("length":1)"), "validate commits nothing", s.info().str());
  check(contains(s.surface(), R"("nodes":[0])"), "surface", s.surface().str());
  check(s.request_header().view() == "null" && s.request_context().view() == "null", "request_header/context: null");
  const dsh::buffer since = s.derive_since(0, 0);
  check(contains(since, R"("count":1)") && contains(since, dsh::json_string(TRICKY)), "derive_since(0, 0)",
        since.str());

  // The pure functions take a buffer as an argument as it is.
  const dsh::buffer events = s.events();
  check(dsh::derive_messages(events).view() == derived.view(), "derive_messages(events()) == derive()");
  check(contains(dsh::fold_surface(events), R"("nodes":[0])"), "fold_surface");
  check(dsh::repair_events(events).view() == "[]", "repair_events: nothing to close");
  check(contains(dsh::derive_event_message(s.events(0, 1).view().substr(1, s.events(0, 1).size() - 2)),
                 dsh::json_string(TRICKY)),
        "derive_event_message (a string_view argument)");

  // The error path, thrown: an undeclared event type under strict admission.
  expect_throw("append of an undeclared type throws DSH_E_REJECTED admit.unknown-type", DSH_E_REJECTED,
               "admit.unknown-type", [&] { s.append("myapp/undeclared", "{}"); });
  try {
    s.append("myapp/undeclared", "{}");
  } catch (const std::runtime_error &e) {
    check(contains(e.what(), "DSH_E_REJECTED admit.unknown-type: "), "dsh::error is a std::runtime_error", e.what());
  }
  expect_throw("invalid data JSON throws DSH_E_INVALID_JSON", DSH_E_INVALID_JSON, "json.parse",
               [&] { s.append("user/message", "{nope", APPEND); });

  // The same, not thrown.
  auto r = s.try_append("myapp/undeclared", "{}");
  expect_fail("try_append: DSH_E_REJECTED admit.unknown-type, not thrown", r, DSH_E_REJECTED, "admit.unknown-type");
  check(contains(r.error().json(), R"("rule":"admit.unknown-type")"), "try_append: error().json() is the object",
        r.error().json());
  expect_throw("result::value() throws the error", DSH_E_REJECTED, "admit.unknown-type", [&] { r.value(); });
  auto good = s.try_append("user/message", user_message("u2", "second"), APPEND);
  check(good && good.status() == DSH_OK && contains(*good, R"("seq":1)") && good->size() > 0,
        "try_append: success holds the event", good ? good->str() : good.error().what());

  // A batch is all or nothing; the error names the failing item.
  const std::string batch = dsh::json_array()
                                .raw(R"({"type":"user/message","data":)" + user_message("u3", "ok") + R"(,"intent":)" +
                                     APPEND + "}")
                                .raw(R"({"type":"myapp/undeclared","data":{}})")
                                .str();
  auto rb = s.try_append_batch(batch);
  expect_fail("append_batch: the second item is refused", rb, DSH_E_REJECTED, "admit.unknown-type");
  check(!rb && rb.error().index() == std::optional<std::size_t>(1), "append_batch: error().index() == 1",
        rb ? "" : rb.error().what());
  check(contains(s.info(), R"("length":2)"), "append_batch: nothing committed", s.info().str());
  expect_fail("try_open of an unknown id: DSH_E_NOT_FOUND", dsh::session::try_open(st, "nope"), DSH_E_NOT_FOUND,
              "load.not-found");
  expect_fail("try_create with a taken id: DSH_E_CONFLICT", dsh::session::try_create(st, R"({"id":"mem"})"),
              DSH_E_CONFLICT, "store.duplicate-id");
  expect_fail("try_fork past the end: DSH_E_INVALID_ARGUMENT", s.try_fork(99), DSH_E_INVALID_ARGUMENT,
              "fork.out-of-range");

  // An open turn: the pure repair closes it.
  s.append_batch(turn(1, "t"));
  const dsh::buffer open_turn = s.append("turn/start", R"({"turn":2})");
  check(dsh::repair_events(s.events()).view() != "[]", "repair_events closes an open turn");
  expect_fail("try_fork inside an open turn: DSH_E_REJECTED fork.open-turn", s.try_fork(-1), DSH_E_REJECTED,
              "fork.open-turn");
  s.append("turn/end", R"({"turn":2,"reason":{"kind":"completed"}})");
  dsh::session child = s.fork(-1, R"({"id":"mem-fork"})");
  check(child.derive().view() == s.derive().view(), "fork: the child derives the same messages");
  child.flush();
  check(child.close().ok() && s.close().ok() && st.close().ok(), "fork, session and store close");
}

// The observer hears created / event / flush / disposed, outlives the store
// object while a session is open, survives an exception, and can be removed.
void test_observer() {
  struct counts {
    std::atomic<int> created{0}, event{0}, flush{0}, disposed{0}, other{0};
  };
  auto seen = std::make_shared<counts>();
  std::string last_event;
  dsh::store st = dsh::store::open(R"({"backend":"memory"})");
  st.set_observer([seen, &last_event](const dsh::notice &n) {
    if (n.session_id != "obs") ++seen->other;
    if (n.kind == "created") ++seen->created;
    if (n.kind == "event") {
      ++seen->event;
      last_event = std::string(n.payload);
    }
    if (n.kind == "flush" && n.payload == R"({"ok":true})") ++seen->flush;
    if (n.kind == "disposed" && n.payload == "null") ++seen->disposed;
    if (n.kind == "event" && contains(n.payload, "\"throw\"")) throw std::runtime_error("from the observer");
  });
  dsh::session s = dsh::session::create(st, R"({"id":"obs"})");
  const dsh::buffer e = s.append("user/message", user_message("u1", TRICKY), APPEND);
  check(seen->created == 1 && seen->event == 1 && last_event == e.view(), "observer: created, event (the committed event)");
  // The store object goes first: the session keeps the observer alive.
  check(st.close().ok(), "observer: store closed before its session");
  s.append("user/message", user_message("u2", "throw"), APPEND);
  check(seen->event == 2, "observer: still called after the store object closed; its exception is dropped");
  s.flush();
  check(seen->flush == 1, "observer: flush {\"ok\":true}");
  check(s.close().ok() && seen->disposed == 1 && seen->other == 0, "observer: disposed on close");

  // Removed: nothing more is heard.
  dsh::store st2 = dsh::store::open();
  int heard = 0;
  st2.set_observer([&heard](const dsh::notice &) { ++heard; });
  st2.set_observer(nullptr);
  dsh::session s2 = dsh::session::create(st2);
  s2.append("turn/start", R"({"turn":1})");
  check(heard == 0, "observer: removed by an empty function");
}

// Sessions of one store appended to from several threads while another
// thread keeps replacing the observer: every event is heard exactly once.
void test_threads() {
  constexpr int threads = 4, appends = 50;
  dsh::store st = dsh::store::open();
  std::atomic<int> heard{0};
  st.set_observer([&heard](const dsh::notice &n) { heard += n.kind == "event"; });
  std::vector<dsh::session> sessions;
  for (int t = 0; t < threads; ++t) sessions.push_back(dsh::session::create(st));
  std::atomic<bool> done{false};
  std::thread replacer([&] {
    while (!done) st.set_observer([&heard](const dsh::notice &n) { heard += n.kind == "event"; });
  });
  std::vector<std::thread> writers;
  std::atomic<int> failures{0};
  for (int t = 0; t < threads; ++t) {
    writers.emplace_back([&, t] {
      for (int i = 0; i < appends; ++i) {
        if (!sessions[static_cast<std::size_t>(t)].try_append("turn/start", dsh::json_object().number("turn", i + 1).str()))
          ++failures;
        if (!sessions[static_cast<std::size_t>(t)].try_append(
                "turn/end", dsh::json_object().number("turn", i + 1).raw("reason", R"({"kind":"completed"})").str()))
          ++failures;
      }
    });
  }
  for (auto &w : writers) w.join();
  done = true;
  replacer.join();
  check(failures == 0 && heard == threads * appends * 2, "threads: every append committed and heard once",
        std::to_string(failures) + " failures, " + std::to_string(heard) + " heard");
}

// A SQLite store in a directory whose name a hand-written JSON string would
// get wrong: write, fork, reopen, repair, inspect, remove, windowed open.
void test_sqlite(const std::filesystem::path &root) {
  const std::filesystem::path dir = root / "it's a \"quoted\" \\ dir";
  const std::string path = (dir / "store.db").string();
  const std::string config = dsh::json_object().string("backend", "sqlite").string("path", path).str();
  std::cout << "# sqlite store at " << path << '\n';
  std::string events, derived;
  {
    dsh::store st = dsh::store::open(config);
    check(contains(st.open_result(), "sqlite"), "sqlite: open (the path escaped by json_object)", st.open_result().str());
    dsh::session s = dsh::session::create(st, dsh::json_object().string("id", "cpp").string("cwd", path).str());
    s.append_batch(turn(1, TRICKY));
    events = s.events().str();
    derived = s.derive().str();
    check(contains(derived, dsh::json_string(TRICKY)), "sqlite: derive holds the text");
    s.flush();
    dsh::session child = s.fork(-1, R"({"id":"cpp-fork"})");
    check(child.derive().view() == derived, "sqlite: fork derives the same messages");
    // A turn left open, as a crash leaves it.
    dsh::session open_turn = dsh::session::create(st, R"({"id":"open-turn"})");
    open_turn.append_batch(dsh::json_array()
                               .raw(R"({"type":"turn/start","data":{"turn":1}})")
                               .raw(R"({"type":"user/message","data":)" + user_message("u1", "unanswered") +
                                    R"(,"intent":{"surfaceOp":"append"}})")
                               .str());
    expect_fail("sqlite: a second open of an open session: DSH_E_CONFLICT", dsh::session::try_open(st, "cpp"),
                DSH_E_CONFLICT, "load.live-prepare");
    check(open_turn.close().ok() && child.close().ok() && s.close().ok(), "sqlite: sessions closed");
    auto closed = st.close();
    check(closed.ok(), "sqlite: store closed", closed ? "" : closed.error().what());
  }
  dsh::store st = dsh::store::open(config);
  const dsh::buffer list = st.list();
  check(contains(list, R"("id":"cpp")") && contains(list, R"("id":"cpp-fork")") && contains(list, dsh::json_string(path)),
        "sqlite: list after reopen", list.str());
  {
    dsh::session s = dsh::session::open(st, "cpp");
    check(contains(s.open_result(), R"("repaired":[])"), "sqlite: reopened, nothing to repair", s.open_result().str());
    check(s.derive().view() == derived, "sqlite: derive identical after reopen");
    check(s.events().view().substr(0, events.size() - 1) == std::string_view(events).substr(0, events.size() - 1) &&
              contains(s.events(), "session/end-seed"),
          "sqlite: events identical after reopen (+ session/end-seed)");
  }
  const dsh::buffer dry = st.repair("open-turn", R"({"dryRun":true})");
  check(contains(dry, R"("applied":false)") && contains(dry, "turn/end"), "sqlite: repair dry run names the closers",
        dry.str());
  check(contains(st.inspect("open-turn"), "turn/end"), "sqlite: inspect shows the closers repair would append");
  {
    dsh::session s = dsh::session::open(st, "open-turn");
    check(contains(s.open_result(), "turn/end") && !contains(s.open_result(), R"("repaired":[])"),
          "sqlite: the open repairs the open turn", s.open_result().str());
    check(dsh::repair_events(s.events()).view() == "[]", "sqlite: nothing left to repair");
  }
  st.remove("cpp-fork");
  expect_fail("sqlite: removed session is gone: DSH_E_NOT_FOUND", dsh::session::try_open(st, "cpp-fork"),
              DSH_E_NOT_FOUND, "load.not-found");
  dsh::session w = dsh::session::open_windowed(st, "cpp", R"({"window":1})");
  check(w.derive().view() == derived, "sqlite: windowed open derives the same");
}

// close twice, moved-from and default-constructed objects.
void test_lifetimes() {
  dsh::store st = dsh::store::open();
  dsh::session s = dsh::session::create(st, R"({"id":"a"})");
  check(s.is_open() && static_cast<bool>(s) && s.native_handle() != nullptr, "session is open");

  dsh::session moved = std::move(s);
  check(!s.is_open() && s.native_handle() == nullptr && s.open_result().empty() && moved.is_open(),
        "move: the source is empty, the target owns the handle");
  expect_fail("moved-from session: try_derive gives DSH_E_CLOSED", s.try_derive(), DSH_E_CLOSED, "handle.closed");
  expect_throw("moved-from session: append throws DSH_E_CLOSED", DSH_E_CLOSED, "handle.closed",
               [&] { s.append("turn/start", R"({"turn":1})"); });
  expect_fail("moved-from session: close gives DSH_E_CLOSED", s.close(), DSH_E_CLOSED, "handle.closed");
  moved.append("turn/start", R"({"turn":1})");

  // Move assignment closes the handle it replaces: a session has one handle at
  // a time, and "a" opens again once it is closed.
  expect_fail("session a is open: a second open is DSH_E_CONFLICT", dsh::session::try_open(st, "a"), DSH_E_CONFLICT,
              "load.live-prepare");
  moved = dsh::session::create(st, R"({"id":"b"})");
  dsh::session again = dsh::session::open(st, "a");
  check(again.is_open() && contains(again.open_result(), R"("id":"a")"),
        "move assignment closed the session it replaced (a opens again)", again.open_result().str());

  auto first = again.close();
  check(first.ok() && !again.is_open(), "close: first close succeeds");
  expect_fail("close twice: DSH_E_CLOSED", again.close(), DSH_E_CLOSED, "handle.closed");
  expect_throw("close twice: close().value() throws DSH_E_CLOSED", DSH_E_CLOSED, "handle.closed",
               [&] { again.close().value(); });
  expect_fail("closed session: try_info gives DSH_E_CLOSED", again.try_info(), DSH_E_CLOSED, "handle.closed");

  dsh::session empty;
  expect_fail("default-constructed session: try_fork gives DSH_E_CLOSED", empty.try_fork(), DSH_E_CLOSED,
              "handle.closed");
  dsh::store other = std::move(st);
  expect_fail("moved-from store: try_list gives DSH_E_CLOSED", st.try_list(), DSH_E_CLOSED, "handle.closed");
  expect_fail("moved-from store: session::try_create gives DSH_E_CLOSED", dsh::session::try_create(st),
              DSH_E_CLOSED, "handle.closed");
  moved.append("turn/start", R"({"turn":1})");  // a memory store lists a session once it holds an event
  check(contains(other.list(), R"("id":"b")"), "moved-to store works", other.list().str());
  check(other.close().ok(), "store: first close succeeds");
  expect_fail("store: close twice gives DSH_E_CLOSED", other.close(), DSH_E_CLOSED, "handle.closed");
  // moved ("b") is still open: it keeps the store alive.
  check(contains(moved.append("turn/end", R"({"turn":1,"reason":{"kind":"completed"}})"), R"("seq":1)"),
        "a session outlives its store object");
  dsh::store none;
  expect_fail("default-constructed store: try_set_observer gives DSH_E_CLOSED",
              none.try_set_observer([](const dsh::notice &) {}), DSH_E_CLOSED, "handle.closed");

  // A C call into a buffer the wrapper owns.
  dsh::buffer b;
  check(dsh_session_info(moved.native_handle(), b.out()) == DSH_OK && contains(b, R"("id":"b")"),
        "native_handle() + buffer::out() for a C call", b.str());
  dsh_buf raw = b.release();
  check(b.empty() && raw.ptr != nullptr, "buffer::release hands the dsh_buf over");
  dsh_buf_free(&raw);
}

}  // namespace

int main() {
  std::cout << std::unitbuf;
  test_types();
  test_version();
  test_json();
  test_error_parse();
  test_memory_store();
  test_observer();
  test_threads();
  test_lifetimes();

  char tmpl[] = "/tmp/dsh-cpp-host-XXXXXX";
  if (check(mkdtemp(tmpl) != nullptr, "mkdtemp")) {
    const std::filesystem::path root(tmpl);
#if DSH_CPP_EXCEPTIONS
    try {
      test_sqlite(root);
    } catch (const dsh::error &e) {
      check(false, "sqlite: unexpected dsh::error", e.what());
    }
#else
    test_sqlite(root);
#endif
    std::error_code ec;
    std::filesystem::remove_all(root, ec);
    check(!ec, "remove the temporary store", root.string());
  }
  std::cout << n_passed << " passed, " << n_failed << " failed\n";
  return n_failed == 0 ? 0 : 1;
}
