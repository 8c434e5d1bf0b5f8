// Which token a builder error belongs to. GraphBuilder::op and ops/ report a failure with the one
// location the parser passed (the op name); when the fault lies in one attribute or one result name,
// the parser re-locates the same message there by replaying the builder's own checks, so the
// messages are never duplicated and the caret lands on the culprit.
#pragma once

#include <string>
#include <vector>

#include "layerjit/builder.h"

namespace lj::parser {

/// Where the parts of one statement `%a, %b = op(...) {k = v, ...}` sit in the source.
struct StmtLocs {
  SourceLoc op;                    // the op name: the node's own location
  std::vector<SourceLoc> attrs;    // one per attribute name, in the order given
  std::vector<SourceLoc> results;  // one per result name
};

/// Given that `b.op(kind, operands, attrs, locs.op, result_names)` threw `e`, returns the location
/// of the token at fault: an attribute, a result name, or the op name.
SourceLoc locate_op_error(const UserError& e, GraphBuilder& b, OpKind kind, const std::vector<Value>& operands,
                          const Attrs& attrs, const std::vector<std::string>& result_names, const StmtLocs& locs);

}  // namespace lj::parser
