// The open-time scan: rebuilds the index from the directory. Temporary leftovers are removed,
// checkpoints of this namespace whose header verifies are adopted, corrupt ones are moved aside
// (counted and logged), files of another namespace or a newer format are left alone.
#include <fcntl.h>

#include <cstring>

#include "job.h"

namespace tier::disk {
namespace {

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
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

}  // namespace

Status DiskProvider::ScanDirectory() {
  std::vector<std::string> names;
  if (const int rc = ops_->ListDir(dir_.dir_fd, &names); rc < 0) {
    return ErrnoStatus(-rc, "list '" + options_.dir + "'");
  }
  constexpr size_t kTagHex = 16, kKeyHex = 2 * TIER_KEY_BYTES;
  for (const std::string& name : names) {
    if (name == kLockFileName || name == kQuarantineDirName) continue;
    if (EndsWith(name, ".tmp")) {
      // We hold the directory lock: no live writer owns it. A leftover of a crash or kill.
      const int rc = ops_->UnlinkAt(dir_.dir_fd, name.c_str(), 0);
      if (rc == 0) {
        ++temps_removed_at_open_;
        Log(TIER_LOG_INFO,
            "disk: removed unfinished temporary file '" + options_.dir + "/" + name + "'");
      } else {
        Log(TIER_LOG_WARN, "disk: could not remove temporary file '" + options_.dir + "/" + name +
                               "': " + Status::ErrnoText(-rc));
      }
      continue;
    }
    const bool checkpoint_name =
        EndsWith(name, ".ckpt") && name.size() == kTagHex + 1 + kKeyHex + 5 && name[kTagHex] == '-';
    if (!checkpoint_name) {
      Log(TIER_LOG_DEBUG, "disk: ignoring '" + name + "' (not a checkpoint file)");
      continue;
    }
    if (name.compare(0, kTagHex, namespace_tag_) != 0) {
      ++foreign_at_open_;  // another namespace: not ours to judge
      continue;
    }
    KeyBytes key{};
    if (!ParseHexKey(name.substr(kTagHex + 1, kKeyHex), &key)) {
      Log(TIER_LOG_WARN, "disk: ignoring '" + name + "' (malformed key in the name)");
      continue;
    }
    const int fd = OpenRegularFile(ops_, dir_.dir_fd, name.c_str(),
                                   O_RDONLY | O_NOFOLLOW | O_CLOEXEC | OpenFlags());
    if (fd < 0) {
      Log(TIER_LOG_WARN, "disk: not serving '" + options_.dir + "/" + name +
                             "': open: " + Status::ErrnoText(-fd) +
                             (fd == -ELOOP    ? " (a symbolic link)"
                              : fd == -EINVAL ? " (not a regular file)"
                                              : ""));
      continue;
    }
    struct stat st {};
    Header header;
    bool corrupt = false;
    Status status;
    if (const int rc = ops_->FStat(fd, &st); rc < 0) {
      status = ErrnoStatus(-rc, "fstat '" + name + "'");
    } else if (!S_ISREG(st.st_mode)) {
      status = Status(TIER_IO_ERROR, "disk: '" + name + "' is not a regular file");
    } else {
      status = ReadHeader(fd, &header, &corrupt);
    }
    ops_->Close(fd);
    if (status.ok()) {
      if (header.namespace_id != namespace_id_) {
        ++foreign_at_open_;  // same tag, different namespace: leave it alone
        continue;
      }
      if (header.key != key) {
        corrupt = true;
        status = Status(TIER_DATA_LOSS, "stored key differs from the file name");
      } else if (static_cast<uint64_t>(st.st_size) != header.file_bytes) {
        corrupt = true;
        status = Status(TIER_DATA_LOSS, "file is " + std::to_string(st.st_size) +
                                            " bytes, its header says " +
                                            std::to_string(header.file_bytes));
      }
    }
    if (!status.ok()) {
      if (corrupt) {
        std::lock_guard lock(mu_);
        Quarantine(name, status.message(), DataLossWhere::kOpen);
        ++quarantined_at_open_;
      } else {
        Log(TIER_LOG_WARN,
            "disk: not serving '" + options_.dir + "/" + name + "': " + status.message());
      }
      continue;
    }
    auto entry = std::make_shared<Entry>();
    entry->key = key;
    entry->file_name = name;
    entry->logical_bytes = header.logical_bytes;
    entry->stored_bytes = header.file_bytes;
    entry->manifest = std::move(header.manifest);
    for (const SegmentRecord& rec : header.segments) {
      entry->segments.push_back({rec.kind, rec.index, rec.logical_bytes});
      for (uint32_t c = 0; c < rec.chunk_count; ++c) {
        if (IsZstdCodec(header.chunks[rec.first_chunk + c].codec)) {
          entry->zstd_logical_bytes += std::min<uint64_t>(
              header.chunk_bytes, rec.logical_bytes - uint64_t{c} * header.chunk_bytes);
        }
      }
    }
    std::lock_guard lock(mu_);
    index_.Insert(std::move(entry));
  }
  return Status::Ok();
}

}  // namespace tier::disk
