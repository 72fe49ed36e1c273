// SPDX-License-Identifier: Apache-2.0
#include <gtest/gtest.h>

#include <audiokv/pool/shared_row_table.hpp>
#include <vector>

namespace {

using namespace audiokv;

constexpr std::int32_t kEvicted = -1;

TEST(SharedRowTable, SharedCellsReferenceOneRowWithMultiplicity) {
  shared_row_table t(8, 8, 0);
  t.append_row(row_precision::full);
  t.append_shared();
  t.append_shared();
  t.append_row(row_precision::full);
  EXPECT_EQ(t.num_cells(), 4);
  EXPECT_EQ(t.num_rows(row_precision::full), 2);
  EXPECT_EQ(t.multiplicity(row_precision::full)[0], 3);
  EXPECT_EQ(t.multiplicity(row_precision::full)[1], 1);
  EXPECT_EQ(t.cell_rows()[2].row, 0);
  EXPECT_EQ(t.cell_rows()[3].row, 1);
}

TEST(SharedRowTable, EvictingPartOfARunLowersMultiplicityAndAllOfItFreesTheRow) {
  shared_row_table t(8, 8, 0);
  t.append_row(row_precision::full);  // row 0: cells 0, 1, 2
  t.append_shared();
  t.append_shared();
  t.append_row(row_precision::full);  // row 1: cells 3, 4
  t.append_shared();
  t.append_row(row_precision::full);  // row 2: cell 5
  // Evict cell 1 (row 0 keeps two cells) and both cells of row 1.
  const std::vector<std::int32_t> move_to{0, kEvicted, 1, kEvicted, kEvicted, 2};
  row_transition tr;
  t.plan(move_to.data(), 6, nullptr, tr);
  EXPECT_EQ(tr.full_move, (std::vector<std::int32_t>{0, kEvicted, 1}));
  EXPECT_EQ(tr.full_after, 2);
  t.apply(move_to.data(), 6, tr);
  EXPECT_EQ(t.num_cells(), 3);
  EXPECT_EQ(t.num_rows(row_precision::full), 2);
  EXPECT_EQ(t.multiplicity(row_precision::full)[0], 2);
  EXPECT_EQ(t.multiplicity(row_precision::full)[1], 1);
  EXPECT_EQ(t.cell_rows()[0].row, 0);
  EXPECT_EQ(t.cell_rows()[1].row, 0);
  EXPECT_EQ(t.cell_rows()[2].row, 1);
}

TEST(SharedRowTable, RowsFollowTheirCellsPoolsBetweenArenas) {
  shared_row_table t(6, 3, 6);
  t.append_row(row_precision::int8);  // int8 row 0: cells 0, 1
  t.append_shared();
  t.append_row(row_precision::int8);  // int8 row 1: cell 2
  t.append_row(row_precision::full);  // full row 0: cell 3 (emergency)
  t.append_row(row_precision::int8);  // int8 row 2: cell 4
  // Cell 1 goes to the base pool (its whole row is promoted); cell 2 is evicted.
  const std::vector<std::int32_t> move_to{0, 1, kEvicted, 2, 3};
  const std::vector<pool_tier> tiers{pool_tier::buffer, pool_tier::base, pool_tier::emergency,
                                     pool_tier::buffer};
  row_transition tr;
  t.plan(move_to.data(), 5, tiers.data(), tr);
  EXPECT_TRUE(tr.demote_rows.empty());
  EXPECT_EQ(tr.promote_rows, (std::vector<std::int32_t>{0}));
  EXPECT_EQ(tr.int8_move, (std::vector<std::int32_t>{kEvicted, kEvicted, 0}));
  EXPECT_EQ(tr.full_kept, 1);
  t.apply(move_to.data(), 5, tr);
  ASSERT_EQ(t.num_cells(), 4);
  EXPECT_EQ(t.num_rows(row_precision::full), 2);
  EXPECT_EQ(t.num_rows(row_precision::int8), 1);
  // Cells 0 and 1 share the promoted row, now full row 1.
  EXPECT_EQ(t.cell_rows()[0].precision, row_precision::full);
  EXPECT_EQ(t.cell_rows()[0].row, 1);
  EXPECT_EQ(t.cell_rows()[1].row, 1);
  EXPECT_EQ(t.multiplicity(row_precision::full)[1], 2);
  EXPECT_EQ(t.cell_rows()[2].row, 0);
  EXPECT_EQ(t.cell_rows()[3].precision, row_precision::int8);
  EXPECT_EQ(t.cell_rows()[3].row, 0);
}

TEST(SharedRowTable, DemotedRowsAreStagedAfterTheInt8Rows) {
  shared_row_table t(4, 4, 4);
  t.append_row(row_precision::full);
  t.append_row(row_precision::int8);
  const std::vector<std::int32_t> move_to{0, 1};
  const std::vector<pool_tier> tiers{pool_tier::buffer, pool_tier::buffer};
  row_transition tr;
  t.plan(move_to.data(), 2, tiers.data(), tr);
  EXPECT_EQ(tr.demote_rows, (std::vector<std::int32_t>{0}));
  EXPECT_EQ(tr.int8_move, (std::vector<std::int32_t>{0, 1}));
  t.apply(move_to.data(), 2, tr);
  EXPECT_EQ(t.num_rows(row_precision::full), 0);
  EXPECT_EQ(t.cell_rows()[0].precision, row_precision::int8);
  EXPECT_EQ(t.cell_rows()[0].row, 1);
  EXPECT_EQ(t.cell_rows()[1].row, 0);
}

TEST(SharedRowTable, OverflowAndBadMapsThrowAndChangeNothing) {
  shared_row_table t(4, 1, 4);
  t.append_row(row_precision::int8);
  t.append_row(row_precision::int8);
  const std::vector<std::int32_t> move_to{0, 1};
  const std::vector<pool_tier> base{pool_tier::base, pool_tier::base};
  row_transition tr;
  try {
    t.plan(move_to.data(), 2, base.data(), tr);
    FAIL() << "two full rows fit a one-row arena";
  } catch (const error& e) {
    EXPECT_EQ(e.argument(), "tiers_after");
  }
  const std::vector<std::int32_t> unstable{1, 0};
  try {
    t.plan(unstable.data(), 2, nullptr, tr);
    FAIL() << "an unstable move map was accepted";
  } catch (const error& e) {
    EXPECT_EQ(e.argument(), "move_to[0]");
  }
  EXPECT_THROW(t.plan(move_to.data(), 3, nullptr, tr), error);
  EXPECT_EQ(t.num_cells(), 2);
  EXPECT_EQ(t.num_rows(row_precision::int8), 2);
  // A transition made before a later append is stale.
  t.plan(move_to.data(), 2, nullptr, tr);
  t.append_row(row_precision::int8);
  const std::vector<std::int32_t> three{0, 1, 2};
  EXPECT_THROW(t.apply(three.data(), 3, tr), error);
  EXPECT_THROW(shared_row_table(0, 1, 0), error);
  shared_row_table empty(2, 2, 0);
  EXPECT_THROW(empty.append_shared(), error);
}

}  // namespace
