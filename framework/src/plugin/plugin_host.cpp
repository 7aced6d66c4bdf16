// PluginHost: discovery, ABI checks and scheme construction for positional-scheme plugins.

#include "hybridlab/plugin_host.h"

#include <unistd.h>

#include <c10/util/Exception.h>
#include <algorithm>

#include <boost/dll/library_info.hpp>
#include <boost/dll/runtime_symbol_info.hpp>
#include <boost/dll/shared_library.hpp>
#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>

#include "plugin/library_registry.h"
#include "plugin/probe.h"
#include "util/registry.h"

namespace hybridlab {
namespace fs = std::filesystem;

namespace {

constexpr const char* kInfoAlias = "hybridlab_plugin_info";
constexpr const char* kFactoryAlias = "hybridlab_position_factory";
constexpr const char* kMixerInfoAlias = "hybridlab_mixer_info";
constexpr const char* kMixerFactoryAlias = "hybridlab_mixer_factory";

bool looks_like_path(const std::string& s) {
  return s.find('/') != std::string::npos ||
         (s.size() > 3 && s.compare(s.size() - 3, 3, ".so") == 0);
}

// The ELF class (32/64-bit), byte order and machine of a file's header (ELF spec, "ELF Header":
// e_ident[EI_CLASS], e_ident[EI_DATA], e_machine at offset 18). false if it is no ELF file.
struct ElfIdentity {
  unsigned char elf_class = 0;
  unsigned char data = 0;
  uint16_t machine = 0;
};

bool read_elf_identity(const std::string& file, ElfIdentity& out) {
  std::ifstream in(file, std::ios::binary);
  unsigned char h[20] = {};
  if (!in.read(reinterpret_cast<char*>(h), sizeof h)) return false;
  if (h[0] != 0x7f || h[1] != 'E' || h[2] != 'L' || h[3] != 'F') return false;
  out.elf_class = h[4];
  out.data = h[5];
  out.machine = out.data == 2 ? static_cast<uint16_t>(h[18] << 8 | h[19])
                              : static_cast<uint16_t>(h[19] << 8 | h[18]);
  return true;
}

std::string elf_machine_name(uint16_t m) {
  switch (m) {
    case 3:
      return "x86 (32-bit)";
    case 40:
      return "ARM (32-bit)";
    case 62:
      return "x86-64";
    case 183:
      return "AArch64";
    case 243:
      return "RISC-V";
    case 21:
      return "PowerPC 64";
    case 22:
      return "IBM S/390";
    default:
      return "ELF machine " + std::to_string(m);
  }
}

// "" when `file` is an ELF object this process can load (same class, byte order, machine as the
// running executable), else why not. A foreign file is skipped: dlopen would fail with a
// misleading message (glibc says "No such file or directory" for some of them).
std::string foreign_elf_reason(const std::string& file) {
  static const ElfIdentity self = [] {
    ElfIdentity id;
    read_elf_identity("/proc/self/exe", id);
    return id;
  }();
  ElfIdentity id;
  if (!read_elf_identity(file, id)) return "it is not a shared library (no ELF header)";
  if (self.machine == 0) return "";  // cannot tell: let the loader decide
  if (id.machine != self.machine || id.elf_class != self.elf_class || id.data != self.data) {
    return "it is built for " + elf_machine_name(id.machine) +
           (id.elf_class == 1 ? " (32-bit)" : "") + ", this hybridlab runs on " +
           elf_machine_name(self.machine) + "; rebuild it for this machine";
  }
  return "";
}

// Reads the ELF header and symbol table without running any code of the file: is it one of
// ours? Returns "" if so, else the reason it is not.
std::string not_a_plugin_reason(const fs::path& file) {
  std::error_code ec;
  if (!fs::is_regular_file(file, ec)) {
    return "it is not a regular file";
  }
  if (const std::string why = foreign_elf_reason(file.string()); !why.empty()) return why;
  try {
    boost::dll::library_info info(file, true);
    const auto symbols = info.symbols("boostdll");
    auto has = [&](const char* s) {
      return std::find(symbols.begin(), symbols.end(), s) != symbols.end();
    };
    if (has(kInfoAlias) && has(kFactoryAlias)) return "";
    if (has(kMixerInfoAlias) && has(kMixerFactoryAlias)) return "";
    return "it exports no hybridlab plugin symbols (a plugin ends with "
           "HYBRIDLAB_POSITION_PLUGIN(...) or HYBRIDLAB_MIXER_PLUGIN(...) and is built with "
           "hybridlab_add_position_plugin or hybridlab_add_mixer_plugin)";
  } catch (const std::exception&) {
    return "it is not a shared library";
  }
}

std::string join(const std::vector<std::string>& v, const std::string& sep) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : sep) + s;
  return out;
}

}  // namespace

// Outside the anonymous namespace: a member of PluginHost::Impl, whose type has external linkage.
struct LoadedPlugin {
  PluginRecord record;
  std::shared_ptr<boost::dll::shared_library> lib;
};

struct PluginHost::Impl {
  std::vector<std::string> extra_paths;
  bool discovered = false;
  Registry<LoadedPlugin> by_name{"plugin"};         // origin: the plugin's file
  std::map<std::string, std::string> name_by_file;  // canonical file -> scheme name
  std::vector<std::string> skipped;                 // "file: why" for .so files not loaded
  std::vector<std::string> broken;  // plugins whose code crashed or hung in its supervised child
  std::vector<SetAsidePlugin> set_aside;  // plugins whose records are refused, in search order

  LoadedPlugin& load(const std::string& path);
  /// Probes and loads the plugin `file` (canonical); nullptr when its record is refused, with
  /// why in `refused`. Throws PluginCrashed when its code crashed or hung in the probe.
  LoadedPlugin* admit(const std::string& file, SetAsidePlugin& refused);
  void scan_folder(const std::string& dir, bool must_exist);
  /// Scans the search path once (PluginHost::discover).
  void discover();
  /// The loaded plugin `name_or_path` of `kind`; throws PluginError located at `params` (the
  /// message lists `search`).
  LoadedPlugin& find(const std::string& name_or_path, Section& params, PluginKind kind,
                     const std::vector<std::string>& search);
};

LoadedPlugin& PluginHost::Impl::load(const std::string& path) {
  std::error_code ec;
  if (!fs::exists(path, ec) && ec.value() == ELOOP) {
    throw PluginError("plugin file '" + path + "' is a loop of symbolic links");
  }
  if (!fs::exists(path, ec)) {
    throw PluginError("plugin file '" + path + "' does not exist");
  }
  const std::string file = fs::canonical(path, ec).string();
  if (auto it = name_by_file.find(file); it != name_by_file.end()) return *by_name.find(it->second);

  if (const std::string why = not_a_plugin_reason(file); !why.empty()) {
    throw PluginError("'" + file + "' is not a hybridlab plugin: " + why);
  }
  SetAsidePlugin refused;
  LoadedPlugin* loaded = admit(file, refused);
  if (!loaded) throw PluginError(refused.reason);
  return *loaded;
}

LoadedPlugin* PluginHost::Impl::admit(const std::string& file, SetAsidePlugin& refused) {
  if (auto it = name_by_file.find(file); it != name_by_file.end()) return by_name.find(it->second);
  // Its code runs first in a supervised child: a crash, a hang or a broken record there is an
  // error here (PluginCrashed, or a refusal), never this process's end.
  const detail::ProbedLibrary probed = detail::probe_library(file);
  refused = SetAsidePlugin{file, probed.refusal, probed.name, static_cast<PluginKind>(probed.kind),
                           probed.letter};
  if (!probed.refusal.empty()) return nullptr;
  std::shared_ptr<boost::dll::shared_library> lib;
  try {
    lib = detail::load_library_for_process_lifetime(file);
  } catch (const std::exception& e) {
    refused.reason = "cannot load plugin '" + file + "': " + e.what();
    return nullptr;
  }
  LoadedPlugin p;
  p.record.name = probed.name;
  p.record.version = probed.version;
  p.record.description = probed.description;
  p.record.file = file;
  p.record.hooks = probed.hooks;
  p.record.kind = static_cast<PluginKind>(probed.kind);
  p.record.letter = probed.letter;
  p.record.api_version = probed.api_version;
  p.record.eval_safe_keys = probed.eval_safe_keys;
  p.lib = lib;
  const std::string name = p.record.name;
  try {
    LoadedPlugin& stored = by_name.add(name, std::move(p), file);
    name_by_file[file] = name;
    return &stored;
  } catch (const DuplicateEntry& e) {
    refused.reason =
        std::string(e.what()) + "; remove one or take it out of the plugin search path";
    return nullptr;
  }
}

namespace {
// Why `dir` cannot be searched for plugins ("" when it can); `missing_ok`: a folder that does not
// exist is no problem (the installation's default folder).
std::string plugin_folder_problem(const std::string& dir, bool missing_ok) {
  std::error_code ec;
  if (!fs::exists(dir, ec) && ec.value() == ELOOP) {
    return "plugin folder '" + dir + "' is a loop of symbolic links";
  }
  if (!fs::exists(dir, ec)) return missing_ok ? "" : "plugin folder '" + dir + "' does not exist";
  if (!fs::is_directory(dir, ec)) return "plugin folder '" + dir + "' is not a folder";
  fs::directory_iterator it(dir, ec);
  if (ec || ::access(dir.c_str(), R_OK | X_OK) != 0) {
    return "cannot read plugin folder '" + dir +
           "': " + (ec ? ec.message() : std::string("permission denied"));
  }
  return "";
}
}  // namespace

void PluginHost::Impl::scan_folder(const std::string& dir, bool must_exist) {
  if (const std::string why = plugin_folder_problem(dir, !must_exist); !why.empty()) {
    throw PluginError(why);
  }
  std::error_code ec;
  if (!fs::exists(dir, ec)) return;
  fs::directory_iterator it(dir, ec);
  std::vector<fs::path> files;
  for (; it != fs::directory_iterator(); it.increment(ec)) {
    if (ec) throw PluginError("cannot read plugin folder '" + dir + "': " + ec.message());
    if (it->path().extension() == ".so") files.push_back(it->path());
  }
  std::sort(files.begin(), files.end());
  for (const auto& f : files) {
    // Some other library: not ours to load, but say so when a scheme is not found.
    if (const std::string why = not_a_plugin_reason(f); !why.empty()) {
      skipped.push_back(f.string() + " (" + why + ")");
      continue;
    }
    // A plugin that cannot be used is set aside; commands that do not need it go on, and one
    // that names it is told why (find).
    try {
      SetAsidePlugin refused;
      if (!admit(fs::canonical(f, ec).string(), refused)) set_aside.push_back(refused);
    } catch (const PluginCrashed& e) {
      broken.push_back(e.what());
    }
  }
}

PluginHost::PluginHost(std::vector<std::string> extra_paths) : impl_(std::make_unique<Impl>()) {
  impl_->extra_paths = std::move(extra_paths);
}
PluginHost::~PluginHost() = default;

std::string PluginHost::default_plugin_dir() {
  std::error_code ec;
  const fs::path exe = boost::dll::program_location(ec);
  if (ec) return "";
  return (exe.parent_path().parent_path() / "lib" / "hybridlab" / "plugins")
      .lexically_normal()
      .string();
}

namespace {
std::vector<std::string> env_plugin_dirs() {
  std::vector<std::string> out;
  const char* env = std::getenv("HYBRIDLAB_PLUGIN_PATH");
  if (!env) return out;
  std::string cur;
  for (const char* c = env;; ++c) {
    if (*c == ':' || *c == '\0') {
      if (!cur.empty()) out.push_back(cur);
      cur.clear();
      if (*c == '\0') break;
    } else {
      cur += *c;
    }
  }
  return out;
}
}  // namespace

std::vector<std::string> PluginHost::search_path() const {
  std::vector<std::string> out = impl_->extra_paths;
  for (const auto& d : env_plugin_dirs()) out.push_back(d);
  const std::string def = default_plugin_dir();
  if (!def.empty()) out.push_back(def);
  return out;
}

void PluginHost::Impl::discover() {
  if (discovered) return;
  for (const auto& d : extra_paths) scan_folder(d, true);
  for (const auto& d : env_plugin_dirs()) scan_folder(d, true);
  scan_folder(PluginHost::default_plugin_dir(), false);
  discovered = true;
}

void PluginHost::discover() { impl_->discover(); }

std::vector<std::string> PluginHost::skipped_files() {
  discover();
  return impl_->skipped;
}

PluginRecord PluginHost::load_file(const std::string& path) { return impl_->load(path).record; }

std::vector<PluginRecord> PluginHost::plugins() {
  discover();
  std::vector<PluginRecord> out;
  for (const LoadedPlugin* p : impl_->by_name.entries()) out.push_back(p->record);
  return out;
}

std::vector<std::string> PluginHost::broken_plugins() {
  discover();
  return impl_->broken;
}

std::vector<SetAsidePlugin> PluginHost::set_aside_plugins() {
  discover();
  return impl_->set_aside;
}

std::string plugin_kind_name(PluginKind kind) {
  return kind == kPluginKindMixer ? "mixer" : "position";
}

LoadedPlugin& PluginHost::Impl::find(const std::string& name_or_path, Section& params,
                                     PluginKind kind, const std::vector<std::string>& search) {
  const std::string what = kind == kPluginKindMixer ? "mixer" : "positional scheme";
  LoadedPlugin* plugin = nullptr;
  if (looks_like_path(name_or_path)) {
    try {
      plugin = &load(name_or_path);
    } catch (const PluginError& e) {
      const Location where = params.location(kind == kPluginKindMixer ? "" : "scheme");
      if (where.line <= 0) throw;
      const std::string msg = where.str() + ": " + params.path() +
                              (kind == kPluginKindMixer ? "" : ".scheme") + ": " + e.what();
      // A crash stays a crash: a sweep records it against its variants and goes on.
      if (dynamic_cast<const PluginCrashed*>(&e)) throw PluginCrashed(msg);
      throw PluginError(msg);
    }
  } else {
    discover();
    // A set-aside library with this name: the name is ambiguous or its plugin unusable.
    for (const SetAsidePlugin& a : set_aside) {
      if (a.name != name_or_path || a.kind != kind) continue;
      throw PluginError(params.location(kind == kPluginKindMixer ? "" : "scheme").str() + ": " +
                        what + " '" + name_or_path + "' is in plugin '" + a.file +
                        "', which is set aside: " + a.reason);
    }
    LoadedPlugin* found = by_name.find(name_or_path);
    if (!found || found->record.kind != kind) {
      std::vector<std::string> names;
      for (const LoadedPlugin* p : by_name.entries())
        if (p->record.kind == kind) names.push_back(p->record.name);
      const std::string near = nearest_key(name_or_path, names);
      const std::string other = !found ? ""
                                       : " ('" + name_or_path + "' is a " +
                                             plugin_kind_name(found->record.kind) + " plugin)";
      throw PluginError(params.location(kind == kPluginKindMixer ? "" : "scheme").str() +
                        ": unknown " + what + " '" + name_or_path + "'" + other +
                        (near.empty() ? "" : "; did you mean '" + near + "'?") +
                        " (available: " + (names.empty() ? "none" : join(names, ", ")) +
                        "; searched: " + join(search, ":") +
                        (skipped.empty() ? "" : "; skipped: " + join(skipped, ", ")) +
                        (broken.empty() ? "" : "; broken: " + join(broken, "; ")) + ")");
    }
    plugin = found;
  }
  if (plugin->record.kind != kind) {
    throw PluginError(params.location("").str() + ": " + params.path() + ": '" + name_or_path +
                      "' is a " + plugin_kind_name(plugin->record.kind) + " plugin, not a " + what);
  }
  return *plugin;
}

namespace {

// Runs a plugin's factory in this process (after its supervised probe), locating what it refuses
// at its settings; the result shares ownership with a holder that also owns the library, so the
// object's code (its vtable, its deleter) outlives every use of it (boost.dll tutorial 8).
template <class T>
std::shared_ptr<T> build_from_plugin(const LoadedPlugin& plugin, Section& params,
                                     const std::function<std::shared_ptr<T>()>& make,
                                     const std::string& what) {
  const std::string who = "plugin '" + plugin.record.name + "' (" + plugin.record.file + ")";
  std::shared_ptr<T> made;
  try {
    made = make();
  } catch (const ConfigError& e) {
    // Locate what the plugin refused at its settings, unless its message already does.
    params.config().raise_errors();
    const Location where = params.location("");
    std::string msg = e.what();
    if (where.line > 0 && msg.rfind(where.file, 0) != 0) {
      msg = where.str() + ": " + params.path() + ": " + msg;
    }
    throw ConfigError(msg);
  } catch (const std::exception& e) {
    params.config().raise_errors();  // a bad setting recorded before the crash explains it best
    // LibTorch's what() carries a C++ backtrace: its first line is the message.
    const auto* c10e = dynamic_cast<const c10::Error*>(&e);
    const std::string why = c10e ? c10e->what_without_backtrace() : e.what();
    throw PluginError(who + " failed to build the " + what + " at " + params.location("").str() +
                      ": " + why.substr(0, why.find('\n')));
  } catch (...) {
    params.config().raise_errors();
    throw PluginError(who + " failed to build the " + what +
                      ": it threw an exception that is not a std::exception");
  }
  params.done();
  if (!made) throw PluginError(who + " returned no " + what);
  struct Holder {
    std::shared_ptr<boost::dll::shared_library> lib;  // declared first: destroyed last
    std::shared_ptr<T> object;
  };
  auto holder = std::make_shared<Holder>(Holder{plugin.lib, made});
  return std::shared_ptr<T>(holder, holder->object.get());
}

}  // namespace

std::shared_ptr<PositionScheme> PluginHost::create(const std::string& name_or_path, Section& params,
                                                   const PositionContext& ctx) {
  LoadedPlugin& plugin = impl_->find(name_or_path, params, kPluginKindPosition, search_path());
  params.accept("scheme");
  auto& factory = plugin.lib->get_alias<PositionFactory>(kFactoryAlias);
  // These settings at this shape built once in a supervised child, its hooks called there.
  detail::probe_factory(plugin.record.name, plugin.record.file, plugin.record.api_version, factory,
                        params, ctx);
  return build_from_plugin<PositionScheme>(
      plugin, params, [&] { return factory(params, ctx); }, "scheme");
}

std::shared_ptr<Mixer> PluginHost::create_mixer(const std::string& name_or_path, Section& params,
                                                const MixerContext& ctx) {
  LoadedPlugin& plugin = impl_->find(name_or_path, params, kPluginKindMixer, search_path());
  auto& factory = plugin.lib->get_alias<MixerFactory>(kMixerFactoryAlias);
  detail::probe_mixer_factory(plugin.record.name, plugin.record.file, factory, params, ctx);
  return build_from_plugin<Mixer>(
      plugin, params, [&] { return factory(params, ctx); }, "mixer");
}

namespace {
// The `plugins.paths` entries, resolved against the config file's folder. With `report`, every
// entry that names no readable folder is recorded at its line; without, it is left out.
std::vector<std::string> plugin_paths(const Config& cfg, bool report) {
  Section s = cfg.section("plugins");
  std::vector<std::string> paths;
  if (report) {
    paths = s.get<std::vector<std::string>>("paths", {});
    s.finish();
  } else {
    const YAML::Node n = cfg.lookup("plugins.paths");
    if (n.IsDefined() && n.IsSequence()) {
      for (const auto& e : n)
        if (e.IsScalar()) paths.push_back(e.Scalar());
    }
  }
  const fs::path base =
      cfg.file().empty() ? fs::current_path() : fs::path(cfg.file()).parent_path();
  // Each entry is checked here, where its line is known; discovery would name the folder only.
  std::vector<std::string> out;
  for (size_t i = 0; i < paths.size(); ++i) {
    std::string p = paths[i];
    const std::string key = "paths." + std::to_string(i);
    std::string why = p.empty() ? "an empty path names no plugin folder; remove it or write the "
                                  "folder"
                                : "";
    if (!p.empty() && !fs::path(p).is_absolute()) {
      p = fs::absolute(base / p).lexically_normal().string();
    }
    if (why.empty()) why = plugin_folder_problem(p, false);
    if (why.empty()) {
      out.push_back(p);
    } else if (report) {
      s.error(key, why);
    }
  }
  return out;
}
}  // namespace

std::unique_ptr<PluginHost> make_plugin_host(const Config& cfg) {
  std::vector<std::string> paths = plugin_paths(cfg, true);
  cfg.raise_errors();
  return std::make_unique<PluginHost>(paths);
}

std::unique_ptr<PluginHost> make_plugin_host_unchecked(const Config& cfg) {
  return std::make_unique<PluginHost>(plugin_paths(cfg, false));
}

}  // namespace hybridlab
