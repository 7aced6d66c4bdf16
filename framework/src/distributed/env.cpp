// torchrun's environment variables -> DistributedEnv.

#include <fmt/format.h>

#include <cstdlib>
#include <string>

#include "hybridlab/distributed.h"

namespace hybridlab {

RankLost::~RankLost() = default;

namespace {

// The variable's value as an integer in [lo, hi]; `fallback` when unset.
int64_t integer_var(const char* name, int64_t fallback, int64_t lo, int64_t hi) {
  const char* text = std::getenv(name);
  if (!text || !*text) return fallback;
  char* end = nullptr;
  const long long v = std::strtoll(text, &end, 10);
  if (*end != '\0' || v < lo || v > hi) {
    throw UserError(fmt::format("environment variable {}='{}': expected an integer in {}..{}", name,
                                text, lo, hi));
  }
  return v;
}

bool is_set(const char* name) {
  const char* text = std::getenv(name);
  return text && *text;
}

}  // namespace

DistributedEnv read_distributed_env() {
  DistributedEnv e;
  e.world_size = integer_var("WORLD_SIZE", 1, 1, 1 << 20);
  if (e.world_size == 1) return e;
  for (const char* required : {"RANK", "MASTER_PORT"}) {
    if (!is_set(required)) {
      throw UserError(fmt::format(
          "WORLD_SIZE={} but {} is not set: a data-parallel rank needs RANK, WORLD_SIZE, "
          "MASTER_ADDR and MASTER_PORT (start the ranks with `hybridlab run --nproc-per-node N` "
          "or torchrun)",
          e.world_size, required));
    }
  }
  e.rank = integer_var("RANK", 0, 0, e.world_size - 1);
  e.local_world_size = integer_var("LOCAL_WORLD_SIZE", 1, 1, e.world_size);
  e.local_rank = integer_var("LOCAL_RANK", 0, 0, e.local_world_size - 1);
  e.master_port = static_cast<int>(integer_var("MASTER_PORT", 29500, 1, 65535));
  if (is_set("MASTER_ADDR")) e.master_addr = std::getenv("MASTER_ADDR");
  return e;
}

std::chrono::seconds rendezvous_timeout() {
  return std::chrono::seconds(integer_var("HYBRIDLAB_RENDEZVOUS_TIMEOUT_S", 120, 1, 7 * 24 * 3600));
}

std::chrono::seconds distributed_timeout() {
  return std::chrono::seconds(integer_var("HYBRIDLAB_DIST_TIMEOUT_S", 1800, 1, 7 * 24 * 3600));
}

}  // namespace hybridlab
