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
(``once.source#once.seq``), never on the body. ``once-atomic-sns`` is the same chain with an
SNS hop: hop 1's outbox publishes to a topic, and hop 2's queue is subscribed to it with raw
message delivery off (SNS's default and CDK's ``SqsSubscription``'s), so each SQS body is
SNS's notification document, ``once.source`` and ``once.seq`` in its ``MessageAttributes`` and
a ``MessageId``, ``Timestamp`` and ``Signature`` of SNS's own on every publish (a resend of
one outbox message included); hop 2 is keyed on ``SOURCE_KEY`` with no ``envelope=``, and its
business code reads the notification from the document's ``Message``. ``once-atomic-events`` is
the same chain through EventBridge: hop 1's outbox puts the notification on a custom bus as an
event's detail (``attempt.send(bus_arn, ..., source=, detail_type=)``: ``PutEvents``), with a
second event no rule matches (``AUDITED``: the others of a request whose entry fails); a rule
on the bus targets hop 2's queue with the whole event (no ``InputPath``), so each SQS body is
an event, once's identity in its ``detail.once`` and an ``id`` and ``time`` of EventBridge's
own on every ``PutEvents``; hop 2 is keyed on ``SOURCE_KEY`` and reads the notification from
the event's ``detail``. ``once-staged`` is the
same business code built with ``effects="staged"`` (both hops): it runs first, with no claim,
and one ``TransactWriteItems`` commits its writes with the record's completion, under the
claim's condition; a copy whose commit is refused is a duplicate, and its writes never land.
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
from once import sendrules
from oncecli.aws import scan
from proof.chaos.fenced import ACCOUNT_PREFIX, ENTRY_PREFIX

#: The consumers that run this workload; once's are held to its invariants.
IMPLEMENTATIONS = (
    "once-atomic",
    "once-staged",
    "once-atomic-sns",
    "once-atomic-events",
    "powertools-two-hop",
)
#: once's consumers of this workload (the business code of ``once_hop1`` and ``once_hop2``),
#: and the ``effects`` each builds it with.
ONCE_EFFECTS = {
    "once-atomic": "any",
    "once-staged": "staged",
    "once-atomic-sns": "any",
    "once-atomic-events": "any",
}
#: The consumers whose hop 1 publishes to an SNS topic that feeds hop 2's queue, raw message
#: delivery off (the others send to hop 2's queue).
SNS_IMPLEMENTATIONS = ("once-atomic-sns",)
#: The consumers whose hop 1 puts events on an EventBridge bus, a rule of which targets hop
#: 2's queue with the whole event.
EVENTS_IMPLEMENTATIONS = ("once-atomic-events",)
#: The events' ``Source``, and the ``DetailType`` of the notification (the rule matches both)
#: and of the event no rule matches (``once_hop1``).
EVENT_SOURCE = "once.chaos.payments"
CREDITED = "payment.credited"
AUDITED = "payment.audited"
#: Hop 2's record key prefix (its service name) in the shared idempotency table.
NOTIFY_PREFIX = "notifications"
#: The ledger item of a notification's hop-2 effect: ``notified#<paymentId>``.
NOTIFIED_PREFIX = "notified#"
STATUS_CREDITED = "credited"

History = Any  # probe.History (not imported: this module is read by the harness as well)


def _names(*names: str) -> dict[str, str]:
    return {f"#{n}": n for n in names}


def credit_writes(ledger: str, body: dict[str, Any]) -> list[dict[str, Any]]:
    """The credit's two TransactWriteItems elements: the counted entry, the balance. The
    entry adds each credit's amount to its ``total`` as well: a payment id used again for a
    new operation after its record's retention (another amount, maybe) is credited again,
    and its account's balance is then the sum of the totals."""
    payment_id, account, amount = body["paymentId"], body["account"], body["amount"]
    return [
        {
            "Update": {
                "TableName": ledger,
                "Key": {c.PARTITION_KEY: {"S": ENTRY_PREFIX + payment_id}},
                "UpdateExpression": (
                    "SET #account = :account, #amount = :amount ADD #applied :one, #total :amount"
                ),
                "ExpressionAttributeNames": _names("account", "amount", "applied", "total"),
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


def notification_of(body: Any) -> Any:
    """The notification an SQS body holds: the body itself; where SNS delivered it with raw
    message delivery off, the ``Message`` of SNS's notification document; where a rule's SQS
    target delivered an EventBridge event whole, its ``detail`` (which holds once's identity,
    ``once``, beside the notification's members)."""
    if isinstance(body, dict) and body.get("Type") == "Notification" and "Message" in body:
        return json.loads(body["Message"])
    if isinstance(body, dict) and isinstance(body.get("detail"), dict) and "detail-type" in body:
        return body["detail"]
    return body


def notification_id(message: dict[str, Any]) -> str | None:
    """The payment a notification (an SQS message as ReceiveMessage gives it) announces."""
    try:
        found = notification_of(json.loads(message.get("Body") or "")).get("paymentId")
    except (ValueError, AttributeError, TypeError):
        return None
    return found if isinstance(found, str) else None


def _observed(history: History, body: dict[str, Any], attempt: Any) -> None:
    digest = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()
    history.add("exec", key=str(body.get("paymentId")), hash=digest, message=attempt.message_id)
    if body.get("poison"):
        raise RuntimeError("poison payment: this account cannot be credited")


def once_hop1(history: History, ledger: str, destination: str) -> Callable[[Any, Any], Any]:
    """once's hop 1 (``once-atomic``, ``once-staged``, ``once-atomic-sns``,
    ``once-atomic-events``): stages the credit and the notification to ``destination`` (hop
    2's queue, or the topic or the bus that feeds it); writes nothing (``attempt.fence`` is
    None under ``effects="staged"``). To a bus, the notification is an event's detail, and a
    second event follows it in the same ``PutEvents`` (``AUDITED``, which no rule matches), so
    that an entry refused while the others are sent is a fault the run can meet."""
    to_bus = sendrules.is_event_bus(destination)

    def process(body: dict[str, Any], attempt: Any) -> Any:
        _observed(history, body, attempt)
        for element in credit_writes(ledger, body):
            attempt.write(element)
        if to_bus:
            announced = notification(body)
            attempt.send(destination, announced, source=EVENT_SOURCE, detail_type=CREDITED)
            attempt.send(destination, announced, source=EVENT_SOURCE, detail_type=AUDITED)
        else:
            attempt.send(destination, notification(body))
        return {"paymentId": body["paymentId"], "fence": attempt.fence}

    return process


def once_hop2(history: History, ledger: str) -> Callable[[Any, Any], Any]:
    """once's hop 2 (``key=SOURCE_KEY``, no ``envelope=``): stages the notification's effect.
    Behind SNS (raw delivery off) the body is SNS's document: the notification is its
    ``Message``; behind EventBridge the body is the event: the notification is its
    ``detail``."""

    def process(body: dict[str, Any], attempt: Any) -> Any:
        payment_id = notification_of(body)["paymentId"]
        history.add("exec2", key=payment_id, source=attempt.key)
        attempt.write(notified_write(ledger, payment_id, attempt.key))
        return {"notified": payment_id}

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
    #: paymentId -> the sum of the amounts of its entry's credits (absent: amount x applied)
    totals: dict[str, int] = field(default_factory=dict)
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
    #: how many notifications of each paymentId hop 2's DLQ held at the end (absent: one for
    #: each paymentId of ``notify_dlq``), moved there by SQS after failed deliveries: they
    #: wait for a person
    notify_dlq_counts: dict[str, int] = field(default_factory=dict)
    #: how many of each paymentId hop 2 quarantined itself (``once.reason``: a CONFLICT, a
    #: body it cannot read): never due, so never waiting (not in ``notify_dlq``)
    notify_quarantined: dict[str, int] = field(default_factory=dict)
    #: paymentId -> operations whose hop-1 record expired while it still owed its outbox:
    #: swept by the harness's TTL sweep, or replaced by a claim past its retention (once's
    #: claim removes the outbox). That operation's notification is never sent, and no one
    #: owes it: the retention was shorter than the payment message's stay away (in hop 1's
    #: DLQ, or retried past it), which once's retention rule forbids (a record kept source +
    #: DLQ retention + 1 day) and a short ``--retention-s`` makes
    expired_owing: dict[str, int] = field(default_factory=dict)
    #: paymentIds whose hop-1 record expired at least once in the run (swept, or replaced by
    #: a claim past its retention): a new operation on the key may have followed
    expired: set[str] = field(default_factory=set)
    #: paymentId -> how many times the harness let its hop-1 record's retention pass (the
    #: reuse wave's ids, ``harness._expire_for_reuse``): each allows one more credit
    harness_expired: dict[str, int] = field(default_factory=dict)
    #: paymentIds sent again past their hop-1 record's retention (the workload's ``reuse``
    #: sends, made once the harness let that record's retention pass), and those whose resend
    #: was acknowledged
    reused: set[str] = field(default_factory=set)
    reuse_acked: set[str] = field(default_factory=set)
    #: hop 2's deliveries judged CONFLICT (once's outcomes, from the invocations that returned)
    notify_conflicts: int = 0
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

    def total(self, payment_id: str) -> int:
        """What the payment's credits added to its account's balance, all operations."""
        _, amount, applied = self.entries[payment_id]
        return self.totals.get(payment_id, amount * applied)

    def in_notify_dlq(self, payment_id: str) -> int:
        """How many notifications of the payment hop 2's DLQ held at the end."""
        found = self.notify_dlq_counts.get(payment_id)
        return found if found is not None else int(payment_id in self.notify_dlq)

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
            payment_id = key.removeprefix(ENTRY_PREFIX)
            state.entries[payment_id] = (
                item["account"]["S"],
                int(item["amount"]["N"]),
                int(item.get("applied", {"N": "0"})["N"]),
            )
            if "total" in item:
                state.totals[payment_id] = int(item["total"]["N"])
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
