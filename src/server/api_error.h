// ApiError: an OpenAI-style error response, {"error": {"message", "type", "param", "code"}}, and
// the one place that maps a Status to an HTTP status (STYLE.md rule 7). Everything the server
// rejects goes through here, so the status codes stay consistent:
//   400 kInvalidArgument / kUnsupported (malformed JSON, wrong types, invalid values)
//   404 kNotFound (unknown model or route)      413 body too large (transport)
//   429 kResourceExhausted (engine queue full)  503 kCancelled at submit (shutting down)
//   500 everything else (kInternal, kDataLoss, kDeadlineExceeded)
#pragma once

#include <string>

#include "core/status.h"

namespace deepinfer::server {

struct ApiError {
  int http_status = 500;
  std::string type;     // "invalid_request_error", "not_found_error", "rate_limit_error", ...
  std::string message;
  std::string param;    // the offending request field; empty -> null
  std::string code;     // a machine-readable code; empty -> null
};

/// HTTP status for a non-ok StatusCode.
int http_status_for(StatusCode code);

/// Maps a non-ok Status. `param` names the request field; when empty, a leading field name in
/// the message ("temperature must be ...", "logit_bias: ...") is used for 400s.
ApiError api_error_from_status(const Status& status, std::string param = {});

/// A transport-level error (404 route, 405, 413, ...), typed by its HTTP status.
ApiError api_error_for_http(int http_status, std::string message);

/// The response body: {"error": {...}}.
std::string api_error_body(const ApiError& err);

}  // namespace deepinfer::server
