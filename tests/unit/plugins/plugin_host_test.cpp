// The plugin host: discovery, ABI checks, bad plugins, lifetime, explicit paths.

#include <fmt/format.h>
#include <unistd.h>
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "hybridlab/plugin_host.h"
#include "support/tensor_match.h"

using namespace hybridlab;
using Catch::Matchers::Contains;
namespace fs = std::filesystem;

// A named namespace per test file keeps its helpers apart in a unity build.
namespace plugin_host_test {
namespace {
const std::string kFixtures = std::string(HYBRIDLAB_BINARY_DIR) + "/test-fixtures/";

PositionContext small_context() {
  PositionContext ctx;
  ctx.d_model = 32;
  ctx.n_heads = 2;
  ctx.n_kv_heads = 2;
  ctx.head_dim = 16;
  ctx.train_length = 16;
  ctx.max_length = 16;
  return ctx;
}

std::string plugin_error(const std::function<void()>& f) {
  try {
    f();
  } catch (const PluginError& e) {
    return e.what();
  }
  return "<no PluginError>";
}

std::shared_ptr<PositionScheme> build(PluginHost& host, const std::string& scheme,
                                      const std::string& yaml = "{}") {
  Config cfg = Config::parse(yaml, "test.yaml");
  Section params = cfg.root();
  return host.create(scheme, params, small_context());
}
}  // namespace

TEST_CASE("the host discovers nope in the plugin folder and builds it", "[plugins]") {
  PluginHost host(test::test_plugin_dirs());
  const auto records = host.plugins();
  auto it = std::find_if(records.begin(), records.end(), [](auto& r) { return r.name == "nope"; });
  REQUIRE(it != records.end());
  CHECK(it->version == "1.0");
  CHECK(it->hooks == kHookNone);
  CHECK_THAT(it->file, Contains("nope.so"));
  auto scheme = build(host, "nope");
  CHECK(scheme->name() == "nope");
  CHECK(scheme->hooks() == kHookNone);
  CHECK(scheme->parameters().empty());
}

TEST_CASE("an unknown scheme name lists the available ones", "[plugins]") {
  PluginHost host(test::test_plugin_dirs());
  const std::string msg = plugin_error([&] { build(host, "nopee"); });
  CHECK_THAT(msg, Contains("unknown positional scheme 'nopee'") &&
                      Contains("did you mean 'nope'") && Contains("available: ") &&
                      Contains("nope"));
}

TEST_CASE("a .so that is not a hybridlab plugin is refused by name", "[plugins]") {
  PluginHost host;
  const std::string so = kFixtures + "not_a_plugin/not_a_plugin.so";
  const std::string msg = plugin_error([&] { host.load_file(so); });
  CHECK_THAT(msg, Contains("not_a_plugin.so") && Contains("is not a hybridlab plugin"));
  // A folder holding only foreign libraries yields no plugins and no error.
  PluginHost scan({kFixtures + "not_a_plugin"});
  CHECK_NOTHROW(scan.discover());
  // ... but it is named, with the reason, when a scheme is not found.
  REQUIRE(scan.skipped_files().size() == 1);
  CHECK_THAT(scan.skipped_files()[0], Contains("not_a_plugin.so (it exports no hybridlab plugin"));
  CHECK_THAT(plugin_error([&] { build(scan, "not_a_plugin"); }),
             Contains("skipped: ") && Contains("not_a_plugin.so"));
}

TEST_CASE("a file that is not a library at all is refused", "[plugins]") {
  const auto path = fs::temp_directory_path() / "hybridlab_fake_plugin.so";
  std::ofstream(path) << "not an ELF file";
  PluginHost host;
  CHECK_THAT(plugin_error([&] { host.load_file(path.string()); }),
             Contains("not a hybridlab plugin") && Contains("not a shared library"));
}

TEST_CASE("an ABI mismatch names both versions and never calls the factory", "[plugins]") {
  PluginHost host;
  const std::string msg = plugin_error([&] { build(host, kFixtures + "bad_abi/bad_abi.so"); });
  CHECK_THAT(msg, Contains("plugin API version 999") &&
                      Contains(fmt::format("this hybridlab loads version {} to {}",
                                           kPluginApiOldest, kPluginApiVersion)));
  // On the search path it is set aside with the same reason; discovery goes on.
  PluginHost scan({kFixtures + "bad_abi"});
  CHECK_NOTHROW(scan.discover());
  REQUIRE(scan.set_aside_plugins().size() == 1u);
  CHECK_THAT(scan.set_aside_plugins()[0].reason, Contains("999"));
}

TEST_CASE("a plugin built against API v1 loads and runs, a v2 hook from it is refused",
          "[plugins][api]") {
  REQUIRE(kPluginApiOldest == 1);
  REQUIRE(known_hooks(1) == (kHookEmbed | kHookRotate | kHookLogitBias | kHookRelative));
  REQUIRE(known_hooks(2) == (known_hooks(1) | kHookDataBias | kHookFlops));
  REQUIRE(known_hooks(3) == (known_hooks(2) | kHookContentBias));
  CHECK(known_hooks(0) == 0);
  CHECK(known_hooks(4) == 0);
  PluginHost host({kFixtures + "api_v1"});
  const PluginRecord r = host.load_file(kFixtures + "api_v1/api_v1.so");
  CHECK(r.api_version == 1);
  CHECK(r.hooks == kHookLogitBias);
  auto scheme = build(host, "api_v1");
  const torch::Tensor bias = scheme->logit_bias(torch::arange(3), torch::arange(3));
  REQUIRE(bias.sizes() == at::IntArrayRef({2, 3, 3}));
  CHECK(bias[1][2][0].item<float>() == -2.0f);
  CHECK(bias[0][0][2].item<float>() == -2.0f);
  // Declaring data_bias from a v1 record: the host would call a vtable slot the plugin lacks.
  const std::string msg = plugin_error([&] { build(host, "api_v1", "{mode: data_bias}"); });
  CHECK_THAT(msg, Contains("api_v1") && Contains("plugin API version 1 does not have") &&
                      Contains("rebuild the plugin"));
}

TEST_CASE("a plugin built against API v2 loads and runs, a v3 hook from it is refused",
          "[plugins][api]") {
  REQUIRE(kPluginApiVersion == 3);
  PluginHost host({kFixtures + "api_v2"});
  const PluginRecord r = host.load_file(kFixtures + "api_v2/api_v2.so");
  CHECK(r.api_version == 2);
  CHECK(r.hooks == kHookDataBias);
  auto scheme = build(host, "api_v2");
  const DataBias d = scheme->data_bias(torch::zeros({1, 3, 4}), torch::arange(3), {});
  CHECK((d.query.unsqueeze(-1) + d.key.unsqueeze(-2)).eq(-1).all().item<bool>());
  // Declaring content_bias from a v2 record: the host would call a vtable slot the plugin lacks.
  const std::string msg = plugin_error([&] { build(host, "api_v2", "{mode: content_bias}"); });
  CHECK_THAT(msg, Contains("api_v2") && Contains("plugin API version 2 does not have") &&
                      Contains("content_bias") && Contains("rebuild the plugin"));
}

TEST_CASE("a mixer plugin built against mixer API v2 loads and runs, with no eval-safe keys",
          "[plugins][api]") {
  REQUIRE(kMixerPluginApiVersion == 4);
  REQUIRE(kMixerPluginApiOldest == 2);
  PluginHost host({kFixtures + "mixer_api_v2", HYBRIDLAB_TEST_PLUGIN_DIR});
  const PluginRecord r = host.load_file(kFixtures + "mixer_api_v2/mixer_api_v2.so");
  CHECK(r.api_version == 2);
  CHECK(r.kind == kPluginKindMixer);
  CHECK(r.letter == 'V');
  CHECK(r.eval_safe_keys.empty());  // its record ends before the field: never read
  Config cfg = Config::parse("{chunk_size: 8}", "test.yaml");
  Section params = cfg.root();
  MixerContext ctx;
  ctx.d_model = 4;
  ctx.train_length = ctx.max_length = 8;
  auto mixer = host.create_mixer("mixer_v2", params, ctx);
  const torch::Tensor x = torch::arange(8, torch::kFloat).view({1, 2, 4});
  CHECK(torch::equal(mixer->forward(x, torch::arange(2), nullptr), 2 * x));
  // A current record's keys arrive as it lists them.
  CHECK(host.load_file(std::string(HYBRIDLAB_TEST_PLUGIN_DIR) + "/mamba2.so").eval_safe_keys ==
        std::vector<std::string>{"chunk_size"});
}

TEST_CASE("a factory that throws is reported with its message", "[plugins]") {
  PluginHost host({kFixtures + "throwing"});
  const std::string msg = plugin_error([&] { build(host, "throwing"); });
  CHECK_THAT(msg, Contains("plugin 'throwing'") && Contains("throwing.so") &&
                      Contains("rotary tables need CUDA 99 (fixture failure)"));
}

TEST_CASE("two plugins with one name are refused with both paths where the name is used",
          "[plugins]") {
  PluginHost host({kFixtures + "duplicate_nope", HYBRIDLAB_TEST_PLUGIN_DIR});
  CHECK_NOTHROW(host.discover());  // the other plugins stay usable
  CHECK(build(host, "rope"));
  const std::string msg = plugin_error([&] { build(host, "nope"); });
  CHECK_THAT(msg, Contains("two plugins are named 'nope'") && Contains("duplicate_nope.so") &&
                      Contains(std::string(HYBRIDLAB_TEST_PLUGIN_DIR) + "/nope.so") &&
                      Contains("set aside"));
}

TEST_CASE("refused records on the search path are set aside, the other plugins work",
          "[plugins][set_aside]") {
  PluginHost host({kFixtures + "bad_abi", kFixtures + "null_name", kFixtures + "bad_name",
                   kFixtures + "stale_mixer", HYBRIDLAB_TEST_PLUGIN_DIR});
  CHECK_NOTHROW(host.discover());
  const std::vector<SetAsidePlugin> aside = host.set_aside_plugins();
  REQUIRE(aside.size() == 4u);
  CHECK_THAT(aside[0].reason, Contains("999"));
  CHECK_THAT(aside[1].reason, Contains("null_name.so") && Contains("has no name"));
  CHECK_THAT(aside[2].reason, Contains("'my scheme' is not an identifier"));
  CHECK(aside[3].name == "stale_mixer");
  CHECK(aside[3].kind == kPluginKindMixer);
  CHECK(aside[3].letter == 'X');
  CHECK_THAT(aside[3].reason, Contains("version 1"));
  // The shipped plugins stay usable: a scheme and the DeltaNet mixer.
  CHECK(build(host, "rope"));
  Config cfg = Config::parse("{num_heads: 2, chunk_size: 16}", "test.yaml");
  Section params = cfg.root();
  MixerContext ctx;
  ctx.d_model = 16;
  ctx.train_length = ctx.max_length = 16;
  CHECK(host.create_mixer("deltanet", params, ctx));
  // Naming the set-aside one says which library and why.
  Config empty = Config::parse("{}", "test.yaml");
  Section none = empty.root();
  CHECK_THAT(plugin_error([&] { host.create_mixer("stale_mixer", none, ctx); }),
             Contains("stale_mixer.so") && Contains("set aside") && Contains("version 1"));
}

TEST_CASE("the probe refuses what a mixer declares out of range", "[plugins][probe]") {
  PluginHost host({kFixtures + "misbehaving_mixer"});
  MixerContext ctx;
  ctx.d_model = 16;
  ctx.train_length = ctx.max_length = 16;
  const auto refused = [&](const std::string& action) {
    Config cfg = Config::parse("{action: " + action + "}", "test.yaml");
    Section params = cfg.root();
    return plugin_error([&] { host.create_mixer("misbehaving_mixer", params, ctx); });
  };
  CHECK_THAT(refused("negative_state"), Contains("state_floats = -4"));
  CHECK_THAT(refused("kv_overflow"), Contains("kv_floats_per_token") && Contains("overflows"));
  CHECK_THAT(refused("bad_boundaries"), Contains("document_boundaries() returned 7"));
  Config cfg = Config::parse("{action: none}", "test.yaml");
  Section params = cfg.root();
  CHECK(host.create_mixer("misbehaving_mixer", params, ctx));
}

TEST_CASE("the probe refuses a position hook that returns NaN", "[plugins][probe]") {
  PluginHost host({kFixtures + "misbehaving"});
  // at_call 0: NaN from every call, the probe's included.
  CHECK_THAT(plugin_error([&] { build(host, "misbehaving", "{action: nan, at_call: 0}"); }),
             Contains("misbehaving") && Contains("rotate hook returned non-finite values"));
  CHECK(build(host, "misbehaving", "{action: none}"));
}

TEST_CASE("an unreadable or missing plugin folder is an error naming it", "[plugins]") {
  const auto file = fs::temp_directory_path() / "hybridlab_not_a_folder";
  std::ofstream(file) << "x";
  PluginHost a({file.string()});
  CHECK_THAT(plugin_error([&] { a.discover(); }),
             Contains(file.string()) && Contains("not a folder"));
  PluginHost b({"/nonexistent/hybridlab/plugins"});
  CHECK_THAT(plugin_error([&] { b.discover(); }),
             Contains("/nonexistent/hybridlab/plugins") && Contains("does not exist"));
  if (::geteuid() != 0) {  // root reads any folder, so this part needs an ordinary user
    const auto dir = fs::temp_directory_path() / "hybridlab_locked_plugins";
    fs::create_directories(dir);
    fs::permissions(dir, fs::perms::none);
    PluginHost c({dir.string()});
    CHECK_THAT(plugin_error([&] { c.discover(); }), Contains("cannot read plugin folder"));
    fs::permissions(dir, fs::perms::owner_all);
  }
}

TEST_CASE("a scheme outlives the host that made it", "[plugins]") {
  std::shared_ptr<PositionScheme> scheme;
  {
    PluginHost host(test::test_plugin_dirs());
    scheme = build(host, "nope");
  }                                 // host and its map of libraries are gone
  CHECK(scheme->name() == "nope");  // virtual calls still reach the plugin's code
  CHECK(scheme->hooks() == kHookNone);
  auto copy = scheme;
  scheme.reset();
  CHECK(copy->name() == "nope");
  copy.reset();  // the plugin's deleter runs with its library still loaded
  SUCCEED();
}

TEST_CASE("an explicit .so path works as a scheme name", "[plugins]") {
  PluginHost host;
  auto scheme = build(host, std::string(HYBRIDLAB_TEST_PLUGIN_DIR) + "/nope.so");
  CHECK(scheme->name() == "nope");
  CHECK_THAT(plugin_error([&] { build(host, "/nonexistent/x.so"); }), Contains("does not exist"));
}

TEST_CASE("HYBRIDLAB_PLUGIN_PATH is searched", "[plugins]") {
  ::setenv("HYBRIDLAB_PLUGIN_PATH", (kFixtures + "throwing:" + kFixtures + "not_a_plugin").c_str(),
           1);
  PluginHost host;
  const auto path = host.search_path();
  ::unsetenv("HYBRIDLAB_PLUGIN_PATH");
  REQUIRE(path.size() >= 2);
  CHECK(path[0] == kFixtures + "throwing");
  CHECK(path[1] == kFixtures + "not_a_plugin");
  ::setenv("HYBRIDLAB_PLUGIN_PATH", (kFixtures + "throwing").c_str(), 1);
  PluginHost host2;
  const auto records = host2.plugins();
  ::unsetenv("HYBRIDLAB_PLUGIN_PATH");
  CHECK(std::any_of(records.begin(), records.end(), [](auto& r) { return r.name == "throwing"; }));
}

TEST_CASE("unknown scheme parameters are config errors with a suggestion", "[plugins]") {
  PluginHost host(test::test_plugin_dirs());
  try {
    build(host, "nope", "{scheme: nope, rope_theta: 10000}");
    FAIL("expected a ConfigError");
  } catch (const ConfigError& e) {
    CHECK_THAT(std::string(e.what()), Contains("test.yaml:1:16: rope_theta: unknown key"));
  }
}

TEST_CASE("plugins.paths in the YAML are searched relative to the file", "[plugins]") {
  const auto dir = fs::temp_directory_path() / "hybridlab_paths_test";
  fs::create_directories(dir);
  const auto yaml = dir / "exp.yaml";
  fs::create_directories(dir / "local_plugins");
  std::ofstream(yaml) << "plugins:\n  paths: [" << kFixtures << "throwing, local_plugins]\n";
  Config cfg = Config::load(yaml.string());
  auto host = make_plugin_host(cfg);
  const auto path = host->search_path();
  REQUIRE(path.size() >= 2);
  CHECK(path[0] == kFixtures + "throwing");
  CHECK(path[1] == (dir / "local_plugins").string());
}

TEST_CASE("plugins.paths entries that cannot be searched are errors at their line", "[plugins]") {
  const auto dir =
      fs::temp_directory_path() / ("hybridlab_paths_bad_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::ofstream(dir / "a_file") << "x";
  const auto yaml = dir / "exp.yaml";
  std::ofstream(yaml) << "plugins:\n  paths: [missing, a_file, '']\n";
  Config cfg = Config::load(yaml.string());
  std::string msg;
  try {
    make_plugin_host(cfg);
  } catch (const ConfigError& e) {
    msg = e.what();
  }
  const std::string f = yaml.string();
  CHECK_THAT(msg, Contains(f + ":2:11: plugins.paths.0: plugin folder '" +
                           (dir / "missing").string() + "' does not exist"));
  CHECK_THAT(msg, Contains(f + ":2:20: plugins.paths.1: plugin folder '" +
                           (dir / "a_file").string() + "' is not a folder"));
  CHECK_THAT(msg, Contains(f + ":2:28: plugins.paths.2: an empty path"));
  fs::remove_all(dir);
}

TEST_CASE("a scheme path that is not a plugin is an error at the scheme's line", "[plugins]") {
  PluginHost host;
  const std::string yaml = "position: {scheme: " + kFixtures + "not_a_plugin/not_a_plugin.so}\n";
  Config cfg = Config::parse(yaml, "exp.yaml");
  Section params = cfg.section("position");
  CHECK_THAT(
      plugin_error([&] {
        host.create(kFixtures + "not_a_plugin/not_a_plugin.so", params, small_context());
      }),
      Contains("exp.yaml:1:12: position.scheme: '") && Contains("is not a hybridlab plugin"));
}

}  // namespace plugin_host_test
