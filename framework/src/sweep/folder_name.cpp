// The folder-name rule shared by experiment and run names (documented in sweep.h).

#include <fmt/format.h>

#include <cstdint>

#include "hybridlab/sweep.h"

namespace hybridlab {
namespace {

bool safe_byte(unsigned char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '_' || c == '+' || c == '-';
}

// FNV-1a, 64 bit (Fowler, Noll, Vo; http://www.isthe.com/chongo/tech/comp/fnv/): stable across
// builds and platforms, unlike std::hash, so a run keeps its folder name.
uint64_t fnv1a64(const std::string& s) {
  uint64_t h = 14695981039346656037ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

}  // namespace

std::string folder_name(const std::string& text) {
  std::string out;
  bool replacing = false;  // inside a run of replaced bytes: they become one '_'
  for (unsigned char c : text) {
    if (safe_byte(c)) {
      out += static_cast<char>(c);
      replacing = false;
    } else if (!replacing) {
      out += '_';
      replacing = true;
    }
  }
  if (!out.empty() && out[0] == '.') out[0] = '_';
  if (out == text && !out.empty()) return out;
  return fmt::format("{}-{:08x}", out.empty() ? "_" : out,
                     static_cast<uint32_t>(fnv1a64(text) >> 32));
}

}  // namespace hybridlab
