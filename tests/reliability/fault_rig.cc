#include "fault_rig.h"

namespace tier::disk::test {

FaultRig::FaultRig(bool threads, Options extra) : dir(tmp.Sub("tier")) {
  Options o = BaseOptions(dir, 64u << 20)
                  .Set("durability", "fdatasync")
                  .Set("chunk_kib", "256")
                  .Set("compression", "auto")
                  .Set("staging_mib", "2");
  for (auto& [k, v] : extra.kv) o.Set(k, v);
  Seams seams;
  seams.file_ops = fs;
  seams.wrap_backend = WrapWith(&io);
  seams.disable_io_uring = threads;
  auto r = OpenDisk(host, "fault-rig", o, seams);
  EXPECT_TRUE(r.ok()) << r.status().message();
  if (r.ok()) p = r.take();
}

tier_stats FaultRig::Stats() {
  tier_stats s{};
  s.struct_size = sizeof(s);
  EXPECT_TRUE(p->Stats(&s).ok());
  return s;
}

std::string FaultRig::CheckNothingVisible() {
  std::string why;
  const tier_stats s = Stats();
  if (s.entries != 0) why += "entries " + std::to_string(s.entries) + "; ";
  if (s.used_bytes != 0) why += "used_bytes " + std::to_string(s.used_bytes) + "; ";
  if (s.inflight_ops != 0) why += "inflight_ops " + std::to_string(s.inflight_ops) + "; ";
  for (const std::string& n : ListDir(dir)) {
    if (n != "LOCK" && n != "quarantine") why += "left behind: " + n + "; ";
  }
  int enumerated = 0;
  if (!p->Enumerate(
            [](void* u, const tier_entry*) -> int32_t {
              ++*static_cast<int*>(u);
              return 0;
            },
            &enumerated)
           .ok())
    why += "enumerate failed; ";
  if (enumerated != 0) why += "enumerate lists " + std::to_string(enumerated) + "; ";
  return why;
}

std::string FaultRig::CheckStillWorks(uint64_t seed) {
  Checkpoint cp = DerivedCheckpoint(seed, 1u << 20);
  const Done d = SpillSync(*p, DerivedKey(seed), cp);
  if (d.status != TIER_OK) return std::string("spill after the fault: ") + d.message;
  return RestoreAndCompare(*p, seed, 1u << 20, 3);
}

}  // namespace tier::disk::test
