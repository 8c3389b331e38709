"""The pair page's model: calls marked against the other leg, findings linked to raw events."""

from __future__ import annotations

from pathlib import Path

from view_helpers import HOSTILE_TEXT, two_calls

from calltap.transcript import Capture
from calltap.view import templating
from calltap.view.pages import FOLD_LINES, anchor, build_page, raw_events

PATH = "/v1/chat/completions"


def page_of(upstream: bytes, downstream: bytes):  # type: ignore[no-untyped-def]
    return build_page(Capture(upstream, path=PATH), Capture(downstream, path=PATH))


def test_a_dropped_call_is_marked_missing_upstream_and_linked_on_both_legs() -> None:
    page = page_of(two_calls(), two_calls(keep=1))
    assert page.verdict == "diverged"
    (row,) = page.choices
    assert [(c.name, c.state) for c in row.upstream.calls] == [("weather", "kept"),
                                                               ("clock", "missing")]
    assert [(c.name, c.state) for c in row.downstream.calls] == [("weather", "kept")]
    dropped = next(f for f in page.findings if f.code == "TOOL_CALLS_DROPPED")
    clock = row.upstream.calls[1]
    assert dropped.links == {"downstream": anchor("downstream", dropped.event),
                             "upstream": clock.link}
    assert clock.link == anchor("upstream", 2)
    assert (page.headline.code, page.headline.detail) == ("TOOL_CALLS_DROPPED",
                                                          "missing downstream: clock")
    pointed = {e.anchor for leg in page.legs.values() for e in leg.raw if e.pointed}
    assert pointed == {clock.link, anchor("downstream", dropped.event)}


def test_a_call_only_downstream_is_extra_and_arguments_are_pretty_printed() -> None:
    page = page_of(two_calls(keep=1), two_calls())
    (row,) = page.choices
    assert [c.state for c in row.downstream.calls] == ["kept", "extra"]
    assert row.downstream.calls[1].arguments == '{\n  "zone": "UTC"\n}'
    assert (row.downstream.calls[1].id, row.downstream.calls[1].index,
            row.downstream.calls[1].fragments) == ("call_1", 1, 4)


def test_long_arguments_are_folded_and_short_ones_are_not() -> None:
    long = ("lookup", "{" + ", ".join(f'"k{n}": {n}' for n in range(FOLD_LINES + 1)) + "}")
    page = page_of(two_calls(names=(long, ("clock", "{}"))), two_calls(
        names=(long, ("clock", "{}"))))
    assert [c.folded for c in page.choices[0].upstream.calls] == [True, False]


def test_raw_events_keep_ordinal_offset_type_and_data() -> None:
    body = b": comment\n\nevent: ping\ndata: {}\n\ndata: [DONE]\n\n"
    events, total = raw_events(Capture(body), "upstream")
    assert total == 2
    assert [(e.ordinal, e.offset, e.kind, e.data, e.anchor) for e in events] == [
        (0, 11, "ping", "{}", "upstream-event-0"),
        (1, 33, "message", "[DONE]", "upstream-event-1"),
    ]


def test_a_json_body_is_one_raw_entry() -> None:
    events, total = raw_events(Capture(b'{"choices": []}'), "downstream")
    assert (total, [(e.kind, e.data) for e in events]) == (1, [("body", '{"choices": []}')])


def test_one_capture_is_a_single_leg_check() -> None:
    page = build_page(None, Capture(two_calls(keep=1)[:-14], path=PATH))
    assert page.verdict == "defective"
    assert set(page.legs) == {"downstream"}
    assert page.report["capture"]["dialect"] == "openai.chat"
    assert [f.code for f in page.findings] == ["DONE_MISSING"]
    assert page.findings[0].links == {"downstream": page.legs["downstream"].raw[-1].anchor}


def test_captured_markup_is_escaped_on_the_rendered_page() -> None:
    page = page_of(two_calls(text=HOSTILE_TEXT), two_calls(text=HOSTILE_TEXT, keep=1))
    html = templating.render("pair.html", base="/", recorded=None, page=page, title="t")
    assert "<script>window" not in html
    assert "<img src=x" not in html
    assert 'href="javascript:' not in html
    assert "&lt;script&gt;window.__pwned = 1&lt;/script&gt;" in html


def test_the_redacted_structural_report_has_no_names_or_values(tmp_path: Path) -> None:
    page = page_of(two_calls(), two_calls(keep=1))
    assert "detail" not in str(page.structural)
    assert "clock" not in str(page.structural)
    assert "missing downstream: clock" in str(page.report)


def test_a_single_leg_and_an_unreadable_pair_render_with_what_they_have() -> None:
    single = build_page(None, Capture(two_calls(keep=1), path=PATH))
    html = templating.render("pair.html", base="/", recorded=None, page=single, title="t")
    assert "Not recorded." in html and "No choice 0 on this side." in html
    unreadable = build_page(Capture(b"<html>nope</html>"), Capture(b""))
    assert unreadable.verdict == "inconclusive"
    html = templating.render("pair.html", base="/", recorded=None, page=unreadable, title="t")
    assert "&lt;html&gt;nope&lt;/html&gt;" in html


def test_bytes_after_the_last_event_are_an_incomplete_entry_a_finding_links_to() -> None:
    body = b'data: {}\n\ndata: {"cut'
    events, total = raw_events(Capture(body), "downstream")
    assert (total, [(e.ordinal, e.offset, e.kind, e.data) for e in events]) == (
        2, [(0, 0, "message", "{}"), (1, 10, "incomplete", 'data: {"cut')])
    page = build_page(None, Capture(body, path=PATH))
    cut = next(f for f in page.findings if f.code == "SSE_INCOMPLETE_EVENT")
    assert cut.links == {"downstream": "downstream-event-1"}
