"""The demo's workload: payments with every kind of trouble SQS and producers cause.

Why these kinds: each one exercises a row of the design's decision table.

- ``payment``: a new payment (PROCESSED);
- ``retry``: a producer retry, same payment and a new message id, sent a little later, or
  after the payment is done (DUPLICATE);
- ``concurrent``: a copy sent one batch behind the original, so that two workers run the
  payment at once (the example runs with ``effects="staged"``: both run ``credit``, one
  commit lands and the other copy is a DUPLICATE; under the two-phase mode the second claim
  is BUSY, then a DUPLICATE after the visibility timeout);
- ``in_batch``: a copy in the same SendMessageBatch call, so usually in the same Lambda batch
  (follows its leader, no write);
- ``malformed``: a body that is not JSON (quarantined to the DLQ at once);
- ``mismatch``: a known payment id with another amount, sent once the original is done
  (CONFLICT, quarantined);
- ``poison``: a valid payment to an account whose name is 2100 characters long. The ledger
  key ``account#<name>`` is over DynamoDB's 2048-byte partition key limit, so the ledger
  write is refused every time (ValidationException, which the business code does not turn
  into a PermanentError): a transient failure on every receive, until SQS moves the message
  to the DLQ after maxReceiveCount.
"""

from __future__ import annotations

import json
import random
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from once import constants as c
from oncecli.aws import record_id

#: An account name that makes the ledger's partition key longer than DynamoDB allows.
POISON_ACCOUNT = "acct-" + "9" * 2095
ACCOUNTS = 12
#: How far behind its original a concurrent copy is sent (a little over one batch).
CONCURRENT_GAP = 12


@dataclass(frozen=True)
class Message:
    kind: str
    body: str
    payment_id: str | None = None


@dataclass
class Workload:
    """Send groups (each one SendMessageBatch), the late messages, and what should happen."""

    groups: list[list[Message]]
    late: list[Message]
    #: paymentId -> (account, amount) of every valid distinct payment: the expected ledger.
    payments: dict[str, tuple[str, int]]
    kinds: Counter[str] = field(default_factory=Counter)

    @property
    def size(self) -> int:
        return sum(len(g) for g in self.groups) + len(self.late)


def _body(payment_id: str, account: str, amount: int) -> str:
    return json.dumps({"paymentId": payment_id, "account": account, "amount": amount})


def build(messages: int, duplicate_rate: float, bad_rate: float, seed: int = 7) -> Workload:
    """A reproducible workload of exactly ``messages`` messages."""
    rng = random.Random(seed)
    n_bad = round(messages * bad_rate)
    n_dup = round(messages * duplicate_rate)
    n_unique = messages - n_bad - n_dup
    if n_unique < 1 or min(duplicate_rate, bad_rate) < 0:
        raise ValueError("rates must be >= 0 and leave at least one new payment")
    n_poison = max(1, n_bad // 4) if n_bad else 0
    n_mismatch = min((n_bad - n_poison) // 2, n_unique)
    n_malformed = n_bad - n_poison - n_mismatch
    n_in_batch = n_dup // 3
    n_concurrent = n_dup // 3
    n_retry = n_dup - n_in_batch - n_concurrent

    payments: dict[str, tuple[str, int]] = {}
    units: list[list[Message]] = []
    for n in range(n_unique):
        pid = f"pay-{n:05d}"
        account = f"acct-{rng.randrange(ACCOUNTS):02d}"
        payments[pid] = (account, rng.randrange(100, 100_000))
        units.append([Message("payment", _body(pid, *payments[pid]), pid)])
    ids = list(payments)

    def copy(pid: str, kind: str) -> Message:
        return Message(kind, _body(pid, *payments[pid]), pid)

    for pid in rng.sample(ids, min(n_in_batch, len(ids))):
        units[ids.index(pid)].append(copy(pid, "in_batch"))
    late: list[Message] = []
    inserts: list[tuple[int, Message]] = []
    for pid in rng.choices(ids, k=n_concurrent):
        inserts.append((ids.index(pid) + CONCURRENT_GAP, copy(pid, "concurrent")))
    for i, pid in enumerate(rng.choices(ids, k=n_retry)):
        if i % 2:
            late.append(copy(pid, "retry"))
        else:
            inserts.append((ids.index(pid) + rng.randrange(30, 90), copy(pid, "retry")))
    for n in range(n_malformed):
        inserts.append((rng.randrange(len(units) + 1), Message("malformed", f"{{not json {n}")))
    for n in range(n_poison):
        pid = f"poison-{n:03d}"
        body = _body(pid, POISON_ACCOUNT, rng.randrange(100, 100_000))
        inserts.append((rng.randrange(len(units) + 1), Message("poison", body, pid)))
    for pid in rng.sample(ids, n_mismatch):
        account, amount = payments[pid]
        late.append(Message("mismatch", _body(pid, account, amount + 1), pid))
    for position, message in sorted(inserts, key=lambda x: x[0], reverse=True):
        units.insert(min(position, len(units)), [message])
    groups: list[list[Message]] = [[]]
    for unit in units:
        if len(groups[-1]) + len(unit) > 10:
            groups.append([])
        groups[-1].extend(unit)
    kinds: Counter[str] = Counter(m.kind for g in groups for m in g)
    kinds.update(m.kind for m in late)
    return Workload(groups, late, payments, kinds)


#: SQS's limit on a MessageGroupId.
MAX_GROUP_ID = 128


def message_group(message: Message) -> str:
    """The FIFO message group of a message: its payment's account, so that each account's
    payments apply in the order sent; the kind for a body without a usable account."""
    try:
        account = json.loads(message.body).get("account")
    except (ValueError, AttributeError):
        account = None
    if isinstance(account, str) and 0 < len(account) <= MAX_GROUP_ID:
        return account
    return message.kind


class Producer:
    """Sends a workload and remembers every message id it got back, in the order sent.

    On a FIFO queue each message goes to its account's group (``message_group``), with a
    deduplication id of its own: SQS must not drop the duplicates once has to recognize.
    """

    def __init__(self, sqs: Any, queue_url: str, *, fifo: bool = False) -> None:
        self._sqs = sqs
        self._url = queue_url
        self._fifo = fifo
        self.sent: dict[str, Message] = {}

    def _entry(self, n: int, message: Message) -> dict[str, Any]:
        entry: dict[str, Any] = {"Id": str(n), "MessageBody": message.body}
        if self._fifo:
            entry["MessageGroupId"] = message_group(message)
            entry["MessageDeduplicationId"] = uuid.uuid4().hex
        return entry

    def send_group(self, group: list[Message]) -> None:
        """One SendMessageBatch call; entries SQS refused are sent again (a producer retry
        with a new message id is exactly what the consumer must survive)."""
        pending = dict(enumerate(group))
        while pending:
            response = self._sqs.send_message_batch(
                QueueUrl=self._url,
                Entries=[self._entry(i, m) for i, m in pending.items()],
            )
            for ok in response.get("Successful", []):
                self.sent[ok["MessageId"]] = pending.pop(int(ok["Id"]))
            if response.get("Failed"):
                time.sleep(0.1)

    def send_late(
        self, messages: list[Message], is_done: Callable[[str], bool], timeout_s: float
    ) -> None:
        """Send each late message once its payment is done (or the wait timed out)."""
        deadline = time.monotonic() + timeout_s
        waiting = list(messages)
        while waiting:
            ready = [
                m
                for m in waiting
                if time.monotonic() > deadline or m.payment_id is None or is_done(m.payment_id)
            ]
            for start in range(0, len(ready), 10):
                self.send_group(ready[start : start + 10])
            waiting = [m for m in waiting if m not in ready]
            if waiting:
                time.sleep(0.2)


def completed_check(ddb: Any, table: str, prefix: str) -> Callable[[str], bool]:
    """A function telling whether a payment's idempotency record is COMPLETED."""

    def is_done(payment_id: str) -> bool:
        item = ddb.get_item(
            TableName=table,
            ConsistentRead=True,
            Key={c.ATTR_ID: {"S": record_id(prefix, payment_id)}},
        ).get("Item")
        return bool(item) and item[c.ATTR_STATUS]["S"] == c.STATUS_COMPLETED

    return is_done
