"""The sans-IO parts of probing: schemas that admit exactly the expected values, a fake model that
follows them, the defect that re-types two values, the differences the judge names, and what the
judge makes of the answers to the tool-choice probes."""

from __future__ import annotations

from typing import Any

import orjson
from hypothesis import given
from hypothesis import strategies as st

from calltap.fakes.defects import ChangeTwoValues
from calltap.fakes.model import answer, sample_arguments
from calltap.probe.judge import Reply, differences, judge_first
from calltap.probe.probes import ASKED, NAMED, NESTED, NOTE, PROBES, Function, schema_for

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**53) + 1, 2**53 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
)


@given(json_values)
def test_a_value_has_no_difference_from_itself_or_its_json_round_trip(value: Any) -> None:
    assert differences(value, value) == []
    assert differences(value, orjson.loads(orjson.dumps(value))) == []


@given(st.dictionaries(st.text(), json_values, min_size=1, max_size=5))
def test_the_fake_model_answers_a_const_schema_with_exactly_its_values(value: Any) -> None:
    assert sample_arguments(schema_for(value)) == value


def test_true_is_not_1_and_a_number_is_not_its_text() -> None:
    assert differences({"a": True, "b": 1}, {"a": 1, "b": "1"}) == [
        "at /a expected true (boolean), received 1 (integer)",
        'at /b expected 1 (integer), received "1" (string)',
    ]
    assert differences({"x": [1.0, {"y": None}]}, {"x": [1, {"y": None}]}) == []
    assert differences({"a": 1}, {"a": 1, "b": 2}) == ["/b was not expected"]
    assert differences({"a": 1, "b": 2}, {"b": 2}) == ["/a is missing"]


def test_every_probe_schema_is_strict_at_every_level() -> None:
    def objects(schema: dict[str, Any]) -> list[dict[str, Any]]:
        found = [schema] if schema.get("type") == "object" else []
        for inner in (schema.get("properties") or {}).values():
            found += objects(inner)
        return found

    for probe in PROBES.values():
        for function in probe.functions:
            for schema in objects(function.parameters):
                assert schema["additionalProperties"] is False
                assert schema["required"] == list(schema["properties"])


def test_a_schema_without_const_gets_the_same_sample_values_as_before() -> None:
    plain = {"type": "object", "properties": {"city": {"type": "string"}, "n": {"type": "integer"}}}
    assert sample_arguments(plain) == {"city": "Taipei", "n": 3}
    assert sample_arguments(schema_for({"city": "Zürich"}), follow_const=False) == {
        "city": "Taipei"
    }


def test_the_fake_model_quotes_a_tool_result_on_the_turn_after_a_call() -> None:
    request = {"messages": [{"role": "user", "content": "q"}, {"role": "tool", "content": "r 1"}]}
    reply = answer(orjson.dumps(request), request, text_events=8)
    assert reply.content == "The tool answered: r 1"
    assert reply.finish_reason == "stop"


def test_change_two_values_re_types_the_first_two_leaves_of_a_whole_answer() -> None:
    arguments = orjson.dumps(NESTED.arguments).decode()
    body = {"choices": [{"message": {"tool_calls": [{"function": {"arguments": arguments}}]}}]}
    changed = ChangeTwoValues().whole(body)
    text = changed["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"]
    value = orjson.loads(text)
    assert value["flags"] == {"enabled": 1, "retries": "1"}
    assert {k: v for k, v in value.items() if k != "flags"} == {
        k: v for k, v in NESTED.arguments.items() if k != "flags"
    }


CHAT = "/v1/chat/completions"


def chat_answer(*calls: tuple[Function, dict[str, Any]], text: str | None = None) -> Reply:
    """A whole chat.completion with these calls (function, arguments) and text."""
    tool_calls = [
        {
            "id": f"call_{index}",
            "type": "function",
            "function": {"name": function.name, "arguments": orjson.dumps(arguments).decode()},
        }
        for index, (function, arguments) in enumerate(calls)
    ]
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if tool_calls:
        message["tool_calls"] = tool_calls
    choice = {"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop"}
    body = {"id": "c", "object": "chat.completion", "model": "m", "choices": [choice]}
    return Reply(200, orjson.dumps(body), "application/json")


def judged(name: str, reply: Reply) -> list[str]:
    return judge_first(PROBES[name], reply, CHAT, "openai.chat").reasons


def test_choice_none_passes_on_text_and_fails_on_a_call() -> None:
    assert judged("choice-none", chat_answer(text="I may not call a tool here.")) == []
    assert judged("choice-none", chat_answer((NOTE, NOTE.arguments))) == [
        "1 tool call(s) (probe_note) instead of an answer",
        "finish reason 'tool_calls', not stop",
        "the answer has no text",
    ]
    assert judged("choice-none", chat_answer(text="  ")) == ["the answer has no text"]


def test_choice_named_passes_on_the_named_function_alone() -> None:
    assert judged("choice-named", chat_answer((NAMED, NAMED.arguments))) == []


def test_choice_named_fails_on_the_other_function() -> None:
    assert judged("choice-named", chat_answer((ASKED, ASKED.arguments))) == [
        "no call of probe_named",
        "a call of 'probe_asked', not the function the tool choice named",
    ]


def test_choice_named_fails_on_both_functions() -> None:
    both = chat_answer((ASKED, ASKED.arguments), (NAMED, NAMED.arguments))
    assert judged("choice-named", both) == [
        "2 call(s), expected 1",
        "a call of 'probe_asked', not the function the tool choice named",
    ]


def test_choice_named_checks_the_named_functions_arguments() -> None:
    wrong = chat_answer((NAMED, {**NAMED.arguments, "turn": "2"}))
    assert judged("choice-named", wrong) == [
        'probe_named: at /turn expected 2 (integer), received "2" (string)'
    ]
