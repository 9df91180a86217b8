/*
 * header_twice.cpp: compiled, never run, by the ctest tests header_hpp_cxx17,
 * header_hpp_cxx20 and header_hpp_no_exceptions: dsh_session.hpp must stand
 * on its own (it is the first include), survive being included twice, and
 * compile warning-free with -Wall -Wextra -Werror -pedantic, its templates
 * instantiated (with -fno-exceptions too).
 */
#include "dsh_session.hpp"
#include "dsh_session.hpp"

template class dsh::result<dsh::buffer>;
template class dsh::result<dsh::store>;
template class dsh::result<dsh::session>;
template class dsh::result<std::string>;
template dsh::json_object &dsh::json_object::number<long long>(std::string_view, long long);
template dsh::json_array &dsh::json_array::number<unsigned>(unsigned);

int dsh_hpp_check();

// Calls each kind of member once, so that every lambda and helper is compiled.
int dsh_hpp_check() {
  dsh::store st;
  dsh::session s;
  int n = 0;
  n += !dsh::session::try_create(st) + !dsh::session::try_open(st, "id") + !dsh::session::try_open_windowed(st, "id");
  n += !s.try_fork() + !s.try_append("t", "{}") + !s.try_append_batch("[]") + !s.try_validate("t", "{}");
  n += !s.try_flush() + !s.try_info() + !s.try_events() + !s.try_surface() + !s.try_derive();
  n += !s.try_derive_since(0, 0) + !s.try_request_header() + !s.try_request_context() + !s.close();
  n += !st.try_list() + !st.try_inspect("id") + !st.try_repair("id") + !st.try_remove("id");
  n += !st.try_set_observer([](const dsh::notice &) {}) + !st.close() + !dsh::store::try_open(nullptr);
  n += !dsh::try_fold_surface("[]") + !dsh::try_derive_messages("[]") + !dsh::try_repair_events("[]");
  n += !dsh::try_derive_event_message("{}") + !dsh::try_build_info();
  n += static_cast<int>(dsh::json_string(std::string_view("x")).size()) + dsh::abi_compatible();
  return n;
}
