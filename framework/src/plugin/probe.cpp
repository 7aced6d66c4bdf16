// Supervised first runs of plugin code: a library's load and record, a scheme's build and hooks.

#include "plugin/probe.h"

#include <fmt/format.h>
#include <torch/torch.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <mutex>
#include <set>

#include "layers/position_hooks.h"
#include "plugin/library_registry.h"
#include "plugin/supervised.h"

namespace hybridlab::detail {
namespace {

constexpr const char* kInfoAlias = "hybridlab_plugin_info";

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

// Why a plugin built as `info` says cannot run in this host ("" when it can).
std::string abi_problem(const PluginInfo& info, const std::string& torch_version,
                        const std::string& file) {
  const PluginInfo host = host_plugin_info();
  if (info.api_version != host.api_version) {
    return fmt::format(
        "plugin '{}' was built for hybridlab plugin API version {}, this hybridlab has version "
        "{}: rebuild the plugin against this hybridlab",
        file, info.api_version, host.api_version);
  }
  if (torch_version != host.torch_version) {
    return fmt::format(
        "plugin '{}' was built against LibTorch {}, this hybridlab runs LibTorch {}: rebuild the "
        "plugin against the same LibTorch",
        file, torch_version, host.torch_version);
  }
  if (info.cxx11_abi != host.cxx11_abi) {
    return fmt::format(
        "plugin '{}' was built with _GLIBCXX_USE_CXX11_ABI={}, this hybridlab with {}: rebuild the "
        "plugin with the same flag",
        file, info.cxx11_abi, host.cxx11_abi);
  }
  return "";
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
         p.refusal;
}

ProbedLibrary decode(const std::string& text) {
  std::vector<std::string> f(1);
  for (char c : text) {
    if (c == '\0')
      f.emplace_back();
    else
      f.back().push_back(c);
  }
  f.resize(5);
  return {f[0], f[1], f[2], static_cast<uint32_t>(std::strtoul(f[3].c_str(), nullptr, 10)), f[4]};
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
    const PluginInfo& info = lib->get_alias<const PluginInfo>(kInfoAlias);
    out.refusal = abi_problem(info, record_string(info.torch_version, "torch_version", file), file);
    if (!out.refusal.empty()) return encode(out);
    out.name = record_string(info.name, "name", file);
    out.version = record_string(info.version, "version", file);
    out.description = record_string(info.description, "description", file);
  } catch (const PluginError& e) {
    out.refusal = e.what();
    return encode(out);
  }
  stage("building a scheme with default settings (its factory)");
  auto& factory = lib->get_alias<PositionFactory>("hybridlab_position_factory");
  try {
    Config empty;
    Section params = empty.root();
    const std::shared_ptr<PositionScheme> s = factory(params, probe_context());
    stage("asking the scheme its hooks");
    if (s) out.hooks = s->hooks();
  } catch (const std::exception&) {
    out.hooks = 0;  // a scheme that needs settings: its hooks are known once it is configured
  }
  return encode(out);
}

std::string crash_message(const std::string& file, const Supervised& s) {
  return fmt::format("plugin '{}': {}{}", file, s.failure,
                     s.stage.empty() ? "" : " while " + s.stage);
}

// Calls each hook `s` declares once at a small shape, its outputs checked.
void exercise_hooks(PositionScheme& s, const PositionContext& ctx) {
  torch::NoGradGuard no_grad;
  const int64_t T = s.max_length() > 0 ? std::min<int64_t>(8, s.max_length()) : 8;
  const torch::Tensor pos = torch::arange(T, torch::kLong);
  const uint32_t hooks = s.hooks();
  if ((hooks & kHookEmbed) && ctx.d_model > 0)
    checked_embed(s, torch::randn({1, T, ctx.d_model}), pos);
  if (ctx.n_heads <= 0 || ctx.head_dim <= 0) return;
  const int64_t H = ctx.n_heads, Hkv = ctx.n_kv_heads > 0 ? ctx.n_kv_heads : H;
  const torch::Tensor q = torch::randn({1, H, T, ctx.head_dim});
  const torch::Tensor k = torch::randn({1, Hkv, T, ctx.head_dim});
  if (hooks & kHookRotate) checked_rotate(s, q, k, pos, pos);
  if (hooks & kHookLogitBias)
    checked_logit_bias(s, pos, pos, H, torch::kFloat, torch::kFloat, torch::kCPU);
  if (hooks & kHookRelative) {
    checked_relative_logits(s, q, pos, pos, torch::kFloat);
    checked_relative_values(s, torch::softmax(torch::randn({1, H, T, T}), -1), pos, pos,
                            ctx.head_dim, torch::kFloat);
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

void probe_factory(const std::string& name, const std::string& file, PositionFactory& factory,
                   Section& params, const PositionContext& ctx) {
  static std::mutex mu;
  static auto* passed = new std::set<std::string>();
  const std::string key = file + "\n" + YAML::Dump(params.node()) + "\n" + context_key(ctx);
  {
    std::lock_guard<std::mutex> lock(mu);
    if (passed->count(key)) return;
  }
  const Supervised s = run_supervised(
      [&](const StageFn& stage) -> std::string {
        stage("building the scheme (its factory)");
        std::shared_ptr<PositionScheme> made;
        try {
          made = factory(params, ctx);
        } catch (const std::exception&) {
          return "";  // the caller's own call throws it again, located
        }
        if (!made) return "";
        stage("calling its hooks at a small shape");
        try {
          exercise_hooks(*made, ctx);
        } catch (const PluginError& e) {
          return e.what();
        } catch (const c10::Error& e) {
          // LibTorch's what() carries a C++ backtrace: its first line is the message.
          const std::string why = e.what_without_backtrace();
          return fmt::format(
              "positional scheme '{}': a hook failed at a small shape ({} positions): {}", name, 8,
              why.substr(0, std::min(why.find('\n'), size_t{600})));
        } catch (const std::exception& e) {
          const std::string why = e.what();
          return fmt::format(
              "positional scheme '{}': a hook failed at a small shape ({} positions): {}", name, 8,
              why.substr(0, std::min(why.find('\n'), size_t{600})));
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

}  // namespace hybridlab::detail
