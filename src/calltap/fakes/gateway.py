"""A fake OpenAI-compatible gateway that relays faithfully, or injects one known defect on request.

Every request, any method and path, is forwarded to `upstream` (an origin such as
`http://127.0.0.1:8701`; it can be set after the gateway started) and the response relayed back as
it arrives. By default the relay is byte-identical, and the client's `X-Request-ID` and
`traceparent` are forwarded along with `Content-Type`, `Accept` and `Authorization`, so a proxy on
the far side can pair the legs by header; a client's SigV4 headers (`X-Amz-Date`,
`X-Amz-Security-Token`, `X-Amz-Content-Sha256`) go along untouched, and the gateway signs nothing.

A client asks for a defect with the request header `X-Fake-Gateway-Defect: <name>` (see
`calltap.fakes.defects.DEFECTS`; the header is consumed, never forwarded). Stream defects apply to
`text/event-stream` responses: the gateway parses the provider's events with `calltap.sse`, passes
each payload through the defect's transform and re-serializes the result (each event keeps its
`event:` line); a JSON response is relayed as is, unless the defect also changes whole answers
(`change-two-values`). `drop-second-call` also loses the second call of an Anthropic Messages or
OpenAI Responses stream (a `/v1/messages` or `/v1/responses` request relayed untranslated).
`strip-headers` forwards nothing but Content-Type; `retry-once` abandons the first upstream attempt
after its response headers and relays a second one. A request defect (`drop-tool`,
`named-choice-required`, `drop-none-choice`, `drop-result-image`, `drop-zero-temperature`,
`drop-schema-enum`) rewrites the client's JSON body before it is relayed or translated. Names
joined by commas inject those defects together (at most one of them changing the answer). An
unknown defect name is a 400. A gateway started with `defect=NAME` injects that defect into every
request that names none (a client that cannot add headers, such as `calltap probe`, meets a broken
gateway that way).

An upstream it cannot reach (or none set yet) is a 502 with an OpenAI-shaped error; an upstream
that breaks mid-body gets the client's connection aborted, with no ending made up.

A client asks for a translating gateway with
`X-Fake-Gateway-Translate: anthropic|responses|ollama|converse|gemini|bedrock-invoke` (consumed,
never forwarded): a `POST /v1/chat/completions` is translated into an Anthropic Messages, OpenAI
Responses, Ollama, Bedrock Converse, Gemini or Anthropic-on-Bedrock request and sent to the
upstream's `/v1/messages`, `/v1/responses`, `/api/chat`, `/model/{model}/converse-stream`,
`/v1beta/models/{model}:streamGenerateContent?alt=sse` or
`/model/{model}/invoke-with-response-stream` (`/converse`, `:generateContent`, `/invoke` when the
client did not ask to stream), and the answer, stream (SSE, NDJSON or AWS event stream, read by
`calltap.fakes.frames`) or JSON, is
translated back into Chat Completions the way LiteLLM does it (see `calltap.fakes.translate`). A
translation combines with any defect: stream defects apply to the translated chunks,
`strip-headers` forwards no client header (the provider's own `anthropic-version` is still sent),
and `lose-second-tool-use` is a translator that loses the second tool call. An error answer from
the upstream is relayed untranslated.

Like LiteLLM, the gateway returns the provider's `x-request-id` as `llm_provider-x-request-id`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import aiohttp
import orjson
from aiohttp import ClientSession, ClientTimeout, TCPConnector, web
from multidict import CIMultiDict, CIMultiDictProxy

from calltap.fakes.chat_answer import ChatTranslation
from calltap.fakes.defects import DEFECTS, Defect, Payload, Relay, defect_named
from calltap.fakes.frames import Frames, SSEFrames, frames_for
from calltap.fakes.frames import decode as decode  # where tests written before frames.py find it
from calltap.fakes.provider import CHAT_PATH, MODELS_PATH, error_body
from calltap.fakes.server import LoopbackServer
from calltap.fakes.translate import LOSE_SECOND_TOOL_USE, TARGETS, TRANSLATION_DEFECTS, Target

DEFECT_HEADER = "X-Fake-Gateway-Defect"
TRANSLATE_HEADER = "X-Fake-Gateway-Translate"
FORWARDED_HEADERS = (
    "Content-Type",
    "Accept",
    "Authorization",
    "X-Request-ID",
    "traceparent",
    "X-Amz-Date",
    "X-Amz-Security-Token",
    "X-Amz-Content-Sha256",
)
"""The client headers the gateway forwards upstream by default: a SigV4 signature the client made
(Authorization and the `X-Amz-*` headers it covers) passes untouched; the gateway signs nothing."""
NOT_RELAYED = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-connection",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "content-length",
        "date",
        "server",
    }
)
"""Response headers the gateway does not pass on: hop-by-hop ones, and those it sets itself."""


def serialize(event_type: str, payload: Payload) -> bytes:
    """One SSE event for a payload, compact JSON as the provider writes it."""
    data = payload.encode() if isinstance(payload, str) else orjson.dumps(payload)
    prefix = b"" if event_type == "message" else b"event: " + event_type.encode() + b"\n"
    return prefix + b"data: " + data + b"\n\n"


def error_response(status: int, message: str, kind: str = "invalid_request_error") -> web.Response:
    """An error answered by the gateway itself, in OpenAI's shape."""
    return web.Response(
        status=status, body=error_body(message, kind), content_type="application/json"
    )


def relayed_headers(upstream: CIMultiDictProxy[str]) -> CIMultiDict[str]:
    """The upstream response headers the gateway passes to its client."""
    headers: CIMultiDict[str] = CIMultiDict()
    for name, value in upstream.items():
        lowered = name.lower()
        if lowered == "x-request-id":
            headers.add("llm_provider-x-request-id", value)
        elif lowered not in NOT_RELAYED:
            headers.add(name, value)
    return headers


@dataclass(frozen=True, slots=True)
class Translating:
    """One request's translation: the target, whether it loses the second call, the model."""

    target: Target
    defect: Defect
    model: Any

    @property
    def lossy(self) -> bool:
        return self.defect is LOSE_SECOND_TOOL_USE

    def stream(self) -> ChatTranslation:
        return self.target.stream(lose_second_call=self.lossy, model=self.model)

    def whole(self, body: dict[str, Any]) -> Payload:
        return self.target.whole(body, lose_second_call=self.lossy, model=self.model)


class Chained(Relay):
    """Two transforms one after the other: a translation, then a stream defect."""

    def __init__(self, first: Relay, then: Relay) -> None:
        self.first = first
        self.then = then

    def feed(self, payload: Payload) -> list[Payload]:
        return [out for middle in self.first.feed(payload) for out in self.then.feed(middle)]

    def end(self) -> list[Payload]:
        tail = [out for middle in self.first.end() for out in self.then.feed(middle)]
        return tail + self.then.end()


def rewritten(body: bytes, defect: Defect) -> bytes:
    """The body through the defect's request transform; as it came when the defect has none or
    the body is not a JSON object."""
    if defect.request is None:
        return body
    try:
        decoded = orjson.loads(body)
    except orjson.JSONDecodeError:
        return body
    return orjson.dumps(defect.request(decoded)) if isinstance(decoded, dict) else body


def requested_target(request: web.Request) -> Target | None:
    """The translation a request asks for; None when it asks for none or is not a chat
    completion. ValueError for an unknown name."""
    name = request.headers.get(TRANSLATE_HEADER)
    if not name:
        return None
    if name not in TARGETS:
        raise ValueError(f"unknown {TRANSLATE_HEADER}: {name!r} (known: {', '.join(TARGETS)})")
    is_chat = request.method == "POST" and request.path == CHAT_PATH
    return TARGETS[name] if is_chat else None


def requested_defect(request: web.Request, translating: bool, default: str | None = None) -> Defect:
    """The defect a request asks for (`default` when it names none); ValueError for an unknown
    one, or for a translation defect without a translation."""
    name = request.headers.get(DEFECT_HEADER, default)
    if name in TRANSLATION_DEFECTS:
        if not translating:
            raise ValueError(f"{DEFECT_HEADER}: {name!r} needs {TRANSLATE_HEADER}")
        return TRANSLATION_DEFECTS[name]
    try:
        return defect_named(name)
    except KeyError:
        known = ", ".join([*DEFECTS, *TRANSLATION_DEFECTS])
        raise ValueError(f"unknown {DEFECT_HEADER}: {name!r} (known: {known})") from None


class FakeGateway(LoopbackServer):
    """The fake gateway as a real aiohttp server on loopback; `upstream` may be set later."""

    def __init__(
        self,
        upstream: str | None = None,
        *,
        defect: str | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        super().__init__(host, port)
        self.upstream = upstream
        self.defect = defect_named(defect).name
        """The defect of every request that names none ("none": a faithful relay)."""
        self.requests_received = 0
        self.defects_injected: list[str] = []
        """The defect names requested so far, in arrival order ("none" for faithful relays)."""
        self._session: ClientSession | None = None

    def app(self) -> web.Application:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._relay)
        app.cleanup_ctx.append(self._client)
        return app

    async def _client(self, app: web.Application) -> AsyncIterator[None]:
        """The upstream client session, open for as long as the application runs."""
        connector = TCPConnector(limit=0)
        timeout = ClientTimeout(total=None, sock_connect=10)
        async with ClientSession(
            connector=connector, timeout=timeout, auto_decompress=False
        ) as session:
            self._session = session
            yield
            self._session = None

    async def probe_upstream(self) -> dict[str, Any]:
        """`GET /v1/models` on the upstream, as a gateway does when it starts."""
        async with self._require_session().get(self._target(MODELS_PATH)) as response:
            response.raise_for_status()
            return orjson.loads(await response.read())

    def _require_session(self) -> ClientSession:
        if self._session is None:
            raise RuntimeError("FakeGateway is not running")
        return self._session

    def _target(self, path_qs: str) -> str:
        if not self.upstream:
            raise RuntimeError("FakeGateway has no upstream yet")
        return self.upstream.rstrip("/") + path_qs

    async def _relay(self, request: web.Request) -> web.StreamResponse:
        self.requests_received += 1
        try:
            target = requested_target(request)
            defect = requested_defect(request, target is not None, self.defect)
        except ValueError as error:
            return error_response(400, str(error))
        self.defects_injected.append(defect.name)
        if not self.upstream:
            return error_response(502, "the gateway has no upstream yet", "upstream_error")
        body = rewritten(await request.read(), defect)
        names = ("Content-Type",) if defect.strips_headers else FORWARDED_HEADERS
        headers = {name: request.headers[name] for name in names if name in request.headers}
        chat: dict[str, Any] = {}
        path = request.path_qs
        if target is not None:
            try:
                chat = orjson.loads(body)
            except orjson.JSONDecodeError:
                chat = {}
            if not isinstance(chat, dict) or not chat:
                return error_response(400, "the body is not a JSON object")
            body, path = orjson.dumps(target.request(chat)), target.path(chat)
            headers.pop("Authorization", None)
            headers.update(target.headers(request.headers, not defect.strips_headers))
            headers["Content-Type"] = "application/json"
        try:
            upstream = await self._call(request.method, path, headers, body, defect.retries)
        except aiohttp.ClientError as exc:
            return error_response(502, f"upstream unreachable: {exc}", "upstream_error")
        async with upstream:
            translating = Translating(target, defect, chat.get("model")) if target else None
            return await self._answer(request, upstream, translating, defect)

    async def _call(
        self, method: str, path: str, headers: dict[str, str], body: bytes, retries: bool
    ) -> aiohttp.ClientResponse:
        """The upstream response; with `retries`, after abandoning a first attempt."""
        session = self._require_session()
        url = self._target(path)
        if retries:
            first = await session.request(method, url, headers=headers, data=body)
            first.close()
        return await session.request(method, url, headers=headers, data=body)

    async def _answer(
        self,
        request: web.Request,
        upstream: aiohttp.ClientResponse,
        translating: Translating | None,
        defect: Defect,
    ) -> web.StreamResponse:
        """Relay the upstream answer: as it is, through a stream transform, or translated."""
        frames = frames_for(upstream.content_type)
        if translating is not None and upstream.status >= 300:
            translating = None
        if translating is not None and frames is None:
            return await self._translate_whole(upstream, translating)
        transform = defect.transform() if defect.transform is not None else None
        if transform is not None and transform.changes_whole and frames is None:
            return await self._rewrite_whole(upstream, transform)
        response = web.StreamResponse(
            status=upstream.status, headers=relayed_headers(upstream.headers)
        )
        await response.prepare(request)
        if translating is not None:
            translation = translating.stream()
            transform = translation if transform is None else Chained(translation, transform)
        elif not isinstance(frames, SSEFrames):
            frames = None
        try:
            if transform is not None and frames is not None:
                await self._transform(upstream.content, response, transform, frames, translating)
            else:
                async for chunk in upstream.content.iter_any():
                    await response.write(chunk)
        except aiohttp.ClientPayloadError:
            assert request.transport is not None
            request.transport.abort()
            return response
        await response.write_eof()
        return response

    @staticmethod
    async def _rewrite_whole(upstream: aiohttp.ClientResponse, transform: Relay) -> web.Response:
        """A whole JSON answer through a defect's `whole` (unchanged by most defects)."""
        body = await upstream.read()
        try:
            value = orjson.loads(body)
        except orjson.JSONDecodeError:
            value = None
        changed = transform.whole(value) if upstream.status < 300 else value
        return web.Response(
            status=upstream.status,
            headers=relayed_headers(upstream.headers),
            body=body if value is None else orjson.dumps(changed),
        )

    @staticmethod
    async def _translate_whole(
        upstream: aiohttp.ClientResponse, translating: Translating
    ) -> web.Response:
        """A whole JSON answer, translated into a `chat.completion` body."""
        try:
            value = orjson.loads(await upstream.read())
        except orjson.JSONDecodeError:
            value = None
        if not isinstance(value, dict):
            return error_response(502, "the upstream answer is not a JSON object", "upstream_error")
        return web.Response(
            status=upstream.status,
            headers=relayed_headers(upstream.headers),
            body=orjson.dumps(translating.whole(value)),
        )

    @staticmethod
    async def _transform(
        content: aiohttp.StreamReader,
        response: web.StreamResponse,
        transform: Relay,
        frames: Frames,
        translating: Translating | None,
    ) -> None:
        """Relay a stream through a transform, payload by payload; a translated stream is plain
        `data:` events, without the provider's `event:` lines or framing."""
        async for chunk in content.iter_any():
            out = bytearray()
            for event_type, payload in frames.feed(chunk):
                kind = "message" if translating is not None else event_type
                for transformed in transform.feed(payload):
                    out += serialize(kind, transformed)
            if out:
                await response.write(bytes(out))
        tail = b"".join(serialize("message", payload) for payload in transform.end())
        if tail:
            await response.write(tail)
