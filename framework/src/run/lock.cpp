// RunLock: one writer per run folder, by flock(2) on <run_dir>/lock.

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>

#include "hybridlab/run_record.h"
#include "util/atomic_file.h"

namespace hybridlab {
namespace fs = std::filesystem;

namespace {

std::string lock_path(const std::string& run_dir) { return (fs::path(run_dir) / "lock").string(); }

}  // namespace

RunLock::RunLock(const std::string& run_dir) : path_(lock_path(run_dir)) {
  std::error_code ec;
  fs::create_directories(run_dir, ec);
  require_plain_file(path_);
  fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd_ < 0) {
    throw UserError(
        fmt::format("cannot create the lock file '{}': {} (is the runs folder "
                    "writable?)",
                    path_, std::strerror(errno)));
  }
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    ::close(fd_);
    fd_ = -1;
    if (err == EWOULDBLOCK) {
      const int64_t pid = holder(run_dir);
      throw RunBusy(fmt::format(
          "run folder '{}' is in use by process {} (lock file '{}'); a run has one writer: wait "
          "for it to finish or stop it, then rerun",
          run_dir, pid > 0 ? std::to_string(pid) : std::string("?"), path_));
    }
    throw UserError(fmt::format("cannot lock '{}': {}", path_, std::strerror(err)));
  }
  record_pid();
}

RunLock RunLock::adopt(int fd, const std::string& run_dir) {
  // flock on a descriptor that already holds the lock succeeds at once; on another file, or one
  // locked by someone else, it fails: the adopted descriptor is checked, not trusted.
  struct stat a {
  }, b{};
  const std::string path = lock_path(run_dir);
  if (fd < 0 || ::fstat(fd, &a) != 0 || ::stat(path.c_str(), &b) != 0 || a.st_ino != b.st_ino ||
      a.st_dev != b.st_dev || ::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    throw UserError(fmt::format("descriptor {} does not hold the lock '{}'", fd, path));
  }
  ::fcntl(fd, F_SETFD, FD_CLOEXEC);
  RunLock l(fd, path);
  l.record_pid();
  return l;
}

RunLock::RunLock(RunLock&& o) noexcept : fd_(o.fd_), path_(std::move(o.path_)) { o.fd_ = -1; }

RunLock::~RunLock() {
  if (fd_ >= 0) ::close(fd_);
}

void RunLock::inherit_into_child() const {
  if (fd_ >= 0) ::fcntl(fd_, F_SETFD, 0);
}

void RunLock::record_pid() const {
  const std::string text = std::to_string(::getpid()) + "\n";
  if (::ftruncate(fd_, 0) == 0) {
    // The pid is a courtesy for the message of a second writer; the lock does not depend on it.
    [[maybe_unused]] const ssize_t n = ::pwrite(fd_, text.data(), text.size(), 0);
  }
}

int64_t RunLock::holder(const std::string& run_dir) {
  try {
    return std::stoll(read_file(lock_path(run_dir)));
  } catch (const std::exception&) {
    return 0;
  }
}

}  // namespace hybridlab
