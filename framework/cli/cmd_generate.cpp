// `hybridlab generate`: continue a prompt with a trained run's model.

#include <fmt/format.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <limits>
#include <memory>
#include <sstream>

#include "cli_numbers.h"
#include "commands.h"
#include "hybridlab/error.h"
#include "hybridlab/generate.h"
#include "hybridlab/run_build.h"
#include "tokenizer/bpe.h"
#include "util/fault_context.h"

namespace hybridlab::cli {
namespace {

// Positions of one generation (prompt and new tokens): far past any trained or evaluated length
// here, and a bound that keeps a pasted or mistyped size from running for days.
constexpr int64_t kMaxPositions = int64_t{1} << 20;

struct GenerateArgs {
  std::string run_dir;
  std::string prompt;
  std::string prompt_file;
  bool has_prompt = false;  ///< --prompt was given (possibly empty)
  GenerateOptions opts;
};

std::string read_prompt_file(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (fs::is_directory(st)) throw UserError(fmt::format("--prompt-file: '{}' is a folder", path));
  if (fs::exists(st) && !fs::is_regular_file(st)) {
    // A device (/dev/zero never ends), a pipe or a socket: reading it could block or never stop.
    throw UserError(fmt::format(
        "--prompt-file: '{}' is not a regular file (a device, pipe or socket); give a file", path));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) throw UserError(fmt::format("--prompt-file: cannot read '{}'", path));
  const auto size = fs::file_size(path, ec);
  if (!ec && size > static_cast<uintmax_t>(kMaxPositions)) {
    throw UserError(fmt::format("--prompt-file: '{}' is {} bytes; a prompt is at most {} bytes",
                                path, size, kMaxPositions));
  }
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Space-separated token ids, each in [0, vocab).
std::vector<int64_t> parse_token_ids(const std::string& text, const Task& task) {
  std::vector<int64_t> ids;
  std::istringstream in(text);
  std::string word;
  while (in >> word) {
    size_t used = 0;
    int64_t id = -1;
    try {
      id = std::stoll(word, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != word.size()) {
      throw UserError(fmt::format(
          "prompt: '{}' is not a token id; task {} takes space-separated integer token ids",
          word.size() <= 40 ? word : word.substr(0, 40) + "...", task.name()));
    }
    if (id < 0 || id >= task.vocab_size()) {
      throw UserError(fmt::format("prompt: token id {} is out of range: task {} uses ids [0, {})",
                                  id, task.name(), task.vocab_size()));
    }
    ids.push_back(id);
  }
  return ids;
}

// A byte as text: printable ASCII, newline and tab as they are, a backslash doubled, any other
// byte as \xHH, so the output is unambiguous and safe for a terminal.
std::string escaped_byte(int64_t b) {
  if (b == '\\') return "\\\\";
  if (b == '\n' || b == '\t' || (b >= 0x20 && b < 0x7f))
    return std::string(1, static_cast<char>(b));
  return fmt::format("\\x{:02x}", b);
}

void run_generate(const GenerateArgs& a) {
  if (a.has_prompt == !a.prompt_file.empty()) {
    throw UserError(a.has_prompt ? "give either --prompt or --prompt-file, not both"
                                 : "give the prompt: --prompt TEXT or --prompt-file FILE");
  }
  const GenerateOptions& o = a.opts;
  if (o.max_new_tokens < 1)
    throw UserError(fmt::format("--max-new-tokens must be >= 1, got {}", o.max_new_tokens));
  if (!(o.temperature >= 0))
    throw UserError(fmt::format("--temperature must be >= 0 (0 = greedy), got {}", o.temperature));
  if (o.top_k < 0) throw UserError(fmt::format("--top-k must be >= 0 (0 = all), got {}", o.top_k));
  const std::string text = a.has_prompt ? a.prompt : read_prompt_file(a.prompt_file);

  TrainedRun t = load_trained_run(RunFolder(a.run_dir));  // reads the folder only: no lock
  BuiltRun& b = t.built;
  const Task& task = *b.exp.task;
  const auto tokenizer = task.text_tokenizer();
  std::vector<int64_t> ids;
  if (task.byte_level()) {
    for (char c : text) ids.push_back(static_cast<unsigned char>(c));
  } else if (tokenizer) {
    for (int32_t id : tokenizer->encode(text)) ids.push_back(id);
  } else {
    ids = parse_token_ids(text, task);
  }
  if (ids.empty()) throw UserError("the prompt is empty; give at least one token");
  const int64_t positions = static_cast<int64_t>(ids.size()) + o.max_new_tokens;
  if (positions > kMaxPositions) {
    throw UserError(
        fmt::format("a {}-token prompt and {} new tokens are {} positions; generate "
                    "takes at most {}",
                    ids.size(), o.max_new_tokens, positions, kMaxPositions));
  }
  if (const std::string p = length_memory_problem(b.exp, positions); !p.empty())
    throw UserError(fmt::format("--max-new-tokens {} after a {}-token prompt: {}", o.max_new_tokens,
                                ids.size(), p));
  const torch::Tensor prompt = torch::tensor(ids, torch::kLong).unsqueeze(0);  // [1,T]
  const Generation g = generate(*b.model, prompt, o);

  const torch::Tensor out = g.tokens[0].contiguous();
  const int64_t* p = out.data_ptr<int64_t>();
  std::string shown;
  if (tokenizer) {
    for (unsigned char c : tokenizer->decode(std::vector<int32_t>(p, p + out.numel())))
      shown += escaped_byte(c);
  }
  for (int64_t i = 0; i < out.numel() && !tokenizer; ++i) {
    shown += task.byte_level() ? escaped_byte(p[i]) : (i ? " " : "") + std::to_string(p[i]);
  }
  fmt::print("{}\n", shown);
  std::fflush(stdout);
  std::cerr << fmt::format(
      "{} tokens generated after a {}-token prompt in {:.3f} s: {:.1f} tokens/s (prefill {:.3f} "
      "s, one-token steps {:.1f} tokens/s)\n",
      out.numel(), g.prompt_tokens, g.prefill_s + g.decode_s, g.tokens_per_s(), g.prefill_s,
      g.decode_tokens_per_s());
}

}  // namespace

void add_generate_command(CLI::App& app) {
  auto a = std::make_shared<GenerateArgs>();
  auto* c = app.add_subcommand(
      "generate",
      "Continue a prompt with the model of a trained or finished run (its checkpoint): the "
      "prompt is prefilled, then one token per step with the decoding cache. Byte-level tasks "
      "(text, passkey, niah, copy) and text on subword tokens (task.tokenizer) take the prompt "
      "as text and print the continuation as text (bytes other than printable ASCII, newline and "
      "tab as \\xHH, a backslash as \\\\); other tasks take and print space-separated token ids. "
      "Timing goes to stderr.\n"
      "Exit code: 0 done, 2 bad input (not a trained run, a missing plugin, a bad prompt, a "
      "prompt too long for a learned position table).");
  c->add_option("run_dir", a->run_dir, "Run folder, e.g. runs/quickstart/pattern-GGGA_scheme-rope")
      ->required();
  auto* prompt =
      c->add_option("--prompt", a->prompt, "The prompt (text, or token ids for non-byte tasks)");
  c->add_option("--prompt-file", a->prompt_file, "Read the prompt from this file, byte for byte");
  c->add_option("--max-new-tokens,-n", a->opts.max_new_tokens, "Tokens to generate")
      ->check(integer_in(1, kMaxPositions))
      ->capture_default_str();
  c->add_option("--temperature,-t", a->opts.temperature,
                "Sampling temperature; 0 = greedy (the most likely token at each step)")
      ->check(number_in(0, std::numeric_limits<double>::infinity()))
      ->capture_default_str();
  c->add_option("--top-k", a->opts.top_k, "Sample among the k most likely tokens only; 0 = all")
      ->check(integer_in(0, std::numeric_limits<int64_t>::max()))
      ->capture_default_str();
  c->add_option("--seed", a->opts.seed, "Seed of the sampling (the same seed, the same output)")
      ->check(integer_in(0, std::numeric_limits<int64_t>::max()))
      ->capture_default_str();
  c->callback([a, prompt] {
    install_fatal_signal_report("generate");  // a plugin's crash is named (util/fault_context.h)
    a->has_prompt = prompt->count() > 0;
    run_generate(*a);
  });
}

}  // namespace hybridlab::cli
