// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: Copyright idxplan contributors
#pragma once

#include <stdexcept>
#include <string>

namespace idxplan {

// Every exception idxplan throws derives from Error, so an engine can catch
// the library's failures in one place and tell them from its own. Each is
// also the standard exception it is: a bad config or step an invalid
// argument, a failed GPU call a runtime error.
class Error {
 public:
  virtual ~Error() = default;
  virtual const char* what() const noexcept = 0;
};

// An IndexerConfig that cannot make a Geometry (raised once, at engine start).
class ConfigError : public std::invalid_argument, public Error {
 public:
  explicit ConfigError(const std::string& message) : std::invalid_argument(message) {}
  const char* what() const noexcept override { return std::invalid_argument::what(); }
};

// A step, or step buffers, that cannot be planned or filled: the message names
// the request or buffer and the values.
class StepError : public std::invalid_argument, public Error {
 public:
  explicit StepError(const std::string& message) : std::invalid_argument(message) {}
  const char* what() const noexcept override { return std::invalid_argument::what(); }
};

// A failed GPU runtime call: the message carries the runtime's error name
// and string (device/runtime.hpp raises it).
class DeviceError : public std::runtime_error, public Error {
 public:
  explicit DeviceError(const std::string& message) : std::runtime_error(message) {}
  const char* what() const noexcept override { return std::runtime_error::what(); }
};

}  // namespace idxplan
