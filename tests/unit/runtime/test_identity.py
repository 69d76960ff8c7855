"""The outbox identity (``once.identity``), as properties over every key a body can carry:
``once.source`` is printable ASCII that SQS and SNS take as a String value, names the record
(its escape undoes to the record id), differs per operation, fits a downstream
``SOURCE_KEY`` record within once's key limit, and an outbox stored before identities named
their operation is resent as it was sent."""

from __future__ import annotations

from urllib.parse import unquote

from hypothesis import given
from hypothesis import strategies as st

from once import SOURCE_KEY, identity
from once import constants as c
from once import sendrules as rules
from once.models import record_id
from once.payload import BodyReader

QUEUE = "https://sqs.us-east-1.amazonaws.com/123456789012/notify"
TOPIC = "arn:aws:sns:us-east-1:123456789012:notify"
#: Any key a JSON body can carry (lone surrogates too: the reader refuses them, the identity
#: must still be total), up to once's limit on a key.
keys = st.text(max_size=c.MAX_KEY_BYTES).filter(
    lambda k: len(k.encode("utf-8", "surrogatepass")) <= c.MAX_KEY_BYTES
)
prefixes = st.sampled_from(["payments", "orders-eu", "svc.with:odd/chars"])


@given(prefix=prefixes, key=keys, seq=st.integers(min_value=0, max_value=99))
def test_the_identity_is_printable_ascii_every_transport_takes_and_fits_a_downstream_key(
    prefix: str, key: str, seq: int
) -> None:
    source = identity.source_of(record_id(prefix, key), identity.new_token())

    assert source.isascii() and source.isprintable()
    assert rules.text_taken(source, to_topic=False) and rules.text_taken(source, to_topic=True)
    assert rules.value_taken("String", source, to_topic=False)
    assert len(source) <= identity.NAME_MAX_CHARS + 1 + 32
    # A SOURCE_KEY consumer reads it as its key, within once's 1024-byte limit.
    attributes = {
        c.OUTBOX_ATTR_SOURCE: {"stringValue": source, "dataType": "String"},
        c.OUTBOX_ATTR_SEQ: {"stringValue": str(seq), "dataType": "Number"},
    }
    parsed = BodyReader(SOURCE_KEY, "@").read('{"n": 1}', attributes)
    assert parsed.key == f"{source}#{seq}"
    assert rules.group_id_taken(identity.deduplication_id(source, seq))


@given(prefix=prefixes, key=keys)
def test_the_identity_names_its_record_and_its_operation(prefix: str, key: str) -> None:
    stored_as = record_id(prefix, key)
    token = identity.new_token()
    source = identity.source_of(stored_as, token)
    name, said = source.rsplit(identity.SEPARATOR, 1)

    assert said == token
    if len(identity.escape(stored_as)) <= identity.NAME_MAX_CHARS:
        assert unquote(name, errors="surrogatepass") == stored_as  # readable, and exact
    # Two operations on one key never share an identity.
    assert identity.source_of(stored_as, identity.new_token()) != source


@given(a=keys, b=keys)
def test_two_keys_never_escape_alike(a: str, b: str) -> None:
    if a != b:
        assert identity.escape(a) != identity.escape(b)


@given(key=keys, destination=st.sampled_from([QUEUE, TOPIC]))
def test_an_outbox_stored_without_its_identity_is_sent_as_before_when_it_could_be(
    key: str, destination: str
) -> None:
    stored_as = record_id("payments", key)
    legacy = identity.legacy_source(stored_as, destination)
    to_topic = destination == TOPIC

    if rules.text_taken(stored_as, to_topic=to_topic):
        assert legacy == stored_as  # the identity a downstream recorded
    else:
        # Never accepted, so nothing recorded it: written as a new identity's name is, short
        # enough for a downstream to key on.
        assert legacy == identity.source_of(stored_as, "t").rsplit("@", 1)[0]
        assert len(legacy) <= identity.NAME_MAX_CHARS
    assert rules.text_taken(legacy, to_topic=to_topic)


def test_the_identity_of_a_key_with_a_form_feed_escapes_it() -> None:
    source = identity.source_of("billing#INV\f2024-17", "0" * 32)
    assert source == "billing#INV%0C2024-17@" + "0" * 32


def test_a_long_record_id_is_cut_with_a_hash_of_the_whole() -> None:
    long_a, long_b = "s#" + "é" * 500 + "a", "s#" + "é" * 500 + "b"
    name_a = identity.source_of(long_a, "t").rsplit("@", 1)[0]
    name_b = identity.source_of(long_b, "t").rsplit("@", 1)[0]
    assert len(name_a) == identity.NAME_MAX_CHARS and name_a != name_b
