"""The two-hop workload of ``once-atomic``, ``once-staged`` and ``powertools-two-hop``: a
payment credits the ledger and announces itself on a notifications queue (hop 1); a second
consumer of that queue applies the notification's own effect (hop 2).

Every effect is *counted*, with no business guard, so that whatever a consumer applies twice
shows as a count of 2 rather than being refused downstream:

- hop 1, the credit: ``payment#<id>`` gets ``account``, ``amount`` and ``ADD applied 1``, and
  ``account#<account>`` gets ``ADD balance <amount>``; then the notification
  ``{"paymentId", "account", "amount", "status": "credited"}`` goes to the notifications queue;
- hop 2, the notification's effect: ``notified#<id>`` gets ``ADD count 1``.

``once-atomic`` stages the two ledger writes with ``attempt.write`` and the notification with
``attempt.send`` (once commits the writes with the record in one transaction, then sends);
its hop 2 is a once consumer keyed on the outbox identity, ``key=SOURCE_KEY``
(``once.source#once.seq``), never on the body. ``once-staged`` is the same business code
built with ``effects="staged"`` (both hops): it runs first, with no claim, and one
``TransactWriteItems`` commits its writes with the record's completion, under the claim's
condition; a copy whose commit is refused is a duplicate, and its writes never land.
``powertools-two-hop`` is the same workload written the documented way: the writes (one
transaction of their own) and the send inside the idempotent function, hop 2 a Powertools
consumer keyed on the body's ``paymentId`` (Powertools has no identity of an outbound
message to key on).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from once import constants as c
from oncecli.aws import scan
from proof.chaos.fenced import ACCOUNT_PREFIX, ENTRY_PREFIX

#: The consumers that run this workload; once's are held to its invariants.
IMPLEMENTATIONS = ("once-atomic", "once-staged", "powertools-two-hop")
#: once's consumers of this workload (the business code of ``once_hop1`` and ``once_hop2``),
#: and the ``effects`` each builds it with.
ONCE_EFFECTS = {"once-atomic": "any", "once-staged": "staged"}
#: Hop 2's record key prefix (its service name) in the shared idempotency table.
NOTIFY_PREFIX = "notifications"
#: The ledger item of a notification's hop-2 effect: ``notified#<paymentId>``.
NOTIFIED_PREFIX = "notified#"
STATUS_CREDITED = "credited"

History = Any  # probe.History (not imported: this module is read by the harness as well)


def _names(*names: str) -> dict[str, str]:
    return {f"#{n}": n for n in names}


def credit_writes(ledger: str, body: dict[str, Any]) -> list[dict[str, Any]]:
    """The credit's two TransactWriteItems elements: the counted entry, the balance."""
    payment_id, account, amount = body["paymentId"], body["account"], body["amount"]
    return [
        {
            "Update": {
                "TableName": ledger,
                "Key": {c.PARTITION_KEY: {"S": ENTRY_PREFIX + payment_id}},
                "UpdateExpression": "SET #account = :account, #amount = :amount ADD #applied :one",
                "ExpressionAttributeNames": _names("account", "amount", "applied"),
                "ExpressionAttributeValues": {
                    ":account": {"S": account},
                    ":amount": {"N": str(amount)},
                    ":one": {"N": "1"},
                },
            }
        },
        {
            "Update": {
                "TableName": ledger,
                "Key": {c.PARTITION_KEY: {"S": ACCOUNT_PREFIX + account}},
                "UpdateExpression": "ADD #balance :amount",
                "ExpressionAttributeNames": _names("balance"),
                "ExpressionAttributeValues": {":amount": {"N": str(amount)}},
            }
        },
    ]


def notified_write(ledger: str, payment_id: str, source: str) -> dict[str, Any]:
    """Hop 2's effect, one element: count the notification of ``payment_id``."""
    return {
        "Update": {
            "TableName": ledger,
            "Key": {c.PARTITION_KEY: {"S": NOTIFIED_PREFIX + payment_id}},
            "UpdateExpression": "SET #source = :source ADD #count :one",
            "ExpressionAttributeNames": _names("source", "count"),
            "ExpressionAttributeValues": {":source": {"S": source}, ":one": {"N": "1"}},
        }
    }


def notification(body: dict[str, Any]) -> dict[str, Any]:
    return {
        "paymentId": body["paymentId"],
        "account": body["account"],
        "amount": body["amount"],
        "status": STATUS_CREDITED,
    }


def notification_id(message: dict[str, Any]) -> str | None:
    """The payment a notification (an SQS message as ReceiveMessage gives it) announces."""
    try:
        found = json.loads(message.get("Body") or "").get("paymentId")
    except (ValueError, AttributeError):
        return None
    return found if isinstance(found, str) else None


def _observed(history: History, body: dict[str, Any], attempt: Any) -> None:
    digest = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()
    history.add("exec", key=str(body.get("paymentId")), hash=digest, message=attempt.message_id)
    if body.get("poison"):
        raise RuntimeError("poison payment: this account cannot be credited")


def once_hop1(history: History, ledger: str, notify_url: str) -> Callable[[Any, Any], Any]:
    """once's hop 1 (``once-atomic``, ``once-staged``): stages the credit and the
    notification; writes nothing (``attempt.fence`` is None under ``effects="staged"``)."""

    def process(body: dict[str, Any], attempt: Any) -> Any:
        _observed(history, body, attempt)
        for element in credit_writes(ledger, body):
            attempt.write(element)
        attempt.send(notify_url, notification(body))
        return {"paymentId": body["paymentId"], "fence": attempt.fence}

    return process


def once_hop2(history: History, ledger: str) -> Callable[[Any, Any], Any]:
    """once's hop 2 (``key=SOURCE_KEY``): stages the notification's effect."""

    def process(body: dict[str, Any], attempt: Any) -> Any:
        history.add("exec2", key=body["paymentId"], source=attempt.key)
        attempt.write(notified_write(ledger, body["paymentId"], attempt.key))
        return {"notified": body["paymentId"]}

    return process


def powertools_hop1(
    history: History, ledger: str, notify_url: str, ddb: Any, sqs: Any
) -> Callable[[Any, Any], Any]:
    """``powertools-two-hop``'s hop 1, the documented way: the writes and the send inside
    the idempotent function."""

    def process(body: dict[str, Any], attempt: Any) -> Any:
        _observed(history, body, attempt)
        ddb.transact_write_items(TransactItems=credit_writes(ledger, body))
        sqs.send_message(QueueUrl=notify_url, MessageBody=json.dumps(notification(body)))
        return {"paymentId": body["paymentId"]}

    return process


def powertools_hop2(history: History, ledger: str, ddb: Any) -> Callable[[Any, Any], Any]:
    """``powertools-two-hop``'s hop 2, keyed on the body's ``paymentId``."""

    def process(body: dict[str, Any], attempt: Any) -> Any:
        history.add("exec2", key=body["paymentId"], source=attempt.key)
        ddb.update_item(**notified_write(ledger, body["paymentId"], attempt.key)["Update"])
        return {"notified": body["paymentId"]}

    return process


@dataclass
class TwoHopState:
    """What a two-hop run left behind, beside ``invariants.FinalState``."""

    #: paymentId -> (account, amount, applied) of every ledger entry
    entries: dict[str, tuple[str, int, int]] = field(default_factory=dict)
    #: account -> balance
    balances: dict[str, int] = field(default_factory=dict)
    #: paymentId -> how many times hop 2 applied its notification
    notified: dict[str, int] = field(default_factory=dict)
    #: hop 1's record status per paymentId (None: the records are not once's)
    records: dict[str, str] | None = None
    #: ids of the records that still owe an outbox
    owed: list[str] = field(default_factory=list)
    #: paymentIds of the notifications in hop 2's DLQ at the end
    notify_dlq: set[str] = field(default_factory=set)
    #: notifications still in the notifications queue at the end that hop 2 never applied
    #: (``harness._left_unapplied``)
    notify_left: int = 0
    #: paymentIds whose payment message is in hop 1's DLQ at the end, parked for a person:
    #: a record that still owes its notification then owes it by design (the runbook's
    #: redrive sends it), and is no violation
    parked: set[str] = field(default_factory=set)
    #: hop 1's prefix in the idempotency table (records ``<prefix>#<paymentId>``)
    hop1_prefix: str | None = None
    #: once's records (both hops) by status, at the end (empty: the records are not once's)
    statuses: dict[str, int] = field(default_factory=dict)

    def owing_payments(self) -> set[str]:
        """The paymentIds of hop 1's records that still owe their outbox."""
        prefix = f"{self.hop1_prefix}#"
        return {r.removeprefix(prefix) for r in self.owed if r.startswith(prefix)}


def read_state(ddb: Any, ledger: str, idempotency: str, hop1_prefix: str | None) -> TwoHopState:
    """The ledger's entries, balances and notification counts; and, for once's records
    (``hop1_prefix``, its key prefix), each payment's record status and what is owed."""
    state = TwoHopState(hop1_prefix=hop1_prefix)
    for item in scan(ddb, ledger):
        key = item[c.PARTITION_KEY]["S"]
        if key.startswith(ENTRY_PREFIX):
            state.entries[key.removeprefix(ENTRY_PREFIX)] = (
                item["account"]["S"],
                int(item["amount"]["N"]),
                int(item.get("applied", {"N": "0"})["N"]),
            )
        elif key.startswith(ACCOUNT_PREFIX):
            state.balances[key.removeprefix(ACCOUNT_PREFIX)] = int(item["balance"]["N"])
        elif key.startswith(NOTIFIED_PREFIX):
            state.notified[key.removeprefix(NOTIFIED_PREFIX)] = int(item["count"]["N"])
    if hop1_prefix is not None:
        state.records = {}
        for item in scan(ddb, idempotency):
            record = item[c.ATTR_ID]["S"]
            status = item[c.ATTR_STATUS]["S"]
            state.statuses[status] = state.statuses.get(status, 0) + 1
            if c.ATTR_OUTBOX in item:
                state.owed.append(record)
            if record.startswith(hop1_prefix + "#"):
                state.records[record.removeprefix(hop1_prefix + "#")] = item[c.ATTR_STATUS]["S"]
    return state
