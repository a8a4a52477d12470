// The engine's command-line flags, shared by `quench generate` and `quench serve` (vLLM's names):
//   --model DIR (absent: the built-in tiny model), --device, --kv-cache-dtype, --block-size,
//   --max-model-len, --max-num-seqs, --max-num-batched-tokens, --num-kv-pages,
//   --gpu-memory-utilization, --seed, --prefill-kernel, --decode-kernel,
//   --no-enable-prefix-caching, --enforce-eager, --speculative-config.
#pragma once

#include <filesystem>
#include <initializer_list>
#include <map>
#include <optional>
#include <string>

#include "quench/core/flag_parsing.h"
#include "quench/engine/llm_engine.h"

namespace quench {

// The flags above, to merge into a command's own table.
const FlagTable& engine_flag_table();
// A command's table: the engine flags, the command's own flags that take a value and those that
// do not, and --help.
FlagTable command_flag_table(std::initializer_list<const char*> with_value,
                             std::initializer_list<const char*> switches);

// --speculative-config's JSON, as vLLM spells it: {"method": "ngram", "num_speculative_tokens":
// k, "prompt_lookup_max": n, "prompt_lookup_min": m}. Throws quench::Error naming the field.
NgramSpeculation parse_speculative_config(const std::string& text);

// Their usage lines.
const char* engine_flags_usage();

// Fills `options` from the parsed flags; throws UsageError naming the flag and allowed values.
// When --model is absent returns the built-in model to write (--builtin, default "tiny"; see
// BuiltinModelDir), else nullopt.
std::optional<std::string> engine_options_from_flags(
    const std::map<std::string, std::string>& flags, EngineOptions& options);

// A built-in model (tiny_model.h) written to a fresh temporary directory for the life of this
// object, so that commands run on a default with no download.
class BuiltinModelDir {
 public:
  explicit BuiltinModelDir(const std::string& name = "tiny");  // builtin_model_spec's names
  ~BuiltinModelDir();
  BuiltinModelDir(const BuiltinModelDir&) = delete;
  BuiltinModelDir& operator=(const BuiltinModelDir&) = delete;
  std::string path() const { return dir_.string(); }

 private:
  std::filesystem::path dir_;
};

}  // namespace quench
