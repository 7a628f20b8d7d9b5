// InProcessCommunicator: every collective over 1..8 ranks against the result computed directly
// from what each rank sent; errors reach every rank (nobody is left waiting).
#include <gtest/gtest.h>

#include <cstring>
#include <mutex>
#include <random>

#include "parallel/in_process_communicator.h"

namespace deepinfer::parallel {
namespace {

// What rank `src` sends to rank `dst` in the all_to_all_v test: a deterministic byte pattern of a
// deterministic length (0 included).
std::vector<std::byte> piece(int src, int dst) {
  const int len = (src * 7 + dst * 3) % 5 == 0 ? 0 : 1 + (src * 13 + dst * 5) % 23;
  std::vector<std::byte> v(static_cast<size_t>(len));
  for (int i = 0; i < len; ++i) v[i] = static_cast<std::byte>((src * 31 + dst * 17 + i) & 0xff);
  return v;
}

TEST(InProcessCommunicator, AllToAllVDeliversEveryPieceInRankOrder) {
  for (int n : {1, 2, 3, 4, 8}) {
    Status st = run_in_process(n, [n](Communicator& c) -> Status {
      std::vector<std::byte> send;
      std::vector<int64_t> counts;
      for (int dst = 0; dst < n; ++dst) {
        auto p = piece(c.rank(), dst);
        counts.push_back(static_cast<int64_t>(p.size()));
        send.insert(send.end(), p.begin(), p.end());
      }
      std::vector<std::byte> recv;
      std::vector<int64_t> rc;
      DI_TRY(c.all_to_all_v(send, counts, recv, rc));
      std::vector<std::byte> want;
      for (int src = 0; src < n; ++src) {
        auto p = piece(src, c.rank());
        if (rc[src] != static_cast<int64_t>(p.size()))
          return Status::internal("recv count from " + std::to_string(src) + " is " + std::to_string(rc[src]) +
                                  ", expected " + std::to_string(p.size()));
        want.insert(want.end(), p.begin(), p.end());
      }
      if (recv != want) return Status::internal("received bytes differ from the pieces sent");
      return Status::ok();
    });
    EXPECT_TRUE(st.is_ok()) << "ranks=" << n << ": " << st.to_string();
  }
}

TEST(InProcessCommunicator, AllGatherConcatenatesInRankOrder) {
  for (int n : {1, 2, 5, 8}) {
    Status st = run_in_process(n, [n](Communicator& c) -> Status {
      std::vector<std::byte> mine(6);
      for (int i = 0; i < 6; ++i) mine[i] = static_cast<std::byte>(c.rank() * 10 + i);
      std::vector<std::byte> all;
      DI_TRY(c.all_gather(mine, all));
      if (all.size() != static_cast<size_t>(6 * n)) return Status::internal("wrong size");
      for (int r = 0; r < n; ++r)
        for (int i = 0; i < 6; ++i)
          if (all[r * 6 + i] != static_cast<std::byte>(r * 10 + i))
            return Status::internal("byte " + std::to_string(r * 6 + i) + " wrong");
      return c.barrier();
    });
    EXPECT_TRUE(st.is_ok()) << "ranks=" << n << ": " << st.to_string();
  }
}

// Values with very different magnitudes so that a different summation order would change bits.
std::vector<float> reduce_input(int rank, size_t len) {
  std::mt19937 rng(100 + rank);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<float> v(len);
  for (size_t i = 0; i < len; ++i) v[i] = u(rng) * (i % 3 == 0 ? 1e7f : 1e-3f) * (rank % 2 ? 1.f : 3.f);
  return v;
}

TEST(InProcessCommunicator, AllReduceSumsInFixedRankOrderOnEveryRank) {
  const size_t len = 257;
  for (int n : {1, 2, 4, 8}) {
    std::vector<float> want = reduce_input(0, len);
    for (int r = 1; r < n; ++r) {
      auto v = reduce_input(r, len);
      for (size_t i = 0; i < len; ++i) want[i] += v[i];
    }
    for (int repeat = 0; repeat < 3; ++repeat) {
      std::mutex mu;
      std::vector<std::string> errors;
      Status st = run_in_process(n, [&](Communicator& c) -> Status {
        auto v = reduce_input(c.rank(), len);
        DI_TRY(c.all_reduce_sum(v));
        for (size_t i = 0; i < len; ++i)
          if (std::memcmp(&v[i], &want[i], 4) != 0) {
            std::lock_guard<std::mutex> l(mu);
            errors.push_back("rank " + std::to_string(c.rank()) + " index " + std::to_string(i) + ": " +
                             std::to_string(v[i]) + " vs " + std::to_string(want[i]));
            break;
          }
        return Status::ok();
      });
      ASSERT_TRUE(st.is_ok()) << st.to_string();
      EXPECT_TRUE(errors.empty()) << "ranks=" << n << " first mismatch: " << errors.front();
    }
  }
}

TEST(InProcessCommunicator, BadCountsFailOnEveryRank) {
  std::mutex mu;
  int failed = 0;
  Status st = run_in_process(4, [&](Communicator& c) -> Status {
    std::vector<std::byte> send(8);
    std::vector<int64_t> counts(4, 2);
    if (c.rank() == 2) counts[0] = 5;  // sums to 11, buffer holds 8
    std::vector<std::byte> recv;
    std::vector<int64_t> rc;
    Status s = c.all_to_all_v(send, counts, recv, rc);
    if (!s.is_ok()) {
      std::lock_guard<std::mutex> l(mu);
      ++failed;
    }
    // The group stays usable after the failed call.
    std::vector<float> one{1.f};
    DI_TRY(c.all_reduce_sum(one));
    if (one[0] != 4.f) return Status::internal("all_reduce after the failure gave " + std::to_string(one[0]));
    return s;
  });
  EXPECT_FALSE(st.is_ok());
  EXPECT_NE(st.to_string().find("rank 2"), std::string::npos) << st.to_string();
  EXPECT_EQ(failed, 4);
}

TEST(InProcessCommunicator, AllGatherSizeMismatchFailsOnEveryRank) {
  int failed = 0;
  std::mutex mu;
  Status st = run_in_process(3, [&](Communicator& c) -> Status {
    std::vector<std::byte> mine(c.rank() == 1 ? 3 : 4);
    std::vector<std::byte> all;
    Status s = c.all_gather(mine, all);
    std::lock_guard<std::mutex> l(mu);
    failed += !s.is_ok();
    return Status::ok();
  });
  EXPECT_TRUE(st.is_ok());
  EXPECT_EQ(failed, 3);
}

}  // namespace
}  // namespace deepinfer::parallel
