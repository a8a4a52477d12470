// The built-in tiny model's tokenizer: a byte-level BPE trained here, deterministically, on a
// built-in English paragraph with Llama-3's split pattern, to exactly the vocabulary size asked
// for: ids 0-5 are <|pad|>, <|begin_of_text|> (BOS, added by the template), <|end_of_text|>
// (EOS) and Llama-3's chat markers <|start_header_id|>, <|end_header_id|>, <|eot_id|> (end of
// turn); 6-261 the 256 byte symbols, then one id per merge, most frequent pair first. Written as
// a tokenizer.json that Tokenizer (and HF's tokenizers) read like any other.
#pragma once

#include <cstdint>
#include <string>

namespace quench {

// vocab_size >= 262. Throws quench::Error otherwise.
std::string tiny_tokenizer_json(int32_t vocab_size);

}  // namespace quench
