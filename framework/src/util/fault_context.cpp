// The current layer, and the one-line report of a fatal signal in the in-process commands.

#include "util/fault_context.h"

#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstring>

namespace hybridlab {
namespace {

// A pointer, not a std::string: the signal handler may only read memory, never allocate
// (signal-safety(7)).
std::atomic<const char*> g_layer{nullptr};
std::atomic<const char*> g_command{"hybridlab"};

void write_text(const char* s) {
  if (!s) return;
  size_t n = std::strlen(s);
  while (n > 0) {
    const ssize_t w = ::write(STDERR_FILENO, s, n);
    if (w <= 0) return;
    s += w;
    n -= static_cast<size_t>(w);
  }
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
  const char* layer = g_layer.load();
  if (layer && *layer) {
    write_text(" in ");
    write_text(layer);
  } else {
    write_text(" outside the model's layers");
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
