#include "quench/tokenizer/tokenizer.h"

#include <utf8proc.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "quench/core/error.h"
#include "quench/core/json_file.h"
#include "quench/tokenizer/byte_level.h"
#include "quench/tokenizer/utf8.h"

namespace quench {

using nlohmann::json;

namespace {

struct AddedToken {
  int32_t id = 0;
  std::string content;
  bool special = false;
  bool lstrip = false;
  bool rstrip = false;
};

struct PreTokenizerStep {
  enum class Kind { kSplit, kByteLevel } kind = Kind::kSplit;
  std::shared_ptr<RegexSplitter> splitter;  // Split, or ByteLevel with use_regex
  bool add_prefix_space = false;            // ByteLevel
};

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

std::string nfc(std::string_view text) {
  utf8proc_uint8_t* out =
      utf8proc_NFC(reinterpret_cast<const utf8proc_uint8_t*>(std::string(text).c_str()));
  QUENCH_REQUIRE(out != nullptr, "tokenizer: NFC normalization failed");
  std::string s(reinterpret_cast<const char*>(out));
  std::free(out);
  return s;
}

}  // namespace

struct Tokenizer::Impl {
  std::string source;
  std::vector<AddedToken> added;                    // longest content first
  std::unordered_map<int32_t, size_t> added_by_id;  // id -> index in added
  bool nfc = false;
  std::vector<PreTokenizerStep> pre_tokenizer;
  std::unique_ptr<BpeModel> model;
  std::vector<int32_t> prefix_ids, suffix_ids;  // TemplateProcessing around the sequence
  bool byte_level_decoder = false;
  std::vector<std::string> id_to_token;  // vocabulary and added tokens

  void parse_normalizer(const json& j);
  void parse_pre_tokenizer(const json& j);
  void parse_post_processor(const json& j, const json& root);
  void parse_decoder(const json& j);
  void encode_segment(std::string_view text, std::vector<int32_t>& ids) const;
};

void Tokenizer::Impl::parse_normalizer(const json& j) {
  if (j.is_null()) return;
  const std::string type = j.value("type", "");
  if (type == "Sequence") {
    for (const json& n : j.at("normalizers"))
      parse_normalizer(n);
  } else if (type == "NFC") {
    nfc = true;
  } else {
    fail(str_cat(source, ": normalizer \"", type,
                 "\" is not supported; supported: NFC, Sequence, null"));
  }
}

void Tokenizer::Impl::parse_pre_tokenizer(const json& j) {
  if (j.is_null()) return;
  const std::string type = j.value("type", "");
  if (type == "Sequence") {
    for (const json& p : j.at("pretokenizers"))
      parse_pre_tokenizer(p);
  } else if (type == "Split") {
    QUENCH_REQUIRE(j.value("behavior", "") == "Isolated" && !j.value("invert", false), source,
                   ": Split pre-tokenizer with behavior \"", j.value("behavior", ""),
                   "\" is not supported; supported: behavior Isolated, invert false");
    const json& pattern = j.at("pattern");
    std::string regex;
    if (pattern.contains("Regex")) {
      regex = pattern.at("Regex").get<std::string>();
    } else {  // a literal string: escape it for the regex engine
      regex = "\\Q" + pattern.at("String").get<std::string>() + "\\E";
    }
    pre_tokenizer.push_back(
        {PreTokenizerStep::Kind::kSplit, std::make_shared<RegexSplitter>(regex), false});
  } else if (type == "ByteLevel") {
    PreTokenizerStep step{PreTokenizerStep::Kind::kByteLevel, nullptr,
                          j.value("add_prefix_space", false)};
    if (j.value("use_regex", true))
      step.splitter = std::make_shared<RegexSplitter>(gpt2_split_pattern());
    pre_tokenizer.push_back(step);
  } else {
    fail(str_cat(source, ": pre_tokenizer \"", type,
                 "\" is not supported; supported: Split, ByteLevel, Sequence, null"));
  }
}

void Tokenizer::Impl::parse_post_processor(const json& j, const json& root) {
  if (j.is_null()) return;
  const std::string type = j.value("type", "");
  if (type == "Sequence") {
    for (const json& p : j.at("processors"))
      parse_post_processor(p, root);
  } else if (type == "ByteLevel") {
    // Offsets only; ids are unchanged.
  } else if (type == "TemplateProcessing") {
    const json& specials = j.at("special_tokens");
    bool seen_sequence = false;
    for (const json& item : j.at("single")) {
      if (item.contains("Sequence")) {
        seen_sequence = true;
        continue;
      }
      const std::string name = item.at("SpecialToken").at("id").get<std::string>();
      QUENCH_REQUIRE(specials.contains(name), source, ": template names special token \"", name,
                     "\", which special_tokens does not define");
      for (const json& id : specials.at(name).at("ids"))
        (seen_sequence ? suffix_ids : prefix_ids).push_back(id.get<int32_t>());
    }
  } else {
    fail(str_cat(source, ": post_processor \"", type,
                 "\" is not supported; supported: TemplateProcessing, ByteLevel, Sequence, null"));
  }
  (void)root;
}

void Tokenizer::Impl::parse_decoder(const json& j) {
  if (j.is_null()) return;
  const std::string type = j.value("type", "");
  QUENCH_REQUIRE(type == "ByteLevel", source, ": decoder \"", type,
                 "\" is not supported; supported: ByteLevel, null");
  byte_level_decoder = true;
}

void Tokenizer::Impl::encode_segment(std::string_view text, std::vector<int32_t>& ids) const {
  if (text.empty()) return;
  std::vector<std::string> pieces{nfc ? quench::nfc(text) : std::string(text)};
  for (const PreTokenizerStep& step : pre_tokenizer) {
    std::vector<std::string> next;
    for (std::string& piece : pieces) {
      if (step.kind == PreTokenizerStep::Kind::kSplit) {
        step.splitter->split(piece, next);
        continue;
      }
      if (step.add_prefix_space && !piece.empty() && piece[0] != ' ')
        piece.insert(piece.begin(), ' ');
      std::vector<std::string> parts;
      if (step.splitter) {
        step.splitter->split(piece, parts);
      } else {
        parts.push_back(std::move(piece));
      }
      for (const std::string& part : parts)
        next.push_back(to_byte_level(part));
    }
    pieces = std::move(next);
  }
  for (const std::string& piece : pieces)
    model->encode_word(piece, ids);
}

Tokenizer::Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {
  vocab_size_ = static_cast<int32_t>(impl_->id_to_token.size());
}
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

Tokenizer Tokenizer::from_file(const std::string& path) {
  return from_json(read_text_file(path, "tokenizer"), path);
}

Tokenizer Tokenizer::from_json(std::string_view json_text, const std::string& source) {
  auto impl = std::make_unique<Impl>();
  impl->source = source;
  json root;
  try {
    root = json::parse(json_text);
  } catch (const json::exception& e) {
    fail(str_cat(source, ": not valid JSON: ", e.what()));
  }
  try {
    const json& model = root.at("model");
    const std::string type = model.value("type", "BPE");
    QUENCH_REQUIRE(type == "BPE", source, ": model \"", type,
                   "\" is not supported; supported: BPE (byte-level)");
    QUENCH_REQUIRE(!model.value("byte_fallback", false), source,
                   ": BPE with byte_fallback (SentencePiece-style) is not supported yet");
    std::unordered_map<std::string, int32_t> vocab;
    int32_t max_id = -1;
    for (const auto& [token, id] : model.at("vocab").items()) {
      vocab.emplace(token, id.get<int32_t>());
      max_id = std::max(max_id, id.get<int32_t>());
    }
    std::vector<std::pair<std::string, std::string>> merges;
    for (const json& m : model.at("merges")) {
      if (m.is_array()) {
        merges.emplace_back(m.at(0).get<std::string>(), m.at(1).get<std::string>());
      } else {
        const std::string s = m.get<std::string>();
        const size_t space = s.find(' ', 1);
        QUENCH_REQUIRE(space != std::string::npos, source, ": merge \"", s,
                       "\" is not \"left right\"");
        merges.emplace_back(s.substr(0, space), s.substr(space + 1));
      }
    }
    for (const json& a : root.value("added_tokens", json::array())) {
      AddedToken t;
      t.id = a.at("id").get<int32_t>();
      t.content = a.at("content").get<std::string>();
      t.special = a.value("special", false);
      t.lstrip = a.value("lstrip", false);
      t.rstrip = a.value("rstrip", false);
      QUENCH_REQUIRE(!t.content.empty(), source, ": added token ", t.id, " is empty");
      max_id = std::max(max_id, t.id);
      impl->added.push_back(t);
    }
    impl->id_to_token.assign(static_cast<size_t>(max_id + 1), std::string());
    for (const auto& [token, id] : vocab) {
      QUENCH_REQUIRE(id >= 0, source, ": token \"", token, "\" has a negative id");
      impl->id_to_token[static_cast<size_t>(id)] = token;
    }
    std::stable_sort(impl->added.begin(), impl->added.end(),
                     [](const AddedToken& a, const AddedToken& b) {
                       return a.content.size() > b.content.size();
                     });
    for (size_t i = 0; i < impl->added.size(); ++i) {
      impl->added_by_id[impl->added[i].id] = i;
      impl->id_to_token[static_cast<size_t>(impl->added[i].id)] = impl->added[i].content;
    }
    impl->model =
        std::make_unique<BpeModel>(std::move(vocab), merges, model.value("ignore_merges", false));
    impl->parse_normalizer(root.value("normalizer", json()));
    impl->parse_pre_tokenizer(root.value("pre_tokenizer", json()));
    impl->parse_post_processor(root.value("post_processor", json()), root);
    impl->parse_decoder(root.value("decoder", json()));
  } catch (const json::exception& e) {
    fail(str_cat(source, ": malformed tokenizer.json: ", e.what()));
  }
  return Tokenizer(std::move(impl));
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special_tokens) const {
  const size_t bad = find_invalid_utf8(text);
  QUENCH_REQUIRE(bad == std::string_view::npos, "tokenizer: the text is not valid UTF-8 (byte ",
                 bad, ")");
  const Impl& m = *impl_;
  std::vector<int32_t> ids;
  if (add_special_tokens) ids = m.prefix_ids;
  // Added tokens split the text first; the stretches between them go through the model.
  size_t segment = 0, i = 0;
  while (i < text.size()) {
    const AddedToken* hit = nullptr;
    for (const AddedToken& t : m.added) {
      if (text.compare(i, t.content.size(), t.content) == 0) {
        hit = &t;
        break;
      }
    }
    if (hit == nullptr) {
      ++i;
      continue;
    }
    size_t before_end = i;
    if (hit->lstrip)
      while (before_end > segment && is_space(text[before_end - 1]))
        --before_end;
    m.encode_segment(text.substr(segment, before_end - segment), ids);
    ids.push_back(hit->id);
    i += hit->content.size();
    if (hit->rstrip)
      while (i < text.size() && is_space(text[i]))
        ++i;
    segment = i;
  }
  m.encode_segment(text.substr(segment), ids);
  if (add_special_tokens) ids.insert(ids.end(), m.suffix_ids.begin(), m.suffix_ids.end());
  return ids;
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool skip_special_tokens,
                              bool skip_unknown_ids) const {
  std::string bytes;
  for (int32_t id : ids)
    bytes += token_bytes(id, skip_special_tokens, skip_unknown_ids);
  return utf8_lossy(bytes);
}

std::string Tokenizer::token_bytes(int32_t id, bool skip_special_tokens,
                                   bool skip_unknown_ids) const {
  const Impl& m = *impl_;
  const bool known = id >= 0 && id < vocab_size_ && !m.id_to_token[static_cast<size_t>(id)].empty();
  if (!known && skip_unknown_ids) return {};
  QUENCH_REQUIRE(known, "tokenizer: id ", id, " is not in the vocabulary (", vocab_size_, " ids)");
  if (skip_special_tokens && is_special(id)) return {};
  const std::string& token = m.id_to_token[static_cast<size_t>(id)];
  if (!m.byte_level_decoder) return token;
  // A token whose every symbol is a byte-level symbol becomes those bytes; any other token (an
  // added token with characters outside the alphabet) stays as its own text.
  std::string bytes;
  for (uint32_t cp : decode_utf8(token)) {
    const std::optional<uint8_t> b = byte_level_byte(cp);
    if (!b) return token;
    bytes += static_cast<char>(*b);
  }
  return bytes;
}

std::optional<int32_t> Tokenizer::token_to_id(const std::string& token) const {
  for (const AddedToken& t : impl_->added)
    if (t.content == token) return t.id;
  const auto it = impl_->model->vocab().find(token);
  if (it == impl_->model->vocab().end()) return std::nullopt;
  return it->second;
}

const std::string& Tokenizer::id_to_token(int32_t id) const {
  static const std::string empty;
  if (id < 0 || id >= vocab_size_) return empty;
  return impl_->id_to_token[static_cast<size_t>(id)];
}

bool Tokenizer::is_special(int32_t id) const {
  const auto it = impl_->added_by_id.find(id);
  return it != impl_->added_by_id.end() && impl_->added[it->second].special;
}

}  // namespace quench
