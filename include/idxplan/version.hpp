// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: Copyright idxplan contributors
#pragma once

#define IDXPLAN_VERSION_MAJOR 0
#define IDXPLAN_VERSION_MINOR 1
#define IDXPLAN_VERSION_PATCH 0

namespace idxplan {

inline constexpr int kVersionMajor = IDXPLAN_VERSION_MAJOR;
inline constexpr int kVersionMinor = IDXPLAN_VERSION_MINOR;
inline constexpr int kVersionPatch = IDXPLAN_VERSION_PATCH;

}  // namespace idxplan
