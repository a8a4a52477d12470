#!/usr/bin/env python3
"""Writes the expected renders of tests/data/chat_templates/*.jinja for quench's template tests.

Each template is rendered with Python's jinja2 configured exactly as HF transformers'
apply_chat_template configures it (ImmutableSandboxedEnvironment with trim_blocks,
lstrip_blocks and loopcontrols; raise_exception, strftime_now and HF's tojson) on several
variable sets, and <name>.json records {"cases": [{"name", "variables", "expected" | "error"}]}.
"variables" is the whole render context (messages, add_generation_prompt, tools, documents,
special tokens, extra kwargs). The C++ test (tests/server/jinja/chat_template_fixtures_test.cc)
renders the same and compares byte for byte. Needs jinja2 (3.1.x); CI uses the checked-in
output and does not run this.

  python3 tools/make_chat_template_fixtures.py
"""

import json
import pathlib
from datetime import datetime

import jinja2
from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment

DATA = pathlib.Path(__file__).resolve().parent.parent / "tests" / "data" / "chat_templates"


def hf_environment():
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                          sort_keys=sort_keys)

    def strftime_now(format):
        return datetime.now().strftime(format)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def context(messages, add_generation_prompt=True, tools=None, tokens=None, **kwargs):
    variables = dict(tokens or {})
    variables.update(kwargs)
    variables.update(messages=messages, tools=tools, documents=None,
                     add_generation_prompt=add_generation_prompt)
    return variables


def user(text):
    return {"role": "user", "content": text}


def assistant(text):
    return {"role": "assistant", "content": text}


def system(text):
    return {"role": "system", "content": text}


LLAMA = {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>"}
QWEN = {"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"}
MISTRAL = {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"}
GEMMA = {"bos_token": "<bos>", "eos_token": "<eos>"}

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather in a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                       "required": ["city"]},
    },
}
TOOL_CALL = {"type": "function",
             "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}
TIME_TOOL = {
    "type": "function",
    "function": {
        "name": "get_time",
        "description": "Local time in a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"},
                                                        "format": {"type": "string"}}},
    },
}


def call(call_id, name, arguments):
    """A tool call as quench passes it to templates: OpenAI's shape, arguments parsed (as HF's)."""
    return {"id": call_id, "type": "function",
            "function": {"name": name, "arguments": arguments}}


# A conversation with tool calls as an OpenAI client sends it (tests/server/openai_protocol_test.cc
# sends these with the arguments as JSON strings and null content, and expects the same render).
PARALLEL_CALLS = [
    system("sys"), user("Weather and time in Paris?"),
    {"role": "assistant", "content": "Checking both.",
     "tool_calls": [call("call_1", "get_weather", {"city": "Paris"}),
                    call("call_2", "get_time", {"city": "Paris", "format": "24h"})]},
    {"role": "tool", "tool_call_id": "call_1", "content": "21C"},
    {"role": "tool", "tool_call_id": "call_2", "content": "14:05"},
]
LLAMA_CALL = [
    user("Weather in Paris?"),
    {"role": "assistant", "content": "",
     "tool_calls": [call("call_1", "get_weather", {"city": "Paris"})]},
    {"role": "tool", "tool_call_id": "call_1", "content": "{\"temp\": 21}"},
]

CASES = {
    "llama3": [
        ("system_first", context([system("  Be brief.  "), user(" Hi "), assistant("Hello!"),
                                  user("Weather?")], tokens=LLAMA)),
        ("no_system", context([user("Hi")], tokens=LLAMA)),
        ("no_generation_prompt", context([user("Hi"), assistant("Hey")],
                                         add_generation_prompt=False, tokens=LLAMA)),
        ("date_kwarg", context([user("Today?")], tokens=LLAMA, date_string="05 Mar 2025")),
        ("tools_in_user_message", context([system("sys"), user("Weather in Paris?")],
                                          tools=[WEATHER_TOOL], tokens=LLAMA)),
        ("tool_call_and_result", context(
            [user("Weather?"), {"role": "assistant", "tool_calls": [TOOL_CALL]},
             {"role": "tool", "content": "{\"temp\": 21}"}], tokens=LLAMA)),
        ("tool_call_with_ids", context(LLAMA_CALL, tools=[WEATHER_TOOL], tokens=LLAMA)),
        ("two_tool_calls_raise", context(
            [user("x"), {"role": "assistant", "tool_calls": [TOOL_CALL, TOOL_CALL]}],
            tokens=LLAMA)),
        ("unicode", context([user("日本語 👍🏽 — naïve\u3000")], tokens=LLAMA)),
    ],
    "qwen3": [
        ("system_first", context([system("You are Qwen."), user("Hi")], tokens=QWEN)),
        ("multi_turn_thinking", context(
            [user("1+1?"), assistant("<think>\nsimple\n</think>\n\n2"), user("2+2?"),
             assistant("<think>\nagain\n</think>\n\n4")], add_generation_prompt=False,
            tokens=QWEN)),
        ("enable_thinking_false", context([user("Hi")], tokens=QWEN, enable_thinking=False)),
        ("enable_thinking_true", context([user("Hi")], tokens=QWEN, enable_thinking=True)),
        ("tools", context([system("sys"), user("Weather?")], tools=[WEATHER_TOOL], tokens=QWEN)),
        ("tool_round_trip", context(
            [user("Weather in Paris?"),
             {"role": "assistant", "content": "", "tool_calls": [TOOL_CALL]},
             {"role": "tool", "content": "21C"}, {"role": "tool", "content": "sunny"}],
            tools=[WEATHER_TOOL], tokens=QWEN)),
        ("parallel_calls_with_ids", context(PARALLEL_CALLS, tools=[WEATHER_TOOL, TIME_TOOL],
                                            tokens=QWEN)),
        ("reasoning_content_field", context(
            [user("q"), {"role": "assistant", "content": "a", "reasoning_content": "r"}],
            add_generation_prompt=False, tokens=QWEN)),
        ("system_later", context([user("a"), system("late"), user("b")], tokens=QWEN)),
    ],
    "mistral": [
        ("system_first", context([system("Sys"), user("Hi"), assistant("Hello"), user("Bye")],
                                 tokens=MISTRAL)),
        ("no_system", context([user("Hi")], add_generation_prompt=False, tokens=MISTRAL)),
        ("bad_alternation_raises", context([user("a"), user("b")], tokens=MISTRAL)),
        ("unknown_role_raises", context([user("a"), {"role": "tool", "content": "x"}],
                                        tokens=MISTRAL)),
    ],
    "gemma": [
        ("system_first", context([system("Sys"), user(" Hi "), assistant("Hello"), user("More")],
                                 tokens=GEMMA)),
        ("no_generation_prompt", context([user("Hi")], add_generation_prompt=False,
                                         tokens=GEMMA)),
        ("content_parts", context([{"role": "user", "content": [
            {"type": "image"}, {"type": "text", "text": " Describe. "}]}], tokens=GEMMA)),
        ("bad_alternation_raises", context([assistant("first")], tokens=GEMMA)),
    ],
    "chatml": [
        ("default_system", context([user("Hi")])),
        ("own_system", context([system("Sys"), user("Hi"), assistant("Yo")],
                               add_generation_prompt=False)),
        ("multiline_content", context([user("line 1\n  line 2\n")])),
    ],
    "kitchen_sink": [
        ("conversation", context([system("sys"), user("  hi  "), assistant("hello"),
                                  user("bye")])),
        ("single_message", context([{"role": "user", "content": "only", "name": "n"}])),
        ("raises", context([user("x")], raise_now="boom")),
    ],
}


def main():
    env = hf_environment()
    for name, cases in CASES.items():
        template = env.from_string((DATA / f"{name}.jinja").read_text(encoding="utf-8"))
        out = []
        for case_name, variables in cases:
            case = {"name": case_name, "variables": variables}
            try:
                case["expected"] = template.render(**variables)
            except jinja2.exceptions.TemplateError as e:
                case["error"] = str(e)
            out.append(case)
        path = DATA / f"{name}.json"
        path.write_text(json.dumps({"cases": out}, ensure_ascii=False, indent=1) + "\n",
                        encoding="utf-8")
        print(f"wrote {path} ({len(out)} cases)")


if __name__ == "__main__":
    main()
