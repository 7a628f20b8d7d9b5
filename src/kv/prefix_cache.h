// PrefixCache: snapshots of per-sequence state at block boundaries, keyed by chained hashes of
// the token ids (xxh3 of each block seeded with the previous block's hash). Every entry keeps its
// full token prefix and a lookup compares it, so a hash collision costs a miss, never a wrong hit.
// Payloads are opaque (the engine stores model state snapshots); the cache only counts bytes and
// evicts least recently used entries over its byte budget. Not thread-safe (the engine thread).
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <span>
#include <unordered_map>
#include <vector>

namespace deepinfer {

class PrefixCache {
 public:
  using Payload = std::shared_ptr<const void>;
  struct Hit {
    int64_t tokens = 0;  // cached prefix length (a multiple of block_tokens), 0 on a miss
    Payload payload;
  };
  struct Stats {
    int64_t entries = 0, bytes = 0, lookups = 0, hits = 0, hit_tokens = 0, evictions = 0;
  };

  /// Hash of one block of ids, chained on the previous block's hash (`seed`). The default is
  /// xxh3; a test can pass a weak one to force collisions and check they only cost misses.
  using BlockHash = uint64_t (*)(std::span<const int32_t> block, uint64_t seed);
  static uint64_t xxh3_block_hash(std::span<const int32_t> block, uint64_t seed);

  PrefixCache(int64_t block_tokens, int64_t capacity_bytes, BlockHash hash = &xxh3_block_hash);

  int64_t block_tokens() const { return block_tokens_; }
  /// The longest cached prefix of `tokens` whose length is at most `max_tokens`.
  Hit lookup(std::span<const int32_t> tokens, int64_t max_tokens);
  /// Caches the state after tokens[0, n), n a positive multiple of block_tokens. Entries larger
  /// than the whole budget are not cached.
  void insert(std::span<const int32_t> tokens, Payload payload, int64_t bytes);
  bool contains(std::span<const int32_t> tokens) const;
  const Stats& stats() const { return stats_; }
  /// Drops everything (e.g. to give the memory back to running sequences).
  void clear();
  /// Evicts LRU entries until at most `bytes` are held.
  void shrink_to(int64_t bytes);

 private:
  struct Entry {
    std::vector<int32_t> tokens;
    Payload payload;
    int64_t bytes = 0;
    std::list<uint64_t>::iterator lru;
  };
  uint64_t chain_hash(std::span<const int32_t> tokens) const;

  int64_t block_tokens_, capacity_bytes_;
  BlockHash hash_;
  std::unordered_map<uint64_t, Entry> entries_;
  std::list<uint64_t> lru_;  // front: most recent
  Stats stats_;
};

}  // namespace deepinfer
