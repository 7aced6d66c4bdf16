#pragma once
// What every recurrent mixer tells the analysis, written once: the observers it was given, the
// window of its state-reset knock-out and the recurrent state read from its cache. A recurrent
// mixer derives from RecurrentMixer<ItsCache> instead of Mixer and keeps only its own math.

#include <torch/types.h>

#include <cstdint>

#include "hybridlab/mixer.h"

namespace hybridlab {

/// A Mixer base for recurrent mixers. `Cache` is the mixer's MixerCache type; `State` the member
/// that holds its recurrent state, [B,H,...] per head first (Cache::state by default).
///
///   class MyMixer : public RecurrentMixer<MyCache> {
///     MyMixer(const MyOptions& o) : RecurrentMixer(o.chunk_size), ... {}
///     ... forward() feeds probes().gates when it is set ...
///   };
///
/// Header-only and above the Mixer vtable: a plugin built on it needs no other host support.
template <class Cache, torch::Tensor Cache::*State = &Cache::state>
class RecurrentMixer : public Mixer {
 public:
  /// state_reset_window: the window (tokens, >= 1) after which a state-reset knock-out restarts
  /// the state; the chunk length is the natural one (docs/analysis.md).
  explicit RecurrentMixer(int64_t state_reset_window) : state_reset_window_(state_reset_window) {}

  int64_t state_reset_window() const override { return state_reset_window_; }
  /// Keeps the observers; the mixer's forward calls them (probes()).
  void set_probes(const MixerProbes& probes) override { probes_ = probes; }
  /// `cache`'s State member when `cache` is a Cache; undefined otherwise or before the first token.
  torch::Tensor recurrent_state(const MixerCache& cache) const override {
    const auto* c = dynamic_cast<const Cache*>(&cache);
    return c ? c->*State : torch::Tensor();
  }

 protected:
  /// The observers set_probes() was given (empty functions when none).
  const MixerProbes& probes() const { return probes_; }

 private:
  MixerProbes probes_;
  int64_t state_reset_window_;
};

}  // namespace hybridlab
