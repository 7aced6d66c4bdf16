#include "layers/kernels/recompute.h"

#include <torch/torch.h>

#include <utility>

namespace hybridlab {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Keeps fn and the parameters it reads alive from the autograd graph until the backward ran.
struct Recomputed : torch::CustomClassHolder {
  Recomputed(RecomputedFn f, std::vector<torch::Tensor> p)
      : fn(std::move(f)), params(std::move(p)) {}
  RecomputedFn fn;
  std::vector<torch::Tensor> params;
};

// Arguments: the inputs, the parameters (so their gradients flow through this node), and the
// holder (not a tensor).
class Recompute : public torch::autograd::Function<Recompute> {
 public:
  static torch::Tensor forward(AutogradContext* ctx, at::TensorList inputs, at::TensorList params,
                               c10::intrusive_ptr<Recomputed> holder) {
    ctx->save_for_backward(inputs.vec());
    ctx->saved_data["fn"] = at::IValue::make_capsule(holder);
    ctx->saved_data["n_params"] = static_cast<int64_t>(params.size());
    torch::NoGradGuard no_grad;
    torch::Tensor out = holder->fn(inputs.vec());
    TORCH_CHECK(out.defined(), "recompute_in_backward: the function returned no tensor");
    return out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    TORCH_CHECK(!torch::GradMode::is_enabled(),
                "recompute_in_backward: the backward is not differentiable (create_graph)");
    const variable_list saved = ctx->get_saved_variables();
    auto* holder = dynamic_cast<Recomputed*>(ctx->saved_data["fn"].toCapsule().get());
    TORCH_CHECK(holder, "recompute_in_backward: lost its function");
    const size_t n = saved.size(), n_params = holder->params.size();
    std::vector<torch::Tensor> inputs(n), wrt;
    std::vector<size_t> where;
    for (size_t i = 0; i < n; ++i) {
      inputs[i] = saved[i].detach();
      if (ctx->needs_input_grad(i) && inputs[i].is_floating_point()) {
        inputs[i].requires_grad_();
        wrt.push_back(inputs[i]);
        where.push_back(i);
      }
    }
    for (size_t j = 0; j < n_params; ++j) {
      if (ctx->needs_input_grad(n + j) && holder->params[j].requires_grad()) {
        wrt.push_back(holder->params[j]);
        where.push_back(n + j);
      }
    }
    variable_list out(n + n_params + 1);
    if (wrt.empty() || !grads[0].defined()) return out;
    torch::Tensor y;
    {
      torch::AutoGradMode enable(true);
      y = holder->fn(inputs);
    }
    const variable_list d = torch::autograd::grad({y}, wrt, {grads[0]}, /*retain_graph=*/false,
                                                  /*create_graph=*/false, /*allow_unused=*/true);
    for (size_t k = 0; k < d.size(); ++k) {
      out[where[k]] = d[k].defined() ? d[k] : torch::zeros_like(wrt[k]);
    }
    return out;
  }
};

}  // namespace

torch::Tensor recompute_in_backward(RecomputedFn fn, const std::vector<torch::Tensor>& inputs,
                                    const std::vector<torch::Tensor>& params) {
  for (const torch::Tensor& t : inputs) {
    TORCH_CHECK(t.defined(), "recompute_in_backward: every input must be defined");
  }
  auto holder = c10::make_intrusive<Recomputed>(std::move(fn), params);
  return Recompute::apply(at::TensorList(inputs), at::TensorList(holder->params), holder);
}

}  // namespace hybridlab
