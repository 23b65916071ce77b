// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: Copyright idxplan contributors
#pragma once

// Everything an engine needs on the host: the geometry, the planners and the
// CPU reference of the device buffers. The device side is in
// idxplan/device/, which needs hipcc or nvcc.

#include "idxplan/config.hpp"
#include "idxplan/error.hpp"
#include "idxplan/kernel_geometry.hpp"
#include "idxplan/plan/buffers.hpp"
#include "idxplan/plan/decode.hpp"
#include "idxplan/plan/gather.hpp"
#include "idxplan/plan/launch_check.hpp"
#include "idxplan/plan/launches.hpp"
#include "idxplan/plan/prefill.hpp"
#include "idxplan/plan/rows.hpp"
#include "idxplan/contracts/gluon_mxfp4.hpp"
#include "idxplan/plan/span.hpp"
#include "idxplan/plan/split.hpp"
#include "idxplan/plan/step.hpp"
#include "idxplan/plan/step_io.hpp"
#include "idxplan/plan/types.hpp"
#include "idxplan/presets.hpp"
#include "idxplan/version.hpp"
