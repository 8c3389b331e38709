"""Text deltas read through their chunk's template (`dialects.chat_templates`) are read as if each
chunk were decoded. The law, over generated streams of text deltas sharing one skeleton (with
OpenAI's `obfuscation` padding after or before the choices, or with a decoy `"content"` key that is
not the delta's) whose text and padding are any string token or bytes that only look like one
(escapes, quotes that close the string early, a second `choices`, invalid UTF-8, a lone
surrogate, numbers, whitespace): the fast path and the general way give the same transcript and
comparison.
"""

from __future__ import annotations

from unittest import mock

import orjson
from hypothesis import example, given
from hypothesis import strategies as st
from tests.support.properties import examples
from tests.test_plain_blocks import PATH, _compared, _general

from calltap import sse
from calltap.dialects import chat_blocks, chat_chunks, chat_templates, transcribe
from calltap.dialects.chat_templates import ARGUMENTS, TEXT, Template
from calltap.transcript import Capture

ENVELOPE = b'"id":"chatcmpl-9","object":"chat.completion.chunk","created":7,"model":"m"'
TAIL = b'"logprobs":null,"finish_reason":null}]'
CALL = b'"index":%(call)s,'
FUNCTION = b'"function":{"arguments":%(text)s}'


def _fragment(fragment: bytes = CALL + FUNCTION, *, choice: bytes = b'{"index":0',
              delta: bytes = b"", entry: bytes = b"", chunk: bytes = b"") -> bytes:
    """A chunk of one tool-call fragment (`fragment`: the inside of its object): `choice` opens
    the choice, `delta` comes before `tool_calls` in the delta, `entry` after the delta in the
    choice, `chunk` after `choices`."""
    return (b"{" + ENVELOPE + b',"choices":[' + choice + b',"delta":{' + delta
            + b'"tool_calls":[{' + fragment + b"}]}" + entry + b"}]" + chunk + b"}")


SKELETONS = {
    "text": b'{' + ENVELOPE + b',"choices":[{"index":0,"delta":{"content":%(text)s},' + TAIL
            + b"}",
    "text, padding after": b'{' + ENVELOPE + b',"choices":[{"index":0,"delta":{"content":'
                           b'%(text)s}}],"obfuscation":%(padding)s}',
    "text, padding before": b'{' + ENVELOPE + b',"obfuscation":%(padding)s,"choices":[{'
                            b'"index":0,"delta":{"content":%(text)s}}]}',
    "text, decoy": b'{' + ENVELOPE + b',"choices":[{"index":0,"logprobs":{"content":"zz"},'
                   b'"delta":{"cont\\u0065nt":%(text)s}}]}',
    "fragment": _fragment(entry=b',"logprobs":null,"finish_reason":null',
                          chunk=b',"obfuscation":%(padding)s'),
    "fragment, LiteLLM": _fragment(b'"id":null,"type":"function",' + CALL + FUNCTION),
    "fragment, id": _fragment(b'"id":"call_a",' + CALL + FUNCTION),
    "fragment, other id": _fragment(b'"id":"call_b",' + CALL + FUNCTION),
    "fragment, decoy": _fragment(CALL + b'"function":{"argum\\u0065nts":%(text)s}',
                                 choice=b'{"index":0,"logprobs":{"arguments":"z"}'),
    "fragment, finish": _fragment(entry=b',"finish_reason":"tool_calls"'),
    "fragment, list": _fragment(CALL + b'"extra":[{"a":1}],' + FUNCTION),
    "fragment, text": _fragment(delta=b'"content":"t",'),
    "fragment, true": _fragment(choice=b'{"index":true'),
    "text, spaced": b'{"id": "chatcmpl-9", "choices": [{"index": 0, "delta": {"content" :\t'
                    b'%(text)s}}], "obfuscation": %(padding)s}',
    "fragment, spaced": b'{"id": "chatcmpl-9", "choices": [{"index": 0, "delta": {"tool_calls":'
                        b' [{"index": %(call)s, "function": {"arguments" : %(text)s}}]}}]}',
    "fragment, usage": _fragment(chunk=b',"usage":{"prompt_tokens":1,"completion_tokens":2,'
                                       b'"total_tokens":3}'),
    "fragment, no index": _fragment(FUNCTION),
    "call": _fragment(CALL + b'"id":"call_a","type":"function","function":{"name":%(name)s,'
                      b'"arguments":""}'),
}
WORDS = st.text(max_size=8).filter(lambda text: not any(0xD800 <= ord(c) <= 0xDFFF for c in text))
RAW_STRINGS = [
    b'""', b' "a" ', b'"\\""', b'"\\\\"', b'"a\\"},\\"x"', b'"\\u00e9"', b'"\\ud83d\\ude00"',
    b'"\\ud800"', b'"\xff"', b'"\xc3\xa9"', b'"\x01"', b'"[DONE]"', b"1", b"null", b'["a"]',
    b'{"a":1}', b'"a","x":"y"', b'"a"},"x":{"y":"z"', b"",
    b'"a"}}],"choices":[{"index":1,"delta":{"content":"b"',
    b'"a"}}],"obfuscation":"p","choices":[{"index":0,"delta":{"content":"b"',
    b'"a"}}]}}]},{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"b"',
]
STRINGS = st.one_of(st.builds(orjson.dumps, WORDS), st.sampled_from(RAW_STRINGS))
NAMES = st.sampled_from([b'"read"', b'"read"', b'"write"', b'""', b"null"])
OTHER = st.sampled_from([False, False, False, True])
"""Now and then a chunk of another kind than the stream's."""


def _payload(skeleton: bytes, text: bytes, padding: bytes = b'"p"', call: int = 0,
             name: bytes = b'"read"') -> bytes:
    return skeleton % {b"text": text, b"padding": padding, b"call": str(call).encode(),
                       b"name": name}


@st.composite
def streams(draw: st.DrawFn) -> bytes:
    """A role chunk, when the skeleton is a fragment's the first fragment of one to three calls,
    then text deltas or fragments (to those calls) of one skeleton, now and then a chunk of
    another kind, then the end."""
    kind = draw(st.sampled_from(sorted(SKELETONS)))
    calls = draw(st.integers(1, 3)) if kind.startswith("fragment") else 1
    payloads = [orjson.dumps({"choices": [{"index": 0, "delta": {"role": "assistant",
                                                                "content": ""}}]})]
    if kind.startswith("fragment"):
        payloads += [_payload(SKELETONS["call"], b"", call=call, name=draw(NAMES))
                     for call in range(calls)]
    items = st.tuples(STRINGS, STRINGS, OTHER, st.integers(0, 3), NAMES)
    for text, padding, other, call, name in draw(st.lists(items, max_size=30)):
        if other:
            chosen = draw(st.sampled_from(sorted(SKELETONS)))
            payloads.append(_payload(SKELETONS[chosen], text, padding, call, name))
        else:
            payloads.append(_payload(SKELETONS[kind], text, padding, call % calls))
    if draw(OTHER):
        payloads.append(orjson.dumps({"choices": [{"index": 0, "delta": {},
                                                   "finish_reason": "stop"}]}))
    if draw(st.booleans()):
        payloads.append(b"[DONE]")
    return b"".join(b"data: " + payload + b"\n\n" for payload in payloads)


def _stream(*payloads: bytes) -> bytes:
    return b"".join(b"data: " + payload + b"\n\n" for payload in (*payloads, b"[DONE]"))


def _calls(*chunks: tuple[str, int]) -> bytes:
    """The first fragment of calls 0 and 1, then chunks of the given kinds to the given calls."""
    return _stream(*(_payload(SKELETONS["call"], b"", call=call) for call in (0, 1)),
                   *(_payload(SKELETONS[kind], b'"x"', call=call) for kind, call in chunks))


TRICKY = [
    # each fragment carries the finish reason: the last one's position is the choice's
    _calls(("fragment, finish", 0), ("fragment, finish", 0), ("fragment, finish", 0)),
    # a fragment read through the template makes its call the latest, where one without an
    # index goes
    _calls(("fragment", 0), ("fragment", 0), ("fragment, finish", 1), ("fragment", 0),
           ("fragment, no index", 0)),
    # the choice's index is `true`, not 1
    _calls(("fragment, true", 1), ("fragment, true", 1), ("fragment, true", 1)),
    # text beside the fragment
    _calls(("fragment, text", 0), ("fragment, text", 0), ("fragment, text", 0)),
    # a choice index and a call index orjson reads as floats: no choice, no call to add to
    _stream(_payload(SKELETONS["call"], b""),
            *(_payload(SKELETONS["fragment"], b'"x"', call=2**64).replace(
                b'"choices":[{"index":0', b'"choices":[{"index":%d' % index)
              for index in (0, 0, 2**64, 2**64))),
]


@examples(400)
@example(TRICKY[0], TRICKY[1], sse.WINDOW)
@example(TRICKY[2], TRICKY[3], sse.WINDOW)
@example(TRICKY[4], TRICKY[0], sse.WINDOW)
@given(streams(), streams(), st.sampled_from([128, 1024, sse.WINDOW]))
def test_text_read_through_a_template_is_the_text_decoding_gives(
    upstream: bytes, downstream: bytes, window: int
) -> None:
    with mock.patch.object(sse, "WINDOW", window):
        fast = _compared(upstream, downstream)
    with _general():
        general = _compared(upstream, downstream)
    assert fast == general


def _decoded(payload: bytes) -> chat_chunks.Chunk:
    chunk = chat_chunks.decode_chunk(payload)
    assert chunk is not None
    return chunk


def test_a_stream_of_text_deltas_decodes_only_what_its_template_does_not_fit() -> None:
    """What the law cannot see: the template is used (both ways give the same text)."""
    words = [orjson.dumps(f"w{n} ") for n in range(50)]
    body = _stream(_payload(SKELETONS["text, padding after"], b'""', b'"p"'),
                   *(_payload(SKELETONS["text, padding after"], word, orjson.dumps("x" * (n % 5)))
                     for n, word in enumerate(words)),
                   b'{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}')
    with mock.patch.object(chat_blocks, "decode_chunk",
                           side_effect=chat_chunks.decode_chunk) as decoding:
        transcript = transcribe(Capture(body, PATH))
    assert transcript.choices[0].text == "".join(f"w{n} " for n in range(50))
    assert transcript.choices[0].finish_reason == "stop"
    assert decoding.call_count == 3  # the first chunk, the first text delta, the finish


def test_a_template_takes_the_content_and_the_padding_as_its_holes() -> None:
    payload = _payload(SKELETONS["text, padding before"], b'"hi"', b'"pad"')
    template = Template.of(payload, _decoded(payload), TEXT, "hi")
    assert template is not None and not template.open_first
    assert template.head.endswith(b'"obfuscation":')
    assert template.middle == b',"choices":[{"index":0,"delta":{"content":'
    assert template.tail == b"}}]}"
    texts: list[str] = []
    others = [_payload(SKELETONS["text, padding before"], orjson.dumps(text), orjson.dumps(padding))
              for text, padding in (("a", ""), ("", "long padding"), ('"},', "\\"))]
    assert template.read(others, 0, 3, texts.append) == 3
    assert texts == ["a", "", '"},']


def test_a_template_stops_at_the_first_payload_it_does_not_fit() -> None:
    payload = _payload(SKELETONS["text"], b'"hi"', b"")
    template = Template.of(payload, _decoded(payload), TEXT, "hi")
    assert template is not None and template.middle is None
    unfit = [payload, _payload(SKELETONS["text"], b'"a","x":"y"', b""), payload]
    texts: list[str] = []
    assert template.read(unfit, 0, 3, texts.append) == 1
    assert template.read(unfit, 2, 3, texts.append) == 3
    assert texts == ["hi", "hi"]
    assert template.read([b'{"id":1}', payload], 0, 2, texts.append) == 0


def test_no_template_is_made_where_its_holes_could_be_other_values() -> None:
    def template(payload: bytes) -> Template | None:
        return Template.of(payload, _decoded(payload), TEXT, "a")

    # the one unescaped "content" key is not the delta's
    assert template(_payload(SKELETONS["text, decoy"], b'"a"', b"")) is None
    # two "content" keys
    assert template(b'{"choices":[{"index":0,"delta":{"content":"a"},'
                    b'"logprobs":{"content":"b"}}]}') is None
    # padding that is not a string
    assert template(b'{"obfuscation":1,"choices":[{"index":0,"delta":{"content":"a"}}]}') is None
    # padding that appears twice
    assert template(b'{"obfuscation":"p","choices":[{"index":0,"delta":{"content":"a"},'
                    b'"logprobs":{"obfuscation":"q"}}]}') is None
    # a content that is not a string
    assert template(b'{"choices":[{"index":0,"delta":{"content":1}}]}') is None
    # arguments: the one unescaped "arguments" key is not the fragment's
    decoy = _payload(SKELETONS["fragment, decoy"], b'"a"')
    assert Template.of(decoy, _decoded(decoy), ARGUMENTS, "a") is None


def test_a_stream_of_argument_fragments_decodes_only_what_its_template_does_not_fit() -> None:
    parts = [orjson.dumps(part) for part in ('{"path": ', '"a.txt"', "", ', "n": 1}')]
    body = _stream(_payload(SKELETONS["call"], b"", call=0),
                   *(_payload(SKELETONS["fragment, LiteLLM"], part) for part in parts * 10),
                   b'{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}')
    with mock.patch.object(chat_blocks, "decode_chunk",
                           side_effect=chat_chunks.decode_chunk) as decoding:
        transcript = transcribe(Capture(body, PATH))
    [call] = transcript.choices[0].tool_calls
    assert (call.name, call.id, call.arguments) == ("read", "call_a",
                                                   '{"path": "a.txt", "n": 1}' * 10)
    assert decoding.call_count == 3  # the call's first fragment, its second, the finish


def test_no_fragment_template_is_made_for_a_call_that_could_still_change() -> None:
    """A call without a name, or a fragment with another id, goes the general way each time."""
    for first, fragment in ((b"null", "fragment"), (b'""', "fragment"),
                            (b'"read"', "fragment, other id")):
        body = _stream(_payload(SKELETONS["call"], b"", name=first),
                       *(_payload(SKELETONS[fragment], b'"x"') for _ in range(5)))
        with mock.patch.object(chat_blocks, "Template", wraps=Template) as making:
            transcribe(Capture(body, PATH))
        assert making.of.call_count == 0, (first, fragment)


def test_a_body_stops_making_templates_after_its_tries() -> None:
    """Text deltas that differ in more than their strings (here `created`) fit no template."""
    def delta(n: int) -> bytes:
        return orjson.dumps({"created": n, "choices": [{"index": 0, "delta": {"content": "a"}}]})

    count = chat_blocks.TEMPLATE_TRIES + 5
    body = _stream(orjson.dumps({"choices": [{"index": 0, "delta": {"content": ""}}]}),
                   *(delta(n) for n in range(count)))
    with mock.patch.object(chat_blocks, "Template", wraps=Template) as making:
        transcript = transcribe(Capture(body, PATH))
    assert transcript.choices[0].text == "a" * count
    assert making.of.call_count == chat_blocks.TEMPLATE_TRIES


def test_fragments_go_the_general_way_until_the_sdk_holds_their_call_at_its_index() -> None:
    """The call's first fragment came at index 2 of an empty list: the SDK put it at 0, and
    the next one at 1, so only from the third on does a fragment to index 2 fold in unchanged."""
    body = _stream(_payload(SKELETONS["call"], b"", call=2),
                   *(_payload(SKELETONS["fragment"], b'"x"', call=2) for _ in range(5)))
    with mock.patch.object(chat_blocks, "decode_chunk",
                           side_effect=chat_chunks.decode_chunk) as decoding:
        transcript = transcribe(Capture(body, PATH))
    assert transcript.choices[0].tool_calls[0].arguments == "x" * 5
    assert decoding.call_count == 3


def test_an_argument_fragment_is_a_chunk_of_one_fragment_of_arguments_alone() -> None:
    def fragment(kind: str) -> chat_chunks.Fragment | None:
        return chat_chunks.argument_fragment(_decoded(_payload(SKELETONS[kind], b'"x"', call=1)))

    assert fragment("fragment") == (0, 1, None, "x")
    assert fragment("fragment, LiteLLM") == (0, 1, None, "x")
    assert fragment("fragment, id") == (0, 1, "call_a", "x")
    for other in ("fragment, finish", "fragment, list", "fragment, text", "fragment, true",
                  "fragment, usage", "fragment, no index", "call", "text"):
        assert fragment(other) is None, other
    assert chat_chunks.argument_fragment(_decoded(
        b'{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":1,'
        b'"function":{"arguments":"x"}}]}}]}')) is None
    assert chat_chunks.argument_fragment(_decoded(
        b'{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"type":null,'
        b'"function":{"arguments":"x"}}]}}]}')) is None


def test_a_template_is_made_of_chunks_with_whitespace_between_their_tokens() -> None:
    """Python's `json.dumps` writes `"key": value`."""
    payload = _payload(SKELETONS["text, spaced"], b'"hi"', b'"p"')
    template = Template.of(payload, _decoded(payload), TEXT, "hi")
    assert template is not None
    assert template.head.endswith(b'"content" :\t')
    fragment = _payload(SKELETONS["fragment, spaced"], b' "x"', call=1)
    assert Template.of(fragment, _decoded(fragment), ARGUMENTS, "x") is not None


@examples(200)
@example(TRICKY[1], TRICKY[0], 128)
@given(streams(), streams(), st.sampled_from([128, 1024, sse.WINDOW]))
def test_text_read_through_templates_a_body_keeps_few_of_is_the_text_decoding_gives(
    upstream: bytes, downstream: bytes, window: int
) -> None:
    """The law again, where a body makes two templates before it must earn more (one a read)
    and keeps two at once: templates are made, used, earned and dropped within a short stream."""
    with (mock.patch.object(sse, "WINDOW", window),
          mock.patch.object(chat_blocks, "TEMPLATE_TRIES", 2),
          mock.patch.object(chat_blocks, "READS_A_TRY", 1),
          mock.patch.object(chat_templates, "TEMPLATES_KEPT", 2)):
        fast = _compared(upstream, downstream)
    with _general():
        general = _compared(upstream, downstream)
    assert fast == general


def test_fragments_of_calls_in_parallel_are_each_read_through_their_own_template() -> None:
    """What the law cannot see: fragments that interleave round-robin, each chunk another
    call's (its index, 9 or 10, in its bytes), are read through one template per call once the
    body has earned the tries for more calls than TEMPLATE_TRIES."""
    calls, rounds = chat_blocks.TEMPLATE_TRIES + 8, 40
    body = _stream(*(_payload(SKELETONS["call"], b"", call=call) for call in range(calls)),
                   *(_payload(SKELETONS["fragment"], orjson.dumps(f"{call}.{step} "), call=call)
                     for step in range(rounds) for call in range(calls)),
                   b'{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}')
    with mock.patch.object(chat_blocks, "decode_chunk",
                           side_effect=chat_chunks.decode_chunk) as decoding:
        transcript = transcribe(Capture(body, PATH))
    assert [call.arguments for call in transcript.choices[0].tool_calls] == [
        "".join(f"{call}.{step} " for step in range(rounds)) for call in range(calls)]
    with _general():
        assert transcribe(Capture(body, PATH)) == transcript
    # each call's first chunk and first fragment; the 8 calls past the tries, until the reads
    # through templates (16 a round) have earned theirs; the finish
    assert decoding.call_count <= 2 * calls + 8 * 8 + 1


def test_templates_are_found_by_their_heads_and_the_oldest_is_dropped() -> None:
    def template(call: int) -> Template:
        payload = _payload(SKELETONS["fragment"], b'"x"', b'"p"', call)
        made = Template.of(payload, _decoded(payload), ARGUMENTS, "x")
        assert made is not None
        return made

    def reads(*calls: int) -> tuple[int, list[str]]:
        texts.clear()
        payloads = [_payload(SKELETONS["fragment"], b'"%d"' % call, b'"q"', call)
                    for call in calls]
        return templates.read(payloads, 0, len(payloads)), texts[:]

    texts: list[str] = []
    templates = chat_templates.Templates()
    assert templates.last is None
    with mock.patch.object(chat_templates, "TEMPLATES_KEPT", 2):
        for call in (9, 10):
            templates.add(template(call), lambda text, call=call: texts.append(f"{call}:{text}"))
        assert reads(9, 10, 10, 9) == (4, ["9:9", "10:10", "10:10", "9:9"])
        assert reads(9, 11) == (1, ["9:9"])
        templates.add(template(11), lambda text: texts.append(f"11:{text}"))
        assert reads(11, 10, 9) == (2, ["11:11", "10:10"])  # 9 was the oldest
