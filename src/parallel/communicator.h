// Communicator: the collectives that expert parallelism and attention data parallelism need, over
// the ranks of one group (one rank per GPU). Narrow on purpose: a single GPU or the CPU backend
// needs none of it, and the NCCL implementation (docs/parallel.md) maps each call onto one NCCL
// collective (all_to_all_v: grouped ncclSend/ncclRecv; all_gather: ncclAllGather; all_reduce:
// see below; barrier: a one-element all-reduce).
//
// Every rank of the group calls the same collectives in the same order (collective semantics);
// a call blocks until all ranks took part. One instance per rank; not shared between threads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "core/result.h"

namespace deepinfer::parallel {

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;

  /// `send` holds size() consecutive pieces, piece r (send_counts[r] bytes) going to rank r.
  /// On return `recv` holds the pieces the ranks sent to this one, in rank order, and
  /// recv_counts[r] their sizes. Counts may be zero.
  virtual Status all_to_all_v(std::span<const std::byte> send, std::span<const int64_t> send_counts,
                              std::vector<std::byte>& recv, std::vector<int64_t>& recv_counts) = 0;

  /// Every rank contributes the same number of bytes; `recv` is their concatenation in rank order.
  virtual Status all_gather(std::span<const std::byte> send, std::vector<std::byte>& recv) = 0;

  /// Element-wise sum over ranks, in place, summed in the FIXED order rank 0 + rank 1 + ... so that
  /// every rank gets bitwise the same result whatever the timing (NCCL's ring order differs: the
  /// NCCL implementation all-gathers and sums locally in rank order where bitwise results matter).
  virtual Status all_reduce_sum(std::span<float> data) = 0;

  virtual Status barrier() = 0;
};

}  // namespace deepinfer::parallel
