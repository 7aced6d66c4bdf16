#pragma once
// Data-parallel training on torch's c10d: where this process sits in the job (torchrun's
// environment variables), a process group (TCPStore rendezvous + Gloo collectives), and the
// gradient all-reduce in buckets that overlaps the backward pass.
//
// Convention (torch.distributed.run, "torchrun"): every rank of a job is the same command with
// RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR and MASTER_PORT set; rank 0 serves
// the TCPStore at MASTER_ADDR:MASTER_PORT and the others connect to it. `hybridlab run
// --nproc-per-node N` sets them for N local ranks; torchrun and SLURM's srun (with the variables
// exported per task) work the same way.
//
// Data parallelism here is synchronous and exact: every rank holds the whole model, computes the
// gradient of its slice of the global batch, and the all-reduced sum equals the gradient of the
// whole batch (PyTorch DDP; Li et al., "PyTorch Distributed", VLDB 2020).

#include <torch/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "hybridlab/error.h"

namespace hybridlab {

/// Where this process sits in a data-parallel job.
struct DistributedEnv {
  int64_t rank = 0;              ///< RANK: 0 .. world_size-1
  int64_t world_size = 1;        ///< WORLD_SIZE: ranks in the job
  int64_t local_rank = 0;        ///< LOCAL_RANK: rank on this host
  int64_t local_world_size = 1;  ///< LOCAL_WORLD_SIZE: ranks on this host (they share its cores)
  std::string master_addr = "127.0.0.1";  ///< MASTER_ADDR: host of rank 0's TCPStore
  int master_port = 29500;                ///< MASTER_PORT: its TCP port
  /// Whether this is one rank of several (WORLD_SIZE > 1).
  bool active() const { return world_size > 1; }
};

/// Reads torchrun's variables from the environment. Without WORLD_SIZE (or with WORLD_SIZE=1) the
/// result is a single process (active() false). Throws UserError naming the variable for a value
/// that is not a number, out of range (RANK >= WORLD_SIZE, a port outside 1..65535), or missing
/// while WORLD_SIZE > 1 (RANK, MASTER_PORT).
DistributedEnv read_distributed_env();

/// Seconds a collective or a store wait may take before the job is declared broken:
/// HYBRIDLAB_DIST_TIMEOUT_S, default 1800 (torch.distributed's default_pg_timeout). A rank that
/// dies is noticed at once (its sockets close); this bounds a rank that hangs.
std::chrono::seconds distributed_timeout();

/// Seconds the rendezvous waits for every rank to join before naming the missing ones:
/// HYBRIDLAB_RENDEZVOUS_TIMEOUT_S, default 120. Throws UserError for a value outside 1..604800.
std::chrono::seconds rendezvous_timeout();

/// Thrown when a collective fails because another rank is gone (exited, killed, unreachable) or
/// did not answer within distributed_timeout(). Not a UserError: the input was fine (exit 1).
class RankLost : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
  ~RankLost() override;
};

/// Whether this build has c10d with Gloo (`libgloo-dev` present when it was configured).
bool distributed_available();

/// A c10d process group: a TCPStore for rendezvous and small messages, Gloo for collectives on
/// CPU tensors. All collectives must be called in the same order on every rank (c10d's rule).
class ProcessGroup {
 public:
  /// Rendezvous: rank 0 listens on master_addr:master_port and waits for the others (up to
  /// `rendezvous_timeout`, saying every 10 s on stderr which ranks it still waits for); the others
  /// connect. Throws UserError when the build has no Gloo, when rank 0 cannot listen on the port
  /// (in use: "choose another with --master-port"), when ranks have not joined rank 0 within the
  /// timeout (naming them), or when a rank cannot reach the master within the timeout (naming
  /// MASTER_ADDR:MASTER_PORT).
  /// `stop`, when given, is polled while rank 0 waits: true ends the wait with a UserError saying
  /// it was stopped (a SIGTERM handler's flag: the wait is not a step that can checkpoint).
  ProcessGroup(const DistributedEnv& env, std::chrono::seconds rendezvous_timeout,
               const std::function<bool()>& stop = nullptr);
  ~ProcessGroup();
  ProcessGroup(const ProcessGroup&) = delete;
  ProcessGroup& operator=(const ProcessGroup&) = delete;

  int64_t rank() const { return env_.rank; }
  int64_t world_size() const { return env_.world_size; }
  const DistributedEnv& env() const { return env_; }

  /// A collective in flight; wait() blocks until it completed on every rank. Throws RankLost.
  class Work {
   public:
    virtual ~Work();
    virtual void wait() = 0;
  };

  /// Starts summing `t` (a contiguous CPU tensor, any float dtype) over all ranks, in place.
  std::unique_ptr<Work> all_reduce_sum_async(torch::Tensor t);
  /// all_reduce_sum_async + wait. Throws RankLost.
  void all_reduce_sum(torch::Tensor t);
  /// Copies rank 0's `t` (contiguous, CPU) into every rank's `t`. Throws RankLost.
  void broadcast_from_rank0(torch::Tensor t);

  /// Store: rank-0 decisions for the others. set() stores `value` under `key`; get() waits (up to
  /// distributed_timeout()) until some rank set `key` and returns it. Throws RankLost.
  void set(const std::string& key, const std::string& value);
  std::string get(const std::string& key);

  /// Checks that every rank has the same `value` for `what` (e.g. the experiment config): rank 0
  /// publishes its value, the others compare and publish their verdicts. Throws UserError on
  /// every rank when one differs, naming that rank and the first differing line.
  void agree(const std::string& what, const std::string& value);

  /// Blocks until every rank called barrier(). Throws RankLost.
  void barrier();

 private:
  struct Impl;
  DistributedEnv env_;
  std::unique_ptr<Impl> impl_;
};

/// Sums gradients over the ranks of `group` while the backward pass still runs: parameters are
/// grouped into buckets of about `bucket_bytes` in reverse order (the order their gradients
/// become ready), a hook on each parameter copies its gradient into its bucket, and a full bucket
/// is all-reduced asynchronously, buckets always in the same order on every rank (PyTorch DDP's
/// Reducer, Li et al. 2020 §3.2). Gradients are summed, not averaged: the loss on each rank must
/// already be divided by the global number of scored tokens (see train()).
class GradientReducer {
 public:
  /// `params`: the model's trainable parameters (the same list, in the same order, on every
  /// rank). Registers one gradient hook on each; the destructor removes them.
  GradientReducer(std::vector<torch::Tensor> params, ProcessGroup& group,
                  int64_t bucket_bytes = int64_t{4} << 20);
  ~GradientReducer();
  GradientReducer(const GradientReducer&) = delete;
  GradientReducer& operator=(const GradientReducer&) = delete;

  /// After backward(): reduces the buckets still waiting (a parameter without a gradient this
  /// step counts as zero), waits for every bucket, and writes the sums into each parameter's
  /// .grad(). Throws RankLost.
  void finish();

  /// Buckets, for tests and logs.
  int64_t bucket_count() const { return static_cast<int64_t>(buckets_.size()); }
  /// Seconds finish() spent waiting for all-reduces in total (the part not hidden by backward).
  double wait_seconds() const { return wait_s_; }

 private:
  struct Bucket {
    std::vector<size_t> members;  ///< indices into params_
    torch::Tensor flat;           ///< [sum of numels], the members' gradients back to back
    int64_t pending = 0;          ///< members whose gradient has not arrived this step
    std::unique_ptr<ProcessGroup::Work> work;
  };
  void on_grad(size_t param, const torch::Tensor& grad);
  void launch_ready();

  std::vector<torch::Tensor> params_;
  std::vector<unsigned> hook_ids_;
  std::vector<size_t> bucket_of_;  ///< param -> bucket
  std::vector<int64_t> offset_;    ///< param -> offset in its bucket's flat
  std::vector<bool> arrived_;      ///< param -> gradient arrived this step
  std::vector<Bucket> buckets_;
  size_t next_launch_ = 0;
  ProcessGroup& group_;
  double wait_s_ = 0;
};

}  // namespace hybridlab
