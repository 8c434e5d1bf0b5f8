// libFuzzer target: parse_module on arbitrary bytes. A UserError is the expected answer to bad input
// (and its diagnostic must format); anything else — a crash, a sanitizer report, an InternalError or
// any other exception escaping — is a bug. Inputs that parse must print and re-parse to the same text.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "layerjit/text.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    const lj::Module m = lj::parse_module(text, "fuzz.lj");
    // A parsed module must round-trip through the printer exactly.
    const std::string printed = lj::print_module(m);
    const std::string reprinted = lj::print_module(lj::parse_module(printed, "fuzz_printed.lj"));
    if (printed != reprinted) std::abort();
  } catch (const lj::UserError& e) {
    // Every parse error carries a location, and formatting it must not fail.
    if (!e.loc().known()) std::abort();
    (void)lj::format_diagnostic(e, text);
  }
  return 0;
}
