// Shared by the tensor-parallel GPU tests (test_gpu_tp: one GPU, test_gpu_tp2: two or more): random
// inputs given whole to a TpExecutable, outputs compared with the CPU reference of the unsharded graph.
#pragma once

#include <cmath>
#include <map>
#include <string>

#include "exec/tp_executable.h"
#include "layerjit/reference.h"
#include "runtime/host_values.h"
#include "tests/gpu/gpu_test_support.h"

namespace lj_test {

/// Random inputs of `g` at `b`: weights in +-0.05, norm weights in [0.5, 1.5), activations in
/// [-1, 1), positions at the last slot of a cache of C entries (decode) or 0..T-1 (prefill); each
/// rounded to its dtype.
inline std::map<std::string, lj::HostTensor> tp_inputs(const lj::Graph& g, const lj::Bindings& b, uint64_t seed) {
  std::map<std::string, lj::HostTensor> host;
  for (lj::ValueId v : g.inputs()) {
    const lj::ValueInfo& info = g.value(v);
    lj::HostTensor t(info.type.dtype, lj::resolve(info.type.shape, b));
    if (info.type.dtype == lj::DType::I32) {
      const std::optional<int64_t> c = b.get("C");
      for (size_t i = 0; i < t.data.size(); ++i) t.data[i] = c ? static_cast<double>(*c - 1 - static_cast<int64_t>(i % 3)) : static_cast<double>(i);
    } else if (info.is_param && info.type.rank() == 1) {
      lj::fill_uniform(t, seed++, 0.5, 1.5);
    } else {
      const bool w = info.is_param;
      lj::fill_uniform(t, seed++, w ? -0.05 : -1.0, w ? 0.05 : 1.0);
    }
    host.emplace(info.name, std::move(t));
  }
  return host;
}

/// Uploads every input of the unsharded graph whole; the executable cuts each rank's share.
inline void tp_upload(lj::exec::TpExecutable& e, const lj::Graph& g, const std::map<std::string, lj::HostTensor>& host,
                      const lj::Bindings& b) {
  for (lj::ValueId v : g.inputs()) {
    const lj::HostTensor& t = host.at(g.value(v).name);
    std::vector<unsigned char> bytes(static_cast<size_t>(lj::tensor_bytes(t.dtype, t.shape)));
    REQUIRE(!lj::rt::encode_tensor(t, bytes.data()));
    LJ_REQUIRE_OK(e.upload(g.value(v).name, bytes, b));
  }
}

/// max |got - want| <= max |want| / tol, no NaN.
inline void check_close(const lj::HostTensor& got, const lj::HostTensor& want, const std::string& what, double tol) {
  REQUIRE(got.data.size() == want.data.size());
  double worst = 0, scale = 0;
  for (size_t i = 0; i < want.data.size(); ++i) {
    REQUIRE(!std::isnan(got.data[i]));
    worst = std::max(worst, std::fabs(got.data[i] - want.data[i]));
    scale = std::max(scale, std::fabs(want.data[i]));
  }
  INFO(what << ": max |error| " << worst << " of max |value| " << scale);
  CHECK(scale > 0);
  CHECK(worst <= scale / tol);
}

/// Runs `g` over e's ranks at `b`, checks every output against the CPU reference of the unsharded
/// graph (relative 1/tol), a replicated output equal on every rank, and the captured CUDA graph's
/// outputs equal to the eager run's bit for bit (outputs poisoned before the replay).
inline void check_tp_run(lj::exec::TpExecutable& e, const lj::Graph& g, const lj::Bindings& b, uint64_t seed, double tol) {
  const auto host = tp_inputs(g, b, seed);
  tp_upload(e, g, host, b);
  const std::vector<lj::HostTensor> want = lj::run_reference(g, host, b);
  LJ_REQUIRE_OK(e.run(b));
  std::vector<lj::HostTensor> eager;
  for (size_t o = 0; o < g.outputs().size(); ++o) {
    auto got = e.download(o, b);
    LJ_REQUIRE_OK(got);
    check_close(*got, want[o], "%" + g.value(g.outputs()[o]).name + " against the CPU", tol);
    if (!e.sharded().outputs[o].split())
      for (int r = 1; r < e.ranks(); ++r) {
        auto other = e.download(o, b, r);
        LJ_REQUIRE_OK(other);
        CHECK(other->data == got->data);
      }
    eager.push_back(std::move(*got));
  }
  // A decode run writes this step's K and V into the caches in place; running it again writes the
  // same values, so the replay sees what the eager run saw. Outputs of their own are poisoned first.
  LJ_REQUIRE_OK(e.capture(b));
  LJ_REQUIRE_OK(e.poison_outputs(b));
  LJ_REQUIRE_OK(e.replay());
  LJ_REQUIRE_OK(e.synchronize());
  for (size_t o = 0; o < g.outputs().size(); ++o) {
    auto got = e.download(o, b);
    LJ_REQUIRE_OK(got);
    INFO("output %" << g.value(g.outputs()[o]).name << ": CUDA graph replay against the eager run");
    CHECK(got->data == eager[o].data);
  }
}

}  // namespace lj_test
