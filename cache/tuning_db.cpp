// The tuning database (see tuning_db.h). A record is a JSON object whose "checksum" field is the
// XXH3-128 of the object's canonical dump without that field; nlohmann::json keeps object keys
// sorted and prints doubles in round-trip form, so the dump is reproducible after a parse.
#include "cache/tuning_db.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <ctime>
#include <mutex>
#include <set>

#include <nlohmann/json.hpp>

#include <fmt/format.h>

#include "layerjit/error.h"
#include "layerjit/check.h"

namespace lj::cache {

using nlohmann::json;

namespace {

constexpr uint64_t kRecordLimit = uint64_t{1} << 20;

bool first_report(const std::string& id) {
  static std::mutex mutex;
  static std::set<std::string> reported;
  std::lock_guard<std::mutex> lock(mutex);
  return reported.insert(id).second;
}

json measured_json(const Measured& m) {
  return json{{"config", m.config}, {"median_us", m.median_us}, {"spread_us", m.spread_us}};
}

std::optional<Measured> measured_from(const json& j) {
  if (!j.is_object() || !j.contains("config") || !j["config"].is_string() || !j.contains("median_us") ||
      !j["median_us"].is_number() || !j.contains("spread_us") || !j["spread_us"].is_number())
    return std::nullopt;
  return Measured{j["config"].get<std::string>(), j["median_us"].get<double>(), j["spread_us"].get<double>()};
}

json key_json(const TuningKey& k) {
  return json{{"group_signature", k.group_signature}, {"symbol_bucket", k.symbol_bucket}, {"arch", k.arch},
              {"driver_version", k.driver_version}, {"layerjit_version", k.layerjit_version}};
}

std::string record_to_json(const TuningRecord& r) {
  json j{{"format", kCacheFormatVersion},
         {"key", key_json(r.key)},
         {"winner", measured_json(r.winner)},
         {"runner_up", r.runner_up ? measured_json(*r.runner_up) : json()},
         {"updated_unix", r.updated_unix},
         {"runs", r.runs}};
  j["checksum"] = checksum(j.dump());
  return j.dump(2) + "\n";
}

// Parses and verifies a record; "" in `error` means it is fine.
std::optional<TuningRecord> record_from_json(std::string_view text, const TuningKey& expected, std::string& error) {
  json j = json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object() || !j.contains("checksum") || !j["checksum"].is_string()) {
    error = "not a tuning record";
    return std::nullopt;
  }
  std::string sum = j["checksum"].get<std::string>();
  j.erase("checksum");
  if (checksum(j.dump()) != sum) {
    error = "checksum mismatch";
    return std::nullopt;
  }
  if (!j.contains("format") || j["format"] != kCacheFormatVersion || !j.contains("key") || !j["key"].is_object()) {
    error = "unknown record format";
    return std::nullopt;
  }
  if (j["key"] != key_json(expected)) {
    error = "record is for a different key";
    return std::nullopt;
  }
  TuningRecord r;
  r.key = expected;
  auto winner = j.contains("winner") ? measured_from(j["winner"]) : std::nullopt;
  if (!winner || !j.contains("runner_up") || !j.contains("updated_unix") || !j["updated_unix"].is_number_integer() ||
      !j.contains("runs") || !j["runs"].is_number_integer()) {
    error = "malformed record";
    return std::nullopt;
  }
  r.winner = *winner;
  if (!j["runner_up"].is_null()) {
    r.runner_up = measured_from(j["runner_up"]);
    if (!r.runner_up) {
      error = "malformed runner-up";
      return std::nullopt;
    }
  }
  r.updated_unix = j["updated_unix"].get<int64_t>();
  r.runs = j["runs"].get<int>();
  return r;
}

// The key a record document names, read field by field (record_from_json then checks it whole).
std::optional<TuningKey> key_of(const json& j) {
  if (!j.is_object() || !j.contains("key") || !j["key"].is_object()) return std::nullopt;
  const json& k = j["key"];
  TuningKey key;
  for (auto [f, dst] : {std::pair{"group_signature", &key.group_signature}, std::pair{"symbol_bucket", &key.symbol_bucket},
                        std::pair{"arch", &key.arch}, std::pair{"driver_version", &key.driver_version},
                        std::pair{"layerjit_version", &key.layerjit_version}}) {
    if (!k.contains(f) || !k[f].is_string()) return std::nullopt;
    *dst = k[f].get<std::string>();
  }
  return key;
}

bool same_file_at(int dirfd, int fd, const std::string& name) {
  struct stat a {}, b {};
  return ::fstat(fd, &a) == 0 && ::fstatat(dirfd, name.c_str(), &b, AT_SYMLINK_NOFOLLOW) == 0 &&
         a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

}  // namespace

std::string_view to_string(TuneDecision d) {
  switch (d) {
    case TuneDecision::kFirst: return "first";
    case TuneDecision::kSameWinner: return "same winner";
    case TuneDecision::kNewWinner: return "new winner";
    case TuneDecision::kKeptPrevious: return "kept previous (near-tie)";
  }
  return "invalid TuneDecision";
}

CacheKey TuningKey::hash() const {
  KeyHasher h("layerjit-tuning");
  h.add(1, static_cast<int64_t>(kCacheFormatVersion));
  h.add(2, group_signature);
  h.add(3, symbol_bucket);
  h.add(4, arch);
  h.add(5, driver_version);
  h.add(6, layerjit_version);
  return h.finish();
}

TuneDecision decide(const std::optional<TuningRecord>& previous, std::span<const Measured> candidates,
                    TuningRecord& out) {
  LJ_ASSERT(!candidates.empty(), "a tuning run must measure at least one candidate");
  std::vector<Measured> sorted(candidates.begin(), candidates.end());
  // Ties in time are broken by config text, so the decision never depends on the input order.
  std::stable_sort(sorted.begin(), sorted.end(), [](const Measured& a, const Measured& b) {
    return a.median_us != b.median_us ? a.median_us < b.median_us : a.config < b.config;
  });
  const Measured& best = sorted[0];
  std::optional<Measured> second = sorted.size() > 1 ? std::optional<Measured>(sorted[1]) : std::nullopt;
  out.runs = previous ? previous->runs + 1 : 1;
  if (!previous) {
    out.winner = best;
    out.runner_up = second;
    return TuneDecision::kFirst;
  }
  if (best.config == previous->winner.config) {
    out.winner = best;
    out.runner_up = second;
    return TuneDecision::kSameWinner;
  }
  // Compare against the previous winner as measured in this run when it was re-measured (same
  // conditions), else against its stored numbers.
  Measured baseline = previous->winner;
  for (const Measured& m : sorted)
    if (m.config == previous->winner.config) baseline = m;
  double margin = std::max({baseline.spread_us, best.spread_us, kNearTieFraction * baseline.median_us});
  if (best.median_us < baseline.median_us - margin) {
    out.winner = best;
    out.runner_up = baseline;
    return TuneDecision::kNewWinner;
  }
  out.winner = baseline;
  out.runner_up = best;
  return TuneDecision::kKeptPrevious;
}

std::unique_ptr<TuningDb> TuningDb::open(CacheOptions options) {
  std::unique_ptr<TuningDb> db(new TuningDb(std::move(options)));
  if (!db->options_.warn) db->options_.warn = warn_to_stderr;
  std::filesystem::path root;
  if (db->options_.root) root = *db->options_.root;
  else if (auto choice = default_cache_root()) root = choice->path;
  if (db->options_.mode == CacheMode::Off) {
    db->disabled_reason_ = "LAYERJIT_CACHE=off";
  } else if (root.empty()) {
    db->disabled_reason_ = "no cache directory: set LAYERJIT_CACHE_DIR, XDG_CACHE_HOME or HOME";
  } else {
    std::string refusal;
    db->root_ = open_cache_root(root, refusal);
    if (db->root_ && open_private_subdir(db->root_->version_fd.get(), "tuning", db->tuning_fd_, refusal,
                                         db->root_->version_dir / "tuning") != 0)
      db->root_.reset();
    if (!db->root_) db->disabled_reason_ = refusal;
  }
  if (!db->enabled() && first_report("disabled:" + root.string()))
    db->options_.warn(fmt::format("tuning database disabled: {} (groups will be tuned every run)", db->disabled_reason_));
  return db;
}

int TuningDb::open_shard(const CacheKey& hash, bool create, UniqueFd& out) {
  std::string name = hash.hex().substr(0, 2);
  if (create) {
    if (int err = make_dir_at(tuning_fd_.get(), name); err != 0) return err;
  }
  if (int err = open_dir_at(tuning_fd_.get(), name, out); err != 0) return err;
  std::string problem = check_private_dir(out.get(), root_->version_dir / "tuning" / name);
  if (!problem.empty()) {
    if (first_report("shard:" + problem)) options_.warn(fmt::format("ignoring tuning directory: {}", problem));
    out.reset();
    return EPERM;
  }
  return 0;
}

std::optional<TuningRecord> TuningDb::read_record(int shard_fd, const TuningKey& key, bool shard_locked) {
  CacheKey hash = key.hash();
  std::string name = hash.hex() + ".json";
  UniqueFd fd;
  if (open_file_at(shard_fd, name, fd) != 0) return std::nullopt;
  std::string text, error;
  int err = read_all(fd.get(), text, kRecordLimit);
  std::optional<TuningRecord> r;
  if (err != 0) error = fmt::format("cannot read it: {}", errno_text(err));
  else r = record_from_json(text, key, error);
  if (r) return r;
  int removal = 0;
  {
    // Remove the very file that failed (a writer may have replaced it meanwhile: keep theirs). A
    // caller already holding the shard lock passes shard_locked: flock on a second descriptor of the
    // same directory would wait for ourselves.
    FlockGuard dir_lock;
    if (!shard_locked) dir_lock = FlockGuard(shard_fd, LOCK_EX);
    if (same_file_at(shard_fd, fd.get(), name)) removal = remove_at(shard_fd, name);  // a directory in its place too
  }
  if (first_report(fmt::format("tuning-corrupt:{}:{}", root_->root.string(), hash.hex())))
    options_.warn(removal == 0 ? fmt::format("tuning record {} is corrupt ({}); removed it, the group will be tuned again",
                                         hash.hex(), error)
                           : fmt::format("tuning record {} is corrupt ({}) and could not be removed ({}): the group "
                                         "will be tuned again, and its result not stored until the file is removed by hand",
                                         hash.hex(), error, errno_text(removal)));
  return std::nullopt;
}

std::string tuning_record_json(const TuningRecord& r) { return record_to_json(r); }

std::optional<TuningRecord> parse_tuning_record(std::string_view text, std::string& error) {
  const json j = json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  std::optional<TuningKey> key = key_of(j);
  if (!key) {
    error = "not a tuning record (no key)";
    return std::nullopt;
  }
  return record_from_json(text, *key, error);
}

TuningDb::PutResult TuningDb::put(const TuningRecord& r, bool replace, std::string* error) {
  auto fail = [&](std::string why) {
    if (error) *error = std::move(why);
    return PutResult::kFailed;
  };
  if (!enabled()) return fail("tuning database disabled: " + disabled_reason_);
  const CacheKey hash = r.key.hash();
  UniqueFd shard;
  if (int err = open_shard(hash, true, shard); err != 0) return fail(fmt::format("cannot open the tuning shard: {}", errno_text(err)));
  const int sfd = shard.get();
  FlockGuard dir_lock(sfd, LOCK_EX);
  const bool existed = read_record(sfd, r.key, /*shard_locked=*/true).has_value();
  if (existed && !replace) return PutResult::kKeptExisting;
  std::string tmp;
  const std::string name = hash.hex() + ".json";
  int err = write_temp_file(sfd, record_to_json(r), options_.durable, tmp);
  if (err == 0 && ::renameat(sfd, tmp.c_str(), sfd, name.c_str()) != 0) {
    err = errno;
    ::unlinkat(sfd, tmp.c_str(), 0);
  }
  if (err != 0) return fail(fmt::format("cannot store tuning record {}: {}", hash.hex(), errno_text(err)));
  if (options_.durable) sync_fd(sfd);
  return existed ? PutResult::kReplaced : PutResult::kStored;
}

std::optional<TuningRecord> TuningDb::lookup(const TuningKey& key) {
  if (!enabled()) return std::nullopt;
  UniqueFd shard;
  if (open_shard(key.hash(), false, shard) != 0) return std::nullopt;
  return read_record(shard.get(), key, /*shard_locked=*/false);
}

RecordResult TuningDb::record(const TuningKey& key, std::span<const Measured> candidates) {
  RecordResult res;
  res.record.key = key;
  CacheKey hash = key.hash();
  if (!enabled()) {
    res.decision = decide(std::nullopt, candidates, res.record);
    res.error = "tuning database disabled: " + disabled_reason_;
    return res;
  }
  if (options_.mode == CacheMode::ReadOnly) {
    res.decision = decide(lookup(key), candidates, res.record);
    res.error = "not stored: LAYERJIT_CACHE=readonly";
    return res;
  }
  UniqueFd shard;
  if (int err = open_shard(hash, true, shard); err != 0) {
    res.decision = decide(std::nullopt, candidates, res.record);
    res.error = fmt::format("cannot open the tuning shard: {}", errno_text(err));
    return res;
  }
  const int sfd = shard.get();
  // Read-decide-write under the shard lock: two tuners finishing at once both count, neither is lost.
  FlockGuard dir_lock(sfd, LOCK_EX);
  std::optional<TuningRecord> previous = read_record(sfd, key, /*shard_locked=*/true);
  res.decision = decide(previous, candidates, res.record);
  res.record.updated_unix = static_cast<int64_t>(std::time(nullptr));
  std::string tmp;
  std::string name = hash.hex() + ".json";
  int err = write_temp_file(sfd, record_to_json(res.record), options_.durable, tmp);
  if (err == 0 && ::renameat(sfd, tmp.c_str(), sfd, name.c_str()) != 0) {
    err = errno;
    ::unlinkat(sfd, tmp.c_str(), 0);
  }
  if (err != 0) {
    res.error = fmt::format("cannot store tuning record {}: {}", hash.hex(), errno_text(err));
    return res;
  }
  if (options_.durable) sync_fd(sfd);
  res.ok = true;
  return res;
}

std::vector<TuningRecord> TuningDb::list() {
  std::vector<TuningRecord> out;
  if (!enabled()) return out;
  for (const std::string& shard : list_dir(tuning_fd_.get())) {
    UniqueFd sfd;
    if (open_dir_at(tuning_fd_.get(), shard, sfd) != 0) continue;
    for (const std::string& name : list_dir(sfd.get())) {
      if (name.size() != 37 || name.substr(32) != ".json") continue;
      UniqueFd fd;
      std::string text;
      if (open_file_at(sfd.get(), name, fd) != 0 || read_all(fd.get(), text, kRecordLimit) != 0) continue;
      std::string error;
      if (auto r = parse_tuning_record(text, error); r && r->key.hash().hex() + ".json" == name) out.push_back(*r);
    }
  }
  return out;
}

size_t TuningDb::clear() {
  size_t removed = 0;
  if (!enabled()) return removed;
  for (const std::string& shard : list_dir(tuning_fd_.get())) {
    UniqueFd sfd;
    if (open_dir_at(tuning_fd_.get(), shard, sfd) != 0) continue;
    FlockGuard dir_lock(sfd.get(), LOCK_EX);
    for (const std::string& name : list_dir(sfd.get()))
      if (remove_at(sfd.get(), name) == 0) removed += 1;
  }
  return removed;
}

}  // namespace lj::cache
