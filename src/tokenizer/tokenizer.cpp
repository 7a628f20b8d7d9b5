#include "tokenizer/tokenizer.h"

#include <unordered_map>

#include "tokenizer/pretokenizer.h"
#include "tokenizer/utf8.h"

namespace deepinfer::tokenizer {
namespace {

// Per-thread scratch: the pre-tokenizer buffers and a cache of piece -> ids. Keyed by the
// tokenizer's instance id (not its address) so a new tokenizer never sees stale entries.
struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

constexpr size_t kMaxCachedPieceBytes = 64;
constexpr size_t kMaxCacheEntries = 1 << 16;

struct Scratch {
  uint64_t owner = 0;
  PreTokenizer pretokenizer;
  std::vector<Piece> pieces;
  std::vector<TextSegment> segments;
  std::unordered_map<std::string, std::pair<uint32_t, uint32_t>, StringHash, std::equal_to<>> cache;
  std::vector<TokenId> arena;

  void reset_cache(uint64_t id) {
    owner = id;
    cache.clear();
    arena.clear();
  }
};

Scratch& scratch_for(uint64_t instance_id) {
  thread_local Scratch s;
  if (s.owner != instance_id || s.cache.size() >= kMaxCacheEntries) s.reset_cache(instance_id);
  return s;
}

}  // namespace

Result<SpecialTokenMode> parse_special_token_mode(std::string_view name) {
  if (name == "parse") return SpecialTokenMode::kParse;
  if (name == "text") return SpecialTokenMode::kText;
  return Status::invalid_argument("special-token mode must be 'parse' or 'text', got '" + std::string(name) + "'");
}

void Tokenizer::encode_piece_cached(std::string_view piece, std::vector<TokenId>& out) const {
  if (piece.size() > kMaxCachedPieceBytes || piece.size() == 1) {
    bpe_.encode_piece(piece, out);
    return;
  }
  Scratch& s = scratch_for(instance_id_);
  auto it = s.cache.find(piece);
  if (it != s.cache.end()) {
    out.insert(out.end(), s.arena.begin() + it->second.first,
               s.arena.begin() + it->second.first + it->second.second);
    return;
  }
  size_t start = out.size();
  bpe_.encode_piece(piece, out);
  uint32_t off = static_cast<uint32_t>(s.arena.size());
  s.arena.insert(s.arena.end(), out.begin() + static_cast<ptrdiff_t>(start), out.end());
  s.cache.emplace(std::string(piece), std::make_pair(off, static_cast<uint32_t>(out.size() - start)));
}

void Tokenizer::append_plain(std::string_view text, std::vector<TokenId>& out) const {
  if (text.empty()) return;
  Scratch& s = scratch_for(instance_id_);
  // split() reuses the scratch vectors; copy the pieces out since encoding may reset the cache
  // but never the pre-tokenizer buffers.
  s.pretokenizer.split(text, s.pieces);
  for (const Piece& p : s.pieces) encode_piece_cached(text.substr(p.begin, p.end - p.begin), out);
}

Result<std::vector<TokenId>> Tokenizer::encode(std::string_view text, SpecialTokenMode mode) const {
  DI_TRY(validate_utf8(text));
  if (text.size() >= (size_t{1} << 32)) return Status::invalid_argument("text longer than 4 GiB");
  std::vector<TokenId> ids;
  ids.reserve(text.size() / 3 + 4);
  if (mode == SpecialTokenMode::kText) {
    append_plain(text, ids);
    return ids;
  }
  std::vector<TextSegment> segments;
  added_.split(text, segments);
  for (const TextSegment& seg : segments) {
    if (seg.token_id >= 0) {
      ids.push_back(seg.token_id);
    } else {
      append_plain(text.substr(seg.begin, seg.end - seg.begin), ids);
    }
  }
  return ids;
}

Result<std::string> Tokenizer::decode(std::span<const TokenId> ids, const DecodeOptions& opts) const {
  std::string bytes;
  bytes.reserve(ids.size() * 4);
  for (TokenId id : ids) {
    if (!is_known(id)) return Status::invalid_argument("decode: unknown token id " + std::to_string(id));
    if (opts.skip_special_tokens) {
      const AddedToken* a = added_.by_id(id);
      if (a != nullptr && a->special) continue;
    }
    bytes += token_bytes_[id];
  }
  return utf8_lossy(bytes);
}

bool Tokenizer::is_known(TokenId id) const {
  return id >= 0 && static_cast<size_t>(id) < known_.size() && known_[id];
}

std::string_view Tokenizer::token_bytes(TokenId id) const {
  return is_known(id) ? std::string_view(token_bytes_[id]) : std::string_view();
}

std::optional<TokenId> Tokenizer::added_token_id(std::string_view content) const {
  const AddedToken* a = added_.by_content(content);
  if (a == nullptr) return std::nullopt;
  return a->id;
}

}  // namespace deepinfer::tokenizer
