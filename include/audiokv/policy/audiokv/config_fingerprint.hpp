// SPDX-License-Identifier: Apache-2.0
/// @file
/// The fingerprint a tiered_cache snapshot carries of the configuration and pipeline shape it
/// may be restored under.
#pragma once

#include <cstddef>
#include <cstdint>

#include "../audiokv_config.hpp"
#include "../detail/snapshot_io.hpp"
#include "../stages/smoothing_pipeline.hpp"

namespace audiokv::policy::detail {

/// Writes the shape of a smoothing_pipeline: stage count, each stage's size, each stage's
/// alignment (u64 each).
template <class... Stages>
void write_pipeline_shape(snapshot_writer& w, const smoothing_pipeline<Stages...>*) noexcept {
  w.u64(sizeof...(Stages));
  (w.u64(sizeof(Stages)), ...);
  (w.u64(alignof(Stages)), ...);
}
/// A pipeline that is not a smoothing_pipeline adds nothing beyond its own size and alignment.
inline void write_pipeline_shape(snapshot_writer&, const void*) noexcept {}

/// Bytes write_pipeline_shape() writes for P.
template <class P>
struct pipeline_shape_bytes {
  static constexpr std::size_t value = 0;
};
template <class... Stages>
struct pipeline_shape_bytes<smoothing_pipeline<Stages...>> {
  static constexpr std::size_t value = 8 + 16 * sizeof...(Stages);
};

/// Bytes config_fingerprint() writes before the pipeline's shape (the configuration fields,
/// then the pipeline's size and alignment) are at most this many.
inline constexpr std::size_t config_fingerprint_field_bytes = 256;

/// @brief Fingerprint of what a snapshot may be restored into: FNV-1a 64 over every
/// audiokv_config field (floats by their bits) and the shape of `Pipeline` (its size and
/// alignment, then its stage count and each stage's size and alignment). The stages'
/// parameters are not part of it.
template <class Pipeline>
std::uint64_t config_fingerprint(const audiokv_config& c) noexcept {
  std::byte buf[config_fingerprint_field_bytes + pipeline_shape_bytes<Pipeline>::value];
  snapshot_writer w(buf);
  w.i32(c.budget);
  w.i32(c.capacity);
  w.f32(c.split.base);
  w.f32(c.split.buffer);
  w.f32(c.split.emergency);
  w.f32(c.trigger);
  w.f32(c.alpha);
  w.u8(c.neighbour_prior ? 1 : 0);
  w.f32(c.evaluation_share);
  w.u8(c.smooth_text ? 1 : 0);
  w.f32(c.base_rate);
  w.f32(c.lambda);
  w.f32(c.voice_weight);
  w.i32(c.boundary_radius);
  w.f32(c.boundary_horizon_ms);
  w.f32(c.min_retention_ms);
  w.f32(c.frame_ms);
  w.i32(c.num_speakers);
  w.f32(c.baseline_rate);
  w.i32(c.drift_window);
  w.f32(c.drift_factor);
  w.u8(static_cast<std::uint8_t>(c.prior));
  w.u8(c.prefetch.enabled ? 1 : 0);
  w.f32(c.prefetch.beta);
  w.f32(c.prefetch.decay);
  w.i32(c.prefetch.horizon_steps);
  w.f32(c.prefetch.margin);
  w.i32(c.prefetch.min_burst_frames);
  w.i32(c.prefetch.granularity);
  w.u8(c.speech.sinks.enabled ? 1 : 0);
  w.i32(c.speech.sinks.first);
  w.i32(c.speech.sinks.observed);
  w.f32(c.speech.sinks.max_share);
  w.u8(c.speech.coverage.enabled ? 1 : 0);
  w.f32(c.speech.coverage.segment_ms);
  w.f32(c.speech.coverage.share);
  w.f32(c.speech.coverage.silence_weight);
  w.f32(c.speech.coverage.centre_band);
  w.i32(c.speech.coverage.segment_cells);
  w.f32(c.speech.coverage.phase);
  w.u8(c.speech.frontier.enabled ? 1 : 0);
  w.u8(c.speech.frontier.estimate ? 1 : 0);
  w.i32(c.speech.frontier.filter);
  w.f32(c.speech.frontier.lookback_ms);
  w.f32(c.speech.frontier.past_density);
  w.f32(c.speech.frontier.past_decay_ms);
  w.f32(c.speech.frontier.past_decay_floor);
  w.f32(c.speech.frontier.frontier_density);
  w.u8(c.shrink_recent_window ? 1 : 0);
  w.f32(c.text_recent_share);
  w.u64(sizeof(Pipeline));
  w.u64(alignof(Pipeline));
  write_pipeline_shape(w, static_cast<const Pipeline*>(nullptr));
  return fnv1a64(buf, w.written());
}

}  // namespace audiokv::policy::detail
