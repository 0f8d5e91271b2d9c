// held_pages.cc -- HostOptions::verify_held_pages: the pages a Device placement holds are
// checksummed when sealed and checked whenever the Host reads them (a demotion, a Device hit), so
// a server that writes a page the Host holds gets an error naming the page, not silent corruption.
#include <tier/host/identity.h>
#include <tier/host/log.h>
#include <xxhash.h>
#if TIER_HAVE_XXH3_DISPATCH
#include <xxh_x86dispatch.h>  // XXH3_* become xxHash's AVX2/AVX-512 dispatcher: see CMakeLists.txt
#endif

#include "host_impl.h"

namespace tier {

std::vector<uint64_t> Host::Impl::PageSums(const HostCopy& copy, uint32_t pages) const {
  const device::PoolLayout& layout = device_->pool().layout;
  std::vector<uint64_t> sums(pages, 0);
  for (uint32_t l = 0; l < device_->kv_layers(); ++l) {
    const std::byte* segment = copy.segment(l).data();
    for (uint32_t q = 0; q < layout.plane_count(l); ++q) {
      const uint64_t plane_bytes = layout.plane(l, q).bytes_per_page;
      const uint64_t base = layout.segment_plane_offset(l, q, pages);
      for (uint32_t i = 0; i < pages; ++i) {
        sums[i] = XXH3_64bits_withSeed(segment + base + i * plane_bytes, plane_bytes, sums[i]);
      }
    }
  }
  return sums;
}

bool Host::Impl::HeldPagesIntact(CheckpointEntry* e, const HostCopy& copy, const char* when) {
  if (e->page_sums.empty() || e->device_copy == nullptr) return true;
  const std::vector<uint64_t> sums = PageSums(copy, e->page_count);
  for (uint32_t i = 0; i < e->page_count; ++i) {
    if (sums[i] == e->page_sums[i]) continue;
    ++stats_.held_page_mismatches;
    Log(TIER_LOG_ERROR, "host: page " + std::to_string(e->device_copy->pages[i]) + " (index " +
                            std::to_string(i) + ") of checkpoint " + KeyHex(e->key) +
                            " changed while the Host held it (found at " + when +
                            "): the server wrote a page before Event::kPagesReleased named it; "
                            "the checkpoint leaves every tier");
    e->doomed = true;
    if (e->in(kCold)) DropCold(e, IoPhase::kEviction);
    return false;
  }
  return true;
}

void Host::Impl::CheckHitReads() {
  std::vector<HitCheck> pending;
  for (HitCheck& c : hit_checks_) {
    if (!c.job.Done()) {
      pending.push_back(std::move(c));
      continue;
    }
    const Status read = c.job.Wait();
    CheckpointEntry* e = catalog_.Find(c.key);
    TIER_CHECK(e != nullptr);
    if (read.ok() && !e->doomed) HeldPagesIntact(e, *c.copy, "a Device hit");
    Unpin(e);
  }
  hit_checks_ = std::move(pending);
}

void Host::Impl::StartHitCheck(CheckpointEntry* e) {
  if (!options_.verify_held_pages || e->page_sums.empty()) return;
  auto scratch = memory_->NewKvScratch(*e);
  if (!scratch.ok()) {
    Log(TIER_LOG_DEBUG, "host: no host memory to verify the pages of " + KeyHex(e->key));
    return;
  }
  auto gathered = device_->ToHost(e->device_copy->pages, {}, *scratch.value());
  if (!gathered.ok()) return;
  ++e->pins;  // its pages stay held until they were read
  hit_checks_.push_back({e->key, std::move(scratch).value(), std::move(gathered).value()});
}

}  // namespace tier
