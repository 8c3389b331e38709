"""The probes as data: which functions each one forces, the exact arguments it expects, whether it
streams, and the schema and prompt that make a model produce those arguments.

Every expected value is stated in the tool's schema as JSON Schema `const` (with `strict: true`,
`required` and `additionalProperties: false` at every level), and the prompt repeats the value as
JSON, so a model under constrained decoding (or any schema-following fake) produces it exactly.
What arrives is then compared by calltap's own argument equality: a gateway that re-types `true`
as `1`, stringifies a number or loses a call cannot pass.

Two probes check the tool choice itself, by asking for what the choice rules out: `choice-none`
forbids every call while the prompt asks for one, and `choice-named` names one function while the
prompt asks for the other. A gateway that drops or loosens the choice lets the prompt win.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import orjson

ECHO_ARGUMENTS: dict[str, Any] = {"text": "calltap probe: echo 7f3a", "count": 3}
NESTED_ARGUMENTS: dict[str, Any] = {
    "flags": {"enabled": True, "retries": 1},
    "user": {
        "name": "Zoë Łukasiewicz – 東京 🚀",
        "id": 9007199254740991,
        "nickname": None,
        "ratio": 0.1,
        "offset": -2.5e-3,
    },
    "tags": ["a", 1, True, None, 2.5],
    "matrix": [[1, 2], [3.25, -0.5]],
    "escapes": 'quote " backslash \\ newline \n tab \t slash /',
}
"""Nested objects and arrays, unicode beyond the BMP, `true` beside `1`, floats, null, the largest
integer a JavaScript client holds exactly, and every escape JSON has."""
LOOKUP_ARGUMENTS: dict[str, Any] = {"key": "calltap-probe-round-trip"}
ROUND_TRIP_RESULT = "calltap-result-5d2c91 ok"
"""The fixed local tool result `round-trip` answers its call with; the next answer must quote it."""
PARALLEL_ARGUMENTS = ({"city": "Zürich"}, {"zone": "Asia/Taipei"})
NOTE_ARGUMENTS: dict[str, Any] = {"note": "calltap probe: none 4b1e"}
ASKED_ARGUMENTS: dict[str, Any] = {"answer": "calltap probe: asked 1c9d"}
NAMED_ARGUMENTS: dict[str, Any] = {"pick": "calltap probe: named 8e2b", "turn": 2}

ToolChoice = Literal["force", "none", "named"]
"""What a probe's `tool_choice` says: "force" names its one function (several: any call is
required, all of them expected); "none" forbids every call, though the prompt asks for one;
"named" names the last function, though the prompt asks for the first."""


@dataclass(frozen=True, slots=True)
class Function:
    """One function a probe offers, with the exact arguments it must be called with."""

    name: str
    description: str
    arguments: dict[str, Any]

    @property
    def parameters(self) -> dict[str, Any]:
        """The strict parameter schema stating every expected value as `const`."""
        return schema_for(self.arguments)


@dataclass(frozen=True, slots=True)
class Probe:
    """One active check: the functions offered, whether the answer streams, whether the call is
    answered with a tool result on a second turn, and what the tool choice says."""

    name: str
    summary: str
    functions: tuple[Function, ...]
    stream: bool
    round_trip: bool = False
    choice: ToolChoice = "force"

    @property
    def forced(self) -> Function | None:
        """The function the probe's tool choice names; None when it names none (`parallel`
        requires any call, `choice-none` forbids them)."""
        if self.choice == "none":
            return None
        if self.choice == "named":
            return self.functions[-1]
        return self.functions[0] if len(self.functions) == 1 else None

    @property
    def forbids(self) -> bool:
        """Whether the tool choice forbids every call: the answer must be text."""
        return self.choice == "none"

    @property
    def parallel(self) -> bool:
        """Whether several calls are expected in one turn."""
        return self.choice == "force" and len(self.functions) > 1

    @property
    def expected(self) -> tuple[Function, ...]:
        """The functions the answer must call, each once: what the tool choice allows, not what
        the prompt asks for."""
        if self.choice == "none":
            return ()
        if self.choice == "named":
            return self.functions[-1:]
        return self.functions

    @property
    def asked(self) -> tuple[Function, ...]:
        """The functions the prompt asks to call (`choice-named` asks for the one not named)."""
        return self.functions[:1] if self.choice == "named" else self.functions

    @property
    def prompt(self) -> str:
        """What the user asks: each call with its arguments, spelled out as JSON."""
        lines = [
            f"Call the function {function.name} with exactly these arguments (JSON): "
            + orjson.dumps(function.arguments).decode()
            for function in self.asked
        ]
        if len(self.asked) > 1:
            lines.insert(0, "Make these calls in parallel, in one turn.")
        if self.round_trip:
            lines.append("Then answer with the tool's result, quoted verbatim.")
        return "\n".join(lines)


ECHO = Function("probe_echo", "Echo a text and a count back", ECHO_ARGUMENTS)
NESTED = Function("probe_nested", "Store a nested record", NESTED_ARGUMENTS)
LOOKUP = Function("probe_lookup", "Look a key up", LOOKUP_ARGUMENTS)
WEATHER = Function("probe_weather", "Current weather in a city", PARALLEL_ARGUMENTS[0])
CLOCK = Function("probe_clock", "Current time in a time zone", PARALLEL_ARGUMENTS[1])
NOTE = Function("probe_note", "Write a note down", NOTE_ARGUMENTS)
ASKED = Function("probe_asked", "Record an answer", ASKED_ARGUMENTS)
NAMED = Function("probe_named", "Record a pick and its turn", NAMED_ARGUMENTS)

PROBES: dict[str, Probe] = {
    probe.name: probe
    for probe in (
        Probe("forced-echo", "one forced call, strings and a number, JSON answer", (ECHO,), False),
        Probe(
            "forced-nested",
            "one forced call with nested, typed, unicode arguments, JSON answer",
            (NESTED,),
            False,
        ),
        Probe(
            "stream-echo", "forced-echo streamed: fragments, finish reason, marker", (ECHO,), True
        ),
        Probe(
            "stream-nested", "forced-nested streamed across fragment boundaries", (NESTED,), True
        ),
        Probe(
            "round-trip",
            "a forced call answered with a local tool result, quoted on the next turn",
            (LOOKUP,),
            False,
            round_trip=True,
        ),
        Probe(
            "parallel", "two calls in one streamed turn, both must arrive", (WEATHER, CLOCK), True
        ),
        Probe(
            "choice-none",
            "tool_choice none while the prompt asks for a call: text must come back, no call",
            (NOTE,),
            False,
            choice="none",
        ),
        Probe(
            "choice-named",
            "two tools, the second named while the prompt asks for the first: only it is called",
            (ASKED, NAMED),
            False,
            choice="named",
        ),
    )
}
"""Every probe by name, in the order they run."""


def schema_for(value: Any) -> dict[str, Any]:
    """A strict JSON Schema that admits exactly `value`: `const` on every leaf, array and empty
    object, other objects spelled property by property (all required, nothing else allowed)."""
    if isinstance(value, dict):
        schema: dict[str, Any] = {
            "type": "object",
            "properties": {name: schema_for(item) for name, item in value.items()},
            "required": list(value),
            "additionalProperties": False,
        }
        if not value:
            schema["const"] = {}  # no property states it: say so, or {} reads as "any object"
        return schema
    return {"type": json_type(value), "const": value}


def json_type(value: Any) -> str:
    """The JSON Schema type name of a decoded JSON value."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def selected(names: str | None) -> list[Probe]:
    """The probes a comma-separated `--only` names, in run order; all of them for None.
    ValueError names what is unknown."""
    if names is None:
        return list(PROBES.values())
    wanted = [name.strip() for name in names.split(",") if name.strip()]
    unknown = [name for name in wanted if name not in PROBES]
    if unknown or not wanted:
        raise ValueError(
            f"unknown probe {', '.join(unknown) or '(none given)'}; known: {', '.join(PROBES)}"
        )
    return [probe for name, probe in PROBES.items() if name in wanted]
