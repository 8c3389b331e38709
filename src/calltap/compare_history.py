"""The conversation of two Asks compared turn by turn, by meaning.

- Consecutive turns of one role are one turn (a gateway may merge or split them; Anthropic merges
  consecutive tool results into one user turn). Empty turns are dropped. `turn` in a finding is
  the index of the client's turn counted that way.
- Turns are aligned by role and text (`difflib.SequenceMatcher`, on the turns between the common
  start and end; past MAX_ALIGNED pairs of them, in order), so a turn dropped in the middle is
  one finding, not one per turn after it. A turn dropped or added is found by what it held:
  MESSAGE_CHANGED for its text and media, HISTORY_TOOL_CALL_CHANGED for its calls,
  HISTORY_TOOL_RESULT_CHANGED for its results (a tool message dropped between two assistant turns
  takes its turn with it).
- Text compares with runs of whitespace folded (parts joined, as a gateway joining two messages
  into one would); media parts compare by kind and digest, where a URL on one side and inline data
  on the other (a gateway that fetched the URL) match by kind.
- Tool calls are a multiset of (name, decoded arguments) per turn: ids do not matter.
- Tool results are followed to their calls (their text compared as JSON by meaning when it is
  JSON): by id where the result names one its side knows, else
  by function name (the next call of that name in the latest assistant turn), and identified by
  that call's name, arguments and occurrence and how many turns back it stands; where a side's
  calls carry no ids at all (Ollama's), a result that names no function and no call answers the
  next call not answered yet, as that dialect links them, by place. A result linked
  to another call (two results naming one id) is therefore a change, whatever the ids. An id or
  a name that is not a string links nothing.
- A tool result's media the provider's dialect cannot carry inside a result, moved into the turn
  beside it (found there upstream over what the client's turn holds), is
  REQUEST_PART_UNSUPPORTED; dropped, it is HISTORY_TOOL_RESULT_CHANGED.
- Reasoning in an assistant turn: dropped or its signature lost is HISTORY_REASONING_CHANGED where
  the provider's dialect can carry it (REQUEST_PART_UNSUPPORTED where not); turned into the turn's
  visible text it is HISTORY_REASONING_CHANGED always.
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Hashable, Iterable
from dataclasses import dataclass
from difflib import SequenceMatcher

from calltap.ask import Ask, Part, ToolResult, Turn
from calltap.codes import Code
from calltap.jsonvalues import JsonInvalid, decode_strict
from calltap.transcript import Finding


def normalized_text(parts: Iterable[Part]) -> str:
    """The text parts joined, each run of whitespace folded to one space."""
    return " ".join(" ".join(part.text.split()) for part in parts
                    if part.kind == "text" and part.text and not part.text.isspace())


def merged_turns(turns: Iterable[Turn]) -> list[Turn]:
    """Consecutive turns of one role as one; empty turns left out."""
    merged: list[Turn] = []
    for turn in turns:
        if not (turn.parts or turn.calls or turn.results or turn.reasoning):
            continue
        if merged and merged[-1].role == turn.role:
            last = merged[-1]
            last.parts += turn.parts
            last.calls += turn.calls
            last.results += turn.results
            last.reasoning += turn.reasoning
        else:
            merged.append(Turn(turn.role, list(turn.parts), list(turn.calls),
                               list(turn.results), list(turn.reasoning)))
    return merged


@dataclass(frozen=True, slots=True)
class _Result:
    """A tool result as compared: what it answers, what it says, whether it is an error."""

    link: Hashable
    text: Hashable
    media: tuple[str, ...]
    error: bool


MAX_ALIGNED = 250_000
"""Pairs of turns (client's times provider's, between the common start and end) past which they
are paired in order, not aligned: `SequenceMatcher`'s cost grows with that product."""
Opcode = tuple[str, int, int, int, int]


def compare_history(client: Ask, provider: Ask, carries: frozenset[str]) -> list[Finding]:
    mine, theirs = merged_turns(client.turns), merged_turns(provider.turns)
    my_results, their_results = _linked_results(mine), _linked_results(theirs)
    findings: list[Finding] = []
    for _tag, i1, i2, j1, j2 in _aligned([_signature(turn) for turn in mine],
                                         [_signature(turn) for turn in theirs]):
        paired = min(i2 - i1, j2 - j1)
        for offset in range(paired):
            i, j = i1 + offset, j1 + offset
            findings.extend(_compare_turn(i, mine[i], theirs[j], my_results[i],
                                          their_results[j], carries))
        for i in range(i1 + paired, i2):
            findings.extend(_unpaired(i, mine[i], "dropped"))
        for j in range(j1 + paired, j2):
            findings.extend(_unpaired(i1 + paired, theirs[j], "added upstream"))
    return findings


def _unpaired(index: int, turn: Turn, what: str) -> list[Finding]:
    """A turn with no counterpart on the other side, found by what it held."""
    findings: list[Finding] = []
    if turn.parts or not (turn.calls or turn.results):
        findings.append(_changed(Code.MESSAGE_CHANGED, index, f"{turn.role} turn {what}"))
    if turn.calls:
        names = ", ".join(sorted({call.name for call in turn.calls}))
        findings.append(Finding(Code.HISTORY_TOOL_CALL_CHANGED, "request", count=len(turn.calls),
                                turn=index, detail=f"calls {what} with their turn: {names}"))
    if turn.results:
        findings.append(Finding(Code.HISTORY_TOOL_RESULT_CHANGED, "request",
                                count=len(turn.results), turn=index,
                                detail=f"results {what} with their turn"))
    return findings


def _aligned(mine: list[Hashable], theirs: list[Hashable]) -> list[Opcode]:
    """The two sequences of turns aligned: the common start and end as they stand, the turns
    between by `SequenceMatcher`, or in order past MAX_ALIGNED pairs."""
    shorter = min(len(mine), len(theirs))
    start = 0
    while start < shorter and mine[start] == theirs[start]:
        start += 1
    end = 0
    while end < shorter - start and mine[-1 - end] == theirs[-1 - end]:
        end += 1
    mine_end, their_end = len(mine) - end, len(theirs) - end
    if (mine_end - start) * (their_end - start) > MAX_ALIGNED:
        middle: list[Opcode] = [("replace", start, mine_end, start, their_end)]
    else:
        matcher = SequenceMatcher(None, mine[start:mine_end], theirs[start:their_end],
                                  autojunk=False)
        middle = [(tag, i1 + start, i2 + start, j1 + start, j2 + start)
                  for tag, i1, i2, j1, j2 in matcher.get_opcodes()]
    return [("equal", 0, start, 0, start), *middle,
            ("equal", mine_end, len(mine), their_end, len(theirs))]


def _signature(turn: Turn) -> Hashable:
    return turn.role, normalized_text(turn.parts)


def _changed(code: Code, turn: int, detail: str) -> Finding:
    return Finding(code, "request", detail=detail, turn=turn)


def _compare_turn(index: int, mine: Turn, theirs: Turn, my_results: list[_Result],
                  their_results: list[_Result], carries: frozenset[str]) -> list[Finding]:
    findings: list[Finding] = []
    moved: list[str] = []
    if mine.role != theirs.role:
        findings.append(_changed(Code.MESSAGE_CHANGED, index, f"{mine.role} -> {theirs.role}"))
    beside = media_difference(_media(mine.parts), _media(theirs.parts))[1]
    findings.extend(_results(index, my_results, their_results, beside, carries, moved))
    findings.extend(_text_and_media(index, mine, theirs, moved))
    calls_lost = Counter((c.name, c.arguments) for c in mine.calls)
    calls_lost.subtract(Counter((c.name, c.arguments) for c in theirs.calls))
    if any(calls_lost.values()):
        count = sum(abs(n) for n in calls_lost.values())
        names = sorted({name for (name, _), n in calls_lost.items() if n})
        findings.append(Finding(Code.HISTORY_TOOL_CALL_CHANGED, "request", count=count,
                                turn=index, detail="calls differ: " + ", ".join(names)))
    findings.extend(_reasoning(index, mine, theirs, carries))
    return findings


def _text_and_media(index: int, mine: Turn, theirs: Turn, moved: list[str]) -> list[Finding]:
    findings: list[Finding] = []
    mine_text, their_text = normalized_text(mine.parts), normalized_text(theirs.parts)
    if mine_text != their_text and not _reasoning_as_text(mine, mine_text, their_text):
        findings.append(_changed(Code.MESSAGE_CHANGED, index,
                                 f"text: {len(mine_text)} chars -> {len(their_text)} chars"))
    lost, added = media_difference(_media(mine.parts), _media(theirs.parts))
    for digest in moved:
        if digest in added:
            added.remove(digest)
    if lost or added:
        findings.append(Finding(Code.MESSAGE_CHANGED, "request", count=len(lost) + len(added),
                                turn=index, detail=_media_said(lost, added)))
    return findings


def _media(parts: Iterable[Part]) -> list[str]:
    return [f"{part.kind}:{part.digest}" for part in parts if part.kind != "text"]


def media_difference(mine: list[str], theirs: list[str]) -> tuple[list[str], list[str]]:
    """Media only on one side and only on the other; a URL matches inline data of its kind
    (the first left of that kind, in order)."""
    if mine == theirs:
        return [], []
    common = Counter(mine) & Counter(theirs)
    lost, added = _less(mine, common), _less(theirs, common)
    of_kind: dict[str, deque[int]] = {}
    urls_of_kind: dict[str, deque[int]] = {}
    for n, item in enumerate(added):
        kind, _, digest = item.partition(":")
        of_kind.setdefault(kind, deque()).append(n)
        if digest.startswith("url:"):
            urls_of_kind.setdefault(kind, deque()).append(n)
    partnered: set[int] = set()
    left = []
    for item in lost:
        kind, _, digest = item.partition(":")
        partners = (of_kind if digest.startswith("url:") else urls_of_kind).get(kind)
        if _take(partners, partnered) is None:
            left.append(item)
    return left, [item for n, item in enumerate(added) if n not in partnered]


def _less(items: list[str], common: Counter[str]) -> list[str]:
    """`items` without the first occurrences of those counted in `common`."""
    counts = Counter(common)
    kept = []
    for item in items:
        if counts[item] > 0:
            counts[item] -= 1
        else:
            kept.append(item)
    return kept


def _take(queue: deque[int] | None, taken: set[int]) -> int | None:
    """The first index of `queue` not yet in `taken`, taken; None when there is none."""
    while queue:
        n = queue.popleft()
        if n not in taken:
            taken.add(n)
            return n
    return None


def _media_said(lost: list[str], added: list[str]) -> str:
    kinds = [f"{item.partition(':')[0]} dropped" for item in lost]
    kinds += [f"{item.partition(':')[0]} added" for item in added]
    return "media: " + ", ".join(kinds)


def _linked_results(turns: list[Turn]) -> list[list[_Result]]:
    """Each turn's tool results as compared, each linked to the call it answers."""
    calls: dict[str, tuple[int, Hashable]] = {}
    latest = _Latest({}, {}, False)
    linked: list[list[_Result]] = []
    for index, turn in enumerate(turns):
        seen: dict[Hashable, int] = {}
        named: dict[str, list[tuple[int, Hashable]]] = {}
        in_order: list[tuple[int, Hashable]] = []
        for call in turn.calls:
            called = (call.name, call.arguments)
            seen[called] = seen.get(called, -1) + 1
            identity = (*called, seen[called])
            if isinstance(call.id, str):
                calls.setdefault(call.id, (index, identity))
            named.setdefault(call.name, []).append((index, identity))
            in_order.append((index, identity))
        if turn.calls:
            latest = _Latest(named, dict.fromkeys(in_order),
                             any(isinstance(call.id, str) for call in turn.calls))
        linked.append([_result(index, result, calls, latest) for result in turn.results])
    return linked


@dataclass(slots=True)
class _Latest:
    """The latest assistant turn's calls: by name, those not answered yet in order, and whether
    that side gave its calls ids."""

    by_name: dict[str, list[tuple[int, Hashable]]]
    open: dict[tuple[int, Hashable], None]
    """Ordered: the first key is the next call not answered."""
    ids: bool


def _result(index: int, result: ToolResult, calls: dict[str, tuple[int, Hashable]],
            latest: _Latest) -> _Result:
    """The result linked by the id it names, else by its function's name, else, when it names no
    function and that side's calls carry no ids (Ollama's), by its place: the next call not
    answered yet. A result named after no call (Gemini links by name) is linked to nothing."""
    answered = calls.get(result.call_id) if isinstance(result.call_id, str) else None
    if answered is None and isinstance(result.name, str) and latest.by_name.get(result.name):
        answered = latest.by_name[result.name].pop(0)
    if answered is None and result.name is None and not latest.ids and latest.open:
        answered = next(iter(latest.open))
    if answered is not None:
        latest.open.pop(answered, None)
    link = ("unlinked",) if answered is None else (index - answered[0], answered[1])
    return _Result(link, _result_text(result.parts), tuple(sorted(_media(result.parts))),
                   result.is_error is True)


def _result_text(parts: Iterable[Part]) -> Hashable:
    """A tool result's text by meaning: JSON by its decoded value (a gateway may re-serialize
    a JSON result: Bedrock's `{"json": …}` blocks, Gemini's `response` objects), else its text
    with whitespace folded."""
    parts = list(parts)
    raw = "".join(part.text for part in parts if part.kind == "text" and part.text).strip()
    if raw[:1] in ("{", "["):
        try:
            return ("json", decode_strict(raw).key)
        except JsonInvalid:
            pass
    return normalized_text(parts)


def _results(index: int, mine: list[_Result], theirs: list[_Result], beside: list[str],
             carries: frozenset[str], moved: list[str]) -> list[Finding]:
    """Results matched whole first, then by link (the first left, in order); what is left was
    lost or relinked."""
    whole: dict[Hashable, deque[int]] = {}
    linked: dict[Hashable, deque[int]] = {}
    for n, other in enumerate(theirs):
        whole.setdefault((other.link, other.text, other.media), deque()).append(n)
        linked.setdefault(other.link, deque()).append(n)
    taken: set[int] = set()
    unmatched: list[_Result] = []
    findings: list[Finding] = []
    for result in mine:
        n = _take(whole.get((result.link, result.text, result.media)), taken)
        if n is None:
            unmatched.append(result)
        elif result.error != theirs[n].error:
            findings.append(_error_flag(index, result, theirs[n], carries))
    for result in unmatched:
        n = _take(linked.get(result.link), taken)
        if n is not None:
            findings.append(_content_change(index, result, theirs[n], beside, carries, moved))
        else:
            findings.append(_changed(Code.HISTORY_TOOL_RESULT_CHANGED, index,
                                     "a result is missing or linked to another call"))
    findings.extend(_changed(Code.HISTORY_TOOL_RESULT_CHANGED, index,
                             "a result upstream answers no call the client's did")
                    for _ in range(len(theirs) - len(taken)))
    return findings


def _error_flag(index: int, mine: _Result, theirs: _Result, carries: frozenset[str]) -> Finding:
    if mine.error and "result.error" not in carries:
        return _changed(Code.REQUEST_PART_UNSUPPORTED, index, "result.error: dropped")
    return _changed(Code.HISTORY_TOOL_RESULT_CHANGED, index,
                    f"error flag {mine.error} -> {theirs.error}")


def _content_change(index: int, mine: _Result, theirs: _Result, beside: list[str],
                    carries: frozenset[str], moved: list[str]) -> Finding:
    """A result whose text or media changed; media the provider cannot carry in a result,
    found beside it in the turn (`beside`: media only the provider's turn holds, of which
    `moved` is taken), was moved, not lost."""
    lost, added = media_difference(list(mine.media), list(theirs.media))
    spare = Counter(beside)
    spare.subtract(moved)
    if (mine.text == theirs.text and not added and lost and "result.media" not in carries
            and all(spare[item] >= count for item, count in Counter(lost).items())):
        moved.extend(lost)
        return _changed(Code.REQUEST_PART_UNSUPPORTED, index,
                        "result.media: moved beside the result")
    what = "text" if mine.text != theirs.text else _media_said(lost, added)
    return _changed(Code.HISTORY_TOOL_RESULT_CHANGED, index, f"a result's {what} changed")


def _reasoning(index: int, mine: Turn, theirs: Turn, carries: frozenset[str]) -> list[Finding]:
    if not mine.reasoning:
        return []
    text_mine = " ".join(" ".join(r.text.split()) for r in mine.reasoning if r.text)
    text_theirs = " ".join(" ".join(r.text.split()) for r in theirs.reasoning if r.text)
    if _reasoning_as_text(mine, normalized_text(mine.parts), normalized_text(theirs.parts)):
        return [_changed(Code.HISTORY_REASONING_CHANGED, index, "reasoning became visible text")]
    if not theirs.reasoning:
        if "history.reasoning" not in carries:
            return [_changed(Code.REQUEST_PART_UNSUPPORTED, index, "history.reasoning: dropped")]
        return [_changed(Code.HISTORY_REASONING_CHANGED, index, "reasoning dropped")]
    signed = sum(r.signed for r in mine.reasoning)
    if signed > sum(r.signed for r in theirs.reasoning) and "history.signature" in carries:
        return [_changed(Code.HISTORY_REASONING_CHANGED, index, "reasoning signature lost")]
    if signed and text_mine != text_theirs:
        return [_changed(Code.HISTORY_REASONING_CHANGED, index, "signed reasoning text changed")]
    return []


def _reasoning_as_text(mine: Turn, mine_text: str, their_text: str) -> bool:
    """The provider's turn text is the client's with the reasoning's text added to it."""
    reasoning = " ".join(" ".join(r.text.split()) for r in mine.reasoning if r.text)
    if not reasoning or mine_text == their_text:
        return False
    return reasoning in their_text and " ".join(
        their_text.replace(reasoning, "", 1).split()) == mine_text
