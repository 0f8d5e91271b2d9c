// held_hook.h -- what the rados suites that reach inside the provider share: the provider opened
// in process with test hooks (RadosHooks), and a hook that holds the provider's thread at that
// point until the test releases it.
#pragma once

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "format.h"
#include "rados_provider.h"
#include "rados_test_env.h"

namespace tier::rados::test {

// A hook that, when the provider calls it, marks itself held and waits (up to 60 s) for
// Release(). Declare it before the provider that calls it, and its ReleaseAtExit() guard after,
// so that however the test ends the hold ends before the provider closes.
class HeldHook {
 public:
  HeldHook() = default;
  HeldHook(const HeldHook&) = delete;
  HeldHook& operator=(const HeldHook&) = delete;

  std::function<void(const KeyBytes&)> Hook();
  // Waits up to `timeout_s` for the provider to reach the hook; true once it has.
  bool WaitHeld(int timeout_s);
  void Release();

  class Guard {
   public:
    explicit Guard(HeldHook* hook) : hook_(hook) {}
    Guard(const Guard&) = delete;
    Guard& operator=(const Guard&) = delete;
    ~Guard() { hook_->Release(); }

   private:
    HeldHook* hook_;
  };
  Guard ReleaseAtExit() { return Guard(this); }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool held_ = false, release_ = false;
};

// RadosProvider::Open (in process, not through the ABI table) with `options` and `hooks`, over
// `services` (which must outlive it).
Result<std::unique_ptr<RadosProvider>> OpenHooked(HostServices& services,
                                                  const std::string& namespace_id,
                                                  const ProviderOptions& options, RadosHooks hooks);

}  // namespace tier::rados::test
