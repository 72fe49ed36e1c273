// SPDX-License-Identifier: Apache-2.0
/// @file
/// AdaKV (kvpress AdaKVPress over SnapKV scores) in streaming form: the KV heads of one layer
/// share one budget, so each head keeps a different number of cells.
#pragma once

#include <cstdint>
#include <limits>
#include <memory>
#include <utility>
#include <vector>

#include "../../error.hpp"
#include "../eviction_policy.hpp"
#include "../scores/adakv.hpp"
#include "../scores/budget.hpp"
#include "adakv_config.hpp"
#include "snapkv.hpp"

namespace audiokv::policy::baselines {

/// @brief The KV heads of one layer under one AdaKV budget.
///
/// Each head is a streaming snapkv cache (its own cells, rows and window). An eviction to a
/// per-head target T (budget B for plan(), explicit for plan_to()) follows kvpress AdaKVPress:
///   1. each head's pooled SnapKV scores; its newest min(window, n_h) cells get the pad
///      max + 1, the max taken over every head (kvpress pads the whole score tensor);
///   2. each head's top min(n_safe, n_h) scores are forced (n_safe = adakv_n_safe(T, alpha));
///   3. the lowest sum_h n_h - H * T entries of all heads together are evicted.
/// With equal head lengths N and T = kvpress_n_kept(N, r) this is kvpress's kept set. The
/// trigger fires when the layer holds more than H * B cells.
///
/// Two ways to drive it: the group API (append_all, observe(head, ...), plan(plans),
/// apply(plans), all-or-nothing over heads), or one eviction_policy handle per head from
/// make_head() (the group must be owned by a std::shared_ptr, see create()). Handles plan
/// from one joint selection: the first plan() of a round computes all heads' plans, and the
/// other heads receive their part of that same selection until every head has applied it.
/// An observe() before any head applied starts a new round (fresh scores).
///
/// A move takes the heads: the moved-from group has none (num_heads() 0), so every call that
/// names a head is rejected ("head ... must be in [0, num_heads)") and the group-wide calls see
/// an empty layer.
class adakv_group : public std::enable_shared_from_this<adakv_group> {
 public:
  /// Builds `config.num_heads` SnapKV heads sharing one budget; allocates all their state.
  /// @throws audiokv::error naming the first invalid field of `config`.
  explicit adakv_group(const adakv_config& config)
      : config_((config.validate("adakv_group"), config)) {
    for (std::int32_t h = 0; h < config.num_heads; ++h) {
      heads_.push_back(std::make_unique<head_cache>(config.snap));
    }
    const std::int64_t total = static_cast<std::int64_t>(config.num_heads) * heads_[0]->capacity();
    flat_.resize(total);
    evict_.resize(total);
    order_.resize(total);
    offsets_.resize(config.num_heads + 1);
  }

  /// A group owned by a shared_ptr, as make_head() requires.
  static std::shared_ptr<adakv_group> create(const adakv_config& config) {
    return std::make_shared<adakv_group>(config);
  }

  /// The validated configuration.
  const adakv_config& config() const noexcept { return config_; }
  /// Heads in the group (config().num_heads; 0 once the group is moved from).
  std::int32_t num_heads() const noexcept { return static_cast<std::int32_t>(heads_.size()); }
  /// The mean per-head budget B.
  std::int32_t budget_per_head() const noexcept { return config_.snap.base.budget; }
  /// Cells of every head together.
  std::int64_t total_cells() const noexcept {
    std::int64_t total = 0;
    for (const auto& head : heads_) total += head->num_cells();
    return total;
  }
  /// Read access to head h's cache (num_cells, positions, candidate_scores, ...).
  const snapkv& head(std::int32_t h) const {
    check_head("adakv_group::head", h);
    return *heads_[h];
  }

  /// Appends frames to head h only.
  void append(std::int32_t h, const frame_meta* frames, std::int32_t count) {
    check_head("adakv_group::append", h);
    heads_[h]->append(frames, count);
  }
  /// Appends the same frames to every head; validated for all heads first.
  void append_all(const frame_meta* frames, std::int32_t count) {
    for (const auto& head : heads_) head->check_append(frames, count);
    for (auto& head : heads_) head->append(frames, count);
  }
  /// Head h's attention row [num_cells of head h] (group size 1).
  void observe(std::int32_t h, const float* attention, std::int32_t num_cells) {
    check_head("adakv_group::observe", h);
    heads_[h]->observe(attention, num_cells);
    drop_uncommitted_round();
  }
  /// Head h's G query-head rows [group_size, num_cells of head h]; the length of `attention`
  /// is checked (snapkv::observe_group) before any score is read.
  void observe_group(std::int32_t h, span<const float> attention, std::int32_t group_size,
                     std::int32_t num_cells) {
    check_head("adakv_group::observe_group", h);
    heads_[h]->observe_group(attention, group_size, num_cells);
    drop_uncommitted_round();
  }
  /// The unchecked-length form: reads exactly group_size * num_cells floats.
  void observe_group(std::int32_t h, const float* attention, std::int32_t group_size,
                     std::int32_t num_cells) {
    check_head("adakv_group::observe_group", h);
    heads_[h]->observe_group(attention, group_size, num_cells);
    drop_uncommitted_round();
  }

  /// True when the group holds more cells than num_heads() * budget_per_head().
  bool wants_eviction() const noexcept {
    return total_cells() > static_cast<std::int64_t>(num_heads()) * budget_per_head();
  }

  /// One plan per head evicting the layer back to H * B cells; empty plans when the trigger
  /// does not fire. `plans` is resized to num_heads().
  void plan(std::vector<eviction_plan>& plans) const {
    if (!wants_eviction()) {
      empty_plans(plans);
      return;
    }
    select(budget_per_head(), plans);
  }
  /// One plan per head evicting the layer to H * target_per_head cells (kvpress n_kept).
  void plan_to(std::int32_t target_per_head, std::vector<eviction_plan>& plans) const {
    AUDIOKV_REQUIRE(target_per_head >= 0, "adakv_group::plan_to", "target_per_head",
                    target_per_head, "must be >= 0");
    if (total_cells() <= static_cast<std::int64_t>(num_heads()) * target_per_head) {
      empty_plans(plans);
      return;
    }
    select(target_per_head, plans);
  }
  /// Applies one plan per head; every plan is validated before any head changes.
  void apply(const std::vector<eviction_plan>& plans) {
    AUDIOKV_REQUIRE(static_cast<std::int32_t>(plans.size()) == num_heads(), "adakv_group::apply",
                    "plans.size()", plans.size(), "must equal num_heads");
    for (std::int32_t h = 0; h < num_heads(); ++h) heads_[h]->check_plan(plans[h]);
    for (std::int32_t h = 0; h < num_heads(); ++h) heads_[h]->apply(plans[h]);
    pending_.valid = false;
  }

  /// An eviction_policy for head h that shares this group (keeps it alive).
  /// @pre the group is owned by a std::shared_ptr (create()).
  std::unique_ptr<eviction_policy> make_head(std::int32_t h);

  // ---- per-head handle support (used by make_head's handles) ----

  /// Head h's part of the round's joint selection (computed on first use).
  void plan_head(std::int32_t h, bool explicit_target, std::int32_t target,
                 eviction_plan& out) const {
    check_head("adakv_group::plan", h);
    if (!pending_matches(explicit_target, target)) {
      if (explicit_target) {
        plan_to(target, pending_.plans);
      } else {
        plan(pending_.plans);
      }
      pending_.valid = true;
      pending_.explicit_target = explicit_target;
      pending_.target = target;
      pending_.generation.resize(num_heads());
      pending_.applied.assign(num_heads(), 0);
      for (std::int32_t k = 0; k < num_heads(); ++k) {
        pending_.generation[k] = heads_[k]->generation();
      }
    }
    out = pending_.plans[h];
  }
  /// Applies head h's plan; records it as that head's part of the pending round.
  void apply_head(std::int32_t h, const eviction_plan& plan) {
    check_head("adakv_group::apply", h);
    const bool from_round = pending_.valid && !pending_.applied[h] &&
                            plan.generation == pending_.generation[h] &&
                            heads_[h]->generation() == pending_.generation[h];
    heads_[h]->apply(plan);
    if (!from_round) {
      pending_.valid = false;
      return;
    }
    pending_.applied[h] = 1;
    pending_.generation[h] = heads_[h]->generation();
    bool all = true;
    for (const std::uint8_t done : pending_.applied) all = all && done;
    if (all) pending_.valid = false;
  }
  /// Head h's plan evicting exactly the marked cells (see eviction_policy::plan_evicting).
  void plan_head_evicting(std::int32_t h, span<const std::uint8_t> evict_mask,
                          eviction_plan& out) const {
    check_head("adakv_group::plan_evicting", h);
    heads_[h]->plan_evicting(evict_mask, out);
  }
  /// Head `h` for mutation (append, observe).
  /// @throws audiokv::error naming "head" when h is out of range.
  snapkv& mutable_head(std::int32_t h) {
    check_head("adakv_group::head", h);
    return *heads_[h];
  }

 private:
  /// snapkv with its protected hooks reachable by the group (candidate scores are public).
  class head_cache final : public snapkv {
   public:
    explicit head_cache(const snapkv_config& config) : snapkv("adakv", config) {}
    const char* name() const noexcept override { return "adakv"; }
  };

  struct pending_round {
    bool valid = false;
    bool explicit_target = false;
    std::int32_t target = 0;
    std::vector<eviction_plan> plans;
    std::vector<std::uint64_t> generation;  // per head: planned-for, then applied generation
    std::vector<std::uint8_t> applied;
  };

  void check_head(const char* where, std::int32_t h) const {
    AUDIOKV_REQUIRE(h >= 0 && h < num_heads(), where, "head", h, "must be in [0, num_heads)");
  }

  /// New scores replace a round no head has applied yet; a round that heads have started to
  /// apply is kept so the layer total stays H * target.
  void drop_uncommitted_round() noexcept {
    if (!pending_.valid) return;
    for (const std::uint8_t done : pending_.applied) {
      if (done) return;
    }
    pending_.valid = false;
  }

  bool pending_matches(bool explicit_target, std::int32_t target) const {
    if (!pending_.valid || pending_.explicit_target != explicit_target ||
        (explicit_target && pending_.target != target)) {
      return false;
    }
    for (std::int32_t k = 0; k < num_heads(); ++k) {
      if (heads_[k]->generation() != pending_.generation[k]) return false;
    }
    return true;
  }

  void empty_plans(std::vector<eviction_plan>& plans) const {
    plans.resize(num_heads());
    for (std::int32_t h = 0; h < num_heads(); ++h) {
      heads_[h]->plan_to(heads_[h]->num_cells(), plans[h]);
    }
  }

  void select(std::int32_t target, std::vector<eviction_plan>& plans) const {
    const std::int32_t heads = num_heads();
    offsets_[0] = 0;
    for (std::int32_t h = 0; h < heads; ++h) offsets_[h + 1] = offsets_[h] + heads_[h]->num_cells();
    float best = -std::numeric_limits<float>::infinity();
    std::vector<std::int32_t>& m = candidates_;
    m.resize(heads);
    for (std::int32_t h = 0; h < heads; ++h) {
      float* s = flat_.data() + offsets_[h];
      m[h] = heads_[h]->candidate_scores(s);
      for (std::int32_t j = 0; j < m[h]; ++j) best = s[j] > best ? s[j] : best;
    }
    const float pad = best == -std::numeric_limits<float>::infinity()
                          ? 1.0f
                          : static_cast<float>(static_cast<double>(best) + 1.0);
    for (std::int32_t h = 0; h < heads; ++h) {
      for (std::int64_t i = offsets_[h] + m[h]; i < offsets_[h + 1]; ++i) flat_[i] = pad;
    }
    const std::int64_t n_safe = scores::adakv_n_safe(target, config_.alpha_safeguard);
    const std::int64_t n_prune = offsets_[heads] - static_cast<std::int64_t>(heads) * target;
    scores::adakv_prune(flat_.data(), offsets_.data(), heads, n_safe, n_prune, evict_.data(),
                        order_.data());
    plans.resize(heads);
    for (std::int32_t h = 0; h < heads; ++h) {
      heads_[h]->plan_evicting(evict_.data() + offsets_[h], plans[h]);
    }
  }

  adakv_config config_;
  std::vector<std::unique_ptr<head_cache>> heads_;
  mutable std::vector<float> flat_;               // [H * capacity] scores of every head
  mutable std::vector<std::uint8_t> evict_;       // [H * capacity]
  mutable std::vector<std::int64_t> order_;       // [H * capacity]
  mutable std::vector<std::int64_t> offsets_;     // [H + 1]
  mutable std::vector<std::int32_t> candidates_;  // [H]
  mutable pending_round pending_;
};

/// @brief eviction_policy view of one head of an adakv_group (name "adakv").
class adakv_head final : public eviction_policy {
 public:
  /// The policy view of head `head` of `group` (shared ownership).
  /// @throws audiokv::error naming "group" (null) or "head" (out of range).
  adakv_head(std::shared_ptr<adakv_group> group, std::int32_t head)
      : group_(std::move(group)), head_(head) {
    AUDIOKV_REQUIRE(group_ != nullptr, "adakv_head", "group", "nullptr", "must be a group");
    group_->head(head_);  // validates the index
  }

  // The span forms of append() and observe() (checked lengths) come from eviction_policy.
  using eviction_policy::append;
  using eviction_policy::observe;

  /// A second handle to the same head.
  adakv_head(const adakv_head&) = default;
  /// Makes this a second handle to other's head.
  adakv_head& operator=(const adakv_head&) = default;
  /// Moves the handle. The moved-from handle refers to no head: its readers report an empty
  /// cache (num_cells(), capacity() and budget() 0, positions() null, id() 0, no eviction
  /// wanted) and every other call throws audiokv::error naming "group".
  adakv_head(adakv_head&&) noexcept = default;
  /// Move assignment, with the moved-from state of the move constructor.
  adakv_head& operator=(adakv_head&&) noexcept = default;
  ~adakv_head() override = default;

  const char* name() const noexcept override { return "adakv"; }
  /// The id of this head's cache, stamped on its plans (0 for a moved-from handle).
  std::uint64_t id() const noexcept override { return head_ptr() ? head_ptr()->id() : 0; }
  /// The shared group.
  /// @throws audiokv::error naming "group" for a moved-from handle.
  adakv_group& group() { return require_group("adakv_head::group"); }
  /// This head's index in the group.
  std::int32_t head_index() const noexcept { return head_; }

  void append(const frame_meta* frames, std::int32_t count) override {
    require_group("adakv::append").append(head_, frames, count);
  }
  void observe(const float* attention, std::int32_t num_cells) override {
    require_group("adakv::observe").observe(head_, attention, num_cells);
  }
  /// This head's G query-head rows, length checked (see adakv_group::observe_group).
  void observe_group(span<const float> attention, std::int32_t group_size, std::int32_t num_cells) {
    require_group("adakv::observe").observe_group(head_, attention, group_size, num_cells);
  }
  /// The unchecked-length form: reads exactly group_size * num_cells floats.
  void observe_group(const float* attention, std::int32_t group_size, std::int32_t num_cells) {
    require_group("adakv::observe").observe_group(head_, attention, group_size, num_cells);
  }
  bool wants_eviction() const noexcept override { return group_ && group_->wants_eviction(); }
  void plan(eviction_plan& out) const override {
    require_group("adakv::plan").plan_head(head_, false, 0, out);
  }
  /// `target_cells` is the per-head target of the whole layer (kvpress n_kept); this head
  /// may keep more or fewer.
  void plan_to(std::int32_t target_cells, eviction_plan& out) const override {
    AUDIOKV_REQUIRE(target_cells >= 0, "adakv::plan_to", "target_cells", target_cells,
                    "must be >= 0");
    require_group("adakv::plan_to").plan_head(head_, true, target_cells, out);
  }
  void apply(const eviction_plan& plan) override {
    require_group("adakv::apply").apply_head(head_, plan);
  }
  std::int32_t num_cells() const noexcept override {
    return head_ptr() ? head_ptr()->num_cells() : 0;
  }
  std::int32_t budget() const noexcept override { return group_ ? group_->budget_per_head() : 0; }
  std::int32_t capacity() const noexcept override {
    return head_ptr() ? head_ptr()->capacity() : 0;
  }
  const std::int32_t* positions() const noexcept override {
    return head_ptr() ? head_ptr()->positions() : nullptr;
  }
  void plan_evicting(span<const std::uint8_t> evict_mask, eviction_plan& out) const override {
    require_group("adakv::plan_evicting").plan_head_evicting(head_, evict_mask, out);
  }

 private:
  /// This head's cache, or null for a moved-from handle (or a group whose heads were moved).
  const snapkv* head_ptr() const noexcept {
    return group_ && head_ < group_->num_heads() ? &group_->head(head_) : nullptr;
  }
  /// The group, or audiokv::error naming "group" for a moved-from handle.
  adakv_group& require_group(const char* where) const {
    AUDIOKV_REQUIRE(group_ != nullptr, where, "group", "nullptr",
                    "this handle was moved from and refers to no head (assign a handle to it)");
    return *group_;
  }

  std::shared_ptr<adakv_group> group_;
  std::int32_t head_;
};

inline std::unique_ptr<eviction_policy> adakv_group::make_head(std::int32_t h) {
  check_head("adakv_group::make_head", h);
  return std::make_unique<adakv_head>(shared_from_this(), h);
}

}  // namespace audiokv::policy::baselines

namespace audiokv {
using policy::baselines::adakv_group;
using policy::baselines::adakv_head;
}  // namespace audiokv
