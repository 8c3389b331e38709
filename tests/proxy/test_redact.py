import re
from urllib.parse import unquote_plus

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st
from tests.support.properties import examples

from calltap.redact import (
    SECRET_HEADERS,
    SECRET_QUERY_PARAMETERS,
    BodyMasker,
    redact_headers,
    redact_query,
)

SECRET_NAMES = sorted(SECRET_HEADERS)


DOCUMENTED_SECRETS = {
    "authorization", "proxy-authorization", "cookie", "set-cookie", "api-key", "x-api-key",
    "x-goog-api-key", "x-litellm-api-key",
}


def test_secret_headers_are_the_documented_set():
    assert set(SECRET_HEADERS) == DOCUMENTED_SECRETS


@pytest.mark.parametrize("name", SECRET_NAMES)
@pytest.mark.parametrize("spell", [str.lower, str.upper, str.title])
def test_each_secret_header_is_redacted_in_any_case(name, spell):
    out = redact_headers([(spell(name), "sk-live-123"), ("Content-Type", "application/json")])
    assert out == {name: "[redacted]", "content-type": "application/json"}


def test_extra_headers_are_redacted_in_any_case():
    headers = [("X-Custom-Token", "tok-1"), ("x-org", "acme"), ("X-Session", "s-2")]
    out = redact_headers(headers, extra=["x-custom-token", "X-SESSION"])
    assert out == {"x-custom-token": "[redacted]", "x-org": "acme", "x-session": "[redacted]"}


def test_other_headers_are_kept_verbatim_in_order():
    headers = [("X-Request-ID", "req-1"), ("Accept", "text/event-stream"), ("traceparent", "00-x")]
    out = redact_headers(headers)
    assert list(out.items()) == [
        ("x-request-id", "req-1"),
        ("accept", "text/event-stream"),
        ("traceparent", "00-x"),
    ]


def test_repeated_headers_become_a_list_in_arrival_order():
    headers = [("Via", "1.1 a"), ("X-Trace", "t"), ("via", "1.1 b"), ("VIA", "1.1 c")]
    assert redact_headers(headers) == {"via": ["1.1 a", "1.1 b", "1.1 c"], "x-trace": "t"}


def test_repeated_secret_headers_are_each_redacted():
    headers = [("Set-Cookie", "a=1"), ("set-cookie", "b=2")]
    assert redact_headers(headers) == {"set-cookie": ["[redacted]", "[redacted]"]}


@examples(150)
@given(
    st.lists(
        st.tuples(
            st.sampled_from([*SECRET_NAMES, "x-extra-secret"]),
            st.lists(st.booleans(), min_size=30, max_size=30),
            st.text("abcdefghijklmnopqrstuvwxyz0123456789", min_size=6, max_size=40),
        ),
        min_size=1,
        max_size=8,
    ),
    st.lists(st.tuples(st.sampled_from(["accept", "user-agent", "x-org"]), st.just("visible"))),
)
def test_planted_secrets_never_reach_the_json(secrets, plain):
    headers = []
    planted = []
    for name, upper, value in secrets:
        spelled = "".join(c.upper() if u else c for c, u in zip(name, upper, strict=False))
        planted.append(f"PLANTED{value}")
        headers.append((spelled, planted[-1]))
    headers.extend(plain)
    dumped = orjson.dumps(redact_headers(headers, extra=["X-Extra-Secret"]))
    for secret in planted:
        assert secret.encode() not in dumped
    assert dumped.count(b"visible") == len(plain)


def test_masker_without_patterns_returns_the_body_itself():
    masker = BodyMasker([])
    body = b'{"messages": [{"role": "user", "content": "sk-abc"}]}'
    assert masker.mask(body) is body
    assert not masker


def test_masker_replaces_every_match_of_every_pattern():
    masker = BodyMasker([r"sk-[A-Za-z0-9]{8,}", r"\b\d{3}-\d{2}-\d{4}\b"])
    body = b'{"a": "key sk-abcdEFGH1234 and sk-ZZZZZZZZ", "ssn": "123-45-6789", "n": "sk-short"}'
    assert masker.mask(body) == (
        b'{"a": "key [masked] and [masked]", "ssn": "[masked]", "n": "sk-short"}'
    )
    assert masker


def test_masker_keeps_bytes_that_are_not_utf8():
    masker = BodyMasker(["secret"])
    assert masker.mask(b"\xff\xfesecret\x00") == b"\xff\xfe[masked]\x00"


def test_masker_refuses_a_bad_pattern():
    with pytest.raises(re.error):
        BodyMasker(["sk-("])


def test_masker_refuses_a_pattern_matching_nothing_at_all():
    with pytest.raises(ValueError, match="empty string"):
        BodyMasker(["(token)?"])


@pytest.mark.parametrize("name", sorted(SECRET_QUERY_PARAMETERS))
@pytest.mark.parametrize("spell", [str.lower, str.upper])
def test_each_secret_query_parameter_loses_its_value_and_keeps_its_name(name, spell):
    query = f"alt=sse&{spell(name)}=s3cr%2Ft&b=1"
    assert redact_query(query) == f"alt=sse&{spell(name)}=[redacted]&b=1"


def test_a_percent_encoded_or_plus_spelled_secret_name_is_redacted_as_sent():
    assert redact_query("api%5Fkey=one&api+key=two") == "api%5Fkey=[redacted]&api+key=two"
    assert redact_query("%6Bey=one&x=%6Bey") == "%6Bey=[redacted]&x=%6Bey"


def test_every_repeat_of_a_secret_parameter_is_redacted():
    assert redact_query("key=a&key=b&key") == "key=[redacted]&key=[redacted]&key"


QUERY_TEXT = st.text(st.characters(codec="ascii", exclude_characters="&="), max_size=8)


@examples(150)
@given(st.lists(st.tuples(QUERY_TEXT, st.booleans(), QUERY_TEXT), max_size=6))
def test_a_query_is_kept_byte_for_byte_but_for_secret_values(parameters):
    query = "&".join(f"{name}={value}" if has_value else name
                     for name, has_value, value in parameters)
    redacted = redact_query(query).split("&")
    assert len(redacted) == len(query.split("&"))
    for (name, has_value, value), out in zip(parameters, redacted, strict=False):
        secret = has_value and unquote_plus(name).lower() in SECRET_QUERY_PARAMETERS
        expected = f"{name}=[redacted]" if secret else (f"{name}={value}" if has_value else name)
        assert out == expected
