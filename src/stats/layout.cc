#include "stats/layout.h"

#include <arpa/inet.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>

#include "uwarp/types.h"

namespace uwarp::stats {

static_assert(static_cast<std::size_t>(Counter::kPostedSend) +
                  static_cast<std::size_t>(WrOpcode::kAtomicSwap) ==
              static_cast<std::size_t>(Counter::kPostedSwap));
static_assert(static_cast<std::size_t>(Counter::kCompletedSuccess) +
                  static_cast<std::size_t>(WcStatus::kMemoryWindowBindError) ==
              static_cast<std::size_t>(Counter::kCompletedMemoryWindowBindError));

std::string_view counter_name(Counter c) {
  switch (c) {
    case Counter::kTxBytes:
      return "tx_bytes";
    case Counter::kRxBytes:
      return "rx_bytes";
    case Counter::kTxFpdus:
      return "tx_fpdus";
    case Counter::kRxFpdus:
      return "rx_fpdus";
    case Counter::kPostedSend:
      return "posted_send";
    case Counter::kPostedSendInvalidate:
      return "posted_send_invalidate";
    case Counter::kPostedWrite:
      return "posted_write";
    case Counter::kPostedRead:
      return "posted_read";
    case Counter::kPostedBindWindow:
      return "posted_bind_window";
    case Counter::kPostedLocalInvalidate:
      return "posted_local_invalidate";
    case Counter::kPostedRegisterFastRegion:
      return "posted_register_fast_region";
    case Counter::kPostedWriteImm:
      return "posted_write_imm";
    case Counter::kPostedFetchAdd:
      return "posted_fetch_add";
    case Counter::kPostedCompareSwap:
      return "posted_compare_swap";
    case Counter::kPostedSwap:
      return "posted_swap";
    case Counter::kPostedSolicited:
      return "posted_solicited";
    case Counter::kPostedRecv:
      return "posted_recv";
    case Counter::kCompletedSuccess:
      return "completed_success";
    case Counter::kCompletedLocalLengthError:
      return "completed_local_length_error";
    case Counter::kCompletedLocalQpOperationError:
      return "completed_local_qp_operation_error";
    case Counter::kCompletedLocalProtectionError:
      return "completed_local_protection_error";
    case Counter::kCompletedWrFlushError:
      return "completed_wr_flush_error";
    case Counter::kCompletedRemoteInvalidRequestError:
      return "completed_remote_invalid_request_error";
    case Counter::kCompletedRemoteAccessError:
      return "completed_remote_access_error";
    case Counter::kCompletedRemoteOperationError:
      return "completed_remote_operation_error";
    case Counter::kCompletedFatalError:
      return "completed_fatal_error";
    case Counter::kCompletedMemoryWindowBindError:
      return "completed_memory_window_bind_error";
    case Counter::kTerminatesSent:
      return "terminates_sent";
    case Counter::kTerminatesReceived:
      return "terminates_received";
    case Counter::kCrcErrors:
      return "crc_errors";
    case Counter::kSendStalls:
      return "send_stalls";
    case Counter::kTcpRetransmits:
      return "tcp_retransmits";
    case Counter::kPostsLeftForPoll:
      return "posts_left_for_poll";
    case Counter::kBatchDeadlines:
      return "batch_deadlines";
    case Counter::kCount:
      break;
  }
  return "unknown";
}

bool counter_is_rate(Counter c) {
  return c <= Counter::kCompletedMemoryWindowBindError;
}

std::vector<std::string> directories() {
  std::vector<std::string> dirs;
  if (const char* xdg = std::getenv("XDG_RUNTIME_DIR"); xdg != nullptr && xdg[0] == '/')
    dirs.push_back(std::string(xdg) + "/uwarp");
  dirs.push_back("/dev/shm/uwarp-" + std::to_string(::getuid()));
  return dirs;
}

std::string endpoint(std::uint8_t family, const std::uint8_t* addr, std::uint16_t port) {
  char buf[INET6_ADDRSTRLEN] = {};
  if (family == AF_INET && ::inet_ntop(AF_INET, addr, buf, sizeof(buf)) != nullptr)
    return std::string(buf) + ":" + std::to_string(port);
  if (family == AF_INET6 && ::inet_ntop(AF_INET6, addr, buf, sizeof(buf)) != nullptr)
    return "[" + std::string(buf) + "]:" + std::to_string(port);
  return "";
}

}  // namespace uwarp::stats
