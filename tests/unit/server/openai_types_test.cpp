// OpenAI JSON -> typed requests: every field, and every validation error with its param.
#include <gtest/gtest.h>

#include "server/openai_types.h"

namespace deepinfer::server {
namespace {

Json J(const char* s) { return Json::parse(s); }

ChatRequest chat_ok(const char* body) {
  ParseError e;
  auto r = parse_chat_request(J(body), {}, &e);
  EXPECT_TRUE(r.is_ok()) << r.status().to_string();
  return r.is_ok() ? *r : ChatRequest{};
}

// Expects a 400-class failure naming `param`.
void chat_bad(const char* body, const std::string& param, StatusCode code = StatusCode::kInvalidArgument) {
  ParseError e;
  auto r = parse_chat_request(J(body), {}, &e);
  ASSERT_FALSE(r.is_ok()) << body;
  EXPECT_EQ(r.status().code(), code) << body << ": " << r.status().to_string();
  if (code == StatusCode::kInvalidArgument) EXPECT_EQ(e.param, param) << body << ": " << r.status().to_string();
}

void completion_bad(const char* body, const std::string& param, StatusCode code = StatusCode::kInvalidArgument) {
  ParseError e;
  auto r = parse_completion_request(J(body), {}, &e);
  ASSERT_FALSE(r.is_ok()) << body;
  EXPECT_EQ(r.status().code(), code) << body;
  if (code == StatusCode::kInvalidArgument) EXPECT_EQ(e.param, param) << body << ": " << r.status().to_string();
}

TEST(ParseJsonBodyTest, MalformedAndNonObjectAndTooDeep) {
  EXPECT_TRUE(parse_json_body("{\"a\": 1}").is_ok());
  auto bad = parse_json_body("{\"a\": ");
  ASSERT_FALSE(bad.is_ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(bad.status().message()).find("not valid JSON"), std::string::npos);
  EXPECT_FALSE(parse_json_body("[1, 2]").is_ok());
  EXPECT_FALSE(parse_json_body("").is_ok());
  EXPECT_FALSE(parse_json_body(std::string(100000, '[')).is_ok());
  EXPECT_TRUE(parse_json_body("{\"s\": \"[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[\"}").is_ok());
  EXPECT_FALSE(parse_json_body("{\"s\": \"\xff\"}").is_ok());  // invalid UTF-8
}

TEST(ChatRequestTest, AllSamplingFields) {
  ChatRequest r = chat_ok(R"({"model": "m", "messages": [{"role": "user", "content": "hi"}],
    "temperature": 0.5, "top_p": 0.9, "top_k": 40, "min_p": 0.1, "repetition_penalty": 1.1,
    "presence_penalty": 0.5, "frequency_penalty": -0.5, "logit_bias": {"17": 5, "3": -100},
    "stop": ["a", "b"], "stop_token_ids": [7], "max_tokens": 32, "min_tokens": 2, "ignore_eos": true,
    "n": 2, "logprobs": true, "top_logprobs": 3, "seed": 42, "stream": true,
    "stream_options": {"include_usage": true}, "priority": 5, "user": "u", "unknown_field": {"x": 1}})");
  const SamplingParams& s = r.sampling;
  EXPECT_EQ(r.model, "m");
  EXPECT_FLOAT_EQ(s.temperature, 0.5f);
  EXPECT_FLOAT_EQ(s.top_p, 0.9f);
  EXPECT_EQ(s.top_k, 40);
  EXPECT_FLOAT_EQ(s.min_p, 0.1f);
  EXPECT_FLOAT_EQ(s.repetition_penalty, 1.1f);
  EXPECT_FLOAT_EQ(s.presence_penalty, 0.5f);
  EXPECT_FLOAT_EQ(s.frequency_penalty, -0.5f);
  EXPECT_EQ(s.logit_bias.size(), 2u);
  EXPECT_FLOAT_EQ(s.logit_bias.at(3), -100.0f);
  EXPECT_EQ(s.stop, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(s.stop_token_ids, (std::vector<int32_t>{7}));
  EXPECT_EQ(*s.max_tokens, 32);
  EXPECT_EQ(s.min_tokens, 2);
  EXPECT_TRUE(s.ignore_eos);
  EXPECT_EQ(s.n, 2);
  EXPECT_TRUE(s.logprobs);
  EXPECT_EQ(s.top_logprobs, 3);
  EXPECT_EQ(*s.seed, 42u);
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.stream_options.include_usage);
  EXPECT_EQ(r.priority, 5);
  EXPECT_TRUE(s.validate(1000).is_ok());
}

TEST(ChatRequestTest, DefaultsNullsAndAliases) {
  ChatRequest r = chat_ok(R"({"messages": [{"role": "user", "content": "hi"}], "temperature": null,
                              "max_completion_tokens": 9, "max_tokens": 4, "n": 1.0, "seed": -1})");
  EXPECT_FLOAT_EQ(r.sampling.temperature, 1.0f);
  EXPECT_EQ(*r.sampling.max_tokens, 9);  // max_completion_tokens wins
  EXPECT_EQ(r.sampling.n, 1);
  EXPECT_EQ(*r.sampling.seed, ~uint64_t{0});
  EXPECT_FALSE(r.stream);
  EXPECT_EQ(r.tool_choice, ToolChoice::kNone);
}

TEST(ChatRequestTest, MessagesAreNormalised) {
  ChatRequest r = chat_ok(R"({"messages": [
    {"role": "system", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
    {"role": "user", "content": "q", "name": "x", "task": "action"},
    {"role": "assistant", "content": null, "reasoning": "think",
     "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{\"x\": 1}"}}]},
    {"role": "tool", "tool_call_id": "c1", "content": "42"}]})");
  ASSERT_EQ(r.messages.size(), 4u);
  EXPECT_EQ(r.messages[0]["content"], "a\nb");
  EXPECT_FALSE(r.messages[1].contains("task"));  // encoder-only fields are not client-settable
  EXPECT_EQ(r.messages[2]["content"], "");
  EXPECT_EQ(r.messages[2]["reasoning_content"], "think");
  EXPECT_EQ(r.messages[2]["tool_calls"][0]["function"]["arguments"], "{\"x\": 1}");
  EXPECT_EQ(r.messages[3]["tool_call_id"], "c1");
}

TEST(ChatRequestTest, PrefixContinuesTheFinalAssistantMessage) {
  ChatRequest a = chat_ok(R"({"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "x", "prefix": true}]})");
  EXPECT_TRUE(a.continue_final);
  EXPECT_EQ(a.messages[1]["wo_eos"], true);
  EXPECT_FALSE(a.messages[1].contains("prefix"));
  ChatRequest v = chat_ok(R"({"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "x"}], "continue_final_message": true})");
  EXPECT_TRUE(v.continue_final);
  // The encoder's own field is not client-settable; without a prefix the message is closed.
  ChatRequest c = chat_ok(R"({"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "x", "wo_eos": true}]})");
  EXPECT_FALSE(c.continue_final);
  EXPECT_FALSE(c.messages[1].contains("wo_eos"));
  chat_bad(R"({"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "x", "prefix": "yes"}]})", "messages[1].prefix");
  chat_bad(R"({"messages": [{"role": "assistant", "content": "x", "prefix": true}, {"role": "user", "content": "hi"}]})", "messages[0].prefix");
  chat_bad(R"({"messages": [{"role": "user", "content": "hi"}], "continue_final_message": true})", "continue_final_message");
  chat_bad(R"({"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "", "prefix": true,
               "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}]})", "messages");
}

TEST(ChatRequestTest, ToolsAndToolChoice) {
  const char* tools = R"("tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}])";
  std::string base = std::string(R"({"messages": [{"role": "user", "content": "hi"}], )") + tools;
  ChatRequest a = chat_ok((base + "}").c_str());
  EXPECT_EQ(a.tool_choice, ToolChoice::kAuto);
  EXPECT_EQ(a.tools.size(), 1u);
  ChatRequest n = chat_ok((base + R"(, "tool_choice": {"type": "function", "function": {"name": "get_weather"}}})").c_str());
  EXPECT_EQ(n.tool_choice, ToolChoice::kNamed);
  EXPECT_EQ(n.tool_choice_name, "get_weather");
  EXPECT_EQ(chat_ok((base + R"(, "tool_choice": "required"})").c_str()).tool_choice, ToolChoice::kRequired);
  EXPECT_EQ(chat_ok((base + R"(, "tool_choice": "none"})").c_str()).tool_choice, ToolChoice::kNone);
  chat_bad((base + R"(, "tool_choice": {"type": "function", "function": {"name": "other"}}})").c_str(), "tool_choice");
  chat_bad((base + R"(, "tool_choice": "sometimes"})").c_str(), "tool_choice");
  chat_bad(R"({"messages": [{"role": "user", "content": "hi"}], "tool_choice": "required"})", "tool_choice");
  chat_bad(R"({"messages": [{"role": "user", "content": "hi"}], "tools": {"a": 1}})", "tools");
  chat_bad(R"({"messages": [{"role": "user", "content": "hi"}], "tools": [{"type": "function", "function": {}}]})",
           "tools[0].function.name");
}

TEST(ChatRequestTest, ThinkingControls) {
  EXPECT_TRUE(*chat_ok(R"({"messages": [{"role": "user", "content": "x"}], "chat_template_kwargs": {"thinking": true}})").thinking);
  EXPECT_FALSE(*chat_ok(R"({"messages": [{"role": "user", "content": "x"}], "thinking": {"type": "disabled"}})").thinking);
  EXPECT_EQ(chat_ok(R"({"messages": [{"role": "user", "content": "x"}], "reasoning_effort": "max"})").reasoning_effort, "max");
  chat_bad(R"({"messages": [{"role": "user", "content": "x"}], "chat_template_kwargs": {"thinking": "yes"}})",
           "chat_template_kwargs.thinking");
}

TEST(ChatRequestTest, EveryValidationError) {
  chat_bad(R"({})", "messages");
  chat_bad(R"({"messages": "hi"})", "messages");
  chat_bad(R"({"messages": []})", "messages");
  chat_bad(R"({"messages": [1]})", "messages[0]");
  chat_bad(R"({"messages": [{"content": "x"}]})", "messages[0].role");
  chat_bad(R"({"messages": [{"role": "wizard", "content": "x"}]})", "messages[0].role");
  chat_bad(R"({"messages": [{"role": "user"}]})", "messages[0].content");
  chat_bad(R"({"messages": [{"role": "user", "content": 5}]})", "messages[0].content");
  chat_bad(R"({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}]})", "",
           StatusCode::kUnsupported);
  chat_bad(R"({"messages": [{"role": "assistant", "content": "", "tool_calls": [{"function": {}}]}, {"role": "user", "content": "x"}]})",
           "messages[0].tool_calls[0]");
  const char* m = R"("messages": [{"role": "user", "content": "x"}])";
  auto with = [&](const char* field) { return std::string("{") + m + ", " + field + "}"; };
  chat_bad(with(R"("temperature": "hot")").c_str(), "temperature");
  chat_bad(with(R"("top_p": [1])").c_str(), "top_p");
  chat_bad(with(R"("top_k": 1.5)").c_str(), "top_k");
  chat_bad(with(R"("top_k": -2)").c_str(), "top_k");
  chat_bad(with(R"("n": 0)").c_str(), "n");
  chat_bad(with(R"("n": "2")").c_str(), "n");
  chat_bad(with(R"("max_tokens": 0)").c_str(), "max_tokens");
  chat_bad(with(R"("max_tokens": -5)").c_str(), "max_tokens");
  chat_bad(with(R"("max_tokens": 1e30)").c_str(), "max_tokens");
  chat_bad(with(R"("stream": "yes")").c_str(), "stream");
  chat_bad(with(R"("stream_options": {"include_usage": 1})").c_str(), "stream_options.include_usage");
  chat_bad(with(R"("stop": 5)").c_str(), "stop");
  chat_bad(with(R"("stop": [""])").c_str(), "stop");
  chat_bad(with(R"("stop": ["a", 1])").c_str(), "stop");
  chat_bad(with(R"("stop_token_ids": [-1])").c_str(), "stop_token_ids");
  chat_bad(with(R"("logit_bias": {"abc": 1})").c_str(), "logit_bias");
  chat_bad(with(R"("logit_bias": {"5": "x"})").c_str(), "logit_bias");
  chat_bad(with(R"("logit_bias": [1])").c_str(), "logit_bias");
  chat_bad(with(R"("seed": "x")").c_str(), "seed");
  chat_bad(with(R"("logprobs": 1)").c_str(), "logprobs");
  chat_bad(with(R"("top_logprobs": 3)").c_str(), "top_logprobs");
  chat_bad(with(R"("logprobs": true, "top_logprobs": 21)").c_str(), "top_logprobs");
  chat_bad(with(R"("best_of": 3)").c_str(), "best_of");
  chat_bad(with(R"("response_format": {"type": "xml"})").c_str(), "response_format");
  chat_bad(with(R"("model": 3)").c_str(), "model");
  chat_bad(with(R"("priority": "high")").c_str(), "priority");
}

TEST(ChatRequestTest, RangeErrorsAreLeftToSamplingParamsValidate) {
  // The parser takes these; SamplingParams::validate (run before submit) rejects them.
  ChatRequest r = chat_ok(R"({"messages": [{"role": "user", "content": "x"}], "temperature": -1, "top_p": 0,
                              "presence_penalty": 3, "logit_bias": {"5": 1000}})");
  EXPECT_FALSE(r.sampling.validate(100).is_ok());
}

TEST(CompletionRequestTest, PromptShapes) {
  ParseError e;
  auto a = parse_completion_request(J(R"({"prompt": "hello"})"), {}, &e);
  ASSERT_TRUE(a.is_ok());
  EXPECT_TRUE(a->prompts[0].is_text);
  auto b = parse_completion_request(J(R"({"prompt": ["a", "b"]})"), {}, &e);
  ASSERT_TRUE(b.is_ok());
  EXPECT_EQ(b->prompts.size(), 2u);
  auto c = parse_completion_request(J(R"({"prompt": [1, 2, 3]})"), {}, &e);
  ASSERT_TRUE(c.is_ok());
  EXPECT_EQ(c->prompts.size(), 1u);
  EXPECT_EQ(c->prompts[0].ids, (std::vector<int32_t>{1, 2, 3}));
  auto d = parse_completion_request(J(R"({"prompt": [[1], [2, 3]], "echo": true, "logprobs": 2})"), {}, &e);
  ASSERT_TRUE(d.is_ok());  // echo + logprobs: the prompt's logprobs too, with as many alternatives
  EXPECT_EQ(d->sampling.prompt_logprobs, 2);
  auto p = parse_completion_request(J(R"({"prompt": "x", "echo": true, "logprobs": 1, "prompt_logprobs": 4, "max_tokens": 0})"), {}, &e);
  ASSERT_TRUE(p.is_ok());
  EXPECT_EQ(p->sampling.prompt_logprobs, 4);
  EXPECT_TRUE(p->echo_only);
  EXPECT_EQ(p->sampling.max_tokens, 1);
  EXPECT_TRUE(p->prompt_logprobs);
  auto f = parse_completion_request(J(R"({"prompt": [[1], [2, 3]], "logprobs": 2})"), {}, &e);
  ASSERT_TRUE(f.is_ok());
  EXPECT_EQ(f->prompts.size(), 2u);
  EXPECT_TRUE(f->sampling.logprobs);
  EXPECT_EQ(f->sampling.top_logprobs, 2);
  auto g = parse_completion_request(J(R"({"prompt": "x", "logprobs": 0})"), {}, &e);
  ASSERT_TRUE(g.is_ok());
  EXPECT_TRUE(g->sampling.logprobs);
  EXPECT_EQ(g->sampling.top_logprobs, 0);
}

TEST(CompletionRequestTest, EveryValidationError) {
  completion_bad(R"({})", "prompt");
  completion_bad(R"({"prompt": 5})", "prompt");
  completion_bad(R"({"prompt": ""})", "prompt");
  completion_bad(R"({"prompt": []})", "prompt");
  completion_bad(R"({"prompt": [[]]})", "prompt");
  completion_bad(R"({"prompt": ["a", 1]})", "prompt");
  completion_bad(R"({"prompt": [1, "a"]})", "prompt");
  completion_bad(R"({"prompt": [1, -2]})", "prompt");
  completion_bad(R"({"prompt": [1.5]})", "prompt");
  completion_bad(R"({"prompt": [[1], 2]})", "prompt");
  completion_bad(R"({"prompt": [{"a": 1}]})", "prompt");
  completion_bad(R"({"prompt": "x", "logprobs": 6})", "logprobs");
  completion_bad(R"({"prompt": "x", "logprobs": true})", "logprobs");
  completion_bad(R"({"prompt": "x", "echo": 1})", "echo");
  completion_bad(R"({"prompt": "x", "suffix": "y"})", "", StatusCode::kUnsupported);
  ParseLimits small;
  small.max_prompts = 2;
  ParseError e;
  auto r = parse_completion_request(J(R"({"prompt": ["a", "b", "c"]})"), small, &e);
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(e.param, "prompt");
}

TEST(UsageTest, BothCacheConventions) {
  Json u = usage_json(10, 5, 4, 2);
  EXPECT_EQ(u["total_tokens"], 15);
  EXPECT_EQ(u["prompt_tokens_details"]["cached_tokens"], 4);
  EXPECT_EQ(u["prompt_cache_hit_tokens"], 4);
  EXPECT_EQ(u["prompt_cache_miss_tokens"], 6);
  EXPECT_EQ(u["completion_tokens_details"]["reasoning_tokens"], 2);
  EXPECT_FALSE(usage_json(1, 1, 0).contains("completion_tokens_details"));
}

}  // namespace
}  // namespace deepinfer::server
