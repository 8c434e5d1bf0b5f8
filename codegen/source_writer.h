// SourceWriter: the one way generated CUDA C++ is written. Indentation scopes, fresh SSA-style
// temporaries and IR-mapping comments, so every emitted kernel reads like hand-written code.
#pragma once

#include <map>
#include <string>
#include <string_view>

#include <fmt/format.h>

namespace lj {

class SourceWriter {
 public:
  /// Appends one line at the current indentation.
  template <class... Args>
  void line(fmt::format_string<Args...> f, Args&&... args) {
    put(fmt::format(f, std::forward<Args>(args)...));
  }
  void put(std::string_view text);
  void blank();
  /// A `// text` comment line.
  void comment(std::string_view text);

  /// `head {` ... `}` with the body indented: `auto s = w.scope("if (i < n)"); ...`.
  class Scope {
   public:
    Scope(SourceWriter& w, std::string_view closing) : w_(&w), closing_(closing) {}
    Scope(Scope&& o) noexcept : w_(o.w_), closing_(std::move(o.closing_)) { o.w_ = nullptr; }
    Scope(const Scope&) = delete;
    ~Scope();

   private:
    SourceWriter* w_;
    std::string closing_;
  };
  [[nodiscard]] Scope scope(std::string_view head, std::string_view closing = "}");

  /// A fresh name with the given stem: x0, x1, ... (deterministic per writer).
  std::string fresh(std::string_view stem);

  const std::string& str() const { return out_; }

 private:
  std::string out_;
  int indent_ = 0;
  std::map<std::string, int, std::less<>> counters_;
};

}  // namespace lj
