#include "tokenizer/added_vocabulary.h"

namespace deepinfer::tokenizer {

void AddedVocabulary::Trie::insert(std::string_view s, int32_t token_index) {
  if (next.empty()) {
    next.emplace_back();
    terminal.push_back(-1);
  }
  int32_t node = 0;
  for (unsigned char c : s) {
    auto it = next[node].find(c);
    if (it == next[node].end()) {
      int32_t child = static_cast<int32_t>(next.size());
      next[node].emplace(c, child);
      next.emplace_back();
      terminal.push_back(-1);
      node = child;
    } else {
      node = it->second;
    }
  }
  terminal[node] = token_index;
  first_byte[static_cast<unsigned char>(s[0])] = true;
}

size_t AddedVocabulary::Trie::longest_at(std::string_view text, size_t i, int32_t* token_index) const {
  size_t best = 0;
  int32_t node = 0;
  for (size_t j = i; j < text.size(); ++j) {
    auto it = next[node].find(static_cast<unsigned char>(text[j]));
    if (it == next[node].end()) break;
    node = it->second;
    if (terminal[node] >= 0) {
      best = j + 1 - i;
      *token_index = terminal[node];
    }
  }
  return best;
}

Result<AddedVocabulary> AddedVocabulary::build(std::vector<AddedToken> tokens) {
  AddedVocabulary v;
  v.tokens_ = std::move(tokens);
  for (size_t k = 0; k < v.tokens_.size(); ++k) {
    const AddedToken& t = v.tokens_[k];
    if (t.content.empty()) return Status::invalid_argument("added token with empty content");
    if (!v.index_by_id_.emplace(t.id, k).second) {
      return Status::invalid_argument("duplicate added token id " + std::to_string(t.id));
    }
    // HF keeps the last definition of a spelling; so do we.
    v.index_by_content_[t.content] = k;
  }
  for (const auto& [content, k] : v.index_by_content_) {
    Trie& trie = v.tokens_[k].normalized ? v.normalized_trie_ : v.raw_trie_;
    trie.insert(content, static_cast<int32_t>(k));
  }
  return v;
}

const AddedToken* AddedVocabulary::by_id(int32_t id) const {
  auto it = index_by_id_.find(id);
  return it == index_by_id_.end() ? nullptr : &tokens_[it->second];
}

const AddedToken* AddedVocabulary::by_content(std::string_view content) const {
  auto it = index_by_content_.find(std::string(content));
  return it == index_by_content_.end() ? nullptr : &tokens_[it->second];
}

void AddedVocabulary::split_pass(const Trie& trie, std::string_view text, uint32_t b, uint32_t e,
                                 std::vector<TextSegment>& out) const {
  if (b >= e) return;
  if (trie.next.empty()) {
    out.push_back(TextSegment{b, e, -1});
    return;
  }
  std::string_view view = text.substr(0, e);
  uint32_t gap = b;
  for (uint32_t i = b; i < e;) {
    int32_t k = -1;
    size_t len = trie.first_byte[static_cast<unsigned char>(view[i])] ? trie.longest_at(view, i, &k) : 0;
    if (len == 0) {
      ++i;
      continue;
    }
    if (gap < i) out.push_back(TextSegment{gap, i, -1});
    out.push_back(TextSegment{i, static_cast<uint32_t>(i + len), tokens_[k].id});
    i += static_cast<uint32_t>(len);
    gap = i;
  }
  if (gap < e) out.push_back(TextSegment{gap, e, -1});
}

void AddedVocabulary::split(std::string_view text, std::vector<TextSegment>& out) const {
  out.clear();
  std::vector<TextSegment> first;
  split_pass(raw_trie_, text, 0, static_cast<uint32_t>(text.size()), first);
  for (const TextSegment& s : first) {
    if (s.token_id >= 0) {
      out.push_back(s);
    } else {
      split_pass(normalized_trie_, text, s.begin, s.end, out);
    }
  }
}

}  // namespace deepinfer::tokenizer
