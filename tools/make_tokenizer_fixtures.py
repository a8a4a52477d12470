#!/usr/bin/env python3
"""Writes the tokenizer test fixtures under tests/data/tokenizer/: for each style (the
pre-tokenizers, normalizers and post-processors of Llama-3, Qwen2/3 and GPT-2), a byte-level BPE
tokenizer.json trained by HuggingFace `tokenizers` on a fixed corpus, and cases.json with the ids
HF's own encoder gives for strings chosen to hit the corners (contractions in any case, digit
runs, whitespace runs before words and at the end, newlines, accents composed and not, emoji with
modifiers, CJK, Arabic, special tokens inside text). tests/tokenizer checks quench's encoder and
decoder against them, so they pin agreement with HF without Python at test time.

Usage: pip install tokenizers==0.20.3 && tools/make_tokenizer_fixtures.py
Deterministic: the same tokenizers version writes the same files.
"""
import json
import os

from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

LLAMA3_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                r"|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
               r"|\s*[\r\n]+|\s+(?!\S)|\s+")

CORPUS = [
    "The quick brown fox jumps over the lazy dog. It's 12:45 and we've got 3 dogs, 1024 cats.",
    "Attention is all you need: softmax(QK^T / sqrt(d)) V, computed in FP8 on Hopper tensor cores.",
    "def forward(self, x):\n    return self.proj(x) + x  # residual\n\n\tif y:\n\t\tprint('ok')",
    "Café, naïve, résumé, jalapeño; Straße; ÆØÅ æøå; Ελληνικά; русский текст; 日本語のテキスト。",
    "你好，世界！这是一个测试。 العربية نص تجريبي. हिन्दी पाठ. 한국어 텍스트.",
    "Emoji: 👍🏽 🎉🎉 🇫🇷 👨‍👩‍👧 — “quotes” and ‘single’ … ellipsis",
    "I'M SHOUTING, YOU'RE NOT; they'll say he'd've done it. don't won't can't",
    "Numbers: 3.14159 2718281828 1,000,000 -42 +7 0x1F 1e-9 2026-12-05",
    "   leading spaces, trailing spaces   \n\n\nmany newlines\r\nwindows line\r\n  ",
] * 40


def syllable_text(lines):
    """Pseudo-words from a fixed syllable set (a linear congruential draw, no randomness), so the
    trainer sees many pairs of similar frequency and learns merges whose order matters."""
    syllables = ["ka", "ro", "mi", "te", "sun", "ver", "qua", "lo", "ne", "ax", "ing", "tion", "'s",
                 "Ür", "ñi", "日", "本", "42", "7", " ", "  ", "\n"]
    state, out = 12345, []
    for _ in range(lines):
        words = []
        for _ in range(12):
            n = 1 + state % 4
            word = ""
            for _ in range(n):
                state = (state * 1103515245 + 12345) % (1 << 31)
                word += syllables[state % len(syllables)]
            state = (state * 1103515245 + 12345) % (1 << 31)
            words.append(word.upper() if state % 7 == 0 else word)
        out.append(" ".join(words))
    return out


CORPUS += syllable_text(400)

CASES = [
    "", " ", "  ", "\n", " \n ", "hello", " hello", "hello world", "Hello  World  ",
    "It's I'M you're THEY'LL we'Ve she'D", "don't stop", "1", "12", "123", "1234", "1234567",
    "3.14159 and 2026-12-05", "a\n\nb", "a \n b", "tab\tseparated\tvalues", "trailing   ",
    "   leading", "x\r\ny", "Café naïve", "Cafe\u0301 nai\u0308ve", "Straße", "日本語のテキスト。",
    "你好，世界！", "العربية", "👍🏽🎉", "👨‍👩‍👧 family", "“quotes” — dash…",
    "def f(x):\n    return x + 1\n", "mixed 123abc abc123 ABC", "<|begin_of_text|>Hi<|eot_id|>",
    "before<|eot_id|>after <|eot_id|> spaced", "unseen: zqxjkw ŷŵ Ɛ ꙮ 𝔘𝔫𝔦𝔠𝔬𝔡𝔢",
    "The quick brown fox jumps over the lazy dog. " * 3,
    "karomi tesun VERQUA lone axing tion's Ürñi 日本 427 kaka roro",
]

SPECIALS = ["<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>"]


def build(style):
    tok = Tokenizer(models.BPE(ignore_merges=(style == "llama3")))
    if style == "llama3":
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(LLAMA3_SPLIT), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=False)])
    elif style == "qwen2":
        tok.normalizer = normalizers.NFC()
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(QWEN2_SPLIT), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)])
    else:  # gpt2
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=1500, min_frequency=2, special_tokens=SPECIALS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator(CORPUS, trainer=trainer)
    if style == "llama3":
        bos = tok.token_to_id("<|begin_of_text|>")
        tok.post_processor = processors.Sequence([
            processors.ByteLevel(trim_offsets=False),
            processors.TemplateProcessing(single="<|begin_of_text|> $A",
                                          pair="<|begin_of_text|> $A <|begin_of_text|> $B:1",
                                          special_tokens=[("<|begin_of_text|>", bos)])])
    else:
        tok.post_processor = processors.ByteLevel(trim_offsets=False)
    return tok


def main():
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "tokenizer")
    for style in ["llama3", "qwen2", "gpt2"]:
        tok = build(style)
        out = os.path.join(root, style)
        os.makedirs(out, exist_ok=True)
        tok.save(os.path.join(out, "tokenizer.json"))
        cases = []
        for text in CASES:
            ids = tok.encode(text, add_special_tokens=True).ids
            plain = tok.encode(text, add_special_tokens=False).ids
            cases.append({"text": text, "ids": ids, "ids_no_special": plain,
                          "decoded": tok.decode(ids, skip_special_tokens=False),
                          "decoded_skip_special": tok.decode(ids, skip_special_tokens=True)})
        with open(os.path.join(out, "cases.json"), "w", encoding="utf-8") as f:
            json.dump({"tokenizers_version": __import__("tokenizers").__version__, "cases": cases},
                      f, ensure_ascii=False, indent=1)
        print(style, tok.get_vocab_size(), "tokens,", len(cases), "cases")


if __name__ == "__main__":
    main()
