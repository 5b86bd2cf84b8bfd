// Status and Result: how every uwarp API call reports failure. No exceptions are thrown.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

#include "uwarp/expected.h"

namespace uwarp {

enum class Errc : std::uint8_t {
  kOk = 0,
  kInvalidArgument,   // a parameter is out of range or inconsistent
  kInvalidState,      // the object is not in a state that allows the call
  kNoResources,       // a queue, table or limit is full
  kNotSupported,      // valid, but not implemented by uwarp (or impossible on iWARP)
  kNotFound,          // no such object, address or key
  kBusy,              // the object is still in use
  kConnectionRefused,
  kConnectionReset,
  kRejected,          // the peer rejected the connection (MPA reject)
  kTimedOut,
  kProtocolError,     // the peer violated iWARP; a Terminate was sent
  kIoError,           // a system call failed; the message says which
};

std::string_view to_string(Errc e);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Errc code, std::string message) : code_(code), message_(std::move(message)) {}
  static Status ok() { return {}; }
  bool is_ok() const { return code_ == Errc::kOk; }
  explicit operator bool() const { return is_ok(); }
  Errc code() const { return code_; }
  const std::string& message() const { return message_; }
  std::string to_string() const;

 private:
  Errc code_ = Errc::kOk;
  std::string message_;
};

template <typename T>
using Result = Expected<T, Status>;

inline Unexpected<Status> error(Errc code, std::string message) {
  return Unexpected<Status>{Status(code, std::move(message))};
}

}  // namespace uwarp
