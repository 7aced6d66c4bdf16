#pragma once
// Writing files so that a crash or Ctrl-C never leaves a half-written result behind.

#include <string>

namespace hybridlab {

/// Writes `content` to `path` atomically: to `path.tmp.<pid>` in the same folder, flushed, then
/// renamed over `path`. Creates missing parent folders. Throws UserError naming the path and the
/// system error when the folder is not writable or the disk is full.
void write_file_atomic(const std::string& path, const std::string& content);

/// Reads a whole file. Throws UserError naming the path when it cannot be read.
std::string read_file(const std::string& path);

}  // namespace hybridlab
