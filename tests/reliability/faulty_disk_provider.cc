// libtier_faultydisk.so: the disk provider core behind the C ABI with its fault seams exposed as
// extra options, so a host (the Host library, tier-host) can be tested against a disk that fails.
// Test-only; never installed. Besides every disk option it takes, any number of times:
//   fault=OP:FIRST:COUNT:ERR   calls FIRST .. FIRST+COUNT-1 of OP after open fail with ERR
// OP: write | read (I/O backend), create | pwrite | pread | fdatasync | fsync_dir | rename |
// unlink | ftruncate (file calls). ERR: EIO | ENOSPC | EDQUOT | EXDEV, or `short` (a write or read
// that transfers one block less than asked; for pwrite: half a write, which the caller continues).
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "disk_provider.h"
#include "test_seams.h"
#include "tier_provider.h"

namespace tier::disk::test {
namespace {

struct Fault {
  bool backend = false;
  IoKind kind = IoKind::kWrite;
  FsOp op = FsOp::kPWrite;
  int first = 1, count = 1;
  int err = EIO;  // 0: short
};

struct Instance {  // members die in reverse order: the provider closes before its seams go
  std::shared_ptr<FaultyFileOps> fs = std::make_shared<FaultyFileOps>();
  std::shared_ptr<FaultyBackend> io;
  std::unique_ptr<DiskProvider> provider;
};

bool ParseFault(const std::string& text, Fault* out, std::string* why) {
  char op[32] = {}, err[16] = {};
  if (std::sscanf(text.c_str(), "%31[a-z_]:%d:%d:%15s", op, &out->first, &out->count, err) != 4 ||
      out->first < 1 || out->count < 1 || out->count > 100000) {
    *why = "expected OP:FIRST:COUNT:ERR, got '" + text + "'";
    return false;
  }
  const std::string o = op, e = err;
  struct Named {
    const char* name;
    FsOp op;
  };
  static const Named kOps[] = {{"create", FsOp::kOpenTemp},    {"pwrite", FsOp::kPWrite},
                               {"pread", FsOp::kPRead},        {"fdatasync", FsOp::kFDataSync},
                               {"fsync_dir", FsOp::kFSyncDir}, {"rename", FsOp::kRename},
                               {"unlink", FsOp::kUnlink},      {"ftruncate", FsOp::kFTruncate}};
  if (o == "write" || o == "read") {
    out->backend = true;
    out->kind = o == "write" ? IoKind::kWrite : IoKind::kRead;
  } else {
    bool known = false;
    for (const Named& n : kOps) {
      if (o == n.name) out->op = n.op, known = true;
    }
    if (!known) {
      *why = "unknown operation '" + o + "'";
      return false;
    }
  }
  if (e == "EIO")
    out->err = EIO;
  else if (e == "ENOSPC")
    out->err = ENOSPC;
  else if (e == "EDQUOT")
    out->err = EDQUOT;
  else if (e == "EXDEV")
    out->err = EXDEV;
  else if (e == "short")
    out->err = 0;
  else {
    *why = "unknown error '" + e + "'";
    return false;
  }
  return true;
}

void Arm(Instance* in, const Fault& f) {
  for (int i = 0; i < f.count; ++i) {
    if (f.backend) {
      // A short transfer: one 4 KiB block less than any chunk-sized request.
      in->io->Fail(f.kind, f.first + i, f.err == 0 ? 4096 : -f.err);
    } else {
      in->fs->Fail(f.op, f.first + i, f.err);
    }
  }
}

Instance* Self(tier_instance* i) {
  return reinterpret_cast<Instance*>(i);
}

tier_status Report(const Status& s, tier_error* error) {
  if (error != nullptr) {
    error->status = s.code();
    std::snprintf(error->message, sizeof(error->message), "%s", s.message().c_str());
  }
  return s.code();
}

template <typename F>
tier_status Guard(tier_instance* instance, tier_error* error, F&& body) noexcept {
  try {
    if (instance == nullptr) return Report(Status(TIER_INVALID_ARGUMENT, "NULL instance"), error);
    return Report(body(Self(instance)->provider.get()), error);
  } catch (...) {
    return Report(Status(TIER_INTERNAL, "faultydisk: exception"), error);
  }
}

tier_status Open(const tier_host_services* host, const char* ns, const tier_option* options,
                 uint32_t count, tier_instance** out, tier_error* error) {
  try {
    if (out == nullptr || ns == nullptr || (count > 0 && options == nullptr)) {
      return Report(Status(TIER_INVALID_ARGUMENT, "faultydisk: NULL argument"), error);
    }
    *out = nullptr;
    std::vector<tier_option> disk_options;
    std::vector<Fault> faults;
    for (uint32_t i = 0; i < count; ++i) {
      if (std::strcmp(options[i].key, "fault") != 0) {
        disk_options.push_back(options[i]);
        continue;
      }
      Fault f;
      std::string why;
      if (!ParseFault(options[i].value, &f, &why)) {
        return Report(Status(TIER_INVALID_ARGUMENT, "faultydisk: option 'fault': " + why), error);
      }
      faults.push_back(f);
    }
    auto instance = std::make_unique<Instance>();
    Seams seams;
    seams.file_ops = instance->fs;
    seams.wrap_backend = WrapWith(&instance->io);
    auto provider = DiskProvider::Open(host, ns, disk_options, seams);
    if (!provider.ok()) return Report(provider.status(), error);
    instance->provider = provider.take();
    for (const Fault& f : faults) Arm(instance.get(), f);  // counted from now: open is not hit
    *out = reinterpret_cast<tier_instance*>(instance.release());
    return Report(Status::Ok(), error);
  } catch (...) {
    return Report(Status(TIER_INTERNAL, "faultydisk: exception in open"), error);
  }
}

void Close(tier_instance* instance) {
  delete Self(instance);
}

const tier_provider kTable = {
    sizeof(tier_provider),
    TIER_ABI_VERSION_MAJOR,
    TIER_ABI_VERSION_MINOR,
    0,
    "disk",  // the disk provider's metrics and labels, unchanged
    "0.1.0-faulty",
    Open,
    Close,
    [](tier_instance* i, tier_info* out, tier_error* e) {
      return Guard(i, e, [&](DiskProvider* p) { return p->Info(out); });
    },
    [](tier_instance* i, tier_stats* out, tier_error* e) {
      return Guard(i, e, [&](DiskProvider* p) { return p->Stats(out); });
    },
    [](tier_instance* i, const tier_key* key, tier_stat_result* out, tier_segment_info* segments,
       uint32_t capacity, tier_error* e) {
      return Guard(i, e, [&](DiskProvider* p) { return p->Stat(key, out, segments, capacity); });
    },
    [](tier_instance* i, const tier_key* key, const tier_segment* segments, uint32_t count,
       tier_done_fn done, void* user, tier_error* e) {
      return Guard(i, e,
                   [&](DiskProvider* p) { return p->Spill(key, segments, count, done, user); });
    },
    [](tier_instance* i, const tier_key* key, const tier_segment* segments, uint32_t count,
       tier_done_fn done, void* user, tier_error* e) {
      return Guard(i, e,
                   [&](DiskProvider* p) { return p->Restore(key, segments, count, done, user); });
    },
    [](tier_instance* i, const tier_key* key, tier_error* e) {
      return Guard(i, e, [&](DiskProvider* p) { return p->Remove(key); });
    },
    [](tier_instance* i, tier_enumerate_fn fn, void* user, tier_error* e) {
      return Guard(i, e, [&](DiskProvider* p) { return p->Enumerate(fn, user); });
    },
    [](tier_instance* i, const tier_key* key, uint64_t prefill_ns, tier_plan* out, tier_error* e) {
      return Guard(i, e, [&](DiskProvider* p) { return p->PlanRestore(key, prefill_ns, out); });
    },
    nullptr,  // probe (1.1, optional): not offered
};

}  // namespace
}  // namespace tier::disk::test

extern "C" TIER_EXPORT tier_status tier_provider_entry(uint32_t major, uint32_t /*minor*/,
                                                       const tier_host_services* /*host*/,
                                                       const tier_provider** out) {
  if (out == nullptr) return TIER_INVALID_ARGUMENT;
  *out = nullptr;
  if (major != TIER_ABI_VERSION_MAJOR) return TIER_UNSUPPORTED;
  *out = &tier::disk::test::kTable;
  return TIER_OK;
}
