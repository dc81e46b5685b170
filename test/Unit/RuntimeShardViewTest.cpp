//===- RuntimeShardViewTest.cpp - Shard blocks across views ---------------===//
//
// copyBlockBetweenViews (runtime/ParamInit.h): a checkpoint's blocks in one
// view of a logical tensor ([n] or [K, n / K] for a parameter in pieces)
// assembled into another plan's blocks.
//
//===----------------------------------------------------------------------===//

#include "runtime/ParamInit.h"

#include "gtest/gtest.h"

#include <numeric>

using namespace autopar;

namespace {

/// The logical tensor [4, 12]: element (i, j) is i * 12 + j.
std::vector<uint8_t> logical() {
  std::vector<uint8_t> V(48);
  std::iota(V.begin(), V.end(), 0);
  return V;
}

TEST(ShardViewTest, PiecesBlockIntoTheWholeView) {
  // Rank 1 of 2 holds the second half of each of the 3 pieces of the
  // columns: in the view [4, 3, 4], the block [4, 3, 2] at [0, 0, 2].
  std::vector<uint8_t> Whole = logical();
  std::vector<uint8_t> Shard(24);
  copyBlock(Whole, {4, 3, 4}, {0, 0, 0}, Shard, {4, 3, 2}, {0, 0, 2}, 1);
  EXPECT_EQ(Shard[0], 2);
  EXPECT_EQ(Shard[1], 3);
  EXPECT_EQ(Shard[2], 6);  // the second piece's half
  EXPECT_EQ(Shard[6], 14); // row 1
  // Back into a one-rank plan's view [4, 12]: the shard covers columns
  // 2-3, 6-7 and 10-11.
  std::vector<uint8_t> Out(48, 255);
  ASSERT_TRUE(copyBlockBetweenViews(Shard, {4, 3, 2}, {0, 0, 2}, {4, 3, 4}, Out,
                                    {4, 12}, {0, 0}, {4, 12}, 1));
  for (int I = 0; I != 4; ++I)
    for (int J = 0; J != 12; ++J) {
      bool Covered = J % 4 >= 2;
      EXPECT_EQ(Out[I * 12 + J], Covered ? I * 12 + J : 255)
          << "element (" << I << ", " << J << ")";
    }
}

TEST(ShardViewTest, ContiguousBlocksIntoPieces) {
  // A two-rank plan without pieces (rows 2-3 of [4, 12]) read by a plan in
  // pieces: the target is rank 0's block of every piece, [4, 3, 2] at 0.
  std::vector<uint8_t> Whole = logical();
  std::vector<uint8_t> Rows(Whole.begin() + 24, Whole.end());
  std::vector<uint8_t> Out(24, 255);
  ASSERT_TRUE(copyBlockBetweenViews(Rows, {2, 12}, {2, 0}, {4, 12}, Out,
                                    {4, 3, 2}, {0, 0, 0}, {4, 3, 4}, 1));
  EXPECT_EQ(Out[0], 255);        // row 0: not in the source block
  EXPECT_EQ(Out[2 * 6 + 0], 24); // row 2, piece 0, column 0
  EXPECT_EQ(Out[2 * 6 + 2], 28); // row 2, piece 1, column 4
  EXPECT_EQ(Out[3 * 6 + 5], 45); // row 3, piece 2, column 9
}

TEST(ShardViewTest, BlocksThatAreNoBoxInTheOtherViewFail) {
  // Columns 2-7 of [4, 12] cross a piece boundary of [4, 3, 4] without
  // covering whole pieces.
  std::vector<uint8_t> From(24), To(48);
  EXPECT_FALSE(copyBlockBetweenViews(From, {4, 6}, {0, 2}, {4, 12}, To,
                                     {4, 3, 4}, {0, 0, 0}, {4, 3, 4}, 1));
  // Different element counts have no common view.
  EXPECT_FALSE(copyBlockBetweenViews(From, {4, 6}, {0, 0}, {4, 12}, To, {4, 10},
                                     {0, 0}, {4, 10}, 1));
}

} // namespace
