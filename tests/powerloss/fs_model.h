// fs_model.h -- the power-loss model of the fault filesystem (pure: no FUSE, no I/O but Load and
// Materialize). A file tree (FsImage) is the state the disk holds at the start of an epoch; every
// mutating call the filesystem answers is appended to an OpLog; a crash state is the image with
// the durable part of a log prefix applied, plus, for each operation not yet made durable, a fate:
// kept, dropped or (writes) torn at 512-byte or 4 KiB sectors. The rules (README.md, "The model"):
//
//   * a write, truncate or fallocate of a file is durable once that file is fsync'ed or
//     fdatasync'ed after it (fdatasync keeps the size and the data, which is all this models);
//   * a create, mkdir, unlink, rmdir or rename is durable once a directory it changes is fsync'ed
//     after it; an fsync of a file does not make its name durable (POSIX, fsync(2));
//   * a rename is atomic: both of its names change, or neither (every Linux filesystem keeps
//     that across a crash; POSIX does not say);
//   * anything else may be kept or lost independently of every other operation: no order between
//     files, between directories, or between a file's data and its name. Kept operations apply in
//     log order; README.md shows why that reaches every state any reordering could reach.
//
// Not modelled: timestamps, ownership, xattrs, symbolic and hard links (the filesystem refuses
// them). A mode change (chmod) is kept with its inode: modes are not lost.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <vector>

namespace tier::powerloss {

using NodeId = uint64_t;
constexpr NodeId kRootNode = 1;

// A file tree: node 1 is the root directory. Nodes no entry reaches are garbage (an unlinked file,
// a file whose name was lost) and are never materialized.
struct FsImage {
  struct Node {
    bool dir = false;
    uint32_t mode = 0600;
    std::string data;                       // files
    std::map<std::string, NodeId> entries;  // directories
  };
  std::map<NodeId, Node> nodes;
  NodeId next_node = 2;

  FsImage() { nodes[kRootNode] = Node{true, 0700, {}, {}}; }
  // The node at "a/b/c" from the root (no leading slash; "" is the root), or 0.
  NodeId Resolve(const std::string& path) const;
  // Every reachable regular file, path -> contents (for tests and failure messages).
  std::map<std::string, std::string> Files() const;
};

enum class OpKind : uint8_t {
  kWrite,     // node, offset, data
  kSetSize,   // node, size: truncate / ftruncate / open with O_TRUNC
  kGrow,      // node, size: fallocate mode 0 (the size grows to `size` when smaller)
  kChmod,     // node, mode: kept with the inode (not modelled as lost)
  kSyncFile,  // node: fsync or fdatasync
  kLink,      // dir, name -> node (a new node: create or mkdir; `is_dir`, `mode`)
  kUnlink,    // dir, name (was node): unlink or rmdir
  kRename,    // dir/name -> dir2/name2 (node); replaces what stood at dir2/name2
  kSyncDir,   // dir: fsync of a directory
  kMark,      // text: a label the test put in the log (no effect)
};

struct Op {
  OpKind kind = OpKind::kMark;
  NodeId node = 0;
  NodeId dir = 0, dir2 = 0;
  std::string name, name2;
  uint64_t offset = 0, size = 0;
  std::string data;  // kWrite
  bool is_dir = false;
  uint32_t mode = 0;
  std::string text;  // kMark

  bool IsDataOp() const {
    return kind == OpKind::kWrite || kind == OpKind::kSetSize || kind == OpKind::kGrow;
  }
  bool IsDirOp() const {
    return kind == OpKind::kLink || kind == OpKind::kUnlink || kind == OpKind::kRename;
  }
  std::string Describe() const;  // one line, for failure messages

  static Op Write(NodeId node, uint64_t offset, std::string data);
  static Op SetSize(NodeId node, uint64_t size);
  static Op Grow(NodeId node, uint64_t size);
  static Op Chmod(NodeId node, uint32_t mode);
  static Op SyncFile(NodeId node);
  static Op Link(NodeId dir, std::string name, NodeId node, bool is_dir, uint32_t mode);
  static Op Unlink(NodeId dir, std::string name, NodeId node);
  static Op Rename(NodeId dir, std::string name, NodeId dir2, std::string name2, NodeId node);
  static Op SyncDir(NodeId dir);
  static Op Mark(std::string text);
};

// What becomes of an operation not yet durable at the cut.
struct Fate {
  enum Kind : uint8_t { kKept, kDropped, kTorn } kind = kKept;
  uint32_t sector_bytes = 4096;  // kTorn: 512 or 4096
  std::vector<bool> sectors;     // kTorn: which sectors of the write landed (aligned to the file)
};

// Indices into the log prefix [0, cut) of the operations that are not durable at `cut`: data ops
// of files not synced since, directory ops of directories not synced since. Marks, chmods and
// syncs are never pending.
std::vector<size_t> PendingOps(const std::vector<Op>& log, size_t cut);

// The crash state after `log[0, cut)`: `base` with every durable operation applied, and each
// pending one as `fates` says (indexed like PendingOps(log, cut); missing entries are kept).
FsImage CrashState(const FsImage& base, const std::vector<Op>& log, size_t cut,
                   const std::map<size_t, Fate>& fates);

// What RandomFates chooses.
struct CutOptions {
  double keep_probability = 0.5;  // each pending operation kept independently
  uint32_t torn_tail = 3;         // the last this many pending writes may be torn
  double tear_probability = 0.5;  // of each of those
};

// Seeded fates for the pending operations of log[0, cut): the same seed gives the same state.
std::map<size_t, Fate> RandomFates(const std::vector<Op>& log, size_t cut, uint64_t seed,
                                   const CutOptions& options = {});

// Summary of a set of fates, e.g. "12 pending: 5 kept, 6 dropped, 1 torn at 512 B".
std::string DescribeFates(const std::vector<Op>& log, size_t cut,
                          const std::map<size_t, Fate>& fates);

// One line per pending operation of log[0, cut) with its fate ("lost: create #1/tier = #5"), at
// most `limit` lines: for failure messages.
std::string ListPending(const std::vector<Op>& log, size_t cut, const std::map<size_t, Fate>& fates,
                        size_t limit = 40);

// The image of a real directory tree (regular files and directories; anything else refused).
// Returns "" or what went wrong.
std::string LoadImage(const std::string& dir, FsImage* out);
// Makes `dir` hold exactly `image` (everything else in it is removed first). "" or the error.
std::string Materialize(const FsImage& image, const std::string& dir);
// Removes everything inside `dir` (not `dir` itself). "" or the error.
std::string EmptyDirectory(const std::string& dir);

}  // namespace tier::powerloss
