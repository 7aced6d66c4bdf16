// ProcessGroup on c10d: TCPStore rendezvous, Gloo collectives. The only file that includes c10d;
// built without it (no libgloo-dev), every entry point says how to get it.

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <chrono>
#include <cstdio>
#include <sstream>
#include <thread>
#include <vector>

#include "hybridlab/distributed.h"

#ifdef USE_C10D_GLOO
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#endif

namespace hybridlab {

ProcessGroup::Work::~Work() = default;

namespace {

std::string first_line(const std::string& s) { return s.substr(0, s.find('\n')); }

// The first line where rank 0's `a` and rank `rank`'s `b` differ, 1-based, with both texts.
std::string first_difference(const std::string& a, const std::string& b, int64_t rank) {
  std::istringstream ia(a), ib(b);
  std::string la, lb;
  for (int line = 1;; ++line) {
    const bool more_a = static_cast<bool>(std::getline(ia, la));
    const bool more_b = static_cast<bool>(std::getline(ib, lb));
    if (!more_a && !more_b) return "none";
    if (!more_a) la = "<end>";
    if (!more_b) lb = "<end>";
    if (la != lb)
      return fmt::format("line {}: '{}' on rank 0, '{}' on rank {}", line, la, lb, rank);
  }
}

}  // namespace

#ifdef USE_C10D_GLOO

bool distributed_available() { return true; }

struct ProcessGroup::Impl {
  c10::intrusive_ptr<c10d::TCPStore> store;
  c10::intrusive_ptr<c10d::ProcessGroupGloo> gloo;
  std::chrono::milliseconds timeout;
};

namespace {

[[noreturn]] void rank_lost(int64_t rank, const char* during, const std::exception& e) {
  throw RankLost(fmt::format(
      "rank {}: lost the other ranks during {} ({}); one of them exited, was killed or hangs; "
      "rerun the same command to resume from the last checkpoint",
      rank, during, first_line(e.what())));
}

class GlooWork : public ProcessGroup::Work {
 public:
  GlooWork(c10::intrusive_ptr<c10d::Work> w, int64_t rank) : work_(std::move(w)), rank_(rank) {}
  void wait() override {
    try {
      work_->wait();
    } catch (const std::exception& e) {
      rank_lost(rank_, "a gradient all-reduce", e);
    }
  }

 private:
  c10::intrusive_ptr<c10d::Work> work_;
  int64_t rank_;
};

std::string joined_key(int64_t rank) { return fmt::format("hybridlab/joined/{}", rank); }

// "1, 2, 5" or "1, 2, 3, 4, 5, 6, 7, 8 and 24 more".
std::string ranks_text(const std::vector<int64_t>& ranks) {
  std::vector<int64_t> shown(ranks.begin(), ranks.begin() + std::min<size_t>(8, ranks.size()));
  std::string out = fmt::format("{}", fmt::join(shown, ", "));
  if (ranks.size() > shown.size()) out += fmt::format(" and {} more", ranks.size() - shown.size());
  return out;
}

// Rank 0: waits until every rank has set its joined_key, saying whom it waits for every 10 s;
// throws UserError naming the ranks still missing after `timeout`.
void wait_for_ranks(c10d::TCPStore& store, const DistributedEnv& env, std::chrono::seconds timeout,
                    const std::function<bool()>& stop) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  auto next_note = start + std::chrono::seconds(10);
  for (;;) {
    std::vector<int64_t> missing;
    for (int64_t r = 1; r < env.world_size; ++r)
      if (!store.check({joined_key(r)})) missing.push_back(r);
    if (missing.empty()) return;
    if (stop && stop()) {
      throw UserError(fmt::format(
          "rank 0: stopped while waiting for rank(s) {} to join at {}:{}; nothing was written",
          ranks_text(missing), env.master_addr, env.master_port));
    }
    const auto now = Clock::now();
    const auto waited = std::chrono::duration_cast<std::chrono::seconds>(now - start).count();
    if (now - start >= timeout) {
      throw UserError(fmt::format(
          "rank 0: rank(s) {} of {} did not join the rendezvous at {}:{} within {} s "
          "(HYBRIDLAB_RENDEZVOUS_TIMEOUT_S); start every rank with the same WORLD_SIZE, "
          "MASTER_ADDR and MASTER_PORT (--nnodes, --master-addr, --master-port)",
          ranks_text(missing), env.world_size, env.master_addr, env.master_port, timeout.count()));
    }
    if (now >= next_note) {
      std::fprintf(stderr, "rank 0: waiting for rank(s) %s to join at %s:%d (%lld s of %lld s)\n",
                   ranks_text(missing).c_str(), env.master_addr.c_str(), env.master_port,
                   static_cast<long long>(waited), static_cast<long long>(timeout.count()));
      next_note += std::chrono::seconds(10);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

}  // namespace

ProcessGroup::ProcessGroup(const DistributedEnv& env, std::chrono::seconds rendezvous_timeout,
                           const std::function<bool()>& stop)
    : env_(env), impl_(std::make_unique<Impl>()) {
  impl_->timeout = distributed_timeout();
  c10d::TCPStoreOptions so;
  so.port = static_cast<uint16_t>(env.master_port);
  so.isServer = env.rank == 0;
  so.numWorkers = static_cast<size_t>(env.world_size);
  // Rank 0 waits for the others itself (wait_for_ranks), so that it can name who is missing.
  so.waitWorkers = false;
  so.timeout = rendezvous_timeout;
  try {
    impl_->store = c10::make_intrusive<c10d::TCPStore>(env.master_addr, so);
  } catch (const std::exception& e) {
    const std::string why = first_line(e.what());
    if (env.rank == 0 && why.find("in use") != std::string::npos) {
      throw UserError(fmt::format(
          "rank 0 cannot listen on {}:{} ({}); choose another port with --master-port (or "
          "MASTER_PORT)",
          env.master_addr, env.master_port, why));
    }
    throw UserError(fmt::format(
        "rank {}: the rendezvous at {}:{} did not complete within {} s ({}); check MASTER_ADDR "
        "and MASTER_PORT, and that all {} ranks were started",
        env.rank, env.master_addr, env.master_port, rendezvous_timeout.count(), why,
        env.world_size));
  }
  try {
    impl_->store->set(joined_key(env.rank), std::vector<uint8_t>{1});
  } catch (const std::exception& e) {
    rank_lost(env.rank, "the rendezvous", e);
  }
  if (env.rank == 0) wait_for_ranks(*impl_->store, env, rendezvous_timeout, stop);
  impl_->store->setTimeout(impl_->timeout);
  auto opts = c10d::ProcessGroupGloo::Options::create(impl_->timeout);
  // GLOO_SOCKET_IFNAME picks the interface as in torch.distributed; one host talks over loopback.
  const char* ifname = std::getenv("GLOO_SOCKET_IFNAME");
  const bool loopback = env.master_addr == "127.0.0.1" || env.master_addr == "localhost";
  opts->devices.push_back(ifname && *ifname
                              ? c10d::ProcessGroupGloo::createDeviceForInterface(ifname)
                          : loopback ? c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1")
                                     : c10d::ProcessGroupGloo::createDefaultDevice());
  // One thread runs the collectives: the ranks' compute threads own the cores.
  opts->threads = 1;
  try {
    impl_->gloo = c10::make_intrusive<c10d::ProcessGroupGloo>(
        impl_->store, static_cast<int>(env.rank), static_cast<int>(env.world_size), opts);
  } catch (const std::exception& e) {
    rank_lost(env.rank, "the Gloo rendezvous", e);
  }
}

ProcessGroup::~ProcessGroup() = default;

std::unique_ptr<ProcessGroup::Work> ProcessGroup::all_reduce_sum_async(torch::Tensor t) {
  std::vector<at::Tensor> ts{std::move(t)};
  try {
    return std::make_unique<GlooWork>(impl_->gloo->allreduce(ts), env_.rank);
  } catch (const std::exception& e) {
    rank_lost(env_.rank, "an all-reduce", e);
  }
}

void ProcessGroup::all_reduce_sum(torch::Tensor t) { all_reduce_sum_async(std::move(t))->wait(); }

void ProcessGroup::broadcast_from_rank0(torch::Tensor t) {
  std::vector<at::Tensor> ts{std::move(t)};
  try {
    impl_->gloo->broadcast(ts)->wait();
  } catch (const std::exception& e) {
    rank_lost(env_.rank, "a broadcast", e);
  }
}

void ProcessGroup::set(const std::string& key, const std::string& value) {
  try {
    impl_->store->set(key, std::vector<uint8_t>(value.begin(), value.end()));
  } catch (const std::exception& e) {
    rank_lost(env_.rank, "a store write", e);
  }
}

std::string ProcessGroup::get(const std::string& key) {
  try {
    const std::vector<uint8_t> v = impl_->store->get(key);
    return std::string(v.begin(), v.end());
  } catch (const std::exception& e) {
    rank_lost(env_.rank, fmt::format("a wait for '{}' from rank 0", key).c_str(), e);
  }
}

void ProcessGroup::barrier() {
  try {
    impl_->gloo->barrier()->wait();
  } catch (const std::exception& e) {
    rank_lost(env_.rank, "a barrier", e);
  }
}

#else  // no c10d Gloo in this build

bool distributed_available() { return false; }

struct ProcessGroup::Impl {};

namespace {
[[noreturn]] void no_gloo() {
  throw UserError(
      "this hybridlab was built without c10d Gloo, so it cannot train on several ranks; install "
      "libgloo-dev (scripts/setup.sh does) and rebuild");
}
}  // namespace

ProcessGroup::ProcessGroup(const DistributedEnv& env, std::chrono::seconds,
                           const std::function<bool()>&)
    : env_(env) {
  no_gloo();
}
ProcessGroup::~ProcessGroup() = default;
std::unique_ptr<ProcessGroup::Work> ProcessGroup::all_reduce_sum_async(torch::Tensor) { no_gloo(); }
void ProcessGroup::all_reduce_sum(torch::Tensor) { no_gloo(); }
void ProcessGroup::broadcast_from_rank0(torch::Tensor) { no_gloo(); }
void ProcessGroup::set(const std::string&, const std::string&) { no_gloo(); }
std::string ProcessGroup::get(const std::string&) { no_gloo(); }
void ProcessGroup::barrier() { no_gloo(); }

#endif

void ProcessGroup::agree(const std::string& what, const std::string& value) {
  const std::string key = "agree/" + what;
  if (env_.rank == 0) {
    set(key, value);
  } else {
    const std::string theirs = get(key);
    std::string verdict = "ok";
    if (theirs != value) {
      verdict = fmt::format(
          "rank {}'s {} differs from rank 0's ({}); every rank must run the same command on the "
          "same files",
          env_.rank, what, first_difference(theirs, value, env_.rank));
    }
    set(fmt::format("{}/verdict/{}", key, env_.rank), verdict);
  }
  // Every rank learns every verdict, so that all of them stop before anything is written.
  for (int64_t r = 1; r < env_.world_size; ++r) {
    const std::string verdict = get(fmt::format("{}/verdict/{}", key, r));
    if (verdict != "ok") throw UserError(verdict);
  }
}

}  // namespace hybridlab
