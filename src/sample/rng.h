// Counter-based random numbers for sampling: Philox-4x32-10 (Salmon et al., "Parallel random
// numbers: as easy as 1, 2, 3", SC'11; the Random123 / cuRAND / PyTorch generator). A draw is a
// pure function of (key, counter), with no state, so a request's random numbers depend only on
// its own (seed, sample index, position, draw index) and never on the batch it runs in, the order
// of rows, the thread that samples it, or preemption and recompute.
//
// Keying. key = the request's 64-bit seed; counter = (position: 64 bits, sample index, draw
// index). The request id is deliberately not mixed in: two requests with the same seed and prompt
// give the same tokens, which is what OpenAI's `seed` promises. Unseeded requests get a fresh
// seed drawn once at admission (resolve_seed), so they are independent of one another, and the
// sampler itself stays a pure function. n > 1 samples differ by sample index.
//
// Header-only; all functions are thread-safe (no shared state) except SeedSource::next.
#pragma once

#include <array>
#include <cstdint>
#include <optional>

namespace deepinfer {

/// Philox-4x32 with 10 rounds: 128-bit counter, 64-bit key -> 128 random bits.
inline std::array<uint32_t, 4> philox4x32_10(std::array<uint32_t, 4> ctr,
                                             std::array<uint32_t, 2> key) {
  constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;
  constexpr uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
  for (int round = 0; round < 10; ++round) {
    const uint64_t p0 = static_cast<uint64_t>(kM0) * ctr[0];
    const uint64_t p1 = static_cast<uint64_t>(kM1) * ctr[2];
    const uint32_t hi0 = static_cast<uint32_t>(p0 >> 32), lo0 = static_cast<uint32_t>(p0);
    const uint32_t hi1 = static_cast<uint32_t>(p1 >> 32), lo1 = static_cast<uint32_t>(p1);
    ctr = {hi1 ^ ctr[1] ^ key[0], lo1, hi0 ^ ctr[3] ^ key[1], lo0};
    key[0] += kW0;
    key[1] += kW1;
  }
  return ctr;
}

/// Which random stream a row draws from: one per (request seed, sample index).
struct RngKey {
  uint64_t seed = 0;
  uint32_t sample_index = 0;  // 0..n-1 for n > 1
  bool operator==(const RngKey&) const = default;
};

/// Draw purposes, so independent uses at one position never share random bits.
enum class RngDraw : uint32_t {
  kSample = 0,  // the uniform that picks the token (inverse CDF)
  kSpecAccept = 1,  // reserved: speculative-decoding acceptance test
};

/// 128 random bits for (key, position, draw).
inline std::array<uint32_t, 4> rng_bits(const RngKey& key, int64_t position, RngDraw draw) {
  const uint64_t pos = static_cast<uint64_t>(position);
  return philox4x32_10({static_cast<uint32_t>(pos), static_cast<uint32_t>(pos >> 32),
                        key.sample_index, static_cast<uint32_t>(draw)},
                       {static_cast<uint32_t>(key.seed), static_cast<uint32_t>(key.seed >> 32)});
}

/// A uniform double in [0, 1) with 53 random bits.
inline double rng_uniform(const RngKey& key, int64_t position, RngDraw draw = RngDraw::kSample) {
  const auto b = rng_bits(key, position, draw);
  const uint64_t bits = (static_cast<uint64_t>(b[0]) << 32 | b[1]) >> 11;
  return static_cast<double>(bits) * 0x1.0p-53;
}

/// SplitMix64 (Steele et al. 2014): the finaliser is a good 64-bit mixer.
inline uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

/// Where unseeded requests get their seed at admission. The engine makes one from a random
/// device (or a fixed value for reproducible test runs). Not thread-safe: the admitting thread
/// owns it.
class SeedSource {
 public:
  explicit SeedSource(uint64_t base) : state_(base) {}
  uint64_t next() { return splitmix64(state_++); }

 private:
  uint64_t state_;
};

/// The request's own seed if it gave one, else a fresh one from `source`. Call once per request.
inline uint64_t resolve_seed(const std::optional<uint64_t>& seed, SeedSource& source) {
  return seed ? *seed : source.next();
}

}  // namespace deepinfer
