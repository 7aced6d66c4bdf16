#include "hybridlab/mixer.h"

namespace hybridlab {

MixerCache::~MixerCache() = default;
Mixer::~Mixer() = default;

}  // namespace hybridlab
