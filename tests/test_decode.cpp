// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: Copyright idxplan contributors
#include "idxplan/plan/decode.hpp"

#include <vector>

#include <gtest/gtest.h>

namespace idxplan {
namespace {

TEST(NativeDecode, AUniformStepRunsAsSequences) {
  const std::vector<int32_t> qsl{0, 2, 4, 6};
  EXPECT_EQ(native_decode(qsl, 3, 6, 2), (NativeDecode{2, 3}));
}

TEST(NativeDecode, TrailingEmptyRequestsAreCudagraphPadding) {
  // Two real requests and two padding ones, whose rows are graph padding.
  const std::vector<int32_t> qsl{0, 2, 4, 4, 4};
  EXPECT_EQ(native_decode(qsl, 4, 8, 2), (NativeDecode{2, 4}));
}

TEST(NativeDecode, ARaggedStepIsFlattened) {
  const std::vector<int32_t> qsl{0, 2, 3, 5};
  EXPECT_FALSE(native_decode(qsl, 3, 5, 2).present());
}

TEST(NativeDecode, AnEmptyRequestBeforeAFullOneIsNotPadding) {
  const std::vector<int32_t> qsl{0, 2, 2, 4};
  EXPECT_FALSE(native_decode(qsl, 3, 6, 2).present());
}

TEST(NativeDecode, RowsMustBeNextNPerRequest) {
  // Padding tokens past the requests' rows break the shape.
  const std::vector<int32_t> qsl{0, 2, 4};
  EXPECT_FALSE(native_decode(qsl, 2, 6, 2).present());
}

TEST(NativeDecode, OneRowSequencesAreFlattened) {
  const std::vector<int32_t> qsl{0, 1, 2};
  EXPECT_FALSE(native_decode(qsl, 2, 2, 1).present());
}

TEST(RowsAreRequests, OneRowARequestThenEmptyOnes) {
  EXPECT_TRUE(rows_are_requests(std::vector<int32_t>{0, 1, 2, 3}, 3, 3));
  // Two padding requests after two real ones; padded rows up to the requests.
  EXPECT_TRUE(rows_are_requests(std::vector<int32_t>{0, 1, 2, 2, 2}, 4, 4));
  EXPECT_TRUE(rows_are_requests(std::vector<int32_t>{0, 1, 2, 2, 2}, 4, 2));
}

TEST(RowsAreRequests, NotWhenARowIsAnotherRequests) {
  // A two-row request: row 1 is request 0's.
  EXPECT_FALSE(rows_are_requests(std::vector<int32_t>{0, 2, 3}, 2, 3));
  // An empty request before a full one: row 1 is request 2's.
  EXPECT_FALSE(rows_are_requests(std::vector<int32_t>{0, 1, 1, 2}, 3, 2));
  // Padded rows past the requests: row 3 has no request.
  EXPECT_FALSE(rows_are_requests(std::vector<int32_t>{0, 1, 2, 3}, 3, 4));
}

}  // namespace
}  // namespace idxplan
