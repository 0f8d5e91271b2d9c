// engine_contract_death_test.cc -- HostEngineContractDeath: the one-thread rule of host.h is
// checked (TIER_CHECK) in every scheduler method, and the PageAllocator may not call back into the
// Host. A binary of its own: a death test forks, and tier_host_tests leaks whole Host arenas on
// purpose (abandoned providers), after which a fork can fail for want of memory.
#include <thread>
#include <vector>

#include "host_fixture.h"

namespace tier::host::test {
namespace {

using HostEngineContractDeath = HostTest;

TEST_F(HostEngineContractDeath, ASchedulerMethodCalledFromAnotherThreadAbortsNamingIt) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  Open("null", {}, Bytes(2), Bytes(2));
  EXPECT_DEATH(
      {
        std::thread other([&] {
          std::vector<Event> events;
          host_->Poll(&events);
        });
        other.join();
      },
      "Host::Poll called from a thread other than the one that opened the Host");
}

TEST_F(HostEngineContractDeath, AnAllocatorCallingBackIntoTheHostAborts) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  Open("null", {}, 0, Bytes(4));
  const auto cp = Blocks(10, 1);
  ASSERT_TRUE(Seal(cp, 1));
  ASSERT_EQ(PlacementsOf(cp), kH);
  auto lane = pool_->NewStateSet();
  ASSERT_TRUE(lane.ok());
  AdmitRequest r;
  r.blocks = cp;
  r.allocate_pages = [this](uint32_t n, std::vector<uint32_t>* pages) {
    (void)host_->Stats();
    return pool_->Allocate(n, pages);
  };
  r.state = lane.value()->buffers;
  EXPECT_DEATH((void)host_->Admit(r),
               "Host::Stats called from inside AdmitRequest::allocate_pages");
}

}  // namespace
}  // namespace tier::host::test
