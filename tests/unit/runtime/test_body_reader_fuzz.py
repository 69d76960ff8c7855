"""The body reader is total: whatever JSON, text or key expression it is given, it returns a
readable body or raises ``BadMessage`` with a reason code; nothing else ever escapes it (an
escaping exception would fail the whole batch). Fuzzed with a bounded budget, plus the
instances that escaped before."""

from __future__ import annotations

import json

import jmespath
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from jmespath.exceptions import JMESPathError

from once import constants as c
from once.payload import BadMessage, BodyReader

FIELDS = ("orderId", "tenant", "items", "a")
READ_REASONS = {"INVALID_JSON", "INVALID_ENVELOPE", "INVALID_KEY", "INVALID_PAYLOAD"}

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.sampled_from(FIELDS) | st.text(max_size=4), inner, max_size=4)
    ),
    max_leaves=12,
)
bodies = st.one_of(
    st.dictionaries(st.sampled_from(FIELDS), json_values).map(json.dumps),
    json_values.map(json.dumps),  # lone surrogates arrive escaped, as pure ASCII
    json_values.map(lambda value: json.dumps(value, ensure_ascii=False)),
    st.text(),
)

paths = st.sampled_from(FIELDS) | st.sampled_from([f + "[0]" for f in FIELDS]) | st.just("@")
FUNCTIONS_1 = ("abs", "length", "to_number", "to_string", "keys", "values", "sort", "max",
               "sum", "avg", "ceil", "floor", "reverse", "to_array", "type")  # fmt: skip
key_expressions = st.one_of(
    paths,
    st.builds("{}({})".format, st.sampled_from(FUNCTIONS_1), paths),
    st.builds("join('-', [{}, {}])".format, paths, paths),
    st.builds("merge({}, {})".format, paths, paths),
    st.builds("starts_with({}, {})".format, paths, paths),
    st.builds("{}[?{} > `1`]".format, paths, paths),
    st.builds("{} | [0]".format, paths),
    st.text(max_size=20),  # anything at all; what does not compile is skipped
)
envelopes = st.one_of(
    st.none(),
    paths,
    st.builds("powertools_json({})".format, paths),
    st.builds("powertools_base64({})".format, paths),
    st.builds("powertools_json(powertools_base64_gzip({}))".format, paths),
)


def compiled(expression: str) -> str:
    try:
        jmespath.compile(expression)
    except (JMESPathError, RecursionError, ValueError, TypeError):
        assume(False)
    return expression


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    body=bodies,
    key=key_expressions,
    validate=st.one_of(st.none(), key_expressions),
    envelope=envelopes,
)
def test_any_body_and_key_expression_give_a_readable_body_or_a_bad_message(
    body: str, key: str, validate: str | None, envelope: str | None
) -> None:
    reader = BodyReader(
        compiled(key), compiled(validate) if validate is not None else None, envelope
    )
    try:
        parsed = reader.read(body)
    except BadMessage as bad:
        assert bad.reason in READ_REASONS
        assert len(str(bad)) <= c.ERROR_MAX_CHARS
        return
    assert parsed.key and len(parsed.key.encode("utf-8")) <= c.MAX_KEY_BYTES
    assert len(parsed.payload_hash) == 64


CASES: dict[str, tuple[str, str, str | None, str]] = {
    "lone-surrogate-key": ('{"orderId": "\\ud800"}', "orderId", "@", "INVALID_KEY"),
    "lone-surrogate-beside-the-key": (
        '{"orderId": "o-1", "note": "\\udc00"}',
        "orderId",
        "@",
        "INVALID_JSON",
    ),
    "join-on-a-number": (
        '{"tenant": "t-1", "orderId": 7}',
        "join('-', [tenant, orderId])",
        "@",
        "INVALID_KEY",
    ),
    "validate-raises": ('{"orderId": "o-1", "qty": "x"}', "orderId", "abs(qty)", "INVALID_PAYLOAD"),
    "integer-too-long-to-parse": (
        '{"orderId": ' + "9" * 5_000 + "}",
        "orderId",
        "@",
        "INVALID_JSON",
    ),
}


@pytest.mark.parametrize(("body", "key", "validate", "reason"), CASES.values(), ids=CASES.keys())
def test_a_body_that_breaks_the_reader_is_a_bad_message_with_its_reason(
    body: str, key: str, validate: str | None, reason: str
) -> None:
    with pytest.raises(BadMessage) as bad:
        BodyReader(key, validate).read(body)
    assert bad.value.reason == reason
    assert "Kryptonite" not in str(bad.value)


def test_an_unreadable_body_is_quarantined_and_the_rest_of_its_batch_runs(
    aws, once_handler, spy, sqs_event, caplog
) -> None:
    handler = once_handler(spy, key="join('-', [tenant, orderId])")
    event = sqs_event(
        [
            {"tenant": "t", "orderId": "o-1"},
            '{"tenant": "t", "orderId": "Kryptonite-\\ud800"}',
            {"tenant": "t", "orderId": 7},
            {"tenant": "t", "orderId": "o-2"},
        ]
    )

    assert handler(event, None) == {"batchItemFailures": []}

    assert sorted(spy.keys) == ["o-1", "o-2"]
    reasons = sorted(
        m["MessageAttributes"][c.QUARANTINE_ATTR_REASON]["StringValue"] for m in aws.dlq()
    )
    assert reasons == ["INVALID_KEY", "INVALID_KEY"]
    for record in caplog.records:
        assert "Kryptonite" not in record.getMessage()
