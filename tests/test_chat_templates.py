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
from hypothesis import given
from hypothesis import strategies as st
from tests.support.properties import examples
from tests.test_plain_blocks import PATH, _compared, _general

from calltap import sse
from calltap.dialects import chat_chunks, openai_chat, transcribe
from calltap.dialects.chat_templates import Template
from calltap.transcript import Capture

ENVELOPE = b'"id":"chatcmpl-9","object":"chat.completion.chunk","created":7,"model":"m"'
SKELETONS = {
    "plain": b'{' + ENVELOPE + b',"choices":[{"index":0,"delta":{"content":%(text)s},'
             b'"logprobs":null,"finish_reason":null}]}',
    "padding after": b'{' + ENVELOPE + b',"choices":[{"index":0,"delta":{"content":%(text)s}'
                     b'}],"obfuscation":%(padding)s}',
    "padding before": b'{' + ENVELOPE + b',"obfuscation":%(padding)s,"choices":[{"index":0,'
                      b'"delta":{"content":%(text)s}}]}',
    "decoy": b'{' + ENVELOPE + b',"choices":[{"index":0,"logprobs":{"content":"zz"},'
             b'"delta":{"cont\\u0065nt":%(text)s}}]}',
}
TEXT = st.text(max_size=8).filter(lambda text: not any(0xD800 <= ord(c) <= 0xDFFF for c in text))
RAW_STRINGS = [
    b'""', b' "a" ', b'"\\""', b'"\\\\"', b'"a\\"},\\"x"', b'"\\u00e9"', b'"\\ud83d\\ude00"',
    b'"\\ud800"', b'"\xff"', b'"\xc3\xa9"', b'"\x01"', b'"[DONE]"', b"1", b"null", b'["a"]',
    b'{"a":1}', b'"a","x":"y"', b'"a"},"x":{"y":"z"', b"",
    b'"a"}}],"choices":[{"index":1,"delta":{"content":"b"',
    b'"a"}}],"obfuscation":"p","choices":[{"index":0,"delta":{"content":"b"',
]
STRINGS = st.one_of(st.builds(orjson.dumps, TEXT), st.sampled_from(RAW_STRINGS))


def _payload(skeleton: bytes, text: bytes, padding: bytes) -> bytes:
    return skeleton % {b"text": text, b"padding": padding}


@st.composite
def streams(draw: st.DrawFn) -> bytes:
    """A role chunk, then text deltas of one skeleton (now and then another), then the end."""
    skeleton = SKELETONS[draw(st.sampled_from(sorted(SKELETONS)))]
    payloads = [orjson.dumps({"choices": [{"index": 0, "delta": {"role": "assistant",
                                                                "content": ""}}]})]
    for text, padding, other in draw(st.lists(st.tuples(STRINGS, STRINGS, st.booleans()),
                                              max_size=30)):
        kind = SKELETONS[draw(st.sampled_from(sorted(SKELETONS)))] if other else skeleton
        payloads.append(_payload(kind, text, padding))
    if draw(st.booleans()):
        payloads.append(orjson.dumps({"choices": [{"index": 0, "delta": {},
                                                   "finish_reason": "stop"}]}))
        payloads.append(b"[DONE]")
    return b"".join(b"data: " + payload + b"\n\n" for payload in payloads)


@examples(400)
@given(streams(), streams(), st.sampled_from([128, 1024, sse.WINDOW]))
def test_text_read_through_a_template_is_the_text_decoding_gives(
    upstream: bytes, downstream: bytes, window: int
) -> None:
    with mock.patch.object(sse, "WINDOW", window):
        fast = _compared(upstream, downstream)
    with _general():
        general = _compared(upstream, downstream)
    assert fast == general


def _stream(*payloads: bytes) -> bytes:
    return b"".join(b"data: " + payload + b"\n\n" for payload in (*payloads, b"[DONE]"))


def _decoded(payload: bytes) -> chat_chunks.Chunk:
    chunk = chat_chunks.decode_chunk(payload)
    assert chunk is not None
    return chunk


def test_a_stream_of_text_deltas_decodes_only_what_its_template_does_not_fit() -> None:
    """What the law cannot see: the template is used (both ways give the same text)."""
    words = [orjson.dumps(f"w{n} ") for n in range(50)]
    body = _stream(_payload(SKELETONS["padding after"], b'""', b'"p"'),
                   *(_payload(SKELETONS["padding after"], word, orjson.dumps("x" * (n % 5)))
                     for n, word in enumerate(words)),
                   b'{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}')
    with mock.patch.object(openai_chat, "decode_chunk",
                           side_effect=chat_chunks.decode_chunk) as decoding:
        transcript = transcribe(Capture(body, PATH))
    assert transcript.choices[0].text == "".join(f"w{n} " for n in range(50))
    assert transcript.choices[0].finish_reason == "stop"
    assert decoding.call_count == 3  # the first chunk, the first text delta, the finish


def test_a_template_takes_the_content_and_the_padding_as_its_holes() -> None:
    payload = _payload(SKELETONS["padding before"], b'"hi"', b'"pad"')
    template = Template.of(payload, _decoded(payload))
    assert template is not None and not template.content_first
    assert template.head.endswith(b'"obfuscation":')
    assert template.middle == b',"choices":[{"index":0,"delta":{"content":'
    assert template.tail == b"}}]}"
    texts: list[str] = []
    others = [_payload(SKELETONS["padding before"], orjson.dumps(text), orjson.dumps(padding))
              for text, padding in (("a", ""), ("", "long padding"), ('"},', "\\"))]
    assert template.read(others, 0, 3, texts.append) == 3
    assert texts == ["a", '"},']


def test_a_template_stops_at_the_first_payload_it_does_not_fit() -> None:
    payload = _payload(SKELETONS["plain"], b'"hi"', b"")
    template = Template.of(payload, _decoded(payload))
    assert template is not None and template.middle is None
    unfit = [payload, _payload(SKELETONS["plain"], b'"a","x":"y"', b""), payload]
    texts: list[str] = []
    assert template.read(unfit, 0, 3, texts.append) == 1
    assert template.read(unfit, 2, 3, texts.append) == 3
    assert texts == ["hi", "hi"]
    assert template.read([b'{"id":1}', payload], 0, 2, texts.append) == 0


def test_no_template_is_made_where_its_holes_could_be_other_values() -> None:
    def template(payload: bytes) -> Template | None:
        return Template.of(payload, _decoded(payload))

    # the one unescaped "content" key is not the delta's
    assert template(_payload(SKELETONS["decoy"], b'"a"', b"")) is None
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


def test_a_body_stops_making_templates_after_its_tries() -> None:
    """Text deltas that differ in more than their strings (here `created`) fit no template."""
    def delta(n: int) -> bytes:
        return orjson.dumps({"created": n, "choices": [{"index": 0, "delta": {"content": "a"}}]})

    count = openai_chat.TEMPLATE_TRIES + 5
    body = _stream(orjson.dumps({"choices": [{"index": 0, "delta": {"content": ""}}]}),
                   *(delta(n) for n in range(count)))
    with mock.patch.object(openai_chat, "Template", wraps=Template) as making:
        transcript = transcribe(Capture(body, PATH))
    assert transcript.choices[0].text == "a" * count
    assert making.of.call_count == openai_chat.TEMPLATE_TRIES
