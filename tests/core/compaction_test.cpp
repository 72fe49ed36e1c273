// SPDX-License-Identifier: Apache-2.0
#include <gtest/gtest.h>

#include <audiokv/core/compaction.hpp>
#include <vector>

namespace {

TEST(Compaction, TargetIsExclusivePrefixSumOfKept) {
  const std::vector<bool> keep = {true, false, false, true, true, false, true};
  const std::vector<int> expected = {0, -1, -1, 1, 2, -1, 3};
  int kept = 0;
  for (size_t i = 0; i < keep.size(); ++i) {
    EXPECT_EQ(audiokv::core::compaction_target(keep[i], kept), expected[i]);
    kept += keep[i];
  }
}

TEST(Compaction, MoveRowCopiesBytesExactly) {
  std::vector<unsigned char> rows = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  audiokv::core::move_row(rows.data(), 3, 3, 2, 0);
  EXPECT_EQ(rows, (std::vector<unsigned char>{7, 8, 9, 4, 5, 6, 7, 8, 9}));
  audiokv::core::move_row(rows.data(), 3, 3, 1, 1);  // same slot: untouched
  EXPECT_EQ(rows[3], 4);
}

}  // namespace
