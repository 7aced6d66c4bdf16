#include "commands.h"

namespace hybridlab::cli {

Config load_config_with_overrides(const std::string& path,
                                  const std::vector<std::string>& overrides) {
  Config cfg = Config::load(path);
  for (const auto& o : overrides) cfg.apply_override(o);
  return cfg;
}

}  // namespace hybridlab::cli
