// SPDX-License-Identifier: Apache-2.0
/// @file
/// Select an eviction policy by name (benchmarks, the ASR harness, the comparison table).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "error.hpp"
#include "policy/audiokv/tiered_cache.hpp"
#include "policy/audiokv_config.hpp"
#include "policy/baselines/adakv.hpp"
#include "policy/baselines/baseline_policy.hpp"
#include "policy/baselines/h2o.hpp"
#include "policy/baselines/knorm.hpp"
#include "policy/baselines/lru.hpp"
#include "policy/baselines/observed_attention.hpp"
#include "policy/baselines/pyramidkv.hpp"
#include "policy/baselines/random_eviction.hpp"
#include "policy/baselines/snapkv.hpp"
#include "policy/baselines/streaming_llm.hpp"
#include "policy/baselines/tova.hpp"
#include "policy/baselines/uniform_stride.hpp"
#include "policy/eviction_policy.hpp"
#include "policy/scores/kernel_reduce.hpp"

namespace audiokv {

/// @brief Everything make_policy() may need; each policy reads only its own fields.
struct policy_options {
  /// B (for pyramidkv the mean over layers; for adakv the mean per head).
  std::int32_t budget = 0;
  /// Slots per cache; 0 means budget + 1 for the baselines and budget for "audiokv".
  std::int32_t capacity = 0;
  /// Speaker ids of appended frames must lie in [0, num_speakers).
  std::int32_t num_speakers = 1;
  /// streaming_llm sinks.
  std::int32_t n_sink = 4;
  /// h2o recent cells; -1 = budget / 2.
  std::int32_t recent_size = -1;
  /// lru threshold (see lru_config).
  float lru_tau = 1.0f;
  /// lru: tau per cell (true) or per step (see lru_config).
  bool lru_tau_per_cell = true;
  /// snapkv / pyramidkv / adakv window scoring (kvpress defaults).
  std::int32_t window = 64;
  /// snapkv / pyramidkv / adakv smoothing kernel (odd).
  std::int32_t kernel = 5;
  /// snapkv / pyramidkv / adakv: average or maximum over the kernel.
  scores::kernel_reduce reduce = scores::kernel_reduce::avg;
  /// snapkv / pyramidkv / adakv query heads per KV head.
  std::int32_t group_size = 1;
  /// pyramidkv layer schedule.
  std::int32_t layer = 0;
  /// pyramidkv: layers in the schedule.
  std::int32_t num_layers = 1;
  /// pyramidkv: the schedule's slope parameter.
  std::int32_t beta = 20;
  /// tova: kvpress variant forcing the newest cell (official: false).
  bool tova_force_last = false;
  /// adakv: safeguard, and optionally a shared group with this policy's head index in it. With
  /// no group, a private one-head group is made (AdaKV over one head is SnapKV).
  double alpha_safeguard = 0.2;
  /// adakv: the group shared by the heads of a layer, or null for a private one.
  std::shared_ptr<adakv_group> adakv_shared;
  /// adakv: this policy's head index in adakv_shared.
  std::int32_t adakv_head = 0;
  /// random seed.
  std::uint64_t seed = 0;
  /// "audiokv": the full configuration; budget/capacity/num_speakers above apply when its own
  /// budget is 0.
  audiokv_config audiokv{};
  /// "audiokv": the smoothing stages' parameters (e.g. stage<2>().block for local_rank_stage).
  default_pipeline audiokv_pipeline{};

  /// The common baseline configuration of these options.
  baseline_config base() const { return baseline_config{budget, capacity, num_speakers}; }
  /// The snapkv configuration of these options.
  snapkv_config snap() const { return snapkv_config{base(), window, kernel, reduce, group_size}; }
};

/// Every name make_policy() accepts, comma separated.
inline const char* policy_names() noexcept {
  return "audiokv, fifo, lru, streaming_llm, h2o, snapkv, pyramidkv, tova, knorm, "
         "observed_attention, adakv, uniform_stride, random";
}

/// @brief A new policy by its name() ("audiokv" is tiered_cache<> with the default pipeline).
/// @throws audiokv::error naming "name" and listing the valid names, or the policy's own
///         configuration error.
inline std::unique_ptr<eviction_policy> make_policy(std::string_view name,
                                                    const policy_options& options) {
  if (name == "audiokv") {
    audiokv_config config = options.audiokv;
    if (config.budget == 0) {
      config.budget = options.budget;
      config.capacity = options.capacity;
      config.num_speakers = options.num_speakers;
    }
    return std::make_unique<tiered_cache<>>(config, options.audiokv_pipeline);
  }
  if (name == "fifo") return std::make_unique<fifo>(options.base());
  if (name == "lru") {
    return std::make_unique<lru>(
        lru_config{options.base(), options.lru_tau, options.lru_tau_per_cell});
  }
  if (name == "streaming_llm") {
    return std::make_unique<streaming_llm>(streaming_llm_config{options.base(), options.n_sink});
  }
  if (name == "h2o") return std::make_unique<h2o>(h2o_config{options.base(), options.recent_size});
  if (name == "snapkv") return std::make_unique<snapkv>(options.snap());
  if (name == "pyramidkv") {
    return std::make_unique<pyramidkv>(
        pyramidkv_config{options.snap(), options.layer, options.num_layers, options.beta});
  }
  if (name == "tova")
    return std::make_unique<tova>(tova_config{options.base(), options.tova_force_last});
  if (name == "knorm") return std::make_unique<knorm>(options.base());
  if (name == "observed_attention") return std::make_unique<observed_attention>(options.base());
  if (name == "adakv") {
    std::shared_ptr<adakv_group> group = options.adakv_shared;
    if (!group)
      group = adakv_group::create(adakv_config{options.snap(), 1, options.alpha_safeguard});
    return group->make_head(options.adakv_head);
  }
  if (name == "uniform_stride") return std::make_unique<uniform_stride>(options.base());
  if (name == "random")
    return std::make_unique<random_eviction>(random_config{options.base(), options.seed});
  detail::throw_invalid("make_policy", "name", std::string(name),
                        (std::string("unknown policy; valid names: ") + policy_names()).c_str());
}

}  // namespace audiokv
