#pragma once
// Where a fault happens: the model layer running now, so that a crash or an error inside it can
// be reported naming the layer and its plugin instead of a bare signal or a LibTorch backtrace.

#include <string>

namespace hybridlab {

/// Marks the layer whose forward runs while this object lives. `label` ("layer 2 (mixer 'q',
/// plugin '/p/q.so')") must outlive the scope; it is read by the fatal-signal handler, so it is
/// published as a plain pointer, process-wide (LibTorch's worker threads may be where it
/// crashes). Scopes nest: the previous label is restored at the end.
class LayerFaultScope {
 public:
  explicit LayerFaultScope(const std::string& label);
  ~LayerFaultScope();
  LayerFaultScope(const LayerFaultScope&) = delete;
  LayerFaultScope& operator=(const LayerFaultScope&) = delete;

 private:
  const char* previous_;
};

/// The label of the layer running now; "" outside any forward.
std::string current_layer_label();

/// Installs handlers (sigaction) for SIGSEGV, SIGBUS, SIGFPE, SIGILL and SIGABRT that write one
/// line to stderr, "hybridlab COMMAND: killed by signal 11 (Segmentation fault) in layer 2 (mixer
/// 'q', plugin '/p/q.so'); files written before are unchanged", and end the process with exit
/// code 1 (only async-signal-safe calls). For the in-process commands (eval, generate, analyze):
/// their results are written atomically, so a crash leaves the previous ones intact. `command`
/// must be a string literal (kept as a pointer).
void install_fatal_signal_report(const char* command);

/// For a run's child process: the same report on stderr, then "in layer 2 (...)" written to
/// `note_path` (open/write only: async-signal-safe), and the child dies by the same signal, so
/// that its parent records the crash as before and names the layer from the note
/// (take_fatal_signal_note).
void install_fatal_signal_note(const std::string& note_path);

/// The first line of the note a crashed child left at `note_path` ("in layer 2 (mixer 'q',
/// plugin '/p/q.so')"), removing the file; "" when there is none. Never throws.
std::string take_fatal_signal_note(const std::string& note_path);

}  // namespace hybridlab
