// SPDX-License-Identifier: Apache-2.0
/// @file
/// The positions of a cache's cells and, once its frame metadata is shared, the references
/// they hold in a frame_table.
#pragma once

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "../../types/frame.hpp"
#include "../../types/frame_table.hpp"

namespace audiokv::policy::detail {

/// @brief The positions of a cache's cells and, once shared, the references they hold in a
/// frame_table: released when the holder is destroyed, retained once more by a copy (another
/// cache with the same cells), handed over by a move.
class cell_positions {
 public:
  cell_positions() = default;
  cell_positions(const cell_positions& other)
      : table_(other.table_), pos_(other.pos_), held_(other.held_) {
    for (std::int32_t j = 0; j < held_; ++j) table_->retain(pos_[j]);
  }
  cell_positions(cell_positions&& other) noexcept
      : table_(std::move(other.table_)), pos_(std::move(other.pos_)), held_(other.held_) {
    other.held_ = 0;
  }
  cell_positions& operator=(const cell_positions& other) {
    if (this != &other) {
      cell_positions copy(other);
      *this = std::move(copy);
    }
    return *this;
  }
  cell_positions& operator=(cell_positions&& other) noexcept {
    if (this != &other) {
      release_all();
      table_ = std::move(other.table_);
      pos_ = std::move(other.pos_);
      held_ = other.held_;
      other.held_ = 0;
    }
    return *this;
  }
  ~cell_positions() { release_all(); }

  /// Releases every held position (the cells are gone).
  void release_all() noexcept {
    for (std::int32_t j = 0; j < held_; ++j) table_->release(pos_[j]);
    held_ = 0;
  }

  std::shared_ptr<frame_table> table_;  // null: the cache holds its metadata itself
  std::vector<std::int32_t> pos_;       // [capacity] logical positions, ascending in [0, size)
  std::int32_t held_ = 0;               // positions [0, held_) are held in table_ (== cells)
};

}  // namespace audiokv::policy::detail
