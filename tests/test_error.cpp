// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: Copyright idxplan contributors
#include "idxplan/error.hpp"

#include <stdexcept>
#include <string>
#include <type_traits>

#include <gtest/gtest.h>

namespace idxplan {
namespace {

static_assert(std::is_base_of_v<Error, ConfigError> && std::is_base_of_v<Error, StepError> &&
                  std::is_base_of_v<Error, DeviceError>,
              "every idxplan exception is an idxplan::Error");
static_assert(std::is_base_of_v<std::invalid_argument, ConfigError> &&
                  std::is_base_of_v<std::invalid_argument, StepError>,
              "bad configs and steps are invalid arguments");
static_assert(std::is_base_of_v<std::runtime_error, DeviceError> &&
                  !std::is_base_of_v<std::invalid_argument, DeviceError>,
              "a failed GPU call is a runtime error, not an invalid argument");

TEST(Error, EachIsCaughtAsAnIdxplanErrorWithItsMessage) {
  const auto message_of = [](auto thrown) {
    try {
      throw thrown;
    } catch (const Error& e) {
      return std::string(e.what());
    }
  };
  EXPECT_EQ(message_of(ConfigError("bad config")), "bad config");
  EXPECT_EQ(message_of(StepError("bad step")), "bad step");
  EXPECT_EQ(message_of(DeviceError("no device")), "no device");
}

TEST(Error, EachIsCaughtAsItsStandardException) {
  EXPECT_THROW(throw StepError("x"), std::invalid_argument);
  EXPECT_THROW(throw ConfigError("x"), std::logic_error);
  EXPECT_THROW(throw DeviceError("x"), std::runtime_error);
}

}  // namespace
}  // namespace idxplan
