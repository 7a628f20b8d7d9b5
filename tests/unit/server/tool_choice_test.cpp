// tool_choice over HTTP with the real engine on tests/data/tiny-v4-b (random weights; ｜DSML｜ is
// added token 1020): "required" and a named function always end in finish_reason "tool_calls"
// with JSON arguments that follow the tool's schema (also in thinking mode, after </think>), and
// a forced call combined with response_format is a 400.
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>

#include <nlohmann/json.hpp>

#include "engine/engine.h"
#include "server/server.h"
#include "tokenizer/tokenizer.h"

namespace deepinfer::server {
namespace {

using Json = nlohmann::ordered_json;
const std::string kModel = std::string(DI_TEST_DATA_DIR) + "/tiny-v4-b";

const char* kTools = R"([
  {"type": "function", "function": {"name": "set_mode", "parameters": {"type": "object", "properties": {
     "mode": {"type": "string", "enum": ["fast", "slow"]},
     "level": {"type": "integer", "minimum": 0, "maximum": 9}}, "required": ["mode", "level"]}}},
  {"type": "function", "function": {"name": "flag", "parameters": {"type": "object", "properties": {
     "on": {"type": "boolean"}}, "required": ["on"]}}}
])";

class ToolChoiceHttp : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    signal(SIGPIPE, SIG_IGN);
    auto t = tokenizer::Tokenizer::from_path(kModel);
    ASSERT_TRUE(t.is_ok()) << t.status().to_string();
    tok_ = std::move(t).value().release();
    EngineOptions o;
    o.threads = 2;
    auto e = make_engine(kModel, o);
    ASSERT_TRUE(e.is_ok()) << e.status().to_string();
    engine_ = std::move(e).value().release();
    ServerConfig cfg;
    cfg.host = "127.0.0.1";
    cfg.port = 0;
    cfg.http_threads = 4;
    server_ = new Server(*engine_, tok_, cfg);
    auto port = server_->start();
    ASSERT_TRUE(port.is_ok()) << port.status().to_string();
    port_ = *port;
  }
  static void TearDownTestSuite() {
    server_->shutdown(std::chrono::milliseconds(2000));
    delete server_;
    delete engine_;
    delete tok_;
  }

  httplib::Result post(const Json& body) {
    httplib::Client c("127.0.0.1", port_);
    c.set_read_timeout(120, 0);
    return c.Post("/v1/chat/completions", body.dump(), "application/json");
  }
  static Json request(const Json& tool_choice) {
    return Json{{"model", "tiny-v4-b"},
                {"messages", Json::array({Json{{"role", "user"}, {"content", "set it"}}})},
                {"tools", Json::parse(kTools)},
                {"tool_choice", tool_choice},
                {"n", 4},
                {"seed", 7},
                {"temperature", 1.0},
                {"max_tokens", 400}};
  }
  // Every choice ends in tool calls whose arguments follow the schemas; returns the tool names.
  static std::vector<std::string> check_choices(const Json& resp) {
    std::vector<std::string> names;
    EXPECT_EQ(resp["choices"].size(), 4u) << resp.dump();
    for (const Json& ch : resp["choices"]) {
      EXPECT_EQ(ch["finish_reason"], "tool_calls") << ch.dump();
      const Json& calls = ch["message"]["tool_calls"];
      EXPECT_TRUE(calls.is_array() && !calls.empty()) << ch.dump();
      if (!calls.is_array()) continue;
      for (const Json& tc : calls) {
        EXPECT_EQ(tc["type"], "function");
        const std::string name = tc["function"]["name"];
        names.push_back(name);
        Json a = Json::parse(tc["function"]["arguments"].get<std::string>(), nullptr, false);
        EXPECT_TRUE(a.is_object()) << tc.dump();
        if (!a.is_object()) continue;
        if (name == "set_mode") {
          EXPECT_TRUE(a["mode"] == "fast" || a["mode"] == "slow") << a.dump();
          EXPECT_TRUE(a["level"].is_number_integer() && a["level"] >= 0 && a["level"] <= 9) << a.dump();
          EXPECT_EQ(a.size(), 2u) << a.dump();
        } else {
          EXPECT_EQ(name, "flag");
          EXPECT_TRUE(a["on"].is_boolean()) << a.dump();
          EXPECT_EQ(a.size(), 1u) << a.dump();
        }
      }
    }
    return names;
  }

  static inline tokenizer::Tokenizer* tok_ = nullptr;
  static inline EngineClient* engine_ = nullptr;
  static inline Server* server_ = nullptr;
  static inline int port_ = 0;
};

TEST_F(ToolChoiceHttp, RequiredAlwaysCallsATool) {
  auto r = post(request("required"));
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  auto names = check_choices(Json::parse(r->body));
  EXPECT_GE(names.size(), 4u);
}

TEST_F(ToolChoiceHttp, NamedFunctionOnlyCallsIt) {
  Json body = request(Json{{"type", "function"}, {"function", {{"name", "flag"}}}});
  body["parallel_tool_calls"] = false;
  auto r = post(body);
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  auto names = check_choices(Json::parse(r->body));
  EXPECT_EQ(names, std::vector<std::string>(4, "flag"));  // one call per choice, of "flag"
}

TEST_F(ToolChoiceHttp, ThinkingModeCallsAfterTheReasoning) {
  Json body = request("required");
  body["thinking"] = {{"type", "enabled"}};
  body["logit_bias"] = {{"1019", 100}};  // </think> at once (random weights never reach it)
  auto r = post(body);
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  check_choices(Json::parse(r->body));
}

TEST_F(ToolChoiceHttp, ResponseFormatWithAForcedCallIs400) {
  Json body = request("required");
  body["response_format"] = {{"type", "json_object"}};
  auto r = post(body);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400) << r->body;
  Json j = Json::parse(r->body);
  EXPECT_EQ(j["error"]["param"], "tool_choice") << r->body;
  Json bad = request("required");
  bad["parallel_tool_calls"] = "yes";
  auto r2 = post(bad);
  ASSERT_TRUE(r2);
  EXPECT_EQ(r2->status, 400) << r2->body;
  // auto stays unconstrained: still a 200.
  Json ok = request("auto");
  ok["max_tokens"] = 4;
  auto r3 = post(ok);
  ASSERT_TRUE(r3);
  EXPECT_EQ(r3->status, 200) << r3->body;
}

}  // namespace
}  // namespace deepinfer::server
