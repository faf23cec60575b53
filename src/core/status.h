// Status and Result<T>: expected-style errors returned at module boundaries.
// Value types; not thread-safe beyond normal value semantics.
#pragma once

#include <cassert>
#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace tessera {

enum class ErrorCode {
  kInvalidArgument,
  kNotFound,
  kFailedPrecondition,
  kResourceExhausted,
  kInternal,
  kUnauthenticated,   // the caller could not be identified
  kPermissionDenied,  // the caller is known but may not do this
  kUnavailable,       // try again later (e.g. shutting down)
};

struct Error {
  ErrorCode code = ErrorCode::kInvalidArgument;
  std::string message;  // says which field/what is wrong and, where possible, how to fix it
};

inline Error invalid_argument(std::string msg) { return {ErrorCode::kInvalidArgument, std::move(msg)}; }
inline Error not_found(std::string msg) { return {ErrorCode::kNotFound, std::move(msg)}; }
inline Error failed_precondition(std::string msg) { return {ErrorCode::kFailedPrecondition, std::move(msg)}; }
inline Error internal_error(std::string msg) { return {ErrorCode::kInternal, std::move(msg)}; }
inline Error permission_denied(std::string msg) { return {ErrorCode::kPermissionDenied, std::move(msg)}; }
inline Error unauthenticated(std::string msg) { return {ErrorCode::kUnauthenticated, std::move(msg)}; }

// Status: ok or an Error.
class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Error e) : error_(std::move(e)) {}  // NOLINT: implicit by design
  static Status ok_status() { return {}; }
  bool ok() const { return !error_.has_value(); }
  const Error& error() const {
    assert(error_);
    return *error_;
  }
  const std::string& message() const { return error().message; }

 private:
  std::optional<Error> error_;
};

// Result<T>: a T or an Error.
template <class T>
class [[nodiscard]] Result {
 public:
  Result(T v) : v_(std::move(v)) {}       // NOLINT
  Result(Error e) : v_(std::move(e)) {}   // NOLINT
  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }
  T& value() & {
    assert(ok());
    return std::get<0>(v_);
  }
  const T& value() const& {
    assert(ok());
    return std::get<0>(v_);
  }
  T&& value() && {
    assert(ok());
    return std::get<0>(std::move(v_));
  }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  const Error& error() const {
    assert(!ok());
    return std::get<1>(v_);
  }
  Status status() const { return ok() ? Status() : Status(error()); }

 private:
  std::variant<T, Error> v_;
};

}  // namespace tessera
