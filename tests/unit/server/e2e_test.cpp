// End to end over loopback: httplib::Client -> Server -> FakeEngineClient, with the real
// tokenizer (tests/data/tokenizer) for the chat encoding, detokenization and output parsing.
#include <gtest/gtest.h>
#include <httplib.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <future>
#include <nlohmann/json.hpp>
#include <chrono>
#include <thread>

#include "fake_engine.h"
#include "grammar/matcher.h"
#include "server/auth.h"
#include "server/server.h"
#include "tokenizer/chat_encoding.h"
#include "tokenizer/tokenizer.h"

namespace deepinfer::server {
namespace {

using Json = nlohmann::ordered_json;
using testing::FakeEngineClient;
using tokenizer::SpecialTokenMode;
using tokenizer::Tokenizer;

const Tokenizer& tok() {
  static std::unique_ptr<Tokenizer> t = [] {
    auto r = Tokenizer::from_path(std::string(DI_TEST_DATA_DIR) + "/tokenizer/tokenizer.json");
    DI_CHECK(r.is_ok());
    return std::move(r).value();
  }();
  return *t;
}

int32_t eos_id() { return *tok().added_token_id(tokenizer::tokens::kEos); }

std::vector<int32_t> ids(const std::string& text, SpecialTokenMode mode = SpecialTokenMode::kText) {
  auto r = tok().encode(text, mode);
  DI_CHECK(r.is_ok());
  return *r;
}

struct SseStream {
  std::vector<Json> events;
  bool done = false;
};

SseStream parse_sse(const std::string& body) {
  SseStream s;
  size_t pos = 0;
  while (pos < body.size()) {
    size_t end = body.find("\n\n", pos);
    if (end == std::string::npos) break;
    std::string ev = body.substr(pos, end - pos);
    pos = end + 2;
    if (ev.rfind("data: ", 0) != 0) continue;  // comments
    std::string data = ev.substr(6);
    EXPECT_FALSE(s.done) << "event after [DONE]";
    if (data == "[DONE]") s.done = true;
    else s.events.push_back(Json::parse(data));
  }
  return s;
}

class ServerE2ETest : public ::testing::Test {
 protected:
  void SetUp() override { start(true); }
  void TearDown() override {
    if (server_) server_->shutdown(std::chrono::milliseconds(2000));
  }

  void start(bool with_tokenizer, size_t max_body = size_t{1} << 20, std::vector<std::string> api_keys = {}) {
    signal(SIGPIPE, SIG_IGN);
    ModelInfo info;
    info.name = "tiny";
    info.vocab_size = tok().vocab_size();
    info.max_context = 4096;
    info.eos_token_id = eos_id();
    engine_ = std::make_unique<FakeEngineClient>(info);
    ServerConfig cfg;
    cfg.host = "127.0.0.1";
    cfg.port = 0;
    cfg.max_body_bytes = max_body;
    cfg.api_keys = std::move(api_keys);
    cfg.http_threads = 16;
    cfg.heartbeat = std::chrono::milliseconds(50);
    cfg.disconnect_probe = std::chrono::milliseconds(50);
    server_ = std::make_unique<Server>(*engine_, with_tokenizer ? &tok() : nullptr, cfg);
    auto port = server_->start();
    ASSERT_TRUE(port.is_ok()) << port.status().to_string();
    port_ = *port;
  }
  void restart_without_tokenizer() {
    server_->shutdown(std::chrono::milliseconds(1000));
    server_.reset();
    start(false);
  }

  httplib::Client client() {
    httplib::Client c("127.0.0.1", port_);
    c.set_read_timeout(10, 0);
    return c;
  }
  httplib::Result post(const std::string& path, const Json& body) {
    auto c = client();
    return c.Post(path.c_str(), body.dump(), "application/json");
  }
  Json post_ok(const std::string& path, const Json& body) {
    auto r = post(path, body);
    EXPECT_TRUE(r) << "no response";
    if (!r) return {};
    EXPECT_EQ(r->status, 200) << r->body;
    return Json::parse(r->body);
  }
  void expect_error(const httplib::Result& r, int status, const std::string& param = "") {
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, status) << r->body;
    Json j = Json::parse(r->body);
    ASSERT_TRUE(j.contains("error")) << r->body;
    EXPECT_TRUE(j["error"]["message"].is_string());
    EXPECT_TRUE(j["error"]["type"].is_string());
    EXPECT_TRUE(j["error"].contains("param"));
    EXPECT_TRUE(j["error"].contains("code"));
    if (!param.empty()) {
      EXPECT_EQ(j["error"]["param"], param) << r->body;
    }
  }
  static Json user(const std::string& text) {
    return Json::array({Json{{"role", "user"}, {"content", text}}});
  }
  void set_script(const std::string& text, bool eos = true) {
    engine_->script = ids(text);
    if (eos) engine_->script.push_back(eos_id());
  }

  std::unique_ptr<FakeEngineClient> engine_;
  std::unique_ptr<Server> server_;
  int port_ = 0;
};

TEST_F(ServerE2ETest, ChatNonStreaming) {
  set_script("Hello there!");
  Json r = post_ok("/v1/chat/completions", {{"model", "tiny"}, {"messages", user("Hi <｜User｜> there")}});
  EXPECT_EQ(r["object"], "chat.completion");
  EXPECT_EQ(r["model"], "tiny");
  ASSERT_EQ(r["choices"].size(), 1u);
  EXPECT_EQ(r["choices"][0]["message"]["role"], "assistant");
  EXPECT_EQ(r["choices"][0]["message"]["content"], "Hello there!");
  EXPECT_EQ(r["choices"][0]["finish_reason"], "stop");
  // The prompt is the V4 encoding, and the user's `<｜User｜>` stayed text.
  auto subs = engine_->submitted();
  ASSERT_EQ(subs.size(), 1u);
  auto expect = tokenizer::encode_chat(tok(), user("Hi <｜User｜> there"), {});
  ASSERT_TRUE(expect.is_ok());
  EXPECT_EQ(subs[0].prompt, *expect);
  const int32_t user_id = *tok().added_token_id(tokenizer::tokens::kUser);
  EXPECT_EQ(std::count(subs[0].prompt.begin(), subs[0].prompt.end(), user_id), 1);
  EXPECT_EQ(r["usage"]["prompt_tokens"], static_cast<int64_t>(expect->size()));
  EXPECT_EQ(r["usage"]["completion_tokens"], static_cast<int64_t>(engine_->script.size()));
  EXPECT_EQ(r["usage"]["total_tokens"], static_cast<int64_t>(expect->size() + engine_->script.size()));
  EXPECT_EQ(r["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
}

TEST_F(ServerE2ETest, ChatStreamingWithUsage) {
  set_script("Streaming works, one token at a time.");
  auto r = post("/v1/chat/completions", {{"messages", user("go")}, {"stream", true},
                                         {"stream_options", {{"include_usage", true}}}});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_NE(r->get_header_value("Content-Type").find("text/event-stream"), std::string::npos);
  SseStream s = parse_sse(r->body);
  EXPECT_TRUE(s.done);
  ASSERT_GE(s.events.size(), 3u);
  EXPECT_EQ(s.events[0]["object"], "chat.completion.chunk");
  EXPECT_EQ(s.events[0]["choices"][0]["delta"]["role"], "assistant");
  std::string content;
  std::string finish;
  for (const Json& e : s.events) {
    EXPECT_TRUE(e.contains("usage"));
    if (e["choices"].empty()) continue;
    const Json& d = e["choices"][0]["delta"];
    if (d.contains("content")) content += d["content"].get<std::string>();
    if (!e["choices"][0]["finish_reason"].is_null()) finish = e["choices"][0]["finish_reason"];
  }
  EXPECT_EQ(content, "Streaming works, one token at a time.");
  EXPECT_EQ(finish, "stop");
  const Json& last = s.events.back();
  EXPECT_TRUE(last["choices"].empty());
  EXPECT_EQ(last["usage"]["completion_tokens"], static_cast<int64_t>(engine_->script.size()));
  for (size_t i = 0; i + 1 < s.events.size(); ++i) EXPECT_TRUE(s.events[i]["usage"].is_null());
}

TEST_F(ServerE2ETest, ChatReasoningIsSplitFromContent) {
  // This vocabulary has no <think> added tokens: the markers are text, as in DeepSeek-V3's.
  set_script("Let me think.</think>The answer is 4.");
  Json body = {{"messages", user("2+2?")}, {"chat_template_kwargs", {{"thinking", true}}}};
  Json r = post_ok("/v1/chat/completions", body);
  EXPECT_EQ(r["choices"][0]["message"]["reasoning_content"], "Let me think.");
  EXPECT_EQ(r["choices"][0]["message"]["content"], "The answer is 4.");
  const int64_t reasoning_tokens = r["usage"]["completion_tokens_details"]["reasoning_tokens"];
  EXPECT_GE(reasoning_tokens, static_cast<int64_t>(ids("Let me think.").size()));
  EXPECT_LT(reasoning_tokens, static_cast<int64_t>(engine_->script.size()) - 2);
  // The prompt ended in thinking mode.
  std::string prompt = *tok().decode(engine_->submitted()[0].prompt);
  EXPECT_EQ(prompt.substr(prompt.size() - 7), "<think>");
  // Streaming gives the same split.
  body["stream"] = true;
  auto s = parse_sse(post("/v1/chat/completions", body)->body);
  std::string reasoning, content;
  for (const Json& e : s.events) {
    if (e["choices"].empty()) continue;
    const Json& d = e["choices"][0]["delta"];
    if (d.contains("reasoning_content")) reasoning += d["reasoning_content"].get<std::string>();
    if (d.contains("content")) content += d["content"].get<std::string>();
  }
  EXPECT_EQ(reasoning, "Let me think.");
  EXPECT_EQ(content, "The answer is 4.");
}

// Chat prefix completion: the last assistant message with "prefix": true (DeepSeek) or
// continue_final_message (vLLM) is rendered without its end-of-sentence and the reply continues it;
// in thinking mode, a prefix of reasoning alone continues the reasoning (no </think> yet).
TEST_F(ServerE2ETest, ChatPrefixContinuesTheLastAssistantMessage) {
  set_script(" world");
  Json msgs = user("hi");
  msgs.push_back({{"role", "assistant"}, {"content", "```python"}, {"prefix", true}});
  Json r = post_ok("/v1/chat/completions", {{"messages", msgs}});
  EXPECT_EQ(r["choices"][0]["message"]["content"], " world");  // the continuation only
  std::string prompt = *tok().decode(engine_->submitted().back().prompt);
  EXPECT_EQ(prompt.substr(prompt.size() - 17), "</think>```python") << prompt;
  // vLLM's spelling, same prompt.
  msgs.back().erase("prefix");
  post_ok("/v1/chat/completions", {{"messages", msgs}, {"continue_final_message", true}});
  EXPECT_EQ(*tok().decode(engine_->submitted().back().prompt), prompt);
  // Without either, the message is closed and a new turn would follow it.
  post_ok("/v1/chat/completions", {{"messages", msgs}});
  EXPECT_NE(*tok().decode(engine_->submitted().back().prompt), prompt);

  // Thinking mode, reasoning only: the reply continues the reasoning, then answers.
  set_script(" more.</think>Four.");
  Json think = user("2+2?");
  think.push_back({{"role", "assistant"}, {"content", ""}, {"reasoning_content", "Let me"}, {"prefix", true}});
  Json t = post_ok("/v1/chat/completions", {{"messages", think}, {"thinking", {{"type", "enabled"}}}});
  EXPECT_EQ(t["choices"][0]["message"]["reasoning_content"], " more.");
  EXPECT_EQ(t["choices"][0]["message"]["content"], "Four.");
  prompt = *tok().decode(engine_->submitted().back().prompt);
  EXPECT_EQ(prompt.substr(prompt.size() - 13), "<think>Let me") << prompt;

  Json not_last = msgs;
  not_last.back()["prefix"] = true;
  not_last.push_back({{"role", "user"}, {"content", "more"}});
  expect_error(post("/v1/chat/completions", {{"messages", not_last}}), 400, "messages[1].prefix");
  expect_error(post("/v1/chat/completions", {{"messages", user("x")}, {"continue_final_message", true}}), 400,
               "continue_final_message");
  expect_error(post("/v1/chat/completions", {{"messages", msgs}, {"continue_final_message", true},
                                              {"response_format", {{"type", "json_object"}}}}), 400, "messages");
}

// What the engine does with a request's grammar (engine/sequence.cpp): tokens before
// grammar_start_token are free, the start token itself too; every later token must be accepted
// by the matcher. True when all of `tokens` (ending in EOS) pass and the grammar completed.
bool engine_accepts(const EngineRequest& er, const std::vector<int32_t>& tokens) {
  if (!er.grammar) return false;
  grammar::Matcher m(er.grammar);
  bool active = er.grammar_start_token < 0;
  for (int32_t t : tokens) {
    if (!active) {
      active = t == er.grammar_start_token;
      continue;
    }
    if (!m.accept_token(t)) return false;
  }
  return active && m.is_terminated();
}

// Thinking mode: the constraint (every kind) starts after </think>, whether </think> is an added
// token (tiny-v4-b: grammar_start_token) or text (the 129k vocabulary: the grammar runs the
// reasoning to the first </think>). The reasoning is text no constraint would accept.
TEST(ServerStructuredThinking, ConstraintStartsAfterThinkEndOnBothTokenizers) {
  signal(SIGPIPE, SIG_IGN);
  struct Kind {
    Json fields;
    std::string answer;
  };
  const std::vector<Kind> kinds = {
      {{{"response_format", {{"type", "json_schema"}, {"json_schema", {{"name", "a"}, {"schema", Json::parse(R"({"type": "object",
         "properties": {"a": {"type": "integer"}}, "required": ["a"]})")}}}}}}, R"({"a": 12})"},
      {{{"response_format", {{"type", "json_object"}}}}, R"({"k": [true]})"},
      {{{"regex", "[0-9]+"}}, "42"},
      {{{"grammar", "root ::= \"yes\" | \"no\""}}, "yes"},
      {{{"json", {{"type", "integer"}}}}, "7"},
  };
  const std::string reasoning = "Hmm: 1+1 is {not json} \"yes\"?";
  for (const std::string dir : {"/tiny-v4-b", "/tokenizer/tokenizer.json"}) {
    SCOPED_TRACE(dir);
    auto t = Tokenizer::from_path(std::string(DI_TEST_DATA_DIR) + dir);
    ASSERT_TRUE(t.is_ok()) << t.status().to_string();
    const Tokenizer& tk = **t;
    const std::optional<int32_t> think_end = tk.added_token_id(tokenizer::tokens::kThinkEnd);
    EXPECT_EQ(think_end.has_value(), dir == "/tiny-v4-b");  // both cases are covered
    ModelInfo info;
    info.name = "tiny";
    info.vocab_size = tk.vocab_size();
    info.max_context = 4096;
    info.eos_token_id = *tk.added_token_id(tokenizer::tokens::kEos);
    FakeEngineClient engine(info);
    ServerConfig cfg;
    cfg.host = "127.0.0.1";
    cfg.port = 0;
    Server server(engine, &tk, cfg);
    auto port = server.start();
    ASSERT_TRUE(port.is_ok()) << port.status().to_string();
    auto enc = [&](const std::string& text) { return tk.encode(text, SpecialTokenMode::kParse).value(); };
    for (const Kind& k : kinds) {
      SCOPED_TRACE(k.fields.dump());
      std::vector<int32_t> script = enc(reasoning + "</think>" + k.answer);
      script.push_back(info.eos_token_id);
      engine.script = script;
      Json body = {{"messages", Json::array({Json{{"role", "user"}, {"content", "hi"}}})},
                   {"chat_template_kwargs", {{"thinking", true}}}};
      body.update(k.fields);
      httplib::Client c("127.0.0.1", *port);
      c.set_read_timeout(10, 0);
      auto r = c.Post("/v1/chat/completions", body.dump(), "application/json");
      ASSERT_TRUE(r);
      ASSERT_EQ(r->status, 200) << r->body;
      Json resp = Json::parse(r->body);
      EXPECT_EQ(resp["choices"][0]["message"]["reasoning_content"], reasoning);
      EXPECT_EQ(resp["choices"][0]["message"]["content"], k.answer);
      const EngineRequest er = engine.submitted().back();
      ASSERT_TRUE(er.grammar);
      EXPECT_EQ(er.grammar_start_token, think_end.value_or(-1));
      EXPECT_TRUE(engine_accepts(er, script)) << "the engine would not let this output through";
      // The answer without the reasoning's end never completes; the constraint still applies after it.
      std::vector<int32_t> bare = enc(k.answer);
      bare.push_back(info.eos_token_id);
      EXPECT_FALSE(engine_accepts(er, bare));
      std::vector<int32_t> wrong = enc(reasoning + "</think>" + "nope, not this");
      wrong.push_back(info.eos_token_id);
      EXPECT_FALSE(engine_accepts(er, wrong));
    }
    // Not thinking: the constraint applies from the first token.
    std::vector<int32_t> plain = enc("42");
    plain.push_back(info.eos_token_id);
    engine.script = plain;
    Json body = {{"messages", Json::array({Json{{"role", "user"}, {"content", "hi"}}})}, {"regex", "[0-9]+"},
                 {"chat_template_kwargs", {{"thinking", false}}}};
    httplib::Client c("127.0.0.1", *port);
    auto r = c.Post("/v1/chat/completions", body.dump(), "application/json");
    ASSERT_TRUE(r && r->status == 200);
    const EngineRequest er = engine.submitted().back();
    EXPECT_EQ(er.grammar_start_token, -1);
    EXPECT_TRUE(engine_accepts(er, plain));
    server.shutdown(std::chrono::milliseconds(1000));
  }
}

TEST_F(ServerE2ETest, ChatToolCallsParsed) {
  const std::string dsml =
      "Checking.\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"get_weather\">\n"
      "<｜DSML｜parameter name=\"city\" string=\"true\">Paris</｜DSML｜parameter>\n"
      "</｜DSML｜invoke>\n</｜DSML｜tool_calls>";
  engine_->script = ids(dsml, SpecialTokenMode::kParse);
  engine_->script.push_back(eos_id());
  Json tools = Json::array({{{"type", "function"},
                             {"function", {{"name", "get_weather"}, {"description", "Weather of a city"},
                                           {"parameters", {{"type", "object"}, {"properties", {{"city", {{"type", "string"}}}}}}}}}}});
  Json body = {{"messages", user("Weather in Paris?")}, {"tools", tools}};
  Json r = post_ok("/v1/chat/completions", body);
  const Json& msg = r["choices"][0]["message"];
  EXPECT_EQ(r["choices"][0]["finish_reason"], "tool_calls");
  EXPECT_EQ(msg["content"], "Checking.");
  ASSERT_EQ(msg["tool_calls"].size(), 1u);
  EXPECT_EQ(msg["tool_calls"][0]["type"], "function");
  EXPECT_EQ(msg["tool_calls"][0]["function"]["name"], "get_weather");
  EXPECT_EQ(Json::parse(msg["tool_calls"][0]["function"]["arguments"].get<std::string>()), Json({{"city", "Paris"}}));
  // The tools reached the prompt (a system turn was added for them).
  std::string prompt = *tok().decode(engine_->submitted()[0].prompt);
  EXPECT_NE(prompt.find("get_weather"), std::string::npos);
  // Streaming: incremental tool_calls deltas that assemble to the same call.
  body["stream"] = true;
  auto s = parse_sse(post("/v1/chat/completions", body)->body);
  std::string name, args, finish;
  for (const Json& e : s.events) {
    if (e["choices"].empty()) continue;
    const Json& ch = e["choices"][0];
    if (!ch["finish_reason"].is_null()) finish = ch["finish_reason"];
    if (!ch["delta"].contains("tool_calls")) continue;
    for (const Json& tc : ch["delta"]["tool_calls"]) {
      EXPECT_EQ(tc["index"], 0);
      if (tc["function"].contains("name")) name += tc["function"]["name"].get<std::string>();
      args += tc["function"]["arguments"].get<std::string>();
    }
  }
  EXPECT_EQ(name, "get_weather");
  EXPECT_EQ(Json::parse(args), Json({{"city", "Paris"}}));
  EXPECT_EQ(finish, "tool_calls");
}

TEST_F(ServerE2ETest, CompletionsWithTokenIdsNAndLength) {
  engine_->script.clear();  // ids derived from the prompt
  Json r = post_ok("/v1/completions", {{"prompt", {5, 6, 7}}, {"max_tokens", 4}, {"n", 3}, {"return_token_ids", true}});
  EXPECT_EQ(r["object"], "text_completion");
  ASSERT_EQ(r["choices"].size(), 3u);
  for (int c = 0; c < 3; ++c) {
    EXPECT_EQ(r["choices"][c]["index"], c);
    EXPECT_EQ(r["choices"][c]["finish_reason"], "length");
    ASSERT_EQ(r["choices"][c]["token_ids"].size(), 4u);
    std::vector<int32_t> got = r["choices"][c]["token_ids"].get<std::vector<int32_t>>();
    EXPECT_EQ(got[0], 7 + 3 + c);
    EXPECT_EQ(r["choices"][c]["text"], *tok().decode(got, {true}));
  }
  EXPECT_EQ(r["usage"]["prompt_tokens"], 3);
  EXPECT_EQ(r["usage"]["completion_tokens"], 12);
  EXPECT_EQ(engine_->submitted()[0].prompt, (std::vector<int32_t>{5, 6, 7}));
}

TEST_F(ServerE2ETest, CompletionsSeveralPromptsAndEcho) {
  set_script(" world");
  Json r = post_ok("/v1/completions", {{"prompt", {"Hello", "Bye"}}, {"echo", true}, {"n", 2}});
  ASSERT_EQ(r["choices"].size(), 4u);
  EXPECT_EQ(r["choices"][0]["text"], "Hello world");
  EXPECT_EQ(r["choices"][1]["text"], "Hello world");
  EXPECT_EQ(r["choices"][2]["text"], "Bye world");
  EXPECT_EQ(r["choices"][3]["index"], 3);
  EXPECT_EQ(engine_->submitted().size(), 2u);
  EXPECT_EQ(r["usage"]["prompt_tokens"], static_cast<int64_t>(ids("Hello").size() + ids("Bye").size()));
}

TEST_F(ServerE2ETest, StopStringEndsOutputAndCancelsTheEngine) {
  set_script("Hello there! More text follows here.", /*eos=*/false);
  engine_->token_delay = std::chrono::milliseconds(1);
  Json r = post_ok("/v1/completions", {{"prompt", "x"}, {"stop", {"! More"}}, {"max_tokens", 200}});
  EXPECT_EQ(r["choices"][0]["text"], "Hello there");
  EXPECT_EQ(r["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(r["choices"][0]["stop_reason"], "! More");
  EXPECT_TRUE(engine_->was_cancelled(engine_->submitted()[0].id));
  // Streaming: no byte of the stop string leaks.
  auto s = parse_sse(post("/v1/chat/completions", {{"messages", user("x")}, {"stop", "! More"}, {"stream", true}, {"max_tokens", 200}})->body);
  std::string content;
  for (const Json& e : s.events) {
    if (!e["choices"].empty() && e["choices"][0]["delta"].contains("content")) content += e["choices"][0]["delta"]["content"].get<std::string>();
  }
  EXPECT_EQ(content, "Hello there");
  // Stop token ids end a sample too.
  engine_->script = {10, 11, 12, 13};
  Json t = post_ok("/v1/completions", {{"prompt", {1}}, {"stop_token_ids", {12}}, {"return_token_ids", true}});
  EXPECT_EQ(t["choices"][0]["token_ids"], Json({10, 11, 12}));
  EXPECT_EQ(t["choices"][0]["finish_reason"], "stop");
}

TEST_F(ServerE2ETest, Logprobs) {
  set_script("abc def");
  Json r = post_ok("/v1/completions", {{"prompt", "x"}, {"logprobs", 2}});
  const Json& lp = r["choices"][0]["logprobs"];
  const size_t n = engine_->script.size();
  ASSERT_EQ(lp["tokens"].size(), n);
  ASSERT_EQ(lp["token_logprobs"].size(), n);
  ASSERT_EQ(lp["text_offset"].size(), n);
  EXPECT_FLOAT_EQ(lp["token_logprobs"][0].get<float>(), -0.25f);
  EXPECT_EQ(lp["top_logprobs"][0].size(), 2u);
  EXPECT_EQ(lp["text_offset"][0], 0);
  EXPECT_TRUE(engine_->submitted()[0].sampling.logprobs);
  EXPECT_EQ(engine_->submitted()[0].sampling.top_logprobs, 2);

  Json c = post_ok("/v1/chat/completions", {{"messages", user("x")}, {"logprobs", true}, {"top_logprobs", 3}});
  const Json& content = c["choices"][0]["logprobs"]["content"];
  ASSERT_EQ(content.size(), n);
  EXPECT_EQ(content[0]["token"], *tok().decode(std::vector<int32_t>{engine_->script[0]}));
  EXPECT_EQ(content[0]["top_logprobs"].size(), 3u);
  EXPECT_TRUE(content[0]["bytes"].is_array());
  // Without logprobs the field is null.
  EXPECT_TRUE(post_ok("/v1/chat/completions", {{"messages", user("x")}})["choices"][0]["logprobs"].is_null());
}

// Prompt logprobs (the fake engine: prompt token t has logprob -t/8 and rank t): echo + logprobs
// lists the prompt's tokens first (the first with null), streamed or not; max_tokens 0 with echo
// is the prompt alone; vLLM's prompt_logprobs on completions choices and on chat responses.
TEST_F(ServerE2ETest, PromptLogprobsEchoAndVllmShapes) {
  set_script(" world", /*eos=*/false);
  const std::vector<int32_t> prompt = ids("Hello there friend");
  const size_t P = prompt.size(), G = engine_->script.size();
  ASSERT_GE(P, 3u);
  Json r = post_ok("/v1/completions", {{"prompt", "Hello there friend"}, {"echo", true}, {"logprobs", 1}, {"max_tokens", G}});
  EXPECT_EQ(engine_->submitted().back().sampling.prompt_logprobs, 1);
  const Json& lp = r["choices"][0]["logprobs"];
  EXPECT_EQ(r["choices"][0]["text"], "Hello there friend world");
  ASSERT_EQ(lp["tokens"].size(), P + G);
  EXPECT_TRUE(lp["token_logprobs"][0].is_null());
  EXPECT_TRUE(lp["top_logprobs"][0].is_null());
  size_t at = 0;
  for (size_t t = 0; t < P; ++t) {
    EXPECT_EQ(lp["tokens"][t], *tok().decode(std::vector<int32_t>{prompt[t]}));
    EXPECT_EQ(lp["text_offset"][t], at);
    at += tok().token_bytes(prompt[t]).size();
    if (t > 0) {
      EXPECT_FLOAT_EQ(lp["token_logprobs"][t].get<float>(), -static_cast<float>(t) / 8);
      EXPECT_EQ(lp["top_logprobs"][t].size(), 1u);
    }
  }
  EXPECT_EQ(lp["text_offset"][P], at);  // the completion's tokens follow the prompt's
  EXPECT_FLOAT_EQ(lp["token_logprobs"][P].get<float>(), -0.25f);
  EXPECT_FALSE(r["choices"][0].contains("prompt_logprobs"));

  // Streaming: the echo chunk carries the prompt's logprobs, before the first token's chunk.
  auto s = parse_sse(post("/v1/completions", {{"prompt", "Hello there friend"}, {"echo", true}, {"logprobs", 0}, {"stream", true}, {"max_tokens", G}})->body);
  ASSERT_TRUE(s.done);
  ASSERT_GE(s.events.size(), 2u);
  EXPECT_EQ(s.events[0]["choices"][0]["text"], "Hello there friend");
  EXPECT_EQ(s.events[0]["choices"][0]["logprobs"]["tokens"].size(), P);
  EXPECT_EQ(s.events[1]["choices"][0]["logprobs"]["text_offset"][0], at);

  // max_tokens 0 with echo: the prompt alone, one engine token run and left out.
  Json e = post_ok("/v1/completions", {{"prompt", "Hello there friend"}, {"echo", true}, {"logprobs", 2}, {"max_tokens", 0}});
  EXPECT_EQ(engine_->submitted().back().sampling.max_tokens, 1);
  EXPECT_EQ(e["choices"][0]["text"], "Hello there friend");
  EXPECT_EQ(e["choices"][0]["logprobs"]["tokens"].size(), P);
  EXPECT_EQ(e["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(e["usage"]["completion_tokens"], 0);
  expect_error(post("/v1/completions", {{"prompt", "x"}, {"max_tokens", 0}}), 400, "max_tokens");
  expect_error(post("/v1/completions", {{"prompt", "x"}, {"echo", true}, {"max_tokens", 0}, {"n", 2}}), 400, "n");

  // vLLM's prompt_logprobs: {id: {logprob, rank, decoded_token}} with the token and its alternatives.
  Json v = post_ok("/v1/completions", {{"prompt", prompt}, {"prompt_logprobs", 2}, {"n", 2}, {"max_tokens", 1}});
  for (int c = 0; c < 2; ++c) {
    const Json& pl = v["choices"][c]["prompt_logprobs"];
    ASSERT_EQ(pl.size(), P) << c;
    EXPECT_TRUE(pl[0].is_null());
    const Json& second = pl[1][std::to_string(prompt[1])];
    EXPECT_FLOAT_EQ(second["logprob"].get<float>(), -0.125f);
    EXPECT_EQ(second["rank"], 1);
    EXPECT_EQ(second["decoded_token"], *tok().decode(std::vector<int32_t>{prompt[1]}));
    EXPECT_EQ(pl[1]["1"]["rank"], 2);  // the fake's alternatives: ids 0, 1
  }
  Json chat = post_ok("/v1/chat/completions", {{"messages", user("x")}, {"prompt_logprobs", 0}, {"max_tokens", 1}});
  const size_t chat_prompt = static_cast<size_t>(chat["usage"]["prompt_tokens"].get<int64_t>());
  ASSERT_EQ(chat["prompt_logprobs"].size(), chat_prompt);
  EXPECT_EQ(chat["prompt_logprobs"][chat_prompt - 1].size(), 1u);
  expect_error(post("/v1/chat/completions", {{"messages", user("x")}, {"prompt_logprobs", 1}, {"stream", true}}), 400, "prompt_logprobs");
  expect_error(post("/v1/chat/completions", {{"messages", user("x")}, {"max_tokens", 0}}), 400, "max_tokens");
  expect_error(post("/v1/completions", {{"prompt", "x"}, {"prompt_logprobs", 21}}), 400, "prompt_logprobs");
}

// /tokenize gives the ids the generation routes run (a text prompt as /v1/completions encodes it,
// messages as /v1/chat/completions renders them, thinking and prefix completion included);
// /detokenize gives the text back; bad input is a 4xx naming the field.
TEST_F(ServerE2ETest, TokenizeAndDetokenize) {
  Json t = post_ok("/tokenize", {{"prompt", "Hello <｜User｜> world"}, {"return_token_strs", true}});
  EXPECT_EQ(t["tokens"].get<std::vector<int32_t>>(), ids("Hello <｜User｜> world"));
  EXPECT_EQ(t["count"], t["tokens"].size());
  EXPECT_EQ(t["max_model_len"], 4096);
  ASSERT_EQ(t["token_strs"].size(), t["tokens"].size());
  post_ok("/v1/completions", {{"prompt", "Hello <｜User｜> world"}, {"max_tokens", 1}});
  EXPECT_EQ(t["tokens"].get<std::vector<int32_t>>(), engine_->submitted().back().prompt);

  Json msgs = user("2+2?");
  msgs.push_back({{"role", "assistant"}, {"content", ""}, {"reasoning_content", "Let me"}, {"prefix", true}});
  const Json chat = {{"messages", msgs}, {"thinking", {{"type", "enabled"}}}};
  Json c = post_ok("/tokenize", chat);
  post_ok("/v1/chat/completions", chat);
  EXPECT_EQ(c["tokens"].get<std::vector<int32_t>>(), engine_->submitted().back().prompt);
  EXPECT_FALSE(c.contains("token_strs"));

  Json d = post_ok("/detokenize", {{"tokens", c["tokens"]}});
  EXPECT_EQ(d["prompt"], *tok().decode(engine_->submitted().back().prompt, {false}));

  expect_error(post("/tokenize", {{"prompt", 5}}), 400, "prompt");
  expect_error(post("/tokenize", {{"prompt", "x"}, {"model", "other"}}), 404);
  expect_error(post("/tokenize", {{"messages", "x"}}), 400, "messages");
  expect_error(post("/detokenize", {{"tokens", {1, -1}}}), 400, "tokens");
  expect_error(post("/detokenize", {{"tokens", "abc"}}), 400, "tokens");
  restart_without_tokenizer();
  expect_error(post("/tokenize", {{"prompt", "x"}}), 400);
}

// --api-key: the API routes need "Authorization: Bearer <key>" (any of several), /health and
// /metrics stay open for probes and scrapers.
TEST_F(ServerE2ETest, ApiKeysGuardTheApiRoutesOnly) {
  server_->shutdown(std::chrono::milliseconds(1000));
  server_.reset();
  start(true, size_t{1} << 20, {"k1", "second-key"});
  auto c = client();
  auto no_key = c.Get("/v1/models");
  ASSERT_TRUE(no_key);
  EXPECT_EQ(no_key->status, 401);
  EXPECT_EQ(Json::parse(no_key->body)["error"]["code"], "invalid_api_key");
  auto bearer = [&](const std::string& k) { return httplib::Headers{{"Authorization", "Bearer " + k}}; };
  EXPECT_EQ(c.Get("/v1/models", bearer("k2"))->status, 401);
  EXPECT_EQ(c.Get("/v1/models", bearer("k"))->status, 401);
  EXPECT_EQ(c.Get("/v1/models", bearer("k1x"))->status, 401);
  EXPECT_EQ(c.Get("/v1/models", bearer("k1"))->status, 200);
  EXPECT_EQ(c.Get("/v1/models", bearer("second-key"))->status, 200);
  EXPECT_EQ(c.Post("/v1/completions", "{\"prompt\": \"x\"}", "application/json")->status, 401);
  EXPECT_EQ(c.Post("/v1/completions", bearer("k1"), "{\"prompt\": \"x\", \"max_tokens\": 1}", "application/json")->status, 200);
  EXPECT_EQ(c.Post("/tokenize", "{\"prompt\": \"x\"}", "application/json")->status, 401);
  EXPECT_EQ(c.Get("/health")->status, 200);
  EXPECT_EQ(c.Get("/metrics")->status, 200);
}

TEST(ApiKeys, FromTheOptionElseTheEnvironment) {
  EXPECT_EQ(api_keys_from("a,,b", nullptr), (std::vector<std::string>{"a", "b"}));
  setenv("DI_TEST_API_KEY", "env-key", 1);
  EXPECT_EQ(api_keys_from("", "DI_TEST_API_KEY"), (std::vector<std::string>{"env-key"}));
  EXPECT_EQ(api_keys_from("opt", "DI_TEST_API_KEY"), (std::vector<std::string>{"opt"}));
  unsetenv("DI_TEST_API_KEY");
  EXPECT_TRUE(api_keys_from("", "DI_TEST_API_KEY").empty());
}

TEST_F(ServerE2ETest, EngineFullIs429AndServerKeepsServing) {
  engine_->full = true;
  auto r = post("/v1/chat/completions", {{"messages", user("x")}});
  expect_error(r, 429);
  EXPECT_EQ(Json::parse(r->body)["error"]["type"], "rate_limit_error");
  engine_->full = false;
  set_script("ok");
  EXPECT_EQ(post_ok("/v1/chat/completions", {{"messages", user("x")}})["choices"][0]["message"]["content"], "ok");
}

TEST_F(ServerE2ETest, ClientDisconnectMidStreamCancels) {
  engine_->script = ids("one two three four five six seven eight nine ten");
  engine_->token_delay = std::chrono::milliseconds(10);
  auto c = client();
  httplib::Request req;
  req.method = "POST";
  req.path = "/v1/completions";
  req.body = Json{{"prompt", "x"}, {"stream", true}, {"max_tokens", 200}}.dump();
  req.set_header("Content-Type", "application/json");
  int chunks = 0;
  req.content_receiver = [&](const char*, size_t, uint64_t, uint64_t) { return ++chunks < 3; };
  auto res = c.send(req);
  EXPECT_FALSE(res);  // we hung up
  c.stop();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (engine_->num_cancelled() == 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_EQ(engine_->submitted().size(), 1u);
  EXPECT_TRUE(engine_->was_cancelled(engine_->submitted()[0].id));
  while (engine_->running() > 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(engine_->running(), 0);
}

// Non-streaming: httplib 0.11 shows a handler no closed socket, so a long answer goes out chunked
// with JSON-legal leading spaces as probes; a client that hangs up is then seen and cancelled.
TEST_F(ServerE2ETest, ClientDisconnectWhileWaitingForANonStreamingAnswerCancels) {
  engine_->script = ids("one two three four five six seven eight nine ten");
  engine_->token_delay = std::chrono::milliseconds(10);  // 2000 tokens: 20 s if not cancelled
  const std::string body = Json{{"prompt", "x"}, {"max_tokens", 2000}}.dump();
  const std::string msg = "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                          "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port_));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(::send(fd, msg.data(), msg.size(), MSG_NOSIGNAL), static_cast<ssize_t>(msg.size()));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  ::close(fd);
  const auto t0 = std::chrono::steady_clock::now();
  const auto deadline = t0 + std::chrono::seconds(5);
  while (engine_->num_cancelled() == 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_EQ(engine_->submitted().size(), 1u);
  EXPECT_TRUE(engine_->was_cancelled(engine_->submitted()[0].id));
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(2));
  while (engine_->running() > 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(engine_->running(), 0);
  auto m = client().Get("/metrics");
  ASSERT_TRUE(m);
  EXPECT_NE(m->body.find("deepinfer_requests_cancelled_total{model_name=\"tiny\",reason=\"client_disconnect\"} 1"),
            std::string::npos) << m->body;
}

// A non-streaming answer slower than the probe interval: chunked, no Content-Length, leading
// spaces, and still one JSON document a client parses; a fast one stays a plain response.
TEST_F(ServerE2ETest, SlowNonStreamingAnswerIsChunkedJsonWithLeadingSpaces) {
  set_script("one two three four five six seven eight nine ten eleven twelve");
  engine_->token_delay = std::chrono::milliseconds(20);
  for (const char* path : {"/v1/completions", "/v1/chat/completions"}) {
    Json req = std::string(path) == "/v1/completions" ? Json{{"prompt", "x"}} : Json{{"messages", user("x")}};
    auto r = post(path, req);
    ASSERT_TRUE(r) << path;
    EXPECT_EQ(r->status, 200) << r->body;
    EXPECT_EQ(r->get_header_value("Transfer-Encoding"), "chunked") << path;
    EXPECT_FALSE(r->has_header("Content-Length")) << path;
    ASSERT_FALSE(r->body.empty());
    EXPECT_EQ(r->body[0], ' ') << path;
    Json j = Json::parse(r->body);
    EXPECT_EQ(j["usage"]["completion_tokens"], static_cast<int64_t>(engine_->script.size())) << r->body;
  }
  engine_->token_delay = std::chrono::milliseconds(0);
  auto fast = post("/v1/completions", {{"prompt", "x"}, {"max_tokens", 2}});
  ASSERT_TRUE(fast);
  EXPECT_TRUE(fast->has_header("Content-Length"));
  EXPECT_EQ(fast->body[0], '{');
}

TEST_F(ServerE2ETest, MalformedAndInvalidRequests) {
  auto c = client();
  auto bad = c.Post("/v1/chat/completions", "{\"messages\": [", "application/json");
  expect_error(bad, 400);
  EXPECT_NE(Json::parse(bad->body)["error"]["message"].get<std::string>().find("JSON"), std::string::npos);
  expect_error(post("/v1/chat/completions", {{"messages", user("x")}, {"temperature", "hot"}}), 400, "temperature");
  expect_error(post("/v1/chat/completions", {{"messages", user("x")}, {"temperature", -1}}), 400, "temperature");
  expect_error(post("/v1/chat/completions", {{"messages", user("x")}, {"n", 1000}}), 400, "n");
  expect_error(post("/v1/chat/completions", {{"messages", "x"}}), 400, "messages");
  expect_error(post("/v1/completions", {{"prompt", {1, 999999999}}}), 400);
  expect_error(post("/v1/completions", {{"prompt", std::vector<int>(5000, 5)}}), 400);      // longer than the context
  expect_error(post("/v1/completions", {{"prompt", {1, 2}}, {"max_tokens", 5000}}), 400, "max_tokens");
  expect_error(post("/v1/chat/completions", {{"model", "gpt-4"}, {"messages", user("x")}}), 404);
  expect_error(post("/v1/nothing", Json::object()), 404);
  EXPECT_TRUE(engine_->submitted().empty());  // nothing invalid reached the engine
  // The server keeps serving.
  auto h = c.Get("/health");
  ASSERT_TRUE(h);
  EXPECT_EQ(h->status, 200);
  set_script("fine");
  EXPECT_EQ(post_ok("/v1/completions", {{"prompt", "x"}})["choices"][0]["text"], "fine");
}

TEST_F(ServerE2ETest, BodyTooLargeIs413) {
  std::string big(size_t{2} << 20, 'a');
  auto r = post("/v1/completions", {{"prompt", big}});
  expect_error(r, 413);
  EXPECT_NE(Json::parse(r->body)["error"]["message"].get<std::string>().find("larger than the limit"), std::string::npos);
  // httplib's own, smaller cap on form-encoded bodies (curl -d's default type) says so.
  auto form = client().Post("/v1/completions", std::string(20000, 'a'), "application/x-www-form-urlencoded");
  expect_error(form, 413);
  EXPECT_NE(Json::parse(form->body)["error"]["message"].get<std::string>().find("application/json"), std::string::npos);
  EXPECT_EQ(client().Get("/health")->status, 200);
}

TEST_F(ServerE2ETest, ModelsHealthMetrics) {
  auto c = client();
  Json m = Json::parse(c.Get("/v1/models")->body);
  EXPECT_EQ(m["object"], "list");
  EXPECT_EQ(m["data"][0]["id"], "tiny");
  set_script("x");
  post_ok("/v1/completions", {{"prompt", "x"}});
  post("/v1/completions", {{"prompt", 5}});
  // Requests are counted by the access log, which runs after the response is written: a scrape
  // right after the answer may come first, so wait (briefly) until both show up.
  auto r = c.Get("/metrics");
  // (The exact completions lines: /v1/models' status="200" line alone must not end the wait.)
  const auto counted = [](const std::string& b) {
    return b.find("endpoint=\"/v1/completions\",status=\"400\"} 1") != std::string::npos &&
           b.find("endpoint=\"/v1/completions\",status=\"200\"} 1") != std::string::npos;
  };
  for (int i = 0; i < 200 && r && !counted(r->body); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    r = c.Get("/metrics");
  }
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  const std::string& t = r->body;
  EXPECT_NE(t.find("deepinfer_requests_total{model_name=\"tiny\",endpoint=\"/v1/completions\",status=\"200\"} 1"), std::string::npos) << t;
  EXPECT_NE(t.find("endpoint=\"/v1/completions\",status=\"400\"} 1"), std::string::npos);
  EXPECT_NE(t.find("deepinfer_time_to_first_token_seconds_count{model_name=\"tiny\"} 1"), std::string::npos);
  EXPECT_NE(t.find("deepinfer_prefix_cache_hits_total{model_name=\"tiny\"} 7"), std::string::npos);
  EXPECT_NE(t.find("deepinfer_num_preemptions_total{model_name=\"tiny\"} 2"), std::string::npos);
  EXPECT_NE(t.find("deepinfer_num_requests_waiting"), std::string::npos);
  EXPECT_NE(t.find("deepinfer_state_memory_used_bytes"), std::string::npos);
}

TEST_F(ServerE2ETest, WithoutTokenizerServesTokenIdsOnly) {
  restart_without_tokenizer();
  engine_->script = {40, 41, eos_id()};
  Json r = post_ok("/v1/completions", {{"prompt", {1, 2}}});
  EXPECT_EQ(r["choices"][0]["token_ids"], Json({40, 41, eos_id()}));
  EXPECT_EQ(r["choices"][0]["text"], "");
  auto text = post("/v1/completions", {{"prompt", "hello"}});
  expect_error(text, 400);
  EXPECT_NE(Json::parse(text->body)["error"]["message"].get<std::string>().find("tokenizer"), std::string::npos);
  expect_error(post("/v1/chat/completions", {{"messages", user("x")}}), 400);
  expect_error(post("/v1/completions", {{"prompt", {1}}, {"stop", "x"}}), 400);
  // Streaming with ids.
  auto s = parse_sse(post("/v1/completions", {{"prompt", {1, 2}}, {"stream", true}})->body);
  std::vector<int32_t> got;
  for (const Json& e : s.events) {
    for (int32_t id : e["choices"][0]["token_ids"]) got.push_back(id);
  }
  EXPECT_EQ(got, (std::vector<int32_t>{40, 41, eos_id()}));
}

TEST_F(ServerE2ETest, ShutdownStopsIntakeAndFinishesInFlightStreams) {
  engine_->script = ids("a b c d e f g h i j");
  engine_->token_delay = std::chrono::milliseconds(5);
  auto stream = std::async(std::launch::async, [&] {
    return post("/v1/completions", {{"prompt", "x"}, {"stream", true}, {"max_tokens", 40}});
  });
  while (engine_->submitted().empty()) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  auto down = std::async(std::launch::async, [&] { server_->shutdown(std::chrono::seconds(5)); });
  while (!server_->draining()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  expect_error(post("/v1/completions", {{"prompt", "x"}}), 503);
  auto r = stream.get();
  ASSERT_TRUE(r);
  SseStream s = parse_sse(r->body);
  EXPECT_TRUE(s.done);
  std::string finish;
  for (const Json& e : s.events) {
    if (!e["choices"][0]["finish_reason"].is_null()) finish = e["choices"][0]["finish_reason"];
  }
  EXPECT_EQ(finish, "length");
  down.get();
  EXPECT_FALSE(engine_->was_cancelled(engine_->submitted()[0].id));
  server_.reset();
}

}  // namespace
}  // namespace deepinfer::server
