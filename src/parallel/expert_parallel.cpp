#include "parallel/expert_parallel.h"

#include <cstring>
#include <string>

namespace deepinfer::parallel {

namespace {

// A dispatched pair on the wire: the physical slot, then the d floats of its row.
int64_t item_bytes(int64_t d) { return static_cast<int64_t>(sizeof(int32_t)) + d * static_cast<int64_t>(sizeof(float)); }

Status check_args(const Communicator& comm, const ExpertPlacement& pl, const ExpertParallelArgs& a) {
  if (pl.n_ranks() != comm.size())
    return Status::invalid_argument("expert parallel: placement for " + std::to_string(pl.n_ranks()) +
                                    " ranks, communicator has " + std::to_string(comm.size()));
  const int64_t NK = a.n_tokens * a.top_k;
  if (a.n_tokens < 0 || a.top_k < 1 || a.d < 1 || static_cast<int64_t>(a.experts.size()) != NK ||
      static_cast<int64_t>(a.weights.size()) != NK || (a.n_tokens > 0 && !a.h))
    return Status::invalid_argument("expert parallel: routing must be [tokens, top_k] with d >= 1");
  for (int32_t e : a.experts)
    if (e < 0 || e >= pl.n_logical())
      return Status::invalid_argument("expert parallel: expert id " + std::to_string(e) + " out of range");
  return Status::ok();
}

}  // namespace

DispatchPlan plan_dispatch(const ExpertPlacement& placement, int source_rank, std::span<const int32_t> experts,
                           int64_t top_k) {
  DispatchPlan plan;
  const int64_t NK = static_cast<int64_t>(experts.size());
  plan.physical.resize(static_cast<size_t>(NK));
  plan.items_to.assign(static_cast<size_t>(placement.n_ranks()), 0);
  for (int64_t i = 0; i < NK; ++i) {
    plan.physical[i] = placement.choose_replica(experts[i], source_rank, i / top_k);
    ++plan.items_to[placement.rank_of(plan.physical[i])];
  }
  // Counting sort by destination keeps pair order inside each destination.
  std::vector<int64_t> at(plan.items_to.size(), 0);
  for (size_t r = 1; r < at.size(); ++r) at[r] = at[r - 1] + plan.items_to[r - 1];
  plan.order.resize(static_cast<size_t>(NK));
  for (int64_t i = 0; i < NK; ++i) plan.order[at[placement.rank_of(plan.physical[i])]++] = i;
  return plan;
}

Status expert_parallel_moe(Communicator& comm, const ExpertPlacement& placement, const ExpertParallelArgs& a,
                           const ExpertFn& expert, float* out, ExpertParallelStats* stats) {
  // A rank with bad arguments still takes part in both exchanges (with nothing to send), so the
  // others are never left waiting; it reports its error afterwards.
  const Status arg_status = check_args(comm, placement, a);
  const bool ok = arg_status.is_ok();
  const int R = comm.size(), me = comm.rank();
  const int64_t d = a.d, K = a.top_k, ib = item_bytes(d), rowb = d * static_cast<int64_t>(sizeof(float));
  if (placement.n_ranks() != R) return arg_status;  // cannot even size the exchange

  // 1. Dispatch: rows to the ranks that hold the chosen replicas.
  DispatchPlan plan = ok ? plan_dispatch(placement, me, a.experts, K) : DispatchPlan{};
  if (!ok) plan.items_to.assign(static_cast<size_t>(R), 0);
  std::vector<int64_t> send_counts(static_cast<size_t>(R));
  for (int r = 0; r < R; ++r) send_counts[r] = plan.items_to[r] * ib;
  std::vector<std::byte> send(plan.order.size() * static_cast<size_t>(ib));
  for (size_t j = 0; j < plan.order.size(); ++j) {
    const int64_t item = plan.order[j];
    std::byte* p = send.data() + j * ib;
    std::memcpy(p, &plan.physical[item], sizeof(int32_t));
    std::memcpy(p + sizeof(int32_t), a.h + (item / K) * d, static_cast<size_t>(rowb));
  }
  std::vector<std::byte> recv;
  std::vector<int64_t> recv_counts;
  DI_TRY(comm.all_to_all_v(send, send_counts, recv, recv_counts));

  // 2. Expert compute on the owner: group the received rows by local slot (arrival order inside).
  const int64_t n_recv = static_cast<int64_t>(recv.size()) / ib;
  const int64_t slot0 = me * placement.slots_per_rank(), S = placement.slots_per_rank();
  std::vector<std::vector<int64_t>> by_slot(static_cast<size_t>(S));
  Status recv_status = Status::ok();
  for (int64_t j = 0; j < n_recv; ++j) {
    int32_t phys;
    std::memcpy(&phys, recv.data() + j * ib, sizeof(int32_t));
    if (phys < slot0 || phys >= slot0 + S) {
      recv_status = Status::internal("expert parallel: received a row for slot " + std::to_string(phys) +
                                     " not on rank " + std::to_string(me));
      continue;
    }
    by_slot[phys - slot0].push_back(j);
  }
  std::vector<std::byte> reply(static_cast<size_t>(n_recv * rowb));
  std::vector<float> x, y;
  for (int64_t s = 0; s < S; ++s) {
    const auto& rows = by_slot[s];
    if (rows.empty()) continue;
    const int64_t m = static_cast<int64_t>(rows.size());
    x.resize(static_cast<size_t>(m * d));
    y.resize(static_cast<size_t>(m * d));
    for (int64_t i = 0; i < m; ++i)
      std::memcpy(x.data() + i * d, recv.data() + rows[i] * ib + sizeof(int32_t), static_cast<size_t>(rowb));
    const int32_t phys = static_cast<int32_t>(slot0 + s);
    expert(placement.logical_of(phys), phys, x.data(), m, y.data());
    for (int64_t i = 0; i < m; ++i)
      std::memcpy(reply.data() + rows[i] * rowb, y.data() + i * d, static_cast<size_t>(rowb));
  }

  // 3. Return the results to their sources, in the order each source sent them.
  std::vector<int64_t> reply_counts(static_cast<size_t>(R));
  for (int r = 0; r < R; ++r) reply_counts[r] = recv_counts[r] / ib * rowb;
  std::vector<std::byte> back;
  std::vector<int64_t> back_counts;
  DI_TRY(comm.all_to_all_v(reply, reply_counts, back, back_counts));
  DI_TRY(arg_status);
  DI_TRY(recv_status);
  if (static_cast<int64_t>(back.size()) != static_cast<int64_t>(plan.order.size()) * rowb)
    return Status::internal("expert parallel: got " + std::to_string(back.size()) + " result bytes, expected " +
                            std::to_string(plan.order.size() * rowb));

  // 4. Combine in (token, slot) order, exactly as the single-rank MoE does.
  std::vector<float> slot_out(static_cast<size_t>(a.n_tokens * K * d));
  for (size_t j = 0; j < plan.order.size(); ++j)
    std::memcpy(slot_out.data() + plan.order[j] * d, back.data() + j * rowb, static_cast<size_t>(rowb));
  for (int64_t t = 0; t < a.n_tokens; ++t) {
    float* o = out + t * d;
    for (int64_t e = 0; e < d; ++e) {
      float acc = 0.f;
      for (int64_t k = 0; k < K; ++k) acc += slot_out[(t * K + k) * d + e] * a.weights[t * K + k];
      o[e] += acc;
    }
  }
  if (stats) {
    stats->rows_per_local_slot.assign(static_cast<size_t>(S), 0);
    for (int64_t s = 0; s < S; ++s) stats->rows_per_local_slot[s] = static_cast<int64_t>(by_slot[s].size());
    stats->bytes_sent = send_counts;
    stats->bytes_sent[me] = 0;
  }
  return Status::ok();
}

}  // namespace deepinfer::parallel
