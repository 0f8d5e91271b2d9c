// Links tier::shuffle from an installed SDK: shuffles and unshuffles 4096 bytes, exits 0 when the
// round trip gives the input back.
#include <tier/shuffle/byte_shuffle.h>

#include <cstdio>
#include <vector>

int main() {
  std::vector<std::byte> in(4096), planes(4096), out(4096);
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<std::byte>(i * 7 + 3);
  if (!tier::shuffle::ByteShuffle(in, planes, 2).ok()) return 1;
  if (!tier::shuffle::ByteUnshuffle(planes, out, 2).ok()) return 1;
  std::puts(in == out ? "shuffle round trip ok" : "shuffle round trip differs");
  return in == out ? 0 : 1;
}
