#include "parallel/rebalance.h"

#include <algorithm>
#include <string>

#include "core/check.h"

namespace deepinfer::parallel {

ExpertLoadTracker::ExpertLoadTracker(int64_t n_layers, int64_t n_experts, int64_t window_steps)
    : n_layers_(n_layers), n_experts_(n_experts), window_(window_steps) {
  DI_CHECK(n_layers >= 1 && n_experts >= 1 && window_steps >= 1);
  open_.assign(static_cast<size_t>(n_layers * n_experts), 0);
  sum_.assign(open_.size(), 0);
}

void ExpertLoadTracker::record(int64_t layer, std::span<const int32_t> experts) {
  DI_CHECK(layer >= 0 && layer < n_layers_);
  for (int32_t e : experts) {
    DI_CHECK(e >= 0 && e < n_experts_);
    ++open_[layer * n_experts_ + e];
  }
}

void ExpertLoadTracker::add(int64_t layer, std::span<const int64_t> counts) {
  DI_CHECK(layer >= 0 && layer < n_layers_ && static_cast<int64_t>(counts.size()) == n_experts_);
  for (int64_t e = 0; e < n_experts_; ++e) open_[layer * n_experts_ + e] += counts[e];
}

void ExpertLoadTracker::end_step() {
  for (size_t i = 0; i < sum_.size(); ++i) sum_[i] += open_[i];
  closed_.push_back(open_);
  std::fill(open_.begin(), open_.end(), 0);
  if (static_cast<int64_t>(closed_.size()) > window_) {
    const auto& old = closed_.front();
    for (size_t i = 0; i < sum_.size(); ++i) sum_[i] -= old[i];
    closed_.pop_front();
  }
}

std::vector<double> ExpertLoadTracker::load(int64_t layer) const {
  DI_CHECK(layer >= 0 && layer < n_layers_);
  std::vector<double> out(static_cast<size_t>(n_experts_));
  for (int64_t e = 0; e < n_experts_; ++e) out[e] = static_cast<double>(sum_[layer * n_experts_ + e]);
  return out;
}

namespace {

// Experts (with multiplicity) held by each GPU of a placement.
std::vector<std::vector<int32_t>> experts_per_gpu(std::span<const int32_t> phy2log, int64_t gpus) {
  const int64_t per = static_cast<int64_t>(phy2log.size()) / gpus;
  std::vector<std::vector<int32_t>> out(static_cast<size_t>(gpus));
  for (int64_t g = 0; g < gpus; ++g) {
    out[g].assign(phy2log.begin() + g * per, phy2log.begin() + (g + 1) * per);
    std::sort(out[g].begin(), out[g].end());
  }
  return out;
}

int64_t overlap(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {  // sorted multisets
  int64_t n = 0;
  for (size_t i = 0, j = 0; i < a.size() && j < b.size();) {
    if (a[i] == b[j]) ++n, ++i, ++j;
    else if (a[i] < b[j]) ++i;
    else ++j;
  }
  return n;
}

// Relabels the new GPUs within each node to the old GPU with the largest overlap (greedy, ties to
// the lower indices), then keeps experts in their old slot inside a GPU where possible.
std::vector<int32_t> align_to_current(std::span<const int32_t> old_p2l, const std::vector<int32_t>& new_p2l,
                                      int64_t gpus, int64_t nodes) {
  const int64_t per = static_cast<int64_t>(new_p2l.size()) / gpus, gpn = gpus / nodes;
  const auto olds = experts_per_gpu(old_p2l, gpus), news = experts_per_gpu(new_p2l, gpus);
  std::vector<int64_t> new_to_old(static_cast<size_t>(gpus), -1);
  for (int64_t n = 0; n < nodes; ++n) {
    std::vector<bool> old_used(static_cast<size_t>(gpn), false), new_used(static_cast<size_t>(gpn), false);
    for (int64_t round = 0; round < gpn; ++round) {
      int64_t bi = -1, bj = -1, best = -1;
      for (int64_t i = 0; i < gpn; ++i) {
        if (new_used[i]) continue;
        for (int64_t j = 0; j < gpn; ++j) {
          if (old_used[j]) continue;
          const int64_t ov = overlap(news[n * gpn + i], olds[n * gpn + j]);
          if (ov > best) best = ov, bi = i, bj = j;
        }
      }
      new_used[bi] = old_used[bj] = true;
      new_to_old[n * gpn + bi] = n * gpn + bj;
    }
  }
  std::vector<int32_t> out(new_p2l.size(), -1);
  for (int64_t g = 0; g < gpus; ++g) {
    const int64_t og = new_to_old[g];
    std::vector<int32_t> want(new_p2l.begin() + g * per, new_p2l.begin() + (g + 1) * per);
    std::vector<bool> taken(want.size(), false);
    for (int64_t s = 0; s < per; ++s) {  // experts that stay in their slot
      const int32_t e = old_p2l[og * per + s];
      for (size_t i = 0; i < want.size(); ++i)
        if (!taken[i] && want[i] == e) {
          taken[i] = true;
          out[og * per + s] = e;
          break;
        }
    }
    size_t next = 0;  // the rest fill the free slots in order
    for (int64_t s = 0; s < per; ++s) {
      if (out[og * per + s] >= 0) continue;
      while (taken[next]) ++next;
      taken[next] = true;
      out[og * per + s] = want[next];
    }
  }
  return out;
}

}  // namespace

Result<RebalancePlan> plan_rebalance(const ExpertPlacement& current, std::span<const double> load,
                                     const EplbConfig& cfg) {
  if (cfg.num_gpus != current.n_ranks() || cfg.num_replicas != current.n_physical() ||
      static_cast<int64_t>(load.size()) != current.n_logical())
    return Status::invalid_argument("rebalance: the EPLB config (" + std::to_string(cfg.num_gpus) + " GPUs, " +
                                    std::to_string(cfg.num_replicas) + " replicas) or the load (" +
                                    std::to_string(load.size()) + " experts) does not match the placement");
  DI_ASSIGN_OR_RETURN(EplbPlacement e, rebalance_experts(load, cfg));
  std::vector<int32_t> p2l = align_to_current(current.phy2log(), e.phy2log, cfg.num_gpus, cfg.num_nodes);
  RebalancePlan plan;
  DI_ASSIGN_OR_RETURN(plan.placement, ExpertPlacement::create(current.n_logical(), current.n_ranks(), p2l));
  for (int64_t p = 0; p < current.n_physical(); ++p) {
    const int32_t e_new = p2l[p];
    if (current.logical_of(p) == e_new) continue;
    WeightMove m;
    m.logical = e_new;
    m.to_physical = static_cast<int32_t>(p);
    m.to_rank = current.rank_of(p);
    const auto reps = current.replicas(e_new);  // from an old replica, on the same rank if any
    m.from_physical = reps[0];
    for (int32_t r : reps)
      if (current.rank_of(r) == m.to_rank) {
        m.from_physical = r;
        break;
      }
    m.from_rank = current.rank_of(m.from_physical);
    plan.moves.push_back(m);
  }
  plan.max_over_mean_before = max_over_mean(gpu_loads(current.phy2log(), load, cfg.num_gpus));
  plan.max_over_mean_after = max_over_mean(gpu_loads(p2l, load, cfg.num_gpus));
  return plan;
}

}  // namespace deepinfer::parallel
