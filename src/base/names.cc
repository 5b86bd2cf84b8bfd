// Human-readable names of the public vocabulary types (include/uwarp/types.h, status.h).
#include "uwarp/status.h"
#include "uwarp/types.h"

namespace uwarp {

std::string_view to_string(Errc e) {
  switch (e) {
    case Errc::kOk: return "ok";
    case Errc::kInvalidArgument: return "invalid argument";
    case Errc::kInvalidState: return "invalid state";
    case Errc::kNoResources: return "no resources";
    case Errc::kNotSupported: return "not supported";
    case Errc::kNotFound: return "not found";
    case Errc::kBusy: return "busy";
    case Errc::kConnectionRefused: return "connection refused";
    case Errc::kConnectionReset: return "connection reset";
    case Errc::kRejected: return "rejected";
    case Errc::kTimedOut: return "timed out";
    case Errc::kProtocolError: return "protocol error";
    case Errc::kIoError: return "I/O error";
  }
  return "unknown error";
}

std::string Status::to_string() const {
  if (is_ok()) return "ok";
  return std::string(uwarp::to_string(code_)) + ": " + message_;
}

std::string_view to_string(WcStatus s) {
  switch (s) {
    case WcStatus::kSuccess: return "success";
    case WcStatus::kLocalLengthError: return "local length error";
    case WcStatus::kLocalQpOperationError: return "local QP operation error";
    case WcStatus::kLocalProtectionError: return "local protection error";
    case WcStatus::kWrFlushError: return "work request flushed";
    case WcStatus::kRemoteInvalidRequestError: return "remote invalid request error";
    case WcStatus::kRemoteAccessError: return "remote access error";
    case WcStatus::kRemoteOperationError: return "remote operation error";
    case WcStatus::kFatalError: return "fatal error";
    case WcStatus::kMemoryWindowBindError: return "memory window bind error";
  }
  return "unknown status";
}

std::string_view to_string(QpState s) {
  switch (s) {
    case QpState::kReset: return "RESET";
    case QpState::kInit: return "INIT";
    case QpState::kRtr: return "RTR";
    case QpState::kRts: return "RTS";
    case QpState::kSqd: return "SQD";
    case QpState::kSqe: return "SQE";
    case QpState::kError: return "ERROR";
  }
  return "?";
}

std::string_view to_string(AsyncEventType t) {
  switch (t) {
    case AsyncEventType::kQpFatal: return "QP fatal";
    case AsyncEventType::kQpAccessError: return "QP access error";
    case AsyncEventType::kQpLastWqeReached: return "QP last WQE reached";
    case AsyncEventType::kCqError: return "CQ error";
    case AsyncEventType::kSrqLimitReached: return "SRQ limit reached";
  }
  return "?";
}

std::string_view to_string(CmEventType t) {
  switch (t) {
    case CmEventType::kConnectRequest: return "CONNECT_REQUEST";
    case CmEventType::kEstablished: return "ESTABLISHED";
    case CmEventType::kRejected: return "REJECTED";
    case CmEventType::kConnectError: return "CONNECT_ERROR";
    case CmEventType::kDisconnected: return "DISCONNECTED";
  }
  return "?";
}

}  // namespace uwarp
