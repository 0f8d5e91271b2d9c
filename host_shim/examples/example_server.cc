// example_server.cc -- the whole integration of the cold tier into a server's scheduler: open,
// admit, seal, release, shut down, through the installed headers and Host::Open alone. The pool
// is on the CPU path here; a server on a GPU passes its own CUDA engine and pool view.
//   example_server COLD_DIR     (prints what each request reused; exit 0 when the bytes held)
#include <tier/device/cpu_transfer_engine.h>
#include <tier/host/host.h>
#include <tier/host/identity.h>

#include <cstdio>
#include <cstring>
#include <vector>

using namespace tier;

std::vector<uint32_t> free_pages;  // the server's page allocator: a free list

// The scheduler loop's tier step: apply completions; pages the Host lets go are free again.
void PollHost(Host& host, std::vector<Event>* events) {
  events->clear();
  host.Poll(events);
  for (const Event& e : *events) {
    if (e.kind == Event::kPagesReleased)
      free_pages.insert(free_pages.end(), e.pages.begin(), e.pages.end());
  }
}

bool Allocate(uint32_t n, std::vector<uint32_t>* out) {
  if (free_pages.size() < n) return false;
  out->assign(free_pages.end() - n, free_pages.end());
  free_pages.resize(free_pages.size() - n);
  return true;
}

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  std::shared_ptr<device::TransferEngine> engine =
      std::move(device::MakeCpuTransferEngine({})).value();
  device::NinferLayoutSpec spec{.layers = 2, .kv_heads = 1, .head_dim = 64, .page_count = 512};
  device::DevicePool pool =
      std::move(engine->AllocatePool(device::MakeNinferLayout(spec).value())).value();
  for (uint32_t p = 0; p < spec.page_count; ++p) free_pages.push_back(p);
  auto state_memory = std::move(engine->AllocateDevice(4096)).value();
  std::vector<StateBuffer> lane = {{TIER_SEGMENT_STATE_IMAGE, 0, state_memory.data(), 4096}};

  HostOptions options;
  options.plugin = "disk";  // what --tier-plugin names
  options.provider_options = {{"dir", argv[1]}, {"capacity_gib", "1"}};
  options.namespace_id = "example-model/int8/L2H1D64";
  options.profile = LoadModelProfile(ResolveProfilePath("qwen3.8-27b-int8-rtx5090")).value();
  options.profile.full_attention_layers = spec.layers;  // the profile describes this pool (its
  options.profile.mtp_layers = 0;                       // layers, its page size): Open checks
  options.block_tokens = 64;  // each block id stands for 64 tokens: Seal checks blocks vs tokens
  options.pool = {pool.layout, pool.view, 0};
  options.engine = engine;
  options.device_capacity_bytes = 0;  // tiny budgets: one checkpoint in Host, the next to Cold
  options.host_capacity_bytes = 100 << 10;
  auto opened = Host::Open(options);
  if (!opened.ok()) return std::fprintf(stderr, "%s\n", opened.status().ToString().c_str()), 2;
  Host& host = *opened.value();

  const std::vector<uint64_t> prompts[] = {{11, 12, 13, 14}, {21, 22}, {11, 12, 13, 14}};
  std::vector<Event> events;
  for (int turn = 0; turn < 3; ++turn) {
    const std::vector<uint64_t>& prompt = prompts[turn];  // block hashes, 64 tokens a block
    char kv[32] = {};
    std::snprintf(kv, sizeof(kv), "KV of block %llu", static_cast<unsigned long long>(prompt[0]));
    AdmitRequest request{prompt, static_cast<uint64_t>(turn) * 1000000000, Allocate, lane};
    Admission a = host.Admit(request);
    while (a.state == AdmissionState::kPending) {  // a real scheduler decodes other lanes here
      host.WaitForWork(1000000);
      PollHost(host, &events);
      for (const Event& e : events) {
        if (e.id == a.id && e.kind != Event::kPagesReleased) a = e.admission;
      }
    }
    std::printf("turn %d: %s, %llu tokens reused%s%s\n", turn, OutcomeName(a.outcome),
                static_cast<unsigned long long>(a.cached_tokens),
                a.state == AdmissionState::kRoot ? ", reason " : "",
                a.state == AdmissionState::kRoot ? RootReasonName(a.root_reason) : "");
    free_pages.insert(free_pages.end(), a.unused_pages.begin(), a.unused_pages.end());  // ours
    if (a.state == AdmissionState::kReady) {  // the engine checks what came back (optional)
      if (a.pages_shared && !a.state_copy.Wait().ok()) return 1;  // a Device hit: state copy first
      const bool exact = std::memcmp(pool.page(0, 0, a.pages[0]), kv, sizeof(kv)) == 0;
      host.ReportVerification(a.id, exact);
      if (!exact) return 1;
      host.Release(a.id);  // decoding done; restored pages (not shared ones) are ours again
      if (!a.pages_shared) free_pages.insert(free_pages.end(), a.pages.begin(), a.pages.end());
    } else {  // root prefill into fresh pages, then park the state the request computed
      std::vector<uint32_t> pages;
      if (!Allocate(prompt.size(), &pages)) return 1;
      std::memcpy(pool.page(0, 0, pages[0]), kv, sizeof(kv));
      SealRequest seal{prompt, prompt.size() * 64, false, pages, lane, {}, request.now_ns};
      if (!host.Seal(seal).status.ok()) return 1;  // the Host holds the pages until released
    }
    while (host.Busy()) {  // let the seal's copies and the spill to Cold finish
      host.WaitForWork(1000000);
      PollHost(host, &events);
    }
  }
  return 0;  // ~Host: closes the provider; the checkpoint stays on disk for the next start
}
