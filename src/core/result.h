// Result<T>: a value or a non-ok Status (std::expected is C++23; we target C++20).
#pragma once

#include <optional>
#include <utility>

#include "core/check.h"
#include "core/status.h"

namespace deepinfer {

template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}  // NOLINT(google-explicit-constructor)
  Result(Status status) : status_(std::move(status)) {  // NOLINT(google-explicit-constructor)
    DI_CHECK(!status_.is_ok());
  }
  bool is_ok() const { return value_.has_value(); }
  const Status& status() const { return status_; }
  T& value() & { DI_CHECK(is_ok()); return *value_; }
  const T& value() const& { DI_CHECK(is_ok()); return *value_; }
  T&& value() && { DI_CHECK(is_ok()); return std::move(*value_); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T&& operator*() && { return std::move(*this).value(); }

 private:
  std::optional<T> value_;
  Status status_;
};

#define DI_CONCAT_INNER(a, b) a##b
#define DI_CONCAT(a, b) DI_CONCAT_INNER(a, b)

/// Returns from the enclosing function when `expr` (a Status) is not ok.
#define DI_TRY(expr)                                   \
  do {                                                 \
    ::deepinfer::Status di_status_ = (expr);           \
    if (!di_status_.is_ok()) return di_status_;        \
  } while (0)

#define DI_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr)       \
  auto tmp = (expr);                                   \
  if (!tmp.is_ok()) return tmp.status();               \
  lhs = std::move(tmp).value()

/// `DI_ASSIGN_OR_RETURN(auto x, f());` unwraps a Result or returns its Status.
#define DI_ASSIGN_OR_RETURN(lhs, expr) \
  DI_ASSIGN_OR_RETURN_IMPL(DI_CONCAT(di_result_, __LINE__), lhs, expr)

}  // namespace deepinfer
