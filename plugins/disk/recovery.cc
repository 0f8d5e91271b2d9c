// The open-time scan: rebuilds the index from the directory, one name at a time. Temporary
// leftovers are removed; checkpoints of this namespace that this server wrote (its uid, mode 0600)
// and whose header verifies are adopted; corrupt ones and ones this server did not write are
// moved aside into quarantine/ (counted and logged, one line each); files of another namespace or
// a newer format are left alone.
#include <fcntl.h>

#include <cstring>

#include "job.h"
#include "scope_guard.h"

namespace tier::disk {
namespace {

constexpr size_t kTagHex = 16, kKeyHex = 2 * TIER_KEY_BYTES;

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// "<16 hex digits>-<64 hex digits>.ckpt"
bool IsCheckpointName(const std::string& name) {
  return EndsWith(name, ".ckpt") && name.size() == kTagHex + 1 + kKeyHex + 5 &&
         name[kTagHex] == '-';
}

bool ParseHexKey(const std::string& hex, KeyBytes* out) {
  if (hex.size() != 2 * TIER_KEY_BYTES) return false;
  auto nibble = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  for (size_t i = 0; i < TIER_KEY_BYTES; ++i) {
    const int hi = nibble(hex[2 * i]), lo = nibble(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) return false;
    (*out)[i] = static_cast<uint8_t>(hi * 16 + lo);
  }
  return true;
}

// A header that verified must also match the file it came from: the key in its name, its length.
Status CheckAgainstFile(const Header& header, const KeyBytes& key, const struct stat& st) {
  if (header.key != key) return Status(TIER_DATA_LOSS, "stored key differs from the file name");
  if (static_cast<uint64_t>(st.st_size) != header.file_bytes) {
    return Status(TIER_DATA_LOSS, "file is " + std::to_string(st.st_size) +
                                      " bytes, its header says " +
                                      std::to_string(header.file_bytes));
  }
  return Status::Ok();
}

}  // namespace

Status DiskProvider::ScanDirectory(uint32_t dir) {
  std::vector<std::string> names;
  if (const int rc = ops_->ListDir(DirOf(dir).handle.dir_fd, &names); rc < 0) {
    return ErrnoStatus(-rc, "list '" + DirOf(dir).path + "'");
  }
  for (const std::string& name : names) ScanName(dir, name);
  return Status::Ok();
}

void DiskProvider::ScanName(uint32_t dir, const std::string& name) {
  if (name == kLockFileName || name == kQuarantineDirName) return;
  if (EndsWith(name, ".tmp")) return RemoveLeftover(DirOf(dir), name);
  if (!IsCheckpointName(name)) {
    Log(TIER_LOG_DEBUG, "disk: ignoring '" + name + "' (not a checkpoint file)");
    return;
  }
  if (name.compare(0, kTagHex, namespace_tag_) != 0) {
    ++foreign_at_open_;  // another namespace: not ours to judge
    return;
  }
  KeyBytes key{};
  if (!ParseHexKey(name.substr(kTagHex + 1, kKeyHex), &key)) {
    Log(TIER_LOG_WARN, "disk: ignoring '" + name + "' (malformed key in the name)");
    return;
  }
  AdoptCheckpoint(dir, name, key);
}

void DiskProvider::RemoveLeftover(const TierDir& dir, const std::string& name) {
  // We hold the directory lock: no live writer owns it. A leftover of a crash or kill.
  const int rc = ops_->UnlinkAt(dir.handle.dir_fd, name.c_str(), 0);
  if (rc == 0) {
    ++temps_removed_at_open_;
    Log(TIER_LOG_INFO, "disk: removed unfinished temporary file '" + dir.path + "/" + name + "'");
  } else {
    Log(TIER_LOG_WARN, "disk: could not remove temporary file '" + dir.path + "/" + name +
                           "': " + Status::ErrnoText(-rc));
  }
}

void DiskProvider::RejectAtOpen(const TierDir& dir, const std::string& name, const Status& status,
                                bool corrupt) {
  if (!corrupt) {  // a newer format, an I/O error: left alone, not served
    Log(TIER_LOG_WARN, "disk: not serving '" + dir.path + "/" + name + "': " + status.message());
    return;
  }
  std::lock_guard lock(mu_);
  QuarantineCorrupt(dir, name, status.message(), DataLossWhere::kOpen);
  ++quarantined_at_open_;
}

bool DiskProvider::ResolveDuplicate(uint32_t dir, const std::string& name,
                                    const std::shared_ptr<Entry>& entry) {
  const std::shared_ptr<Entry> other = index_.Find(entry->key);
  if (!other) return true;
  const bool keep_new = entry->created_unix_ns > other->created_unix_ns;
  const TierDir& loser_dir = DirOf(keep_new ? other->dir : dir);
  const std::string& loser = keep_new ? other->file_name : name;
  const int rc = ops_->UnlinkAt(loser_dir.handle.dir_fd, loser.c_str(), 0);
  ++duplicates_at_open_;
  Log(TIER_LOG_WARN,
      "disk: checkpoint '" + loser + "' is in '" + DirOf(other->dir).path + "' and in '" +
          DirOf(dir).path + "'; keeping the newer copy, " +
          (rc == 0 ? "removed" : "could not remove (" + Status::ErrnoText(-rc) + ")") +
          " the older one in '" + loser_dir.path + "'");
  if (keep_new) index_.Detach(entry->key);
  return keep_new;
}

void DiskProvider::AdoptCheckpoint(uint32_t dir_index, const std::string& name,
                                   const KeyBytes& key) {
  const TierDir& dir = DirOf(dir_index);
  const int fd = OpenRegularFile(ops_, dir.handle.dir_fd, name.c_str(),
                                 O_RDONLY | O_NOFOLLOW | O_CLOEXEC | OpenFlags(dir));
  if (fd < 0) {
    Log(TIER_LOG_WARN, "disk: not serving '" + dir.path + "/" + name +
                           "': open: " + Status::ErrnoText(-fd) +
                           (fd == -ELOOP    ? " (a symbolic link)"
                            : fd == -EINVAL ? " (not a regular file)"
                                            : ""));
    return;
  }
  ScopeGuard close_file([&] { ops_->Close(fd); });
  struct stat st {};
  if (const int rc = ops_->FStat(fd, &st); rc < 0) {
    Log(TIER_LOG_WARN,
        "disk: not serving '" + dir.path + "/" + name + "': fstat: " + Status::ErrnoText(-rc));
    return;
  }
  if (const std::string why = OwnershipProblem(st); !why.empty()) {
    close_file.RunNow();
    std::lock_guard lock(mu_);
    SetAside(dir, name, why + " (not written by this server), never served",
             QuarantineReason::kNotOwned);
    ++not_owned_at_open_;
    return;
  }
  Header header;
  bool corrupt = false;
  Status status = ReadHeader(fd, &header, &corrupt);
  close_file.RunNow();
  if (status.ok() && header.namespace_id != namespace_id_) {
    ++foreign_at_open_;  // same tag, different namespace: leave it alone
    return;
  }
  if (status.ok()) {
    status = CheckAgainstFile(header, key, st);
    corrupt = !status.ok();
  }
  if (!status.ok()) return RejectAtOpen(dir, name, status, corrupt);
  std::shared_ptr<Entry> entry = MakeEntry(header, name, ModificationUnixNs(st));
  entry->dir = dir_index;
  std::lock_guard lock(mu_);
  if (ResolveDuplicate(dir_index, name, entry)) index_.Insert(std::move(entry));
}

}  // namespace tier::disk
