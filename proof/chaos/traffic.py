"""The harness's seeded workload: payments and the duplicate, mismatched and poison messages
around them, each send tagged with a harness id so its fate can be traced to the end.

The same seed gives the same sends in the same order for every consumer under test.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from typing import Any

#: Message attribute that carries the harness id; quarantine and redrive keep it.
HID = "harness_id"


def harness_id(message: dict[str, Any]) -> str | None:
    """The harness id an SQS message (as ReceiveMessage gives it) carries, if any."""
    value: str | None = (message.get("MessageAttributes") or {}).get(HID, {}).get("StringValue")
    return value


@dataclass(frozen=True)
class Send:
    """One SendMessage: its harness id, body, kind, the wave it goes out in, and its
    account (the message group on a FIFO queue)."""

    hid: str
    body: str
    kind: str  # payment, retry, concurrent, in_batch, sequential, mismatch, poison, reuse
    key: str
    wave: int  # 0: the first half, 1: after the mid-run redrive, 2: reuse (``add_reuse``)
    group: str


@dataclass
class Workload:
    sends: list[Send] = field(default_factory=list)
    payments: dict[str, dict[str, Any]] = field(default_factory=dict)

    def in_send_order(self) -> list[Send]:
        """The sends in the order the harness sends them: the first wave, then the second."""
        return sorted(self.sends, key=lambda send: send.wave)

    def groups(self) -> dict[str, list[str]]:
        """Each account's business keys, in the order their first message is sent."""
        out: dict[str, list[str]] = {}
        seen: set[str] = set()
        for send in self.in_send_order():
            if send.key not in seen:
                seen.add(send.key)
                out.setdefault(send.group, []).append(send.key)
        return out

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for send in self.sends:
            out[send.kind] = out.get(send.kind, 0) + 1
        return out


def build(messages: int, seed: int) -> Workload:
    """About ``messages`` sends: payments, then duplicates of every kind around them."""
    rng = random.Random(seed)
    work = Workload()
    accounts = [f"acct-{i:02d}" for i in range(12)]
    counter = iter(range(10**9))

    def add(body: dict[str, Any], kind: str, key: str, wave: int) -> None:
        hid = f"h{next(counter):06d}"
        work.sends.append(Send(hid, json.dumps(body), kind, key, wave, body["account"]))

    payment_no = 0
    while len(work.sends) < messages:
        payment_no += 1
        key = f"pay-{seed}-{payment_no:05d}"
        wave = 0 if len(work.sends) < messages // 2 else 1
        poison = rng.random() < 0.02
        body: dict[str, Any] = {
            "paymentId": key,
            "account": rng.choice(accounts),
            "amount": rng.randint(1, 50_000),
        }
        if poison:
            body["poison"] = True
            add(body, "poison", key, wave)
            continue
        work.payments[key] = body
        add(body, "payment", key, wave)
        roll = rng.random()
        if roll < 0.10:
            add(body, "retry", key, wave)
        elif roll < 0.18:
            for _ in range(rng.randint(2, 3)):
                add(body, "concurrent", key, wave)
        elif roll < 0.26:
            add(body, "in_batch", key, wave)
        elif roll < 0.34:
            add(body, "sequential", key, 1)
        if rng.random() < 0.04:
            add({**body, "amount": body["amount"] + 1}, "mismatch", key, wave)
    return work


#: The wave of the sends that use a payment id again past its record's retention.
REUSE_WAVE = 2


def add_reuse(work: Workload, share: float) -> list[str]:
    """Use about ``share`` of the first wave's payment ids again, each in a send of its own in
    a third wave (``REUSE_WAVE``, kind ``reuse``), which the harness sends once it let their
    records' retention pass (``harness._expire_for_reuse``): a new operation on an old key. Every
    other one carries the first operation's body exactly, the rest another amount. Only
    payments whose id nothing else of the workload sends after the first wave, and that are
    neither poison nor mismatched, so that each id's record is written in the first wave
    only. Returns the ids, in send order; deterministic for a workload."""
    later = {s.key for s in work.sends if s.wave > 0 or s.kind in ("mismatch", "poison")}
    eligible = [
        s.key for s in work.sends if s.kind == "payment" and s.wave == 0 and s.key not in later
    ]
    step = max(1, round(1 / share)) if share > 0 else 0
    chosen = eligible[::step] if step else []
    counter = len(work.sends)
    for n, key in enumerate(chosen):
        body = dict(work.payments[key])
        if n % 2:
            body["amount"] += 7
        hid = f"h{counter + n:06d}"
        work.sends.append(Send(hid, json.dumps(body), "reuse", key, REUSE_WAVE, body["account"]))
    return chosen
