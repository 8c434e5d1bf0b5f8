#include "jit/index_inputs.h"

#include <algorithm>

namespace lj::jit {

namespace {

bool is_block_table(const Node& n, ValueId v) {
  return (n.kind == OpKind::KvCacheWrite && n.operands.size() == 4 && n.operands[3] == v) ||
         (n.kind == OpKind::Attention && n.operands.size() == 5 && n.operands[4] == v);
}

// Positions a sequence's cache holds: C of [B, C, H, D], S of attention's [.., S, H, D], pages x page
// of a paged pool [P, page, H, D].
int64_t positions(const Graph& g, const Node& n, const Bindings& b) {
  const size_t cache = n.kind == OpKind::Attention ? 1 : 0;
  const size_t table = n.kind == OpKind::Attention ? 4 : 3;
  const Shape& c = g.value(n.operands[cache]).type.shape;
  if (n.operands.size() > table) return resolve(g.value(n.operands[table]).type.shape[1], b) * resolve(c[1], b);
  return resolve(c[c.size() - 3], b);
}

}  // namespace

HostTensor index_input(const Graph& g, ValueId v, const Bindings& b, uint64_t seed, IndexFill fill) {
  HostTensor t(g.value(v).type.dtype, resolve(g.value(v).type.shape, b));
  for (const Node& n : g.nodes()) {
    if (!is_block_table(n, v)) continue;
    const int64_t pool = resolve(g.value(n.operands[n.kind == OpKind::Attention ? 1 : 0]).type.shape[0], b);
    std::vector<int64_t> pages(static_cast<size_t>(pool));
    for (int64_t i = 0; i < pool; ++i) pages[static_cast<size_t>(i)] = i;
    uint64_t state = seed * 2654435761u + 1;
    for (int64_t i = pool - 1; i > 0; --i) {  // Fisher-Yates with an LCG: deterministic per seed
      state = state * 6364136223846793005u + 1442695040888963407u;
      std::swap(pages[static_cast<size_t>(i)], pages[static_cast<size_t>((state >> 33) % static_cast<uint64_t>(i + 1))]);
    }
    for (size_t i = 0; i < t.data.size(); ++i) t.data[i] = static_cast<double>(pages[i % pages.size()]);
    return t;
  }
  int64_t cap = -1;  // positions [0, cap) fit every cache this input indexes
  for (const Node& n : g.nodes()) {
    if (n.kind == OpKind::KvCacheWrite && n.operands[2] == v) {
      const Shape& nw = g.value(n.operands[1]).type.shape;
      const int64_t tokens = nw.size() == 4 ? resolve(nw[1], b) : 1;
      const int64_t c = positions(g, n, b) - tokens + 1;
      cap = cap < 0 ? c : std::min(cap, c);
    }
    if (n.kind == OpKind::Embedding && n.operands[1] == v) {  // token ids: rows of the table
      const int64_t rows = resolve(g.value(n.operands[0]).type.shape[0], b);
      cap = cap < 0 ? rows : std::min(cap, rows);
    }
    if (n.kind == OpKind::Attention && n.operands.size() > 3 && n.operands[3] == v) {
      const Shape& q = g.value(n.operands[0]).type.shape;
      const int64_t c = positions(g, n, b) - resolve(q[q.size() - 3], b) + 1;
      cap = cap < 0 ? c : std::min(cap, c);
    }
  }
  if (fill == IndexFill::Last) {
    for (size_t i = 0; i < t.data.size(); ++i) t.data[i] = cap > 0 ? static_cast<double>(cap - 1) : static_cast<double>(i);
  } else {
    fill_uniform(t, seed, 0, static_cast<double>(cap > 0 ? cap : 1000));
  }
  return t;
}

}  // namespace lj::jit
