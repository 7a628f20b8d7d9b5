#include "parallel/eplb.h"

#include <algorithm>
#include <numeric>
#include <string>

#include "core/check.h"

namespace deepinfer::parallel {

namespace {

std::vector<int64_t> inverse(const std::vector<int64_t>& perm) {
  std::vector<int64_t> inv(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) inv[perm[i]] = static_cast<int64_t>(i);
  return inv;
}

struct Hier {
  std::vector<int32_t> phy2log, phy_rank;
  std::vector<int64_t> logcnt;
};

// rebalance_experts_hierarchical of eplb.py for one layer.
Hier hierarchical(std::span<const double> w, int64_t num_phy, int64_t num_groups, int64_t num_nodes,
                  int64_t num_gpus) {
  const int64_t E = static_cast<int64_t>(w.size());
  const int64_t group_size = E / num_groups, groups_per_node = num_groups / num_nodes;
  const int64_t phy_per_gpu = num_phy / num_gpus, log_per_node = E / num_nodes, phy_per_node = num_phy / num_nodes;

  // Step 1: groups to nodes. "mlog" numbers experts node by node: node-local experts contiguous.
  std::vector<double> group_w(static_cast<size_t>(num_groups), 0.0);
  for (int64_t e = 0; e < E; ++e) group_w[e / group_size] += w[e];
  const Packing gp = balanced_packing(group_w, num_nodes);
  std::vector<int64_t> log2mlog(static_cast<size_t>(E));
  for (int64_t e = 0; e < E; ++e) {
    const int64_t g = e / group_size;
    log2mlog[e] = (gp.pack_index[g] * groups_per_node + gp.rank_in_pack[g]) * group_size + e % group_size;
  }
  const std::vector<int64_t> mlog2log = inverse(log2mlog);

  Hier out;
  out.phy2log.resize(static_cast<size_t>(num_phy));
  out.phy_rank.resize(static_cast<size_t>(num_phy));
  std::vector<int64_t> mlogcnt(static_cast<size_t>(E));
  for (int64_t n = 0; n < num_nodes; ++n) {
    // Step 2: replicate inside the node.
    std::vector<double> wm(static_cast<size_t>(log_per_node));
    for (int64_t i = 0; i < log_per_node; ++i) wm[i] = w[mlog2log[n * log_per_node + i]];
    const Replication rep = replicate_experts(wm, phy_per_node);
    for (int64_t i = 0; i < log_per_node; ++i) mlogcnt[n * log_per_node + i] = rep.logcnt[i];
    // Step 3: the node's replicas onto its GPUs.
    std::vector<double> wp(static_cast<size_t>(phy_per_node));
    for (int64_t p = 0; p < phy_per_node; ++p) wp[p] = wm[rep.phy2log[p]] / static_cast<double>(rep.logcnt[rep.phy2log[p]]);
    const Packing pp = balanced_packing(wp, num_gpus / num_nodes);
    for (int64_t p = 0; p < phy_per_node; ++p) {
      const int64_t slot = n * phy_per_node + pp.pack_index[p] * phy_per_gpu + pp.rank_in_pack[p];
      out.phy2log[slot] = static_cast<int32_t>(mlog2log[n * log_per_node + rep.phy2log[p]]);
      out.phy_rank[slot] = rep.rank[p];
    }
  }
  out.logcnt.resize(static_cast<size_t>(E));
  for (int64_t e = 0; e < E; ++e) out.logcnt[e] = mlogcnt[log2mlog[e]];
  return out;
}

}  // namespace

Packing balanced_packing(std::span<const double> weight, int64_t num_packs) {
  const int64_t n = static_cast<int64_t>(weight.size());
  DI_CHECK(num_packs >= 1 && n % num_packs == 0);
  const int64_t per_pack = n / num_packs;
  Packing out;
  out.pack_index.assign(static_cast<size_t>(n), -1);
  out.rank_in_pack.assign(static_cast<size_t>(n), -1);
  if (per_pack == 1) {
    std::iota(out.pack_index.begin(), out.pack_index.end(), 0);
    std::fill(out.rank_in_pack.begin(), out.rank_in_pack.end(), 0);
    return out;
  }
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return weight[a] > weight[b]; });
  std::vector<double> pack_w(static_cast<size_t>(num_packs), 0.0);
  std::vector<int64_t> pack_n(static_cast<size_t>(num_packs), 0);
  for (int64_t item : order) {
    int64_t best = -1;
    for (int64_t p = 0; p < num_packs; ++p)
      if (pack_n[p] < per_pack && (best < 0 || pack_w[p] < pack_w[best])) best = p;
    out.pack_index[item] = best;
    out.rank_in_pack[item] = pack_n[best]++;
    pack_w[best] += weight[item];
  }
  return out;
}

Replication replicate_experts(std::span<const double> weight, int64_t num_phy) {
  const int64_t num_log = static_cast<int64_t>(weight.size());
  DI_CHECK(num_phy >= num_log);
  Replication r;
  r.phy2log.resize(static_cast<size_t>(num_phy));
  r.rank.assign(static_cast<size_t>(num_phy), 0);
  r.logcnt.assign(static_cast<size_t>(num_log), 1);
  for (int64_t i = 0; i < num_log; ++i) r.phy2log[i] = static_cast<int32_t>(i);
  for (int64_t i = num_log; i < num_phy; ++i) {
    int64_t best = 0;
    for (int64_t e = 1; e < num_log; ++e)
      if (weight[e] / static_cast<double>(r.logcnt[e]) > weight[best] / static_cast<double>(r.logcnt[best])) best = e;
    r.phy2log[i] = static_cast<int32_t>(best);
    r.rank[i] = static_cast<int32_t>(r.logcnt[best]++);
  }
  return r;
}

Result<EplbPlacement> rebalance_experts(std::span<const double> load, const EplbConfig& c) {
  const int64_t E = static_cast<int64_t>(load.size());
  auto bad = [](const std::string& m) { return Status::invalid_argument("EPLB: " + m); };
  if (E < 1) return bad("no experts");
  if (c.num_gpus < 1 || c.num_nodes < 1 || c.num_groups < 1) return bad("groups, nodes and GPUs must be >= 1");
  if (c.num_gpus % c.num_nodes != 0)
    return bad(std::to_string(c.num_gpus) + " GPUs are not a multiple of " + std::to_string(c.num_nodes) + " nodes");
  if (c.num_replicas < E || c.num_replicas % c.num_gpus != 0)
    return bad(std::to_string(c.num_replicas) + " replicas must be >= " + std::to_string(E) +
               " experts and a multiple of " + std::to_string(c.num_gpus) + " GPUs");
  if (E % c.num_groups != 0) return bad(std::to_string(c.num_groups) + " groups do not divide " + std::to_string(E) + " experts");
  for (double v : load)
    if (!(v >= 0)) return bad("loads must be finite and >= 0");
  const bool hier = c.num_groups % c.num_nodes == 0;
  if (hier && c.num_replicas % c.num_nodes != 0) return bad("replicas are not a multiple of the nodes");
  Hier h = hier ? hierarchical(load, c.num_replicas, c.num_groups, c.num_nodes, c.num_gpus)
                : hierarchical(load, c.num_replicas, 1, 1, c.num_gpus);
  EplbPlacement p;
  p.phy2log = std::move(h.phy2log);
  p.phy_rank = std::move(h.phy_rank);
  p.logcnt = std::move(h.logcnt);
  p.hierarchical = hier;
  return p;
}

std::vector<double> gpu_loads(std::span<const int32_t> phy2log, std::span<const double> load, int64_t num_gpus) {
  std::vector<int64_t> cnt(load.size(), 0);
  for (int32_t e : phy2log) ++cnt[e];
  std::vector<double> g(static_cast<size_t>(num_gpus), 0.0);
  const int64_t per = static_cast<int64_t>(phy2log.size()) / num_gpus;
  for (size_t p = 0; p < phy2log.size(); ++p)
    g[static_cast<int64_t>(p) / per] += load[phy2log[p]] / static_cast<double>(cnt[phy2log[p]]);
  return g;
}

double max_over_mean(std::span<const double> loads) {
  if (loads.empty()) return 1.0;
  double mx = 0, sum = 0;
  for (double v : loads) mx = std::max(mx, v), sum += v;
  return sum > 0 ? mx / (sum / static_cast<double>(loads.size())) : 1.0;
}

}  // namespace deepinfer::parallel
