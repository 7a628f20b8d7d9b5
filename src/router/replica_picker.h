// ReplicaPicker: which replica (a `deepinfer serve` process) a request goes to. The cache-aware
// policy is SGLang's router's, over chained hashes instead of a radix tree: each replica keeps the
// hash chains of the prompts it was sent (an LRU of bounded size), and a request goes to the
// replica holding the longest prefix of its prompt when that covers at least `cache_threshold` of
// it, since that replica's prefix cache likely holds the prompt's state; otherwise to the
// least-loaded healthy replica (requests in flight; ties: the fewer remembered chunks, then the
// smaller index). When the load is imbalanced (max - min in flight > balance_abs and max >
// balance_rel x min) every request goes to the least-loaded replica. Also round-robin and
// least-load. Thread-safe.
#pragma once

#include <cstdint>
#include <list>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/result.h"

namespace deepinfer::router {

enum class Policy { kCacheAware, kRoundRobin, kLeastLoad };
Result<Policy> parse_policy(const std::string& name);  // cache_aware | round_robin | least_load

struct PickerOptions {
  Policy policy = Policy::kCacheAware;
  double cache_threshold = 0.5;     // matched fraction of the prompt for cache affinity
  int64_t balance_abs = 32;         // imbalance: max - min in flight above this ...
  double balance_rel = 1.0001;      // ... and max above this times min
  size_t chunk_bytes = 64;          // prompt bytes per hashed chunk
  size_t max_chunks = size_t{1} << 18;  // remembered chunks per replica (LRU)
  Status validate() const;
};

struct PickerStats {
  int64_t picks = 0, cache_hits = 0;  // cache_hits: picks decided by the prompt-prefix match
};

class ReplicaPicker {
 public:
  ReplicaPicker(size_t replicas, PickerOptions opts);

  /// The replica for a request whose prompt is `key`, skipping `exclude`d ones (a replica that
  /// just failed this request) and unhealthy ones; -1 when none is left. The pick counts as in
  /// flight until done(); with the cache-aware policy the key is remembered for it.
  int pick(std::string_view key, const std::vector<int>& exclude = {});
  void done(int replica);
  void set_healthy(int replica, bool healthy);

  size_t size() const { return replicas_.size(); }
  bool healthy(int replica) const;
  int64_t in_flight(int replica) const;
  PickerStats stats() const;
  /// How many leading chunks of `key` the replica remembers, out of how many (for tests).
  std::pair<size_t, size_t> match(int replica, std::string_view key) const;

 private:
  struct Replica {
    bool healthy = true;
    int64_t in_flight = 0;
    std::list<uint64_t> lru;  // most recent first
    std::unordered_map<uint64_t, std::list<uint64_t>::iterator> chunks;
  };
  std::vector<uint64_t> chain(std::string_view key) const;
  size_t matched(const Replica& r, const std::vector<uint64_t>& hashes) const;
  void remember(Replica& r, const std::vector<uint64_t>& hashes);
  int least_loaded(const std::vector<bool>& allowed) const;

  PickerOptions opts_;
  mutable std::mutex mu_;
  std::vector<Replica> replicas_;
  size_t next_ = 0;  // round robin
  PickerStats stats_;
};

}  // namespace deepinfer::router
