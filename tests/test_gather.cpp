// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: Copyright idxplan contributors
#include "idxplan/plan/gather.hpp"

#include <vector>

#include <gtest/gtest.h>

namespace idxplan {
namespace {

using Launches = std::vector<GatherLaunch>;

PrefillPlan chunk(int32_t t0, int32_t t1, int32_t first_request, int32_t first_piece,
                  int32_t num_pieces, bool use_gather) {
  PrefillPlan p;
  p.token_start = t0;
  p.token_end = t1;
  p.first_request = first_request;
  p.num_reqs = num_pieces;
  p.first_piece = first_piece;
  p.num_pieces = num_pieces;
  p.use_gather = use_gather;
  return p;
}

Launches launches(const std::vector<PrefillPlan>& plans, const std::vector<RequestRows>& pieces,
                  int32_t gather_rows) {
  Launches out;
  plan_gather_launches(plans, pieces, gather_rows, out);
  return out;
}

TEST(PlanGatherLaunches, JoinsARequestCutAcrossChunks) {
  // One request cut into three chunks of 10 rows, joined, then cut at 12.
  const std::vector<PrefillPlan> plans{chunk(10, 20, 1, 0, 1, true), chunk(20, 30, 1, 1, 1, true),
                                       chunk(30, 35, 1, 2, 1, true)};
  const std::vector<RequestRows> pieces{{0, 10, 0}, {0, 10, 0}, {0, 5, 0}};
  EXPECT_EQ(launches(plans, pieces, 12), (Launches{{10, 22, 1}, {22, 34, 1}, {34, 35, 1}}));
  EXPECT_EQ(launches(plans, pieces, 100), (Launches{{10, 35, 1}}));
}

TEST(PlanGatherLaunches, KeepsTheRequestsOfOneChunkApart) {
  const std::vector<PrefillPlan> plans{chunk(4, 12, 2, 0, 2, true)};
  const std::vector<RequestRows> pieces{{0, 5, 0}, {5, 8, 1}};
  EXPECT_EQ(launches(plans, pieces, 100), (Launches{{4, 9, 2}, {9, 12, 3}}));
}

TEST(PlanGatherLaunches, AChunkThatDoesNotGatherEndsTheRun) {
  // The middle chunk is narrow; the request's later rows start a new run.
  const std::vector<PrefillPlan> plans{chunk(0, 10, 0, 0, 1, true), chunk(10, 20, 0, 1, 1, false),
                                       chunk(20, 30, 0, 2, 1, true)};
  const std::vector<RequestRows> pieces{{0, 10, 0}, {0, 10, 0}, {0, 10, 0}};
  EXPECT_EQ(launches(plans, pieces, 100), (Launches{{0, 10, 0}, {20, 30, 0}}));
}

TEST(PlanGatherLaunches, NothingGathersWithoutGatheringChunks) {
  const std::vector<PrefillPlan> plans{chunk(0, 10, 0, 0, 1, false)};
  const std::vector<RequestRows> pieces{{0, 10, 0}};
  EXPECT_TRUE(launches(plans, pieces, 100).empty());
}

TEST(PlanGatherLaunches, ARunCarriesOnlyAcrossTheTokenItEndedOn) {
  // Two chunks of the same request that do not touch (a dropped chunk
  // between them) stay two runs.
  const std::vector<PrefillPlan> plans{chunk(0, 10, 0, 0, 1, true), chunk(15, 20, 0, 1, 1, true)};
  const std::vector<RequestRows> pieces{{0, 10, 0}, {0, 5, 0}};
  EXPECT_EQ(launches(plans, pieces, 100), (Launches{{0, 10, 0}, {15, 20, 0}}));
}

}  // namespace
}  // namespace idxplan
