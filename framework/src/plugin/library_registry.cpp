#include "plugin/library_registry.h"

#include <map>
#include <mutex>

namespace hybridlab::detail {

std::shared_ptr<boost::dll::shared_library> load_library_for_process_lifetime(
    const std::string& canonical_path) {
  // Deliberately leaked: destroying it at exit would unload torch-linked code while static
  // destructors of LibTorch may still run.
  static auto* libraries = new std::map<std::string, std::shared_ptr<boost::dll::shared_library>>();
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  auto it = libraries->find(canonical_path);
  if (it != libraries->end()) return it->second;
  auto lib = std::make_shared<boost::dll::shared_library>(
      canonical_path, boost::dll::load_mode::rtld_lazy | boost::dll::load_mode::rtld_local);
  libraries->emplace(canonical_path, lib);
  return lib;
}

}  // namespace hybridlab::detail
