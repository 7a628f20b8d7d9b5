#include "grammar/tokenizer_info.h"

#include <algorithm>
#include <numeric>

#include "tokenizer/tokenizer.h"

namespace deepinfer::grammar {
namespace {

uint64_t fnv1a(uint64_t h, std::string_view s) {
  for (char c : s) {
    h ^= static_cast<uint8_t>(c);
    h *= 1099511628211ULL;
  }
  return h;
}

}  // namespace

int32_t TokenizerInfo::special_token_id(std::string_view content) const {
  auto it = std::lower_bound(special_tokens_.begin(), special_tokens_.end(), content,
                             [](const std::pair<std::string, int32_t>& a, std::string_view b) { return a.first < b; });
  return it != special_tokens_.end() && it->first == content ? it->second : -1;
}

bool TokenizerInfo::is_stop(int32_t id) const {
  return std::find(stop_ids_.begin(), stop_ids_.end(), id) != stop_ids_.end();
}

Result<std::shared_ptr<const TokenizerInfo>> TokenizerInfo::from_vocab(std::vector<std::string> token_bytes,
                                                                       std::vector<int32_t> stop_ids,
                                                                       std::vector<int32_t> excluded,
                                                                       std::vector<std::pair<std::string, int32_t>> special_tokens) {
  std::shared_ptr<TokenizerInfo> info(new TokenizerInfo());
  auto n = static_cast<int32_t>(token_bytes.size());
  info->token_bytes_ = std::move(token_bytes);
  info->matchable_.assign(static_cast<size_t>(n), 1);
  for (int32_t id : excluded) {
    if (id < 0 || id >= n) return Status::invalid_argument("excluded token id " + std::to_string(id) + " is out of range");
    info->matchable_[static_cast<size_t>(id)] = 0;
  }
  for (int32_t id : stop_ids) {
    if (id < 0 || id >= n) return Status::invalid_argument("stop token id " + std::to_string(id) + " is out of range");
    info->matchable_[static_cast<size_t>(id)] = 0;
  }
  std::sort(stop_ids.begin(), stop_ids.end());
  stop_ids.erase(std::unique(stop_ids.begin(), stop_ids.end()), stop_ids.end());
  info->stop_ids_ = std::move(stop_ids);

  uint64_t h = 1469598103934665603ULL;
  std::vector<int32_t> order;
  for (int32_t id = 0; id < n; ++id) {
    const std::string& b = info->token_bytes_[static_cast<size_t>(id)];
    h = fnv1a(h, b);
    h = fnv1a(h, std::string_view("\xff", 1));
    if (b.empty()) info->matchable_[static_cast<size_t>(id)] = 0;
    h = fnv1a(h, info->matchable_[static_cast<size_t>(id)] ? "m" : "x");
    if (info->matchable_[static_cast<size_t>(id)]) order.push_back(id);
  }
  for (int32_t id : info->stop_ids_) h = fnv1a(h, "s" + std::to_string(id));
  std::sort(special_tokens.begin(), special_tokens.end());
  for (const auto& [content, id] : special_tokens) {
    if (id < 0 || id >= n) return Status::invalid_argument("special token id " + std::to_string(id) + " is out of range");
    if (info->is_stop(id)) continue;  // stop tokens keep their own rule
    if (!info->special_tokens_.empty() && info->special_tokens_.back().first == content) continue;
    info->matchable_[static_cast<size_t>(id)] = 0;  // matched by id only, never through the trie
    info->special_tokens_.emplace_back(content, id);
  }
  for (const auto& [content, id] : info->special_tokens_) h = fnv1a(h, "t" + std::to_string(id) + ":" + content);
  info->fingerprint_ = h;

  const auto& tb = info->token_bytes_;
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    const std::string& x = tb[static_cast<size_t>(a)];
    const std::string& y = tb[static_cast<size_t>(b)];
    int c = std::char_traits<char>::compare(x.data(), y.data(), std::min(x.size(), y.size()));
    if (c != 0) {
      // Compare as unsigned bytes.
      size_t i = 0;
      while (x[i] == y[i]) ++i;
      return static_cast<uint8_t>(x[i]) < static_cast<uint8_t>(y[i]);
    }
    if (x.size() != y.size()) return x.size() < y.size();
    return a < b;
  });

  TokenTrie& t = info->trie_;
  t.byte.push_back(0);
  t.depth.push_back(0);
  t.subtree_end.push_back(0);
  t.token_begin.push_back(0);
  std::vector<int32_t> path{0};
  std::string_view prev;
  for (int32_t id : order) {
    std::string_view cur = tb[static_cast<size_t>(id)];
    size_t l = 0;
    while (l < prev.size() && l < cur.size() && prev[l] == cur[l]) ++l;
    while (path.size() > l + 1) {
      t.subtree_end[static_cast<size_t>(path.back())] = t.num_nodes();
      path.pop_back();
    }
    for (size_t i = l; i < cur.size(); ++i) {
      t.byte.push_back(static_cast<uint8_t>(cur[i]));
      t.depth.push_back(static_cast<int32_t>(i + 1));
      t.max_depth = std::max(t.max_depth, static_cast<int32_t>(i + 1));
      t.subtree_end.push_back(0);
      t.token_begin.push_back(static_cast<int32_t>(t.tokens.size()));
      path.push_back(t.num_nodes() - 1);
    }
    t.tokens.push_back(id);
    prev = cur;
  }
  while (!path.empty()) {
    t.subtree_end[static_cast<size_t>(path.back())] = t.num_nodes();
    path.pop_back();
  }
  t.token_begin.push_back(static_cast<int32_t>(t.tokens.size()));
  return std::shared_ptr<const TokenizerInfo>(std::move(info));
}

Result<std::shared_ptr<const TokenizerInfo>> TokenizerInfo::from_tokenizer(const tokenizer::Tokenizer& tok,
                                                                           std::vector<int32_t> stop_ids) {
  std::vector<std::string> bytes(static_cast<size_t>(tok.vocab_size()));
  std::vector<int32_t> excluded;
  std::vector<std::pair<std::string, int32_t>> specials;
  for (int32_t id = 0; id < tok.vocab_size(); ++id) {
    if (!tok.is_known(id) || tok.added_token(id) != nullptr) {
      excluded.push_back(id);
      if (tok.is_known(id) && tok.added_token(id) != nullptr) specials.emplace_back(tok.added_token(id)->content, id);
      continue;
    }
    bytes[static_cast<size_t>(id)] = std::string(tok.token_bytes(id));
  }
  if (stop_ids.empty()) {
    std::optional<int32_t> eos = tok.added_token_id("<｜end▁of▁sentence｜>");
    if (!eos) return Status::invalid_argument("tokenizer has no <｜end▁of▁sentence｜> token; pass stop ids");
    stop_ids.push_back(*eos);
  }
  return from_vocab(std::move(bytes), std::move(stop_ids), std::move(excluded), std::move(specials));
}

}  // namespace deepinfer::grammar
