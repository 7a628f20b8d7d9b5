// ExpertPlacement: where the physical copies (replicas) of each logical expert of one MoE layer
// live. Physical slot p sits on rank p / slots_per_rank; every rank holds the same number of
// slots; every logical expert has at least one replica (EPLB adds replicas for hot experts).
// Immutable once built; choose_replica() is the deterministic dispatch rule.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/result.h"

namespace deepinfer::parallel {

class ExpertPlacement {
 public:
  /// phy2log[p]: the logical expert in physical slot p; its size must be a multiple of n_ranks and
  /// every logical expert in [0, n_logical) must appear at least once.
  static Result<ExpertPlacement> create(int64_t n_logical, int n_ranks, std::vector<int32_t> phy2log);
  /// No redundancy: expert e on rank e / (n_logical / n_ranks) (n_ranks must divide n_logical).
  static Result<ExpertPlacement> contiguous(int64_t n_logical, int n_ranks);

  int64_t n_logical() const { return n_logical_; }
  int n_ranks() const { return n_ranks_; }
  int64_t n_physical() const { return static_cast<int64_t>(phy2log_.size()); }
  int64_t slots_per_rank() const { return n_physical() / n_ranks_; }
  const std::vector<int32_t>& phy2log() const { return phy2log_; }
  int32_t logical_of(int64_t physical) const { return phy2log_[physical]; }
  int rank_of(int64_t physical) const { return static_cast<int>(physical / slots_per_rank()); }
  /// Physical slots holding logical expert e, ascending.
  std::span<const int32_t> replicas(int32_t e) const;
  /// The physical slots on `rank`: [rank * slots_per_rank, (rank + 1) * slots_per_rank).
  std::span<const int32_t> slots_of_rank(int rank) const;

  /// The replica that token `token` (its index on the source rank) sends expert e's work to:
  /// a replica on the source rank when there is one (no transfer), else one chosen round-robin by
  /// (source rank + token) among the replicas, which spreads a hot expert's tokens over its copies.
  int32_t choose_replica(int32_t e, int source_rank, int64_t token) const;

 private:
  int64_t n_logical_ = 0;
  int n_ranks_ = 1;
  std::vector<int32_t> phy2log_;
  std::vector<int32_t> log2phy_;      // replicas of each expert, concatenated
  std::vector<int64_t> log2phy_off_;  // [n_logical + 1]
  std::vector<int32_t> iota_;         // 0..n_physical-1, for slots_of_rank
};

}  // namespace deepinfer::parallel
