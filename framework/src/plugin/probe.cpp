// Supervised first runs of plugin code: a library's load and record, a scheme's build and hooks.

#include "plugin/probe.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/torch.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <set>

#include "hybridlab/position_hooks.h"
#include "plugin/library_registry.h"
#include "util/supervised.h"

namespace hybridlab::detail {
namespace {

constexpr const char* kInfoAlias = "hybridlab_plugin_info";
constexpr const char* kMixerInfoAlias = "hybridlab_mixer_info";

// A record string: a plugin's names are short text; a null or unterminated pointer is a broken
// record (read in the child, where a wild pointer costs nothing).
std::string record_string(const char* s, const char* field, const std::string& file) {
  if (!s) throw PluginError(fmt::format("plugin '{}': its record has no {}", file, field));
  const size_t n = ::strnlen(s, 4096);
  if (n == 4096) {
    throw PluginError(fmt::format("plugin '{}': its record's {} is not a string", file, field));
  }
  if (std::strcmp(field, "name") == 0 && n == 0)
    throw PluginError(fmt::format("plugin '{}': its record's name is empty", file));
  return std::string(s, n);
}

// A name YAML refers to (`scheme: NAME`, the section `model.NAME`): an identifier, so that it
// reads back as the same key and never needs quoting.
bool is_identifier(const std::string& s) {
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    const auto u = static_cast<unsigned char>(c);
    return std::isalnum(u) || c == '_';
  });
}

// "a, b" -> {"a", "b"}: the comma-separated keys of a record field, spaces around each dropped;
// {} for "".
std::vector<std::string> split_keys(const std::string& text) {
  std::vector<std::string> out;
  if (text.empty()) return out;
  size_t start = 0;
  while (true) {
    const size_t comma = text.find(',', start);
    std::string key = text.substr(start, comma == std::string::npos ? comma : comma - start);
    const size_t b = key.find_first_not_of(' '), e = key.find_last_not_of(' ');
    out.push_back(b == std::string::npos ? "" : key.substr(b, e - b + 1));
    if (comma == std::string::npos) return out;
    start = comma + 1;
  }
}

// `s` for a message: characters that are not printable ASCII as \xHH.
std::string printable(const std::string& s) {
  std::string out;
  for (char c : s) {
    const auto u = static_cast<unsigned char>(c);
    out += (u >= 0x20 && u < 0x7f) ? std::string(1, c) : fmt::format("\\x{:02x}", u);
  }
  return out;
}

// Why a plugin built with these ABI fields cannot run in this host ("" when it can).
// The host loads API versions oldest..newest.
std::string abi_problem(int api_version, int oldest, int newest, const std::string& torch_version,
                        int cxx11_abi, const std::string& file) {
  const PluginInfo host = host_plugin_info();
  if (api_version < oldest || api_version > newest) {
    return fmt::format(
        "plugin '{}' was built for hybridlab plugin API version {}, this hybridlab loads version "
        "{}: rebuild the plugin against this hybridlab",
        file, api_version,
        oldest == newest ? std::to_string(newest) : fmt::format("{} to {}", oldest, newest));
  }
  if (torch_version != host.torch_version) {
    return fmt::format(
        "plugin '{}' was built against LibTorch {}, this hybridlab runs LibTorch {}: rebuild the "
        "plugin against the same LibTorch",
        file, torch_version, host.torch_version);
  }
  if (cxx11_abi != host.cxx11_abi) {
    return fmt::format(
        "plugin '{}' was built with _GLIBCXX_USE_CXX11_ABI={}, this hybridlab with {}: rebuild the "
        "plugin with the same flag",
        file, cxx11_abi, host.cxx11_abi);
  }
  return "";
}

// Why a scheme with these hooks, from a plugin built against `api_version`, cannot run ("" when
// it can): a hook its API does not have would be called through a vtable slot it lacks.
std::string unknown_hooks_problem(uint32_t hooks, int api_version, const std::string& name) {
  const uint32_t unknown = hooks & ~known_hooks(api_version);
  if (unknown == 0) return "";
  return fmt::format(
      "positional scheme '{}' declares hooks ({}, mask {:#x}) that plugin API version {} does "
      "not have: rebuild the plugin against this hybridlab (plugin API version {})",
      name, hook_names(unknown), unknown, api_version, kPluginApiVersion);
}

PositionContext probe_context() {
  PositionContext ctx;
  ctx.d_model = 64;
  ctx.n_heads = 4;
  ctx.n_kv_heads = 4;
  ctx.head_dim = 16;
  ctx.train_length = 128;
  ctx.max_length = 128;
  ctx.layer_index = 0;
  return ctx;
}

// The fields of a record, NUL-separated, as the child returns them.
std::string encode(const ProbedLibrary& p) {
  return p.name + '\0' + p.version + '\0' + p.description + '\0' + std::to_string(p.hooks) + '\0' +
         p.refusal + '\0' + std::to_string(p.kind) + '\0' + std::to_string(p.api_version) + '\0' +
         fmt::format("{}", fmt::join(p.eval_safe_keys, ",")) + '\0' +
         std::string(1, p.letter);  // last: a scheme's letter is NUL, the separator
}

ProbedLibrary decode(const std::string& text) {
  std::vector<std::string> f(1);
  for (char c : text) {
    if (c == '\0')
      f.emplace_back();
    else
      f.back().push_back(c);
  }
  f.resize(9);
  ProbedLibrary p;
  p.name = f[0];
  p.version = f[1];
  p.description = f[2];
  p.hooks = static_cast<uint32_t>(std::strtoul(f[3].c_str(), nullptr, 10));
  p.refusal = f[4];
  p.kind = static_cast<int>(std::strtol(f[5].c_str(), nullptr, 10));
  p.api_version = static_cast<int>(std::strtol(f[6].c_str(), nullptr, 10));
  p.eval_safe_keys = split_keys(f[7]);
  p.letter = f[8].empty() ? '\0' : f[8][0];
  return p;
}

MixerContext mixer_probe_context() {
  MixerContext ctx;
  ctx.d_model = 64;
  ctx.layer_index = 0;
  ctx.train_length = 128;
  ctx.max_length = 128;
  return ctx;
}

// What a mixer declares about itself, checked before anything prints or multiplies it: figures
// that are negative, or a KV cache whose bytes at `length` overflow, are a broken plugin.
void check_mixer_declarations(const Mixer& m, const std::string& name, int64_t length) {
  const int doc = static_cast<int>(m.document_boundaries());
  if (doc != static_cast<int>(DocumentBoundaries::kSeparateRows) &&
      doc != static_cast<int>(DocumentBoundaries::kUnsupported)) {
    throw PluginError(fmt::format(
        "mixer '{}': its document_boundaries() returned {}, expected kSeparateRows (0) or "
        "kUnsupported (1)",
        name, doc));
  }
  const MixerInfo info = m.info(length);
  const auto refuse = [&](const std::string& what, const std::string& value) {
    throw PluginError(fmt::format("mixer '{}': its info({}) has {} = {}, expected {}", name, length,
                                  what, value, "a value >= 0 whose bytes fit in 64 bits"));
  };
  if (info.state_floats < 0) refuse("state_floats", std::to_string(info.state_floats));
  if (info.kv_floats_per_token < 0)
    refuse("kv_floats_per_token", std::to_string(info.kv_floats_per_token));
  if (info.kv_max_tokens < 0) refuse("kv_max_tokens", std::to_string(info.kv_max_tokens));
  if (!std::isfinite(info.flops_per_token) || info.flops_per_token < 0)
    refuse("flops_per_token", fmt::format("{}", info.flops_per_token));
  // Bytes of fp32 state and of the KV cache at the longest length it is asked about.
  const int64_t tokens = std::max<int64_t>({length, info.kv_max_tokens, 1});
  int64_t bytes = 0;
  if (__builtin_mul_overflow(info.state_floats, int64_t{4}, &bytes))
    refuse("state_floats", std::to_string(info.state_floats));
  if (__builtin_mul_overflow(info.kv_floats_per_token, tokens, &bytes) ||
      __builtin_mul_overflow(bytes, int64_t{4}, &bytes)) {
    refuse("kv_floats_per_token",
           fmt::format("{} (its cache at {} tokens overflows)", info.kv_floats_per_token, tokens));
  }
}

// One forward at [1, 8, d_model] without and with a decoding cache, its outputs checked.
void exercise_mixer(Mixer& m, const std::string& name, const MixerContext& ctx) {
  torch::NoGradGuard no_grad;
  check_mixer_declarations(m, name, std::max<int64_t>(ctx.max_length, 8));
  const torch::Tensor x = torch::randn({1, 8, ctx.d_model});
  const torch::Tensor pos = torch::arange(8, torch::kLong);
  std::unique_ptr<MixerCache> cache = m.make_cache();
  for (MixerCache* c : {static_cast<MixerCache*>(nullptr), cache.get()}) {
    const torch::Tensor y = m.forward(x, pos, c);
    const std::string where = c ? "forward with a decoding cache" : "forward";
    if (!y.defined() || y.sizes() != x.sizes() || y.scalar_type() != x.scalar_type()) {
      throw PluginError(fmt::format(
          "mixer '{}': {} at [1, 8, {}] float returned {}, expected a float tensor [1, 8, {}]",
          name, where, ctx.d_model,
          y.defined() ? fmt::format("{} {}", c10::toString(y.scalar_type()), c10::str(y.sizes()))
                      : std::string("no tensor"),
          ctx.d_model));
    }
    if (!torch::isfinite(y).all().item<bool>()) {
      throw PluginError(fmt::format("mixer '{}': {} at [1, 8, {}] returned non-finite values", name,
                                    where, ctx.d_model));
    }
  }
}

// The fields both kinds of record have: the ABI (a refusal when it does not match) and the names.
// false when the plugin is refused.
template <class Info>
bool read_record(const Info& info, int oldest, int newest, const std::string& file,
                 ProbedLibrary& out) {
  // Every API version so far has this record layout: a refused record still names its plugin,
  // so that a config that uses the name is told why the library is set aside.
  if (info.api_version >= 1 && info.api_version <= newest) {
    try {
      out.name = record_string(info.name, "name", file);
    } catch (const PluginError&) {
      out.name.clear();
    }
  }
  out.refusal =
      abi_problem(info.api_version, oldest, newest,
                  record_string(info.torch_version, "torch_version", file), info.cxx11_abi, file);
  if (!out.refusal.empty()) return false;
  out.api_version = info.api_version;
  out.name = record_string(info.name, "name", file);
  if (!is_identifier(out.name)) {
    const std::string shown = printable(out.name);
    out.name.clear();
    throw PluginError(fmt::format(
        "plugin '{}': its record's name '{}' is not an identifier (ASCII letters, digits and '_', "
        "not starting with a digit): configurations name it as a YAML key",
        file, shown));
  }
  out.version = record_string(info.version, "version", file);
  out.description = record_string(info.description, "description", file);
  return true;
}

// The record of a positional-scheme library, and its default scheme's hooks.
void probe_position_record(boost::dll::shared_library& lib, const std::string& file,
                           const StageFn& stage, ProbedLibrary& out) {
  const PluginInfo& info = lib.get_alias<const PluginInfo>(kInfoAlias);
  out.kind = kPluginKindPosition;
  if (!read_record(info, kPluginApiOldest, kPluginApiVersion, file, out)) return;
  stage("building a scheme with default settings (its factory)");
  auto& factory = lib.get_alias<PositionFactory>("hybridlab_position_factory");
  try {
    Config empty;
    Section params = empty.root();
    const std::shared_ptr<PositionScheme> s = factory(params, probe_context());
    stage("asking the scheme its hooks");
    if (s) out.hooks = s->hooks();
  } catch (const std::exception&) {
    out.hooks = 0;  // a scheme that needs settings: its hooks are known once it is configured
  }
  out.refusal = unknown_hooks_problem(out.hooks, out.api_version, out.name);
}

// The record of a mixer library; a mixer with default settings built once.
void probe_mixer_record(boost::dll::shared_library& lib, const std::string& file,
                        const StageFn& stage, ProbedLibrary& out) {
  const MixerPluginInfo& info = lib.get_alias<const MixerPluginInfo>(kMixerInfoAlias);
  out.kind = kPluginKindMixer;
  const auto letter = static_cast<unsigned char>(info.letter);
  const bool ascii_letter = (letter >= 'A' && letter <= 'Z') || (letter >= 'a' && letter <= 'z');
  // Known so that a pattern using the letter of a refused plugin is told why.
  if (ascii_letter && info.api_version >= 1 && info.api_version <= kMixerPluginApiVersion)
    out.letter = info.letter;
  if (!read_record(info, kMixerPluginApiOldest, kMixerPluginApiVersion, file, out))
    return;  // the API first
  // A version 2 record ends before this field: read it only from records that have it.
  if (info.api_version >= 3 && info.eval_safe_keys) {
    const std::string keys = record_string(info.eval_safe_keys, "eval_safe_keys", file);
    out.eval_safe_keys = split_keys(keys);
    for (const std::string& key : out.eval_safe_keys) {
      if (is_identifier(key)) continue;
      out.eval_safe_keys.clear();
      out.refusal = fmt::format(
          "plugin '{}': its record's eval_safe_keys '{}' must be keys of its section (identifiers) "
          "separated by commas, e.g. \"chunk_size\"",
          file, printable(keys));
      return;
    }
  }
  if (info.kind != kPluginKindMixer) {
    out.refusal = fmt::format("plugin '{}': its mixer record says kind {}, expected {} (a mixer)",
                              file, info.kind, static_cast<int>(kPluginKindMixer));
    return;
  }
  if (!ascii_letter) {
    out.refusal = fmt::format(
        "plugin '{}': its pattern letter must be an ASCII letter (A-Z, a-z), got character {}",
        file, static_cast<int>(letter));
    return;
  }
  stage("building a mixer with default settings (its factory)");
  auto& factory = lib.get_alias<MixerFactory>("hybridlab_mixer_factory");
  try {
    Config empty;
    Section params = empty.root();
    factory(params, mixer_probe_context());
  } catch (const std::exception&) {
    // A mixer that needs settings; its forward is run once it is configured (probe_mixer_factory).
  }
}

// The child's side of probe_library.
std::string probe_in_child(const std::string& file, const StageFn& stage) {
  ProbedLibrary out;
  stage("loading the library (its static initialisers)");
  std::shared_ptr<boost::dll::shared_library> lib;
  try {
    lib = load_library_for_process_lifetime(file);
  } catch (const std::exception& e) {
    out.refusal = fmt::format("cannot load plugin '{}': {}", file, e.what());
    return encode(out);
  }
  stage("reading its record");
  try {
    if (lib->has(kMixerInfoAlias)) {
      probe_mixer_record(*lib, file, stage, out);
    } else {
      probe_position_record(*lib, file, stage, out);
    }
  } catch (const PluginError& e) {
    out.refusal = e.what();
  }
  return encode(out);
}

std::string crash_message(const std::string& file, const Supervised& s) {
  return fmt::format("plugin '{}': {}{}", file, s.failure,
                     s.stage.empty() ? "" : " while " + s.stage);
}

// A hook's output at finite inputs must be finite: NaN would reach every logit and show up as a
// diverged loss. A bias may be -inf (a hard mask), never NaN or +inf.
void require_finite(const PositionScheme& s, const char* hook, const torch::Tensor& t,
                    bool bias = false) {
  if (!t.defined()) return;
  const bool ok =
      bias ? !(torch::isnan(t).any().item<bool>() || torch::isposinf(t).any().item<bool>())
           : torch::isfinite(t).all().item<bool>();
  if (ok) return;
  throw PluginError(fmt::format(
      "positional scheme '{}': its {} hook returned {} values at finite inputs (8 positions)",
      s.name(), hook, bias ? "NaN or +inf" : "non-finite"));
}

// Calls each hook `s` declares once at a small shape, its outputs checked.
void exercise_hooks(PositionScheme& s, const PositionContext& ctx) {
  torch::NoGradGuard no_grad;
  const int64_t T = s.max_length() > 0 ? std::min<int64_t>(8, s.max_length()) : 8;
  const torch::Tensor pos = torch::arange(T, torch::kLong);
  const uint32_t hooks = s.hooks();
  if ((hooks & kHookEmbed) && ctx.d_model > 0)
    require_finite(s, "embed", checked_embed(s, torch::randn({1, T, ctx.d_model}), pos));
  if (ctx.n_heads <= 0 || ctx.head_dim <= 0) return;
  const int64_t H = ctx.n_heads, Hkv = ctx.n_kv_heads > 0 ? ctx.n_kv_heads : H;
  const torch::Tensor q = torch::randn({1, H, T, ctx.head_dim});
  const torch::Tensor k = torch::randn({1, Hkv, T, ctx.head_dim});
  if (hooks & kHookRotate) {
    const auto [rq, rk] = checked_rotate(s, q, k, pos, pos);
    require_finite(s, "rotate", rq);
    require_finite(s, "rotate", rk);
  }
  if (hooks & kHookLogitBias) {
    require_finite(s, "logit_bias",
                   checked_logit_bias(s, pos, pos, H, torch::kFloat, torch::kFloat, torch::kCPU),
                   /*bias=*/true);
  }
  if (hooks & kHookFlops) {
    const double f = s.flops_per_token(T, T / 2.0);
    if (!std::isfinite(f) || f < 0) {
      throw PluginError(fmt::format(
          "positional scheme '{}': its flops_per_token returned {}, expected a finite number >= 0",
          s.name(), f));
    }
  }
  if ((hooks & kHookDataBias) && ctx.d_model > 0) {
    const torch::Tensor x = torch::randn({1, T, ctx.d_model});
    const DataBias first =
        checked_data_bias(s, x.narrow(1, 0, T / 2), pos.narrow(0, 0, T / 2), torch::Tensor(), H);
    const DataBias second = checked_data_bias(s, x.narrow(1, T / 2, T - T / 2),
                                              pos.narrow(0, T / 2, T - T / 2), first.state, H);
    for (const DataBias* d : {&first, &second}) {
      require_finite(s, "data_bias", d->query, /*bias=*/true);
      require_finite(s, "data_bias", d->key, /*bias=*/true);
    }
  }
  if (hooks & kHookRelative) {
    require_finite(s, "relative_logits", checked_relative_logits(s, q, pos, pos, torch::kFloat));
    require_finite(s, "relative_values",
                   checked_relative_values(s, torch::softmax(torch::randn({1, H, T, T}), -1), pos,
                                           pos, ctx.head_dim, torch::kFloat));
  }
}

std::string context_key(const PositionContext& c) {
  return fmt::format("{} {} {} {} {} {} {} {}", c.d_model, c.n_heads, c.n_kv_heads, c.head_dim,
                     c.causal, c.train_length, c.max_length, c.layer_index);
}

}  // namespace

ProbedLibrary probe_library(const std::string& file) {
  static std::mutex mu;
  static auto* done = new std::map<std::string, std::pair<ProbedLibrary, std::string>>();
  std::lock_guard<std::mutex> lock(mu);
  auto it = done->find(file);
  if (it == done->end()) {
    const Supervised s = run_supervised(
        [&](const StageFn& stage) { return probe_in_child(file, stage); }, plugin_time_limit());
    it = done->emplace(file, std::make_pair(s.returned ? decode(s.payload) : ProbedLibrary{},
                                            s.returned ? "" : crash_message(file, s)))
             .first;
  }
  if (!it->second.second.empty()) throw PluginCrashed(it->second.second);
  return it->second.first;
}

namespace {

// The first line of an exception's message (LibTorch's what() carries a C++ backtrace).
std::string first_line(const std::exception& e) {
  const auto* c10e = dynamic_cast<const c10::Error*>(&e);
  const std::string why = c10e ? c10e->what_without_backtrace() : e.what();
  return why.substr(0, std::min(why.find('\n'), size_t{600}));
}

// Runs `build` (returns nullptr when the factory throws: the caller's own call throws it again,
// located) and then `exercise` on what it built, in a supervised child, once per `key`.
template <class T>
void probe_once(const std::string& key, const std::string& name, const std::string& file,
                const std::string& what, const std::function<std::shared_ptr<T>()>& build,
                const std::function<void(T&)>& exercise) {
  static std::mutex mu;
  static auto* passed = new std::set<std::string>();
  {
    std::lock_guard<std::mutex> lock(mu);
    if (passed->count(key)) return;
  }
  const Supervised s = run_supervised(
      [&](const StageFn& stage) -> std::string {
        stage(what == "mixer" ? "building the mixer (its factory)"
                              : "building the scheme (its factory)");
        std::shared_ptr<T> made;
        try {
          made = build();
        } catch (const std::exception&) {
          return "";
        }
        if (!made) return "";
        stage(what == "mixer" ? "running its forward at a small shape"
                              : "calling its hooks at a small shape");
        try {
          exercise(*made);
        } catch (const PluginError& e) {
          return e.what();
        } catch (const std::exception& e) {
          return fmt::format("{} '{}': {} failed at a small shape (8 positions): {}", what, name,
                             what == "mixer" ? "its forward" : "a hook", first_line(e));
        }
        return "";
      },
      plugin_time_limit());
  if (!s.returned) throw PluginCrashed(crash_message(file, s));
  if (!s.payload.empty())
    throw PluginError(fmt::format("plugin '{}' ({}): {}", name, file, s.payload));
  std::lock_guard<std::mutex> lock(mu);
  passed->insert(key);
}

}  // namespace

void probe_factory(const std::string& name, const std::string& file, int api_version,
                   PositionFactory& factory, Section& params, const PositionContext& ctx) {
  probe_once<PositionScheme>(
      file + "\n" + YAML::Dump(params.node()) + "\n" + context_key(ctx), name, file,
      "positional scheme", [&] { return factory(params, ctx); },
      [&](PositionScheme& s) {
        const std::string problem = unknown_hooks_problem(s.hooks(), api_version, name);
        if (!problem.empty()) throw PluginError(problem);
        exercise_hooks(s, ctx);
      });
}

void probe_mixer_factory(const std::string& name, const std::string& file, MixerFactory& factory,
                         Section& params, const MixerContext& ctx) {
  const std::string context = fmt::format("mixer {} {} {} {} {}", ctx.d_model, ctx.layer_index,
                                          ctx.train_length, ctx.max_length, ctx.fused_kernels);
  // A layer's override reads its absent keys from its base: the settings are all of them.
  std::string settings;
  for (const Section* s = &params; s; s = s->base()) settings += YAML::Dump(s->node()) + "\n";
  probe_once<Mixer>(
      file + "\n" + settings + context, name, file, "mixer", [&] { return factory(params, ctx); },
      [&](Mixer& m) { exercise_mixer(m, name, ctx); });
}

}  // namespace hybridlab::detail
