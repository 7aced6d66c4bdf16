// Names of the rows a report shows and claims name: a run's variant (its name without the seed
// and tuned parts) and the row of one of its eval variants.

#include <algorithm>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "hybridlab/sweep.h"

namespace hybridlab {

std::string variant_name(const std::string& run_name,
                         const std::vector<std::pair<std::string, std::string>>& labels,
                         const std::set<std::string>& drop) {
  std::string name = run_name;
  for (const auto& [k, v] : labels) {
    if (!drop.count(k)) continue;
    const std::string part = run_name_part(k, v);
    // A part is whole between '_' separators (or the ends), so "seed-1" never eats "seed-10".
    for (size_t at = name.find(part); at != std::string::npos; at = name.find(part, at + 1)) {
      const size_t end = at + part.size();
      const bool starts = at == 0 || name[at - 1] == '_';
      const bool ends = end == name.size() || name[end] == '_';
      if (!starts || !ends) continue;
      if (at > 0) {
        name.erase(at - 1, part.size() + 1);
      } else {
        name.erase(0, std::min(name.size(), part.size() + 1));
      }
      break;
    }
  }
  return name.empty() ? "main" : name;
}

std::pair<std::string, std::vector<std::pair<std::string, std::string>>> eval_variant_run(
    const std::string& name, const std::vector<std::pair<std::string, std::string>>& labels,
    const std::string& eval) {
  auto out = labels;
  out.emplace_back("eval", eval);
  return {name + "_" + run_name_part("eval", eval), out};
}

}  // namespace hybridlab
