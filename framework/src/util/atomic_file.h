#pragma once
// Writing files so that a crash or Ctrl-C never leaves a half-written result behind.

#include <cstdio>
#include <functional>
#include <string>

namespace hybridlab {

/// Writes `content` to `path` atomically: to `path.tmp.<pid>` in the same folder, flushed, then
/// renamed over `path`. Creates missing parent folders. Throws UserError naming the path, its size,
/// the system error and the free space when the folder is not writable or the disk is full; the
/// temp file is removed.
void write_file_atomic(const std::string& path, const std::string& content);

/// write_file_atomic with the content streamed by `write` into the open temporary file (for files
/// too large to hold in memory). `write` returns false when a write failed (the disk is full);
/// what it throws is rethrown after the temporary file is removed. Same errors otherwise.
void write_file_atomic(const std::string& path, const std::function<bool(std::FILE*)>& write);

/// Throws UserError naming `dir` unless it is absent or an empty folder (not a link to one):
/// output folders a command fills never mix its files with others. `what` names the command's
/// output in the message ("an export", "inspect attention").
void require_new_folder(const std::string& dir, const std::string& what);

/// Fills the new folder `dir` as a whole: `write` gets a fresh sibling `<dir>.tmp.<pid>` to fill,
/// which is renamed to `dir` when `write` returns, so an interrupted or failed write leaves nothing
/// at `dir`. Checks require_new_folder(dir, what) first. On any exception (from `write` or the
/// rename, a UserError naming both folders) the sibling is removed and the exception rethrown.
/// Returns dir's absolute path.
std::string write_folder_atomic(const std::string& dir, const std::string& what,
                                const std::function<void(const std::string& tmp)>& write);

/// Removes the `<name>.tmp.<pid>` files write_file_atomic left in `dir` and its subfolders when
/// a process was killed between writing and renaming, those of processes no longer alive only
/// (a live writer's file is its own). Call it holding the folder's lock. Returns how many were
/// removed; a folder that cannot be read is skipped. Never throws.
int remove_stale_temporaries(const std::string& dir);

/// "12.5 MiB free on the filesystem of '<folder of path>'" (statvfs, space for unprivileged users).
std::string free_space_text(const std::string& path);

/// Reads a whole file. Throws UserError naming the path when it cannot be read.
std::string read_file(const std::string& path);

/// Whether `path` names something, a dangling symbolic link included (std::filesystem::exists
/// follows links, so a dangling one reads as absent).
bool path_present(const std::string& path);

/// Throws UserError naming `path` when it is present (path_present) but is a symbolic link, a
/// folder or a special file (pipe, device, socket): a run folder holds only the regular files
/// hybridlab wrote, so nothing is read through a link from elsewhere, nothing is appended through
/// one out of the runs folder, and no read blocks on a pipe. Absent is fine.
void require_plain_file(const std::string& path);

/// require_plain_file, then read_file.
std::string read_plain_file(const std::string& path);

}  // namespace hybridlab
