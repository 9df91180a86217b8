/*
 * main.cpp: the consumer's C++ program, on the installed dsh_session.hpp
 * (built by this project against dsh::session). Checks that the library it
 * runs with is the one its header describes, then runs a short session on
 * a memory store, with a text that needs escaping.
 */
#include <dsh_session.hpp>

#include <iostream>

int main() {
  if (!dsh::abi_compatible() || std::string_view(dsh::version()) != DSH_VERSION_STRING) {
    std::cerr << "library " << dsh::version() << " (ABI " << dsh::abi_version() << ") does not match the header "
              << DSH_VERSION_STRING << " (ABI " << DSH_ABI_VERSION << ")\n";
    return 1;
  }
  try {
    dsh::store store = dsh::store::open();
    dsh::session s = dsh::session::create(store, R"({"id":"consumer"})");
    const std::string text = "say \"hi\"\n";
    s.append("user/message",
             dsh::json_object()
                 .string("id", "u1")
                 .string("role", "user")
                 .raw("content", dsh::json_array().raw(dsh::json_object().string("type", "text").string("text", text).str()).str())
                 .raw("source", R"({"kind":"user"})")
                 .str(),
             R"({"surfaceOp":"append"})");
    const dsh::buffer derived = s.derive();
    if (derived.view().find(dsh::json_string(text)) == std::string_view::npos) {
      std::cerr << "derive: " << derived << '\n';
      return 1;
    }
    std::cout << "consumer (C++): dsh-session " << dsh::version() << " (ABI " << dsh::abi_version()
              << "): derived " << derived << '\n';
  } catch (const dsh::error &e) {
    std::cerr << e.what() << '\n';
    return 1;
  }
  return 0;
}
