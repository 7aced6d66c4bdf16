#pragma once
// The process-lifetime registry of loaded plugin libraries.
//
// A library that links LibTorch is never safe to unload (boostorg/dll#68, pytorch#46171), so every
// plugin library stays loaded until the process exits; loading the same file twice returns the
// same handle.

#include <boost/dll/shared_library.hpp>

#include <memory>
#include <string>

namespace hybridlab::detail {

/// Loads `canonical_path` (RTLD_LAZY | RTLD_LOCAL) once per process and keeps it loaded.
/// Throws what boost::dll throws (std::system_error with the dlerror text).
std::shared_ptr<boost::dll::shared_library> load_library_for_process_lifetime(
    const std::string& canonical_path);

}  // namespace hybridlab::detail
