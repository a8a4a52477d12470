#!/usr/bin/env python3
"""Checks that the CPU test suite can fail where the CPU references (the oracles every kernel is
tested against), or the step metadata every kernel reads, would be wrong: applies one plausible
bug at a time to such a source (the bugs SPEC §1.2 lists for other engines among them: a bf16
query scaled by q_scale, a scale multiplied where the cache divides, one scale for K and V,
padded tokens written to a real slot), rebuilds the CPU tests, runs them, and restores the
source. A mutant that no test kills is a gap in the suite.

Usage (after a build): tools/oracle_mutants.py [--build-dir build] [--only SUBSTR]
Takes about 30 s per mutant on 2 cores. Exits 1 if any mutant survives or a pattern is stale.
"""
import argparse
import os
import subprocess
import sys

# (name, file, original text, mutated text): each original must occur exactly once.
MUTANTS = [
    ("bf16 query multiplied by q_scale", "src/quench/ops/attention/attention_reference.cc",
     "const float q_scale_eff = is_fp8(p.q_dtype) ? p.q_scale : 1.0f;",
     "const float q_scale_eff = p.q_scale;"),
    ("per-head k_scale ignored", "src/quench/ops/attention/attention_reference.cc",
     "p.sm_scale * q_scale_eff * p.k_scale.at(kv_head)",
     "p.sm_scale * q_scale_eff * p.k_scale.per_tensor"),
    ("per-head v_scale ignored", "src/quench/ops/attention/attention_reference.cc",
     "const double v_scale = p.v_scale.at(kv_head);",
     "const double v_scale = p.v_scale.per_tensor;"),
    ("sliding window one key short", "src/quench/ops/attention/attention_reference.cc",
     "std::max(0, row.pos - p.window_left)", "std::max(0, row.pos - p.window_left + 1)"),
    ("soft-cap not multiplied back", "src/quench/ops/attention/attention_reference.cc",
     "s = p.logit_soft_cap * std::tanh(s / p.logit_soft_cap);",
     "s = std::tanh(s / p.logit_soft_cap);"),
    ("sink left out of the denominator", "src/quench/ops/attention/attention_reference.cc",
     "double denominator = p.sinks != nullptr ? std::exp(double{p.sinks[q_head]} - max_score) : 0.0;",
     "double denominator = 0.0;"),
    ("LSE without the row max", "src/quench/ops/attention/attention_reference.cc",
     "return static_cast<float>(std::log(denominator) + max_score);",
     "return static_cast<float>(std::log(denominator));"),
    ("GQA q head -> KV head interleaved", "src/quench/ops/attention/attention_reference.cc",
     "const int32_t kv_head = q_head / (p.num_q_heads / p.kv.num_kv_heads);",
     "const int32_t kv_head = q_head % p.kv.num_kv_heads;"),
    ("FP8 output multiplied by o_scale", "src/quench/ops/attention/attention_output.cc",
     "dst[i] = float_to_fp8(row[i] / format.o_scale, fp8);",
     "dst[i] = float_to_fp8(row[i] * format.o_scale, fp8);"),
    ("V appended with k_scale", "src/quench/ops/kv_append/kv_append_reference.cc",
     "store_row(layout, v + src, v_scale.at(h), at, v_cache);",
     "store_row(layout, v + src, k_scale.at(h), at, v_cache);"),
    ("KV append multiplies by the scale", "src/quench/ops/kv_append/kv_append_reference.cc",
     "out[d] = float_to_fp8(row[d] / scale, format);",
     "out[d] = float_to_fp8(row[d] * scale, format);"),
    ("FP8 quantize multiplies by the scale", "src/quench/ops/quantize/fp8_quantize_reference.cc",
     "out[i] = float_to_fp8(x[i] / scale, format);",
     "out[i] = float_to_fp8(x[i] * scale, format);"),
    ("cos/sin cache with -sin", "src/quench/ops/rope/rope_reference.cc",
     "row[half + i] = static_cast<float>(std::sin(angle));",
     "row[half + i] = static_cast<float>(-std::sin(angle));"),
    ("on-the-fly RoPE with -sin", "src/quench/ops/rope/rope_reference.cc",
     "*sin_out = std::sin(angle);", "*sin_out = -std::sin(angle);"),
    ("RMSNorm weight of dim 0 everywhere", "src/quench/ops/qk_norm/qk_norm_reference.cc",
     "bf16_bits_to_float(weight[d])", "bf16_bits_to_float(weight[0])"),
    ("one more bf16 query row than asked", "src/quench/ops/rope_quant_append/rope_quant_append_reference.cc",
     "if (t < p.q_bf16_rows) {", "if (t <= p.q_bf16_rows) {"),
    # The step metadata every kernel reads (built on the host, tested on the CPU).
    ("slot one token late in its page", "src/quench/kv_cache/slot_mapping.cc",
     "* page_size + pos % page_size;", "* page_size + (pos + 1) % page_size;"),
    ("padded tokens write slot 0 (the null page)", "src/quench/attention/attention_metadata.cc",
     "m.slot_mapping.resize(static_cast<size_t>(num_tokens), kPaddingSlot);",
     "m.slot_mapping.resize(static_cast<size_t>(num_tokens), 0);"),
    ("padded sequences one token long", "src/quench/attention/attention_metadata.cc",
     "m.seq_lens.resize(static_cast<size_t>(num_seqs), 0);",
     "m.seq_lens.resize(static_cast<size_t>(num_seqs), 1);"),
    ("prefill offsets not rebased past decode rows", "src/quench/attention/attention_metadata.cc",
     "m.q_offsets[static_cast<size_t>(b)] - m.num_decode_tokens",
     "m.q_offsets[static_cast<size_t>(b)]"),
    # The model and engine (src/quench/model, src/quench/engine).
    ("model: linear reads the first weight of each row", "src/quench/ops/linear/linear_reference.cc",
     "row[static_cast<size_t>(k)] = bf16_bits_to_float(w[k]);",
     "row[static_cast<size_t>(k)] = bf16_bits_to_float(w[0]);"),
    ("model: the CPU decoder's linear reads the first weight of each block",
     "src/quench/ops/linear/linear_cpu.cc",
     "widened[i] = bf16_bits_to_float(w[i]);", "widened[i] = bf16_bits_to_float(w[0]);"),
    ("model: the CPU attention's running sum not rescaled by a new max",
     "src/quench/ops/attention/attention_cpu.cc",
     "rescale[t] = std::exp(s.max[qi] - new_max);", "rescale[t] = 1.0f;"),
    ("model: the CPU attention drops each row's own key",
     "src/quench/ops/attention/attention_cpu.cc",
     "std::min(position(row), chunk_begin + keys - 1)",
     "std::min(position(row), chunk_begin + keys - 2)"),
    ("model: the CPU attention's second query head of a tile takes the first's scores",
     "src/quench/ops/attention/attention_cpu.cc",
     "scores[t * kKeysPerChunk + j + r] = sums[r * T + t];",
     "scores[t * kKeysPerChunk + j + r] = sums[r * T];"),
    ("model: silu of up instead of the gate", "src/quench/ops/swiglu/swiglu_reference.cc",
     "out[i] = g / (1.0f + std::exp(-g)) * up[i];",
     "out[i] = up[i] / (1.0f + std::exp(-up[i])) * g;"),
    ("model: MLP residual dropped", "src/quench/model/decoder_model.cc",
     "add_residual(x, down);", "x = down;"),
    ("model: Qwen3 q norm with k's weight", "src/quench/model/decoder_model.cc",
     "p.q_norm_weight = w.q_norm.data();", "p.q_norm_weight = w.k_norm.data();"),
    ("model: attention scale 1/D", "src/quench/model/decoder_model.cc",
     "1.0f / std::sqrt(static_cast<float>(c.head_dim()))", "1.0f / static_cast<float>(c.head_dim())"),
    ("engine: preempted sequence keeps its computed count", "src/quench/engine/scheduler.cc",
     "seq->num_computed = 0;", "seq->num_computed = std::min(seq->num_computed, 16);"),
    ("engine: chunk tokens from one position early", "src/quench/engine/llm_engine.cc",
     "const int32_t position = c.seq->num_computed + i;",
     "const int32_t position = std::max(0, c.seq->num_computed - 1) + i;"),
    ("engine: sampled row is the chunk's first", "src/quench/engine/llm_engine.cc",
     "for (int32_t i = real - 1; i < c.num_new; ++i)", "for (int32_t i = 0; i < 1; ++i)"),
    ("engine: a rejected draft is kept", "src/quench/engine/llm_engine.cc",
     "if (token != draft[j]) break;", "if (token != draft[j] && j > 0) break;"),
    ("engine: rejected drafts counted as computed", "src/quench/engine/scheduler.cc",
     "c.seq->num_computed = c.seq->num_tokens() - 1;", "c.seq->num_computed += c.num_new;"),
    ("engine: n-gram drafts start one token late", "src/quench/engine/ngram_proposer.cc",
     "const int64_t from = start + n;", "const int64_t from = start + n + (len - start - n > 1);"),
    ("argmax: the last of equal maxima", "src/quench/ops/argmax/argmax_reference.cc",
     "if (row[c] > row[best]) best = c;", "if (row[c] >= row[best]) best = c;"),
    ("engine: picked rows drop their logprobs", "src/quench/engine/llm_engine.cc",
     "pick.top = p.logprobs;  // -1: none asked", "pick.top = -1;"),
    ("engine: prompt logprobs of the row's own token", "src/quench/engine/llm_engine.cc",
     "pick.token = s.prompt[static_cast<size_t>(prompt_rows[i].position + 1)];",
     "pick.token = s.prompt[static_cast<size_t>(prompt_rows[i].position)];"),
    ("logprobs: equal logits rank the higher id first",
     "src/quench/ops/logprobs/row_logprobs_reference.cc",
     "(row[static_cast<size_t>(a)] == row[static_cast<size_t>(b)] && a < b);",
     "(row[static_cast<size_t>(a)] == row[static_cast<size_t>(b)] && a > b);"),
    ("logprobs: exponentials without the row max", "src/quench/ops/logprobs/row_logprobs_reference.cc",
     "const double max_logit = *std::max_element(row.begin(), row.end());",
     "const double max_logit = 0.0;"),
    ("sampling: top_k ignored", "src/quench/ops/sampling/sample_rows_reference.cc",
     "if (sampler.top_k > 0 && static_cast<size_t>(sampler.top_k) < vocab) {", "if (false) {"),
    ("sampling: equal logits rank the higher id first",
     "src/quench/ops/sampling/sample_rows_reference.cc",
     "return la > lb || (la == lb && a < b);", "return la > lb || (la == lb && a > b);"),
    ("sampling: the race keeps the smallest score",
     "src/quench/ops/sampling/sample_rows_reference.cc",
     "score > best_score || (score == best_score && id < best)",
     "score < best_score || (score == best_score && id < best)"),
    ("sampling: the nucleus takes one token more",
     "src/quench/ops/sampling/sample_rows_reference.cc",
     "    kept = nucleus;", "    kept = std::min(nucleus + 1, kept);"),
    ("sampling: min_p ignored", "src/quench/ops/sampling/row_sampling.h",
     "return w < min_p ? 0.0f : w;", "return w;"),
    ("sampling: the host sampler ignores the request's generator", "src/quench/engine/sampler.cc",
     "return RowSampler{params.temperature, params.top_k, params.top_p, params.min_p, rng()};",
     "return RowSampler{params.temperature, params.top_k, params.top_p, params.min_p, 7};"),
    ("model: Qwen2's q bias dropped", "src/quench/model/decoder_model.cc",
     "linear(t, d, qd, h, w.q_proj, &w.q_bias)", "linear(t, d, qd, h, w.q_proj)"),
    ("json: the mask is not applied", "src/quench/engine/logits_processors.cc",
     "if (allowed_bits != nullptr) {", "if (allowed_bits != nullptr && false) {"),
    ("json: either closer closes a container", "src/quench/engine/json_prefix.cc",
     "if (c != (stack_.back() == '{' ? '}' : ']')) return false;",
     "if (c != '}' && c != ']') return false;"),
    ("edits: the repetition penalty divides negative logits", "src/quench/ops/sampling/logit_edits.h",
     "  if (e.repetition != 1.0f) l = l > 0.0f ? l / e.repetition : l * e.repetition;",
     "  if (e.repetition != 1.0f) l = l / e.repetition;"),
    ("edits: a mask's ids past its words stay", "src/quench/ops/sampling/logit_edits.h",
     "return token / 32 < words && ((bits[token / 32] >> (token % 32)) & 1u) != 0;",
     "return token / 32 >= words || ((bits[token / 32] >> (token % 32)) & 1u) != 0;"),
    ("picks plan: draws' ids over the argmax ids in the pool", "src/quench/model/row_picks_plan.cc",
     "place = plan.most_argmax + pass.draw_rows.size();", "place = pass.draw_rows.size();"),
    ("picks plan: edited rows' logprobs read the edited logits", "src/quench/model/row_picks_plan.cc",
     "pass.logprobs_saved.push_back(saved);", "pass.logprobs_saved.push_back(-1);"),
    ("picks plan: masks not padded to the pass's longest", "src/quench/model/row_picks_plan.cc",
     "(static_cast<size_t>(pass.allowed_words) - e->allowed_bits.size()));",
     "0);"),
    ("logits: the pick ignores the request's edits", "src/quench/engine/llm_engine.cc",
     "pick.edits = row_edits;", "pick.edits = nullptr;"),
    ("engine: drafts for adjusted requests", "src/quench/engine/sampler.cc",
     "return params.temperature == 0.0f && !adjusts_logits(params);",
     "return params.temperature == 0.0f;"),
    ("engine: drafts for sampled requests", "src/quench/engine/sampler.cc",
     "return params.temperature == 0.0f && !adjusts_logits(params);",
     "return !adjusts_logits(params);"),
    ("logits: repetition penalty skips the prompt", "src/quench/engine/logits_processors.cc",
     "const int32_t* pt = repetition ? tokens.prompt_tokens().data() : kNoTokens;",
     "const int32_t* pt = kNoTokens;"),
    ("logits: frequency penalty once per token", "src/quench/engine/logits_processors.cc",
     "params.frequency_penalty * static_cast<float>(count)", "params.frequency_penalty"),
    ("logits: min_tokens holds one token too many", "src/quench/engine/logits_processors.cc",
     "static_cast<int64_t>(tokens.output_size()) < params.min_tokens",
     "static_cast<int64_t>(tokens.output_size()) <= params.min_tokens"),
    ("penalty sets: a rolled-back output token stays counted", "src/quench/engine/penalty_token_sets.cc",
     "    count(counted_[i - 1], -1);", "    (void)0;"),
    ("penalty sets: a changed prompt keeps its old set", "src/quench/engine/penalty_token_sets.cc",
     "if (!std::ranges::equal(prompt, prompt_)) {", "if (prompt_.empty() && !prompt.empty()) {"),
    ("json: the packed mask's bits shifted", "src/quench/engine/json_prefix.cc",
     "mask->bits[id / 32] |= 1u << (id % 32);", "mask->bits[id / 32] |= 1u << (id % 31);"),
    ("logits: stop ids obey ignore_eos", "src/quench/engine/llm_engine.cc",
     "(!s.params.ignore_eos && holds(eos_ids_)) || holds(s.params.stop_token_ids)",
     "(!s.params.ignore_eos && (holds(eos_ids_) || holds(s.params.stop_token_ids)))"),
    ("engine: prefix cache indexes the page after the full one", "src/quench/engine/scheduler.cc",
     "seq.pages[static_cast<size_t>(seq.num_hashed_pages)]",
     "seq.pages[std::min(seq.pages.size() - 1, static_cast<size_t>(seq.num_hashed_pages) + 1)]"),
    ("engine: prefix cache hands out a freed page without reclaiming it", "src/quench/engine/scheduler.cc",
     "allocator_.reclaim(*page);  // freed but intact", "allocator_.allocate(1);"),
]


def run(command, env):
    return subprocess.run(command, shell=True, capture_output=True, text=True, env=env).stdout


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--build-dir", default="build")
    parser.add_argument("--only", default="", help="run the mutants whose name contains this")
    args = parser.parse_args()
    os.chdir(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    env = dict(os.environ)
    env["PATH"] = "/usr/local/cuda/bin:" + env.get("PATH", "")
    build = f"cmake --build {args.build_dir} --target quench_tests 2>&1"
    tests = f'ctest --test-dir {args.build_dir} -j 2 --timeout 300 -E "gpu_tests|format" 2>&1'
    problems = 0
    mutants = [m for m in MUTANTS if args.only in m[0]]
    for name, path, original, mutated in mutants:
        with open(path) as f:
            source = f.read()
        if source.count(original) != 1:
            print(f"STALE     {name}: its pattern occurs {source.count(original)} times in {path}")
            problems += 1
            continue
        try:
            with open(path, "w") as f:
                f.write(source.replace(original, mutated))
            out = run(build, env)
            if "Error" in out:
                print(f"NO BUILD  {name}:\n{out[-500:]}")
                problems += 1
                continue
            failed = [line.split(" - ", 1)[1].split(" (")[0].split("  #")[0]
                      for line in run(tests, env).splitlines()
                      if " - " in line and ("(Failed)" in line or "(SEGFAULT)" in line
                                            or "(Timeout)" in line or "(Subprocess aborted)" in line)]
            if failed:
                print(f"killed    {name}: {len(failed)} tests, e.g. {failed[0]}")
            else:
                print(f"SURVIVED  {name}")
                problems += 1
        finally:
            with open(path, "w") as f:
                f.write(source)
    run(build, env)  # the tests binary back to the real sources
    print(f"{len(mutants) - problems} of {len(mutants)} mutants killed")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
