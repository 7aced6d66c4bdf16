#include "tokenizer/byte_level.h"

namespace hybridlab::tokenizer {
namespace {

bool shows_itself(uint32_t b) {
  return (b >= 33 && b <= 126) || (b >= 161 && b <= 255 && b != 173);
}

constexpr uint32_t kAlphabetEnd = 256 + 68;  // one past the last code point used

struct Table {
  std::array<uint32_t, 256> cp{};
  std::array<int, kAlphabetEnd> byte{};
  Table() {
    byte.fill(-1);
    uint32_t next = 256;
    for (uint32_t b = 0; b < 256; ++b) {
      cp[b] = shows_itself(b) ? b : next++;
      byte[cp[b]] = static_cast<int>(b);
    }
  }
};

const Table& table() {
  static const Table t;
  return t;
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {  // the alphabet ends at U+0143
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

}  // namespace

uint32_t byte_level_code_point(uint8_t byte) { return table().cp[byte]; }

int byte_of_code_point(uint32_t cp) { return cp < kAlphabetEnd ? table().byte[cp] : -1; }

bool byte_level_decode(const std::string& shown, std::string& bytes, size_t& bad) {
  bytes.clear();
  const auto* s = reinterpret_cast<const unsigned char*>(shown.data());
  for (size_t i = 0; i < shown.size();) {
    uint32_t cp = 0;
    size_t len = 1;
    if (s[i] < 0x80) {
      cp = s[i];
    } else if ((s[i] & 0xE0) == 0xC0 && i + 1 < shown.size() && (s[i + 1] & 0xC0) == 0x80) {
      cp = ((s[i] & 0x1Fu) << 6) | (s[i + 1] & 0x3Fu);
      len = 2;
    } else {  // every character of the alphabet is below U+0800: two bytes at most
      bad = i;
      return false;
    }
    const int b = byte_of_code_point(cp);
    if (b < 0) {
      bad = i;
      return false;
    }
    bytes += static_cast<char>(b);
    i += len;
  }
  return true;
}

std::string byte_level_encode(const std::string& bytes) {
  std::string out;
  for (unsigned char b : bytes) append_utf8(out, byte_level_code_point(b));
  return out;
}

}  // namespace hybridlab::tokenizer
