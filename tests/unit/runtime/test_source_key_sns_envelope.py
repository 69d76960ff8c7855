"""``key=SOURCE_KEY`` behind SNS: with raw message delivery off (SNS's default, and CDK's
``SqsSubscription``'s), the SQS message has no message attributes; SNS carries the
upstream outbox message's ``once.source`` / ``once.seq`` inside the JSON envelope, as
``"MessageAttributes": {"once.source": {"Type": "String", "Value": ...}}``
(https://docs.aws.amazon.com/sns/latest/dg/sns-large-payload-raw-message-delivery.html,
https://docs.aws.amazon.com/sns/latest/dg/firehose-archived-message-format-S3.html).
The reader takes the identity from there when the SQS attributes do not hold it."""

from __future__ import annotations

import base64
import json
import uuid
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from once import SOURCE_KEY
from once import constants as c
from once.models import Outcome
from once.payload import BadMessage, BodyReader
from tests.conftest import Spy, outcomes

SOURCE = "payments#p-1"
NOTICE = {"paymentId": "p-1", "status": "credited"}


def sns_notification(
    payload: Any, attributes: dict[str, tuple[str, str]] | None = None
) -> dict[str, Any]:
    """What SQS receives from an SNS subscription with raw message delivery off: SNS's JSON
    document, the published message as a string in ``Message`` and the message attributes
    as ``{"Type": ..., "Value": ...}`` in ``MessageAttributes``."""
    topic = "arn:aws:sns:us-east-1:123456789012:notices"
    notification: dict[str, Any] = {
        "Type": "Notification",
        "MessageId": str(uuid.uuid4()),
        "TopicArn": topic,
        "Message": json.dumps(payload),
        "Timestamp": "2026-01-01T00:00:00.000Z",
        "SignatureVersion": "1",
        "Signature": base64.b64encode(uuid.uuid4().bytes * 8).decode(),
        "SigningCertURL": "https://sns.us-east-1.amazonaws.com/SimpleNotificationService-0.pem",
        "UnsubscribeURL": (
            "https://sns.us-east-1.amazonaws.com/?Action=Unsubscribe"
            f"&SubscriptionArn={topic}:{uuid.uuid4()}"
        ),
    }
    if attributes:
        notification["MessageAttributes"] = {
            name: {"Type": kind, "Value": value} for name, (kind, value) in attributes.items()
        }
    return notification


def identity(source: str = SOURCE, seq: str = "0") -> dict[str, tuple[str, str]]:
    """once's outbox identity as SNS writes it in the envelope (once sends ``once.seq`` as a
    Number)."""
    return {c.OUTBOX_ATTR_SOURCE: ("String", source), c.OUTBOX_ATTR_SEQ: ("Number", seq)}


def sqs_identity(source: str = SOURCE, seq: str = "0") -> dict[str, dict[str, Any]]:
    """The same identity as Lambda hands over SQS message attributes (raw delivery on, or a
    queue the outbox sends to directly)."""
    return {
        c.OUTBOX_ATTR_SOURCE: {"stringValue": source, "dataType": "String"},
        c.OUTBOX_ATTR_SEQ: {"stringValue": seq, "dataType": "Number"},
    }


def read_key(body: Any, attributes: dict[str, Any] | None = None, **options: Any) -> str:
    reader = BodyReader(SOURCE_KEY, validate="@", **options)
    return reader.read(json.dumps(body), attributes).key


def test_an_sns_envelope_with_raw_delivery_off_yields_the_upstream_identity_as_key() -> None:
    body = sns_notification(NOTICE, identity(seq="3") | {"team": ("String", "x")})

    assert read_key(body, {}, envelope="powertools_json(Message)") == f"{SOURCE}#3"
    assert read_key(body, None) == f"{SOURCE}#3"  # without an envelope too


def test_the_envelope_identity_is_read_when_the_sqs_attributes_hold_other_ones_only() -> None:
    # A DLQ copy of such a message, redriven: SQS attributes are the quarantine's, the
    # identity is still in the (unchanged) body.
    quarantined = {c.QUARANTINE_ATTR_REASON: {"stringValue": "CONFLICT", "dataType": "String"}}
    body = sns_notification(NOTICE, identity(seq="1"))

    assert read_key(body, quarantined, envelope="powertools_json(Message)") == f"{SOURCE}#1"


def test_raw_delivery_on_still_keys_on_the_sqs_attributes() -> None:
    assert read_key(NOTICE, sqs_identity(seq="2")) == f"{SOURCE}#2"


def test_the_sqs_attributes_win_when_both_hold_an_identity() -> None:
    body = sns_notification(NOTICE, identity(source="other#o-9", seq="7"))

    assert read_key(body, sqs_identity(seq="2")) == f"{SOURCE}#2"


@pytest.mark.parametrize(
    "attributes",
    [
        {c.OUTBOX_ATTR_SOURCE: ("String", SOURCE)},  # no seq
        {c.OUTBOX_ATTR_SEQ: ("Number", "0")},  # no source
        identity(seq="1.5"),
        identity(seq="-1"),
        identity(source=""),
        {c.OUTBOX_ATTR_SOURCE: ("Binary", "cGF5"), c.OUTBOX_ATTR_SEQ: ("Number", "0")},
        {c.OUTBOX_ATTR_SOURCE: ("String.Array", '["a"]'), c.OUTBOX_ATTR_SEQ: ("Number", "0")},
    ],
)
def test_an_envelope_without_a_whole_identity_is_an_invalid_key(
    attributes: dict[str, tuple[str, str]],
) -> None:
    with pytest.raises(BadMessage) as raised:
        read_key(sns_notification(NOTICE, attributes))
    assert raised.value.reason == c.REASON_INVALID_KEY


@pytest.mark.parametrize(
    "body",
    [
        NOTICE,
        sns_notification(NOTICE),  # SNS, but no attributes at all
        sns_notification(NOTICE, identity()) | {"Type": "SubscriptionConfirmation"},
        {"Type": "Notification", "MessageAttributes": "not a map"},
        {"Type": "Notification", "MessageAttributes": {c.OUTBOX_ATTR_SOURCE: "x"}},
        {"Type": "Notification", "MessageAttributes": {c.OUTBOX_ATTR_SOURCE: {"Value": 1}}},
        [sns_notification(NOTICE, identity())],
    ],
)
def test_a_body_that_is_no_sns_notification_with_an_identity_is_an_invalid_key(
    body: Any,
) -> None:
    with pytest.raises(BadMessage) as raised:
        read_key(body)
    assert raised.value.reason == c.REASON_INVALID_KEY


def test_an_eventbridge_event_has_no_attributes_to_key_on(aws, once_handler, sqs_event) -> None:
    # EventBridge's SQS target sets no message attributes: the identity is not there.
    event = {"version": "0", "detail-type": "Credited", "source": "payments", "detail": NOTICE}
    handler = once_handler(Spy(), key=SOURCE_KEY, envelope="detail")

    assert outcomes(handler, sqs_event([event])) == [Outcome.QUARANTINED]


def test_a_source_key_consumer_behind_sns_runs_once_per_upstream_message(
    aws, once_handler, sqs_event
) -> None:
    spy = Spy(lambda body, attempt: "applied")
    handler = once_handler(spy, key=SOURCE_KEY, envelope="powertools_json(Message)")
    first = sns_notification(NOTICE, identity())
    again = sns_notification(NOTICE, identity())  # SNS delivered it twice: new SNS ids
    second = sns_notification(NOTICE, identity(seq="1"))

    assert outcomes(handler, sqs_event([first, second])) == [Outcome.PROCESSED] * 2
    assert outcomes(handler, sqs_event([again])) == [Outcome.DUPLICATE]
    # Two keys of one batch run concurrently: in either order.
    assert sorted(attempt.key for _, attempt in spy.calls) == [f"{SOURCE}#0", f"{SOURCE}#1"]
    assert [body for body, _ in spy.calls] == [NOTICE, NOTICE]
    assert aws.dlq() == []


sources = st.text(min_size=1, max_size=60).filter(
    lambda text: not any("\ud800" <= ch <= "\udfff" for ch in text)
)
seqs = st.integers(min_value=0, max_value=10**30).map(str) | st.from_regex(
    r"\A[0-9]{1,12}\Z", fullmatch=True
)


@settings(max_examples=200, deadline=None)
@given(source=sources, seq=seqs)
def test_the_sqs_attribute_form_and_the_sns_envelope_form_give_the_same_key(
    source: str, seq: str
) -> None:
    def outcome(body: Any, attributes: dict[str, Any]) -> tuple[str, str]:
        try:
            return ("key", read_key(body, attributes))
        except BadMessage as bad:
            return ("bad", bad.reason)

    raw_on = outcome(NOTICE, sqs_identity(source, seq))
    raw_off = outcome(sns_notification(NOTICE, identity(source, seq)), {})

    assert raw_off == raw_on
    if raw_on[0] == "key":
        assert raw_on[1] == f"{source}#{int(seq)}"


@settings(max_examples=100, deadline=None)
@given(payload=st.dictionaries(st.text(max_size=5), st.integers() | st.text(max_size=5)))
def test_every_publish_of_one_message_hashes_alike_behind_sns_without_raw_delivery(
    payload: dict[str, Any],
) -> None:
    """SNS writes a new MessageId, Timestamp and Signature on every publish: what a
    ``SOURCE_KEY`` consumer hashes is what the publisher sent, so a resend is a duplicate,
    never a CONFLICT (``payload.without_transport``)."""
    reader = BodyReader(SOURCE_KEY, validate="@")
    first, resent = (
        sns_notification(payload, identity()) | {"Timestamp": stamp}
        for stamp in ("2026-01-01T00:00:00.000Z", "2026-01-01T00:05:00.000Z")
    )
    assert first["MessageId"] != resent["MessageId"]

    hashes = {reader.read(json.dumps(n)).payload_hash for n in (first, resent)}

    assert len(hashes) == 1
    # What the publisher sent still counts: another message under the identity is another hash.
    other = sns_notification({"other": payload}, identity())
    assert reader.read(json.dumps(other)).payload_hash not in hashes
