// Locating builder errors on the token at fault (see op_error_location.h). The builder checks a
// statement in a fixed order: attributes (check_attrs, given attributes in the order written, then
// missing required ones), then dtypes and shapes (infer_types), then the result names. Replaying
// those phases with the same inputs tells which one produced the error and, for attributes, which one.
#include "compiler/parser/op_error_location.h"

#include <string_view>

#include "ops/op_schema.h"
#include "layerjit/check.h"

namespace lj::parser {

namespace {

// A value of the given kind that check_attrs accepts, used to satisfy required attributes while
// checking one given attribute on its own.
AttrValue acceptable_value(const AttrSpec& spec) {
  switch (spec.kind) {
    case AttrKind::Int: return int64_t{1};
    case AttrKind::Float: return 1.0;
    case AttrKind::Bool: return false;
    case AttrKind::String: return spec.choices.empty() ? std::string() : std::string(spec.choices.front());
    case AttrKind::DTypeName: {
      if (spec.choices.empty()) return DType::F32;
      auto d = parse_dtype(spec.choices.front());
      LJ_ASSERT(d.has_value(), "attribute '{}' lists '{}' as a dtype choice", spec.name, spec.choices.front());
      return *d;
    }
    case AttrKind::IntList:
    case AttrKind::ShapeList: return AttrList{};
    case AttrKind::AxisOrNone: return Name{"none"};
  }
  LJ_ASSERT(false, "unhandled attribute kind {}", static_cast<int>(spec.kind));
  __builtin_unreachable();
}

// The message check_attrs / infer_types give, or "" when they accept.
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const UserError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

SourceLoc locate_op_error(const UserError& e, GraphBuilder& b, OpKind kind, const std::vector<Value>& operands,
                          const Attrs& attrs, const std::vector<std::string>& result_names, const StmtLocs& locs) {
  const std::string_view msg = e.what();
  if (error_of([&] { check_attrs(kind, attrs); }) == msg) {
    // check_attrs stops at the first bad attribute in the order given: find the first one that fails
    // on its own (with the required attributes filled in), if the error names one at all.
    const OpSchema& schema = op_schema(kind);
    const auto& items = attrs.items();
    for (size_t i = 0; i < items.size() && i < locs.attrs.size(); ++i) {
      Attrs alone;
      alone.set(items[i].first, items[i].second);
      for (const AttrSpec& spec : schema.attrs)
        if (spec.required && spec.name != items[i].first) alone.set(std::string(spec.name), acceptable_value(spec));
      if (error_of([&] { check_attrs(kind, alone); }) == msg) return locs.attrs[i];
    }
    return locs.op;  // a missing required attribute: the op is at fault
  }
  std::vector<TensorType> types;
  for (const Value& v : operands) types.push_back(v.type());
  std::vector<TensorType> results;
  if (error_of([&] { results = infer_types(kind, types, check_attrs(kind, attrs)); }) == msg) return locs.op;
  // The result names: a wrong count is the op's business (the op says how many it makes); else the
  // first name that is already defined, or repeated, is at fault.
  if (results.size() != result_names.size()) return locs.op;
  for (size_t i = 0; i < result_names.size() && i < locs.results.size(); ++i) {
    if (b.lookup(result_names[i])) return locs.results[i];
    for (size_t j = 0; j < i; ++j)
      if (result_names[j] == result_names[i]) return locs.results[i];
  }
  return locs.op;
}

}  // namespace lj::parser
