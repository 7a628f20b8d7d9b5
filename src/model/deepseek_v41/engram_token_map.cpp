#include "model/deepseek_v41/engram_token_map.h"

#include <utf8proc.h>

#include <cstdlib>
#include <map>
#include <unordered_map>

#include "loader/checkpoint.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/utf8.h"

namespace deepinfer::v41 {

namespace {

using tokenizer::append_utf8;
using tokenizer::decode_utf8_at;

// One utf8proc normalisation of valid UTF-8 (NFKC: compose + compat; NFD: decompose).
std::string utf8proc_normalize(std::string_view s, int options) {
  utf8proc_uint8_t* out = nullptr;
  const utf8proc_ssize_t n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(s.data()),
                                          static_cast<utf8proc_ssize_t>(s.size()), &out,
                                          static_cast<utf8proc_option_t>(options));
  if (n < 0) return std::string(s);  // only on invalid input, which callers exclude
  std::string r(reinterpret_cast<const char*>(out), static_cast<size_t>(n));
  std::free(out);
  return r;
}

std::u32string to_code_points(std::string_view s) {
  std::u32string cps;
  for (size_t i = 0; i < s.size();) cps.push_back(decode_utf8_at(s, i));
  return cps;
}

utf8proc_category_t category(char32_t c) { return utf8proc_category(static_cast<utf8proc_int32_t>(c)); }

// Python's _PyUnicode_IsCaseIgnorable: Mn, Me, Cf, Lm, Sk, or Word_Break MidLetter / MidNumLet /
// Single_Quote (the list of Unicode's DerivedCoreProperties for Case_Ignorable).
bool case_ignorable(char32_t c) {
  switch (category(c)) {
    case UTF8PROC_CATEGORY_MN:
    case UTF8PROC_CATEGORY_ME:
    case UTF8PROC_CATEGORY_CF:
    case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_SK:
      return true;
    default:
      break;
  }
  switch (c) {
    case 0x27: case 0x2E: case 0x3A: case 0xB7: case 0x387: case 0x55F: case 0x5F4: case 0x2018:
    case 0x2019: case 0x2024: case 0x2027: case 0xFE13: case 0xFE52: case 0xFE55: case 0xFF07:
    case 0xFF0E: case 0xFF1A:
      return true;
    default:
      return false;
  }
}

// Cased (Lowercase, Uppercase or Lt). utf8proc has no Other_Lowercase / Other_Uppercase, so a
// character with a case mapping counts as cased too (covers the Roman numerals and circled letters).
bool cased(char32_t c) {
  const auto cat = category(c);
  if (cat == UTF8PROC_CATEGORY_LL || cat == UTF8PROC_CATEGORY_LU || cat == UTF8PROC_CATEGORY_LT) return true;
  const auto i = static_cast<utf8proc_int32_t>(c);
  return utf8proc_tolower(i) != i || utf8proc_toupper(i) != i;
}

// Python's str.lower(): full lowercase mapping (the only unconditional special case is U+0130) and
// the Final_Sigma rule for U+03A3.
std::u32string python_lower(const std::u32string& s) {
  std::u32string out;
  const size_t n = s.size();
  for (size_t i = 0; i < n; ++i) {
    const char32_t c = s[i];
    if (c == 0x130) {
      out += U"i\u0307";
    } else if (c == 0x3A3) {
      size_t j = i;
      while (j > 0 && case_ignorable(s[j - 1])) --j;
      bool final_sigma = j > 0 && cased(s[j - 1]);
      if (final_sigma) {
        size_t k = i + 1;
        while (k < n && case_ignorable(s[k])) ++k;
        final_sigma = k == n || !cased(s[k]);
      }
      out.push_back(final_sigma ? 0x3C2 : 0x3C3);
    } else {
      out.push_back(static_cast<char32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(c))));
    }
  }
  return out;
}

// Python's str.isspace() (3.11): bidirectional WS / B / S or category Zs.
bool python_space(char32_t c) {
  return (c >= 0x9 && c <= 0xD) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

}  // namespace

std::string engram_normalize(std::string_view text) {
  const std::string nfkc = utf8proc_normalize(text, UTF8PROC_STABLE | UTF8PROC_COMPOSE | UTF8PROC_COMPAT);
  const std::string nfd = utf8proc_normalize(nfkc, UTF8PROC_STABLE | UTF8PROC_DECOMPOSE);
  std::u32string cps;
  for (char32_t c : to_code_points(nfd))
    if (category(c) != UTF8PROC_CATEGORY_MN) cps.push_back(c);  // StripAccents
  cps = python_lower(cps);
  // Replace([ \t\r\n]+ -> " ").
  std::u32string ws;
  bool in_run = false;
  for (char32_t c : cps) {
    const bool sp = c == U' ' || c == U'\t' || c == U'\r' || c == U'\n';
    if (!sp) ws.push_back(c);
    else if (!in_run) ws.push_back(U' ');
    in_run = sp;
  }
  if (ws == U" ") ws = U"\uE000";
  size_t b = 0, e = ws.size();
  while (b < e && python_space(ws[b])) ++b;
  while (e > b && python_space(ws[e - 1])) --e;
  std::string out;
  for (size_t i = b; i < e; ++i) append_utf8(ws[i] == 0xE000 ? U' ' : ws[i], out);
  return out;
}

Result<CompressedTokenMap> derive_compressed_token_map(const nlohmann::json& tok) {
  if (!tok.is_object() || !tok.contains("model") || !tok["model"].is_object() || !tok["model"].contains("vocab") ||
      !tok["model"]["vocab"].is_object())
    return Status::invalid_argument("tokenizer.json: missing object model.vocab");
  std::map<int64_t, std::string> raw, added;
  for (const auto& [token, id] : tok["model"]["vocab"].items()) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0)
      return Status::invalid_argument("tokenizer.json: vocab id of '" + token + "' is not a non-negative integer");
    raw[id.get<int64_t>()] = token;
  }
  if (tok.contains("added_tokens") && tok["added_tokens"].is_array())
    for (const auto& a : tok["added_tokens"]) {
      if (!a.contains("id") || !a["id"].is_number_integer() || !a.contains("content") || !a["content"].is_string())
        return Status::invalid_argument("tokenizer.json: added token without integer id and string content");
      added[a["id"].get<int64_t>()] = a["content"].get<std::string>();
    }
  int64_t n = 0;
  if (!raw.empty()) n = raw.rbegin()->first + 1;
  if (!added.empty()) n = std::max(n, added.rbegin()->first + 1);
  CompressedTokenMap out;
  out.token_map.resize(static_cast<size_t>(n));
  std::unordered_map<std::string, int32_t> key_to_new;
  for (int64_t i = 0; i < n; ++i) {
    std::string rawtok, text;
    if (auto a = added.find(i); a != added.end()) {
      rawtok = text = a->second;
    } else if (auto r = raw.find(i); r != raw.end()) {
      rawtok = r->second;
      text = tokenizer::byte_level_decode(rawtok);
    } else {
      return Status::invalid_argument("tokenizer.json: token id " + std::to_string(i) + " is in neither the vocab nor " +
                                      "added_tokens (ids must be dense up to " + std::to_string(n - 1) + ")");
    }
    // Invalid UTF-8 would decode with U+FFFD (EF BF BD): such tokens are keyed by their raw string.
    std::string key;
    if (!tokenizer::validate_utf8(text).is_ok() || text.find("\xEF\xBF\xBD") != std::string::npos) {
      key = rawtok;
    } else {
      key = engram_normalize(text);
      if (key.empty()) key = text;
    }
    auto [it, inserted] = key_to_new.try_emplace(std::move(key), static_cast<int32_t>(key_to_new.size()));
    out.token_map[static_cast<size_t>(i)] = it->second;
  }
  out.compressed_vocab = static_cast<int64_t>(key_to_new.size());
  return out;
}

Result<CompressedTokenMap> derive_compressed_token_map_file(const std::string& path) {
  DI_ASSIGN_OR_RETURN(nlohmann::json j, Checkpoint::read_json(path));
  auto r = derive_compressed_token_map(j);
  if (!r.is_ok()) return r.status().with_context(path);
  return r;
}

Status compare_token_maps(const std::vector<int32_t>& want, const std::vector<int32_t>& got, const std::string& what) {
  const size_t n = std::min(want.size(), got.size());
  for (size_t i = 0; i < n; ++i)
    if (want[i] != got[i])
      return Status::invalid_argument(what + ": token id " + std::to_string(i) + " maps to " + std::to_string(got[i]) +
                                      ", expected " + std::to_string(want[i]));
  if (want.size() != got.size())
    return Status::invalid_argument(what + ": " + std::to_string(got.size()) + " entries, expected " +
                                    std::to_string(want.size()));
  return Status::ok();
}

}  // namespace deepinfer::v41
