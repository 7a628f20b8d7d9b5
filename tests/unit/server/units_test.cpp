// SSE framing, Status -> HTTP error mapping, the stop-string filter and the metrics exposition.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "server/api_error.h"
#include "server/choice_output.h"
#include "server/metrics.h"
#include "server/sse.h"

namespace deepinfer::server {
namespace {

TEST(SseTest, DataEventsAndDone) {
  EXPECT_EQ(sse_data("{\"a\":1}"), "data: {\"a\":1}\n\n");
  EXPECT_EQ(sse_done(), "data: [DONE]\n\n");
  EXPECT_EQ(sse_comment("keep\nalive"), ": keep alive\n\n");
  // A JSON payload with a newline in a string stays on one line.
  nlohmann::json j = {{"content", "a\nb"}};
  std::string ev = sse_data(j.dump());
  EXPECT_EQ(ev.find('\n'), ev.size() - 2);
}

TEST(ApiErrorTest, StatusCodesMapToHttp) {
  EXPECT_EQ(http_status_for(StatusCode::kInvalidArgument), 400);
  EXPECT_EQ(http_status_for(StatusCode::kUnsupported), 400);
  EXPECT_EQ(http_status_for(StatusCode::kNotFound), 404);
  EXPECT_EQ(http_status_for(StatusCode::kResourceExhausted), 429);
  EXPECT_EQ(http_status_for(StatusCode::kCancelled), 503);
  EXPECT_EQ(http_status_for(StatusCode::kInternal), 500);
  EXPECT_EQ(http_status_for(StatusCode::kDataLoss), 500);
}

TEST(ApiErrorTest, BodyIsOpenAiShaped) {
  ApiError e = api_error_from_status(Status::invalid_argument("temperature must be a finite number >= 0, got -1"));
  EXPECT_EQ(e.http_status, 400);
  EXPECT_EQ(e.param, "temperature");
  auto j = nlohmann::json::parse(api_error_body(e));
  EXPECT_EQ(j["error"]["type"], "invalid_request_error");
  EXPECT_EQ(j["error"]["param"], "temperature");
  EXPECT_TRUE(j["error"]["code"].is_null());
  EXPECT_NE(j["error"]["message"].get<std::string>().find("temperature"), std::string::npos);

  auto full = nlohmann::json::parse(api_error_body(api_error_from_status(Status::resource_exhausted("full"))));
  EXPECT_EQ(full["error"]["type"], "rate_limit_error");
  EXPECT_TRUE(full["error"]["param"].is_null());
  EXPECT_EQ(api_error_from_status(Status::not_found("no model")).type, "not_found_error");
  EXPECT_EQ(api_error_from_status(Status::cancelled("bye")).http_status, 503);
  EXPECT_EQ(api_error_for_http(413, "too big").code, "payload_too_large");
  // Explicit param wins; a message that does not start with a field name has none.
  EXPECT_EQ(api_error_from_status(Status::invalid_argument("bad"), "messages").param, "messages");
  EXPECT_EQ(api_error_from_status(Status::invalid_argument("request body is not valid JSON")).param, "");
  EXPECT_EQ(api_error_from_status(Status::invalid_argument("stop[0] must not be empty")).param, "stop");
  EXPECT_EQ(api_error_from_status(Status::invalid_argument("logit_bias: token id 5 ...")).param, "logit_bias");
}

std::string run_filter(StopStringFilter& f, const std::vector<std::string>& pieces, std::vector<std::string>* outs = nullptr) {
  std::string all;
  for (const auto& p : pieces) {
    std::string o = f.push(p);
    if (outs) outs->push_back(o);
    all += o;
  }
  return all + f.flush();
}

TEST(StopStringFilterTest, MatchesAcrossPiecesAndHoldsBackPrefixes) {
  StopStringFilter f({"STOP"}, false);
  std::vector<std::string> outs;
  EXPECT_EQ(run_filter(f, {"abc S", "T", "OP tail"}, &outs), "abc ");
  EXPECT_EQ(outs[0], "abc ");  // "S" held back
  EXPECT_EQ(outs[1], "");
  EXPECT_TRUE(f.stopped());
  EXPECT_EQ(*f.matched(), "STOP");
  EXPECT_EQ(f.push("more"), "");
}

TEST(StopStringFilterTest, FalsePrefixIsReleased) {
  StopStringFilter f({"STOP"}, false);
  std::vector<std::string> outs;
  EXPECT_EQ(run_filter(f, {"ST", "ART", " x"}, &outs), "START x");
  EXPECT_FALSE(f.stopped());
  EXPECT_EQ(outs[0], "");
  StopStringFilter g({"\n\n"}, false);
  EXPECT_EQ(run_filter(g, {"a\n"}), "a\n");  // flush releases the held prefix at the end
}

TEST(StopStringFilterTest, EarliestOfSeveralAndIncludeOption) {
  StopStringFilter f({"world", "lo"}, false);
  EXPECT_EQ(run_filter(f, {"hello world"}), "hel");
  EXPECT_EQ(*f.matched(), "lo");
  StopStringFilter g({"world"}, true);
  EXPECT_EQ(run_filter(g, {"hello wor", "ld!"}), "hello world");
  StopStringFilter none({}, false);
  EXPECT_EQ(none.push("anything"), "anything");
}

TEST(MetricsTest, HistogramIsCumulative) {
  Histogram h({0.1, 1.0});
  h.observe(0.05);
  h.observe(0.5);
  h.observe(5);
  std::string out;
  h.render(out, "x_seconds", "help", "m=\"a\"");
  EXPECT_NE(out.find("# TYPE x_seconds histogram"), std::string::npos);
  EXPECT_NE(out.find("x_seconds_bucket{m=\"a\",le=\"0.1\"} 1\n"), std::string::npos);
  EXPECT_NE(out.find("x_seconds_bucket{m=\"a\",le=\"1\"} 2\n"), std::string::npos);
  EXPECT_NE(out.find("x_seconds_bucket{m=\"a\",le=\"+Inf\"} 3\n"), std::string::npos);
  EXPECT_NE(out.find("x_seconds_count{m=\"a\"} 3\n"), std::string::npos);
}

TEST(MetricsTest, RenderHasEngineAndServerSeries) {
  ServerMetrics m;
  m.count_request("/v1/completions", 200);
  m.count_request("/v1/completions", 200);
  m.count_request("/v1/completions", 429);
  m.observe_ttft(0.02);
  EngineStats s;
  s.waiting = 3;
  s.running = 2;
  s.state_bytes_used = 50;
  s.state_bytes_capacity = 100;
  s.prefix_cache_hit_tokens = 64;
  s.preemptions = 1;
  std::string out = m.render(s, "tiny");
  EXPECT_NE(out.find("deepinfer_requests_total{model_name=\"tiny\",endpoint=\"/v1/completions\",status=\"200\"} 2"), std::string::npos);
  EXPECT_NE(out.find("status=\"429\"} 1"), std::string::npos);
  EXPECT_NE(out.find("deepinfer_num_requests_waiting{model_name=\"tiny\"} 3"), std::string::npos);
  EXPECT_NE(out.find("deepinfer_num_requests_running{model_name=\"tiny\"} 2"), std::string::npos);
  EXPECT_NE(out.find("deepinfer_state_memory_usage_ratio{model_name=\"tiny\"} 0.5"), std::string::npos);
  EXPECT_NE(out.find("deepinfer_prefix_cache_hits_total{model_name=\"tiny\"} 64"), std::string::npos);
  EXPECT_NE(out.find("deepinfer_num_preemptions_total{model_name=\"tiny\"} 1"), std::string::npos);
  EXPECT_NE(out.find("deepinfer_time_to_first_token_seconds_count{model_name=\"tiny\"} 1"), std::string::npos);
  EXPECT_NE(out.find("deepinfer_inter_token_latency_seconds_bucket"), std::string::npos);
  EXPECT_NE(out.find("deepinfer_e2e_request_latency_seconds_sum"), std::string::npos);
}

TEST(MetricsTest, CancellationsByReasonAndHelpTexts) {
  ServerMetrics m;
  std::string out = m.render(EngineStats{}, "tiny");
  // Both series exist from the start, at 0.
  EXPECT_NE(out.find("# TYPE deepinfer_requests_cancelled_total counter"), std::string::npos);
  EXPECT_NE(out.find("deepinfer_requests_cancelled_total{model_name=\"tiny\",reason=\"client_disconnect\"} 0\n"), std::string::npos);
  EXPECT_NE(out.find("deepinfer_requests_cancelled_total{model_name=\"tiny\",reason=\"shutdown\"} 0\n"), std::string::npos);
  m.count_cancelled("client_disconnect");
  m.count_cancelled("client_disconnect");
  m.count_cancelled("shutdown");
  EXPECT_EQ(m.cancelled("client_disconnect"), 2);
  out = m.render(EngineStats{}, "tiny");
  EXPECT_NE(out.find("deepinfer_requests_cancelled_total{model_name=\"tiny\",reason=\"client_disconnect\"} 2\n"), std::string::npos);
  EXPECT_NE(out.find("deepinfer_requests_cancelled_total{model_name=\"tiny\",reason=\"shutdown\"} 1\n"), std::string::npos);
  // queries_total counts lookups, not tokens.
  EXPECT_NE(out.find("# HELP deepinfer_prefix_cache_queries_total Prefix-cache lookups"), std::string::npos) << out;
  EXPECT_EQ(out.find("Prompt tokens looked up"), std::string::npos);
  // used_bytes says what it counts (reservations) and its bound.
  EXPECT_NE(out.find("# HELP deepinfer_state_memory_used_bytes Model state reserved"), std::string::npos);
  EXPECT_NE(out.find("Never above capacity_bytes."), std::string::npos);
}

}  // namespace
}  // namespace deepinfer::server
