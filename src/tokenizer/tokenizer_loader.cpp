// Tokenizer::from_path / from_json: parses tokenizer.json (nlohmann::json; its exceptions are
// caught here) and checks that it is the DeepSeek byte-level BPE layout.
#include <atomic>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <unordered_map>

#include "core/log.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/tokenizer.h"

namespace deepinfer::tokenizer {
namespace {

using nlohmann::json;

// The pre-tokenizer this code implements (tokenizer/pretokenizer.h), as tokenizer.json spells it.
const char* const kSplitPatterns[3] = {
    "\\p{N}{1,3}",
    "[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+",
    "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+|"
    " ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+",
};

bool is_null_or(const json& j, const char* key, const json& allowed) {
  auto it = j.find(key);
  return it == j.end() || it->is_null() || *it == allowed;
}

Status check_normalizer(const json& root) {
  auto it = root.find("normalizer");
  if (it == root.end() || it->is_null()) return Status::ok();
  if (it->value("type", "") == "Sequence" && it->contains("normalizers") &&
      (*it)["normalizers"].empty()) {
    return Status::ok();
  }
  return Status::unsupported("tokenizer.json: normalizer must be empty, got " + it->dump());
}

Status check_pre_tokenizer(const json& root) {
  auto it = root.find("pre_tokenizer");
  auto bad = [&](const std::string& why) {
    return Status::unsupported("tokenizer.json: not the DeepSeek pre-tokenizer (" + why + "): " +
                               (it == root.end() ? std::string("missing") : it->dump()));
  };
  if (it == root.end() || !it->is_object() || it->value("type", "") != "Sequence") {
    return bad("expected a Sequence of 3 Split + ByteLevel");
  }
  auto seq_it = it->find("pretokenizers");
  if (seq_it == it->end() || !seq_it->is_array() || seq_it->size() != 4) {
    return bad("expected exactly 4 steps: 3 Split + ByteLevel");
  }
  const json& seq = *seq_it;
  for (int k = 0; k < 3; ++k) {
    const json& s = seq[k];
    const std::string step = "step " + std::to_string(k + 1);
    if (!s.is_object() || s.value("type", "") != "Split" || s.value("behavior", "") != "Isolated" ||
        s.value("invert", true)) {
      return bad(step + ": expected Split with behavior Isolated, invert false");
    }
    if (!s.contains("pattern") || !s["pattern"].is_object() || s["pattern"].value("Regex", "") != kSplitPatterns[k]) {
      return bad(step + ": expected the Regex pattern " + json(kSplitPatterns[k]).dump());
    }
  }
  const json& bl = seq[3];
  if (!bl.is_object() || bl.value("type", "") != "ByteLevel" || bl.value("add_prefix_space", true) ||
      bl.value("use_regex", true)) {
    return bad("step 4: expected ByteLevel with add_prefix_space false, use_regex false");
  }
  return Status::ok();
}

Status check_model_and_decoder(const json& root) {
  const json& m = root.at("model");
  if (m.value("type", "") != "BPE") return Status::unsupported("tokenizer.json: model type must be BPE");
  if (!is_null_or(m, "dropout", json()) || !is_null_or(m, "unk_token", json()) ||
      !is_null_or(m, "byte_fallback", false) || !is_null_or(m, "ignore_merges", false) ||
      !is_null_or(m, "continuing_subword_prefix", "") || !is_null_or(m, "end_of_word_suffix", "")) {
    return Status::unsupported("tokenizer.json: unsupported BPE options (dropout/unk/byte_fallback/"
                               "ignore_merges/prefix/suffix)");
  }
  auto d = root.find("decoder");
  if (d == root.end() || d->value("type", "") != "ByteLevel") {
    return Status::unsupported("tokenizer.json: decoder must be ByteLevel");
  }
  return Status::ok();
}

Result<std::vector<AddedToken>> read_added_tokens(const json& root) {
  std::vector<AddedToken> out;
  auto it = root.find("added_tokens");
  if (it == root.end() || it->is_null()) return out;
  for (const json& t : *it) {
    for (const char* flag : {"lstrip", "rstrip", "single_word"}) {
      if (t.value(flag, false)) {
        return Status::unsupported("tokenizer.json: added token " + json(t.value("content", std::string())).dump() +
                                   " (id " + t.value("id", json()).dump() + ") sets " + flag +
                                   "; lstrip/rstrip/single_word are not supported");
      }
    }
    AddedToken a;
    a.id = t.at("id").get<int32_t>();
    a.content = t.at("content").get<std::string>();
    a.special = t.value("special", false);
    a.normalized = t.value("normalized", !a.special);
    if (a.id < 0) return Status::invalid_argument("added token with negative id");
    out.push_back(std::move(a));
  }
  return out;
}

struct Vocab {
  std::unordered_map<std::string, int32_t> by_string;
  std::vector<std::string> bytes;  // by id
  std::vector<uint8_t> known;
};

Result<Vocab> read_vocab(const json& model) {
  Vocab v;
  const json& vocab = model.at("vocab");
  for (auto it = vocab.begin(); it != vocab.end(); ++it) {
    int32_t id = it.value().get<int32_t>();
    if (id < 0 || id > (1 << 24)) return Status::invalid_argument("vocab id out of range");
    if (static_cast<size_t>(id) >= v.bytes.size()) {
      v.bytes.resize(static_cast<size_t>(id) + 1);
      v.known.resize(static_cast<size_t>(id) + 1);
    }
    v.bytes[id] = byte_level_decode(it.key());
    v.known[id] = 1;
    v.by_string.emplace(it.key(), id);
  }
  return v;
}

Result<std::vector<BpeModel::Merge>> read_merges(const json& model, const Vocab& v) {
  std::vector<BpeModel::Merge> merges;
  const json& ms = model.at("merges");
  merges.reserve(ms.size());
  auto id_of = [&](const std::string& s) -> int32_t {
    auto it = v.by_string.find(s);
    return it == v.by_string.end() ? -1 : it->second;
  };
  for (const json& m : ms) {
    std::string a, b;
    if (m.is_string()) {
      const std::string& s = m.get_ref<const std::string&>();
      size_t sp = s.find(' ');
      if (sp == std::string::npos) return Status::invalid_argument("merge without a space: " + s);
      a = s.substr(0, sp);
      b = s.substr(sp + 1);
    } else {
      a = m.at(0).get<std::string>();
      b = m.at(1).get<std::string>();
    }
    int32_t l = id_of(a), r = id_of(b), merged = id_of(a + b);
    if (l < 0 || r < 0 || merged < 0) return Status::invalid_argument("merge out of vocabulary: " + a + " " + b);
    merges.push_back(BpeModel::Merge{l, r, merged});
  }
  return merges;
}

}  // namespace

Result<std::unique_ptr<Tokenizer>> Tokenizer::from_path(const std::filesystem::path& path) {
  std::filesystem::path file = path;
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) file = path / "tokenizer.json";
  std::ifstream in(file, std::ios::binary);
  if (!in) return Status::not_found("cannot open " + file.string());
  std::ostringstream ss;
  ss << in.rdbuf();
  auto tok = from_json(ss.str());
  if (!tok.is_ok()) return tok.status().with_context(file.string());
  return tok;
}

Result<std::unique_ptr<Tokenizer>> Tokenizer::from_json(std::string_view text) {
  static std::atomic<uint64_t> next_instance{1};
  json root;
  try {
    root = json::parse(text);
  } catch (const std::exception& e) {
    return Status::invalid_argument(std::string("tokenizer.json: ") + e.what());
  }
  std::unique_ptr<Tokenizer> tok(new Tokenizer());
  try {
    DI_TRY(check_normalizer(root));
    DI_TRY(check_pre_tokenizer(root));
    DI_TRY(check_model_and_decoder(root));
    DI_ASSIGN_OR_RETURN(std::vector<AddedToken> added, read_added_tokens(root));
    DI_ASSIGN_OR_RETURN(Vocab vocab, read_vocab(root.at("model")));
    DI_ASSIGN_OR_RETURN(std::vector<BpeModel::Merge> merges, read_merges(root.at("model"), vocab));
    std::vector<int32_t> byte_ids(256, -1);
    for (int b = 0; b < 256; ++b) {
      auto it = vocab.by_string.find(byte_level_encode(std::string(1, static_cast<char>(b))));
      if (it != vocab.by_string.end()) byte_ids[b] = it->second;
    }
    DI_ASSIGN_OR_RETURN(tok->bpe_, BpeModel::build(byte_ids, merges));
    tok->token_bytes_ = std::move(vocab.bytes);
    tok->known_ = std::move(vocab.known);
    for (const AddedToken& a : added) {
      if (static_cast<size_t>(a.id) >= tok->token_bytes_.size()) {
        tok->token_bytes_.resize(static_cast<size_t>(a.id) + 1);
        tok->known_.resize(static_cast<size_t>(a.id) + 1);
      }
      tok->token_bytes_[a.id] = byte_level_decode(a.content);
      tok->known_[a.id] = 1;
    }
    DI_ASSIGN_OR_RETURN(tok->added_, AddedVocabulary::build(std::move(added)));
  } catch (const std::exception& e) {
    return Status::invalid_argument(std::string("tokenizer.json: ") + e.what());
  }
  tok->instance_id_ = next_instance.fetch_add(1);
  DI_LOG(Debug, "tokenizer: %d ids, %zu added tokens", tok->vocab_size(), tok->added_.tokens().size());
  return tok;
}

}  // namespace deepinfer::tokenizer
