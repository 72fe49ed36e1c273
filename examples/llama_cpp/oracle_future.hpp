// SPDX-License-Identifier: Apache-2.0
// oracle_future: a reference for streaming perplexity, not a policy a user can run. A first run
// with every cell kept records each token's reduced attention row (the adapter's scores, the
// same every policy observes); at each eviction of a second run over the same tokens the
// oracle keeps the cells that the next `horizon` tokens of the first run attend most (all the
// rest of it with horizon 0). Eviction is final, so this is a heuristic, not a bound.
#pragma once

#include <audiokv/policy/baselines/baseline_policy.hpp>

#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace llama_stream {

/// @brief Attention of a run without eviction, per (query position q, key position p); after
/// finish(), after(q, p) = sum over query positions s > q of the attention s paid to p.
class future_attention {
 public:
  /// Room for `positions` query and key positions: positions^2 floats.
  explicit future_attention(int positions)
      : n_(positions), rows_(static_cast<std::size_t>(positions) * positions, 0.0f) {}

  int positions() const noexcept { return n_; }

  /// Query position q's row over the cells at key positions pos[0..cells).
  void record(int q, const std::int32_t* pos, const float* row, std::int32_t cells) {
    if (q < 0 || q >= n_) throw std::out_of_range("future_attention: query position out of range");
    float* dst = rows_.data() + static_cast<std::size_t>(q) * n_;
    for (std::int32_t j = 0; j < cells; ++j) dst[pos[j]] = row[j];
  }

  /// Turns the rows into suffix sums: row q holds the sum of rows q..n-1.
  void finish() {
    for (int q = n_ - 2; q >= 0; --q) {
      float* row = rows_.data() + static_cast<std::size_t>(q) * n_;
      const float* next = row + n_;
      for (int p = 0; p < n_; ++p) row[p] += next[p];
    }
  }

  /// Attention position p receives from query positions after q (0 past the last).
  float after(int q, int p) const noexcept {
    return q + 1 < n_ ? rows_[static_cast<std::size_t>(q + 1) * n_ + p] : 0.0f;
  }

  /// Attention position p receives from query positions q + 1 .. q + horizon (0: all after q).
  float within(int q, int p, int horizon) const noexcept {
    if (horizon <= 0 || q + horizon + 1 >= n_) return after(q, p);
    return after(q, p) - after(q + horizon, p);
  }

 private:
  int n_;
  std::vector<float> rows_;  // [query][key]
};

/// @brief Records into a future_attention (recording) or keeps, at each eviction, the cells
/// with the most future attention in it (replaying). The recorder must never evict: give it a
/// budget of at least the run's tokens.
class oracle_future final : public audiokv::policy::baselines::baseline_policy {
 public:
  /// `horizon`: the future query positions a replay counts (0: the rest of the run).
  oracle_future(const audiokv::policy::baselines::baseline_config& config,
                std::shared_ptr<future_attention> record, bool recording, int horizon = 0)
      : baseline_policy("oracle_future", config),
        record_(std::move(record)),
        recording_(recording),
        horizon_(horizon),
        future_(static_cast<std::size_t>(config.reserved_capacity())),
        order_(static_cast<std::size_t>(config.reserved_capacity())) {}

  const char* name() const noexcept override { return "oracle_future"; }

 protected:
  void on_observe_rows(const float* attention, std::int32_t rows, audiokv::gqa_reduce) override {
    const std::int32_t n = store().size();
    if (!recording_ || rows != 1 || n == 0) return;
    record_->record(store().pos()[n - 1], store().pos(), attention, n);
  }

  void select_evictions(std::int32_t target, std::uint8_t* mask) const override {
    if (recording_) throw std::logic_error("oracle_future: the recording run must not evict");
    const std::int32_t n = store().size();
    const std::int32_t* pos = store().pos();
    const int now = pos[n - 1];
    for (std::int32_t j = 0; j < n; ++j) {
      future_[static_cast<std::size_t>(j)] = record_->within(now, pos[j], horizon_);
      order_[static_cast<std::size_t>(j)] = j;
    }
    evict_lowest_by_partition(future_.data(), order_.data(), n, n - target, mask);
  }

 private:
  std::shared_ptr<future_attention> record_;
  bool recording_;
  int horizon_;
  mutable std::vector<float> future_;        // [capacity] scratch
  mutable std::vector<std::int32_t> order_;  // [capacity] scratch
};

}  // namespace llama_stream
