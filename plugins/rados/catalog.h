// catalog.h -- internal helpers shared by catalog.cc, restore.cc and sweep.cc: reading the
// header object (content and xattrs) and listing the namespace.
#pragma once

#include <rados/librados.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <tier/status.h>

namespace tier::rados {

// A read op's results for one header object: stat, the first `first_read_bytes` of content and
// all xattrs. Owned by shared_ptr: it is the keepalive of the operation that fills it.
struct HeaderReadState {
  explicit HeaderReadState(uint64_t first_read_bytes) : buffer(first_read_bytes) {}
  ~HeaderReadState();
  // Adds stat, read and getxattrs to `op`, filling this state.
  void AddTo(rados_read_op_t op);
  std::map<std::string, std::string> Xattrs();  // after completion

  std::vector<uint8_t> buffer;
  uint64_t size = 0;
  int stat_rval = 0;
  size_t bytes_read = 0;
  int read_rval = 0;
  rados_xattrs_iter_t xattrs = nullptr;
  int xattr_rval = 0;
};

// Calls `fn` for every object name of the I/O context's namespace, at most `max_objects`; stops
// early when `fn` returns false or `deadline_ns` (monotonic) passes (then *truncated). Blocking;
// any thread.
Status ListObjects(rados_ioctx_t io, uint64_t max_objects, uint64_t deadline_ns,
                   const std::function<bool(const std::string&)>& fn, bool* truncated);

class Aio;
// The xattrs of every object in `oids` (rcs[i] = 0 or -errno), a wave of reads at a time, all
// within `deadline_ns` (monotonic). sweep.cc.
Status ReadXattrs(Aio* aio, const std::vector<std::string>& oids, uint64_t deadline_ns,
                  std::vector<int>* rcs, std::vector<std::map<std::string, std::string>>* out);
// A decimal xattr value (at most 20 digits).
bool ParseDecimal(const std::string& text, uint64_t* out);

// errno of a cluster operation as a Status: ENOSPC/EDQUOT NO_SPACE, else IO_ERROR; `what` names
// the operation and object. ETIMEDOUT says that the outcome is unknown.
Status FromRados(int rc, const std::string& what);

}  // namespace tier::rados
