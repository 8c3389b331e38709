"""Chat Completions bodies of plain blocks (`sse.Blocks`), read without an event per payload.

The Chat Completions reducer (`openai_chat`) reads such a body here. Each payload is decoded into
a typed chunk (`chat_chunks`); one that is a plain text delta of a choice whose message already
holds text (as the reducer's `entry` skips the SDK's fold for it) is appended to that choice's
text and nothing else, and the later payloads made from its bytes with other text are not
decoded at all (`chat_templates`), nor are the argument fragments that repeat an earlier one's
bytes; any other chunk is read as the reducer's `payload` reads a dict, with its event; the
payloads the typed decoder leaves to orjson are read as the reducer's `stream` reads them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from calltap.dialects.chat_chunks import (
    REJECTED,
    Chunk,
    Fragment,
    argument_fragment,
    decode_chunk,
    faithful,
)
from calltap.dialects.chat_templates import ARGUMENTS, TEXT, Hole, Template, Templates
from calltap.dialects.common import position_of
from calltap.sse import Blocks, Event, Window
from calltap.transcript import Transcript

TERMINAL = "[DONE]"
"""The payload that ends a stream (the whole payload: inside content or arguments it is text)."""
TERMINAL_BYTES = TERMINAL.encode()

TEMPLATE_TRIES = 16
"""Templates a body may make before any is used: one whose chunks differ in more than their
strings (a clock in every chunk) stops making them after this many."""
READS_A_TRY = 16
"""Payloads read through a template that earn the body one more try (so a body of more calls in
parallel than TEMPLATE_TRIES gets a template for each). Making a template costs about what
reading a chunk the general way does, and a read through one saves about that much, so the
tries a body spends on templates that go unused cost at most a sixteenth of what it saved."""


class _Texts:
    """Where each choice's text goes, and the templates of the text deltas and argument
    fragments decoded."""

    __slots__ = ("appends", "reads", "templates", "tries")

    def __init__(self) -> None:
        self.appends: dict[int, Callable[[str], None]] = {}
        self.templates = Templates()
        self.tries = TEMPLATE_TRIES
        self.reads = 0
        """Payloads read through a template since the last try earned."""

    def learn(self, payload: bytes, chunk: Chunk, hole: Hole, value: str,
              append: Callable[[str], None]) -> None:
        """A chunk that was decoded (no template fit it): a template for the ones like it."""
        if self.tries:
            self.tries -= 1
            template = Template.of(payload, chunk, hole, value)
            if template is not None:
                self.templates.add(template, append)

    def used(self, payloads: int) -> None:
        """`payloads` were read through a template: a try earned for every READS_A_TRY, up to
        TEMPLATE_TRIES in hand."""
        reads = self.reads + payloads
        if reads < READS_A_TRY:
            self.reads = reads
        else:
            self.reads = reads % READS_A_TRY
            self.tries = min(self.tries + reads // READS_A_TRY, TEMPLATE_TRIES)


class BlockReader:
    """The Chat Completions reducer's reader of plain blocks. It reads through the reducer's own
    `transcript`, `choices`, `read`, `envelope`, `entry` and `result`."""

    transcript: Transcript
    choices: dict[Any, Any]
    read: Callable[[Event], None]
    envelope: Callable[[Any, Any, Event | None], None]
    entry: Callable[[Any, Any, Any, Event | None], None]
    result: Callable[[], Transcript]

    def blocks(self, blocks: Blocks) -> Transcript:
        """`stream` for plain blocks, without building an event for a payload that needs none."""
        transcript = self.transcript
        text = _Texts()
        for window in blocks.windows():
            data = window.data
            try:
                end = data.index(TERMINAL_BYTES)
            except ValueError:
                end, terminal = len(data), False
            else:
                terminal = True
            rejected = self.window(window, end, text)
            if rejected < end:
                for event in window.events(rejected, end):
                    self.read(event)
                self.texts_of(text.appends)
            if terminal:
                transcript.terminal_seen = True
                break
        transcript.events = blocks.count
        transcript.end_position = position_of(window.event(end if terminal else end - 1))
        return self.result()

    def window(self, window: Window, end: int, text: _Texts) -> int:
        """A window's first `end` payloads read, up to the first one msgspec rejects: its index
        (`end` when there is none)."""
        data = window.data
        templates = text.templates
        index = 0
        while index < end:
            if templates.last is not None:
                start, index = index, templates.read(data, index, end)
                if index > start:
                    text.used(index - start)
                if index == end:
                    break
            try:
                chunk = decode_chunk(data[index])
            except REJECTED:
                return index
            self.decoded(chunk, window, index, text)
            index += 1
        return end

    def decoded(self, chunk: Chunk | None, window: Window, index: int, text: _Texts) -> None:
        """A window's payload as decoded (None: left to orjson)."""
        texts = text.appends
        if chunk is None:
            self.read(window.event(index))
            self.texts_of(texts)
            return
        choices = chunk.choices
        if choices is not None and len(choices) == 1 and not (chunk.error or chunk.usage):
            entry = choices[0]
            delta, choice = entry.delta, entry.index
            if (delta.__class__ is dict and len(delta) == 1
                    and entry.finish_reason is None and choice.__class__ is int):
                content = delta.get("content")
                append = texts.get(choice)
                if content.__class__ is str and append is not None:
                    if content:
                        append(content)
                    text.learn(window.data[index], chunk, TEXT, content, append)
                    return
        if faithful(chunk, window.data[index]):
            event = window.event(index)
            self.envelope(chunk.error, chunk.usage, event)
            for entry in choices or ():
                self.entry(entry.index, entry.delta, entry.finish_reason, event)
        else:
            self.read(window.event(index))
        self.texts_of(texts)
        fragment = argument_fragment(chunk) if text.tries else None
        if fragment is not None:
            self.learn_fragment(window.data[index], chunk, fragment, text)

    def learn_fragment(self, payload: bytes, chunk: Chunk, fragment: Fragment,
                       text: _Texts) -> None:
        """An argument fragment read in full: a template for the ones after it, when they would
        change nothing but its call's arguments, fragments and place as the latest call (the
        call holds a name and this id, and the SDK's message holds the call)."""
        choice, index, call_id, arguments = fragment
        state = self.choices.get(choice)
        call = state.calls.get(index) if state is not None else None
        if (state is None or call is None or not call.name
                or (call_id is not None and call_id != call.id)
                or not state.deltas.holds_call(index)):
            return
        parts = call.parts

        def add(part: str) -> None:
            state.latest = call
            call.fragments += 1
            if part:
                parts.append(part)

        text.learn(payload, chunk, ARGUMENTS, arguments, add)

    def texts_of(self, texts: dict[int, Callable[[str], None]]) -> None:
        """Note where the text of each choice whose message now holds text goes."""
        for index, state in self.choices.items():
            if index not in texts and "content" in state.deltas.message:
                texts[index] = state.text.append
