// The current layer, and the one-line report of a fatal signal in the in-process commands.

#include "util/fault_context.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

namespace hybridlab {
namespace {

// A pointer, not a std::string: the signal handler may only read memory, never allocate
// (signal-safety(7)).
std::atomic<const char*> g_layer{nullptr};
std::atomic<const char*> g_command{"hybridlab"};
// A run's child: the file that receives where the fault happened, for the parent to read once
// the child is dead (install_fatal_signal_note).
std::atomic<const char*> g_note{nullptr};

void write_text(const char* s, int fd = STDERR_FILENO) {
  if (!s) return;
  size_t n = std::strlen(s);
  while (n > 0) {
    const ssize_t w = ::write(fd, s, n);
    if (w <= 0) return;
    s += w;
    n -= static_cast<size_t>(w);
  }
}

// "in layer 2 (...)" or "outside the model's layers", to `fd`.
void write_where(int fd) {
  const char* layer = g_layer.load();
  if (layer && *layer) {
    write_text("in ", fd);
    write_text(layer, fd);
  } else {
    write_text("outside the model's layers", fd);
  }
}

// A run's child leaves the note and then dies by the same signal, so that its parent records the
// signal as it would without the handler (SA_RESETHAND restored the default action).
[[noreturn]] void note_and_reraise(int sig, const char* note) {
  const int fd = ::open(note, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd >= 0) {
    write_where(fd);
    ::close(fd);
  }
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, sig);
  sigprocmask(SIG_UNBLOCK, &set, nullptr);
  ::raise(sig);
  ::_exit(128 + sig);
}

// strsignal() is not async-signal-safe: the names of the signals handled, fixed.
const char* signal_text(int sig) {
  switch (sig) {
    case SIGSEGV:
      return "11 (Segmentation fault)";
    case SIGBUS:
      return "7 (Bus error)";
    case SIGFPE:
      return "8 (Floating point exception)";
    case SIGILL:
      return "4 (Illegal instruction)";
    case SIGABRT:
      return "6 (Aborted)";
    default:
      return "(unknown)";
  }
}

void on_fatal_signal(int sig) {
  write_text("hybridlab ");
  write_text(g_command.load());
  write_text(": killed by signal ");
  write_text(signal_text(sig));
  write_text(" ");
  write_where(STDERR_FILENO);
  if (const char* note = g_note.load()) {
    write_text("\n");
    note_and_reraise(sig, note);
  }
  write_text("; files written before are unchanged\n");
  ::_exit(1);
}

}  // namespace

LayerFaultScope::LayerFaultScope(const std::string& label)
    : previous_(g_layer.exchange(label.c_str())) {}

LayerFaultScope::~LayerFaultScope() { g_layer.store(previous_); }

std::string current_layer_label() {
  const char* layer = g_layer.load();
  return layer ? layer : "";
}

void install_fatal_signal_note(const std::string& note_path) {
  // Kept for the life of the process: the handler reads it.
  static std::string path;
  path = note_path;
  g_note.store(path.c_str());
  install_fatal_signal_report("run");
}

std::string take_fatal_signal_note(const std::string& note_path) {
  std::ifstream in(note_path);
  if (!in) return "";
  std::string where;
  std::getline(in, where);
  in.close();
  std::error_code ec;
  std::filesystem::remove(note_path, ec);
  return where;
}

void install_fatal_signal_report(const char* command) {
  g_command.store(command);
  struct sigaction sa {};
  sa.sa_handler = on_fatal_signal;
  sigemptyset(&sa.sa_mask);
  // SA_RESETHAND: a fault inside the handler itself ends the process by the default action.
  sa.sa_flags = static_cast<int>(SA_RESETHAND);
  for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT}) sigaction(sig, &sa, nullptr);
}

}  // namespace hybridlab
