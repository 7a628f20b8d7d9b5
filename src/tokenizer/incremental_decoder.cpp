#include "tokenizer/incremental_decoder.h"

#include "tokenizer/utf8.h"

namespace deepinfer::tokenizer {

Result<std::string> IncrementalDecoder::push(TokenId id) {
  if (!tok_->is_known(id)) return Status::invalid_argument("decode: unknown token id " + std::to_string(id));
  if (opts_.skip_special_tokens) {
    const AddedToken* a = tok_->added_token(id);
    if (a != nullptr && a->special) return std::string();
  }
  pending_.append(tok_->token_bytes(id));
  const size_t keep = incomplete_utf8_tail(pending_);
  std::string out;
  append_utf8_lossy(std::string_view(pending_).substr(0, pending_.size() - keep), out);
  pending_.erase(0, pending_.size() - keep);
  return out;
}

std::string IncrementalDecoder::flush() {
  std::string out = utf8_lossy(pending_);
  pending_.clear();
  return out;
}

}  // namespace deepinfer::tokenizer
