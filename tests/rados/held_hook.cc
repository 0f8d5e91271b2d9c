#include "held_hook.h"

#include <chrono>
#include <vector>

namespace tier::rados::test {

std::function<void(const KeyBytes&)> HeldHook::Hook() {
  return [this](const KeyBytes&) {
    std::unique_lock lock(mu_);
    held_ = true;
    cv_.notify_all();
    cv_.wait_for(lock, std::chrono::seconds(60), [&] { return release_; });
  };
}

bool HeldHook::WaitHeld(int timeout_s) {
  std::unique_lock lock(mu_);
  return cv_.wait_for(lock, std::chrono::seconds(timeout_s), [&] { return held_; });
}

void HeldHook::Release() {
  {
    std::lock_guard lock(mu_);
    release_ = true;
  }
  cv_.notify_all();
}

Result<std::unique_ptr<RadosProvider>> OpenHooked(HostServices& services,
                                                  const std::string& namespace_id,
                                                  const ProviderOptions& options,
                                                  RadosHooks hooks) {
  std::vector<tier_option> raw;
  for (const auto& [k, v] : options) raw.push_back({k.c_str(), v.c_str()});
  return RadosProvider::Open(services.table(), namespace_id, raw, std::move(hooks));
}

}  // namespace tier::rados::test
