// Strict YAML configuration: extends, overrides, locations, unknown keys, types, ranges.

#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <optional>

#include "hybridlab/config.h"
#include "hybridlab/runtime.h"

using Catch::Matchers::Contains;
using hybridlab::Config;
using hybridlab::ConfigError;
using hybridlab::Section;

// A named namespace per test file keeps its helpers apart in a unity build.
namespace config_test {
namespace {
const std::string kFixtures = std::string(HYBRIDLAB_SOURCE_DIR) + "/tests/fixtures/config/";

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "<no ConfigError>";
}

std::string temp_file(const std::string& name, const std::string& text) {
  const auto dir = std::filesystem::temp_directory_path() / "hybridlab_config_test";
  std::filesystem::create_directories(dir);
  const auto path = (dir / name).string();
  std::ofstream(path) << text;
  return path;
}
}  // namespace

TEST_CASE("assigning one section to another rebinds it and leaves the tree alone", "[config]") {
  // yaml-cpp's Node assignment writes into the tree; a Section assignment must not (a layer
  // override's position once replaced model.attention.position this way).
  Config cfg = Config::parse(
      "base: {scheme: rope, rope_theta: 500000}\nlayer: {scheme: alibi, mode: causal}\n", "t.yaml");
  Section base = cfg.section("base");
  Section copy = base;
  copy = cfg.section("layer");
  CHECK(copy.path() == "layer");
  CHECK(copy.get<std::string>("mode", "") == "causal");
  CHECK(base.keys() == std::vector<std::string>{"scheme", "rope_theta"});
  CHECK(cfg.section("base").get<double>("rope_theta", 0) == 500000);
  CHECK_FALSE(cfg.section("base").has("mode"));
  std::optional<Section> held = cfg.section("base");
  held = cfg.section("layer");  // optional's assignment goes through Section's
  CHECK(cfg.section("base").get<std::string>("scheme", "") == "rope");
}

TEST_CASE("a section over a base reads absent keys from it, each problem where it stands",
          "[config]") {
  Config cfg = Config::parse(
      "base: {heads: 4, window: 64, eps: bad, position: {scheme: rope}, typo: 1}\n"
      "layer: {window: 8, extra: 2}\n",
      "o.yaml");
  Section layer = cfg.section("layer").over(cfg.section("base"));
  CHECK(layer.get<int64_t>("window", 0) == 8);  // its own value
  CHECK(layer.get<int64_t>("heads", 0) == 4);   // the base's
  CHECK(layer.get<int64_t>("depth", 3) == 3);   // neither: the default
  CHECK(layer.get<double>("eps", 0.5) == 0.5);  // the base's value is bad: the fallback
  CHECK(layer.has("heads"));
  CHECK(layer.keys() == std::vector<std::string>{"window", "extra"});
  Section position = layer.child("position");  // a map only the base has: the base's own
  CHECK(position.path() == "base.position");
  CHECK(position.get<std::string>("scheme", "") == "rope");
  layer.finish();
  // Values read through the layer are recorded under it; the base's map is left where it is.
  const YAML::Node resolved = cfg.resolved();
  CHECK(resolved["layer"]["heads"].as<int64_t>() == 4);
  CHECK(resolved["layer"]["depth"].as<int64_t>() == 3);
  CHECK_FALSE(resolved["layer"]["position"].IsDefined());
  CHECK(resolved["base"]["position"]["scheme"].as<std::string>() == "rope");
  // Each problem once, at its own key: the bad value and the unknown key of the base in the base,
  // the unknown key of the layer in the layer.
  const std::vector<std::string>& errors = cfg.errors();
  REQUIRE(errors.size() == 3u);
  CHECK_THAT(errors[0], Contains("o.yaml:1:") && Contains("base.eps: expected a finite number"));
  CHECK_THAT(errors[1], Contains("o.yaml:1:") && Contains("base.typo: unknown key 'typo'"));
  CHECK_THAT(errors[2], Contains("o.yaml:2:") && Contains("layer.extra: unknown key 'extra'"));
  // A problem found with a value the base holds is named there, saying who read it.
  layer.error("heads", "too many for this layer");
  REQUIRE(cfg.errors().size() == 4u);
  CHECK_THAT(cfg.errors()[3],
             Contains("o.yaml:1:") && Contains("base.heads: too many for this layer (as layer "
                                               "reads it)"));
  // A map the layer names replaces the base's whole.
  Config named = Config::parse(
      "base: {position: {scheme: rope, theta: 9}}\n"
      "layer: {position: {scheme: alibi}}\n",
      "n.yaml");
  Section own = named.section("layer").over(named.section("base")).child("position");
  CHECK(own.path() == "layer.position");
  CHECK_FALSE(own.has("theta"));
}

TEST_CASE("a value that is not a map is reported once and left in the tree", "[config]") {
  // The reader that finds a scalar where a map belongs must not write a null over it: a second
  // reader of the key (a layer override over its section) would then report a missing value.
  Config cfg = Config::parse("base: {position: rope}\nlayer: {window: 8, eps:}\n", "m.yaml");
  Section base = cfg.section("base");
  base.child("position");
  Section layer = cfg.section("layer").over(cfg.section("base"));
  layer.child("position");
  layer.get<int64_t>("window", 0);
  layer.get<double>("eps", 1.0);
  layer.finish();
  CHECK(cfg.section("base").node()["position"].Scalar() == "rope");
  // One line each: the scalar, and the key with no value (never also an unknown key).
  REQUIRE(cfg.errors().size() == 2u);
  CHECK_THAT(cfg.errors()[0], Contains("base.position: expected a map of keys, got 'rope'"));
  CHECK_THAT(cfg.errors()[1], Contains("layer.eps: the key has no value"));
}

TEST_CASE("a missing config file is an error naming the file", "[config]") {
  const std::string msg = error_of([] { Config::load("/nonexistent/exp.yaml"); });
  CHECK_THAT(msg, Contains("/nonexistent/exp.yaml") && Contains("does not exist"));
}

TEST_CASE("a YAML syntax error names file, line and column", "[config]") {
  // Line 3 opens a flow list that never closes.
  const auto path = temp_file("syntax.yaml", "model:\n  d_model: 64\n  layers: [a, b\n");
  const std::string msg = error_of([&] { Config::load(path); });
  CHECK_THAT(msg, Contains(path + ":") && Contains("YAML syntax error"));
  // yaml-cpp reports the position where the flow sequence is found to be unterminated.
  CHECK_THAT(msg, Contains(":4:") || Contains(":3:"));
}

TEST_CASE("duplicate keys are refused with their location", "[config]") {
  const auto path = temp_file("dup.yaml", "runtime:\n  seed: 1\n  seed: 2\n");
  const std::string msg = error_of([&] { Config::load(path); });
  CHECK_THAT(msg, Contains(path + ":3:3") && Contains("runtime.seed") && Contains("duplicate"));
}

TEST_CASE("unknown keys, wrong types: all reported at once with file:line:col", "[config]") {
  Config cfg = Config::load(kFixtures + "typos.yaml");
  const std::string msg = error_of([&] {
    hybridlab::read_runtime_options(cfg.section("runtime"));
    cfg.raise_errors();
  });
  CHECK_THAT(msg, Contains("3 problems"));
  CHECK_THAT(
      msg,
      Contains("typos.yaml:2:3: runtime.thread: unknown key 'thread'; did you mean 'threads'?"));
  CHECK_THAT(
      msg,
      Contains("typos.yaml:3:3: runtime.devise: unknown key 'devise'; did you mean 'device'?"));
  CHECK_THAT(msg, Contains("typos.yaml:4:3: runtime.seed: expected an integer, got 'one'"));
}

TEST_CASE("out-of-range values are errors at the key", "[config]") {
  Config cfg = Config::parse("runtime:\n  threads: -3\n  device: gpu\n", "inline.yaml");
  const std::string msg = error_of([&] {
    hybridlab::read_runtime_options(cfg.section("runtime"));
    cfg.raise_errors();
  });
  CHECK_THAT(msg, Contains("inline.yaml:2:3: runtime.threads: must be 'auto' or >= 1"));
  CHECK_THAT(msg, Contains("inline.yaml:3:3: runtime.device: expected 'cpu', 'cuda' or 'cuda:N'"));
}

TEST_CASE("extends: base first, then the file, then command-line overrides", "[config]") {
  Config cfg = Config::load(kFixtures + "child.yaml");
  cfg.apply_override("model.attention.window=32");
  Section model = cfg.section("model");
  CHECK(model.get<int64_t>("d_model", 0) == 256);  // child overrides base
  CHECK(model.get<int64_t>("n_layers", 0) == 2);   // kept from base
  Section attn = model.child("attention");
  CHECK(attn.get<int64_t>("n_heads", 0) == 8);  // nested map merged key by key
  CHECK(attn.get<int64_t>("window", 0) == 32);  // command line beats both files
  // Lists are replaced, not concatenated.
  CHECK(cfg.section("eval").get<std::vector<int64_t>>("lengths", {}) == std::vector<int64_t>{512});
  CHECK(cfg.section("runtime").get<int64_t>("seed", 0) == 7);
  // Locations follow the file that set the value.
  CHECK_THAT(cfg.location("model.d_model").str(), Contains("child.yaml:3:"));
  CHECK_THAT(cfg.location("model.n_layers").str(), Contains("base.yaml:4:"));
  CHECK_THAT(cfg.location("model.attention.window").file, Contains("command line"));
}

TEST_CASE("an extends cycle is an error", "[config]") {
  const std::string msg = error_of([] { Config::load(kFixtures + "cycle_a.yaml"); });
  CHECK_THAT(msg, Contains("cycle"));
}

TEST_CASE("overrides are typed by the reader", "[config]") {
  Config cfg = Config::parse("model: {d_model: 64}\n", "x.yaml");
  cfg.apply_override("model.d_model=512");
  cfg.apply_override("model.lr=1.0e-3");
  cfg.apply_override("model.names=[a,b]");
  cfg.apply_override("model.lengths=[256, 512]");
  cfg.apply_override("model.tied=true");
  Section m = cfg.section("model");
  CHECK(m.get<int64_t>("d_model", 0) == 512);
  CHECK(m.get<double>("lr", 0.0) == Approx(1e-3));
  CHECK(m.get<std::vector<std::string>>("names", {}) == std::vector<std::string>{"a", "b"});
  CHECK(m.get<std::vector<int64_t>>("lengths", {}) == std::vector<int64_t>{256, 512});
  CHECK(m.get<bool>("tied", false));
  m.finish();
  CHECK(cfg.errors().empty());

  cfg.apply_override("model.d_model=wide");
  Section m2 = cfg.section("model");
  m2.get<int64_t>("d_model", 0);
  REQUIRE(cfg.errors().size() == 1);
  CHECK_THAT(cfg.errors()[0], Contains("command line override 'model.d_model=wide'") &&
                                  Contains("expected an integer, got 'wide'"));
}

TEST_CASE("malformed overrides are refused", "[config]") {
  Config cfg;
  CHECK_THAT(error_of([&] { cfg.apply_override("model.d_model"); }), Contains("key=value"));
  CHECK_THAT(error_of([&] { cfg.apply_override("model d=1"); }), Contains("not a dotted key"));
  CHECK_THAT(error_of([&] { cfg.apply_override("model..x=1"); }),
             Contains("not a valid dotted key"));
  CHECK_THAT(error_of([&] { cfg.apply_override("a=[1,2"); }), Contains("not valid YAML"));
  CHECK_THAT(error_of([&] { cfg.apply_override("model.layers="); }),
             Contains("the value is empty"));
}

TEST_CASE("resolved() holds every value read, defaults included", "[config]") {
  Config cfg = Config::parse("runtime: {seed: 3}\n", "r.yaml");
  hybridlab::read_runtime_options(cfg.section("runtime"));
  const YAML::Node r = cfg.resolved();
  CHECK(r["runtime"]["seed"].as<int>() == 3);
  CHECK(r["runtime"]["device"].as<std::string>() == "cpu");    // default filled in
  CHECK(r["runtime"]["threads"].as<std::string>() == "auto");  // default filled in
  CHECK_THAT(cfg.resolved_yaml(), Contains("seed: 3"));
  // Doubles print as the shortest text that reads back exactly.
  Config lr = Config::parse("train: {lr: 0.004, eps: 1.0e-8}\n", "lr.yaml");
  Section train = lr.section("train");
  CHECK(train.get<double>("lr", 0.0) == 0.004);
  CHECK(train.get<double>("eps", 0.0) == 1e-8);
  CHECK(lr.resolved()["train"]["lr"].Scalar() == "0.004");
  CHECK(lr.resolved()["train"]["eps"].as<double>() == 1e-8);
}

TEST_CASE("nearest_key suggests close names only", "[config]") {
  CHECK(hybridlab::nearest_key("n_head", {"n_heads", "n_kv_heads", "d_model"}) == "n_heads");
  CHECK(hybridlab::nearest_key("rope_thta", {"rope_theta", "rope_scaling"}) == "rope_theta");
  CHECK(hybridlab::nearest_key("zzzzzz", {"n_heads", "d_model"}).empty());
}

TEST_CASE("a section that should be a map but is not is an error", "[config]") {
  Config cfg = Config::parse("runtime: 4\n", "m.yaml");
  hybridlab::read_runtime_options(cfg.section("runtime"));
  REQUIRE_FALSE(cfg.errors().empty());
  CHECK_THAT(cfg.errors()[0], Contains("m.yaml:1:1") && Contains("expected a map"));
}

TEST_CASE("runtime: threads auto means all cores, cuda absent is a clear error", "[config]") {
  Config cfg = Config::parse("runtime: {threads: auto, device: cuda}\n", "d.yaml");
  auto opts = hybridlab::read_runtime_options(cfg.section("runtime"));
  cfg.raise_errors();
  CHECK(opts.threads == 0);
  if (!torch::cuda::is_available()) {
    try {
      hybridlab::runtime_device(opts);
      FAIL("expected a UserError");
    } catch (const hybridlab::UserError& e) {
      CHECK_THAT(std::string(e.what()), Contains("CUDA is not available"));
    }
  }
}

}  // namespace config_test
