#include "hybridlab/error.h"

namespace hybridlab {
// Out-of-line destructors anchor each type's vtable and typeinfo in the core library, so an error
// thrown in a plugin is caught as the same type by the host.
UserError::~UserError() = default;
ConfigError::~ConfigError() = default;
PluginError::~PluginError() = default;
PluginCrashed::~PluginCrashed() = default;
DataError::~DataError() = default;
}  // namespace hybridlab
