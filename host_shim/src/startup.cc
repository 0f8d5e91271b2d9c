// startup.cc -- Host::Open's provider part: load and open the provider under a deadline, learn
// what it offers, and re-adopt the checkpoints it still holds (a restart).
#include <tier/host/host_services.h>
#include <tier/host/identity.h>
#include <tier/host/log.h>
#include <tier/host/plugin_loader.h>

#include <algorithm>
#include <future>
#include <thread>

#include "host_copy.h"
#include "host_impl.h"
#include "manifest.h"

namespace tier {
namespace {

// ProviderInstance::Open on a thread of its own, so an open that never returns costs the deadline
// and a leaked thread, never a hung server.
Result<std::unique_ptr<ProviderInstance>> OpenWithin(std::shared_ptr<PluginLibrary> library,
                                                     const tier_host_services* host,
                                                     const std::string& namespace_id,
                                                     const ProviderOptions& options,
                                                     uint64_t timeout_ns) {
  using Opened = Result<std::unique_ptr<ProviderInstance>>;
  auto promise = std::make_shared<std::promise<Opened>>();
  std::future<Opened> future = promise->get_future();
  // The services stay valid for the thread even when it outlives this call (and the Host).
  std::thread([promise, library, host, keep = HostServices::Retain(host), namespace_id, options] {
    (void)keep;
    promise->set_value(ProviderInstance::Open(library, host, namespace_id, options));
  }).detach();
  if (future.wait_for(std::chrono::nanoseconds(timeout_ns)) != std::future_status::ready) {
    return Status::IoError("open did not return within " + std::to_string(timeout_ns / 1000000) +
                           " ms");
  }
  return future.get();
}

// tier_info.buffer_alignment: every segment pointer the Host passes is a Host copy's, aligned to
// HostCopy::kSegmentAlignmentBytes; a provider that needs more cannot be served.
Status CheckBufferAlignment(uint64_t alignment_bytes) {
  if (alignment_bytes == 0 || (alignment_bytes & (alignment_bytes - 1)) != 0) {
    return Status::InvalidArgument("buffer_alignment " + std::to_string(alignment_bytes) +
                                   " is not a power of two (1 = any)");
  }
  if (alignment_bytes > HostCopy::kSegmentAlignmentBytes) {
    return Status::Unsupported("buffer_alignment " + std::to_string(alignment_bytes) +
                               " is above the " + std::to_string(HostCopy::kSegmentAlignmentBytes) +
                               " bytes the Host aligns every segment to");
  }
  return Status::Ok();
}

bool IsKvKind(tier_segment_kind kind) {
  return kind == TIER_SEGMENT_MAIN_KV || kind == TIER_SEGMENT_SPEC_KV;
}

}  // namespace

Status Host::Impl::OpenProvider() {
  if (options_.plugin.empty()) return Status::Ok();
  const std::string path = ResolvePluginPath(options_.plugin);
  auto library = PluginLibrary::Load(path, services_->table());
  if (!library.ok()) return library.status();
  auto instance = OpenWithin(library.value(), services_->table(), options_.namespace_id,
                             options_.provider_options, options_.provider_timeout_ns);
  if (!instance.ok()) {
    return instance.status().Annotate(std::string("cannot open the ") + library.value()->name() +
                                      " provider (" + path + ")");
  }
  provider_name_ = library.value()->name();
  ColdTier::Options cold_options;
  cold_options.threads = options_.provider_threads;
  cold_options.timeout_ns = options_.provider_timeout_ns;
  if (!options_.encryption.key_file.empty()) {
    auto cipher = SegmentCipher::Open(options_.namespace_id, options_.encryption.key_file,
                                      options_.encryption.old_key_files);
    if (!cipher.ok()) return cipher.status().Annotate("encryption at rest");
    cold_options.cipher = std::move(cipher).value();
    Log(TIER_LOG_INFO, "host: encryption at rest on (AES-256-GCM, key id " +
                           cold_options.cipher->key_id_hex() + ", " +
                           std::to_string(options_.encryption.old_key_files.size()) +
                           " older key(s) for reading)");
  }
  cold_ = std::make_unique<ColdTier>(std::move(instance).value(), queue_.get(), cold_options);
  auto info = cold_->InfoWithin();
  if (!info.ok()) return info.status().Annotate(provider_name_ + ": info");
  provider_info_ = info.value();
  io_path_ = provider_info_.io_path != nullptr ? provider_info_.io_path : "";
  if (Status aligned = CheckBufferAlignment(provider_info_.buffer_alignment); !aligned.ok()) {
    return aligned.Annotate(provider_name_ + ": info");
  }
  auto stats = cold_->StatsWithin();
  if (!stats.ok()) return stats.status().Annotate(provider_name_ + ": stats");
  cold_capacity_bytes_ = stats.value().capacity_bytes;
  shared_tier_ = (provider_info_.capabilities & TIER_CAP_SHARED) != 0 && cold_->has_probe();
  max_restores_ = options_.max_inflight_restores;
  if (provider_info_.max_inflight_ops > 0) {
    max_restores_ = std::min(max_restores_, provider_info_.max_inflight_ops);
  }
  Log(TIER_LOG_INFO, "host: cold tier " + provider_name_ + " (" + path + ")" +
                         (io_path_.empty() ? std::string() : ", io path " + io_path_) +
                         ", capacity " + std::to_string(cold_capacity_bytes_) + " stored bytes" +
                         (shared_tier_ ? ", shared (probe at admission)" : ""));
  return Status::Ok();
}

Result<std::unique_ptr<CheckpointEntry>> Host::Impl::EntryFromStored(
    const tier_key& key, std::vector<uint64_t> blocks, std::span<const tier_segment_info> stored,
    uint64_t stored_bytes) const {
  const device::PoolLayout& layout = device_->pool().layout;
  const tier_segment_info* first = nullptr;
  for (const tier_segment_info& s : stored) {
    if (s.kind == TIER_SEGMENT_MAIN_KV && s.index == 0) first = &s;
  }
  const uint64_t layer_page_bytes = layout.layer_page_bytes(0);
  if (first == nullptr || first->length_bytes == 0 || first->length_bytes % layer_page_bytes != 0) {
    return Status::InvalidArgument("no MAIN_KV layer 0 of whole pages of this pool");
  }
  const uint32_t pages = static_cast<uint32_t>(first->length_bytes / layer_page_bytes);
  auto entry = std::make_unique<CheckpointEntry>();
  entry->key = key;
  entry->blocks = std::move(blocks);
  entry->page_count = pages;
  entry->tokens = static_cast<uint64_t>(pages) * layout.tokens_per_page();
  std::vector<tier_segment_info> rest(stored.begin(), stored.end());
  for (uint32_t l = 0; l < device_->kv_layers(); ++l) {
    const SegmentSpec want = device_->LayerSegment(l, pages);
    auto it = std::find_if(rest.begin(), rest.end(), [&](const tier_segment_info& s) {
      return s.kind == want.kind && s.index == want.index;
    });
    if (it == rest.end() || it->length_bytes != want.physical_bytes) {
      return Status::InvalidArgument("KV layer " + std::to_string(l) +
                                     " is missing or of another size");
    }
    rest.erase(it);
    entry->segments.push_back(want);
  }
  entry->kv_segments = device_->kv_layers();
  std::sort(rest.begin(), rest.end(), [](const tier_segment_info& a, const tier_segment_info& b) {
    auto rank = [](tier_segment_kind k) {
      return k == TIER_SEGMENT_MANIFEST ? 1 : k == TIER_SEGMENT_OTHER ? 2 : 0;
    };
    if (rank(a.kind) != rank(b.kind)) return rank(a.kind) < rank(b.kind);
    return a.kind != b.kind ? a.kind < b.kind : a.index < b.index;
  });
  bool manifest = false;
  for (const tier_segment_info& s : rest) {
    if (IsKvKind(s.kind) && s.kind == TIER_SEGMENT_MAIN_KV) {
      return Status::InvalidArgument("a MAIN_KV layer beyond the pool's");
    }
    if (s.kind == TIER_SEGMENT_OTHER && s.index != 0) {
      return Status::InvalidArgument("an OTHER segment this host did not write");
    }
    manifest = manifest || s.kind == TIER_SEGMENT_MANIFEST;
    entry->segments.push_back({s.kind, s.index, s.length_bytes});
  }
  if (!manifest) return Status::InvalidArgument("no manifest segment");
  for (const SegmentSpec& s : entry->segments) entry->physical_bytes += s.physical_bytes;
  entry->logical_bytes = LogicalOf(entry->segments);
  entry->prefill_saved_ns = cost_.RootPrefillNs(entry->tokens);
  entry->cold_stored_bytes = stored_bytes;
  return entry;
}

Status Host::Impl::Readopt() {
  if (cold_ == nullptr || cold_capacity_bytes_ == 0) return Status::Ok();
  uint64_t adopted = 0, refused = 0;
  const SegmentCipher* cipher = cold_->cipher();
  const uint64_t unopened_before =
      cipher != nullptr ? cipher->tag_failures() + cipher->unknown_key() : 0;
  Status walked = cold_->EnumerateWithin([&](const tier_entry& e) {
    if (e.manifest == nullptr) {
      ++refused;
      return true;
    }
    auto m = DecodeManifest({static_cast<const std::byte*>(e.manifest), e.manifest_bytes});
    if (!m.ok() || m.value().namespace_id != options_.namespace_id ||
        m.value().bytes_scale != options_.bytes_scale ||
        !SameKey(PrefixKey(options_.namespace_id, m.value().blocks), e.key)) {
      ++refused;  // another layout or scale, or a key its blocks do not give: never served
      return true;
    }
    auto entry =
        EntryFromStored(e.key, m.value().blocks, {e.segments, e.segment_count}, e.stored_bytes);
    const uint64_t tpp = device_->pool().layout.tokens_per_page();
    if (!entry.ok() || m.value().tokens > entry.value()->tokens ||
        m.value().tokens + tpp <= entry.value()->tokens) {
      ++refused;
      return true;
    }
    CheckpointEntry& c = *entry.value();
    c.tokens = m.value().tokens;
    c.prefill_saved_ns = cost_.RootPrefillNs(c.tokens);
    c.shared_prefix = m.value().shared_prefix;
    c.has_parent = m.value().has_parent;
    c.parent_key = m.value().parent_key;
    c.manifest.assign(static_cast<const std::byte*>(e.manifest),
                      static_cast<const std::byte*>(e.manifest) + e.manifest_bytes);
    c.placements = kCold;
    c.readopted = true;
    policy_.OnInsert(&c, 0);
    if (catalog_.Insert(std::move(entry).value()) != nullptr) ++adopted;
    return true;
  });
  if (!walked.ok()) return walked.Annotate("re-adopting cold checkpoints");
  catalog_.RecountChildren();  // children may have been enumerated before their parents
  if (cipher != nullptr) {
    const uint64_t unopened = cipher->tag_failures() + cipher->unknown_key() - unopened_before;
    if (unopened > 0) {
      Log(TIER_LOG_WARN, "host: " + std::to_string(unopened) +
                             " cold manifest(s) did not open with this server's encryption keys "
                             "(another key, or tampered): not re-adopted, never served");
    }
  }
  stats_.readopted = adopted;
  server_metrics_->Readopted(adopted);
  Log(TIER_LOG_INFO,
      "host: re-adopted " + std::to_string(adopted) + " cold checkpoint(s) of namespace '" +
          options_.namespace_id + "'" +
          (refused > 0 ? ", ignored " + std::to_string(refused) + " of another layout or scale"
                       : std::string()));
  return Status::Ok();
}

}  // namespace tier
