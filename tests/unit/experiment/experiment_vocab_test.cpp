// read_experiment refuses a task whose token ids do not fit the model's embedding table.

#include <catch2/catch.hpp>

#include "hybridlab/error.h"
#include "hybridlab/experiment.h"

using namespace hybridlab;

// A named namespace per test file keeps its helpers apart in a unity build.
namespace experiment_vocab_test {
namespace {

std::string config_error(const std::string& yaml) {
  try {
    read_experiment(Config::parse(yaml, "exp.yaml"), false);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("a task vocabulary larger than the model's is a ConfigError at its key", "[job]") {
  // Both set, the model's too small: the error points at model.vocab_size (line 1).
  const std::string both = config_error(
      "model: {d_model: 16, layers: A, vocab_size: 256}\n"
      "task: {name: mqar, seq_len: 128, vocab_size: 1000}\n");
  INFO(both);
  REQUIRE(both.find("exp.yaml:1:") != std::string::npos);
  REQUIRE(both.find("model.vocab_size: ") != std::string::npos);
  REQUIRE(both.find("model.vocab_size is 256") != std::string::npos);
  REQUIRE(both.find("at least 1000") != std::string::npos);

  // The model sets too small a vocabulary for the byte-level text task (256 ids): line 1.
  const std::string model_side = config_error(
      "model: {d_model: 16, layers: A, vocab_size: 100}\n"
      "task: {name: text}\n");
  INFO(model_side);
  REQUIRE(model_side.find("exp.yaml:1:") != std::string::npos);
  REQUIRE(model_side.find("model.vocab_size: ") != std::string::npos);
  REQUIRE(model_side.find("at least 256") != std::string::npos);

  // Equal sizes are fine.
  REQUIRE(config_error("model: {d_model: 16, layers: A, vocab_size: 64}\n"
                       "task: {name: mqar, seq_len: 32, vocab_size: 64, num_kv_pairs: 4}\n")
              .empty());
}

TEST_CASE("an unset model.vocab_size follows the task's vocabulary", "[job]") {
  Config cfg = Config::parse(
      "model: {d_model: 16, layers: A}\n"
      "task: {name: mqar, seq_len: 128, vocab_size: 1000}\n",
      "exp.yaml");
  read_experiment(cfg, false);
  CHECK(cfg.resolved()["model"]["vocab_size"].as<int64_t>() == 1000);
}

TEST_CASE("the compression task and model.head autoencoder go together, refused at the key",
          "[job]") {
  const std::string unset = config_error(
      "model: {d_model: 16, layers: A}\n"
      "task: {name: compression}\n");
  INFO(unset);
  CHECK_THAT(unset, Catch::Contains("exp.yaml:2:") && Catch::Contains("task.name") &&
                        Catch::Contains("set model.head: autoencoder"));
  const std::string causal = config_error(
      "model: {d_model: 16, layers: A, head: causal_lm}\n"
      "task: {name: compression}\n");
  CHECK_THAT(causal, Catch::Contains("exp.yaml:1:") && Catch::Contains("model.head"));
  const std::string other = config_error(
      "model: {d_model: 16, layers: A, head: autoencoder}\n"
      "task: {name: mqar, seq_len: 32, vocab_size: 64, num_kv_pairs: 4}\n");
  CHECK_THAT(other, Catch::Contains("exp.yaml:1:") && Catch::Contains("model.head") &&
                        Catch::Contains("compression task only") && Catch::Contains("mqar"));
  CHECK(config_error("model: {d_model: 16, layers: A, head: autoencoder}\n"
                     "task: {name: compression}\n")
            .empty());
}

}  // namespace experiment_vocab_test
