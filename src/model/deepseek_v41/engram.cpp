#include "model/deepseek_v41/engram.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>

#include "loader/checkpoint.h"
#include "model/numerics.h"
#include "model/deepseek_v41/engram_token_map.h"

namespace deepinfer::v41 {

namespace {

bool is_prime(int64_t n) {
  if (n < 2) return false;
  for (int64_t p = 2; p * p <= n; ++p)
    if (n % p == 0) return false;
  return true;
}

// NumPy's SeedSequence (pool size 4) for an integer entropy, then PCG64 (XSL-RR 128/64).
class Pcg64 {
 public:
  explicit Pcg64(uint64_t seed) {
    std::vector<uint32_t> entropy;
    do {
      entropy.push_back(static_cast<uint32_t>(seed));
      seed >>= 32;
    } while (seed);
    uint32_t pool[4];
    uint32_t hc = 0x43b0d7e5u;
    auto hashmix = [&](uint32_t v) {
      v ^= hc;
      hc *= 0x931e8875u;
      v *= hc;
      v ^= v >> 16;
      return v;
    };
    auto mix = [](uint32_t x, uint32_t y) {
      uint32_t r = 0xca01f9ddu * x - 0x4973f715u * y;
      return r ^ (r >> 16);
    };
    for (int i = 0; i < 4; ++i) pool[i] = hashmix(i < static_cast<int>(entropy.size()) ? entropy[i] : 0u);
    for (int s = 0; s < 4; ++s)
      for (int d = 0; d < 4; ++d)
        if (s != d) pool[d] = mix(pool[d], hashmix(pool[s]));
    for (size_t s = 4; s < entropy.size(); ++s)
      for (int d = 0; d < 4; ++d) pool[d] = mix(pool[d], hashmix(entropy[s]));
    uint32_t st[8];
    uint32_t hb = 0x8b51f9ddu;
    for (int i = 0; i < 8; ++i) {
      uint32_t v = pool[i % 4];
      v ^= hb;
      hb *= 0x58f38dedu;
      v *= hb;
      v ^= v >> 16;
      st[i] = v;
    }
    uint64_t w[4];
    for (int i = 0; i < 4; ++i) w[i] = static_cast<uint64_t>(st[2 * i]) | (static_cast<uint64_t>(st[2 * i + 1]) << 32);
    const unsigned __int128 init = (static_cast<unsigned __int128>(w[0]) << 64) | w[1];
    const unsigned __int128 seq = (static_cast<unsigned __int128>(w[2]) << 64) | w[3];
    state_ = 0;
    inc_ = (seq << 1) | 1;
    step();
    state_ += init;
    step();
  }
  uint64_t next() {
    step();
    const uint64_t x = static_cast<uint64_t>(state_ >> 64) ^ static_cast<uint64_t>(state_);
    const unsigned rot = static_cast<unsigned>(state_ >> 122);
    return (x >> rot) | (x << ((64 - rot) & 63));
  }
  // Lemire's method for [0, rng] (NumPy's bounded_lemire_uint64).
  uint64_t bounded(uint64_t rng) {
    const uint64_t excl = rng + 1;
    unsigned __int128 m = static_cast<unsigned __int128>(next()) * excl;
    uint64_t left = static_cast<uint64_t>(m);
    if (left < excl) {
      const uint64_t threshold = (std::numeric_limits<uint64_t>::max() - rng) % excl;
      while (left < threshold) {
        m = static_cast<unsigned __int128>(next()) * excl;
        left = static_cast<uint64_t>(m);
      }
    }
    return static_cast<uint64_t>(m >> 64);
  }

 private:
  void step() {
    const unsigned __int128 mult = (static_cast<unsigned __int128>(0x2360ED051FC65DA4ull) << 64) | 0x4385DF649FCCF645ull;
    state_ = state_ * mult + inc_;
  }
  unsigned __int128 state_ = 0, inc_ = 0;
};

}  // namespace

std::vector<std::vector<std::vector<int64_t>>> engram_primes(const V41Config& c) {
  std::vector<std::vector<std::vector<int64_t>>> out;
  int64_t cur = c.engram_vocab_size - 1;  // the search restarts per (layer, n-gram); primes are never reused,
  int64_t last = cur;                     // so the sequence simply continues upward
  for (size_t l = 0; l < c.engram_layers.size(); ++l) {
    std::vector<std::vector<int64_t>> per;
    for (int64_t g = 0; g + 1 < c.engram_max_ngram; ++g) {
      std::vector<int64_t> row;
      int64_t p = std::max(cur, last);
      for (int64_t h = 0; h < c.engram_n_heads; ++h) {
        do ++p; while (!is_prime(p));
        row.push_back(p);
      }
      last = p;
      per.push_back(std::move(row));
    }
    out.push_back(std::move(per));
  }
  return out;
}

std::vector<int64_t> engram_multipliers(int64_t layer_id, int64_t max_ngram, int64_t compressed_vocab) {
  const int64_t bound = std::max<int64_t>(1, (std::numeric_limits<int64_t>::max() / compressed_vocab) / 2);
  Pcg64 g(static_cast<uint64_t>(10007 * layer_id));
  std::vector<int64_t> m(max_ngram);
  for (int64_t s = 0; s < max_ngram; ++s) m[s] = static_cast<int64_t>(g.bounded(static_cast<uint64_t>(bound - 1))) * 2 + 1;
  return m;
}

Result<EngramHasher> EngramHasher::create(const V41Config& c, std::vector<int32_t> token_map) {
  EngramHasher h;
  if (static_cast<int64_t>(token_map.size()) != c.vocab_size)
    return Status::invalid_argument("engram token map has " + std::to_string(token_map.size()) + " entries for " +
                                    std::to_string(c.vocab_size) + " tokens");
  for (int32_t v : token_map)
    if (v < 0 || v >= c.engram_compressed_vocab)
      return Status::invalid_argument("engram token map entry " + std::to_string(v) +
                                      " outside engram_compressed_vocab_size " + std::to_string(c.engram_compressed_vocab));
  h.N_ = c.engram_max_ngram;
  h.H_ = c.engram_n_heads;
  h.cols_ = (h.N_ - 1) * h.H_;
  h.token_map_ = std::move(token_map);
  h.pad_ = h.token_map_[c.engram_pad_id];
  h.primes_ = engram_primes(c);
  for (size_t l = 0; l < c.engram_layers.size(); ++l) {
    std::vector<int64_t> off;
    int64_t acc = 0;
    for (const auto& row : h.primes_[l])
      for (int64_t p : row) off.push_back(acc), acc += p;
    if (acc != c.engram_num_embeddings[l])
      return Status::invalid_argument("engram_num_embeddings[" + std::to_string(l) + "] = " +
                                      std::to_string(c.engram_num_embeddings[l]) + " but the layer's bucket primes sum to " +
                                      std::to_string(acc));
    h.offsets_.push_back(std::move(off));
    h.mult_.push_back(engram_multipliers(c.engram_layers[l], h.N_, c.engram_compressed_vocab));
  }
  return h;
}

void EngramHasher::hash(const int32_t* back, int64_t* out) const {
  // A look-back before position 0 blocks that token and every older one: they hash as the pad id.
  std::vector<uint64_t> toks(N_);
  bool blocked = false;
  for (int64_t s = 0; s < N_; ++s) {
    blocked = blocked || back[s] < 0;
    toks[s] = static_cast<uint64_t>(blocked ? pad_ : back[s]);
  }
  for (size_t l = 0; l < mult_.size(); ++l) {
    uint64_t rolling = toks[0] * static_cast<uint64_t>(mult_[l][0]);
    for (int64_t i = 1; i < N_; ++i) {
      rolling ^= toks[i] * static_cast<uint64_t>(mult_[l][i]);
      for (int64_t hh = 0; hh < H_; ++hh) {
        const int64_t col = (i - 1) * H_ + hh;
        out[l * cols_ + col] = static_cast<int64_t>(rolling % static_cast<uint64_t>(primes_[l][i - 1][hh])) + offsets_[l][col];
      }
    }
  }
}

namespace {

Result<std::vector<int32_t>> read_token_map_json(const std::string& path) {
  DI_ASSIGN_OR_RETURN(nlohmann::json j, Checkpoint::read_json(path));
  if (!j.is_object() || !j.contains("token_map") || !j["token_map"].is_array())
    return Status::invalid_argument(path + ": missing array 'token_map'");
  std::vector<int32_t> tm;
  for (const auto& v : j["token_map"]) {
    if (!v.is_number_integer()) return Status::invalid_argument(path + ": token_map entries must be integers");
    tm.push_back(v.get<int32_t>());
  }
  return tm;
}

}  // namespace

Result<std::vector<int32_t>> load_token_map(const std::string& dir, const V41Config& c) {
  const std::string json_path = dir + "/engram_token_map.json", tok_path = dir + "/tokenizer.json";
  std::error_code ec;
  const bool has_json = std::filesystem::exists(json_path, ec), has_tok = std::filesystem::exists(tok_path, ec);
  if (!has_tok) {
    if (has_json) return read_token_map_json(json_path);  // nothing to derive it from: taken as given
    return Status::not_found(dir + ": Engram needs the compressed token map: neither tokenizer.json (to derive it) "
                             "nor engram_token_map.json is present");
  }
  DI_ASSIGN_OR_RETURN(CompressedTokenMap derived, derive_compressed_token_map_file(tok_path));
  if (derived.compressed_vocab != c.engram_compressed_vocab)
    return Status::invalid_argument(tok_path + ": the compressed token map derived from it has " +
                                    std::to_string(derived.compressed_vocab) +
                                    " distinct ids but engram_compressed_vocab_size is " +
                                    std::to_string(c.engram_compressed_vocab));
  if (has_json) {
    DI_ASSIGN_OR_RETURN(std::vector<int32_t> stored, read_token_map_json(json_path));
    DI_TRY(compare_token_maps(derived.token_map, stored, json_path + " disagrees with the map derived from tokenizer.json"));
  }
  return std::move(derived.token_map);
}

std::vector<PageRange> table_row_pages(const Weight& table, std::span<const int64_t> rows, size_t page_size) {
  std::vector<PageRange> r;
  if (rows.empty() || !table.defined()) return r;
  auto add = [&](const Tensor& t, int64_t nrows, int64_t row) {
    const size_t row_bytes = t.nbytes() / static_cast<size_t>(nrows);
    const uintptr_t base = reinterpret_cast<uintptr_t>(t.data()) + static_cast<uintptr_t>(row) * row_bytes;
    const uintptr_t b = base / page_size * page_size, e = (base + row_bytes + page_size - 1) / page_size * page_size;
    r.push_back({b, e});
  };
  for (int64_t row : rows) {
    add(table.data, table.rows, row);
    if (table.scale.data()) add(table.scale, table.scale.dim(0), row / std::max<int64_t>(1, table.block_rows));
  }
  std::sort(r.begin(), r.end(), [](const PageRange& a, const PageRange& b) { return a.begin < b.begin; });
  std::vector<PageRange> merged;
  for (const PageRange& p : r) {
    if (!merged.empty() && p.begin <= merged.back().end) merged.back().end = std::max(merged.back().end, p.end);
    else merged.push_back(p);
  }
  return merged;
}

int64_t prefetch_table_rows(const Weight& table, std::span<const int64_t> rows) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const std::vector<PageRange> pages = table_row_pages(table, rows, page);
  // Advice only: a failure (e.g. memory that is not a mapping) changes nothing but speed.
  for (const PageRange& p : pages) (void)madvise(reinterpret_cast<void*>(p.begin), p.end - p.begin, MADV_WILLNEED);
  return static_cast<int64_t>(pages.size());
}

void engram_forward(CpuOps& ops, const V41Config& c, const EngramWeights& w, const int64_t* hash_ids, int64_t N,
                    float* X) {
  const int64_t n = c.hc_mult, d = c.hidden, hd = c.engram_head_dim;
  const int64_t cols = (c.engram_max_ngram - 1) * c.engram_n_heads;
  // Only the rows this step hashes to are read from the (memory-mapped) table.
  std::vector<int32_t> ids(N * cols);
  for (int64_t i = 0; i < N * cols; ++i) ids[i] = static_cast<int32_t>(hash_ids[i]);
  std::vector<float> rows(N * cols * hd), kv(N * (n + 1) * d);
  ops.embedding(w.table, ids.data(), N * cols, rows.data());
  if (c.act_block() > 0) numerics::fake_fp8_rows(rows.data(), N, cols * hd, c.act_block());  // wkv is FP8
  ops.linear(rows.data(), N, w.wkv, kv.data());
  const float eps = static_cast<float>(c.rms_eps);
  const float inv_sqrt_d = 1.f / std::sqrt(static_cast<float>(d));
  ops.pool().parallel_for(N, 1, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const float* value = kv.data() + (t * (n + 1) + n) * d;
      for (int64_t s = 0; s < n; ++s) {
        float* xs = X + (t * n + s) * d;
        const float* key = kv.data() + (t * (n + 1) + s) * d;
        const float* wq = w.qk_weight.data() + s * d;
        float xx = 0.f, kk = 0.f, dot = 0.f;
        for (int64_t e = 0; e < d; ++e) {
          xx += xs[e] * xs[e];
          kk += key[e] * key[e];
          dot += xs[e] * wq[e] * key[e];
        }
        const float rstd = 1.f / std::sqrt(xx / d + eps) / std::sqrt(kk / d + eps);
        const float g = dot * rstd * inv_sqrt_d;
        const float sq = std::copysign(std::sqrt(std::max(std::fabs(g), 1e-6f)), g);
        const float gate = 1.f / (1.f + std::exp(-sq));
        for (int64_t e = 0; e < d; ++e) xs[e] += gate * value[e];
      }
    }
  });
}

}  // namespace deepinfer::v41
