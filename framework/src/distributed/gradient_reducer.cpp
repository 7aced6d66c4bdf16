// GradientReducer: bucketed gradient all-reduce that overlaps the backward pass.

#include <chrono>

#include "hybridlab/distributed.h"

namespace hybridlab {

GradientReducer::GradientReducer(std::vector<torch::Tensor> params, ProcessGroup& group,
                                 int64_t bucket_bytes)
    : params_(std::move(params)), group_(group) {
  const size_t n = params_.size();
  bucket_of_.assign(n, 0);
  offset_.assign(n, 0);
  arrived_.assign(n, false);
  // Reverse order: the last layers' gradients are ready first. A bucket holds one dtype.
  int64_t bytes = 0;
  for (size_t k = n; k-- > 0;) {
    const torch::Tensor& p = params_[k];
    const bool fresh = buckets_.empty() || bytes >= bucket_bytes ||
                       params_[buckets_.back().members.front()].scalar_type() != p.scalar_type();
    if (fresh) {
      buckets_.emplace_back();
      bytes = 0;
    }
    Bucket& b = buckets_.back();
    bucket_of_[k] = buckets_.size() - 1;
    offset_[k] =
        b.members.empty() ? 0 : offset_[b.members.back()] + params_[b.members.back()].numel();
    b.members.push_back(k);
    bytes += p.numel() * static_cast<int64_t>(p.element_size());
  }
  for (auto& b : buckets_) {
    const size_t last = b.members.back();
    const torch::Tensor& p = params_[last];
    b.flat = torch::zeros({offset_[last] + p.numel()}, p.options().requires_grad(false));
    b.pending = static_cast<int64_t>(b.members.size());
  }
  for (size_t k = 0; k < n; ++k) {
    hook_ids_.push_back(
        params_[k].register_hook([this, k](const torch::Tensor& grad) { on_grad(k, grad); }));
  }
}

GradientReducer::~GradientReducer() {
  for (size_t k = 0; k < hook_ids_.size(); ++k) params_[k].remove_hook(hook_ids_[k]);
}

void GradientReducer::on_grad(size_t k, const torch::Tensor& grad) {
  // A leaf's hook sees the sum of all its uses' gradients once per backward (it runs before the
  // AccumulateGrad node), so it fires once per parameter and step.
  if (arrived_[k]) return;
  arrived_[k] = true;
  Bucket& b = buckets_[bucket_of_[k]];
  b.flat.narrow(0, offset_[k], params_[k].numel()).view_as(params_[k]).copy_(grad);
  --b.pending;
  launch_ready();
}

void GradientReducer::launch_ready() {
  // In bucket order only: collectives must be issued in the same order on every rank.
  while (next_launch_ < buckets_.size() && buckets_[next_launch_].pending == 0) {
    Bucket& b = buckets_[next_launch_++];
    b.work = group_.all_reduce_sum_async(b.flat);
  }
}

void GradientReducer::finish() {
  for (size_t k = 0; k < params_.size(); ++k) {
    if (arrived_[k]) continue;
    Bucket& b = buckets_[bucket_of_[k]];
    b.flat.narrow(0, offset_[k], params_[k].numel()).zero_();
    arrived_[k] = true;
    --b.pending;
  }
  launch_ready();
  const auto t0 = std::chrono::steady_clock::now();
  for (auto& b : buckets_) {
    b.work->wait();
    b.work.reset();
  }
  wait_s_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  torch::NoGradGuard no_grad;
  for (size_t k = 0; k < params_.size(); ++k) {
    torch::Tensor& p = params_[k];
    const torch::Tensor sum =
        buckets_[bucket_of_[k]].flat.narrow(0, offset_[k], p.numel()).view_as(p);
    if (p.grad().defined()) {
      p.mutable_grad().copy_(sum);
    } else {
      p.mutable_grad() = sum.clone();
    }
    arrived_[k] = false;
  }
  for (auto& b : buckets_) b.pending = static_cast<int64_t>(b.members.size());
  next_launch_ = 0;
}

}  // namespace hybridlab
