// Engram n-gram memory of V4.1 (V4-MODEL.md section 7; tools/reference/README.md item 8):
// hashing of the compressed token ids of the last N tokens (token ids only, so the rows a step
// needs are known before the step runs and can be prefetched), and the gated write into the
// residual streams from the rows of a memory-mapped table.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "core/result.h"
#include "model/deepseek_v41/config.h"

namespace deepinfer::v41 {

/// Bucket moduli [layer][ngram-2][head]: consecutive primes above engram_vocab_size - 1, handed out
/// in (layer, n-gram, head) order, never reused.
std::vector<std::vector<std::vector<int64_t>>> engram_primes(const V41Config& c);

/// The odd per-(layer, look-back) multipliers: NumPy's `default_rng(10007 * layer_id)
/// .integers(0, bound, size=max_ngram, dtype=int64) * 2 + 1`, bound = (INT64_MAX // vocab) // 2
/// (PCG64 seeded through SeedSequence, Lemire's bounded integers), reproduced bit for bit.
std::vector<int64_t> engram_multipliers(int64_t layer_id, int64_t max_ngram, int64_t compressed_vocab);

struct EngramWeights {
  Weight table;                 // [sum of primes, head_dim]; rows gathered on demand
  Weight wkv;                   // [(hc+1) * d, (N-1) * heads * head_dim]
  std::vector<float> qk_weight; // [hc, d]: q_weight * k_weight
};

class EngramHasher {
 public:
  /// token_map: compressed id of every vocabulary id.
  static Result<EngramHasher> create(const V41Config& c, std::vector<int32_t> token_map);
  int64_t columns() const { return cols_; }  // (N-1) * heads hash ids per layer and token
  int64_t layers() const { return static_cast<int64_t>(mult_.size()); }
  int32_t compressed(int32_t token) const { return token_map_[token]; }
  int32_t pad() const { return pad_; }
  const std::vector<int64_t>& offsets(int64_t layer) const { return offsets_[layer]; }
  const std::vector<int64_t>& multipliers(int64_t layer) const { return mult_[layer]; }
  const std::vector<std::vector<std::vector<int64_t>>>& primes() const { return primes_; }
  /// back[s] = compressed id of the token s places back (s = 0..N-1), or -1 before position 0.
  /// Writes layers() x columns() table rows (already offset) to out.
  void hash(const int32_t* back, int64_t* out) const;

 private:
  int64_t N_ = 0, H_ = 0, cols_ = 0;
  int32_t pad_ = 0;
  std::vector<int32_t> token_map_;
  std::vector<std::vector<std::vector<int64_t>>> primes_;
  std::vector<std::vector<int64_t>> offsets_, mult_;
};

/// The compressed token map of a model folder: derived from tokenizer.json
/// (engram_token_map.h); its number of distinct ids must equal engram_compressed_vocab_size. When
/// `engram_token_map.json` ({"token_map": [ids]}, tools/reference/tokenizer_compress.py) is present
/// too it must equal the derived map (the error names the first differing token id); without
/// tokenizer.json the JSON is taken as given.
Result<std::vector<int32_t>> load_token_map(const std::string& dir, const V41Config& c);

/// A page-aligned byte range [begin, end) of a table's storage.
struct PageRange {
  uintptr_t begin = 0, end = 0;
  bool operator==(const PageRange&) const = default;
};

/// The pages of `table` (its data and, when present, its scales) that reading `rows` touches,
/// sorted and merged. Rows are those of Weight::dequant_rows (row r: bytes [r * row_bytes, ...) of
/// the data, scale row r / block_rows).
std::vector<PageRange> table_row_pages(const Weight& table, std::span<const int64_t> rows, size_t page_size);

/// Asks the OS to read `rows` of the (memory-mapped) table ahead: madvise(MADV_WILLNEED) on their
/// pages, which returns at once while the kernel reads them in. Values are untouched, so results do
/// not depend on it. Returns the number of ranges advised.
int64_t prefetch_table_rows(const Weight& table, std::span<const int64_t> rows);

/// X [N, hc, d] += gate * value with rows = table[hash_ids] (hash_ids [N, cols]).
void engram_forward(CpuOps& ops, const V41Config& c, const EngramWeights& w, const int64_t* hash_ids, int64_t N,
                    float* X);

}  // namespace deepinfer::v41
