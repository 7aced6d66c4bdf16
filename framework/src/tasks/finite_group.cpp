// Cayley tables of the groups of the word problem (Merrill, Petty & Sabharwal 2024, arXiv
// 2404.08819, §6: A5, S5, Z60; Grazzi et al. 2025, arXiv 2411.12537: parity, S5).

#include "tasks/finite_group.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <numeric>

namespace hybridlab::tasks {
namespace {

// Number of inversions, mod 2: 0 for an even permutation.
int parity_of(const std::vector<int>& p) {
  int inv = 0;
  for (size_t i = 0; i < p.size(); ++i)
    for (size_t j = i + 1; j < p.size(); ++j) inv += p[i] > p[j];
  return inv % 2;
}

FiniteGroup permutation_group(const std::string& name, int n, bool even_only) {
  FiniteGroup g;
  g.name = name;
  std::vector<int> p(static_cast<size_t>(n));
  std::iota(p.begin(), p.end(), 0);
  do {
    if (!even_only || parity_of(p) == 0) g.permutations.push_back(p);
  } while (std::next_permutation(p.begin(), p.end()));
  g.order = static_cast<int64_t>(g.permutations.size());
  std::map<std::vector<int>, int32_t> index;
  for (size_t i = 0; i < g.permutations.size(); ++i)
    index[g.permutations[i]] = static_cast<int32_t>(i);
  g.table.resize(static_cast<size_t>(g.order * g.order));
  std::vector<int> c(static_cast<size_t>(n));
  for (int64_t a = 0; a < g.order; ++a) {
    for (int64_t b = 0; b < g.order; ++b) {
      const auto& pa = g.permutations[static_cast<size_t>(a)];
      const auto& pb = g.permutations[static_cast<size_t>(b)];
      // "a, then b": x -> b(a(x)).
      for (int x = 0; x < n; ++x) c[static_cast<size_t>(x)] = pb[static_cast<size_t>(pa[x])];
      g.table[static_cast<size_t>(a * g.order + b)] = index.at(c);
    }
  }
  return g;
}

FiniteGroup cyclic_group(const std::string& name, int64_t m) {
  FiniteGroup g;
  g.name = name;
  g.order = m;
  g.table.resize(static_cast<size_t>(m * m));
  for (int64_t a = 0; a < m; ++a)
    for (int64_t b = 0; b < m; ++b) g.table[static_cast<size_t>(a * m + b)] = int32_t((a + b) % m);
  return g;
}

// The number after the group's letter, or -1 when the rest is not a plain decimal number.
int64_t suffix_number(const std::string& name) {
  if (name.size() < 2 || name.size() > 5) return -1;
  for (size_t i = 1; i < name.size(); ++i)
    if (!std::isdigit(static_cast<unsigned char>(name[i]))) return -1;
  if (name[1] == '0') return -1;
  return std::stoll(name.substr(1));
}

}  // namespace

FiniteGroup make_group(const std::string& name) {
  if (name == "parity") return cyclic_group("parity", 2);
  const int64_t k = suffix_number(name);
  if (name[0] == 'Z' && k >= 2 && k <= 1000) return cyclic_group(name, k);
  if (name[0] == 'S' && k >= 3 && k <= 6) return permutation_group(name, int(k), false);
  if (name[0] == 'A' && k >= 4 && k <= 6) return permutation_group(name, int(k), true);
  return {};
}

std::string group_names_text() { return "parity, Z<m> (2 <= m <= 1000), S3-S6, A4-A6"; }

}  // namespace hybridlab::tasks
