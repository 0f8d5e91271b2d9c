// tier/host/host.h -- the cold tier as a library an inference server links: one catalog over
// Device (the server's paged KV pool), pinned Host memory and a Cold provider, with admission
// that never blocks the scheduler thread.
//
//   auto host = Host::Open(options);            // load --tier-plugin, open it, re-adopt (once)
//   Admission a = host->Admit(request);         // ready now, pending, or root prefill + reason
//   host->Poll(&events);                        // every scheduler iteration: completions arrive
//   host->Seal(checkpoint);                     // park what a finished request computed
//   host->Release(a.id);                        // the request that used a checkpoint is done
//   host.reset();                               // Close(): bounded, never hangs on a provider
//
// THREADS. One thread, the server's scheduler thread, makes every call on a Host and is the only
// thread that touches the catalog: the thread that called Open(). Every method marked "Scheduler
// thread" checks it (TIER_CHECK: a call from another thread aborts, naming the method), and none
// may be called from inside the server's PageAllocator (it runs inside Admit and Poll). Nothing a
// Host method does waits for a disk, a network or a provider: provider calls run on the Host's
// own provider threads under a deadline, device copies on the transfer engine's stream (CUDA) or
// worker (CPU), and their completions only post events that Poll() applies. The exceptions are
// Open() and Close(), which the server calls at start and at shutdown, and WaitForWork(), a
// blocking helper for simulators and tests.
//
// PAGES. Device placement means "the KV pages are still resident in the server's pool". Every
// pool page is, at any moment, the server's or held by the Host:
//   - Seal (status ok, not `existed`): each page it names is held by the Host from the call until
//     an Event::kPagesReleased names it: when the gather into Host is done (a Host placement,
//     with its kSealed) or when the checkpoint leaves Device (a Device placement: pressure,
//     Evict, ReportVerification). The server must not write, free or reuse it until then. A page
//     sealed in several checkpoints is released once, when the last of them lets go of it. A
//     refused seal (status not ok) takes no page.
//   - A Device hit (Admission::pages_shared): `pages` are the Host's, shared read-only with the
//     request from Admit until Release(id); whatever pressure does meanwhile (a demotion queued
//     before the hit included) they are neither written nor named in kPagesReleased before the
//     Release. The server must not write them (copy a partial last page before appending), nor
//     free them: after Release they come back, if ever, through kPagesReleased.
//   - A Host or Cold restore: `allocate_pages` hands the server's free pages over; the Host writes
//     them until the admission's event (kAdmissionReady: they are the server's again, with the
//     restored KV, and the Host keeps no reference: the server frees them itself after Release;
//     kAdmissionCancelled or kAdmissionRoot: the server's, unwritten or to be overwritten).
//   - Admission::unused_pages: pages allocate_pages handed over that the admission does not use;
//     the server's again at once, whatever the state (each id once).
//   - A root admission writes nothing.
//
// STATE. A Device hit's state copy is queued on the engine (Admission::state_copy): wait() on it,
// or order later work after it, before reading the lane's state buffers. A Host or Cold restore's
// state copies are done when its kAdmissionReady arrives. Seal reads the state buffers until its
// kSealed event (or Sealed::copied).
//
// IDS. Admission, seal and prefetch ids come from one counter per Host: distinct across the
// three kinds, never 0, never reused. Events carry the id of what they end.
//
// BYTES. Every byte the Host moves is the server's: KV pages gathered from its pool (tier_cuda;
// the CPU path gives identical bytes), its state buffers (StateImage parts, hidden state,
// speculative state) and an opaque server manifest. A restore brings back all of them or none.
// The Host verifies identity (every block id), never content: content integrity is the provider's
// checksums plus whatever the server checks (ReportVerification when it finds wrong bytes).
//
// ORDERING (the GPU path). The Host's copies run on the transfer engine's own streams, which do
// not wait for the server's. "After this": SealRequest::order_after and AdmitRequest::order_after
// name the server's stream whose queued work writes (or still reads) the pages and state buffers
// the request names; the Host calls TransferEngine::OrderAfter on it right before it queues the
// gather, scatter or state copies, so they start only after everything the server queued on that
// stream by then. nullptr means the server has synchronized itself (the CPU path, or a server
// that waited); a server whose kernels run on the legacy default stream passes cudaStreamLegacy
// ((void*)0x1) or cudaStreamPerThread ((void*)0x2), never nullptr. "Before that": Sealed::copied
// and Admission::state_copy (and every completion event) are the Host's side:
// Transfer::MakeStreamWait orders the server's later work after them. On the CPU path a
// device::CpuStream (cpu_transfer_engine.h) plays the server's stream.
//
// SIGNALS. A provider may write to sockets (librados does: to its OSDs and mons). A server must
// ignore SIGPIPE (signal(SIGPIPE, SIG_IGN) before Open) or block it in every thread, so that a
// peer that hangs up costs an EPIPE the provider handles, not the process; this library never
// changes the process's signal dispositions. tier-host ignores SIGPIPE.
#pragma once

#include <tier/device/transfer_engine.h>
#include <tier/host/metrics_registry.h>
#include <tier/host/types.h>
#include <tier/status.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace tier {

class Host {
 public:
  // Loads and opens the provider, registers metrics, sets up the Device and Host tiers and
  // re-adopts what the cold tier still holds (a restart). Errors name the cause: no such plugin,
  // bad option, wrong ABI major, a provider that does not answer in time. Server start-up thread;
  // may block (bounded by provider_timeout_ns).
  static Result<std::unique_ptr<Host>> Open(HostOptions options);
  // Close(): cancels what is pending, writes Host copies to a persistent cold tier
  // (flush_host_at_close), waits up to close_timeout_ns in all for provider operations, closes
  // the provider; if one never completes it is abandoned (logged), never waited for forever.
  // Scheduler thread (the one that opened).
  ~Host();
  Host(const Host&) = delete;
  Host& operator=(const Host&) = delete;

  // Looks up the longest checkpoint whose identity is a prefix of request.blocks and starts
  // bringing it to the request: kReady at once for a Device hit, kPending for Host or Cold (an
  // event ends it), kRoot with the reason otherwise. Never blocks. Scheduler thread.
  // Borrows: `blocks` for the call; `allocate_pages` is called inside this call or a later Poll
  // (until the admission ends); the lane's `state` buffers are written until the admission's
  // event (kPending), or by `state_copy` (a Device hit). A ready admission pins its checkpoint
  // (and a Device hit its pages) until Release(id).
  Admission Admit(const AdmitRequest& request);
  // Ends a pending admission early (an aborted request). Its writes may still be in flight: an
  // Event::kAdmissionCancelled says when the pages and buffers are the server's again (its only
  // event; no kAdmissionReady or kAdmissionRoot follows). Returns false for an unknown, finished
  // or already cancelled id, and for a prefetch id. Scheduler thread.
  bool Cancel(uint64_t admission_id);
  // The request that used a ready admission is done: the checkpoint may degrade again (a Device
  // hit's pages go back to the Host: see PAGES). Unknown or already released ids are ignored.
  // Call it after the request's last read of the pages and of state_copy's buffers. Scheduler
  // thread.
  void Release(uint64_t admission_id);
  // Parks a checkpoint: holds its pages (Device placement) or copies them out (Host), reads its
  // state buffers, and makes room by the policy. Never blocks. Scheduler thread.
  // Borrows: `blocks`, `server_manifest` for the call; `state` buffers until the kSealed event;
  // `pages` until kPagesReleased names them (see PAGES). `existed` (the key was sealed already):
  // only its use time was touched, nothing is taken and no event follows.
  // Codes (Sealed::status; not ok = nothing taken, no event follows, the pages stay the
  // server's): INVALID_ARGUMENT for a request that does not fit the pool (pages, tokens, blocks,
  // state kinds; the message names what), BUSY while a checkpoint of the same key is being
  // removed, NO_SPACE when it fits neither on Device (device_capacity_bytes, device memory for
  // its state) nor in Host (host_capacity_bytes without a cold tier, or pinned memory: the
  // message names host_memory_bytes, what the checkpoint needs and what is in use). A refused
  // seal is not retried by the Host: the server may seal again after a later Poll() (spills
  // completing free Host memory) or let the request's state go (its next turn prefills).
  Sealed Seal(const SealRequest& request);
  // A hint that the session with this prefix is likely to return soon (an agent's tool call went
  // out): starts Cold -> Host for the longest match, admits nothing. Returns the prefetch id (an
  // Event::kPrefetchDone ends it), or 0 when there is nothing to fetch (already on Device/Host, no
  // match, no cold tier). Borrows `blocks` for the call. Scheduler thread.
  uint64_t Prefetch(std::span<const uint64_t> blocks, uint64_t now_ns);
  // The same for a tenant's session (AdmitRequest::tenant; "" is the call above).
  uint64_t Prefetch(std::span<const uint64_t> blocks, uint64_t now_ns, std::string_view tenant);
  // Removes a checkpoint from every tier (a closed session): hidden from lookups at once; its
  // Device pages come back through kPagesReleased. False when absent or already leaving; a
  // checkpoint in use leaves once released. Scheduler thread.
  bool Evict(const tier_key& key);
  // What the server found when it checked the bytes a ready admission brought back (optional; a
  // server that checks should say). Wrong bytes: the checkpoint leaves the catalog and every tier
  // at once (counted in tier_restore_verifications_total), so it is never served again.
  // Scheduler thread.
  void ReportVerification(uint64_t admission_id, bool exact);

  // Applies what completed since the last call (provider completions, finished copies, deadlines)
  // and appends the resulting events to `events` (every pending admission, seal and prefetch
  // ends in exactly one event; kPagesReleased as pages come back). Never blocks. Scheduler
  // thread.
  void Poll(std::vector<Event>* events);
  // A file descriptor that becomes readable when Poll() has provider work to apply (eventfd); copy
  // completions are not signalled: servers Poll() every scheduler iteration. Any thread.
  int event_fd() const;
  // Blocks until Poll() has something to apply or `timeout_ns` passes; true if it has. For
  // simulators and tests (tier-host replay, the benches, example_server's one-request loop),
  // never for a scheduler thread that must not wait: a server waits on event_fd() with its own
  // work. Scheduler thread.
  bool WaitForWork(uint64_t timeout_ns);
  // True while admissions, seals, spills, demotions or prefetches are under way (a provider call
  // past its deadline no longer counts: it only keeps its buffers until the provider ends it).
  bool Busy() const;

  HostStats Stats() const;  // Scheduler thread.
  // The checkpoint of exactly these blocks, if the catalog has it (and it is not leaving).
  // Scheduler thread.
  std::optional<CheckpointInfo> Describe(std::span<const uint64_t> blocks) const;
  // The same for a tenant's blocks (AdmitRequest::tenant; "" is the call above).
  std::optional<CheckpointInfo> Describe(std::span<const uint64_t> blocks,
                                         std::string_view tenant) const;
  const HostOptions& options() const;
  // The provider in use ("disk", "null", ...; "" without a cold tier) and its io path.
  std::string provider_name() const;
  std::string provider_io_path() const;
  // The transfer engine ("cuda" or "cpu") the Host copies with, and why it was chosen.
  const char* device_path() const;
  device::TransferEngine& engine();

  class Impl;

 private:
  explicit Host(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace tier
