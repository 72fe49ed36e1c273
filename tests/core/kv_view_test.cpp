// SPDX-License-Identifier: Apache-2.0
#include <gtest/gtest.h>

#include <audiokv/core/kv_view.hpp>
#include <vector>

namespace {

using namespace audiokv;

TEST(KvView, NhdAndHndOffsets) {
  const kv_extents e{4, 2, 3};
  EXPECT_EQ((layout_nhd{e}(1, 1, 2)), (1 * 2 + 1) * 3 + 2);
  EXPECT_EQ((layout_hnd{e}(1, 1, 2)), (1 * 4 + 1) * 3 + 2);
  EXPECT_EQ(layout_nhd{e}.required_span_size(), 24);
  EXPECT_EQ(layout_hnd{e}.cell_stride(), 3);
}

TEST(KvView, StridedCoversTransposedV) {
  // llama.cpp's transposed V: [head_dim, num_cells] per head -> dim stride = num_cells.
  const kv_extents e{5, 1, 4};
  const layout_strided v_trans{e, /*cell*/ 1, /*head*/ 20, /*dim*/ 5};
  EXPECT_EQ(v_trans(2, 0, 3), 2 + 3 * 5);
  EXPECT_EQ(v_trans.required_span_size(), 20);
}

TEST(KvView, ReadsAndWritesThroughLayout) {
  std::vector<int> data(24, 0);
  kv_view<int, layout_hnd> view(data.data(), layout_hnd{{4, 2, 3}});
  view(3, 1, 2) = 7;
  EXPECT_EQ(data[(1 * 4 + 3) * 3 + 2], 7);
  kv_view<const int, layout_hnd> read_only = view;
  EXPECT_EQ(read_only(3, 1, 2), 7);
  EXPECT_EQ(read_only.row(3, 1), data.data() + (1 * 4 + 3) * 3);
}

}  // namespace
