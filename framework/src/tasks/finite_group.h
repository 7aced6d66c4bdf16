#pragma once
// Finite groups for the word problem: cyclic groups Z_m and the symmetric and alternating groups
// S_n and A_n, each as a Cayley table over element indices.

#include <cstdint>
#include <string>
#include <vector>

namespace hybridlab::tasks {

/// A finite group as a multiplication table. Element 0 is the identity.
struct FiniteGroup {
  std::string name;   ///< "Z5", "S3", "A5", ...
  int64_t order = 0;  ///< number of elements
  /// [order * order]: then(a, b) = table[a * order + b] is the element "a, then b". For
  /// permutations in one-line notation that is b ∘ a (x -> b(a(x))); for Z_m it is a + b mod m.
  std::vector<int32_t> table;
  /// For permutation groups, each element in one-line notation over {0, ..., n-1} (empty for Z_m).
  std::vector<std::vector<int>> permutations;

  int32_t then(int32_t a, int32_t b) const { return table[static_cast<size_t>(a * order + b)]; }
};

/// The group named `name`: "parity" (= Z2), "Z<m>" (2 <= m <= 1000), "S<n>" (3 <= n <= 6) or
/// "A<n>" (4 <= n <= 6), the names of jopetty/word-problem@8f910f9. Permutations are listed in
/// lexicographic order of their one-line notation, so the identity comes first. Returns an empty
/// group (order 0) for any other name; group_names_text() says which names exist.
FiniteGroup make_group(const std::string& name);

/// "parity, Z<m> (2 <= m <= 1000), S3-S6, A4-A6", for messages.
std::string group_names_text();

}  // namespace hybridlab::tasks
