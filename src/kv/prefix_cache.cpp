#include "kv/prefix_cache.h"

#include <xxhash.h>

#include <algorithm>

#include "core/check.h"

namespace deepinfer {

uint64_t PrefixCache::xxh3_block_hash(std::span<const int32_t> block, uint64_t seed) {
  return XXH3_64bits_withSeed(block.data(), block.size() * sizeof(int32_t), seed);
}

PrefixCache::PrefixCache(int64_t block_tokens, int64_t capacity_bytes, BlockHash hash)
    : block_tokens_(block_tokens), capacity_bytes_(capacity_bytes), hash_(hash) {
  DI_CHECK(block_tokens > 0);
  DI_CHECK(hash != nullptr);
}

uint64_t PrefixCache::chain_hash(std::span<const int32_t> tokens) const {
  uint64_t h = 0x9e3779b97f4a7c15ull;
  for (size_t i = 0; i < tokens.size(); i += static_cast<size_t>(block_tokens_)) {
    const size_t n = std::min(tokens.size() - i, static_cast<size_t>(block_tokens_));
    h = hash_(tokens.subspan(i, n), h);
  }
  return h;
}

PrefixCache::Hit PrefixCache::lookup(std::span<const int32_t> tokens, int64_t max_tokens) {
  ++stats_.lookups;
  const int64_t limit = std::min<int64_t>(max_tokens, static_cast<int64_t>(tokens.size()));
  Hit best;
  uint64_t h = 0x9e3779b97f4a7c15ull;
  for (int64_t n = block_tokens_; n <= limit; n += block_tokens_) {
    h = hash_(tokens.subspan(static_cast<size_t>(n - block_tokens_), static_cast<size_t>(block_tokens_)), h);
    auto it = entries_.find(h);
    if (it == entries_.end()) continue;  // this boundary may have been evicted; longer ones may remain
    const Entry& e = it->second;
    if (static_cast<int64_t>(e.tokens.size()) != n || !std::equal(e.tokens.begin(), e.tokens.end(), tokens.begin()))
      continue;  // collision: not our prefix
    best = {n, e.payload};
    lru_.splice(lru_.begin(), lru_, e.lru);
  }
  if (best.tokens > 0) {
    ++stats_.hits;
    stats_.hit_tokens += best.tokens;
  }
  return best;
}

bool PrefixCache::contains(std::span<const int32_t> tokens) const {
  auto it = entries_.find(chain_hash(tokens));
  return it != entries_.end() && std::equal(it->second.tokens.begin(), it->second.tokens.end(), tokens.begin(),
                                            tokens.end());
}

void PrefixCache::insert(std::span<const int32_t> tokens, Payload payload, int64_t bytes) {
  const int64_t n = static_cast<int64_t>(tokens.size());
  DI_CHECK(n > 0 && n % block_tokens_ == 0);
  if (bytes > capacity_bytes_) return;
  const uint64_t h = chain_hash(tokens);
  auto it = entries_.find(h);
  if (it != entries_.end()) {
    if (std::equal(it->second.tokens.begin(), it->second.tokens.end(), tokens.begin(), tokens.end())) {
      lru_.splice(lru_.begin(), lru_, it->second.lru);
      return;  // already cached
    }
    // Collision with another prefix: the newer one replaces it.
    stats_.bytes -= it->second.bytes;
    lru_.erase(it->second.lru);
    entries_.erase(it);
    --stats_.entries;
  }
  lru_.push_front(h);
  entries_[h] = Entry{{tokens.begin(), tokens.end()}, std::move(payload), bytes, lru_.begin()};
  stats_.bytes += bytes;
  ++stats_.entries;
  shrink_to(capacity_bytes_);
}

void PrefixCache::shrink_to(int64_t bytes) {
  while (stats_.bytes > bytes && !lru_.empty()) {
    const uint64_t h = lru_.back();
    lru_.pop_back();
    auto it = entries_.find(h);
    stats_.bytes -= it->second.bytes;
    entries_.erase(it);
    --stats_.entries;
    ++stats_.evictions;
  }
}

void PrefixCache::clear() { shrink_to(0); }

}  // namespace deepinfer
