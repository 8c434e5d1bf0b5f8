// SourceWriter implementation.
#include "codegen/source_writer.h"

namespace lj {

void SourceWriter::put(std::string_view text) {
  if (!text.empty()) out_.append(static_cast<size_t>(indent_) * 2, ' ');
  out_.append(text);
  out_ += '\n';
}

void SourceWriter::blank() { out_ += '\n'; }

void SourceWriter::comment(std::string_view text) { put(fmt::format("// {}", text)); }

SourceWriter::Scope SourceWriter::scope(std::string_view head, std::string_view closing) {
  put(head.empty() ? std::string("{") : fmt::format("{} {{", head));
  ++indent_;
  return Scope(*this, closing);
}

SourceWriter::Scope::~Scope() {
  if (!w_) return;
  --w_->indent_;
  w_->put(closing_);
}

std::string SourceWriter::fresh(std::string_view stem) {
  auto it = counters_.find(stem);
  if (it == counters_.end()) it = counters_.emplace(std::string(stem), 0).first;
  return fmt::format("{}{}", stem, it->second++);
}

}  // namespace lj
