// Request builders shared by the engine tests (tiny-v4-b).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "engine/engine.h"

namespace deepinfer::engine_test {

/// A deterministic prompt of `len` token ids (2..1001) for a given seed.
inline std::vector<int32_t> prompt_of(int seed, int len) {
  std::vector<int32_t> p(len);
  for (int i = 0; i < len; ++i) p[i] = 2 + (seed * 131 + i * 37) % 1000;
  return p;
}

/// A request of `max_tokens` tokens that ignores EOS; temperature 0 is greedy, and without a seed
/// the engine draws one.
inline EngineRequest make_req(const std::string& id, std::vector<int32_t> prompt, int64_t max_tokens,
                              float temperature = 0, std::optional<uint64_t> seed = std::nullopt, int n = 1) {
  EngineRequest r;
  r.id = id;
  r.prompt = std::move(prompt);
  r.sampling.max_tokens = max_tokens;
  r.sampling.temperature = temperature;
  r.sampling.seed = seed;
  r.sampling.n = n;
  r.sampling.ignore_eos = true;
  return r;
}

}  // namespace deepinfer::engine_test
