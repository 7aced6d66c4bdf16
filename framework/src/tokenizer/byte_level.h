#pragma once
// GPT-2's byte-level alphabet (openai/gpt-2@master src/encoder.py `bytes_to_unicode`; Hugging Face
// tokenizers' ByteLevel pre-tokenizer uses the same table): every byte is shown as one printable
// Unicode character, so a vocabulary of byte strings can be stored as JSON text. Bytes 33..126,
// 161..172 and 174..255 stand for themselves; the other 68 bytes (control characters, space,
// DEL, 127..160 and the soft hyphen 173) take U+0100, U+0101, ... in byte order.

#include <array>
#include <cstdint>
#include <string>

namespace hybridlab::tokenizer {

/// The code point that shows `byte` (e.g. 0x20 ' ' -> U+0120 'Ġ', 0x0a -> U+010A 'Ċ').
uint32_t byte_level_code_point(uint8_t byte);

/// The byte a code point of the alphabet shows, or -1 when it is not in the alphabet.
int byte_of_code_point(uint32_t cp);

/// A vocabulary entry in the alphabet (UTF-8 text) back to its bytes. Returns false when the text
/// is not UTF-8 or holds a character outside the alphabet (`bad` is then that character's offset).
bool byte_level_decode(const std::string& shown, std::string& bytes, size_t& bad);

/// Bytes to their alphabet form (UTF-8), the inverse of byte_level_decode.
std::string byte_level_encode(const std::string& bytes);

}  // namespace hybridlab::tokenizer
