"""Where the openai SDK's stream accumulator fails on a Chat Completions delta: merging lists.

`client.chat.completions.stream()` (openai-python's `ChatCompletionStreamState`,
`lib/streaming/chat/_completions.py`) keeps each choice's message as a dict and folds every
chunk's `delta` into it with `accumulate_delta` (`lib/streaming/_deltas.py`), key by key, at any
depth:
- a key absent from the message, or held as null, takes the delta's value as it is (no check),
  unless the value is a list with at least one object carrying an `index` key: then it starts as
  an empty list and the delta is merged into it by index, as below;
- `index` and `type` are replaced, never merged;
- strings concatenate, numbers add, objects merge recursively, values of different kinds leave
  the message as it was;
- a list meets a list: while the message's list holds only strings and numbers (and is not empty,
  or the delta's list has no indexed object), the delta's entries are appended; otherwise every
  entry of the delta must be an object with an integer `index`, merged into the message's entry
  at that position (inserted when there is none, and that entry must itself be an object). An
  entry that is not an object, has no `index`, or whose `index` is not an integer raises
  (`TypeError`, `RuntimeError: Expected list delta entry to have an `index` key`).

So a list of objects without `index` passes the first time a key appears (stored as sent) and
raises the next time the same key of the same choice carries one: LiteLLM's `thinking_blocks`
on the second thinking chunk. `DeltaShape` replays these rules on the shape of the values only
(a string or a number is its kind, never its text), so a text chunk costs a few dict lookups and
a failure says where the SDK raised. A JSON boolean is a number to the SDK (Python's `bool` is an
`int`), but it is no integer `index`: calltap reports one, the way JSON and other clients read it.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

STR = "str"
"""A string the message holds (its text does not matter)."""
NUM = "num"
"""A number (or boolean) the message holds."""
OTHER = "other"
"""A null inside a list: neither a scalar the SDK appends to nor an object it merges into."""
TOOL_CALLS = "tool_calls"

_NUMBERS = (int, float, bool, Decimal)


def _shape(value: Any) -> Any:
    """What the accumulator keeps of a value: kinds for scalars, containers as shapes."""
    kind = value.__class__
    if kind is str:
        return STR
    if kind is dict:
        return {key: _shape(item) for key, item in value.items() if item is not None}
    if kind is list:
        return [OTHER if item is None else _shape(item) for item in value]
    if kind in _NUMBERS:
        return NUM
    return None


def _has_indexed_entries(value: Any) -> bool:
    return value.__class__ is list and any(
        entry.__class__ is dict and "index" in entry for entry in value
    )


class DeltaShape:
    """One choice's message as the SDK accumulates it, without the text: `fold` each streamed
    delta and get where the SDK would have raised, or None."""

    __slots__ = ("message",)

    def __init__(self) -> None:
        self.message: dict[str, Any] = {}

    def holds_call(self, index: int) -> bool:
        """Does the message hold a call at `index` with a `function` object? A fragment of
        scalars and a function of strings it already holds then folds in without a change."""
        calls = self.message.get(TOOL_CALLS)
        if calls.__class__ is not list or not 0 <= index < len(calls):
            return False
        call = calls[index]
        return call.__class__ is dict and call.get("function").__class__ is dict

    def fold(self, delta: dict[str, Any]) -> str | None:
        """Fold a delta in; the first failure it causes (`path: why`), or None. Entries that
        fail are left out, so that later deltas fold as a tolerant client would take them.
        Direct entries of `delta.tool_calls` are the tool-call rules' (TOOL_CALL_INDEX_MISSING):
        they are never a failure here, only what is inside them."""
        message = self.message
        rest: dict[str, Any] | None = None
        for key, value in delta.items():
            kind = value.__class__
            if kind is str or kind is int or kind is float or kind is bool or value is None:
                if key == "index" or key == "type":
                    message[key] = None if value is None else STR if kind is str else NUM
                elif value is not None and key not in message:
                    message[key] = STR if kind is str else NUM
            elif not (key == TOOL_CALLS and kind is list
                      and _flat_calls(message.get(key), value)):
                if rest is None:
                    rest = {}
                rest[key] = value
        if rest is None:
            return None
        failures: list[str] = []
        _merge(message, rest, failures, True)
        return failures[0] if failures else None


def _flat_calls(current: Any, calls: list[Any]) -> bool:
    """The common tool-call fragment, merged without the general walk: True when every entry
    went to a call already held and carried nothing but scalars and a `function` of scalars
    (it can fail nowhere). Scalars are stored as `_merge` stores them, so an entry left half
    done here is finished by `_merge` the same way."""
    if current.__class__ is not list:
        return False
    size = len(current)
    for entry in calls:
        index = entry.get("index") if entry.__class__ is dict else None
        if index.__class__ is not int or not -size <= index < size:
            return False
        target = current[index]
        if target.__class__ is not dict:
            return False
        for key, value in entry.items():
            kind = value.__class__
            if kind is str or kind is int or kind is float or kind is bool or value is None:
                if key == "index" or key == "type":
                    target[key] = None if value is None else STR if kind is str else NUM
                elif value is not None and key not in target:
                    target[key] = STR if kind is str else NUM
            elif key == "function" and kind is dict and target.get(key).__class__ is dict:
                function = target[key]
                for name, part in value.items():
                    if part.__class__ is not str or name == "index" or name == "type":
                        return False
                    if name not in function:
                        function[name] = STR
            else:
                return False
    return True


def _merge(acc: dict[str, Any], delta: dict[str, Any], failures: list[str],
           top: bool = False) -> None:
    """`accumulate_delta(acc, delta)` on shapes. The comparator's hot path: a scalar (text, an
    argument fragment) costs a class test and at most one store; a failure's path is written
    on the way back up, only when there is one."""
    for key, value in delta.items():
        kind = value.__class__
        if kind is str or kind is int or kind is float or kind is bool or value is None:
            if key == "index" or key == "type":
                acc[key] = None if value is None else STR if kind is str else NUM
            elif value is not None and key not in acc:
                acc[key] = STR if kind is str else NUM
            continue
        current = acc.get(key)
        if current is None:
            if not _has_indexed_entries(value):
                acc[key] = _shape(value)
                continue
            current = acc[key] = []
        if key == "index" or key == "type":
            acc[key] = _shape(value)
            continue
        before = len(failures)
        if kind is dict and current.__class__ is dict:
            _merge(current, value, failures)
            prefix = f"{key}."
        elif kind is list and current.__class__ is list:
            _merge_list(current, value, failures, top and key == TOOL_CALLS)
            prefix = key
        else:
            continue
        for at in range(before, len(failures)):
            failures[at] = prefix + failures[at]


def _merge_list(acc: list[Any], delta: list[Any], failures: list[str], owned: bool) -> None:
    """A list meets a list; `owned`: a failing direct entry is another rule's finding."""
    if (not acc or acc[0].__class__ is not dict) and (
            (acc or not _has_indexed_entries(delta))
            and all(item is STR or item is NUM for item in acc)):
        acc.extend(OTHER if item is None else _shape(item) for item in delta)
        return
    size = len(acc)
    for entry in delta:
        index = entry.get("index") if entry.__class__ is dict else None
        if index.__class__ is int and -size <= index < size:
            target = acc[index]
            if target.__class__ is dict:
                before = len(failures)
                _merge(target, entry, failures)
                for at in range(before, len(failures)):
                    failures[at] = f"[{index}].{failures[at]}"
                continue
        why = _entry_failure(entry, acc)
        if why is not None:
            if not owned:
                failures.append(f": {why}")
            continue
        acc.insert(index, _shape(entry))
        size += 1


def _entry_failure(entry: Any, acc: list[Any]) -> str | None:
    """Why the SDK cannot merge this entry by index into `acc`, or None."""
    if entry.__class__ is not dict:
        return "an entry that is not an object"
    if "index" not in entry:
        return "an entry without index"
    index = entry["index"]
    if index.__class__ is not int:
        return "an entry whose index is not an integer"
    if -len(acc) <= index < len(acc) and acc[index].__class__ is not dict:
        return f"an entry merged by index into one that is not an object ({index})"
    return None
