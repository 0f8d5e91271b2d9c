// host_fixture.h -- a Host over a tiny model profile (sizes easy to reason about), the
// simulator's paged pool on the CPU engine, and a provider chosen per test. Seal and Admit go
// through the public API exactly as a server's scheduler thread would; the fixture plays the
// server: it owns pages and state buffers and checks every restored byte.
#pragma once

#include <gtest/gtest.h>
#include <tier/host/host.h>
#include <tier/host/metrics_registry.h>

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kv_pool.h"

namespace tier::host::test {

// 2 layers of 64 bytes per token (4 KiB a page a layer), a 1000-byte state image, a 100-byte
// hidden state.
ModelProfile TinyProfile();

constexpr uint8_t kD = 1, kH = 2, kC = 4;  // placement bits of PlacementsOf()

class HostTest : public ::testing::Test {
 protected:
  // Opens the Host over `plugin` with Device and Host budgets in logical bytes; `tweak` may
  // change any other option first.
  void Open(const std::string& plugin, const ProviderOptions& options, uint64_t device_bytes,
            uint64_t host_bytes, const std::function<void(HostOptions&)>& tweak = nullptr);
  Result<std::unique_ptr<Host>> TryOpen(const std::string& plugin, const ProviderOptions& options,
                                        const std::function<void(HostOptions&)>& tweak = nullptr);
  void TearDown() override;

  // Logical bytes of a checkpoint of `blocks` blocks (its manifest estimated at 200 bytes).
  uint64_t Bytes(size_t blocks) const { return blocks * 65536 + 1100 + 200; }
  static std::vector<uint64_t> Blocks(uint64_t base, size_t n);

  // Seals the checkpoint of `blocks` (512 tokens each) the way a finished request would: fresh
  // pages filled with the prefix's KV, state of its key. Runs the Host until idle. True on OK.
  bool Seal(const std::vector<uint64_t>& blocks, uint64_t now_s, bool shared_prefix = false);
  // The same seal, returned at once: no Poll, nothing settled.
  Sealed SealNow(const std::vector<uint64_t>& blocks, uint64_t now_s, bool shared_prefix = false);
  // Seals `blocks` at t=1 s, then three newer one-block checkpoints, so that with Device and Host
  // budgets of 1.5 checkpoints it is pushed down to Cold (asserted).
  void SealAndPushToCold(const std::vector<uint64_t>& blocks);
  // Admit as a server's scheduler does: the immediate answer (pending, ready or root).
  Admission Admit(const std::vector<uint64_t>& blocks, uint64_t now_s);
  // Admit and run the Host until the admission has ended; checks the bytes of a ready one.
  Admission AdmitAndWait(const std::vector<uint64_t>& blocks, uint64_t now_s);
  // Runs the Host until `id` ended (or `timeout_ms`); the final admission, if it ended.
  std::optional<Admission> WaitFor(uint64_t id, int timeout_ms = 10000);
  // The request that used `admission` is done.
  void Release(const Admission& admission);
  // Polls the Host until it has nothing in flight (bounded); applies every event.
  void Settle(int timeout_ms = 10000);
  void PollOnce();

  uint8_t PlacementsOf(const std::vector<uint64_t>& blocks) const;
  std::optional<CheckpointInfo> Info(const std::vector<uint64_t>& blocks) const;
  double Counter(const std::string& series) const;  // a line of the exposition, or -1

  ModelProfile profile_ = TinyProfile();
  std::string namespace_id_ = "host-test";  // HostOptions::namespace_id of every Open
  std::string tenant_;  // the tenant of Seal, Admit and Info (issue 23); "" for none
  MetricsRegistry registry_;
  std::shared_ptr<device::TransferEngine> engine_;
  std::unique_ptr<sim::KvPool> pool_;
  std::unique_ptr<Host> host_;
  std::vector<Event> events_;                             // every event seen, in order
  std::map<uint64_t, Admission> ended_;                   // admissions that ended through an event
  std::map<uint64_t, std::vector<uint32_t>> held_pages_;  // ready admission -> its pages
  std::map<uint64_t, std::unique_ptr<sim::KvPool::StateSet>> lanes_;    // admission -> lane
  std::map<uint64_t, std::unique_ptr<sim::KvPool::StateSet>> sealing_;  // seal -> state
  uint64_t verified_ = 0, mismatched_ = 0;  // byte checks of ready admissions

  // Checks the pages and lane state of a ready admission against what the model holds, and tells
  // the Host (ReportVerification). True when exact.
  bool Check(const std::vector<uint64_t>& blocks, const Admission& admission);

 private:
  void Apply(const Event& event);
  void TakePages(const Admission& admission);
};

}  // namespace tier::host::test
