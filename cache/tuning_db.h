// The tuning database: which config won the autotuner for a fusion group on this GPU, keyed by
// (group signature, symbol-value bucket, arch, driver version, layerjit version). One small JSON
// record per key under <root>/v<N>/tuning/<hh>/<key>.json, written with the same temp-file, fsync,
// rename protocol as kernel entries and checksummed the same way.
//
// Stability: a new tuning run replaces the previous winner only when it is clearly faster. When the
// new best is within the measurement spread (or 2 %) of the previous winner, the previous winner
// stays, so repeated runs on a noisy GPU do not flip between two equally good configs (which would
// also recompile and change numerics run to run).
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "cache/format.h"
#include "cache/key.h"
#include "cache/location.h"
#include "cache/posix_file.h"

namespace lj::cache {

struct TuningKey {
  std::string group_signature;  ///< canonical description of the fusion group (kinds, dtypes, static dims)
  std::string symbol_bucket;    ///< bucket of the symbol values, e.g. "T<=64"
  std::string arch;             ///< "sm_90a"
  std::string driver_version;   ///< the CUDA driver's version ("13.0"): it JITs PTX and schedules
  std::string layerjit_version = std::string(lj::cache::layerjit_version());

  CacheKey hash() const;
  bool operator==(const TuningKey&) const = default;
};

/// One candidate's measurement in one tuning run.
struct Measured {
  std::string config;     ///< opaque to the database (the tuner's JSON or text)
  double median_us = 0;   ///< median time over the repeats
  double spread_us = 0;   ///< the spread of the repeats (e.g. interquartile range)
  bool operator==(const Measured&) const = default;
};

struct TuningRecord {
  TuningKey key;
  Measured winner;
  std::optional<Measured> runner_up;
  int64_t updated_unix = 0;
  int runs = 0;  ///< tuning runs that contributed
};

enum class TuneDecision {
  kFirst,         ///< no previous record: the run's best wins
  kSameWinner,    ///< the run's best is the previous winner: numbers refreshed
  kNewWinner,     ///< the run's best beat the previous winner by more than the noise
  kKeptPrevious,  ///< near-tie (or slower): the previous winner stays
};
std::string_view to_string(TuneDecision d);

/// Relative margin under which two times count as a tie, whatever the measured spread says.
inline constexpr double kNearTieFraction = 0.02;

/// The decision rule on its own: `candidates` are this run's measurements (any order, at least
/// one). Fills `out.winner`, `out.runner_up` and `out.runs`.
TuneDecision decide(const std::optional<TuningRecord>& previous, std::span<const Measured> candidates,
                    TuningRecord& out);

struct RecordResult {
  bool ok = false;
  TuneDecision decision = TuneDecision::kFirst;
  TuningRecord record;   ///< what the database now holds (also when !ok: what would have been stored)
  std::string error;
};

/// A record as the JSON document a record file holds (checksummed), and back: `text` verified
/// against its checksum and format, the key its own. nullopt with the reason in `error` otherwise.
std::string tuning_record_json(const TuningRecord& r);
std::optional<TuningRecord> parse_tuning_record(std::string_view text, std::string& error);

class TuningDb {
 public:
  /// Same location and security rules as the kernel cache; never fails (a refusal disables it).
  static std::unique_ptr<TuningDb> open(CacheOptions options);

  bool enabled() const { return root_.has_value(); }
  const std::string& disabled_reason() const { return disabled_reason_; }

  /// The stored record, or nullopt. A corrupt or mismatched record is reported once, removed and
  /// treated as absent (the group is tuned again).
  std::optional<TuningRecord> lookup(const TuningKey& key);
  /// Applies decide() against the stored record and stores the result, atomically with respect to
  /// other processes recording the same key.
  RecordResult record(const TuningKey& key, std::span<const Measured> candidates);
  /// Every readable record (corrupt ones are skipped, not removed).
  std::vector<TuningRecord> list();
  /// Stores `r` as it is (`layerjit cache import`: a record measured on another machine), under the
  /// same lock as record(). A record already stored for its key stays unless `replace`.
  enum class PutResult { kStored, kReplaced, kKeptExisting, kFailed };
  PutResult put(const TuningRecord& r, bool replace, std::string* error = nullptr);
  /// Removes every record; returns how many.
  size_t clear();

  TuningDb(const TuningDb&) = delete;
  TuningDb& operator=(const TuningDb&) = delete;

 private:
  explicit TuningDb(CacheOptions options) : options_(std::move(options)) {}
  int open_shard(const CacheKey& hash, bool create, UniqueFd& out);
  std::optional<TuningRecord> read_record(int shard_fd, const TuningKey& key, bool shard_locked);

  CacheOptions options_;
  std::optional<OpenedRoot> root_;
  UniqueFd tuning_fd_;
  std::string disabled_reason_;
};

}  // namespace lj::cache
