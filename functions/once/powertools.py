"""The bridge to Powertools' idempotency records, for the cut-over from Powertools to once.

A team that moves a consumer from Powertools' idempotency utility to once has records in
Powertools' table for operations Powertools completed, and for a while (the deploy, a
rollback) a Powertools build may poll the same queue. With ``make_handler(powertools=
PowertoolsBridge(...))`` once honours those records and leaves records Powertools honours:

- its claim (and its staged commit) also writes the message's Powertools record, under
  Powertools' own condition: a record Powertools completed and that has not expired is a
  DUPLICATE, one Powertools holds INPROGRESS is BUSY, one whose validation hash differs is
  a CONFLICT; absent or expired, the message is new;
- its commit writes that record COMPLETED with the result, in the same transaction as its
  own, so that a rollback to the Powertools build takes what once completed for a duplicate.

This module holds only Powertools' record: its id, its item and its conditions, each as
Powertools 3.x computes them (``aws_lambda_powertools/utilities/idempotency/persistence/``
``base.py`` and ``dynamodb.py``; cited line by line in docs/migrating.md). What a refused
write means is ``protocol.judge_powertools``; the writes are composed by ``once.store``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from once import constants as c
from once.models import Record, TransientError

#: The largest response once writes into a Powertools record as it is: DynamoDB's item
#: size limit (400 KB, https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/
#: ServiceQuotas.html) less room for the record's other attributes. Powertools itself cannot
#: store a larger one (its ``UpdateItem`` is refused); once stores its capped stand-in.
RESPONSE_MAX_BYTES = c.ITEM_MAX_BYTES - 4 * 1024
#: Powertools' statuses (``persistence/datarecord.py``, ``STATUS_CONSTANTS``).
INPROGRESS = "INPROGRESS"
COMPLETED = "COMPLETED"
#: The attribute once adds to a Powertools record it holds INPROGRESS: its claim's owner.
#: Powertools writes its own INPROGRESS record with ``PutItem``, which replaces the item and
#: so drops this attribute: a record that still carries it is once's, and only once's own
#: record (its claim's fence) decides who may hold it.
ONCE_OWNER_ATTR = "once_owner"

#: What the message was, as the team's ``@idempotent_function`` was given it: the SQS record
#: as Lambda delivers it (Powertools' ``SQSRecord`` hashes its ``raw_event``), its body
#: parsed as JSON, or what a function of the record returns (JSON values only).
Data = Literal["record", "body"] | Callable[[Mapping[str, Any]], Any]


@dataclass(frozen=True)
class PowertoolsBridge:
    """Where a team's Powertools idempotency records are, and how Powertools derived them:
    each argument is the one of the same name the team gave Powertools'
    ``DynamoDBPersistenceLayer`` and ``IdempotencyConfig``, with Powertools' defaults.

    ``key_prefix``: what precedes ``#`` in the record ids, Powertools' ``key_prefix`` if the
    team set one, else ``<function name>.<module>.<qualified name>`` of the decorated
    function in the function that ran it (read it off an id in the table). ``data``: what
    that function was given (``Data``).
    """

    table_name: str
    key_prefix: str
    event_key_jmespath: str = ""
    data: Data = "record"
    payload_validation_jmespath: str = ""
    hash_function: str = "md5"
    expires_after_seconds: int = 3600
    key_attr: str = "id"
    sort_key_attr: str | None = None
    static_pk_value: str | None = None
    expiry_attr: str = "expiration"
    in_progress_expiry_attr: str = "in_progress_expiration"
    status_attr: str = "status"
    data_attr: str = "data"
    validation_key_attr: str = "validation"
    _compiled: dict[str, Any] = field(default_factory=dict, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        import jmespath

        problems = [
            p
            for p in (
                _text("table_name", self.table_name),
                _text("key_prefix", self.key_prefix),
                None
                if self.hash_function in hashlib.algorithms_available
                else (
                    f"hash_function={self.hash_function!r}: a name of hashlib's "
                    "(Powertools calls getattr(hashlib, hash_function))"
                ),
                None
                if isinstance(self.expires_after_seconds, int)
                and not isinstance(self.expires_after_seconds, bool)
                and self.expires_after_seconds > 0
                else (
                    f"expires_after_seconds={self.expires_after_seconds!r}: a positive whole "
                    "number of seconds, as the team's IdempotencyConfig had it"
                ),
                None
                if self.data in ("record", "body") or callable(self.data)
                else (f"data={self.data!r}: 'record', 'body' or a function of the SQS record"),
                None
                if self.sort_key_attr != self.key_attr
                else ("sort_key_attr and key_attr cannot be the same (Powertools refuses it too)"),
                None
                if self.sort_key_attr is None or self.static_pk_value
                else (
                    "sort_key_attr is set: give static_pk_value too, as Powertools wrote it "
                    "(by default 'idempotency#<the old function's name>')"
                ),
            )
            if p
        ]
        if problems:
            raise ValueError("PowertoolsBridge: " + "; ".join(problems))
        for name in ("event_key_jmespath", "payload_validation_jmespath"):
            expression = getattr(self, name)
            if expression:
                try:
                    self._compiled[name] = jmespath.compile(expression)
                except jmespath.exceptions.JMESPathError as error:
                    raise ValueError(
                        f"PowertoolsBridge: {name}={expression!r} is not JMESPath "
                        f"({type(error).__name__})"
                    ) from None

    def record_for(self, sqs_record: Mapping[str, Any]) -> PowertoolsRecord | None:
        """The Powertools record of this SQS record, or None where Powertools keeps none
        (its key expression found nothing: Powertools skips persistence, ``base.py``
        ``_get_hashed_idempotency_key``). Raises ``PowertoolsKeyError`` where the id cannot
        be derived: the bridge is never off in silence for one message (its copy would run
        as new where Powertools may have completed it); the copy fails and comes back, then
        reaches the DLQ, naming the step."""
        data = self._step("data", self._data, sqs_record)
        key_data = self._step("event_key_jmespath", self._search, "event_key_jmespath", data)
        if _missing(key_data):
            return None
        validation = ""
        if "payload_validation_jmespath" in self._compiled:
            validated = self._step(
                "payload_validation_jmespath", self._search, "payload_validation_jmespath", data
            )
            validation = self._step("hash", _hash, self.hash_function, validated)
        key_hash = self._step("hash", _hash, self.hash_function, key_data)
        return PowertoolsRecord(self, f"{self.key_prefix}#{key_hash}", validation)

    @staticmethod
    def _step(name: str, step: Callable[..., Any], *args: Any) -> Any:
        try:
            return step(*args)
        except Exception as error:
            raise PowertoolsKeyError(name, error) from None

    def _data(self, sqs_record: Mapping[str, Any]) -> Any:
        """What the team's decorated function was given, prepared as Powertools prepares it
        (``base.py`` ``_prepare_data``: a dataclass or model as a dict, an event source data
        class as its raw event)."""
        if self.data == "record":
            return sqs_record
        if self.data == "body":
            return json.loads(sqs_record["body"])
        assert callable(self.data)
        from aws_lambda_powertools.utilities.idempotency.base import _prepare_data

        return _prepare_data(self.data(sqs_record))

    def _search(self, name: str, data: Any) -> Any:
        """``jmespath.search`` with Powertools' functions (``powertools_json``,
        ``powertools_base64``, ``powertools_base64_gzip``), as ``configure`` sets them."""
        compiled = self._compiled.get(name)
        if compiled is None:
            return data
        import jmespath
        from aws_lambda_powertools.utilities.jmespath_utils import PowertoolsFunctions

        return compiled.search(
            data, options=jmespath.Options(custom_functions=PowertoolsFunctions())
        )


def _text(name: str, value: object) -> str | None:
    if isinstance(value, str) and value:
        return None
    return f"{name}={value!r}: a non-empty string"


def _missing(data: Any) -> bool:
    """Powertools' ``is_missing_idempotency_key``: a dict or list of only None, or a falsy
    value that is not a number."""
    if isinstance(data, dict):
        return all(x is None for x in data.values())
    if isinstance(data, tuple | list):
        return all(x is None for x in data)
    if isinstance(data, int | float | bool):
        return False
    return not data


def _hash(name: str, data: Any) -> str:
    """Powertools' ``_generate_hash``: the hex digest of ``json.dumps(data, sort_keys=True)``
    with the encoder the installed Powertools hashes with (a ``Decimal`` as its text, an
    ``Enum``, a date, a ``UUID``...)."""
    text = json.dumps(data, cls=_key_encoder(), sort_keys=True)
    return hashlib.new(name, text.encode()).hexdigest()


def _key_encoder() -> type[json.JSONEncoder]:
    """The JSON encoder Powertools' ``_generate_hash`` uses: ``_IdempotencyKeyEncoder`` in
    ``persistence/base.py`` (3.37), which extends the ``Encoder`` of
    ``shared/json_encoder.py`` that earlier 3.x releases hash with."""
    from aws_lambda_powertools.shared.json_encoder import Encoder
    from aws_lambda_powertools.utilities.idempotency.persistence import base

    encoder: type[json.JSONEncoder] = getattr(base, "_IdempotencyKeyEncoder", Encoder)
    return encoder


class PowertoolsKeyError(TransientError):
    """A message's Powertools record id could not be derived as Powertools derives it: the
    step that failed and the error's class, never a value (its message is stored)."""

    def __init__(self, step: str, error: BaseException) -> None:
        super().__init__(
            f"the Powertools record's id could not be derived at its {step} "
            f"({type(error).__name__}): check PowertoolsBridge against the configuration "
            "the Powertools build wrote its records with"
        )


@dataclass(frozen=True)
class PowertoolsRecord:
    """One message's Powertools record: its idempotency key (``<key_prefix>#<hash>``) and
    its validation hash ("" when the team's config validated nothing). Each method is one
    element of a request, in the low-level client's shape."""

    bridge: PowertoolsBridge
    idempotency_key: str
    validation: str
    #: The response Powertools would have stored (business code's value, encoded up to what
    #: a Powertools record can hold, ``RESPONSE_MAX_BYTES``), set once business code
    #: returned; None: once's stored result stands in.
    response: str | None = None

    def key(self) -> dict[str, dict[str, str]]:
        """Powertools' ``_get_key``: the id, or the static partition key and the id."""
        b = self.bridge
        if b.sort_key_attr:
            assert b.static_pk_value is not None
            return {
                b.key_attr: {"S": b.static_pk_value},
                b.sort_key_attr: {"S": self.idempotency_key},
            }
        return {b.key_attr: {"S": self.idempotency_key}}

    def _names(self, expression: str) -> dict[str, str]:
        """The attribute-name placeholders ``expression`` uses (DynamoDB refuses unused
        ones), named as the team's persistence layer names them."""
        b = self.bridge
        names = {
            "#id": b.key_attr,
            "#expiry": b.expiry_attr,
            "#in_progress_expiry": b.in_progress_expiry_attr,
            "#status": b.status_attr,
            "#data": b.data_attr,
            "#validation": b.validation_key_attr,
            "#once_owner": ONCE_OWNER_ATTR,
        }
        return {k: v for k, v in names.items() if k in expression}

    def _item(self, status: str, expiry_s: int) -> dict[str, Any]:
        b = self.bridge
        item: dict[str, Any] = {
            **self.key(),
            b.expiry_attr: {"N": str(expiry_s)},
            b.status_attr: {"S": status},
        }
        if self.validation:
            item[b.validation_key_attr] = {"S": self.validation}
        return item

    def claim(self, *, me: str, now: float, lease_end_ms: int) -> dict[str, Any]:
        """A ``PutItem`` of the record INPROGRESS under Powertools' own condition
        (``_put_record``: absent, expired, or INPROGRESS past its in-progress expiry), or
        over one once holds (``ONCE_OWNER_ATTR``: once's own record let this claim in).
        Its in-progress expiry is the claim's lease, and its expiry never comes before the
        lease ends: Powertools' condition lets anyone in past either."""
        lease_end_s = -(-lease_end_ms // 1000)  # rounded up
        expiry = max(int(now) + self.bridge.expires_after_seconds, lease_end_s + 1)
        item = self._item(INPROGRESS, expiry)
        item[self.bridge.in_progress_expiry_attr] = {"N": str(lease_end_ms)}
        item[ONCE_OWNER_ATTR] = {"S": me}
        return self._put(item, now)

    def complete(self, *, me: str, result: str, now: float) -> dict[str, Any]:
        """An ``Update`` of the record COMPLETED as Powertools' ``_update_record`` writes it
        (its response, expiry, status and validation hash), while once's claim still holds
        it: a Powertools consumer that took it over since (its ``PutItem`` drops
        ``ONCE_OWNER_ATTR``) refuses it. ``result``: once's stored result, where no
        ``response`` was set."""
        return self._completion(_HELD, {":me": {"S": me}}, result=result, now=now)

    def settle(self, *, now: float) -> dict[str, Any]:
        """An ``Update`` of a record once holds until its outbox is sent (``hold``,
        ``held``: its response already written) to COMPLETED, with the expiry and status
        ``complete`` writes: the outbox is sent, and a Powertools build may now take a copy
        for a duplicate. Refused where the record is no longer held (already settled)."""
        update = "SET #expiry = :expiry, #status = :completed REMOVE #once_owner"
        return {
            "TableName": self.bridge.table_name,
            "Key": self.key(),
            "UpdateExpression": update,
            "ConditionExpression": _HELD_BY_ONCE,
            "ExpressionAttributeNames": self._names(update + " " + _HELD_BY_ONCE),
            "ExpressionAttributeValues": {
                ":completed": {"S": COMPLETED},
                ":inprogress": {"S": INPROGRESS},
                ":expiry": {"N": str(int(now) + self.bridge.expires_after_seconds)},
            },
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        }

    def _completion(
        self, condition: str, bound: dict[str, Any], *, result: str, now: float
    ) -> dict[str, Any]:
        b = self.bridge
        values: dict[str, Any] = {
            ":completed": {"S": COMPLETED},
            ":inprogress": {"S": INPROGRESS},
            ":data": {"S": self.response or result},
            ":expiry": {"N": str(int(now) + b.expires_after_seconds)},
            **bound,
        }
        update = "SET #data = :data, #expiry = :expiry, #status = :completed"
        if self.validation:
            update += ", #validation = :validation"
            values[":validation"] = {"S": self.validation}
        update += " REMOVE #once_owner"
        return {
            "TableName": b.table_name,
            "Key": self.key(),
            "UpdateExpression": update,
            "ConditionExpression": condition,
            "ExpressionAttributeNames": self._names(update + " " + condition),
            "ExpressionAttributeValues": values,
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        }

    def hold(self, *, me: str, result: str, until_s: int) -> dict[str, Any]:
        """An ``Update`` that keeps the record INPROGRESS under once, with no in-progress
        expiry and an expiry of ``until_s`` (once's own record's), its response written
        already: the commit of an operation whose outbox is not sent yet. A Powertools build
        that meets a copy then answers it in progress (``IdempotencyAlreadyInProgressError``)
        and SQS brings it back, to once, which sends what is owed and settles it
        (``settle``), where taking it for a duplicate would delete the only copy that can.
        Under the claim's hold (``_HELD``)."""
        update = "SET #expiry = :until, #data = :data REMOVE #in_progress_expiry"
        values: dict[str, Any] = {
            ":until": {"N": str(until_s)},
            ":data": {"S": self.response or result},
            ":me": {"S": me},
            ":inprogress": {"S": INPROGRESS},
        }
        if self.validation:
            update = update.replace("REMOVE", ", #validation = :validation REMOVE")
            values[":validation"] = {"S": self.validation}
        return {
            "TableName": self.bridge.table_name,
            "Key": self.key(),
            "UpdateExpression": update,
            "ConditionExpression": _HELD,
            "ExpressionAttributeNames": self._names(update + " " + _HELD),
            "ExpressionAttributeValues": values,
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        }

    def completed(self, *, result: str, now: float) -> dict[str, Any]:
        """A ``Put`` of the record COMPLETED with the result (``response``, else once's
        stored one), under the claim's condition (``claim``): ``effects="staged"``'s one
        write, with no INPROGRESS before it."""
        item = self._item(COMPLETED, int(now) + self.bridge.expires_after_seconds)
        item[self.bridge.data_attr] = {"S": self.response or result}
        return self._put(item, now)

    def held(self, *, me: str, result: str, now: float, until_s: int) -> dict[str, Any]:
        """``effects="staged"``'s one write when the operation has an outbox: the record
        INPROGRESS under once until it is sent, as ``hold`` leaves it."""
        item = self._item(INPROGRESS, until_s)
        item[self.bridge.data_attr] = {"S": self.response or result}
        item[ONCE_OWNER_ATTR] = {"S": me}
        return self._put(item, now)

    def _put(self, item: dict[str, Any], now: float) -> dict[str, Any]:
        """A ``PutItem`` (or a transaction's ``Put``) of ``item`` where Powertools' own claim
        would go, or over a record once holds (``_CLAIMABLE``)."""
        return {
            "TableName": self.bridge.table_name,
            "Item": item,
            "ConditionExpression": _CLAIMABLE,
            "ExpressionAttributeNames": self._names(_CLAIMABLE),
            "ExpressionAttributeValues": _free_values(now),
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        }

    def read(self) -> dict[str, Any]:
        """A strongly consistent ``GetItem`` of the record."""
        return {"TableName": self.bridge.table_name, "Key": self.key(), "ConsistentRead": True}

    def state(self, item: Mapping[str, Any] | None, *, now: float) -> PowertoolsState:
        """What the item says, in the terms ``protocol.judge_powertools`` reads."""
        b = self.bridge
        if not item:
            return PowertoolsState(None, expired=True, lease_ended=True, same_payload=True)

        def number(name: str) -> int | None:
            value = item.get(name)
            return int(value["N"]) if value and "N" in value else None

        status = (item.get(b.status_attr) or {}).get("S")
        expiry = number(b.expiry_attr)
        in_progress = number(b.in_progress_expiry_attr)
        stored_validation = (item.get(b.validation_key_attr) or {}).get("S")
        return PowertoolsState(
            status,
            # Powertools' DataRecord.is_expired: a set expiry before now.
            expired=bool(expiry) and int(now) > (expiry or 0),
            lease_ended=in_progress is not None and in_progress < int(now * 1000),
            # _validate_payload: compared only when the team's config validates.
            same_payload=not self.bridge.payload_validation_jmespath
            or stored_validation == self.validation,
            once_holds=ONCE_OWNER_ATTR in item,
            holder=(item.get(ONCE_OWNER_ATTR) or {}).get("S"),
            lease_expires_ms=in_progress,
            data=(item.get(b.data_attr) or {}).get("S"),
            expires_at=expiry,
        )

    def as_record(self, state: PowertoolsState, *, fence: int) -> Record:
        """A Powertools record that refused a copy, in once's terms (its response as the
        result; its in-progress expiry as the lease): what ``Rejected`` carries."""
        done = state.status == COMPLETED
        return Record(
            id=self.idempotency_key,
            status=c.STATUS_COMPLETED if done else c.STATUS_IN_PROGRESS,
            fence=fence,
            lease_expires_at=None if done else state.lease_expires_ms,
            expires_at=state.expires_at,
            result=state.data,
        )


#: Powertools' ``_put_record`` condition: the record is absent, expired, or INPROGRESS past
#: its in-progress expiry.
_FREE = (
    "attribute_not_exists(#id) OR #expiry < :now OR "
    "(#status = :inprogress AND attribute_exists(#in_progress_expiry) "
    "AND #in_progress_expiry < :now_in_millis)"
)


#: The bridge's claim: where Powertools would put its own, or over a record once holds
#: INPROGRESS (once's own record, claimed first, decides who holds it).
_CLAIMABLE = _FREE + " OR (#status = :inprogress AND attribute_exists(#once_owner))"
#: The bridge's commit: the record is still INPROGRESS under this claim.
_HELD = "#once_owner = :me AND #status = :inprogress"
#: The bridge's settling of a record held while its outbox was owed: still INPROGRESS under
#: once (whichever claim of once's committed it).
_HELD_BY_ONCE = "attribute_exists(#once_owner) AND #status = :inprogress"


def _free_values(now: float) -> dict[str, Any]:
    return {
        ":now": {"N": str(int(now))},
        ":now_in_millis": {"N": str(int(now * 1000))},
        ":inprogress": {"S": INPROGRESS},
    }


@dataclass(frozen=True)
class PowertoolsState:
    """A Powertools record as read (None status: absent)."""

    status: str | None
    expired: bool
    lease_ended: bool
    same_payload: bool
    once_holds: bool = False
    #: The owner of once's claim that holds it, where once holds it.
    holder: str | None = None
    lease_expires_ms: int | None = None
    data: str | None = None
    expires_at: int | None = None
