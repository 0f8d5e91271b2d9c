// DiskReadsFirst: both I/O backends start queued reads (restores) before queued writes (spills),
// and while a read is pending writes hold only their share of the depth, yet keep completing
// (io_backend.h). Behaviour only: requests are held at gates, never timed.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "disk_test_util.h"
#include "io_backend.h"

namespace tier::disk::test {
namespace {

using namespace std::chrono_literals;

// A gate that holds callers while closed. Thread-safe.
class Gate {
 public:
  void Close() { Set(false); }
  void Open() { Set(true); }
  void Pass() {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return open_; });
  }

 private:
  void Set(bool open) {
    std::lock_guard lock(mu_);
    open_ = open;
    cv_.notify_all();
  }
  std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = true;
};

// Real file calls; PRead/PWrite pass their gate first and are counted while running.
class GatedFileOps final : public FileOps {
 public:
  Gate reads;
  Gate writes;
  std::atomic<int> reads_started{0};
  std::atomic<int> writes_started{0};
  std::atomic<int> writes_running{0};
  std::atomic<int> writes_running_max{0};

  int64_t PRead(int fd, void* buf, uint64_t len, uint64_t offset) override {
    ++reads_started;
    reads.Pass();
    return real_.PRead(fd, buf, len, offset);
  }
  int64_t PWrite(int fd, const void* buf, uint64_t len, uint64_t offset) override {
    ++writes_started;
    const int now = ++writes_running;
    for (int seen = writes_running_max.load(); now > seen;)
      writes_running_max.compare_exchange_weak(seen, now);
    writes.Pass();
    const int64_t n = real_.PWrite(fd, buf, len, offset);
    --writes_running;
    return n;
  }
  int OpenAt(int d, const char* n, int f, mode_t m) override { return real_.OpenAt(d, n, f, m); }
  int Close(int fd) override { return real_.Close(fd); }
  int FDataSync(int fd) override { return real_.FDataSync(fd); }
  int FSyncDir(int fd) override { return real_.FSyncDir(fd); }
  int RenameNoReplace(int d, const char* a, const char* b) override {
    return real_.RenameNoReplace(d, a, b);
  }
  int UnlinkAt(int d, const char* n, int f) override { return real_.UnlinkAt(d, n, f); }
  int MkdirAt(int d, const char* n, mode_t m) override { return real_.MkdirAt(d, n, m); }
  int FTruncate(int fd, uint64_t len) override { return real_.FTruncate(fd, len); }
  int FStat(int fd, struct stat* out) override { return real_.FStat(fd, out); }
  int FStatFs(int fd, struct statfs* out) override { return real_.FStatFs(fd, out); }
  int ListDir(int d, std::vector<std::string>* names) override { return real_.ListDir(d, names); }
  int LockExclusive(int fd) override { return real_.LockExclusive(fd); }

 private:
  PosixFileOps real_;
};

// Records the order in which requests complete (their tags) and waits for counts.
class Completions {
 public:
  IoRequest Tag(IoKind kind, int fd, void* buf, uint64_t len, char tag) {
    slots_.push_back(Slot{this, tag});
    return IoRequest{kind, fd, buf, len, 0, &Completions::Done, &slots_.back()};
  }
  bool WaitFor(size_t count) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, 30s, [&] { return order_.size() >= count; });
  }
  std::string order() {
    std::lock_guard lock(mu_);
    return order_;
  }

 private:
  struct Slot {
    Completions* self;
    char tag;
  };
  static void Done(void* ctx, int64_t /*result*/) {
    auto* slot = static_cast<Slot*>(ctx);
    std::lock_guard lock(slot->self->mu_);
    slot->self->order_.push_back(slot->tag);
    slot->self->cv_.notify_all();
  }
  std::deque<Slot> slots_;  // stable addresses
  std::mutex mu_;
  std::condition_variable cv_;
  std::string order_;
};

// A scratch file with 4 KiB of data, opened read-write.
struct Scratch {
  TempDir dir;
  int fd = -1;
  std::vector<char> buf = std::vector<char>(4096, 'x');
  Scratch() {
    fd = ::open(dir.Sub("f").c_str(), O_RDWR | O_CREAT, 0600);
    EXPECT_GE(fd, 0);
    EXPECT_EQ(::pwrite(fd, buf.data(), buf.size(), 0), 4096);
  }
  ~Scratch() { ::close(fd); }
};

// Opens both gates when a test leaves early, so the backend's shutdown can drain.
struct OpenGatesAtExit {
  GatedFileOps& ops;
  ~OpenGatesAtExit() {
    ops.reads.Open();
    ops.writes.Open();
  }
};

bool Eventually(const std::function<bool()>& done) {
  for (int i = 0; i < 30000 && !done(); ++i) std::this_thread::sleep_for(1ms);
  return done();
}

TEST(DiskReadsFirst, ThreadBackendStartsAQueuedReadBeforeQueuedWrites) {
  Scratch file;
  GatedFileOps ops;
  Completions done;
  auto backend = MakeThreadBackend(1, &ops);
  OpenGatesAtExit guard{ops};
  std::vector<char> a(4096), b(4096);
  ops.reads.Close();
  backend->Submit(done.Tag(IoKind::kRead, file.fd, a.data(), 4096, 'r'));  // holds the only slot
  ASSERT_TRUE(Eventually([&] { return ops.reads_started.load() == 1; }));
  backend->Submit(done.Tag(IoKind::kWrite, file.fd, file.buf.data(), 4096, 'w'));
  backend->Submit(done.Tag(IoKind::kRead, file.fd, b.data(), 4096, 'R'));  // queued after the write
  ops.reads.Open();
  ASSERT_TRUE(done.WaitFor(3));
  EXPECT_EQ(done.order(), "rRw");
  backend->Shutdown();
}

TEST(DiskReadsFirst, WritesKeepTheirShareAndCompleteWhileAReadIsPending) {
  Scratch file;
  GatedFileOps ops;
  constexpr uint32_t kDepth = 4;
  ASSERT_EQ(WriteSlotsWhileReading(kDepth), 1u);
  Completions done;
  auto backend = MakeThreadBackend(kDepth, &ops);
  OpenGatesAtExit guard{ops};
  std::vector<char> a(4096);
  ops.reads.Close();
  ops.writes.Close();
  backend->Submit(done.Tag(IoKind::kRead, file.fd, a.data(), 4096, 'r'));  // a restore pending
  ASSERT_TRUE(Eventually([&] { return ops.reads_started.load() == 1; }));
  for (int i = 0; i < 3; ++i)  // a spill's writes, three idle workers to take them
    backend->Submit(done.Tag(IoKind::kWrite, file.fd, file.buf.data(), 4096, 'w'));
  ASSERT_TRUE(Eventually([&] { return ops.writes_started.load() >= 1; }));
  std::this_thread::sleep_for(50ms);  // room for a wrongly admitted write to start
  EXPECT_EQ(ops.writes_started.load(), 1) << "writes took more than their share";
  ops.writes.Open();
  // The spill completes while the read is still held: writes are limited, never starved.
  ASSERT_TRUE(done.WaitFor(3));
  EXPECT_EQ(done.order(), "www");
  EXPECT_EQ(ops.writes_running_max.load(), 1);
  ops.reads.Open();
  ASSERT_TRUE(done.WaitFor(4));
  backend->Shutdown();
}

TEST(DiskReadsFirst, IoUringStartsAQueuedReadBeforeQueuedWrites) {
  Scratch file;
  int pipe_fds[2];
  ASSERT_EQ(::pipe(pipe_fds), 0);
  Completions done;
  std::string why;
  auto backend = MakeIoUringBackend(1, &why);
  if (!backend) GTEST_SKIP() << "io_uring unavailable: " << why;
  std::vector<char> a(1), b(4096);
  // A read of an empty pipe stays in flight, holding the only slot, until the pipe is written.
  backend->Submit(done.Tag(IoKind::kRead, pipe_fds[0], a.data(), 1, 'r'));
  backend->Submit(done.Tag(IoKind::kWrite, file.fd, file.buf.data(), 4096, 'w'));
  backend->Submit(done.Tag(IoKind::kRead, file.fd, b.data(), 4096, 'R'));
  ASSERT_EQ(::write(pipe_fds[1], "x", 1), 1);
  ASSERT_TRUE(done.WaitFor(3));
  EXPECT_EQ(done.order(), "rRw");
  backend->Shutdown();
  ::close(pipe_fds[0]);
  ::close(pipe_fds[1]);
}

}  // namespace
}  // namespace tier::disk::test
