#include "tokenizer/bpe_model.h"

#include <queue>

namespace deepinfer::tokenizer {
namespace {

constexpr size_t kLinearMaxBytes = 48;

inline uint64_t pair_key(int32_t l, int32_t r) {
  return ((static_cast<uint64_t>(static_cast<uint32_t>(l)) << 32) | static_cast<uint32_t>(r)) + 1;
}
inline uint64_t hash_key(uint64_t k) {
  k ^= k >> 33;
  k *= 0xff51afd7ed558ccdULL;
  k ^= k >> 33;
  return k;
}

}  // namespace

Result<BpeModel> BpeModel::build(const std::vector<int32_t>& byte_ids, const std::vector<Merge>& merges) {
  if (byte_ids.size() != 256) return Status::invalid_argument("BPE: need 256 byte tokens");
  BpeModel m;
  for (int b = 0; b < 256; ++b) {
    if (byte_ids[b] < 0) return Status::invalid_argument("BPE: byte token missing from vocab");
    m.byte_ids_[b] = byte_ids[b];
  }
  size_t cap = 1;
  while (cap < merges.size() * 2 + 16) cap <<= 1;
  m.slots_.assign(cap, Slot{0, 0, 0});
  m.mask_ = cap - 1;
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const Merge& mg = merges[rank];
    uint64_t key = pair_key(mg.left, mg.right);
    for (uint64_t h = hash_key(key) & m.mask_;; h = (h + 1) & m.mask_) {
      Slot& s = m.slots_[h];
      if (s.key == key) break;  // duplicate merge: the first (lowest rank) wins, as in HF
      if (s.key == 0) {
        s = Slot{key, static_cast<int32_t>(rank), mg.merged};
        break;
      }
    }
  }
  return m;
}

const BpeModel::Slot* BpeModel::find(int32_t left, int32_t right) const {
  uint64_t key = pair_key(left, right);
  for (uint64_t h = hash_key(key) & mask_;; h = (h + 1) & mask_) {
    const Slot& s = slots_[h];
    if (s.key == key) return &s;
    if (s.key == 0) return nullptr;
  }
}

void BpeModel::encode_piece(std::string_view piece, std::vector<int32_t>& out) const {
  if (piece.size() == 1) {
    out.push_back(byte_ids_[static_cast<unsigned char>(piece[0])]);
  } else if (piece.size() <= kLinearMaxBytes) {
    encode_linear(piece, out);
  } else {
    encode_heap(piece, out);
  }
}

// Repeatedly merges the lowest-rank adjacent pair (leftmost among equals).
void BpeModel::encode_linear(std::string_view piece, std::vector<int32_t>& out) const {
  int32_t ids[kLinearMaxBytes];
  int32_t ranks[kLinearMaxBytes];  // rank of pair (i, i+1); INT32_MAX if none
  int32_t merged[kLinearMaxBytes];
  int n = static_cast<int>(piece.size());
  for (int i = 0; i < n; ++i) ids[i] = byte_ids_[static_cast<unsigned char>(piece[i])];
  auto fill = [&](int i) {
    const Slot* s = find(ids[i], ids[i + 1]);
    ranks[i] = s ? s->rank : INT32_MAX;
    merged[i] = s ? s->merged : -1;
  };
  for (int i = 0; i + 1 < n; ++i) fill(i);
  while (n > 1) {
    int best = -1;
    int32_t best_rank = INT32_MAX;
    for (int i = 0; i + 1 < n; ++i) {
      if (ranks[i] < best_rank) {
        best_rank = ranks[i];
        best = i;
      }
    }
    if (best < 0) break;
    ids[best] = merged[best];
    for (int i = best + 1; i + 1 < n; ++i) {
      ids[i] = ids[i + 1];
      ranks[i] = ranks[i + 1];
      merged[i] = merged[i + 1];
    }
    --n;
    if (best > 0) fill(best - 1);
    if (best + 1 < n) fill(best);
  }
  out.insert(out.end(), ids, ids + n);
}

// HF's algorithm: a min-heap of candidate merges keyed (rank, position) over a linked list of
// symbols; stale entries are skipped when popped.
void BpeModel::encode_heap(std::string_view piece, std::vector<int32_t>& out) const {
  struct Sym {
    int32_t id;
    int32_t prev;
    int32_t next;
    bool alive;
  };
  struct Cand {
    int32_t rank;
    int32_t pos;
    int32_t merged;
    bool operator>(const Cand& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  const int32_t n = static_cast<int32_t>(piece.size());
  std::vector<Sym> sym(static_cast<size_t>(n));
  for (int32_t i = 0; i < n; ++i) {
    sym[i] = Sym{byte_ids_[static_cast<unsigned char>(piece[i])], i - 1, i + 1 < n ? i + 1 : -1, true};
  }
  std::vector<Cand> storage;
  storage.reserve(static_cast<size_t>(n));
  std::priority_queue<Cand, std::vector<Cand>, std::greater<Cand>> heap(std::greater<Cand>(),
                                                                        std::move(storage));
  auto push = [&](int32_t pos) {
    int32_t nx = sym[pos].next;
    if (nx < 0) return;
    if (const Slot* s = find(sym[pos].id, sym[nx].id)) heap.push(Cand{s->rank, pos, s->merged});
  };
  for (int32_t i = 0; i + 1 < n; ++i) push(i);
  while (!heap.empty()) {
    Cand c = heap.top();
    heap.pop();
    Sym& left = sym[c.pos];
    if (!left.alive || left.next < 0) continue;
    const Slot* s = find(left.id, sym[left.next].id);
    if (!s || s->merged != c.merged) continue;
    Sym& right = sym[left.next];
    left.id = c.merged;
    right.alive = false;
    left.next = right.next;
    if (right.next >= 0) sym[right.next].prev = c.pos;
    if (left.prev >= 0) push(left.prev);
    push(c.pos);
  }
  for (int32_t i = 0; i >= 0; i = sym[i].next) out.push_back(sym[i].id);
}

}  // namespace deepinfer::tokenizer
