// run_reference: evaluates a whole graph on the CPU with the per-op reference semantics.
//
// The inputs are checked first, each failure a UserError naming the input: every graph input must be
// given (and nothing else), with its dtype, its shape under the bindings, and values its dtype can
// represent exactly (a tensor filled by hand and never rounded would otherwise make the oracle
// disagree with a GPU that must round it on upload). Nodes then run in graph order (the builder only
// appends nodes whose operands exist, so this order is topological); an intermediate is freed right
// after its last use, so peak memory is the live set rather than the whole graph.
#include <cmath>
#include <condition_variable>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "layerjit/error.h"
#include "layerjit/reference.h"
#include "layerjit/check.h"

namespace lj {

namespace {

std::string dims_str(const std::vector<int64_t>& dims) {
  return fmt::format("[{}]", fmt::join(dims, ", "));
}

void check_bindings(const Graph& g, const Bindings& bindings) {
  for (const auto& [symbol, value] : bindings.values)
    LJ_CHECK(value > 0, SourceLoc{}, "run_reference: symbol {} bound to {}: symbol values must be positive", symbol,
             value);
  for (const std::string& s : g.symbols())
    LJ_CHECK(bindings.get(s).has_value(), SourceLoc{}, "run_reference: symbol '{}' of graph @{} has no value: bind it",
             s, g.name());
}

void check_input(const ValueInfo& v, const HostTensor& t, const Bindings& bindings) {
  const std::vector<int64_t> want = resolve(v.type.shape, bindings);
  LJ_CHECK(t.dtype == v.type.dtype, SourceLoc{}, "run_reference: input '{}' must be {}, got a {} tensor", v.name,
           v.type.str(), dtype_name(t.dtype));
  LJ_CHECK(t.shape == want, SourceLoc{}, "run_reference: shape mismatch for input '{}': expected {} ({}), got {}",
           v.name, dims_str(want), v.type.str(), dims_str(t.shape));
  LJ_CHECK(t.numel() == numel(want), SourceLoc{}, "run_reference: input '{}' has shape {} but holds {} values",
           v.name, dims_str(want), t.numel());
  for (int64_t i = 0; i < t.numel(); ++i) {
    const double x = t.data[static_cast<size_t>(i)];
    const double r = round_to(t.dtype, x);
    LJ_CHECK(r == x || (std::isnan(r) && std::isnan(x)), SourceLoc{},
             "run_reference: input '{}' element {} is {}, which {} cannot represent (nearest: {}); call "
             "round_to_dtype() after filling it by hand",
             v.name, i, x, dtype_name(t.dtype), r);
  }
}

// Thrown in a rank waiting at an all_reduce that another rank will never reach (it failed).
struct RankAborted {};

// The host side of the ranks' all_reduce: each rank deposits its partial, the last to arrive adds
// them in rank order, and every rank leaves with the sum. A failed rank aborts the others.
class HostAllReduce {
 public:
  explicit HostAllReduce(size_t ranks) : parts_(ranks, nullptr) {}

  void sum(size_t rank, HostTensor& t) {
    std::unique_lock<std::mutex> lock(m_);
    const uint64_t gen = generation_;
    parts_[rank] = &t;
    if (++arrived_ == parts_.size()) {
      HostTensor total = *parts_[0];
      for (size_t r = 1; r < parts_.size(); ++r) {
        LJ_ASSERT(parts_[r]->data.size() == total.data.size(), "all_reduce: rank {} has {} elements, rank 0 {}", r,
                  parts_[r]->data.size(), total.data.size());
        for (size_t i = 0; i < total.data.size(); ++i) total.data[i] += parts_[r]->data[i];
      }
      for (double& v : total.data) v = round_to(total.dtype, v);
      for (HostTensor* p : parts_) p->data = total.data;
      arrived_ = 0;
      ++generation_;
      cv_.notify_all();
      return;
    }
    cv_.wait(lock, [&] { return generation_ != gen || aborted_; });
    if (generation_ == gen) throw RankAborted{};
  }

  void abort() {
    std::lock_guard<std::mutex> lock(m_);
    aborted_ = true;
    cv_.notify_all();
  }

 private:
  std::mutex m_;
  std::condition_variable cv_;
  std::vector<HostTensor*> parts_;
  size_t arrived_ = 0;
  uint64_t generation_ = 0;
  bool aborted_ = false;
};

using AllReduceFn = std::function<void(HostTensor&)>;

std::vector<HostTensor> run_graph(const Graph& g, const std::map<std::string, HostTensor>& inputs, const Bindings& bindings,
                                  const AllReduceFn& all_reduce);

}  // namespace

std::vector<HostTensor> run_reference(const Graph& g, const std::map<std::string, HostTensor>& inputs,
                                      const Bindings& bindings) {
  return run_graph(g, inputs, bindings, {});
}

std::vector<std::vector<HostTensor>> run_reference_ranks(const Graph& g, const std::vector<std::map<std::string, HostTensor>>& rank_inputs,
                                                         const Bindings& bindings) {
  return run_reference_ranks(g, g, rank_inputs, bindings);
}

std::vector<std::vector<HostTensor>> run_reference_ranks(const Graph& first, const Graph& others,
                                                         const std::vector<std::map<std::string, HostTensor>>& rank_inputs,
                                                         const Bindings& bindings) {
  const size_t ranks = rank_inputs.size();
  LJ_CHECK(ranks >= 1, SourceLoc{}, "run_reference_ranks: no ranks");
  HostAllReduce comm(ranks);
  std::vector<std::vector<HostTensor>> out(ranks);
  std::vector<std::exception_ptr> errors(ranks);
  std::vector<std::thread> threads;
  for (size_t r = 0; r < ranks; ++r)
    threads.emplace_back([&, r] {
      try {
        out[r] = run_graph(r == 0 ? first : others, rank_inputs[r], bindings, [&comm, r](HostTensor& t) { comm.sum(r, t); });
      } catch (const RankAborted&) {
        // Stopped by another rank's error, which is the one reported.
      } catch (...) {
        errors[r] = std::current_exception();
        comm.abort();
      }
    });
  for (std::thread& t : threads) t.join();
  for (const std::exception_ptr& e : errors)
    if (e) std::rethrow_exception(e);
  return out;
}

namespace {

std::vector<HostTensor> run_graph(const Graph& g, const std::map<std::string, HostTensor>& inputs, const Bindings& bindings,
                                  const AllReduceFn& all_reduce) {
  check_bindings(g, bindings);

  // Every value is reached through a pointer: graph inputs point into `inputs` (never copied),
  // intermediates into `owned`.
  const size_t n_values = g.values().size();
  std::vector<const HostTensor*> live(n_values, nullptr);
  std::vector<std::unique_ptr<HostTensor>> owned(n_values);

  for (ValueId id : g.inputs()) {
    const ValueInfo& v = g.value(id);
    auto it = inputs.find(v.name);
    LJ_CHECK(it != inputs.end(), SourceLoc{}, "run_reference: missing input '{}' ({}) of graph @{}", v.name,
             v.type.str(), g.name());
    check_input(v, it->second, bindings);
    live[static_cast<size_t>(id)] = &it->second;
  }
  for (const auto& [name, tensor] : inputs) {
    bool known = false;
    std::string expected;
    for (ValueId id : g.inputs()) {
      known = known || g.value(id).name == name;
      expected += (expected.empty() ? "" : ", ") + g.value(id).name;
    }
    LJ_CHECK(known, SourceLoc{}, "run_reference: graph @{} has no input '{}' (its inputs: {})", g.name(), name,
             expected);
  }

  // Index of the last node reading each value; graph outputs stay alive to the end.
  const auto& nodes = g.nodes();
  std::vector<size_t> last_use(n_values, 0);
  std::vector<bool> is_output(n_values, false);
  for (size_t n = 0; n < nodes.size(); ++n)
    for (ValueId id : nodes[n].operands) last_use[static_cast<size_t>(id)] = n;
  for (ValueId id : g.outputs()) is_output[static_cast<size_t>(id)] = true;

  for (size_t n = 0; n < nodes.size(); ++n) {
    const Node& node = nodes[n];
    std::vector<const HostTensor*> operands;
    for (ValueId id : node.operands) {
      LJ_ASSERT(live[static_cast<size_t>(id)] != nullptr, "node {} ({}) reads value %{} before it exists or after it was freed",
                n, op_name(node.kind), g.value(id).name);
      operands.push_back(live[static_cast<size_t>(id)]);
    }
    std::vector<TensorType> result_types;
    for (ValueId id : node.results) result_types.push_back(g.value(id).type);

    std::vector<HostTensor> results;
    try {
      if (node.kind == OpKind::AllReduce && all_reduce) {
        // This rank's partial, then the group's sum (run_reference_ranks).
        Attrs one = node.attrs;
        one.set("ranks", int64_t{1});
        results = reference_op(node.kind, operands, one, result_types, bindings);
        all_reduce(results.at(0));
      } else {
        results = reference_op(node.kind, operands, node.attrs, result_types, bindings);
      }
    } catch (const UserError& e) {
      // Run-time errors (a cache position out of range, ...) get the node's source location and result.
      throw UserError(fmt::format("{} (computing %{})", e.what(), g.value(node.results.at(0)).name), node.loc);
    }
    LJ_ASSERT(results.size() == node.results.size(), "{} returned {} results, expected {}", op_name(node.kind),
              results.size(), node.results.size());
    for (size_t r = 0; r < results.size(); ++r) {
      const auto id = static_cast<size_t>(node.results[r]);
      owned[id] = std::make_unique<HostTensor>(std::move(results[r]));
      live[id] = owned[id].get();
    }

    // Free what this node read for the last time, and results nobody reads.
    auto release = [&](ValueId vid) {
      const auto id = static_cast<size_t>(vid);
      if (is_output[id] || !owned[id]) return;
      owned[id].reset();
      live[id] = nullptr;
    };
    for (ValueId id : node.operands)
      if (last_use[static_cast<size_t>(id)] == n) release(id);
    for (ValueId id : node.results)
      if (last_use[static_cast<size_t>(id)] <= n && !is_output[static_cast<size_t>(id)]) release(id);
  }

  std::vector<HostTensor> out;
  for (ValueId id : g.outputs()) {
    LJ_ASSERT(live[static_cast<size_t>(id)] != nullptr, "output %{} was never computed", g.value(id).name);
    out.push_back(*live[static_cast<size_t>(id)]);
  }
  return out;
}

}  // namespace

}  // namespace lj
