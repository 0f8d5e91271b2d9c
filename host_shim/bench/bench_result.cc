#include "bench_result.h"

namespace tier::bench {

const ContestantRun* KindRun::Find(const std::string& id) const {
  for (const ContestantRun& c : contestants) {
    if (c.id == id && c.available) return &c;
  }
  return nullptr;
}

}  // namespace tier::bench
