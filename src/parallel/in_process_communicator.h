// InProcessCommunicator: N ranks as N threads of one process, exchanging through shared memory.
// For CPU tests of expert parallelism and for the CPU backend's in-process EP. Deterministic: the
// data a rank receives depends only on what the ranks sent, never on thread timing.
//
// Usage: one InProcessGroup for the N ranks, then group.communicator(r) on rank r's thread.
// The group must outlive its communicators.
#pragma once

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>

#include "parallel/communicator.h"

namespace deepinfer::parallel {

class InProcessGroup {
 public:
  explicit InProcessGroup(int size);
  int size() const { return size_; }
  /// The communicator of rank `rank` (0 <= rank < size); call once per rank.
  std::unique_ptr<Communicator> communicator(int rank);

  // Used by the communicators: each collective posts a pointer per rank, waits for all (phase 1),
  // reads the others' posts, waits again (phase 2) so no post is freed while being read.
  struct Post {
    const std::byte* data = nullptr;
    int64_t bytes = 0;
    std::span<const int64_t> counts;  // all_to_all_v
  };
  void post(int rank, Post p) { posts_[rank] = p; }
  const Post& post_of(int rank) const { return posts_[rank]; }
  void wait_all();

 private:
  int size_;
  std::vector<Post> posts_;
  std::mutex mu_;
  std::condition_variable cv_;
  int arrived_ = 0;
  uint64_t generation_ = 0;
};

/// Runs fn(comm) on `size` threads, one per rank, and returns the first failing rank's status.
Status run_in_process(int size, const std::function<Status(Communicator&)>& fn);

}  // namespace deepinfer::parallel
