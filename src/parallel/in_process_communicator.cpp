#include "parallel/in_process_communicator.h"

#include <cstring>
#include <string>
#include <thread>

#include "core/check.h"

namespace deepinfer::parallel {

InProcessGroup::InProcessGroup(int size) : size_(size), posts_(static_cast<size_t>(size)) { DI_CHECK(size >= 1); }

void InProcessGroup::wait_all() {
  std::unique_lock<std::mutex> lock(mu_);
  const uint64_t gen = generation_;
  if (++arrived_ == size_) {
    arrived_ = 0;
    ++generation_;
    cv_.notify_all();
    return;
  }
  cv_.wait(lock, [&] { return generation_ != gen; });
}

namespace {

class InProcessCommunicator final : public Communicator {
 public:
  InProcessCommunicator(InProcessGroup& g, int rank) : g_(g), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return g_.size(); }

  Status all_to_all_v(std::span<const std::byte> send, std::span<const int64_t> send_counts,
                      std::vector<std::byte>& recv, std::vector<int64_t>& recv_counts) override {
    const int n = size();
    // Every rank posts (possibly bad) arguments and every rank sees everyone's, so all ranks agree
    // on success or failure and none is left waiting.
    g_.post(rank_, {send.data(), static_cast<int64_t>(send.size()), send_counts});
    g_.wait_all();
    Status st = Status::ok();
    for (int r = 0; r < n && st.is_ok(); ++r) {
      const auto& p = g_.post_of(r);
      int64_t total = 0;
      bool bad = static_cast<int>(p.counts.size()) != n;
      for (size_t i = 0; !bad && i < p.counts.size(); ++i) {
        bad = p.counts[i] < 0;
        total += p.counts[i];
      }
      if (bad || total != p.bytes)
        st = Status::invalid_argument("all_to_all_v: rank " + std::to_string(r) +
                                      " passed counts that do not match its send buffer");
    }
    if (st.is_ok()) {
      recv_counts.assign(static_cast<size_t>(n), 0);
      int64_t total = 0;
      for (int r = 0; r < n; ++r) total += (recv_counts[r] = g_.post_of(r).counts[rank_]);
      recv.resize(static_cast<size_t>(total));
      int64_t at = 0;
      for (int r = 0; r < n; ++r) {
        const auto& p = g_.post_of(r);
        int64_t off = 0;
        for (int i = 0; i < rank_; ++i) off += p.counts[i];
        if (recv_counts[r] > 0) std::memcpy(recv.data() + at, p.data + off, static_cast<size_t>(recv_counts[r]));
        at += recv_counts[r];
      }
    }
    g_.wait_all();
    return st;
  }

  Status all_gather(std::span<const std::byte> send, std::vector<std::byte>& recv) override {
    const int n = size();
    g_.post(rank_, {send.data(), static_cast<int64_t>(send.size()), {}});
    g_.wait_all();
    Status st = Status::ok();
    for (int r = 0; r < n; ++r)
      if (g_.post_of(r).bytes != static_cast<int64_t>(send.size()))
        st = Status::invalid_argument("all_gather: ranks contribute different sizes (rank " + std::to_string(r) +
                                      ": " + std::to_string(g_.post_of(r).bytes) + " bytes)");
    if (st.is_ok()) {
      recv.resize(send.size() * static_cast<size_t>(n));
      for (int r = 0; r < n; ++r)
        if (!send.empty()) std::memcpy(recv.data() + r * send.size(), g_.post_of(r).data, send.size());
    }
    g_.wait_all();
    return st;
  }

  Status all_reduce_sum(std::span<float> data) override {
    const int n = size();
    const size_t bytes = data.size() * sizeof(float);
    g_.post(rank_, {reinterpret_cast<const std::byte*>(data.data()), static_cast<int64_t>(bytes), {}});
    g_.wait_all();
    Status st = Status::ok();
    for (int r = 0; r < n; ++r)
      if (g_.post_of(r).bytes != static_cast<int64_t>(bytes))
        st = Status::invalid_argument("all_reduce_sum: ranks pass different lengths");
    std::vector<float> sum;
    if (st.is_ok()) {
      // Rank order, starting from rank 0's values: the same float operations on every rank.
      sum.assign(data.size(), 0.f);
      for (int r = 0; r < n; ++r) {
        const float* src = reinterpret_cast<const float*>(g_.post_of(r).data);
        if (r == 0)
          std::memcpy(sum.data(), src, bytes);
        else
          for (size_t i = 0; i < sum.size(); ++i) sum[i] += src[i];
      }
    }
    g_.wait_all();  // nobody overwrites its buffer before all have read it
    if (st.is_ok() && bytes) std::memcpy(data.data(), sum.data(), bytes);
    return st;
  }

  Status barrier() override {
    g_.wait_all();
    return Status::ok();
  }

 private:
  InProcessGroup& g_;
  int rank_;
};

}  // namespace

std::unique_ptr<Communicator> InProcessGroup::communicator(int rank) {
  DI_CHECK(rank >= 0 && rank < size_);
  return std::make_unique<InProcessCommunicator>(*this, rank);
}

Status run_in_process(int size, const std::function<Status(Communicator&)>& fn) {
  if (size < 1) return Status::invalid_argument("run_in_process: size must be >= 1");
  InProcessGroup group(size);
  std::vector<Status> results(static_cast<size_t>(size), Status::ok());
  std::vector<std::thread> threads;
  for (int r = 0; r < size; ++r)
    threads.emplace_back([&, r] {
      auto comm = group.communicator(r);
      results[r] = fn(*comm);
    });
  for (auto& t : threads) t.join();
  for (int r = 0; r < size; ++r)
    if (!results[r].is_ok()) return results[r].with_context("rank " + std::to_string(r));
  return Status::ok();
}

}  // namespace deepinfer::parallel
