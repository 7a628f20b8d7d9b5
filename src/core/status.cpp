#include "core/status.h"

namespace deepinfer {

std::string_view status_code_name(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return "ok";
    case StatusCode::kInvalidArgument: return "invalid argument";
    case StatusCode::kNotFound: return "not found";
    case StatusCode::kUnsupported: return "unsupported";
    case StatusCode::kResourceExhausted: return "resource exhausted";
    case StatusCode::kCancelled: return "cancelled";
    case StatusCode::kDeadlineExceeded: return "deadline exceeded";
    case StatusCode::kDataLoss: return "data loss";
    case StatusCode::kInternal: return "internal";
  }
  return "unknown";
}

Status::Status(StatusCode code, std::string message) {
  if (code != StatusCode::kOk) rep_ = std::make_shared<const Rep>(Rep{code, std::move(message)});
}

std::string Status::to_string() const {
  if (is_ok()) return "ok";
  return std::string(status_code_name(code())) + ": " + rep_->message;
}

Status Status::with_context(std::string_view where) const {
  if (is_ok()) return *this;
  return Status(code(), std::string(where) + ": " + rep_->message);
}

}  // namespace deepinfer
