#include "train/weights_file.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/torch.h>

#include <filesystem>
#include <set>

#include "checkpoint/safetensors.h"

namespace hybridlab {
namespace fs = std::filesystem;

std::string weights_path(const std::string& run_dir) {
  return (fs::path(run_dir) / "checkpoint" / "weights.safetensors").string();
}

void save_weights(LanguageModel& model, int64_t step, const std::string& run_dir) {
  std::vector<std::pair<std::string, torch::Tensor>> tensors;
  for (const auto& p : model.named_parameters(/*recurse=*/true)) {
    tensors.emplace_back(p.key(), p.value().detach());
  }
  try {
    write_safetensors(weights_path(run_dir), tensors,
                      {{"step", std::to_string(step)}, {"format", "pt"}});
  } catch (const UserError& e) {
    throw UserError(fmt::format("cannot write the weights file: {}", e.what()));
  }
}

int64_t load_weights(LanguageModel& model, const std::string& path,
                     const std::function<UserError(const std::string&)>& unfit) {
  const SafetensorsFile file(path);
  const auto step = file.header().metadata.find("step");
  if (step == file.header().metadata.end()) throw unfit("its metadata has no step");
  std::set<std::string> wanted;
  auto params = model.named_parameters(/*recurse=*/true);
  for (const auto& p : params) {
    if (!file.contains(p.key())) throw unfit(fmt::format("it has no '{}'", p.key()));
    const std::vector<int64_t>& shape = file.entry(p.key()).shape;
    if (shape != p.value().sizes().vec()) {
      throw unfit(fmt::format("'{}' is {} in the checkpoint, {} in the model", p.key(),
                              fmt::join(shape, "×"), fmt::join(p.value().sizes(), "×")));
    }
    wanted.insert(p.key());
  }
  for (const auto& e : file.header().tensors) {
    if (!wanted.count(e.name))
      throw unfit(fmt::format("'{}' is not a parameter of the model", e.name));
  }
  torch::NoGradGuard no_grad;
  for (auto& p : params) {
    torch::Tensor data = p.value().detach();
    file.load_into(p.key(), data);
  }
  try {
    return std::stoll(step->second);
  } catch (const std::exception&) {
    throw unfit(fmt::format("its step '{}' is not a number", step->second));
  }
}

}  // namespace hybridlab
