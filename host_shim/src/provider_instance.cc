#include <tier/host/host_services.h>
#include <tier/host/provider_instance.h>

#include <algorithm>
#include <chrono>
#include <future>

namespace tier {
namespace {

Status FromError(tier_status code, const tier_error& error) {
  return Status(code, error.message[0] != '\0' ? std::string(error.message) : std::string());
}

void Trampoline(void* user_data, const tier_completion* completion) {
  auto* done = static_cast<ProviderInstance::Done*>(user_data);
  try {
    Completion result;
    if (completion == nullptr) {
      result.status = Status(TIER_INTERNAL, "provider passed a NULL completion");
    } else {
      result.status =
          Status(completion->status, completion->message != nullptr ? completion->message : "");
      result.logical_bytes = completion->logical_bytes;
      result.stored_bytes = completion->stored_bytes;
      result.duration_ns = completion->duration_ns;
    }
    (*done)(result);
  } catch (...) {
    // Never let an exception travel into the provider's thread.
  }
  delete done;
}

using SubmitFn = tier_status (*)(tier_instance*, const tier_key*, const tier_segment*, uint32_t,
                                 tier_done_fn, void*, tier_error*);

Status Submit(SubmitFn fn, tier_instance* instance, const tier_key& key,
              std::span<const tier_segment> segments, ProviderInstance::Done done) {
  if (instance == nullptr) return Status(TIER_INVALID_ARGUMENT, "instance is closed");
  auto* heap_done = new ProviderInstance::Done(std::move(done));
  tier_error error{};
  const tier_status code =
      fn(instance, &key, segments.data(), static_cast<uint32_t>(segments.size()), Trampoline,
         heap_done, &error);
  if (code != TIER_OK) {
    delete heap_done;  // refused: the callback never runs
    return FromError(code, error);
  }
  return Status::Ok();
}

Completion Wait(const std::function<Status(ProviderInstance::Done)>& submit, uint64_t timeout_ns) {
  auto promise = std::make_shared<std::promise<Completion>>();
  auto future = promise->get_future();
  Status accepted = submit([promise](const Completion& c) { promise->set_value(c); });
  if (!accepted.ok()) {
    Completion refused;
    refused.status = accepted;
    return refused;
  }
  if (future.wait_for(std::chrono::nanoseconds(timeout_ns)) != std::future_status::ready) {
    Completion late;
    late.status = Status::IoError("no completion from the provider within " +
                                  std::to_string(timeout_ns / 1000000) + " ms");
    return late;
  }
  return future.get();
}

}  // namespace

Result<std::unique_ptr<ProviderInstance>> ProviderInstance::Open(
    std::shared_ptr<PluginLibrary> library, const tier_host_services* host,
    const std::string& namespace_id, const ProviderOptions& options) {
  // Held before the provider sees the table: an open that returns after its caller gave up still
  // finds it (and inert services, once their owner is gone).
  std::shared_ptr<const void> services = HostServices::Retain(host);
  std::vector<tier_option> raw;
  raw.reserve(options.size());
  for (const auto& [key, value] : options) raw.push_back({key.c_str(), value.c_str()});
  tier_error error{};
  tier_instance* instance = nullptr;
  const tier_status code = library->table()->open(
      host, namespace_id.c_str(), raw.data(), static_cast<uint32_t>(raw.size()), &instance, &error);
  if (code != TIER_OK) return FromError(code, error);
  if (instance == nullptr) {
    return Status(TIER_INTERNAL, std::string(library->name()) + ": open returned no instance");
  }
  std::unique_ptr<ProviderInstance> result(new ProviderInstance());
  result->library_ = std::move(library);
  result->instance_ = instance;
  result->namespace_id_ = namespace_id;
  result->services_ = std::move(services);
  return result;
}

void ProviderInstance::Abandon() {
  instance_ = nullptr;
  // The provider may call its services from threads of its own for ever: never released.
  if (services_ != nullptr) new std::shared_ptr<const void>(std::move(services_));
}

ProviderInstance::~ProviderInstance() {
  Close();
}

void ProviderInstance::Close() {
  if (instance_ == nullptr) return;
  library_->table()->close(instance_);
  instance_ = nullptr;
}

Result<tier_info> ProviderInstance::Info() const {
  tier_info info{};
  info.struct_size = sizeof(info);
  tier_error error{};
  const tier_status code = library_->table()->info(instance_, &info, &error);
  if (code != TIER_OK) return FromError(code, error);
  return info;
}

Result<tier_stats> ProviderInstance::Stats() const {
  tier_stats stats{};
  stats.struct_size = sizeof(stats);
  tier_error error{};
  const tier_status code = library_->table()->stats(instance_, &stats, &error);
  if (code != TIER_OK) return FromError(code, error);
  return stats;
}

Result<StatResult> ProviderInstance::Stat(const tier_key& key) const {
  StatResult result;
  result.stat.struct_size = sizeof(result.stat);
  tier_error error{};
  // Two passes: learn the count, then fetch the table (retry if it changed meanwhile).
  for (int attempt = 0; attempt < 4; ++attempt) {
    const tier_status code =
        library_->table()->stat(instance_, &key, &result.stat, result.segments.data(),
                                static_cast<uint32_t>(result.segments.size()), &error);
    if (code != TIER_OK) return FromError(code, error);
    if (result.stat.segment_count <= result.segments.size()) {
      result.segments.resize(result.stat.segment_count);
      return result;
    }
    result.segments.resize(result.stat.segment_count);
  }
  return Status(TIER_BUSY, "segment table kept changing during stat");
}

// Counts the operation as outstanding until the provider delivers its completion. The count drops
// before `done` runs: `done` is what wakes a waiter (SpillAndWait, a Host's Poll), and a waiter
// that reads outstanding() must not find the operation it just saw complete.
ProviderInstance::Done Counted(std::shared_ptr<std::atomic<uint64_t>> outstanding,
                               ProviderInstance::Done done) {
  ++*outstanding;
  return [outstanding, done = std::move(done)](const Completion& c) {
    --*outstanding;
    done(c);
  };
}

Status ProviderInstance::Spill(const tier_key& key, std::span<const tier_segment> segments,
                               Done done) {
  Status accepted = Submit(library_->table()->spill, instance_, key, segments,
                           Counted(outstanding_, std::move(done)));
  if (!accepted.ok()) --*outstanding_;
  return accepted;
}

Status ProviderInstance::Restore(const tier_key& key, std::span<const tier_segment> segments,
                                 Done done) {
  Status accepted = Submit(library_->table()->restore, instance_, key, segments,
                           Counted(outstanding_, std::move(done)));
  if (!accepted.ok()) --*outstanding_;
  return accepted;
}

Completion ProviderInstance::SpillAndWait(const tier_key& key,
                                          std::span<const tier_segment> segments,
                                          uint64_t timeout_ns) {
  return Wait([&](Done done) { return Spill(key, segments, std::move(done)); }, timeout_ns);
}

Completion ProviderInstance::RestoreAndWait(const tier_key& key,
                                            std::span<const tier_segment> segments,
                                            uint64_t timeout_ns) {
  return Wait([&](Done done) { return Restore(key, segments, std::move(done)); }, timeout_ns);
}

bool ProviderInstance::has_probe() const {
  return library_->HasSlot(offsetof(tier_provider, probe), sizeof(void*));
}

Result<std::vector<uint8_t>> ProviderInstance::Probe(std::span<const tier_key> keys) const {
  if (!has_probe()) return Status::Unsupported(std::string(library_->name()) + ": no probe");
  if (instance_ == nullptr) return Status::InvalidArgument("instance is closed");
  std::vector<uint8_t> found(keys.size(), 0);
  for (size_t first = 0; first < keys.size(); first += TIER_PROBE_MAX_KEYS) {
    const uint32_t count =
        static_cast<uint32_t>(std::min<size_t>(TIER_PROBE_MAX_KEYS, keys.size() - first));
    tier_error error{};
    const tier_status code = library_->table()->probe(instance_, keys.data() + first, count,
                                                      found.data() + first, &error);
    if (code != TIER_OK) return FromError(code, error);
  }
  for (uint8_t& f : found) f = f != 0 ? 1 : 0;
  return found;
}

EntryCopy EntryCopy::Of(const tier_entry& entry) {
  EntryCopy copy;
  copy.key = entry.key;
  copy.logical_bytes = entry.logical_bytes;
  copy.stored_bytes = entry.stored_bytes;
  if (entry.segments != nullptr) {
    copy.segments.assign(entry.segments, entry.segments + entry.segment_count);
  }
  copy.has_manifest = entry.manifest != nullptr;
  if (copy.has_manifest) {
    const auto* bytes = static_cast<const std::byte*>(entry.manifest);
    copy.manifest.assign(bytes, bytes + entry.manifest_bytes);
  }
  if (TIER_HAS_FIELD(&entry, tier_entry, created_unix_ns)) {
    copy.created_unix_ns = entry.created_unix_ns;
  }
  if (TIER_HAS_FIELD(&entry, tier_entry, last_used_unix_ns)) {
    copy.last_used_unix_ns = entry.last_used_unix_ns;
  }
  return copy;
}

tier_entry EntryCopy::view() const {
  tier_entry entry{};
  entry.struct_size = sizeof(entry);
  entry.segment_count = static_cast<uint32_t>(segments.size());
  entry.key = key;
  entry.logical_bytes = logical_bytes;
  entry.stored_bytes = stored_bytes;
  entry.segments = segments.data();
  entry.manifest = has_manifest ? manifest.data() : nullptr;
  entry.manifest_bytes = manifest.size();
  entry.created_unix_ns = created_unix_ns;
  entry.last_used_unix_ns = last_used_unix_ns;
  return entry;
}

Status ProviderInstance::Remove(const tier_key& key) {
  tier_error error{};
  const tier_status code = library_->table()->remove(instance_, &key, &error);
  return code == TIER_OK ? Status::Ok() : FromError(code, error);
}

Status ProviderInstance::Enumerate(const std::function<bool(const tier_entry&)>& visit) const {
  struct Context {
    const std::function<bool(const tier_entry&)>* visit;
  } context{&visit};
  auto callback = [](void* user_data, const tier_entry* entry) -> int32_t {
    auto* ctx = static_cast<Context*>(user_data);
    try {
      return (*ctx->visit)(*entry) ? 0 : 1;
    } catch (...) {
      return 1;
    }
  };
  tier_error error{};
  const tier_status code = library_->table()->enumerate(instance_, callback, &context, &error);
  return code == TIER_OK ? Status::Ok() : FromError(code, error);
}

Result<tier_plan> ProviderInstance::PlanRestore(const tier_key& key,
                                                uint64_t predicted_prefill_ns) const {
  tier_plan plan{};
  plan.struct_size = sizeof(plan);
  tier_error error{};
  const tier_status code =
      library_->table()->plan_restore(instance_, &key, predicted_prefill_ns, &plan, &error);
  if (code != TIER_OK) return FromError(code, error);
  return plan;
}

}  // namespace tier
