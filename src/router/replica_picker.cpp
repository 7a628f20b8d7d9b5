#include "router/replica_picker.h"

#include <xxhash.h>

#include <algorithm>

namespace deepinfer::router {

Result<Policy> parse_policy(const std::string& name) {
  if (name == "cache_aware") return Policy::kCacheAware;
  if (name == "round_robin") return Policy::kRoundRobin;
  if (name == "least_load") return Policy::kLeastLoad;
  return Status::invalid_argument("policy must be cache_aware, round_robin or least_load, got '" + name + "'");
}

Status PickerOptions::validate() const {
  if (!(cache_threshold >= 0 && cache_threshold <= 1)) return Status::invalid_argument("cache threshold must be in [0, 1]");
  if (balance_abs < 0) return Status::invalid_argument("balance_abs must be >= 0");
  if (!(balance_rel >= 1)) return Status::invalid_argument("balance_rel must be >= 1");
  if (chunk_bytes == 0) return Status::invalid_argument("chunk_bytes must be positive");
  if (max_chunks == 0) return Status::invalid_argument("max_chunks must be positive");
  return Status::ok();
}

ReplicaPicker::ReplicaPicker(size_t replicas, PickerOptions opts) : opts_(opts), replicas_(replicas) {}

std::vector<uint64_t> ReplicaPicker::chain(std::string_view key) const {
  std::vector<uint64_t> out;
  uint64_t h = 0;
  for (size_t at = 0; at < key.size(); at += opts_.chunk_bytes) {
    const std::string_view c = key.substr(at, opts_.chunk_bytes);
    h = XXH3_64bits_withSeed(c.data(), c.size(), h);  // each hash implies the whole prefix
    out.push_back(h);
  }
  return out;
}

size_t ReplicaPicker::matched(const Replica& r, const std::vector<uint64_t>& hashes) const {
  size_t n = 0;
  while (n < hashes.size() && r.chunks.count(hashes[n])) ++n;
  return n;
}

void ReplicaPicker::remember(Replica& r, const std::vector<uint64_t>& hashes) {
  for (uint64_t h : hashes) {
    auto it = r.chunks.find(h);
    if (it != r.chunks.end()) r.lru.erase(it->second);
    r.lru.push_front(h);
    r.chunks[h] = r.lru.begin();
  }
  while (r.lru.size() > opts_.max_chunks) {
    r.chunks.erase(r.lru.back());
    r.lru.pop_back();
  }
}

int ReplicaPicker::least_loaded(const std::vector<bool>& allowed) const {
  int best = -1;
  for (size_t i = 0; i < replicas_.size(); ++i) {
    if (!allowed[i]) continue;
    const Replica& r = replicas_[i];
    if (best < 0 || r.in_flight < replicas_[best].in_flight ||
        (r.in_flight == replicas_[best].in_flight && r.lru.size() < replicas_[best].lru.size()))
      best = static_cast<int>(i);
  }
  return best;
}

int ReplicaPicker::pick(std::string_view key, const std::vector<int>& exclude) {
  // Hashed before the lock (a long prompt takes microseconds); only the cache-aware policy reads it.
  const std::vector<uint64_t> hashes = opts_.policy == Policy::kCacheAware ? chain(key) : std::vector<uint64_t>{};
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<bool> allowed(replicas_.size());
  int64_t lo = INT64_MAX, hi = -1;
  for (size_t i = 0; i < replicas_.size(); ++i) {
    allowed[i] = replicas_[i].healthy && std::find(exclude.begin(), exclude.end(), static_cast<int>(i)) == exclude.end();
    if (!allowed[i]) continue;
    lo = std::min(lo, replicas_[i].in_flight);
    hi = std::max(hi, replicas_[i].in_flight);
  }
  if (hi < 0) return -1;
  int chosen = -1;
  switch (opts_.policy) {
    case Policy::kRoundRobin:
      for (size_t k = 0; k < replicas_.size() && chosen < 0; ++k) {
        const size_t i = (next_ + k) % replicas_.size();
        if (allowed[i]) chosen = static_cast<int>(i);
      }
      next_ = static_cast<size_t>(chosen) + 1;
      break;
    case Policy::kLeastLoad: chosen = least_loaded(allowed); break;
    case Policy::kCacheAware: {
      const bool imbalanced = hi - lo > opts_.balance_abs && static_cast<double>(hi) > opts_.balance_rel * static_cast<double>(lo);
      if (!imbalanced && !hashes.empty()) {
        size_t best_n = 0;
        for (size_t i = 0; i < replicas_.size(); ++i) {
          if (!allowed[i]) continue;
          const size_t n = matched(replicas_[i], hashes);
          if (n > best_n) best_n = n, chosen = static_cast<int>(i);
        }
        if (chosen >= 0 && static_cast<double>(best_n) >= opts_.cache_threshold * static_cast<double>(hashes.size())) {
          ++stats_.cache_hits;
        } else {
          chosen = -1;
        }
      }
      if (chosen < 0) chosen = least_loaded(allowed);
      remember(replicas_[chosen], hashes);
      break;
    }
  }
  ++replicas_[chosen].in_flight;
  ++stats_.picks;
  return chosen;
}

void ReplicaPicker::done(int replica) {
  std::lock_guard<std::mutex> lock(mu_);
  if (replica >= 0 && static_cast<size_t>(replica) < replicas_.size() && replicas_[replica].in_flight > 0)
    --replicas_[replica].in_flight;
}

void ReplicaPicker::set_healthy(int replica, bool healthy) {
  std::lock_guard<std::mutex> lock(mu_);
  replicas_.at(static_cast<size_t>(replica)).healthy = healthy;
}

bool ReplicaPicker::healthy(int replica) const {
  std::lock_guard<std::mutex> lock(mu_);
  return replicas_.at(static_cast<size_t>(replica)).healthy;
}

int64_t ReplicaPicker::in_flight(int replica) const {
  std::lock_guard<std::mutex> lock(mu_);
  return replicas_.at(static_cast<size_t>(replica)).in_flight;
}

PickerStats ReplicaPicker::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

std::pair<size_t, size_t> ReplicaPicker::match(int replica, std::string_view key) const {
  std::lock_guard<std::mutex> lock(mu_);
  const std::vector<uint64_t> hashes = chain(key);
  return {matched(replicas_.at(static_cast<size_t>(replica)), hashes), hashes.size()};
}

}  // namespace deepinfer::router
