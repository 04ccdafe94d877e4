// Status and Result: how hvrun's public API reports errors (and how errors cross component
// boundaries inside hvrun, which includes this header through common/status.h).
//
// A small closed set of codes, the same numbers as the C API's hvrun_status_t, mapped one-to-one
// onto gRPC status codes at the coordinator's edge (see coordinator/service/grpc_status.h). A
// message says what failed, where (rank, host, tensor) and what to try. Exceptions never cross a
// component boundary; broken invariants are assertions.
//
// Self-contained (the standard library only): installed as <prefix>/include/hvrun/status.h.
#ifndef HVRUN_STATUS_H_  // a guard, not #pragma once: installed and source copies may both be seen
#define HVRUN_STATUS_H_

#include <cassert>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace hvrun {

enum class StatusCode : int {
  kOk = 0,
  kCancelled = 1,           // the caller or the job gave up on this operation
  kInvalidArgument = 3,     // the caller's input is wrong (bad flag, mismatched tensor)
  kDeadlineExceeded = 4,    // a bounded wait ran out
  kNotFound = 5,
  kAlreadyExists = 6,       // e.g. a tensor name submitted again while in flight
  kResourceExhausted = 8,
  kFailedPrecondition = 9,  // called in the wrong state (before init, after shutdown)
  kAborted = 10,            // the job was aborted (a rank failed, the launcher stopped it)
  kUnimplemented = 12,
  kInternal = 13,           // a backend (Gloo, NCCL, MPI) or system call failed
  kUnavailable = 14,        // a peer or the coordinator cannot be reached
  kDataLoss = 15,           // stored data is corrupt or truncated (e.g. a checkpoint file)
  kUnauthenticated = 16,    // the job secret is missing or wrong
};

std::string_view status_code_name(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status ok() { return Status(); }

  bool is_ok() const { return code_ == StatusCode::kOk; }
  explicit operator bool() const { return is_ok(); }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }

  // "INVALID_ARGUMENT: message" (or "OK").
  std::string to_string() const;

  // Adds context in front of the message, keeping the code: "while X: <message>".
  Status with_context(std::string_view context) const;

  friend bool operator==(const Status& a, const Status& b) {
    return a.code_ == b.code_ && a.message_ == b.message_;
  }

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status invalid_argument(std::string m) { return {StatusCode::kInvalidArgument, std::move(m)}; }
inline Status deadline_exceeded(std::string m) { return {StatusCode::kDeadlineExceeded, std::move(m)}; }
inline Status not_found(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
inline Status already_exists(std::string m) { return {StatusCode::kAlreadyExists, std::move(m)}; }
inline Status failed_precondition(std::string m) { return {StatusCode::kFailedPrecondition, std::move(m)}; }
inline Status aborted(std::string m) { return {StatusCode::kAborted, std::move(m)}; }
inline Status internal_error(std::string m) { return {StatusCode::kInternal, std::move(m)}; }
inline Status unavailable(std::string m) { return {StatusCode::kUnavailable, std::move(m)}; }
inline Status data_loss(std::string m) { return {StatusCode::kDataLoss, std::move(m)}; }
inline Status unauthenticated(std::string m) { return {StatusCode::kUnauthenticated, std::move(m)}; }
inline Status cancelled(std::string m) { return {StatusCode::kCancelled, std::move(m)}; }
inline Status unimplemented(std::string m) { return {StatusCode::kUnimplemented, std::move(m)}; }
inline Status resource_exhausted(std::string m) { return {StatusCode::kResourceExhausted, std::move(m)}; }

// A value or the Status that explains why there is none.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : state_(std::move(value)) {}  // NOLINT(google-explicit-constructor)
  Result(Status status) : state_(std::move(status)) {  // NOLINT(google-explicit-constructor)
    assert(!std::get<Status>(state_).is_ok() && "a Result holding a Status must hold an error");
  }

  bool is_ok() const { return std::holds_alternative<T>(state_); }
  explicit operator bool() const { return is_ok(); }

  const Status& status() const {
    static const Status kOk;
    return is_ok() ? kOk : std::get<Status>(state_);
  }
  T& value() & { assert(is_ok()); return std::get<T>(state_); }
  const T& value() const& { assert(is_ok()); return std::get<T>(state_); }
  T&& value() && { assert(is_ok()); return std::get<T>(std::move(state_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  std::variant<T, Status> state_;
};

}  // namespace hvrun

// Returns the Status of `expr` from the enclosing function when it is an error.
#define HVRUN_RETURN_IF_ERROR(expr)                  \
  do {                                               \
    ::hvrun::Status hvrun_status_ = (expr);          \
    if (!hvrun_status_.is_ok()) return hvrun_status_; \
  } while (0)

#define HVRUN_STATUS_CONCAT_INNER(a, b) a##b
#define HVRUN_STATUS_CONCAT(a, b) HVRUN_STATUS_CONCAT_INNER(a, b)

// HVRUN_ASSIGN_OR_RETURN(auto x, make_x()); returns the error Status when make_x() fails.
#define HVRUN_ASSIGN_OR_RETURN(lhs, expr)                                              \
  auto HVRUN_STATUS_CONCAT(hvrun_result_, __LINE__) = (expr);                          \
  if (!HVRUN_STATUS_CONCAT(hvrun_result_, __LINE__).is_ok())                           \
    return HVRUN_STATUS_CONCAT(hvrun_result_, __LINE__).status();                      \
  lhs = std::move(HVRUN_STATUS_CONCAT(hvrun_result_, __LINE__)).value()

#endif  // HVRUN_STATUS_H_
