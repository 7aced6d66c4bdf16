#include "util/atomic_file.h"

#include <sys/statvfs.h>
#include <sys/types.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <system_error>

#include "hybridlab/error.h"

namespace hybridlab {
namespace fs = std::filesystem;

std::string free_space_text(const std::string& path) {
  struct statvfs st {};
  std::string dir = fs::path(path).has_parent_path() ? fs::path(path).parent_path().string() : ".";
  if (::statvfs(dir.c_str(), &st) != 0) return "free space unknown";
  const double bytes = static_cast<double>(st.f_bavail) * static_cast<double>(st.f_frsize);
  char text[64];
  if (bytes >= 1024.0 * 1024.0 * 1024.0)
    std::snprintf(text, sizeof text, "%.1f GiB free", bytes / (1024.0 * 1024.0 * 1024.0));
  else if (bytes >= 1024.0 * 1024.0)
    std::snprintf(text, sizeof text, "%.1f MiB free", bytes / (1024.0 * 1024.0));
  else
    std::snprintf(text, sizeof text, "%.0f KiB free", bytes / 1024.0);
  return std::string(text) + " on the filesystem of '" + dir + "'";
}

namespace {

// write_file_atomic's one body; `size` (bytes, -1 unknown) names the intended size in a refusal.
void write_atomic(const std::string& path, const std::function<bool(std::FILE*)>& write,
                  int64_t size) {
  const fs::path target(path);
  std::error_code ec;
  if (target.has_parent_path()) {
    fs::create_directories(target.parent_path(), ec);
    if (ec) {
      throw UserError("cannot create folder '" + target.parent_path().string() +
                      "': " + ec.message());
    }
  }
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) {
    throw UserError("cannot write '" + tmp + "': " + std::strerror(errno) +
                    " (is the folder writable?)");
  }
  bool written = false;
  try {
    written = write(f);
  } catch (...) {
    std::fclose(f);
    std::remove(tmp.c_str());
    throw;
  }
  const bool flushed = std::fflush(f) == 0 && ::fsync(::fileno(f)) == 0;
  const int saved_errno = errno;
  const long written_bytes = std::ftell(f);
  std::fclose(f);
  if (!written || !flushed) {
    std::remove(tmp.c_str());
    const std::string bytes = size >= 0 ? std::to_string(size) + " bytes"
                                        : std::to_string(written_bytes) + " bytes written";
    throw UserError("cannot write '" + path + "' (" + bytes + "): " + std::strerror(saved_errno) +
                    "; " + free_space_text(path) + "; the previous file, if any, is unchanged");
  }
  fs::rename(tmp, target, ec);
  if (ec) {
    std::remove(tmp.c_str());
    throw UserError("cannot move '" + tmp + "' to '" + path + "': " + ec.message());
  }
}

}  // namespace

void write_file_atomic(const std::string& path, const std::string& content) {
  write_atomic(
      path,
      [&content](std::FILE* f) {
        return std::fwrite(content.data(), 1, content.size(), f) == content.size();
      },
      static_cast<int64_t>(content.size()));
}

void write_file_atomic(const std::string& path, const std::function<bool(std::FILE*)>& write) {
  write_atomic(path, write, -1);
}

void require_new_folder(const std::string& dir, const std::string& what) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!path_present(dir)) return;
  if (!fs::is_directory(dir, ec) || fs::is_symlink(dir, ec)) {
    throw UserError("'" + dir + "' exists and is not a folder; give a new folder for " + what);
  }
  if (!fs::is_empty(dir, ec)) {
    throw UserError("'" + dir + "' is not empty; give a new or empty folder (" + what +
                    " never overwrites files)");
  }
}

std::string write_folder_atomic(const std::string& dir, const std::string& what,
                                const std::function<void(const std::string& tmp)>& write) {
  namespace fs = std::filesystem;
  require_new_folder(dir, what);
  const fs::path out = fs::absolute(dir).lexically_normal();
  const fs::path tmp = out.string() + ".tmp." + std::to_string(::getpid());
  std::error_code ec;
  fs::remove_all(tmp, ec);
  try {
    fs::create_directories(tmp, ec);
    write(tmp.string());
    if (fs::exists(out, ec)) fs::remove(out, ec);  // empty (checked above)
    fs::rename(tmp, out, ec);
    if (ec) {
      throw UserError("cannot move '" + tmp.string() + "' to '" + out.string() +
                      "': " + ec.message());
    }
  } catch (...) {
    fs::remove_all(tmp, ec);
    throw;
  }
  return out.string();
}

namespace {

// The writer's pid when `name` is "<anything>.tmp.<pid>", else 0.
pid_t temporary_writer(const std::string& name) {
  const size_t at = name.rfind(".tmp.");
  if (at == std::string::npos || at == 0) return 0;
  const std::string digits = name.substr(at + 5);
  if (digits.empty() || digits.size() > 9 ||
      digits.find_first_not_of("0123456789") != std::string::npos)
    return 0;
  return static_cast<pid_t>(std::stol(digits));
}

}  // namespace

int remove_stale_temporaries(const std::string& dir) {
  int removed = 0;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (!it->is_regular_file(ec) || it->is_symlink(ec)) continue;
    const pid_t pid = temporary_writer(it->path().filename().string());
    // kill(pid, 0) fails with ESRCH only when no such process exists.
    if (pid <= 0 || !(::kill(pid, 0) != 0 && errno == ESRCH)) continue;
    std::error_code rm;
    if (fs::remove(it->path(), rm)) ++removed;
  }
  return removed;
}

std::string read_file(const std::string& path) {
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (fs::exists(st) && !fs::is_regular_file(st)) {
    // A folder, a device (/dev/zero never ends), a pipe: not a file to read whole.
    throw UserError("cannot read '" + path +
                    "': " + (fs::is_directory(st) ? "it is a folder" : "it is not a regular file") +
                    ", a file was expected");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) throw UserError("cannot read '" + path + "': " + std::strerror(errno));
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool path_present(const std::string& path) {
  std::error_code ec;
  return fs::exists(fs::symlink_status(path, ec));
}

void require_plain_file(const std::string& path) {
  std::error_code ec;
  const fs::file_status st = fs::symlink_status(path, ec);
  if (!fs::exists(st) || fs::is_regular_file(st)) return;
  const char* what = fs::is_symlink(st)     ? "a symbolic link"
                     : fs::is_directory(st) ? "a folder"
                                            : "a special file (pipe, device or socket)";
  throw UserError("'" + path + "' is " + what +
                  ", not a file hybridlab wrote; a run folder holds only regular files: remove it "
                  "(and rerun the run if it was part of its record)");
}

std::string read_plain_file(const std::string& path) {
  require_plain_file(path);
  return read_file(path);
}

}  // namespace hybridlab
