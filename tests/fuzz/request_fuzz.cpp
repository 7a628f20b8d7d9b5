// libFuzzer target: the HTTP API's request path, from the body bytes to the response, through the
// real route handlers (handle_chat, handle_completions, handle_tokenize, handle_detokenize), the chat encoder with the DeepSeek
// tokenizer (tests/data/tokenizer/tokenizer.json) or tiny-v4-b's small one, structured-output and tool-call constraints,
// and the response builders, over an inline engine that answers every sample at once.
// Input: byte 0 picks the endpoint (bit 0: chat / completions; with bit 4: detokenize / tokenize)
// and the served model (bits 1-3: vocabulary, chat format, thinking), the rest is the body.
// Checks:
//  - no crash, no sanitizer report, no slow input (libFuzzer -timeout);
//  - the status is 200 or a 4xx (a client's body never makes a 5xx: nothing here fails inside);
//  - an error is OpenAI's {"error": {"message": non-empty, "type", ...}} JSON;
//  - a 200 is valid JSON (or, streaming, SSE `data:` events of valid JSON ending in [DONE]).
// Built by scripts/fuzz.sh (CMake option DI_FUZZ, clang).
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>

#include "server/generation.h"
#include "server/routes.h"
#include "tokenizer/tokenizer.h"

using namespace deepinfer;
using namespace deepinfer::server;

namespace {

void check(bool ok, const char* what, std::string_view detail = {}) {
  if (ok) return;
  std::fprintf(stderr, "request_fuzz: property failed: %s\n%.*s\n", what, static_cast<int>(detail.size()),
               detail.data());
  std::abort();
}

// Validates as the real engine's submit does, then finishes every sample at once: the prompt's
// logprobs when asked for, one tokens event (the prompt's last ids, up to max_tokens) and a
// finish event.
class InstantEngine final : public EngineClient {
 public:
  explicit InstantEngine(ModelInfo info) : info_(std::move(info)) {}
  Result<std::shared_ptr<RequestStream>> submit(EngineRequest req) override {
    if (req.prompt.empty()) return Status::invalid_argument("empty prompt");
    for (int32_t id : req.prompt) {
      if (id < 0 || id >= info_.vocab_size) return Status::invalid_argument("prompt token out of vocabulary");
    }
    DI_TRY(req.sampling.validate(info_.vocab_size));
    auto stream = std::make_shared<RequestStream>();
    const int64_t max_new = std::min<int64_t>(req.sampling.max_tokens.value_or(8), 8);
    for (int s = 0; s < req.sampling.n; ++s) {
      if (req.sampling.prompt_logprobs >= 0 && req.prompt.size() > 1) {  // as the engine: before the tokens
        StreamEvent pl;
        pl.kind = StreamEvent::Kind::kPromptLogprobs;
        pl.sample_index = s;
        pl.prompt_offset = 1;
        for (size_t i = 1; i < req.prompt.size(); ++i) {
          SampledToken t;
          t.id = req.prompt[i];
          t.logprob = -1.5f;
          t.rank = static_cast<int32_t>(i);
          for (int k = 0; k < req.sampling.prompt_logprobs; ++k) t.top.emplace_back((t.id + k) % info_.vocab_size, -1.f - k);
          pl.tokens.push_back(std::move(t));
        }
        stream->push(std::move(pl));
      }
      StreamEvent ev;
      ev.sample_index = s;
      for (int64_t i = 0; i < max_new && i < static_cast<int64_t>(req.prompt.size()); ++i) {
        SampledToken t;
        t.id = req.prompt[req.prompt.size() - 1 - static_cast<size_t>(i)];
        t.logprob = -0.5f;
        for (int k = 0; k < req.sampling.top_logprobs; ++k) t.top.emplace_back((t.id + k) % info_.vocab_size, -1.f - k);
        ev.tokens.push_back(std::move(t));
      }
      const int64_t n = static_cast<int64_t>(ev.tokens.size());
      stream->push(std::move(ev));
      StreamEvent fin;
      fin.kind = StreamEvent::Kind::kFinished;
      fin.sample_index = s;
      fin.finish_reason = n == req.sampling.max_tokens.value_or(-1) ? "length" : "stop";
      fin.prompt_tokens = static_cast<int64_t>(req.prompt.size());
      fin.completion_tokens = n;
      fin.finish_index = s;
      stream->push(std::move(fin));
    }
    stream->close();
    return stream;
  }
  void cancel(const std::string&) override {}
  EngineStats stats() const override { return {}; }
  const ModelInfo& model_info() const override { return info_; }

 private:
  ModelInfo info_;
};

const tokenizer::Tokenizer& load(const char* path) {
  auto r = tokenizer::Tokenizer::from_path(path);
  if (!r.is_ok()) {
    std::fprintf(stderr, "request_fuzz: %s\n", r.status().to_string().c_str());
    std::abort();
  }
  return *r->release();
}
// DeepSeek's tokenizer (129k tokens) and tiny-v4-b's (1016 tokens, the same special tokens): at the
// small vocabulary the grammar budgets below compile most schema and tool grammars, so their
// constrained paths are fuzzed through the routes too.
const tokenizer::Tokenizer& big_tok() {
  static const tokenizer::Tokenizer& t = load(DI_FUZZ_TOKENIZER_JSON);
  return t;
}
const tokenizer::Tokenizer& small_tok() {
  static const tokenizer::Tokenizer& t = load(DI_FUZZ_SMALL_TOKENIZER_JSON);
  return t;
}

struct Served {
  InstantEngine engine;
  ServerContext ctx;
  Served(const tokenizer::Tokenizer& tok, tokenizer::ChatFormat format, bool thinking)
      : engine(ModelInfo{"fuzz-model", tok.vocab_size(), 4096, *tok.added_token_id(tokenizer::tokens::kEos)}),
        ctx(engine, &tok, config(format, thinking)) {}
  static ServerConfig config(tokenizer::ChatFormat format, bool thinking) {
    ServerConfig c;
    c.chat_format = format;
    c.default_thinking = thinking;
    c.disconnect_probe = std::chrono::milliseconds(5000);
    // Grammar budgets 1/256 of the server's defaults: under ASan a classification step costs
    // about 5 us against 10 ns in release (a named tool_choice grammar at this 129k vocabulary hit
    // 14 s at 4M steps), and a unit must stay within fuzz.sh's -timeout. So here most schema and
    // tool grammars are refused (a 400, the path a default-budget refusal takes) and only small
    // ones compile; the small-vocabulary models (served 4-7) compile most, and grammar_fuzz covers
    // the grammars themselves.
    c.grammar.max_classify_steps = int64_t{1} << 20;
    c.grammar.max_states = 1 << 12;
    c.grammar.max_cache_bytes = int64_t{4} << 20;
    return c;
  }
};

// 0-3: the 129k vocabulary, V4 / V4 thinking / V4.1 / V4.1 thinking; 4-7: the same on the small one.
Served& served(int which) {
  using tokenizer::ChatFormat;
  static Served v4(big_tok(), ChatFormat::kV4, false), v4_think(big_tok(), ChatFormat::kV4, true),
      v41(big_tok(), ChatFormat::kV41, false), v41_think(big_tok(), ChatFormat::kV41, true),
      s_v4(small_tok(), ChatFormat::kV4, false), s_v4_think(small_tok(), ChatFormat::kV4, true),
      s_v41(small_tok(), ChatFormat::kV41, false), s_v41_think(small_tok(), ChatFormat::kV41, true);
  Served* all[] = {&v4, &v4_think, &v41, &v41_think, &s_v4, &s_v4_think, &s_v41, &s_v41_think};
  return *all[which % 8];
}

class Collect final : public ChunkSink {
 public:
  bool write(std::string_view data) override {
    out.append(data);
    return true;
  }
  std::string out;
};

Json parse(std::string_view body, const char* what) {
  Json j = Json::parse(body, nullptr, /*allow_exceptions=*/false);
  check(!j.is_discarded(), what, body);
  return j;
}

void check_error_body(const std::string& body) {
  const Json j = parse(body, "an error body is JSON");
  check(j.is_object() && j.contains("error") && j["error"].is_object(), "an error body has an error object", body);
  const Json& e = j["error"];
  check(e.contains("message") && e["message"].is_string() && !e["message"].get<std::string>().empty(),
        "an error names its cause", body);
}

void check_sse(const std::string& out) {
  size_t pos = 0;
  bool done = false;
  while (pos < out.size()) {
    const size_t end = out.find("\n\n", pos);
    check(end != std::string::npos, "SSE events end with a blank line", out);
    const std::string_view ev(out.data() + pos, end - pos);
    pos = end + 2;
    if (ev.starts_with(":")) continue;  // heartbeat comment
    check(ev.starts_with("data: "), "SSE events are data lines", ev);
    const std::string_view data = ev.substr(6);
    check(!done, "nothing after [DONE]", out);
    if (data == "[DONE]") {
      done = true;
      continue;
    }
    const Json j = parse(data, "an SSE event is JSON");
    if (j.contains("error")) check_error_body(std::string(data));
  }
  check(done, "a stream ends with [DONE]", out);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  Served& s = served(data[0] >> 1);
  HttpRequest req;
  req.method = "POST";
  req.body.assign(reinterpret_cast<const char*>(data + 1), size - 1);
  const bool chat = data[0] & 1, tokens = data[0] & 0x10;
  req.path = tokens ? (chat ? "/detokenize" : "/tokenize") : chat ? "/v1/chat/completions" : "/v1/completions";
  HttpResponse r = tokens ? (chat ? handle_detokenize(s.ctx, req) : handle_tokenize(s.ctx, req))
                          : chat ? handle_chat(s.ctx, req) : handle_completions(s.ctx, req);
  static const bool verbose = std::getenv("REQUEST_FUZZ_PRINT") != nullptr;  // for looking at the seeds
  if (verbose) std::fprintf(stderr, "%s -> %d %.200s\n", req.path.c_str(), r.status, r.body.c_str());
  check(r.status == 200 || (r.status >= 400 && r.status < 500), "the status is 200 or a 4xx",
        std::to_string(r.status) + " " + r.body);
  if (r.status != 200) {
    check_error_body(r.body);
    return 0;
  }
  if (r.stream) {
    Collect sink;
    r.stream(sink);
    check_sse(sink.out);
  } else if (r.await_body) {
    const std::string body = r.await_body([] { return true; });
    if (parse(body, "an awaited body is JSON").contains("error")) check_error_body(body);
  } else {
    parse(r.body, "a 200 body is JSON");
  }
  return 0;
}
