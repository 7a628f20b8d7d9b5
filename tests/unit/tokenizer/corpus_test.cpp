// Exactness against HF tokenizers: every corpus document, both special-token modes, and decode.
#include <gtest/gtest.h>

#include "test_data.h"

namespace deepinfer::tokenizer {
namespace {

using testing::corpus;
using testing::deepseek_tokenizer;

size_t first_diff(const std::vector<TokenId>& a, const std::vector<TokenId>& b) {
  size_t i = 0;
  while (i < a.size() && i < b.size() && a[i] == b[i]) ++i;
  return i;
}

void check_mode(SpecialTokenMode mode) {
  const Tokenizer& tok = deepseek_tokenizer();
  ASSERT_EQ(corpus().size(), 6560u);
  int failures = 0;
  for (size_t d = 0; d < corpus().size(); ++d) {
    const auto& doc = corpus()[d];
    auto ids = tok.encode(doc.text, mode);
    ASSERT_TRUE(ids.is_ok()) << ids.status().to_string();
    const auto& want = mode == SpecialTokenMode::kParse ? doc.ids : doc.ids_text;
    if (*ids != want && ++failures <= 5) {
      size_t i = first_diff(*ids, want);
      ADD_FAILURE() << "doc " << d << " (" << doc.src << "): first diff at token " << i << " of "
                    << want.size() << ": got " << (i < ids->size() ? (*ids)[i] : -1) << " want "
                    << (i < want.size() ? want[i] : -1);
    }
  }
  EXPECT_EQ(failures, 0);
}

TEST(CorpusTest, ParseModeMatchesHf) { check_mode(SpecialTokenMode::kParse); }

TEST(CorpusTest, TextModeMatchesHfWithoutAddedVocabulary) { check_mode(SpecialTokenMode::kText); }

TEST(CorpusTest, DecodeRoundTripsEveryDocument) {
  const Tokenizer& tok = deepseek_tokenizer();
  for (const auto& doc : corpus()) {
    auto parsed = tok.decode(doc.ids);
    ASSERT_TRUE(parsed.is_ok());
    EXPECT_EQ(*parsed, doc.text);
    auto plain = tok.decode(doc.ids_text);
    ASSERT_TRUE(plain.is_ok());
    EXPECT_EQ(*plain, doc.text);
  }
}

TEST(CorpusTest, ModesDifferOnlyWhereAddedTokensAppear) {
  const Tokenizer& tok = deepseek_tokenizer();
  int with_added = 0;
  for (const auto& doc : corpus()) {
    std::vector<TextSegment> segs;
    tok.added_vocabulary().split(doc.text, segs);
    bool has_added = false;
    for (const auto& s : segs) has_added |= s.token_id >= 0;
    with_added += has_added;
    if (has_added) {
      EXPECT_NE(doc.ids, doc.ids_text) << doc.src;
    } else {
      EXPECT_EQ(doc.ids, doc.ids_text) << doc.src;
    }
  }
  EXPECT_GT(with_added, 0) << "the corpus should contain added-token spellings";
}

}  // namespace
}  // namespace deepinfer::tokenizer
