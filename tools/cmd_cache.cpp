// `layerjit cache`: one function per action over cache/'s DiskCache and TuningDb. Read-only actions
// (stats, ls, show) never refresh last-used stamps, so looking at the cache does not change what
// eviction removes next.
#include "tools/cmd_cache.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <optional>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cache/disk_cache.h"
#include "cache/location.h"
#include "cache/posix_file.h"
#include "cache/tuning_db.h"
#include "layerjit/error.h"
#include "tools/args.h"

namespace lj::cli {

const char* const kCacheUsage =
    "usage: layerjit cache <action> [--dir DIR]\n"
    "\n"
    "Inspects and maintains the kernel cache (cubins, sources, manifests) and the tuning database.\n"
    "\n"
    "actions:\n"
    "  stats                 location, entries and bytes against the size cap, stale files, tuning records\n"
    "  ls                    one line per entry, most recently used first: key, size, last use, kernel, arch\n"
    "  show KEY              one entry's manifest, verified against its checksums (KEY: 32 hex digits or a\n"
    "                        unique prefix of at least 6)\n"
    "  clear [--tuning]      remove every entry not in use by a running process (--tuning: also every\n"
    "                        tuning record)\n"
    "  prune [--max-bytes N] remove stale temp files, unpublished payloads and corrupt entries, then evict\n"
    "                        least recently used entries down to the cap (N: bytes, or 512M, 2G)\n"
    "  export FILE           write every tuning record to FILE (one JSON document, each record with its\n"
    "                        checksum), to carry `layerjit tune`'s winners to another machine\n"
    "  import FILE [--replace]\n"
    "                        store FILE's records (each checked first; a bad one refuses the whole file).\n"
    "                        A record applies where its key matches: the same group, sizes bucket, arch,\n"
    "                        CUDA driver and layerjit version. A key already stored keeps its record\n"
    "                        unless --replace\n"
    "\n"
    "The size cap is LAYERJIT_CACHE_MAX_BYTES (default 2G). Exits 1 when the cache directory is refused\n"
    "(owned by another user, writable by group or others, or a symlink) or KEY names no entry.\n";

namespace {

struct CacheArgs {
  std::string action;
  std::optional<std::string> key;   // show's KEY, export's and import's FILE
  std::optional<std::string> dir;
  std::optional<uint64_t> max_bytes;
  bool tuning = false;
  bool replace = false;
  bool help = false;
};

CacheArgs parse(const std::vector<std::string>& args) {
  CacheArgs a;
  std::optional<std::string> action;
  CommandLine cl("cache", kCacheUsage);
  cl.positional("ACTION", action, "stats, ls, show, clear, prune, export or import");
  cl.positional("ARG", a.key, "show's KEY, export's and import's FILE");
  cl.option("--dir", a.dir, "DIR", "use DIR instead of $LAYERJIT_CACHE_DIR, $XDG_CACHE_HOME/layerjit or ~/.cache/layerjit");
  cl.option("--max-bytes", [&a](const std::string& text) {
    a.max_bytes = cache::parse_byte_size(text);
    if (!a.max_bytes) throw UsageError{fmt::format("--max-bytes expects a byte count such as 2147483648 or 2G, got '{}'", text)};
  }, "N", "prune: the cap (bytes, or 512M, 2G)");
  cl.flag("--tuning", a.tuning, "clear: also every tuning record");
  cl.flag("--replace", a.replace, "import: overwrite records already stored");
  a.help = !cl.parse(args);
  a.action = action.value_or("");
  if (a.key && a.action != "show" && a.action != "export" && a.action != "import")
    throw UsageError{fmt::format("unexpected argument '{}'", *a.key)};
  if (a.help) return a;
  if (a.action.empty()) throw UsageError{"missing action (stats, ls, show, clear, prune, export or import)"};
  if (a.action != "stats" && a.action != "ls" && a.action != "show" && a.action != "clear" && a.action != "prune" &&
      a.action != "export" && a.action != "import")
    throw UsageError{fmt::format("unknown action '{}'", a.action)};
  if (a.action == "show" && !a.key) throw UsageError{"show needs a KEY"};
  if ((a.action == "export" || a.action == "import") && !a.key) throw UsageError{a.action + " needs a FILE"};
  if (a.replace && a.action != "import") throw UsageError{"--replace only applies to import"};
  if (a.tuning && a.action != "clear") throw UsageError{"--tuning only applies to clear"};
  if (a.max_bytes && a.action != "prune") throw UsageError{"--max-bytes only applies to prune"};
  return a;
}

cache::CacheOptions options_for(const CacheArgs& a) {
  cache::CacheOptions o = cache::cache_options_from_env();
  if (a.dir) o.root = *a.dir;
  if (a.max_bytes) o.max_bytes = *a.max_bytes;
  return o;
}

std::string age(int64_t unix_seconds) {
  int64_t s = static_cast<int64_t>(std::time(nullptr)) - unix_seconds;
  if (s < 0) s = 0;
  if (s < 120) return fmt::format("{}s ago", s);
  if (s < 2 * 3600) return fmt::format("{}m ago", s / 60);
  if (s < 2 * 86400) return fmt::format("{}h ago", s / 3600);
  return fmt::format("{}d ago", s / 86400);
}

std::unique_ptr<cache::DiskCache> open_or_fail(const CacheArgs& a) {
  cache::CacheOptions o = options_for(a);
  // A refused root becomes this command's error; the library's warning would say it twice.
  o.warn = [](const std::string&) {};
  auto c = cache::DiskCache::open(o);
  if (!c->enabled()) throw UserError(fmt::format("kernel cache disabled: {}", c->disabled_reason()));
  return c;
}

void print_refused_shards_removed(uint64_t n) {
  if (n > 0)
    std::printf("removed %llu shard link(s) or file(s) in place of a shard directory (their targets untouched)\n",
                static_cast<unsigned long long>(n));
}

// Shard names that are not real directories (a symlink, a file): their entries are invisible to
// every command, so each listing says so instead of counting them as foreign files.
void print_refused_shards(const cache::DiskCache& c, const cache::Usage& u) {
  for (const std::string& shard : u.refused_shards)
    std::fprintf(stderr, "warning: ignoring %s: a symlink or a file in place of a shard directory (never followed); "
                 "`layerjit cache prune` or `clear` removes it\n", (c.version_dir() / "kernels" / shard).c_str());
}

int stats(const CacheArgs& a) {
  auto c = open_or_fail(a);
  auto db = cache::TuningDb::open(options_for(a));
  cache::Usage u = c->scan();
  uint64_t cap = c->options().max_bytes;
  std::string origin = a.dir ? "--dir" : cache::default_cache_root() ? cache::default_cache_root()->chosen_by : "";
  std::printf("cache root     %s (from %s)\n", c->root_path().c_str(), origin.c_str());
  std::printf("directory      %s\n", c->version_dir().c_str());
  std::printf("entries        %zu, %s of %s cap (%.1f %%)\n", u.entries.size(), format_bytes(static_cast<double>(u.entry_bytes)).c_str(),
              format_bytes(static_cast<double>(cap)).c_str(),
              cap ? 100.0 * static_cast<double>(u.total_bytes()) / static_cast<double>(cap) : 0.0);
  if (!u.entries.empty())
    std::printf("last used      oldest %s, newest %s\n", age(u.entries.front().last_used_unix).c_str(),
                age(u.entries.back().last_used_unix).c_str());
  std::printf("stale files    %llu temp, %llu unpublished payloads (%s)\n",
              static_cast<unsigned long long>(u.temp_files), static_cast<unsigned long long>(u.orphan_files),
              format_bytes(static_cast<double>(u.temp_bytes + u.orphan_bytes)).c_str());
  if (u.other_files > 0)
    std::printf("other files    %llu (%s), not written by layerjit\n", static_cast<unsigned long long>(u.other_files),
                format_bytes(static_cast<double>(u.other_bytes)).c_str());
  print_refused_shards(*c, u);
  if (db->enabled()) std::printf("tuning records %zu\n", db->list().size());
  return kExitOk;
}

int ls(const CacheArgs& a) {
  auto c = open_or_fail(a);
  cache::Usage u = c->scan();
  print_refused_shards(*c, u);
  std::printf("%-32s  %10s  %-9s  %-8s  %s\n", "KEY", "SIZE", "LAST USED", "ARCH", "KERNEL");
  for (auto it = u.entries.rbegin(); it != u.entries.rend(); ++it) {
    auto m = c->peek_manifest(it->key);
    std::printf("%-32s  %10s  %-9s  %-8s  %s\n", it->key.hex().c_str(), format_bytes(static_cast<double>(it->bytes)).c_str(),
                age(it->last_used_unix).c_str(), m ? m->arch.c_str() : "?",
                m ? m->info.kernel_name.c_str() : "(unreadable manifest)");
  }
  std::printf("%zu entr%s, %s\n", u.entries.size(), u.entries.size() == 1 ? "y" : "ies",
              format_bytes(static_cast<double>(u.entry_bytes)).c_str());
  return kExitOk;
}

int show(const CacheArgs& a) {
  auto c = open_or_fail(a);
  std::string want = *a.key;
  for (char& ch : want) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  if (want.size() < 6 || want.size() > 32 || want.find_first_not_of("0123456789abcdef") != std::string::npos)
    throw UsageError{fmt::format("KEY must be 6 to 32 hex digits, got '{}'", *a.key)};
  cache::Usage u = c->scan();
  std::vector<cache::EntryStat> matches;
  for (const cache::EntryStat& e : u.entries)
    if (e.key.hex().rfind(want, 0) == 0) matches.push_back(e);
  if (matches.empty()) throw UserError(fmt::format("no cache entry with key {}", want));
  if (matches.size() > 1) throw UserError(fmt::format("key prefix {} matches {} entries; give more digits", want, matches.size()));
  const cache::EntryStat& e = matches.front();
  cache::LoadResult l = c->load(e.key, /*touch=*/false);
  if (l.status != cache::LoadStatus::kHit)
    throw UserError(fmt::format("cache entry {} is {}: {}", e.key.hex(), cache::to_string(l.status),
                                l.detail.empty() ? "it was removed meanwhile" : l.detail + " (removed)"));
  const cache::Manifest& m = l.entry->manifest;
  std::string options, env;
  for (const std::string& o : m.options) options += (options.empty() ? "" : " ") + o;
  for (const cache::EnvSetting& s : m.env) env += (env.empty() ? "" : ", ") + s.name + (s.value ? "=" + *s.value : " unset");
  auto known = [](const std::optional<int>& v, const char* unit) { return v ? fmt::format("{}{}", *v, unit) : std::string("unknown"); };
  std::printf("key            %s\n", m.key.hex().c_str());
  std::printf("kernel         %s\n", m.info.kernel_name.c_str());
  std::printf("arch           %s\n", m.arch.c_str());
  std::printf("nvrtc          %s\n", m.nvrtc_version.c_str());
  std::printf("options        %s\n", options.c_str());
  std::printf("device headers %s\n", m.device_headers_hash.c_str());
  std::printf("environment    %s\n", env.empty() ? "(no code-changing variables registered)" : env.c_str());
  std::printf("format         v%d, written by layerjit %s\n", m.format_version, m.layerjit_version.c_str());
  std::printf("created        %s\n", age(m.created_unix).c_str());
  std::printf("last used      %s\n", age(e.last_used_unix).c_str());
  std::printf("compile time   %.1f ms\n", m.info.compile_seconds * 1e3);
  std::printf("registers      %s\n", known(m.info.registers, "").c_str());
  std::printf("spills         %s\n", known(m.info.spill_bytes, " bytes").c_str());
  std::printf("cubin          %s, %s, xxh3-128 %s\n", m.cubin.file.c_str(), format_bytes(static_cast<double>(m.cubin.bytes)).c_str(),
              m.cubin.checksum.c_str());
  std::printf("source         %s, %s, xxh3-128 %s\n", m.source.file.c_str(), format_bytes(static_cast<double>(m.source.bytes)).c_str(),
              m.source.checksum.c_str());
  std::printf("integrity      ok (sizes, checksums and key verified)\n");
  return kExitOk;
}

int clear(const CacheArgs& a) {
  auto c = open_or_fail(a);
  cache::EvictReport r = c->clear();
  print_refused_shards_removed(r.refused_shards_removed);
  std::printf("removed %llu entr%s (%s)", static_cast<unsigned long long>(r.evicted), r.evicted == 1 ? "y" : "ies",
              format_bytes(static_cast<double>(r.bytes_freed)).c_str());
  if (r.skipped_in_use > 0) std::printf(", kept %llu in use by a running process", static_cast<unsigned long long>(r.skipped_in_use));
  std::printf("\n");
  if (a.tuning) {
    auto db = cache::TuningDb::open(options_for(a));
    std::printf("removed %zu tuning record(s)\n", db->clear());
  }
  return kExitOk;
}

int prune(const CacheArgs& a) {
  auto c = open_or_fail(a);
  cache::PruneReport r = c->prune(/*verify=*/true);
  print_refused_shards_removed(r.refused_shards_removed);
  std::printf("removed %llu stale file(s) (%s)\n", static_cast<unsigned long long>(r.stale_files_removed),
              format_bytes(static_cast<double>(r.stale_bytes)).c_str());
  std::printf("verified %llu entr%s, removed %llu corrupt\n", static_cast<unsigned long long>(r.verified),
              r.verified == 1 ? "y" : "ies", static_cast<unsigned long long>(r.corrupt_removed));
  std::printf("evicted %llu least recently used (%s); now %s of %s cap", static_cast<unsigned long long>(r.eviction.evicted),
              format_bytes(static_cast<double>(r.eviction.bytes_freed)).c_str(),
              format_bytes(static_cast<double>(r.eviction.bytes_after)).c_str(),
              format_bytes(static_cast<double>(c->options().max_bytes)).c_str());
  if (r.eviction.skipped_in_use > 0)
    std::printf(" (%llu in use, kept)", static_cast<unsigned long long>(r.eviction.skipped_in_use));
  std::printf("\n");
  return kExitOk;
}

std::unique_ptr<cache::TuningDb> tuning_or_fail(const CacheArgs& a) {
  cache::CacheOptions o = options_for(a);
  o.warn = [](const std::string&) {};
  auto db = cache::TuningDb::open(o);
  if (!db->enabled()) throw UserError(fmt::format("tuning database disabled: {}", db->disabled_reason()));
  return db;
}

constexpr const char* kExportFormat = "layerjit-tuning-records";

int export_records(const CacheArgs& a) {
  auto db = tuning_or_fail(a);
  nlohmann::json records = nlohmann::json::array();
  const std::vector<cache::TuningRecord> all = db->list();
  for (const cache::TuningRecord& r : all) records.push_back(nlohmann::json::parse(cache::tuning_record_json(r)));
  const std::string text = nlohmann::json{{"format", kExportFormat}, {"version", 1}, {"records", std::move(records)}}.dump(1) + "\n";
  if (int err = cache::replace_file(*a.key, text, /*durable=*/true); err != 0)
    throw UserError(fmt::format("cannot write {}: {}", *a.key, std::strerror(err)));
  std::printf("exported %zu tuning record(s) to %s\n", all.size(), a.key->c_str());
  return kExitOk;
}

int import_records(const CacheArgs& a) {
  std::ifstream in(*a.key, std::ios::binary);
  if (!in) throw UserError(fmt::format("cannot read {}", *a.key));
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const nlohmann::json doc = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object() || doc.value("format", "") != kExportFormat || !doc.contains("records") ||
      !doc["records"].is_array())
    throw UserError(fmt::format("{}: not a tuning export (`layerjit cache export` writes one)", *a.key));
  if (!doc.contains("version") || doc["version"] != 1)
    throw UserError(fmt::format("{}: tuning export version {}, this layerjit reads version 1", *a.key, doc.value("version", nlohmann::json()).dump()));
  // Every record checked before any is stored: a damaged file changes nothing.
  std::vector<cache::TuningRecord> records;
  for (size_t i = 0; i < doc["records"].size(); ++i) {
    std::string error;
    auto r = cache::parse_tuning_record(doc["records"][i].dump(), error);
    if (!r) throw UserError(fmt::format("{}: record {} is not sound ({}); nothing imported", *a.key, i, error));
    records.push_back(std::move(*r));
  }
  auto db = tuning_or_fail(a);
  size_t stored = 0, replaced = 0, kept = 0;
  for (const cache::TuningRecord& r : records) {
    std::string error;
    switch (db->put(r, a.replace, &error)) {
      case cache::TuningDb::PutResult::kStored: ++stored; break;
      case cache::TuningDb::PutResult::kReplaced: ++replaced; break;
      case cache::TuningDb::PutResult::kKeptExisting: ++kept; break;
      case cache::TuningDb::PutResult::kFailed: throw UserError(fmt::format("{}: {}", *a.key, error));
    }
  }
  std::printf("imported %zu tuning record(s) from %s: %zu new, %zu replaced, %zu kept (already stored%s)\n", records.size(),
              a.key->c_str(), stored, replaced, kept, a.replace ? "" : "; --replace overwrites them");
  return kExitOk;
}

}  // namespace

int cmd_cache(const std::vector<std::string>& args) {
  CacheArgs a = parse(args);
  if (a.help) return kExitOk;
  if ((a.action == "clear" || a.action == "prune" || a.action == "import") &&
      cache::cache_mode_from_env() != cache::CacheMode::ReadWrite)
    throw UserError(fmt::format("layerjit cache {} writes to the cache, which LAYERJIT_CACHE={} leaves alone", a.action,
                                std::getenv("LAYERJIT_CACHE")));
  if (a.action == "stats") return stats(a);
  if (a.action == "ls") return ls(a);
  if (a.action == "show") return show(a);
  if (a.action == "clear") return clear(a);
  if (a.action == "export") return export_records(a);
  if (a.action == "import") return import_records(a);
  return prune(a);
}

}  // namespace lj::cli
