#include "hybridlab/mixer.h"

namespace hybridlab {

MixerCache::~MixerCache() = default;

int64_t MixerCache::bytes_of(std::initializer_list<const torch::Tensor*> tensors) {
  int64_t n = 0;
  for (const torch::Tensor* t : tensors)
    if (t->defined()) n += static_cast<int64_t>(t->nbytes());
  return n;
}
Mixer::~Mixer() = default;
PositionService::~PositionService() = default;

}  // namespace hybridlab
