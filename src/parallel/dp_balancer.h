// AttentionDpBalancer: assigns new requests to attention data-parallel ranks. Each rank owns its
// requests (their state and attention compute); all ranks step together in the MoE layers, so
// the slowest rank sets the step time. A request counts as outstanding tokens (prompt tokens not
// yet prefilled + decode tokens still expected); a new request goes to the rank with the fewest
// outstanding tokens, ties to the rank with fewer requests, then to the lower rank.
// Deterministic; not thread-safe (the engine's step loop owns it).
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "core/result.h"

namespace deepinfer::parallel {

class AttentionDpBalancer {
 public:
  explicit AttentionDpBalancer(int n_ranks);

  /// Picks a rank for a new request and accounts its tokens there. Errors on a duplicate id or
  /// negative token counts.
  Result<int> assign(uint64_t request_id, int64_t prompt_tokens, int64_t expected_decode_tokens);
  /// The request advanced: `prefilled` prompt tokens and `decoded` tokens since the last call.
  /// Outstanding tokens never go below zero (a request may decode more than expected).
  Status progress(uint64_t request_id, int64_t prefilled, int64_t decoded);
  /// The request finished or was cancelled: its remaining tokens leave its rank.
  Status finish(uint64_t request_id);

  int n_ranks() const { return static_cast<int>(outstanding_.size()); }
  int64_t outstanding_tokens(int rank) const { return outstanding_[rank]; }
  int64_t requests(int rank) const { return requests_[rank]; }
  /// The rank of a request, or -1.
  int rank_of(uint64_t request_id) const;

 private:
  struct Entry {
    int rank = 0;
    int64_t prompt_left = 0;
    int64_t decode_left = 0;
  };
  std::vector<int64_t> outstanding_;
  std::vector<int64_t> requests_;
  std::unordered_map<uint64_t, Entry> entries_;
};

}  // namespace deepinfer::parallel
