// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: Copyright idxplan contributors
#pragma once

#include <stdexcept>
#include <string>

namespace idxplan {

// Every exception idxplan throws derives from Error, so an engine can catch
// the library's failures in one place and tell them from its own.
class Error : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

// An IndexerConfig that cannot make a Geometry (raised once, at engine start).
class ConfigError : public Error {
 public:
  using Error::Error;
};

// A step whose host inputs are malformed: the message names the request.
class StepError : public Error {
 public:
  using Error::Error;
};

// A failed GPU runtime call: the message carries the runtime's error name
// and string (device/runtime.hpp raises it).
class DeviceError : public Error {
 public:
  using Error::Error;
};

}  // namespace idxplan
