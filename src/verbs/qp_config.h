// What a queue pair is created with: its protection domain, completion queues, receive queue
// and limits. The objects it names outlive the QP (the API layer holds them while it exists).
#pragma once

#include "uwarp/types.h"
#include "verbs/completion_queue.h"
#include "verbs/protection_domain.h"
#include "verbs/receive_queue.h"

namespace uwarp::verbs {

struct QpConfig {
  ProtectionDomain* pd = nullptr;
  CompletionQueue* send_cq = nullptr;
  CompletionQueue* recv_cq = nullptr;
  ReceiveQueue* srq = nullptr;  // shared receive queue, or null for the QP's own
  QpCaps caps;
  bool signal_all = false;
  void* user_context = nullptr;
};

}  // namespace uwarp::verbs
