// env_switch: an allowed value comes back as is, unset and empty give the first allowed value (the
// default), and
// anything else is an error that names the switch, the value and the allowed values.
#include "quench/core/env_switch.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "quench/core/error.h"

namespace quench {
namespace {

constexpr const char* kSwitch = "QUENCH_TEST_ENV_SWITCH";

TEST(EnvSwitch, UnsetAndEmptyAreTheFirstAllowedValue) {
  unsetenv(kSwitch);
  EXPECT_EQ(env_switch(kSwitch, {"a", "b"}), "a");
  EXPECT_EQ(env_switch(kSwitch, {"b", "a"}), "b");
  setenv(kSwitch, "", 1);
  EXPECT_EQ(env_switch(kSwitch, {"a", "b"}), "a");
  unsetenv(kSwitch);
}

TEST(EnvSwitch, AllowedValuesComeBack) {
  setenv(kSwitch, "b", 1);
  EXPECT_EQ(env_switch(kSwitch, {"a", "b"}), "b");
  unsetenv(kSwitch);
}

TEST(EnvSwitch, OtherValuesNameTheSwitchAndTheAllowedOnes) {
  setenv(kSwitch, "B", 1);
  try {
    env_switch(kSwitch, {"a", "b"});
    FAIL() << "expected quench::Error";
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find(kSwitch), std::string::npos) << message;
    EXPECT_NE(message.find("'B'"), std::string::npos) << message;
    EXPECT_NE(message.find("allowed: a, b"), std::string::npos) << message;
  }
  unsetenv(kSwitch);
}

TEST(EnvSwitchInt, WholeNumbersInRangeComeBackAndUnsetIsTheDefault) {
  unsetenv(kSwitch);
  EXPECT_EQ(env_switch_int(kSwitch, 1, 64, 0), 0);
  setenv(kSwitch, "", 1);
  EXPECT_EQ(env_switch_int(kSwitch, 1, 64, -7), -7);
  setenv(kSwitch, "64", 1);
  EXPECT_EQ(env_switch_int(kSwitch, 1, 64, 0), 64);
  unsetenv(kSwitch);
}

TEST(EnvSwitchInt, TrailingCharactersAndOutOfRangeValuesNameTheRange) {
  for (const char* bad : {"2x", "0", "65", "-1", " 3", "abc"}) {
    setenv(kSwitch, bad, 1);
    try {
      env_switch_int(kSwitch, 1, 64, 0);
      ADD_FAILURE() << "expected quench::Error for '" << bad << "'";
    } catch (const Error& e) {
      const std::string message = e.what();
      EXPECT_NE(message.find(kSwitch), std::string::npos) << message;
      EXPECT_NE(message.find(std::string("'") + bad + "'"), std::string::npos) << message;
      EXPECT_NE(message.find("allowed: 1..64"), std::string::npos) << message;
    }
  }
  unsetenv(kSwitch);
}

}  // namespace
}  // namespace quench
