// The log's levels, their parsing from the environment, and the one-line format.
#include "base/log.h"

#include <gtest/gtest.h>

namespace uwarp::log {
namespace {

TEST(Log, ParsesLevels) {
  EXPECT_EQ(parse_level("error"), Level::kError);
  EXPECT_EQ(parse_level("warn"), Level::kWarn);
  EXPECT_EQ(parse_level("warning"), Level::kWarn);
  EXPECT_EQ(parse_level("info"), Level::kInfo);
  EXPECT_EQ(parse_level("debug"), Level::kDebug);
  EXPECT_EQ(parse_level("off"), Level::kOff);
  EXPECT_EQ(parse_level(""), Level::kOff);
  EXPECT_EQ(parse_level("INFO"), std::nullopt);
  EXPECT_EQ(parse_level("3"), std::nullopt);
  for (Level l : {Level::kOff, Level::kError, Level::kWarn, Level::kInfo, Level::kDebug}) {
    EXPECT_EQ(parse_level(to_string(l)), l);
  }
}

TEST(Log, LevelFromTheEnvironment) {
  EXPECT_EQ(level_from_environment(nullptr, nullptr, nullptr), Level::kOff);
  EXPECT_EQ(level_from_environment("info", nullptr, nullptr), Level::kInfo);
  EXPECT_EQ(level_from_environment("bogus", nullptr, nullptr), Level::kWarn);
  // The older switches mean debug, unless UWARP_LOG says otherwise.
  EXPECT_EQ(level_from_environment(nullptr, "1", nullptr), Level::kDebug);
  EXPECT_EQ(level_from_environment(nullptr, nullptr, "yes"), Level::kDebug);
  EXPECT_EQ(level_from_environment(nullptr, "0", ""), Level::kOff);
  EXPECT_EQ(level_from_environment("error", "1", "1"), Level::kError);
  EXPECT_EQ(level_from_environment("off", "1", nullptr), Level::kOff);
}

TEST(Log, FormatsOneLine) {
  EXPECT_EQ(
      format_line(Level::kInfo, "cm", "QP 3: established (local 127.0.0.1:1, peer 127.0.0.1:2)"),
      "uwarp: info: cm: QP 3: established (local 127.0.0.1:1, peer 127.0.0.1:2)\n");
  EXPECT_EQ(format_line(Level::kError, "pcap", "x"), "uwarp: error: pcap: x\n");
}

TEST(Log, ThresholdGatesLevels) {
  const Level saved = threshold();
  set_threshold(Level::kWarn);
  EXPECT_TRUE(enabled(Level::kError));
  EXPECT_TRUE(enabled(Level::kWarn));
  EXPECT_FALSE(enabled(Level::kInfo));
  EXPECT_FALSE(enabled(Level::kDebug));
  set_threshold(Level::kOff);
  EXPECT_FALSE(enabled(Level::kError));
  EXPECT_FALSE(enabled(Level::kOff));
  set_threshold(saved);
}

TEST(Log, EmitWritesTheLineToStderr) {
  ::testing::internal::CaptureStderr();
  emit(Level::kWarn, "qp", "QP 7: received Terminate");
  EXPECT_EQ(::testing::internal::GetCapturedStderr(),
            "uwarp: warn: qp: QP 7: received Terminate\n");
}

}  // namespace
}  // namespace uwarp::log
