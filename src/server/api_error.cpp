#include "server/api_error.h"

#include <cctype>
#include <nlohmann/json.hpp>

namespace deepinfer::server {

namespace {

std::string type_for_http(int http_status) {
  switch (http_status) {
    case 400: case 405: case 413: case 422: return "invalid_request_error";
    case 404: return "not_found_error";
    case 429: return "rate_limit_error";
    case 503: return "service_unavailable_error";
    default: return http_status >= 500 ? "server_error" : "invalid_request_error";
  }
}

// "temperature must be ..." -> "temperature"; "stop[0] must ..." -> "stop".
std::string leading_field(std::string_view msg) {
  size_t i = 0;
  while (i < msg.size() && (std::islower(static_cast<unsigned char>(msg[i])) || msg[i] == '_' ||
                            (i > 0 && std::isdigit(static_cast<unsigned char>(msg[i]))))) {
    ++i;
  }
  if (i == 0 || i == msg.size()) return {};
  if (msg[i] != ' ' && msg[i] != ':' && msg[i] != '[' && msg[i] != '.') return {};
  if (msg[i] == ' ' && msg.substr(0, i).find('_') == std::string_view::npos) {
    // A plain word followed by a space is only a field name when it is one we know.
    static const char* const kSingle[] = {"temperature", "n", "stop", "seed", "model", "messages",
                                          "prompt", "logprobs", "tools", "echo", "stream"};
    bool known = false;
    for (const char* k : kSingle) known = known || msg.substr(0, i) == k;
    if (!known) return {};
  }
  return std::string(msg.substr(0, i));
}

}  // namespace

int http_status_for(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return 200;
    case StatusCode::kInvalidArgument: return 400;
    case StatusCode::kUnsupported: return 400;
    case StatusCode::kNotFound: return 404;
    case StatusCode::kResourceExhausted: return 429;
    case StatusCode::kCancelled: return 503;
    case StatusCode::kDeadlineExceeded: return 500;
    case StatusCode::kDataLoss: return 500;
    case StatusCode::kInternal: return 500;
  }
  return 500;
}

ApiError api_error_from_status(const Status& status, std::string param) {
  ApiError e;
  e.http_status = http_status_for(status.code());
  e.type = type_for_http(e.http_status);
  e.message = std::string(status.message());
  if (e.message.empty()) e.message = std::string(status_code_name(status.code()));
  if (param.empty() && e.http_status == 400) param = leading_field(e.message);
  e.param = std::move(param);
  switch (status.code()) {
    case StatusCode::kUnsupported: e.code = "unsupported"; break;
    case StatusCode::kNotFound: e.code = "model_not_found"; break;
    case StatusCode::kResourceExhausted: e.code = "engine_full"; break;
    case StatusCode::kCancelled: e.code = "shutting_down"; break;
    default: break;
  }
  return e;
}

ApiError api_error_for_http(int http_status, std::string message) {
  ApiError e;
  e.http_status = http_status;
  e.type = type_for_http(http_status);
  e.message = std::move(message);
  if (http_status == 413) e.code = "payload_too_large";
  return e;
}

std::string api_error_body(const ApiError& err) {
  nlohmann::ordered_json j;
  j["message"] = err.message;
  j["type"] = err.type;
  j["param"] = err.param.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(err.param);
  j["code"] = err.code.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(err.code);
  nlohmann::ordered_json body;
  body["error"] = std::move(j);
  return body.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

}  // namespace deepinfer::server
