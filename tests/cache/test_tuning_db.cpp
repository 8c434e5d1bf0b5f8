// The tuning database: the near-tie rule that keeps tuning stable, every key component, corrupt
// records, and concurrent recorders losing nothing.
#include <filesystem>
#include <fstream>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "cache/tuning_db.h"
#include "cache_test_util.h"

using namespace lj::cache;
using namespace lj::cache::test;
namespace fs = std::filesystem;

namespace {

TuningKey sample_key(int i = 0) { return {fmt::format("rms_matmul bf16 N=6144 K=4096 #{}", i), "T<=64", "sm_90a", "13.0"}; }

}  // namespace

TEST_CASE("tuning decide: first run, same winner, clear win, near-tie", "[cache][tuning]") {
  TuningRecord out;
  std::vector<Measured> run = {{"b", 11.0, 0.2}, {"a", 10.0, 0.2}, {"c", 12.0, 0.1}};
  CHECK(decide(std::nullopt, run, out) == TuneDecision::kFirst);
  CHECK(out.winner.config == "a");
  REQUIRE(out.runner_up);
  CHECK(out.runner_up->config == "b");
  CHECK(out.runs == 1);
  const TuningRecord prev = out;

  // The same config wins again: refreshed numbers.
  std::vector<Measured> same = {{"a", 9.8, 0.1}, {"b", 11.0, 0.1}};
  CHECK(decide(prev, same, out) == TuneDecision::kSameWinner);
  CHECK(out.winner.median_us == 9.8);
  CHECK(out.runs == 2);

  // b is now 1 % faster than a, within 2 %: a stays (as re-measured), b is the runner-up.
  std::vector<Measured> tie = {{"a", 10.0, 0.01}, {"b", 9.9, 0.01}};
  CHECK(decide(prev, tie, out) == TuneDecision::kKeptPrevious);
  CHECK(out.winner.config == "a");
  CHECK(out.runner_up->config == "b");

  // b is 5 % faster but the spread is 0.8 us: still a tie.
  std::vector<Measured> noisy = {{"a", 10.0, 0.8}, {"b", 9.5, 0.3}};
  CHECK(decide(prev, noisy, out) == TuneDecision::kKeptPrevious);

  // b is 20 % faster, clearly outside the noise: b wins, a becomes the runner-up.
  std::vector<Measured> clear = {{"a", 10.0, 0.1}, {"b", 8.0, 0.1}};
  CHECK(decide(prev, clear, out) == TuneDecision::kNewWinner);
  CHECK(out.winner.config == "b");
  CHECK(out.runner_up->config == "a");

  // The previous winner was not re-measured: compare with its stored numbers.
  std::vector<Measured> without = {{"d", 9.9, 0.05}};
  CHECK(decide(prev, without, out) == TuneDecision::kKeptPrevious);
  CHECK(out.winner == prev.winner);
  std::vector<Measured> faster = {{"d", 5.0, 0.05}};
  CHECK(decide(prev, faster, out) == TuneDecision::kNewWinner);

  // Input order never matters.
  std::vector<Measured> reversed(run.rbegin(), run.rend());
  TuningRecord a, b;
  decide(std::nullopt, run, a);
  decide(std::nullopt, reversed, b);
  CHECK(a.winner == b.winner);
  CHECK(a.runner_up == b.runner_up);
}

TEST_CASE("tuning db: record and look up, stable across runs", "[cache][tuning]") {
  TempDir dir;
  auto db = TuningDb::open(options_at(dir / "root"));
  REQUIRE(db->enabled());
  CHECK_FALSE(db->lookup(sample_key()));
  std::vector<Measured> run1 = {{"{\"tile\":128}", 10.0, 0.2}, {"{\"tile\":64}", 10.1, 0.2}};
  RecordResult r = db->record(sample_key(), run1);
  REQUIRE(r.ok);
  CHECK(r.decision == TuneDecision::kFirst);
  // A second run where the order flips inside the noise keeps the first winner.
  std::vector<Measured> run2 = {{"{\"tile\":128}", 10.1, 0.2}, {"{\"tile\":64}", 10.0, 0.2}};
  r = db->record(sample_key(), run2);
  CHECK(r.decision == TuneDecision::kKeptPrevious);
  auto stored = db->lookup(sample_key());
  REQUIRE(stored);
  CHECK(stored->winner.config == "{\"tile\":128}");
  CHECK(stored->runner_up->config == "{\"tile\":64}");
  CHECK(stored->runs == 2);
  // Another database object (another process) reads the same record.
  auto other = TuningDb::open(options_at(dir / "root"));
  CHECK(other->lookup(sample_key())->winner == stored->winner);
  CHECK(other->list().size() == 1);
  CHECK(other->clear() == 1);
  CHECK_FALSE(db->lookup(sample_key()));
}

TEST_CASE("tuning db: every key component separates records", "[cache][tuning]") {
  TempDir dir;
  auto db = TuningDb::open(options_at(dir / "root"));
  std::vector<TuningKey> keys(6, sample_key());
  keys[1].group_signature += " ";
  keys[2].symbol_bucket = "T<=128";
  keys[3].arch = "sm_90";
  keys[4].driver_version = "12.8";
  keys[5].layerjit_version = "0.0.9";
  for (size_t i = 0; i < keys.size(); ++i) {
    std::vector<Measured> run = {{fmt::format("cfg{}", i), 1.0 + static_cast<double>(i), 0.0}};
    REQUIRE(db->record(keys[i], run).ok);
  }
  for (size_t i = 0; i < keys.size(); ++i) CHECK(db->lookup(keys[i])->winner.config == fmt::format("cfg{}", i));
  CHECK(db->list().size() == keys.size());
}

TEST_CASE("tuning db: a corrupt or mismatched record is reported, removed and retuned", "[cache][tuning]") {
  TempDir dir;
  auto warnings = std::make_shared<std::vector<std::string>>();
  auto db = TuningDb::open(options_at(dir / "root", warnings));
  std::vector<Measured> run = {{"cfg", 3.0, 0.1}};
  REQUIRE(db->record(sample_key(), run).ok);
  std::string hex = sample_key().hash().hex();
  fs::path file = dir / "root" / "v1" / "tuning" / hex.substr(0, 2) / (hex + ".json");
  REQUIRE(fs::exists(file));
  SECTION("bit flip") { flip_bit(file, 40); }
  SECTION("truncated") { fs::resize_file(file, fs::file_size(file) / 2); }
  SECTION("a directory in its place") {  // unlink alone fails on it: it was "removed" every run
    fs::remove(file);
    fs::create_directories(file / "sub");
  }
  SECTION("another key's record under this name") {
    TuningKey other = sample_key(1);
    REQUIRE(db->record(other, run).ok);
    std::string ohex = other.hash().hex();
    fs::copy_file(dir / "root" / "v1" / "tuning" / ohex.substr(0, 2) / (ohex + ".json"), file,
                  fs::copy_options::overwrite_existing);
  }
  CHECK_FALSE(db->lookup(sample_key()));
  REQUIRE(warnings->size() == 1);
  CHECK_THAT(warnings->front(), Catch::Contains("removed it"));
  CHECK_FALSE(fs::exists(file));
  RecordResult r = db->record(sample_key(), run);
  CHECK(r.decision == TuneDecision::kFirst);
  CHECK(db->lookup(sample_key()));
}

TEST_CASE("tuning db: concurrent recorders lose no update", "[cache][tuning]") {
  TempDir dir;
  REQUIRE(TuningDb::open(options_at(dir / "root"))->enabled());
  constexpr int kProcesses = 8, kRounds = 15;
  std::vector<int> statuses = run_children(kProcesses, [&](int p) {
    auto db = TuningDb::open(options_at(dir / "root"));
    for (int round = 0; round < kRounds; ++round) {
      std::vector<Measured> run = {{"shared", 10.0, 0.1}, {fmt::format("p{}", p), 10.05, 0.1}};
      if (!db->record(sample_key(), run).ok) return 1;
      std::vector<Measured> mine = {{"x", 1.0 + round, 0.0}};
      if (!db->record(sample_key(100 + p), mine).ok) return 2;
      if (!db->lookup(sample_key())) return 3;
    }
    return 0;
  });
  CHECK(all_succeeded(statuses));
  auto db = TuningDb::open(options_at(dir / "root"));
  auto shared = db->lookup(sample_key());
  REQUIRE(shared);
  CHECK(shared->runs == kProcesses * kRounds);  // every read-modify-write counted
  CHECK(shared->winner.config == "shared");
  for (int p = 0; p < kProcesses; ++p) CHECK(db->lookup(sample_key(100 + p))->runs == kRounds);
}
