"""The identity of an outbox message: ``once.source`` and ``once.seq``, and the deduplication
id a FIFO target gets from them.

Why a module of its own: the identity is what makes once → queue → once exactly once end to
end, so three things must hold of it, and they are decided here and nowhere else.

- **It names the operation, not only the key.** ``once.source`` is the record id (readable,
  for operators) and a random token of the attempt whose commit stored the outbox
  (``<record id, escaped>@<token>``). Every resend of that outbox carries the same identity
  (the source is stored with each message in the commit, and sent as stored); a later
  operation on the same key, after the record's retention, stages its outbox under a new
  token, so a downstream consumer whose record of the first message is still live (its
  retention is longer) applies the second one, and a FIFO target does not deduplicate it.
- **It is sendable on every transport.** The key is the business's, and it may hold any
  character its JSON can (a form feed, ``@``, a letter of any script), where SQS's String
  attribute refuses some (#x9 | #xA | #xD | #x20-#xD7FF | #xE000-#xFFFD | #x10000-#x10FFFF
  only: https://docs.aws.amazon.com/AWSSimpleQueueService/latest/APIReference/API_SendMessage.html).
  The record id is percent-escaped (each UTF-8 byte of a character outside ``SAFE``, as
  ``%XX``), so ``once.source`` is printable ASCII, and cut to ``NAME_MAX_CHARS`` (with a hash
  of the whole), so that a downstream ``SOURCE_KEY`` record id stays within once's 1024-byte
  key.
- **It survives a deploy that changes its form.** What was sent is what is resent: an
  outbox stored by a version of once that stored no source (its identity was the bare record
  id) is resent under that old identity (``legacy_source``), so that a downstream that
  recorded it recognises the resend; and a downstream keys on ``<once.source>#<once.seq>``
  whatever the form, as it always did.

Pure: no I/O. ``sendrules`` holds the transports' rules.
"""

from __future__ import annotations

import hashlib
import string
import uuid

from once import constants as c
from once import sendrules as rules

#: Characters of a record id kept as they are in ``once.source``: ASCII letters and digits and
#: ``-_.:/#`` (every one taken by SQS, SNS and EventBridge alike, and none of ``%``, ``@`` or
#: ``~``, which the escaped form uses). Every other character is written as ``%XX`` per byte.
SAFE = frozenset(string.ascii_letters + string.digits + "-_.:/#")
#: Separates the record id from the operation's token: ``<record id>@<token>``.
SEPARATOR = "@"
#: At most this many characters of the escaped record id; a longer one is cut, and ``~`` and
#: 16 hex digits of the sha256 of the whole id follow. With the token (33 characters) and a
#: downstream's ``#<seq>``, a ``SOURCE_KEY`` key stays well within ``MAX_KEY_BYTES``.
NAME_MAX_CHARS = 256
_CUT = "~"
_CUT_DIGEST_CHARS = 16
#: A token's length and digits (``new_token``).
_TOKEN_CHARS = 32
_HEX = frozenset("0123456789abcdef")


def new_token() -> str:
    """A token for one attempt's outbox: 32 random hex digits (122 random bits), so that two
    operations on one key never share an identity."""
    return uuid.uuid4().hex


def escape(text: str) -> str:
    """``text`` with every character outside ``SAFE`` written as ``%XX``, one per byte of its
    UTF-8 (a lone surrogate, which no key can hold, as its surrogate-escaped bytes: total)."""
    return "".join(
        char
        if char in SAFE
        else "".join(f"%{byte:02X}" for byte in char.encode("utf-8", "surrogatepass"))
        for char in text
    )


def source_of(record_id: str, token: str) -> str:
    """``once.source`` for the outbox an attempt with ``token`` stages for ``record_id``:
    printable ASCII, at most ``NAME_MAX_CHARS`` + 1 + the token's length."""
    return f"{_name(record_id)}{SEPARATOR}{token}"


def _name(record_id: str) -> str:
    """The record id as an identity writes it: escaped, and cut past ``NAME_MAX_CHARS``."""
    name = escape(record_id)
    if len(name) > NAME_MAX_CHARS:
        digest = hashlib.sha256(record_id.encode("utf-8", "surrogatepass")).hexdigest()
        name = name[: NAME_MAX_CHARS - len(_CUT) - _CUT_DIGEST_CHARS] + _CUT
        name += digest[:_CUT_DIGEST_CHARS]
    return name


def named(source: str) -> str:
    """What an identity names without its operation's token: the record id as escaped in it
    (an operator's or a report's view of which record sent a message). A legacy identity
    (``legacy_source``: no token) is its own name."""
    name, separator, token = source.rpartition(SEPARATOR)
    is_token = len(token) == _TOKEN_CHARS and all(char in _HEX for char in token)
    return name if separator and is_token else source


def legacy_source(record_id: str, destination: str) -> str:
    """The identity of a message of an outbox stored before identities named their operation
    (it stored no source): the bare record id, as it was sent then, so that a downstream
    that recorded it recognises the resend. A record id the destination refuses as a String
    value was never accepted there (every send was refused, and the record stayed owed), so
    no downstream knows it: it is written as a new identity's name is (escaped, and cut so that
    a downstream can key on it), and the resend can finally go."""
    taken = rules.text_taken(record_id, to_topic=rules.is_topic(destination))
    return record_id if taken else _name(record_id)


def identity_attributes(source: str, seq: int) -> tuple[tuple[str, str, str], ...]:
    """once's own attributes on message ``seq`` of the outbox ``source`` names: they count
    toward the message's size and its ten attributes."""
    return (
        (c.OUTBOX_ATTR_SOURCE, "String", source),
        (c.OUTBOX_ATTR_SEQ, "Number", str(seq)),
    )


def deduplication_id(source: str, seq: int) -> str:
    """A FIFO target's deduplication id for message ``seq`` of the outbox ``source`` names:
    the same on every send of that message (a resend after a crash is deduplicated by SQS or
    SNS within their five minutes, and by a downstream once consumer keyed on
    ``once.source`` and ``once.seq`` for good), another for another operation. 64 hex
    digits: within the 128 characters SQS and SNS take."""
    return hashlib.sha256(f"{source}#{seq}".encode("utf-8", "surrogatepass")).hexdigest()
