// Status: the result of an operation that can fail for reasons outside the program's control
// (bad input, missing file, memory). Cheap when ok (no allocation). Invariants use DI_CHECK
// (core/check.h) instead. Our code throws no exceptions; third-party exceptions are caught at the
// call site and turned into a Status.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

namespace deepinfer {

enum class StatusCode : uint8_t {
  kOk,
  kInvalidArgument,
  kNotFound,
  kUnsupported,
  kResourceExhausted,
  kCancelled,
  kDeadlineExceeded,
  kDataLoss,
  kInternal,
};

std::string_view status_code_name(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;  // ok
  Status(StatusCode code, std::string message);

  static Status ok() { return Status(); }
  static Status invalid_argument(std::string msg) { return {StatusCode::kInvalidArgument, std::move(msg)}; }
  static Status not_found(std::string msg) { return {StatusCode::kNotFound, std::move(msg)}; }
  static Status unsupported(std::string msg) { return {StatusCode::kUnsupported, std::move(msg)}; }
  static Status resource_exhausted(std::string msg) { return {StatusCode::kResourceExhausted, std::move(msg)}; }
  static Status cancelled(std::string msg) { return {StatusCode::kCancelled, std::move(msg)}; }
  static Status data_loss(std::string msg) { return {StatusCode::kDataLoss, std::move(msg)}; }
  static Status internal(std::string msg) { return {StatusCode::kInternal, std::move(msg)}; }

  bool is_ok() const { return rep_ == nullptr; }
  StatusCode code() const { return rep_ ? rep_->code : StatusCode::kOk; }
  std::string_view message() const { return rep_ ? std::string_view(rep_->message) : std::string_view(); }
  /// "code: message", for logs and CLI errors.
  std::string to_string() const;
  /// Prefixes the message with where the failure happened: "loading layer 7: <message>".
  Status with_context(std::string_view where) const;

 private:
  struct Rep {
    StatusCode code;
    std::string message;
  };
  std::shared_ptr<const Rep> rep_;
};

}  // namespace deepinfer
