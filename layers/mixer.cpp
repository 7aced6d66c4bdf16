#include "hybridlab/mixer.h"

#include "hybridlab/position.h"

namespace hybridlab {

MixerCache::~MixerCache() = default;

int64_t MixerCache::bytes_of(std::initializer_list<const torch::Tensor*> tensors) {
  int64_t n = 0;
  for (const torch::Tensor* t : tensors)
    if (t->defined()) n += static_cast<int64_t>(t->nbytes());
  return n;
}
Mixer::~Mixer() = default;

bool carries_position(const Mixer& mixer) {
  const MixerInfo info = mixer.info(1);
  const PositionScheme* scheme = mixer.position_scheme();
  if (info.position_hooks != kHookNone || (scheme && scheme->hooks() != kHookNone)) return true;
  // A hook-free scheme (NoPE) changes nothing; a name beside it is the mixer's own method.
  return info.position != "-" && (!scheme || info.position != scheme->name());
}
PositionService::~PositionService() = default;

}  // namespace hybridlab
