"""Finding codes, their severities and one-line explanations (the README's code table)."""

from enum import StrEnum


class Severity(StrEnum):
    FATAL = "fatal"
    NEGOTIABLE = "negotiable"
    COSMETIC = "cosmetic"
    WARNING = "warning"


class Code(StrEnum):
    TOOL_CALLS_DROPPED = "TOOL_CALLS_DROPPED"
    TOOL_CALLS_ADDED = "TOOL_CALLS_ADDED"
    TOOL_CALL_SET_CHANGED = "TOOL_CALL_SET_CHANGED"
    TOOL_CALL_ARGUMENTS_CHANGED = "TOOL_CALL_ARGUMENTS_CHANGED"
    TOOL_ARGUMENTS_INVALID = "TOOL_ARGUMENTS_INVALID"
    TOOL_CALL_INDEX_MISSING = "TOOL_CALL_INDEX_MISSING"
    TOOL_CALL_ID_CONFLICT = "TOOL_CALL_ID_CONFLICT"
    TOOL_CALL_INDEX_GAP = "TOOL_CALL_INDEX_GAP"
    CHOICE_INDEX_MISSING = "CHOICE_INDEX_MISSING"
    DELTA_LIST_INDEX_MISSING = "DELTA_LIST_INDEX_MISSING"
    TEXT_CHANGED = "TEXT_CHANGED"
    FINISH_REASON_MISSING = "FINISH_REASON_MISSING"
    FINISH_REASON_CHANGED = "FINISH_REASON_CHANGED"
    DONE_MISSING = "DONE_MISSING"
    ERROR_IN_STREAM = "ERROR_IN_STREAM"
    ERROR_DROPPED = "ERROR_DROPPED"
    STREAM_RESTARTED = "STREAM_RESTARTED"
    CHOICE_DROPPED = "CHOICE_DROPPED"
    CHOICE_ADDED = "CHOICE_ADDED"
    USAGE_MISSING = "USAGE_MISSING"
    USAGE_CHANGED = "USAGE_CHANGED"
    TOOL_CALL_ORDER_CHANGED = "TOOL_CALL_ORDER_CHANGED"
    TOOL_CALL_IDS_REMAPPED = "TOOL_CALL_IDS_REMAPPED"
    SSE_INCOMPLETE_EVENT = "SSE_INCOMPLETE_EVENT"
    CAPTURE_TRUNCATED = "CAPTURE_TRUNCATED"
    UNSAFE_INTEGER = "UNSAFE_INTEGER"
    DUPLICATE_KEY = "DUPLICATE_KEY"
    NON_FINITE_NUMBER = "NON_FINITE_NUMBER"
    JSON_INVALID = "JSON_INVALID"
    FRAME_INVALID = "FRAME_INVALID"
    REQUEST_TOOL_DROPPED = "REQUEST_TOOL_DROPPED"
    REQUEST_TOOL_ADDED = "REQUEST_TOOL_ADDED"
    TOOL_SCHEMA_CHANGED = "TOOL_SCHEMA_CHANGED"
    TOOL_STRICT_CHANGED = "TOOL_STRICT_CHANGED"
    TOOL_CHOICE_CHANGED = "TOOL_CHOICE_CHANGED"
    PARALLEL_TOOL_CALLS_CHANGED = "PARALLEL_TOOL_CALLS_CHANGED"
    HISTORY_TOOL_CALL_CHANGED = "HISTORY_TOOL_CALL_CHANGED"
    HISTORY_TOOL_RESULT_CHANGED = "HISTORY_TOOL_RESULT_CHANGED"
    HISTORY_REASONING_CHANGED = "HISTORY_REASONING_CHANGED"
    MESSAGE_CHANGED = "MESSAGE_CHANGED"
    RESPONSE_FORMAT_CHANGED = "RESPONSE_FORMAT_CHANGED"
    SAMPLING_CHANGED = "SAMPLING_CHANGED"
    REQUEST_PART_UNSUPPORTED = "REQUEST_PART_UNSUPPORTED"
    REQUEST_UNREADABLE = "REQUEST_UNREADABLE"

    @property
    def severity(self) -> Severity:
        return SEVERITY[self]

    @property
    def explanation(self) -> str:
        return EXPLANATION[self]


SEVERITY: dict[Code, Severity] = {
    Code.TOOL_CALLS_DROPPED: Severity.FATAL,
    Code.TOOL_CALLS_ADDED: Severity.FATAL,
    Code.TOOL_CALL_SET_CHANGED: Severity.FATAL,
    Code.TOOL_CALL_ARGUMENTS_CHANGED: Severity.FATAL,
    Code.TOOL_ARGUMENTS_INVALID: Severity.FATAL,
    Code.TOOL_CALL_INDEX_MISSING: Severity.FATAL,
    Code.TOOL_CALL_ID_CONFLICT: Severity.FATAL,
    Code.TOOL_CALL_INDEX_GAP: Severity.FATAL,
    Code.CHOICE_INDEX_MISSING: Severity.FATAL,
    Code.DELTA_LIST_INDEX_MISSING: Severity.FATAL,
    Code.TEXT_CHANGED: Severity.FATAL,
    Code.FINISH_REASON_MISSING: Severity.FATAL,
    Code.FINISH_REASON_CHANGED: Severity.FATAL,
    Code.DONE_MISSING: Severity.FATAL,
    Code.ERROR_IN_STREAM: Severity.FATAL,
    Code.ERROR_DROPPED: Severity.FATAL,
    Code.STREAM_RESTARTED: Severity.FATAL,
    Code.CHOICE_DROPPED: Severity.FATAL,
    Code.CHOICE_ADDED: Severity.FATAL,
    Code.USAGE_MISSING: Severity.NEGOTIABLE,
    Code.USAGE_CHANGED: Severity.NEGOTIABLE,
    Code.TOOL_CALL_ORDER_CHANGED: Severity.COSMETIC,
    Code.TOOL_CALL_IDS_REMAPPED: Severity.COSMETIC,
    Code.SSE_INCOMPLETE_EVENT: Severity.WARNING,
    Code.CAPTURE_TRUNCATED: Severity.WARNING,
    Code.UNSAFE_INTEGER: Severity.WARNING,
    Code.DUPLICATE_KEY: Severity.WARNING,
    Code.NON_FINITE_NUMBER: Severity.WARNING,
    Code.JSON_INVALID: Severity.WARNING,
    Code.FRAME_INVALID: Severity.WARNING,
    Code.REQUEST_TOOL_DROPPED: Severity.FATAL,
    Code.REQUEST_TOOL_ADDED: Severity.NEGOTIABLE,
    Code.TOOL_SCHEMA_CHANGED: Severity.FATAL,
    Code.TOOL_STRICT_CHANGED: Severity.NEGOTIABLE,
    Code.TOOL_CHOICE_CHANGED: Severity.FATAL,
    Code.PARALLEL_TOOL_CALLS_CHANGED: Severity.FATAL,
    Code.HISTORY_TOOL_CALL_CHANGED: Severity.FATAL,
    Code.HISTORY_TOOL_RESULT_CHANGED: Severity.FATAL,
    Code.HISTORY_REASONING_CHANGED: Severity.FATAL,
    Code.MESSAGE_CHANGED: Severity.FATAL,
    Code.RESPONSE_FORMAT_CHANGED: Severity.FATAL,
    Code.SAMPLING_CHANGED: Severity.NEGOTIABLE,
    Code.REQUEST_PART_UNSUPPORTED: Severity.COSMETIC,
    Code.REQUEST_UNREADABLE: Severity.WARNING,
}

EXPLANATION: dict[Code, str] = {
    Code.TOOL_CALLS_DROPPED: "tool calls the provider made are missing from what the client got",
    Code.TOOL_CALLS_ADDED: "the client got tool calls the provider never made",
    Code.TOOL_CALL_SET_CHANGED: "the multiset of (function, arguments) differs between the legs",
    Code.TOOL_CALL_ARGUMENTS_CHANGED: "same function, different decoded arguments",
    Code.TOOL_ARGUMENTS_INVALID: "a call's joined argument fragments are not valid JSON",
    Code.TOOL_CALL_INDEX_MISSING: "a streamed tool-call delta carries no index",
    Code.TOOL_CALL_ID_CONFLICT: "a new call id arrived on a tool-call index already in use",
    Code.TOOL_CALL_INDEX_GAP: (
        "streamed tool-call indexes of a choice do not run 0, 1, 2, … in order of first"
        " appearance: list-based stream accumulators fail"
    ),
    Code.CHOICE_INDEX_MISSING: (
        "a streamed Chat Completions chunk has a choice without an integer index: the openai"
        " SDK's stream accumulator indexes its list of choices by it and raises"
    ),
    Code.DELTA_LIST_INDEX_MISSING: (
        "a delta field holding a list of objects (such as thinking_blocks) recurs in a later"
        " chunk of the choice with an entry lacking an integer index: the openai SDK's stream"
        " accumulator merges list entries by index and raises"
    ),
    Code.TEXT_CHANGED: "the assistant text differs (truncation included)",
    Code.FINISH_REASON_MISSING: "the stream ended without a finish reason",
    Code.FINISH_REASON_CHANGED: "the finish reasons differ",
    Code.DONE_MISSING: "the terminal marker of the stream is missing",
    Code.ERROR_IN_STREAM: "an error object arrived inside a 200 response",
    Code.ERROR_DROPPED: "an error object the provider sent never reached the client",
    Code.STREAM_RESTARTED: (
        "the message started again inside one stream after content began: a retried attempt"
        " spliced into the stream"
    ),
    Code.CHOICE_DROPPED: "a choice the provider sent is missing downstream",
    Code.CHOICE_ADDED: "a choice appears downstream that the provider never sent",
    Code.USAGE_MISSING: "usage is absent downstream",
    Code.USAGE_CHANGED: "token counts differ between the legs",
    Code.TOOL_CALL_ORDER_CHANGED: "same tool calls, in another order",
    Code.TOOL_CALL_IDS_REMAPPED: "tool-call ids or indexes rewritten, meaning kept",
    Code.SSE_INCOMPLETE_EVENT: "bytes after the last event boundary: the capture may be cut",
    Code.CAPTURE_TRUNCATED: "calltap stopped recording at its size limit",
    Code.UNSAFE_INTEGER: "an integer a JavaScript client cannot hold exactly",
    Code.DUPLICATE_KEY: "a JSON object with a repeated key",
    Code.NON_FINITE_NUMBER: "NaN or Infinity in a JSON payload",
    Code.JSON_INVALID: "a data payload that is not JSON",
    Code.FRAME_INVALID: "a binary frame with a wrong length or CRC: unreadable past it",
    Code.REQUEST_TOOL_DROPPED: "a tool the client offered is not offered to the provider",
    Code.REQUEST_TOOL_ADDED: "the provider is offered a tool the client never offered",
    Code.TOOL_SCHEMA_CHANGED: "a tool's parameter schema accepts other arguments upstream",
    Code.TOOL_STRICT_CHANGED: "a tool's strict flag dropped, or added where the client set none",
    Code.TOOL_CHOICE_CHANGED: "the provider is told another tool choice",
    Code.PARALLEL_TOOL_CALLS_CHANGED: "the limit on parallel tool calls differs",
    Code.HISTORY_TOOL_CALL_CHANGED: (
        "an assistant tool call in the conversation is missing, added, or changed upstream"
    ),
    Code.HISTORY_TOOL_RESULT_CHANGED: (
        "a tool result is missing, linked to another call, changed, or lost its error flag"
    ),
    Code.HISTORY_REASONING_CHANGED: (
        "reasoning in the conversation is dropped, loses its signature, or became visible text"
    ),
    Code.MESSAGE_CHANGED: "a turn's text or media, or the instructions, differ",
    Code.RESPONSE_FORMAT_CHANGED: "the structured-output constraint differs or is dropped",
    Code.SAMPLING_CHANGED: (
        "sampling, output limits, stop sequences or reasoning settings differ or are dropped"
    ),
    Code.REQUEST_PART_UNSUPPORTED: (
        "a part of the request the provider's dialect has no field for was dropped"
    ),
    Code.REQUEST_UNREADABLE: "a request body that cannot be read as its dialect",
}
