#include "parallel/dp_balancer.h"

#include <algorithm>
#include <string>

#include "core/check.h"

namespace deepinfer::parallel {

AttentionDpBalancer::AttentionDpBalancer(int n_ranks)
    : outstanding_(static_cast<size_t>(n_ranks), 0), requests_(static_cast<size_t>(n_ranks), 0) {
  DI_CHECK(n_ranks >= 1);
}

Result<int> AttentionDpBalancer::assign(uint64_t id, int64_t prompt_tokens, int64_t expected_decode_tokens) {
  if (prompt_tokens < 0 || expected_decode_tokens < 0)
    return Status::invalid_argument("dp balancer: negative token counts for request " + std::to_string(id));
  if (entries_.count(id)) return Status::invalid_argument("dp balancer: request " + std::to_string(id) + " is already assigned");
  int best = 0;
  for (int r = 1; r < n_ranks(); ++r)
    if (outstanding_[r] < outstanding_[best] ||
        (outstanding_[r] == outstanding_[best] && requests_[r] < requests_[best]))
      best = r;
  entries_[id] = {best, prompt_tokens, expected_decode_tokens};
  outstanding_[best] += prompt_tokens + expected_decode_tokens;
  ++requests_[best];
  return best;
}

Status AttentionDpBalancer::progress(uint64_t id, int64_t prefilled, int64_t decoded) {
  auto it = entries_.find(id);
  if (it == entries_.end()) return Status::not_found("dp balancer: unknown request " + std::to_string(id));
  if (prefilled < 0 || decoded < 0) return Status::invalid_argument("dp balancer: negative progress");
  Entry& e = it->second;
  const int64_t p = std::min(prefilled, e.prompt_left), d = std::min(decoded, e.decode_left);
  e.prompt_left -= p;
  e.decode_left -= d;
  outstanding_[e.rank] -= p + d;
  return Status::ok();
}

Status AttentionDpBalancer::finish(uint64_t id) {
  auto it = entries_.find(id);
  if (it == entries_.end()) return Status::not_found("dp balancer: unknown request " + std::to_string(id));
  const Entry& e = it->second;
  outstanding_[e.rank] -= e.prompt_left + e.decode_left;
  --requests_[e.rank];
  entries_.erase(it);
  return Status::ok();
}

int AttentionDpBalancer::rank_of(uint64_t id) const {
  auto it = entries_.find(id);
  return it == entries_.end() ? -1 : it->second.rank;
}

}  // namespace deepinfer::parallel
