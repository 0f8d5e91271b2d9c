// naive_peer.h -- the peer tier-bench measures against: what a fork of the motivating server
// shipped. One file per segment (per layer), buffered FILE* fwrite/fread on one thread, no
// checksums, no compression. Its spill is timed twice: to the end of fclose (what the fork
// waited for: the bytes may still be only in the page cache) and to the end of an fsync of every
// file (the bytes on the disk, comparable with the provider's fdatasync and fio's end_fsync).
#pragma once

#include <cstdint>
#include <string>

#include <tier/status.h>
#include "checkpoint_shape.h"
#include "segment_buffers.h"

namespace tier::bench {

struct NaiveSpillTimes {
  uint64_t buffered_ns = 0;  // fopen + fwrite + fclose of every file
  uint64_t synced_ns = 0;    // ... and fsync of every file: the spill on the disk
};

// Writes every segment of `buffers` to `dir`/<segment name>.bin (dir must exist).
Result<NaiveSpillTimes> NaiveSpill(const std::string& dir, const CheckpointShape& shape,
                                   const SegmentBuffers& buffers);

// Reads every segment back from `dir` into `buffers`; returns the wall time in ns.
Result<uint64_t> NaiveRestore(const std::string& dir, const CheckpointShape& shape,
                              SegmentBuffers& buffers);

// Removes the files NaiveSpill wrote.
void NaiveRemove(const std::string& dir, const CheckpointShape& shape);

}  // namespace tier::bench
