// EXPECT_QUENCH_ERROR(statement, {"part", ...}): the statement must throw quench::Error whose
// message contains every part, so error tests check that the message names the bad value and
// the allowed ones, not merely that something threw.
#pragma once

#include <gtest/gtest.h>

#include <initializer_list>
#include <string>

#include "quench/core/error.h"

namespace quench::testing_support {

inline ::testing::AssertionResult message_has_parts(const std::string& message,
                                                    std::initializer_list<const char*> parts) {
  for (const char* part : parts) {
    if (message.find(part) == std::string::npos) {
      return ::testing::AssertionFailure()
             << "message \"" << message << "\" lacks \"" << part << "\"";
    }
  }
  return ::testing::AssertionSuccess();
}

}  // namespace quench::testing_support

#define EXPECT_QUENCH_ERROR(statement, ...)                                                 \
  do {                                                                                      \
    try {                                                                                   \
      statement;                                                                            \
      ADD_FAILURE() << "expected quench::Error from " #statement;                           \
    } catch (const ::quench::Error& error) {                                                \
      EXPECT_TRUE(::quench::testing_support::message_has_parts(error.what(), __VA_ARGS__)); \
    }                                                                                       \
  } while (false)
