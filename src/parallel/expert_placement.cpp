#include "parallel/expert_placement.h"

#include <numeric>
#include <string>

namespace deepinfer::parallel {

Result<ExpertPlacement> ExpertPlacement::create(int64_t n_logical, int n_ranks, std::vector<int32_t> phy2log) {
  if (n_logical < 1 || n_ranks < 1) return Status::invalid_argument("expert placement: need >= 1 expert and rank");
  const int64_t n_phy = static_cast<int64_t>(phy2log.size());
  if (n_phy < n_logical || n_phy % n_ranks != 0)
    return Status::invalid_argument("expert placement: " + std::to_string(n_phy) +
                                    " physical slots must be >= the experts (" + std::to_string(n_logical) +
                                    ") and a multiple of the ranks (" + std::to_string(n_ranks) + ")");
  ExpertPlacement p;
  p.n_logical_ = n_logical;
  p.n_ranks_ = n_ranks;
  std::vector<int64_t> count(static_cast<size_t>(n_logical), 0);
  for (int64_t i = 0; i < n_phy; ++i) {
    if (phy2log[i] < 0 || phy2log[i] >= n_logical)
      return Status::invalid_argument("expert placement: slot " + std::to_string(i) + " holds expert " +
                                      std::to_string(phy2log[i]) + ", out of range");
    ++count[phy2log[i]];
  }
  p.log2phy_off_.assign(static_cast<size_t>(n_logical + 1), 0);
  for (int64_t e = 0; e < n_logical; ++e) {
    if (count[e] == 0)
      return Status::invalid_argument("expert placement: expert " + std::to_string(e) + " has no replica");
    p.log2phy_off_[e + 1] = p.log2phy_off_[e] + count[e];
  }
  p.log2phy_.resize(static_cast<size_t>(n_phy));
  std::vector<int64_t> fill(p.log2phy_off_.begin(), p.log2phy_off_.end() - 1);
  for (int64_t i = 0; i < n_phy; ++i) p.log2phy_[fill[phy2log[i]]++] = static_cast<int32_t>(i);
  p.iota_.resize(static_cast<size_t>(n_phy));
  std::iota(p.iota_.begin(), p.iota_.end(), 0);
  p.phy2log_ = std::move(phy2log);
  return p;
}

Result<ExpertPlacement> ExpertPlacement::contiguous(int64_t n_logical, int n_ranks) {
  if (n_ranks < 1 || n_logical % n_ranks != 0)
    return Status::invalid_argument("expert placement: " + std::to_string(n_ranks) + " ranks do not divide " +
                                    std::to_string(n_logical) + " experts");
  std::vector<int32_t> phy2log(static_cast<size_t>(n_logical));
  std::iota(phy2log.begin(), phy2log.end(), 0);
  return create(n_logical, n_ranks, std::move(phy2log));
}

std::span<const int32_t> ExpertPlacement::replicas(int32_t e) const {
  return {log2phy_.data() + log2phy_off_[e], static_cast<size_t>(log2phy_off_[e + 1] - log2phy_off_[e])};
}

std::span<const int32_t> ExpertPlacement::slots_of_rank(int rank) const {
  return {iota_.data() + rank * slots_per_rank(), static_cast<size_t>(slots_per_rank())};
}

int32_t ExpertPlacement::choose_replica(int32_t e, int source_rank, int64_t token) const {
  const auto reps = replicas(e);
  for (int32_t p : reps)
    if (rank_of(p) == source_rank) return p;
  return reps[static_cast<size_t>((source_rank + token) % static_cast<int64_t>(reps.size()))];
}

}  // namespace deepinfer::parallel
