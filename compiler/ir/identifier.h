// The C++ identifier generated kernels spell an IR name with: values (p_<name>, t_<name>, ...),
// symbols (s_<name>) and graphs (lj_<name>_g<N>_<kind>). The text format allows '.' in names, C++
// does not: each character other than a letter or digit becomes '_'. Two names that become one
// identifier would give a kernel two parameters of one name, or two kernels one name, so the graph
// builder and the parser refuse the second one where it is declared (keeping every other name as it is).
#pragma once

#include <cctype>
#include <string>
#include <string_view>

namespace lj {

/// The error for two names that are one identifier: "<what> <first> and <second> are one C++
/// identifier, <ident>, <where>: rename one (...)" (the builder's values and symbols, the parser's graphs).
inline std::string identifier_collision(std::string_view what, std::string_view first, std::string_view second,
                                        std::string_view ident, std::string_view where) {
  std::string m(what);
  m.append(" ").append(first).append(" and ").append(second).append(" are one C++ identifier, ").append(ident);
  m.append(", ").append(where).append(": rename one (names differing only in '.' and '_' collide)");
  return m;
}

inline std::string cpp_identifier(std::string_view name) {
  std::string out(name);
  for (char& c : out)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return out;
}

}  // namespace lj
