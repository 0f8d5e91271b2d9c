// choices.h -- where the simulation's decisions come from: a seeded generator (the ctest suite, a
// soak) or the bytes of a fuzzer's input (tests/fuzz). Every random decision of a run goes through
// one Choices object on the scheduler thread, so a seed (or an input) replays the same run.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tier::simulation {

// SplitMix64: a fixed, portable mix (std:: distributions differ between standard libraries).
inline uint64_t Mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

class Choices {
 public:
  virtual ~Choices() = default;
  // A value in [0, bound) (0 when bound is 0).
  virtual uint64_t Below(uint64_t bound) = 0;
  // False once a byte-driven source is used up (the run then ends); a generator never runs out.
  virtual bool exhausted() const = 0;
  bool Chance(uint32_t percent) { return Below(100) < percent; }
  uint64_t Word() { return Below(~0ull); }
};

class SeededChoices final : public Choices {
 public:
  explicit SeededChoices(uint64_t seed) : state_(Mix64(seed ^ 0x5eed5eed5eedull)) {}
  uint64_t Below(uint64_t bound) override {
    state_ = Mix64(state_);
    return bound == 0 ? 0 : state_ % bound;
  }
  bool exhausted() const override { return false; }

 private:
  uint64_t state_;
};

// Reads decisions from a byte string, two bytes each; zeros once it runs out (and says so).
class ByteChoices final : public Choices {
 public:
  ByteChoices(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  uint64_t Below(uint64_t bound) override {
    uint64_t v = 0;
    for (int i = 0; i < 2; ++i) v = (v << 8) | (at_ < size_ ? data_[at_++] : 0);
    return bound == 0 ? 0 : v % bound;
  }
  bool exhausted() const override { return at_ >= size_; }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t at_ = 0;
};

}  // namespace tier::simulation
