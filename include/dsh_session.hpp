/*
 * dsh_session.hpp: the C++17 interface of dsh-session, header-only, over the
 * C ABI of dsh_session.h (link the same libdsh_session; nothing else).
 *
 *   #include "dsh_session.hpp"
 *
 *   dsh::store st = dsh::store::open(
 *       dsh::json_object().string("backend", "sqlite").string("path", path).str());
 *   dsh::session s = dsh::session::create(st, R"({"id":"demo"})");
 *   s.append("user/message", data_json, R"({"surfaceOp":"append"})");
 *   std::cout << s.derive() << '\n';                 // dsh::buffer: the JSON text
 *
 * Names. Every C function dsh_<object>_<verb> is dsh::<object>::<verb>: a
 * static member for the calls that make a handle (dsh::store::open,
 * dsh::session::create, ::open, ::open_windowed), a member function
 * otherwise (dsh::session::fork, ::append, ...). dsh_store_delete is
 * dsh::store::remove (delete is a keyword). The functions without a handle
 * are free functions: dsh::fold_surface, dsh::derive_messages,
 * dsh::repair_events, dsh::derive_event_message, dsh::build_info,
 * dsh::version, dsh::abi_version, dsh::status_name. Arguments and results
 * are the C ones (docs/c-api.md): JSON text in, JSON text out.
 *
 * Errors. Each call comes twice:
 *   - `x(...)` returns the result and throws dsh::error when the library
 *     returns a status other than DSH_OK;
 *   - `try_x(...)` throws no dsh::error: it returns a dsh::result<T>, which
 *     holds either the value or the dsh::error (`if (!r)`, `r.status()`,
 *     `r.error().rule()`, `*r`, and `r.value()`, which throws the error).
 * A dsh::error (a std::runtime_error) carries the call's status and what
 * the library's error object {"status","code","rule","message","index"?,...}
 * says: rule(), message(), index(), reference_code(), cause() and the
 * object itself, json(). Besides dsh::error, calls throw only
 * std::bad_alloc.
 * close() is the one call without a throwing form: it returns a
 * dsh::result<void> (`s.close().value()` throws). A handle object that was
 * closed, moved from or default-constructed answers every call with
 * DSH_E_CLOSED (rule handle.closed) without calling the library.
 *
 * Results. A JSON result is a dsh::buffer: it owns the library's dsh_buf
 * (no copy is made) and frees it with dsh_buf_free. view() /
 * std::string_view conversion, c_str() (always NUL-terminated), str() for
 * a std::string copy, `<<` to a stream.
 *
 * Text arguments (dsh::text_arg) are `const char *` (NUL-terminated, as in
 * C; nullptr where the C function allows NULL), std::string, a dsh::buffer
 * (a result passed on) or std::string_view (copied once to add the NUL).
 * As in C, text ends at its first NUL byte. Build JSON text with
 * dsh::json_string (one escaped string) or dsh::json_object /
 * dsh::json_array (small builders); they escape exactly as JSON.stringify,
 * the form the library stores.
 *
 * Handles. dsh::store and dsh::session are move-only RAII owners of
 * dsh_store * / dsh_session *. The destructor closes the handle (draining
 * pending writes) and drops the status: call close() to learn whether the
 * last drain reached storage. A session keeps its store alive, so they
 * close in any order. Like the C handles, one object may be used from
 * several threads at once, except for close(), assignment and destruction,
 * which need the object to themselves. native_handle() gives the C handle
 * for C calls; it stays owned by the object.
 *
 * Observer. store::set_observer(std::function<void(const dsh::notice &)>)
 * installs the store's lifecycle observer (dsh_store_set_observer): the
 * function is kept alive by the store object and by every session made
 * from it, as the C contract requires, and an exception it throws is
 * caught and dropped (it cannot cross the library).
 *
 * Without exceptions (-fno-exceptions) the header still compiles: the try_
 * forms work as described, and where a dsh::error would be thrown the
 * program prints it to stderr and aborts.
 */

#ifndef DSH_SESSION_HPP
#define DSH_SESSION_HPP

#include "dsh_session.h"

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <iosfwd>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>

#if defined(__cpp_exceptions) || defined(__EXCEPTIONS) || defined(_CPPUNWIND)
#define DSH_CPP_EXCEPTIONS 1
#else
#define DSH_CPP_EXCEPTIONS 0
#endif

namespace dsh {

class error;
class store;
class session;

// --- library information --------------------------------------------------------------

/** The crate version of the loaded library, e.g. "0.1.0" (dsh_version). */
inline const char *version() noexcept { return dsh_version(); }

/** The ABI version of the loaded library (dsh_abi_version). */
inline std::uint32_t abi_version() noexcept { return dsh_abi_version(); }

/** Whether the loaded library has the ABI this header describes (DSH_ABI_VERSION). */
inline bool abi_compatible() noexcept { return dsh_abi_version() == DSH_ABI_VERSION; }

/** The name of a status code, e.g. "DSH_E_REJECTED" (dsh_status_name). */
inline const char *status_name(dsh_status status) noexcept { return dsh_status_name(status); }

// --- buffer --------------------------------------------------------------------------------

/**
 * Owns a dsh_buf filled by the library and frees it with dsh_buf_free.
 * Move-only. An empty buffer reads as "" (data() and c_str() are never NULL).
 */
class buffer {
 public:
  buffer() noexcept = default;
  /** Adopt a dsh_buf the library filled (it is freed by this object). */
  explicit buffer(dsh_buf raw) noexcept : buf_(raw) {}
  buffer(buffer &&other) noexcept : buf_(other.buf_) { other.buf_ = dsh_buf{nullptr, 0, 0}; }
  buffer &operator=(buffer &&other) noexcept {
    if (this != &other) {
      reset();
      buf_ = other.buf_;
      other.buf_ = dsh_buf{nullptr, 0, 0};
    }
    return *this;
  }
  buffer(const buffer &) = delete;
  buffer &operator=(const buffer &) = delete;
  ~buffer() { reset(); }

  /** The text (NUL-terminated; "" when empty). */
  const char *data() const noexcept { return buf_.ptr != nullptr ? buf_.ptr : ""; }
  /** The text (NUL-terminated; "" when empty). */
  const char *c_str() const noexcept { return data(); }
  /** Its length in bytes, without the NUL. */
  std::size_t size() const noexcept { return buf_.ptr != nullptr ? buf_.len : 0; }
  bool empty() const noexcept { return size() == 0; }
  std::string_view view() const noexcept { return std::string_view(data(), size()); }
  operator std::string_view() const noexcept { return view(); }
  /** A copy of the text. */
  std::string str() const { return std::string(data(), size()); }

  /** Free the text now (dsh_buf_free); the buffer is then empty. */
  void reset() noexcept { dsh_buf_free(&buf_); }
  /** Free the text and hand out the dsh_buf for a C call to fill: `dsh_session_info(h, b.out())`. */
  dsh_buf *out() noexcept {
    reset();
    return &buf_;
  }
  /** Give up ownership: the caller frees the returned dsh_buf with dsh_buf_free. */
  dsh_buf release() noexcept {
    dsh_buf raw = buf_;
    buf_ = dsh_buf{nullptr, 0, 0};
    return raw;
  }

  template <class Traits>
  friend std::basic_ostream<char, Traits> &operator<<(std::basic_ostream<char, Traits> &os, const buffer &b) {
    return os << b.view();
  }

 private:
  dsh_buf buf_{nullptr, 0, 0};
};

// --- text arguments -----------------------------------------------------------------------------

/**
 * A text argument for the library, which wants NUL-terminated UTF-8:
 * `const char *` (used as is; nullptr means NULL, for the optional
 * arguments), std::string and dsh::buffer (their own NUL), or
 * std::string_view (copied once, to add the NUL). Functions take it by
 * const reference; it lives until the end of the caller's full-expression.
 */
class text_arg {
 public:
  text_arg(std::nullptr_t) noexcept {}
  text_arg(const char *text) noexcept : ptr_(text) {}
  text_arg(const std::string &text) noexcept : ptr_(text.c_str()) {}
  text_arg(const buffer &text) noexcept : ptr_(text.c_str()) {}
  text_arg(std::string_view text) : copy_(text), ptr_(copy_.c_str()) {}
  text_arg(const text_arg &) = delete;
  text_arg &operator=(const text_arg &) = delete;

  /** The NUL-terminated text, or nullptr. */
  const char *get() const noexcept { return ptr_; }

 private:
  std::string copy_;
  const char *ptr_ = nullptr;
};

// --- JSON text ------------------------------------------------------------------------------

/*
 * Append `text` to `out` as a JSON string literal, quotes included, escaped
 * exactly as JavaScript's JSON.stringify does (the canonical form the
 * library stores, so the text comes back byte for byte): `\"`, `\\`, `\b`,
 * `\f`, `\n`, `\r`, `\t`, other control characters as `\u00xx`; valid UTF-8
 * is copied as is. A byte that is not part of valid UTF-8 becomes U+FFFD
 * (`\ufffd`), so the output is always valid UTF-8.
 */
inline void append_json_string(std::string &out, std::string_view text) {
  static const char hex[] = "0123456789abcdef";
  const auto *s = reinterpret_cast<const unsigned char *>(text.data());
  const std::size_t n = text.size();
  out.reserve(out.size() + n + 2);
  out.push_back('"');
  std::size_t i = 0;
  while (i < n) {
    const unsigned char c = s[i];
    if (c < 0x80) {
      switch (c) {
        case '"': out.append("\\\""); break;
        case '\\': out.append("\\\\"); break;
        case '\b': out.append("\\b"); break;
        case '\f': out.append("\\f"); break;
        case '\n': out.append("\\n"); break;
        case '\r': out.append("\\r"); break;
        case '\t': out.append("\\t"); break;
        default:
          if (c < 0x20) {
            out.append("\\u00");
            out.push_back(hex[c >> 4]);
            out.push_back(hex[c & 0xF]);
          } else {
            out.push_back(static_cast<char>(c));
          }
      }
      ++i;
      continue;
    }
    // The length of a well-formed UTF-8 sequence at i (RFC 3629), or 0.
    auto cont = [&](std::size_t k, unsigned char lo, unsigned char hi) {
      return i + k < n && s[i + k] >= lo && s[i + k] <= hi;
    };
    std::size_t len = 0;
    if (c >= 0xC2 && c <= 0xDF) {
      len = cont(1, 0x80, 0xBF) ? 2 : 0;
    } else if (c >= 0xE0 && c <= 0xEF) {
      const unsigned char lo = c == 0xE0 ? 0xA0 : 0x80, hi = c == 0xED ? 0x9F : 0xBF;
      len = cont(1, lo, hi) && cont(2, 0x80, 0xBF) ? 3 : 0;
    } else if (c >= 0xF0 && c <= 0xF4) {
      const unsigned char lo = c == 0xF0 ? 0x90 : 0x80, hi = c == 0xF4 ? 0x8F : 0xBF;
      len = cont(1, lo, hi) && cont(2, 0x80, 0xBF) && cont(3, 0x80, 0xBF) ? 4 : 0;
    }
    if (len == 0) {
      out.append("\\ufffd");
      ++i;
    } else {
      out.append(text.data() + i, len);
      i += len;
    }
  }
  out.push_back('"');
}

/** `text` as a JSON string literal, quotes included (see append_json_string). */
inline std::string json_string(std::string_view text) {
  std::string out;
  append_json_string(out, text);
  return out;
}

namespace detail {
template <class T>
using if_integer = std::enable_if_t<std::is_integral_v<T> && !std::is_same_v<T, bool>, int>;

// The members or items written so far, without the closing bracket.
class json_builder {
 protected:
  explicit json_builder(char open) : text_(1, open) {}
  void next() {
    if (text_.size() > 1) text_.push_back(',');
  }
  void key(std::string_view k) {
    next();
    append_json_string(text_, k);
    text_.push_back(':');
  }
  template <class T>
  void integer(T v) {
    text_.append(std::to_string(v));
  }
  std::string close(char bracket) const {
    std::string out;
    out.reserve(text_.size() + 1);
    out.append(text_);
    out.push_back(bracket);
    return out;
  }
  std::string text_;
};
}  // namespace detail

/**
 * A small builder of a JSON object, members in the order added:
 *
 *   dsh::json_object().string("backend", "sqlite").string("path", path)
 *       .number("batchWindowMs", 0).raw("eventTypes", R"(["myapp/note"])").str()
 *
 * Keys and string() values are escaped by append_json_string; raw() inserts
 * JSON text as is (a nested json_object / json_array, or any JSON value).
 */
class json_object : private detail::json_builder {
 public:
  json_object() : json_builder('{') {}
  json_object &string(std::string_view key, std::string_view value) {
    json_builder::key(key);
    append_json_string(text_, value);
    return *this;
  }
  template <class T, detail::if_integer<T> = 0>
  json_object &number(std::string_view key, T value) {
    json_builder::key(key);
    integer(value);
    return *this;
  }
  json_object &boolean(std::string_view key, bool value) { return raw(key, value ? "true" : "false"); }
  json_object &null(std::string_view key) { return raw(key, "null"); }
  json_object &raw(std::string_view key, std::string_view json) {
    json_builder::key(key);
    text_.append(json);
    return *this;
  }
  /** The object's text, `{...}`. */
  std::string str() const { return close('}'); }
};

/** A small builder of a JSON array, items in the order added (see json_object). */
class json_array : private detail::json_builder {
 public:
  json_array() : json_builder('[') {}
  json_array &string(std::string_view value) {
    next();
    append_json_string(text_, value);
    return *this;
  }
  template <class T, detail::if_integer<T> = 0>
  json_array &number(T value) {
    next();
    integer(value);
    return *this;
  }
  json_array &boolean(bool value) { return raw(value ? "true" : "false"); }
  json_array &null() { return raw("null"); }
  json_array &raw(std::string_view json) {
    next();
    text_.append(json);
    return *this;
  }
  /** The array's text, `[...]`. */
  std::string str() const { return close(']'); }
};

// --- errors -----------------------------------------------------------------------------------

namespace detail {

// The fields of an error object.
struct error_data {
  std::string json, rule, message, reference_code, cause, what;
  std::optional<std::size_t> index;
};

// A reader of just enough JSON for the library's error object: the string
// and integer members of one top-level object; other values are skipped.
class json_reader {
 public:
  explicit json_reader(std::string_view text) noexcept : s_(text) {}

  // Calls on_member(key, reader) for each member; the callback consumes the
  // value (string(), integer() or skip()). False when the text is not an object.
  template <class F>
  bool object(F &&on_member) {
    ws();
    if (!eat('{')) return false;
    ws();
    if (eat('}')) return true;
    for (;;) {
      std::string key;
      ws();
      if (!string(key)) return false;
      ws();
      if (!eat(':')) return false;
      ws();
      if (!on_member(key, *this)) return false;
      ws();
      if (eat('}')) return true;
      if (!eat(',')) return false;
    }
  }

  bool string(std::string &out) {
    if (!eat('"')) return false;
    while (i_ < s_.size()) {
      const char c = s_[i_++];
      if (c == '"') return true;
      if (c != '\\') {
        out.push_back(c);
        continue;
      }
      if (i_ >= s_.size()) return false;
      switch (s_[i_++]) {
        case '"': out.push_back('"'); break;
        case '\\': out.push_back('\\'); break;
        case '/': out.push_back('/'); break;
        case 'b': out.push_back('\b'); break;
        case 'f': out.push_back('\f'); break;
        case 'n': out.push_back('\n'); break;
        case 'r': out.push_back('\r'); break;
        case 't': out.push_back('\t'); break;
        case 'u': {
          unsigned long cp = 0;
          if (!hex4(cp)) return false;
          if (cp >= 0xD800 && cp <= 0xDBFF && s_.substr(i_, 2) == "\\u") {
            std::size_t save = i_;
            unsigned long lo = 0;
            i_ += 2;
            if (hex4(lo) && lo >= 0xDC00 && lo <= 0xDFFF) {
              cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            } else {
              i_ = save;
            }
          }
          if (cp >= 0xD800 && cp <= 0xDFFF) cp = 0xFFFD;  // a lone surrogate
          utf8(out, cp);
          break;
        }
        default: return false;
      }
    }
    return false;
  }

  // A non-negative integer (a fraction or exponent is skipped).
  bool integer(std::optional<std::size_t> &out) {
    const std::size_t start = i_;
    std::size_t v = 0;
    bool overflow = false;
    while (i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '9') {
      const std::size_t d = static_cast<std::size_t>(s_[i_++] - '0');
      if (v > (std::numeric_limits<std::size_t>::max() - d) / 10) overflow = true;
      v = v * 10 + d;
    }
    if (i_ == start) return skip();
    const std::size_t end = i_;
    while (i_ < s_.size() && (s_[i_] == '.' || s_[i_] == 'e' || s_[i_] == 'E' || s_[i_] == '+' ||
                              s_[i_] == '-' || (s_[i_] >= '0' && s_[i_] <= '9'))) {
      ++i_;
    }
    if (!overflow && end == i_) out = v;
    return true;
  }

  bool skip() {
    ws();
    if (i_ >= s_.size()) return false;
    const char c = s_[i_];
    if (c == '"') {
      std::string ignored;
      return string(ignored);
    }
    if (c == '{') {
      return object([](const std::string &, json_reader &r) { return r.skip(); });
    }
    if (c == '[') {
      ++i_;
      ws();
      if (eat(']')) return true;
      for (;;) {
        if (!skip()) return false;
        ws();
        if (eat(']')) return true;
        if (!eat(',')) return false;
      }
    }
    const std::size_t start = i_;
    while (i_ < s_.size() && s_[i_] != ',' && s_[i_] != '}' && s_[i_] != ']' && s_[i_] != ' ' &&
           s_[i_] != '\n' && s_[i_] != '\r' && s_[i_] != '\t') {
      ++i_;
    }
    return i_ > start;
  }

 private:
  void ws() noexcept {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\n' || s_[i_] == '\r' || s_[i_] == '\t')) ++i_;
  }
  bool eat(char c) noexcept {
    if (i_ < s_.size() && s_[i_] == c) {
      ++i_;
      return true;
    }
    return false;
  }
  bool hex4(unsigned long &out) noexcept {
    if (i_ + 4 > s_.size()) return false;
    for (int k = 0; k < 4; ++k) {
      const char c = s_[i_++];
      unsigned long d;
      if (c >= '0' && c <= '9') {
        d = static_cast<unsigned long>(c - '0');
      } else if (c >= 'a' && c <= 'f') {
        d = static_cast<unsigned long>(c - 'a' + 10);
      } else if (c >= 'A' && c <= 'F') {
        d = static_cast<unsigned long>(c - 'A' + 10);
      } else {
        return false;
      }
      out = out * 16 + d;
    }
    return true;
  }
  static void utf8(std::string &out, unsigned long cp) {
    if (cp < 0x80) {
      out.push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
      out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
      out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else if (cp < 0x10000) {
      out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
      out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else {
      out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
      out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
  }

  std::string_view s_;
  std::size_t i_ = 0;
};

inline std::shared_ptr<const error_data> parse_error(dsh_status status, std::string_view json) {
  auto d = std::make_shared<error_data>();
  d->json.assign(json.data(), json.size());
  std::string rule, message, reference_code, cause;
  std::optional<std::size_t> index;
  json_reader reader(json);
  const bool parsed = reader.object([&](const std::string &key, json_reader &r) {
    if (key == "rule") return r.string(rule);
    if (key == "message") return r.string(message);
    if (key == "referenceCode") return r.string(reference_code);
    if (key == "cause") return r.string(cause);
    if (key == "index") return r.integer(index);
    return r.skip();
  });
  if (parsed) {
    d->rule = std::move(rule);
    d->message = std::move(message);
    d->reference_code = std::move(reference_code);
    d->cause = std::move(cause);
    d->index = index;
  } else {
    d->message = d->json;  // not an error object: keep the text as the message
  }
  d->what = dsh_status_name(status);
  if (!d->rule.empty()) d->what.append(" ").append(d->rule);
  if (!d->message.empty()) d->what.append(": ").append(d->message);
  if (d->index) d->what.append(" (index ").append(std::to_string(*d->index)).append(")");
  return d;
}

}  // namespace detail

/**
 * A failed call: the status it returned and the library's error object
 * {"status","code","rule","message","index"?,"referenceCode"?,"cause"?}.
 * what() is "STATUS rule: message (index i)". Copying never throws (the
 * fields are shared).
 */
class error : public std::runtime_error {
 public:
  /** An error from a status and the error object the call wrote to its dsh_buf. */
  error(dsh_status status, std::string_view error_json) : error(status, detail::parse_error(status, error_json)) {}

  /** The status code (DSH_E_*). */
  dsh_status status() const noexcept { return status_; }
  /** Its name, e.g. "DSH_E_REJECTED". */
  const char *status_name() const noexcept { return dsh_status_name(status_); }
  /** The rule id of docs/errors.md, e.g. "admit.unknown-type" ("" if the object had none). */
  const std::string &rule() const noexcept { return data_->rule; }
  /** The human-readable explanation. */
  const std::string &message() const noexcept { return data_->message; }
  /** The failing item of a batch or seed, when the error names one. */
  std::optional<std::size_t> index() const noexcept { return data_->index; }
  /** The reference engine's code where the library gives one (fork errors), else "". */
  const std::string &reference_code() const noexcept { return data_->reference_code; }
  /** The inner rule id a wrapping rule reports (load.validation: the rule the stored data broke), else "". */
  const std::string &cause() const noexcept { return data_->cause; }
  /** The error object exactly as the library wrote it. */
  const std::string &json() const noexcept { return data_->json; }

 private:
  error(dsh_status status, std::shared_ptr<const detail::error_data> data)
      : std::runtime_error(data->what), data_(std::move(data)), status_(status) {}

  std::shared_ptr<const detail::error_data> data_;
  dsh_status status_;
};

namespace detail {

[[noreturn]] inline void raise(const dsh::error &e) {
#if DSH_CPP_EXCEPTIONS
  throw e;
#else
  std::fprintf(stderr, "dsh::error (exceptions disabled): %s\n", e.what());
  std::abort();
#endif
}

// What a closed, moved-from or default-constructed object answers.
inline dsh::error closed_error(const char *what) {
  std::string message("dsh::");
  message.append(what).append(" is closed, moved from or default-constructed");
  return dsh::error(DSH_E_CLOSED, json_object()
                                      .string("status", "DSH_E_CLOSED")
                                      .number("code", DSH_E_CLOSED)
                                      .string("rule", "handle.closed")
                                      .string("message", message)
                                      .str());
}

}  // namespace detail

// --- result ----------------------------------------------------------------------------------

/**
 * The outcome of a try_ call: a T, or the dsh::error of the failed call.
 * `if (r)` / ok() tests for success; *r and r-> reach the value (only on
 * success); value() returns it or throws the error; error() is the error
 * (only on failure); status() is DSH_OK or the error's status.
 */
template <class T>
class result {
 public:
  using value_type = T;

  result(T value) : v_(std::in_place_index<0>, std::move(value)) {}
  result(dsh::error e) : v_(std::in_place_index<1>, std::move(e)) {}

  bool ok() const noexcept { return v_.index() == 0; }
  explicit operator bool() const noexcept { return ok(); }
  dsh_status status() const noexcept {
    const dsh::error *e = std::get_if<1>(&v_);
    return e != nullptr ? e->status() : DSH_OK;
  }

  T &value() & {
    if (!ok()) detail::raise(*std::get_if<1>(&v_));
    return *std::get_if<0>(&v_);
  }
  const T &value() const & {
    if (!ok()) detail::raise(*std::get_if<1>(&v_));
    return *std::get_if<0>(&v_);
  }
  /** The value, moved out (or the error thrown). */
  T value() && {
    if (!ok()) detail::raise(*std::get_if<1>(&v_));
    return std::move(*std::get_if<0>(&v_));
  }
  /** The value, or `fallback` on failure. */
  template <class U>
  T value_or(U &&fallback) && {
    return ok() ? std::move(*std::get_if<0>(&v_)) : static_cast<T>(std::forward<U>(fallback));
  }

  /** The value; only on success. */
  T &operator*() & noexcept { return *std::get_if<0>(&v_); }
  const T &operator*() const & noexcept { return *std::get_if<0>(&v_); }
  T *operator->() noexcept { return std::get_if<0>(&v_); }
  const T *operator->() const noexcept { return std::get_if<0>(&v_); }

  /** The error; only on failure (on success the program terminates). */
  const dsh::error &error() const & noexcept { return std::get<1>(v_); }

 private:
  std::variant<T, dsh::error> v_;
};

/** The outcome of a try_ call without a value (see result<T>). */
template <>
class result<void> {
 public:
  using value_type = void;

  result() noexcept = default;
  result(dsh::error e) : e_(std::move(e)) {}

  bool ok() const noexcept { return !e_.has_value(); }
  explicit operator bool() const noexcept { return ok(); }
  dsh_status status() const noexcept { return ok() ? DSH_OK : e_->status(); }
  /** Nothing, or the error thrown. */
  void value() const {
    if (!ok()) detail::raise(*e_);
  }
  /** The error; only on failure (on success the program terminates). */
  const dsh::error &error() const & noexcept { return e_.value(); }

 private:
  std::optional<dsh::error> e_;
};

namespace detail {

// Run one C call with a fresh out buffer.
template <class F>
result<buffer> call(F &&f) {
  buffer out;
  const dsh_status status = std::forward<F>(f)(out.out());
  if (status == DSH_OK) return result<buffer>(std::move(out));
  return result<buffer>(dsh::error(status, out.view()));
}

// The same for a call whose result ({"ok":true}) says nothing.
template <class F>
result<void> call_void(F &&f) {
  buffer out;
  const dsh_status status = std::forward<F>(f)(out.out());
  if (status == DSH_OK) return result<void>();
  return result<void>(dsh::error(status, out.view()));
}

}  // namespace detail

// --- observer ---------------------------------------------------------------------------------

/** A store lifecycle notice; its strings are valid only during the observer's call. */
struct notice {
  /** The session the notice is about. */
  std::string_view session_id;
  /** "created", "event", "flush" or "disposed" (a newer library may add kinds). */
  std::string_view kind;
  /** The JSON payload: the header, the committed event, {"ok":...} or null (dsh_observer_fn). */
  std::string_view payload;
};

/** The function store::set_observer installs. */
using observer = std::function<void(const notice &)>;

namespace detail {

// The user_data of a store's C callback, shared by the store object and
// every session made from it: the library may call it until all of them
// are closed.
struct observer_slot {
  std::mutex mutex;
  std::shared_ptr<const observer> fn;

  std::shared_ptr<const observer> get() {
    std::lock_guard<std::mutex> lock(mutex);
    return fn;
  }
  std::shared_ptr<const observer> exchange(std::shared_ptr<const observer> next) {
    std::lock_guard<std::mutex> lock(mutex);
    fn.swap(next);
    return next;
  }
};

// The dsh_observer_fn of every store. Nothing may unwind into the library.
inline void observer_trampoline(void *user_data, const char *session_id, const char *kind,
                                const char *payload_json) noexcept {
#if DSH_CPP_EXCEPTIONS
  try {
#endif
    const std::shared_ptr<const observer> fn = static_cast<observer_slot *>(user_data)->get();
    if (fn && *fn) {
      (*fn)(notice{session_id != nullptr ? session_id : "", kind != nullptr ? kind : "",
                   payload_json != nullptr ? payload_json : "null"});
    }
#if DSH_CPP_EXCEPTIONS
  } catch (...) {
    // Dropped: the change the notice reports is committed either way.
  }
#endif
}

}  // namespace detail

// --- store -------------------------------------------------------------------------------------

/** An open store (dsh_store *): move-only, closed by its destructor. */
class store {
 public:
  /** An empty object: every call answers DSH_E_CLOSED. */
  store() noexcept = default;
  store(store &&other) noexcept
      : handle_(std::exchange(other.handle_, nullptr)), slot_(std::move(other.slot_)), opened_(std::move(other.opened_)) {}
  /** Closes the handle held (dropping its status), then takes other's. */
  store &operator=(store &&other) noexcept {
    if (this != &other) {
      drop();
      handle_ = std::exchange(other.handle_, nullptr);
      slot_ = std::move(other.slot_);
      opened_ = std::move(other.opened_);
    }
    return *this;
  }
  store(const store &) = delete;
  store &operator=(const store &) = delete;
  /** Closes the handle (dsh_store_close: drains pending writes); the status is dropped. */
  ~store() { drop(); }

  /** dsh_store_open: `config` as in docs/c-api.md (nullptr: a memory store). */
  static store open(const text_arg &config = nullptr) { return try_open(config).value(); }
  [[nodiscard]] static result<store> try_open(const text_arg &config = nullptr) {
    auto slot = std::make_shared<detail::observer_slot>();
    dsh_store *handle = nullptr;
    buffer out;
    const dsh_status status = dsh_store_open(config.get(), &handle, out.out());
    if (status != DSH_OK) return result<store>(dsh::error(status, out.view()));
    return result<store>(store(handle, std::move(slot), std::move(out)));
  }

  bool is_open() const noexcept { return handle_ != nullptr; }
  explicit operator bool() const noexcept { return is_open(); }
  /** The C handle (owned by this object), or nullptr. */
  dsh_store *native_handle() const noexcept { return handle_; }
  /** What dsh_store_open returned: {"backend":...}. */
  const buffer &open_result() const noexcept { return opened_; }

  /** dsh_store_list: [{"id","createdAt","revision","length",...}]. */
  buffer list() const { return try_list().value(); }
  [[nodiscard]] result<buffer> try_list() const {
    return with_handle([&](dsh_buf *out) { return dsh_store_list(handle_, out); });
  }

  /** dsh_store_inspect: a stored session read without changing anything. */
  buffer inspect(const text_arg &session_id) const { return try_inspect(session_id).value(); }
  [[nodiscard]] result<buffer> try_inspect(const text_arg &session_id) const {
    return with_handle([&](dsh_buf *out) { return dsh_store_inspect(handle_, session_id.get(), out); });
  }

  /** dsh_store_repair: `options` nullptr or {"dryRun": bool, "salvage": bool}. */
  buffer repair(const text_arg &session_id, const text_arg &options = nullptr) {
    return try_repair(session_id, options).value();
  }
  [[nodiscard]] result<buffer> try_repair(const text_arg &session_id, const text_arg &options = nullptr) {
    return with_handle([&](dsh_buf *out) { return dsh_store_repair(handle_, session_id.get(), options.get(), out); });
  }

  /** dsh_store_delete: remove a stored session that is not open. */
  void remove(const text_arg &session_id) { try_remove(session_id).value(); }
  [[nodiscard]] result<void> try_remove(const text_arg &session_id) {
    if (handle_ == nullptr) return result<void>(detail::closed_error("store"));
    return detail::call_void([&](dsh_buf *out) { return dsh_store_delete(handle_, session_id.get(), out); });
  }

  /**
   * dsh_store_set_observer: install `fn` (an empty function removes the
   * observer). It hears the notices of every session of the store, on the
   * thread whose call caused them, inside that call (a session's close and
   * destructor send "disposed"); it may read sessions, but an append to the
   * session it is told about fails with DSH_E_CONFLICT (append.reentrant).
   * A replaced function may still be called once by a notice being
   * delivered on another thread. Exceptions it throws are dropped.
   */
  void set_observer(observer fn) { try_set_observer(std::move(fn)).value(); }
  [[nodiscard]] result<void> try_set_observer(observer fn) {
    if (handle_ == nullptr) return result<void>(detail::closed_error("store"));
    if (!fn) {
      result<void> r = detail::call_void([&](dsh_buf *out) { return dsh_store_set_observer(handle_, nullptr, nullptr, out); });
      if (r) slot_->exchange(nullptr);
      return r;
    }
    auto previous = slot_->exchange(std::make_shared<const observer>(std::move(fn)));
    result<void> r = detail::call_void(
        [&](dsh_buf *out) { return dsh_store_set_observer(handle_, &detail::observer_trampoline, slot_.get(), out); });
    if (!r) slot_->exchange(std::move(previous));
    return r;
  }

  /**
   * dsh_store_close: drain every pending write, then release the handle
   * (also when the drain fails; the result reports it). Never throws a
   * dsh::error; a second close, or a close of an empty object, gives
   * DSH_E_CLOSED. Sessions made from the store stay usable.
   */
  result<void> close() {
    if (handle_ == nullptr) return result<void>(detail::closed_error("store"));
    dsh_store *handle = std::exchange(handle_, nullptr);
    result<void> r = detail::call_void([&](dsh_buf *out) { return dsh_store_close(handle, out); });
    slot_.reset();
    opened_.reset();
    return r;
  }

 private:
  friend class session;

  store(dsh_store *handle, std::shared_ptr<detail::observer_slot> slot, buffer opened) noexcept
      : handle_(handle), slot_(std::move(slot)), opened_(std::move(opened)) {}

  template <class F>
  result<buffer> with_handle(F &&f) const {
    if (handle_ == nullptr) return result<buffer>(detail::closed_error("store"));
    return detail::call(std::forward<F>(f));
  }

  void drop() noexcept {
    if (handle_ != nullptr) dsh_store_close(std::exchange(handle_, nullptr), nullptr);
    slot_.reset();
    opened_.reset();
  }

  dsh_store *handle_ = nullptr;
  std::shared_ptr<detail::observer_slot> slot_;
  buffer opened_;
};

// --- session ----------------------------------------------------------------------------------

/** An open session (dsh_session *): move-only, closed by its destructor. */
class session {
 public:
  /** An empty object: every call answers DSH_E_CLOSED. */
  session() noexcept = default;
  session(session &&other) noexcept
      : handle_(std::exchange(other.handle_, nullptr)), slot_(std::move(other.slot_)), opened_(std::move(other.opened_)) {}
  /** Closes the handle held (dropping its status), then takes other's. */
  session &operator=(session &&other) noexcept {
    if (this != &other) {
      drop();
      handle_ = std::exchange(other.handle_, nullptr);
      slot_ = std::move(other.slot_);
      opened_ = std::move(other.opened_);
    }
    return *this;
  }
  session(const session &) = delete;
  session &operator=(const session &) = delete;
  /** Closes the handle (dsh_session_close: drains pending writes); the status is dropped. */
  ~session() { drop(); }

  /** dsh_session_create: `options` nullptr or {"id","seed","legacy",header fields}. */
  static session create(store &st, const text_arg &options = nullptr) { return try_create(st, options).value(); }
  [[nodiscard]] static result<session> try_create(store &st, const text_arg &options = nullptr) {
    return make(st.handle_, st.slot_, "store", [&](dsh_session **s, dsh_buf *out) {
      return dsh_session_create(st.handle_, options.get(), s, out);
    });
  }

  /** dsh_session_open: load, repair and open a stored session. */
  static session open(store &st, const text_arg &session_id) { return try_open(st, session_id).value(); }
  [[nodiscard]] static result<session> try_open(store &st, const text_arg &session_id) {
    return make(st.handle_, st.slot_, "store", [&](dsh_session **s, dsh_buf *out) {
      return dsh_session_open(st.handle_, session_id.get(), s, out);
    });
  }

  /** dsh_session_open_windowed: `options` nullptr or {"window": n}. */
  static session open_windowed(store &st, const text_arg &session_id, const text_arg &options = nullptr) {
    return try_open_windowed(st, session_id, options).value();
  }
  [[nodiscard]] static result<session> try_open_windowed(store &st, const text_arg &session_id,
                                                         const text_arg &options = nullptr) {
    return make(st.handle_, st.slot_, "store", [&](dsh_session **s, dsh_buf *out) {
      return dsh_session_open_windowed(st.handle_, session_id.get(), options.get(), s, out);
    });
  }

  bool is_open() const noexcept { return handle_ != nullptr; }
  explicit operator bool() const noexcept { return is_open(); }
  /** The C handle (owned by this object), or nullptr. */
  dsh_session *native_handle() const noexcept { return handle_; }
  /**
   * What the call that made this handle returned: the session header
   * (create, fork) or {"header","repaired","cut"} (open, open_windowed).
   */
  const buffer &open_result() const noexcept { return opened_; }

  /** dsh_session_fork: `boundary` -1 = the source's last event; `options` nullptr or {"id","boundary"}. */
  session fork(std::int64_t boundary = -1, const text_arg &options = nullptr) const {
    return try_fork(boundary, options).value();
  }
  [[nodiscard]] result<session> try_fork(std::int64_t boundary = -1, const text_arg &options = nullptr) const {
    return make(handle_, slot_, "session", [&](dsh_session **s, dsh_buf *out) {
      return dsh_session_fork(handle_, boundary, options.get(), s, out);
    });
  }

  /** dsh_session_append: `intent` nullptr (log-only) or {"surfaceOp":...,"sourceEventSeqs":[...]}; the committed event. */
  buffer append(const text_arg &type, const text_arg &data, const text_arg &intent = nullptr) {
    return try_append(type, data, intent).value();
  }
  [[nodiscard]] result<buffer> try_append(const text_arg &type, const text_arg &data, const text_arg &intent = nullptr) {
    return with_handle(
        [&](dsh_buf *out) { return dsh_session_append(handle_, type.get(), data.get(), intent.get(), out); });
  }

  /** dsh_session_append_batch: [{"type","data","intent"?},...] all or nothing; the committed events. */
  buffer append_batch(const text_arg &batch) { return try_append_batch(batch).value(); }
  [[nodiscard]] result<buffer> try_append_batch(const text_arg &batch) {
    return with_handle([&](dsh_buf *out) { return dsh_session_append_batch(handle_, batch.get(), out); });
  }

  /** dsh_session_validate: the checks of append, nothing committed; the event append would commit. */
  buffer validate(const text_arg &type, const text_arg &data, const text_arg &intent = nullptr) const {
    return try_validate(type, data, intent).value();
  }
  [[nodiscard]] result<buffer> try_validate(const text_arg &type, const text_arg &data,
                                            const text_arg &intent = nullptr) const {
    return with_handle(
        [&](dsh_buf *out) { return dsh_session_validate(handle_, type.get(), data.get(), intent.get(), out); });
  }

  /** dsh_session_flush: returns once everything appended so far is durable. */
  void flush() { try_flush().value(); }
  [[nodiscard]] result<void> try_flush() {
    if (handle_ == nullptr) return result<void>(detail::closed_error("session"));
    return detail::call_void([&](dsh_buf *out) { return dsh_session_flush(handle_, out); });
  }

  /** dsh_session_info: {"id","header","length","firstLiveSeq","replaceGeneration","openTurn",...}. */
  buffer info() const { return try_info().value(); }
  [[nodiscard]] result<buffer> try_info() const {
    return with_handle([&](dsh_buf *out) { return dsh_session_info(handle_, out); });
  }

  /** dsh_session_events: the events with from_seq <= seq < to_seq (to_seq clamped; the default is all). */
  buffer events(std::uint64_t from_seq = 0, std::uint64_t to_seq = UINT64_MAX) const {
    return try_events(from_seq, to_seq).value();
  }
  [[nodiscard]] result<buffer> try_events(std::uint64_t from_seq = 0, std::uint64_t to_seq = UINT64_MAX) const {
    return with_handle([&](dsh_buf *out) { return dsh_session_events(handle_, from_seq, to_seq, out); });
  }

  /** dsh_session_surface: {"nodes":[seq,...],"replaceGeneration":n}. */
  buffer surface() const { return try_surface().value(); }
  [[nodiscard]] result<buffer> try_surface() const {
    return with_handle([&](dsh_buf *out) { return dsh_session_surface(handle_, out); });
  }

  /** dsh_session_derive: the derived message list. */
  buffer derive() const { return try_derive().value(); }
  [[nodiscard]] result<buffer> try_derive() const {
    return with_handle([&](dsh_buf *out) { return dsh_session_derive(handle_, out); });
  }

  /** dsh_session_derive_since: {"generation","count","reset","messages"}; start with 0, 0. */
  buffer derive_since(std::uint64_t generation, std::uint64_t count) const {
    return try_derive_since(generation, count).value();
  }
  [[nodiscard]] result<buffer> try_derive_since(std::uint64_t generation, std::uint64_t count) const {
    return with_handle([&](dsh_buf *out) { return dsh_session_derive_since(handle_, generation, count, out); });
  }

  /** dsh_session_request_header: the folded request header, or null. */
  buffer request_header() const { return try_request_header().value(); }
  [[nodiscard]] result<buffer> try_request_header() const {
    return with_handle([&](dsh_buf *out) { return dsh_session_request_header(handle_, out); });
  }

  /** dsh_session_request_context: the data of the latest request/context event, or null. */
  buffer request_context() const { return try_request_context().value(); }
  [[nodiscard]] result<buffer> try_request_context() const {
    return with_handle([&](dsh_buf *out) { return dsh_session_request_context(handle_, out); });
  }

  /**
   * dsh_session_close: drain this session's pending writes, then release
   * the handle (also when the drain fails; the result reports it). Never
   * throws a dsh::error; a second close, or a close of an empty object,
   * gives DSH_E_CLOSED.
   */
  result<void> close() {
    if (handle_ == nullptr) return result<void>(detail::closed_error("session"));
    dsh_session *handle = std::exchange(handle_, nullptr);
    result<void> r = detail::call_void([&](dsh_buf *out) { return dsh_session_close(handle, out); });
    slot_.reset();  // after the close: it sends "disposed"
    opened_.reset();
    return r;
  }

 private:
  session(dsh_session *handle, std::shared_ptr<detail::observer_slot> slot, buffer opened) noexcept
      : handle_(handle), slot_(std::move(slot)), opened_(std::move(opened)) {}

  // A call that makes a session handle, from an open store or session.
  template <class Source, class F>
  static result<session> make(Source *source, const std::shared_ptr<detail::observer_slot> &slot, const char *what,
                              F &&f) {
    if (source == nullptr) return result<session>(detail::closed_error(what));
    dsh_session *handle = nullptr;
    buffer out;
    const dsh_status status = std::forward<F>(f)(&handle, out.out());
    if (status != DSH_OK) return result<session>(dsh::error(status, out.view()));
    return result<session>(session(handle, slot, std::move(out)));
  }

  template <class F>
  result<buffer> with_handle(F &&f) const {
    if (handle_ == nullptr) return result<buffer>(detail::closed_error("session"));
    return detail::call(std::forward<F>(f));
  }

  void drop() noexcept {
    if (handle_ != nullptr) dsh_session_close(std::exchange(handle_, nullptr), nullptr);
    slot_.reset();
    opened_.reset();
  }

  dsh_session *handle_ = nullptr;
  std::shared_ptr<detail::observer_slot> slot_;
  buffer opened_;
};

// --- functions without a handle ------------------------------------------------------------------

/** dsh_build_info: {"version","abi","features":[...],"sqlite":"3.x.y"}. */
[[nodiscard]] inline result<buffer> try_build_info() {
  return detail::call([](dsh_buf *out) { return dsh_build_info(out); });
}
inline buffer build_info() { return try_build_info().value(); }

/** dsh_fold_surface: the surface fold of a complete log. */
[[nodiscard]] inline result<buffer> try_fold_surface(const text_arg &events_json) {
  return detail::call([&](dsh_buf *out) { return dsh_fold_surface(events_json.get(), out); });
}
inline buffer fold_surface(const text_arg &events_json) { return try_fold_surface(events_json).value(); }

/** dsh_derive_messages: the derived message list of a complete log. */
[[nodiscard]] inline result<buffer> try_derive_messages(const text_arg &events_json) {
  return detail::call([&](dsh_buf *out) { return dsh_derive_messages(events_json.get(), out); });
}
inline buffer derive_messages(const text_arg &events_json) { return try_derive_messages(events_json).value(); }

/** dsh_repair_events: the closing events crash repair would append to a complete log. */
[[nodiscard]] inline result<buffer> try_repair_events(const text_arg &events_json) {
  return detail::call([&](dsh_buf *out) { return dsh_repair_events(events_json.get(), out); });
}
inline buffer repair_events(const text_arg &events_json) { return try_repair_events(events_json).value(); }

/** dsh_derive_event_message: the message one event contributes, or null. */
[[nodiscard]] inline result<buffer> try_derive_event_message(const text_arg &event_json) {
  return detail::call([&](dsh_buf *out) { return dsh_derive_event_message(event_json.get(), out); });
}
inline buffer derive_event_message(const text_arg &event_json) { return try_derive_event_message(event_json).value(); }

}  // namespace dsh

#endif /* DSH_SESSION_HPP */
