#include "provider_runner.h"

#include <tier/host/host_services.h>

#include <algorithm>

namespace tier::bench {
namespace {

Result<OpTiming> Finish(const Completion& done, uint64_t t0, const char* what) {
  const uint64_t wall = MonotonicNs() - t0;
  if (!done.status.ok()) {
    return Status(done.status.code(), std::string(what) + ": " + done.status.ToString());
  }
  return OpTiming{wall, done.logical_bytes, done.stored_bytes};
}

}  // namespace

Result<std::unique_ptr<ProviderRunner>> ProviderRunner::Open(
    const std::string& plugin, const std::string& namespace_id, const ProviderOptions& options,
    const std::string& encryption_key_file) {
  std::unique_ptr<ProviderRunner> runner(new ProviderRunner());
  if (!encryption_key_file.empty()) {
    auto cipher = SegmentCipher::Open(namespace_id, encryption_key_file, {});
    if (!cipher.ok()) return cipher.status();
    runner->cipher_ = cipher.take();
  }
  runner->host_ = std::make_unique<HostServices>(&runner->registry_);
  auto library = PluginLibrary::Load(ResolvePluginPath(plugin), runner->host_->table());
  if (!library.ok()) return library.status();
  runner->library_ = library.take();
  auto instance =
      ProviderInstance::Open(runner->library_, runner->host_->table(), namespace_id, options);
  if (!instance.ok()) {
    return Status(instance.status().code(), "open " + plugin + ": " + instance.status().ToString());
  }
  runner->instance_ = instance.take();
  auto info = runner->instance_->Info();
  if (!info.ok()) return info.status();
  runner->io_path_ = info.value().io_path != nullptr ? info.value().io_path : "?";
  runner->name_ = info.value().name != nullptr ? info.value().name : "?";
  return runner;
}

ProviderRunner::~ProviderRunner() {
  if (instance_) instance_->Close();
}

Result<OpTiming> ProviderRunner::Spill(const tier_key& key, const CheckpointShape& shape,
                                       const SegmentBuffers& buffers) {
  const std::vector<tier_segment> table = buffers.Table(shape);
  const uint64_t t0 = MonotonicNs();
  if (cipher_ == nullptr) return Finish(instance_->SpillAndWait(key, table), t0, "spill");
  auto sealed = cipher_->Prepare(key, table, true);
  if (!sealed.ok()) return sealed.status();
  return Finish(instance_->SpillAndWait(key, sealed.value()->stored), t0, "spill");
}

Result<OpTiming> ProviderRunner::Restore(const tier_key& key, const CheckpointShape& shape,
                                         SegmentBuffers& buffers) {
  const std::vector<tier_segment> table = buffers.Table(shape);
  const uint64_t t0 = MonotonicNs();
  if (cipher_ == nullptr) return Finish(instance_->RestoreAndWait(key, table), t0, "restore");
  auto sealed = cipher_->Prepare(key, table, false);
  if (!sealed.ok()) return sealed.status();
  Completion done = instance_->RestoreAndWait(key, sealed.value()->stored);
  if (done.status.ok()) {
    if (Status opened = cipher_->OpenAll(key, *sealed.value()); !opened.ok()) done.status = opened;
    done.logical_bytes -=
        std::min<uint64_t>(done.logical_bytes, table.size() * SegmentCipher::kHeaderBytes);
  }
  return Finish(done, t0, "restore");
}

Status ProviderRunner::Remove(const tier_key& key) {
  return instance_->Remove(key);
}

}  // namespace tier::bench
