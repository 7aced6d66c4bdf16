#pragma once
// Tensor comparison helpers for Catch2 (after PyTorch's test/cpp/api/support.h).

#include <torch/torch.h>

#include <catch2/catch.hpp>

#include <sstream>
#include <string>

namespace hybridlab::test {

/// Max |a-b| over all elements (a and b must have the same shape).
inline double max_abs_diff(const torch::Tensor& a, const torch::Tensor& b) {
  return (a.to(torch::kDouble) - b.to(torch::kDouble)).abs().max().item<double>();
}

/// REQUIRE that a and b have the same shape and agree to `atol` everywhere; on failure prints the
/// shapes and the largest difference.
#define REQUIRE_TENSORS_CLOSE(a, b, atol)                           \
  do {                                                              \
    const torch::Tensor _ta = (a), _tb = (b);                       \
    INFO("shapes " << _ta.sizes() << " vs " << _tb.sizes());        \
    REQUIRE(_ta.sizes() == _tb.sizes());                            \
    const double _d = ::hybridlab::test::max_abs_diff(_ta, _tb);    \
    INFO("max abs diff " << _d << " (tolerance " << (atol) << ")"); \
    REQUIRE(_d <= (atol));                                          \
  } while (0)

/// A PluginHost over the build tree's plugin folder only (no environment, no install dir).
inline std::vector<std::string> test_plugin_dirs() { return {HYBRIDLAB_TEST_PLUGIN_DIR}; }

}  // namespace hybridlab::test
