// verbs::status_for_remote_terminate and describe_remote_terminate: the completion status a
// received Terminate gives the work request it failed, read in the RFC 5040 layout and in siw's
// swapped one (docs/interop.md), and the event text.
#include "verbs/remote_terminate.h"

#include <gtest/gtest.h>

#include <cstdint>

namespace uwarp::verbs {
namespace {

// A control word: layer and etype in the first byte, ecode in the second, flags in the third.
constexpr std::uint32_t word(unsigned first, unsigned ecode, unsigned flags = 0) {
  return (first << 24) | (ecode << 16) | (flags << 8);
}

TEST(verbs_remote_terminate, ProtectionErrorsOfRdmapAndDdpAreRemoteAccessErrors) {
  for (unsigned ecode : {0x00u, 0x01u, 0x02u, 0x03u, 0x04u, 0x09u}) {
    EXPECT_EQ(status_for_remote_terminate(word(0x01, ecode)), WcStatus::kRemoteAccessError)
        << "RDMAP/1/" << ecode;
    EXPECT_EQ(status_for_remote_terminate(word(0x11, ecode)), WcStatus::kRemoteAccessError)
        << "DDP/1/" << ecode;
  }
}

TEST(verbs_remote_terminate, OnlyAnRdmapVersionOrOpcodeErrorIsAnInvalidRequest) {
  EXPECT_EQ(status_for_remote_terminate(word(0x02, 0x05)), WcStatus::kRemoteInvalidRequestError);
  EXPECT_EQ(status_for_remote_terminate(word(0x02, 0x06)), WcStatus::kRemoteInvalidRequestError);
  for (unsigned ecode : {0x00u, 0x07u, 0x09u, 0xFFu}) {
    EXPECT_EQ(status_for_remote_terminate(word(0x02, ecode)), WcStatus::kRemoteOperationError)
        << "RDMAP/2/" << ecode;
  }
}

TEST(verbs_remote_terminate, EveryDdpUntaggedErrorIsAnInvalidRequest) {
  for (unsigned ecode : {0x00u, 0x01u, 0x02u, 0x03u, 0x04u, 0x05u, 0x06u}) {
    EXPECT_EQ(status_for_remote_terminate(word(0x12, ecode)), WcStatus::kRemoteInvalidRequestError)
        << "DDP/2/" << ecode;
  }
}

TEST(verbs_remote_terminate, CatastrophicAndLlpErrorsAreOperationErrors) {
  EXPECT_EQ(status_for_remote_terminate(word(0x00, 0x00)), WcStatus::kRemoteOperationError);
  EXPECT_EQ(status_for_remote_terminate(word(0x10, 0x00)), WcStatus::kRemoteOperationError);
  EXPECT_EQ(status_for_remote_terminate(word(0x20, 0x01)), WcStatus::kRemoteOperationError);
  EXPECT_EQ(status_for_remote_terminate(word(0x20, 0x02)), WcStatus::kRemoteOperationError);
}

TEST(verbs_remote_terminate, AWordValidOnlySwappedIsReadSwapped) {
  EXPECT_EQ(status_for_remote_terminate(word(0x10, 0x00)), WcStatus::kRemoteOperationError)
      << "valid as written: read as written";
  EXPECT_EQ(status_for_remote_terminate(word(0x21, 0x00)), WcStatus::kRemoteInvalidRequestError)
      << "LLP/1 is no pair; DDP/2 is";
  EXPECT_EQ(status_for_remote_terminate(word(0x31, 0x00)), WcStatus::kRemoteOperationError)
      << "layer 3 does not exist; swapped, etype 3 does not either";
  EXPECT_EQ(status_for_remote_terminate(word(0xF1, 0x00)), WcStatus::kRemoteOperationError);
}

TEST(verbs_remote_terminate, SiwFlagBitsSelectTheSwappedReadingEvenOfAValidWord) {
  // 0x10 is DDP/0 as written, RDMAP/1 as siw means it; siw's M, D, R sit in bits 0x07.
  for (unsigned flags : {0x01u, 0x02u, 0x04u, 0x07u}) {
    EXPECT_EQ(status_for_remote_terminate(word(0x10, 0x01, flags)), WcStatus::kRemoteAccessError)
        << "flags " << flags;
  }
  // The RFC's flags (0xE0) set, or both kinds: read as written.
  EXPECT_EQ(status_for_remote_terminate(word(0x10, 0x01, 0x80)), WcStatus::kRemoteOperationError);
  EXPECT_EQ(status_for_remote_terminate(word(0x10, 0x01, 0x87)), WcStatus::kRemoteOperationError);
  // siw's flags swap a word whose swapped reading is a pair (RDMAP/2 becomes LLP/0)...
  EXPECT_EQ(status_for_remote_terminate(word(0x02, 0x06, 0x07)), WcStatus::kRemoteOperationError);
  // ...and leave one whose swapped reading is none (LLP/1) as written (DDP/2).
  EXPECT_EQ(status_for_remote_terminate(word(0x12, 0x00, 0x07)),
            WcStatus::kRemoteInvalidRequestError);
}

TEST(verbs_remote_terminate, TheEventTextNamesTheControlWordAndItsReading) {
  wire::TerminateMessage m;
  m.code = wire::term::kDdpTaggedBaseBounds;
  m.raw_control = 0x11010000;
  EXPECT_EQ(describe_remote_terminate(m),
            "peer sent Terminate, control word 0x11010000 (DDP/1/0x01)");
  m.has_control = false;
  EXPECT_EQ(describe_remote_terminate(m), "peer sent Terminate without a control word");
}

}  // namespace
}  // namespace uwarp::verbs
