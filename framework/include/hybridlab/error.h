#pragma once
// Error types that reach the researcher. The CLI prints what() and exits with code 2 for any
// UserError (bad input: config, arguments, plugins, data), 1 for anything else.

#include <stdexcept>
#include <string>

namespace hybridlab {

/// Something the user gave us is wrong (a file, a key, an argument, a plugin). The message names
/// what and where, and how to fix it.
class UserError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
  ~UserError() override;
};

/// A configuration problem: unknown key, wrong type, value out of range, missing file, bad YAML.
/// Messages start with `file:line:col: dotted.key:` where the location is known.
class ConfigError : public UserError {
 public:
  using UserError::UserError;
  ~ConfigError() override;
};

/// A plugin could not be found, loaded, checked or built. The message names the plugin file.
class PluginError : public UserError {
 public:
  using UserError::UserError;
  ~PluginError() override;
};

/// Plugin code crashed (a signal), did not return within its time limit, or threw something that
/// is not a std::exception, in the supervised child that ran it first (util/supervised.h). The
/// message names the plugin's file, what it was doing and what happened. This process is intact:
/// a sweep records the variant as failed and goes on.
class PluginCrashed : public PluginError {
 public:
  using PluginError::PluginError;
  ~PluginCrashed() override;
};

/// Data cannot supply what was asked (missing or empty corpus, eval length past a document).
class DataError : public UserError {
 public:
  using UserError::UserError;
  ~DataError() override;
};

}  // namespace hybridlab
