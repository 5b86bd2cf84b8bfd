// The QP transitions a modify may ask for (verbs/qp_state.h).
#include <gtest/gtest.h>

#include "verbs/qp_state.h"

namespace uwarp::verbs {
namespace {

constexpr QpState kAll[] = {QpState::kReset, QpState::kInit, QpState::kRtr, QpState::kRts,
                            QpState::kSqd,   QpState::kSqe,  QpState::kError};

TEST(QpState, ErrorAndResetAreReachableFromEveryState) {
  for (QpState from : kAll) {
    EXPECT_TRUE(check_qp_transition(from, QpState::kError)) << to_string(from);
    EXPECT_TRUE(check_qp_transition(from, QpState::kReset)) << to_string(from);
  }
}

TEST(QpState, TheConnectionPathIsResetInitRtrRts) {
  EXPECT_TRUE(check_qp_transition(QpState::kReset, QpState::kInit));
  EXPECT_TRUE(check_qp_transition(QpState::kInit, QpState::kRtr));
  EXPECT_TRUE(check_qp_transition(QpState::kRtr, QpState::kRts));
  EXPECT_TRUE(check_qp_transition(QpState::kRts, QpState::kSqd));
  EXPECT_TRUE(check_qp_transition(QpState::kSqd, QpState::kRts));
}

TEST(QpState, SkippingAStepIsRefusedWithBothStatesNamed) {
  const Status s = check_qp_transition(QpState::kInit, QpState::kRts);
  EXPECT_EQ(s.code(), Errc::kInvalidState);
  EXPECT_NE(s.to_string().find("INIT"), std::string::npos) << s.to_string();
  EXPECT_FALSE(check_qp_transition(QpState::kReset, QpState::kRts));
  EXPECT_FALSE(check_qp_transition(QpState::kError, QpState::kRts));
  EXPECT_FALSE(check_qp_transition(QpState::kRts, QpState::kInit));
}

}  // namespace
}  // namespace uwarp::verbs
