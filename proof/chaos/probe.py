"""The probe inside each harness worker: records the history and fires the process faults.

It hooks every DynamoDB client the process will create (botocore's built-in handler list,
so the consumers under test run unchanged) and classifies each successful write on the
idempotency table as a claim or a finalize, for all three consumers alike:

- a claim is a ``PutItem``, or an ``UpdateItem`` that adds to the fence and writes a lease;
- a finalize is any other ``UpdateItem`` (complete, or fail when it writes FAILED) or a
  ``DeleteItem`` (the naive pattern's release);
- ``effects="staged"``'s one write (an ``UpdateItem``, or the record's element of a
  ``TransactWriteItems``, that completes the record and adds to the fence, with no lease) is
  a finalize with no claim before it: its owner is the one it writes, its fence unknown
  (None), and ``staged`` says so;
- the clear of a sent outbox (``REMOVE`` of it, no status written) is a clear, fenced by
  the completion's fence, or by its owner after a staged commit.

At the same points it kills the process (SIGKILL) after a claim, after the business effect
or before a finalize, or stops it (SIGSTOP) past its lease and lets a sleeper resume it (for
once's consumers, once the record was claimed anew);
each at its rate, and each enabled one on the run's first chance too (``faults.Dice``).
A staged commit has no claim before it: its pause comes before the commit is sent (business
code has run, the message comes back to another worker), and lasts until another copy's
commit has landed, so that the zombie surely resumes into a duplicate.

It also counts the process's DynamoDB calls by operation (``take_calls``), the figure the
staged mode is about: one write per new message instead of two.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

import botocore.handlers

from proof.chaos.faults import Dice, is_clear


class History:
    """Appends events as JSON lines; each line is one ``write``, so a SIGKILL loses none."""

    def __init__(self, path: str, worker: str) -> None:
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        self._worker = worker

    def add(self, event: str, **fields: Any) -> None:
        line = (
            json.dumps({"e": event, "worker": self._worker, "t": time.monotonic_ns(), **fields})
            + "\n"
        )
        os.write(self._fd, line.encode())


def _text(value: dict[str, str] | None) -> str | None:
    return None if value is None else value.get("S") or value.get("N")


class Probe:
    """Hooks the process's DynamoDB calls; one per worker process."""

    def __init__(
        self,
        history: History,
        table: str,
        rates: dict[str, float],
        pause_s: float,
        dice: Dice,
        skew_s: float = 0.0,
        pause_max_s: float | None = None,
    ) -> None:
        self._history = history
        self._skew_ns = int(skew_s * 1e9)
        self._wall_to_monotonic_ns = _wall_to_monotonic_ns()
        #: Called with the pause's length before the process stops itself.
        self.on_pause: Callable[[float], None] = lambda seconds: None
        self._table = table
        self._rates = rates
        self._pause_s = pause_s
        self._pause_max_s = max(pause_s, pause_max_s or pause_s)
        self._dice = dice
        self._local = threading.local()
        self._calls: dict[str, int] = {}
        self._calls_lock = threading.Lock()

    def install(self) -> None:
        botocore.handlers.BUILTIN_HANDLERS.extend(
            [
                ("before-parameter-build.dynamodb", self._before),
                ("after-call.dynamodb", self._after),
                ("after-call.dynamodb", self._count_call),
            ]
        )

    def _count_call(self, model: Any, **_: Any) -> None:
        """One DynamoDB API call answered (the SDK's own retries within it not counted)."""
        with self._calls_lock:
            self._calls[model.name] = self._calls.get(model.name, 0) + 1

    def take_calls(self) -> dict[str, int]:
        """The DynamoDB calls counted since the last take, by operation."""
        with self._calls_lock:
            taken, self._calls = self._calls, {}
        return taken

    def _roll(self, kind: str) -> bool:
        return self._dice.roll(kind, self._rates.get(kind, 0.0))

    def _fault(self, kind: str, claim: dict[str, Any] | None = None) -> None:
        """Record the fault first (the process may not get another chance), then fire it.

        A pause after a claim that names its owner (once's) lasts until another worker has
        claimed the record anew, ``pause_s`` at least and ``pause_max_s`` at most: the
        zombie then surely resumes into a takeover, so that a finalize without its fence is
        caught by construction, whatever the machine's speed. Otherwise it lasts
        ``pause_s``."""
        self._history.add("fault", kind=kind)
        if kind == "pause":
            self.on_pause(self._pause_max_s)
            if claim is not None and claim.get("owned"):
                command = [
                    sys.executable, "-c", _RESUME_AFTER_TAKEOVER, self._table, claim["item"],
                    claim["claim"], str(os.getpid()), str(self._pause_s), str(self._pause_max_s),
                    "staged" if claim.get("staged") else "claimed",
                ]  # fmt: skip
            else:
                command = ["sh", "-c", f"sleep {self._pause_s}; kill -CONT {os.getpid()}"]
            subprocess.Popen(
                command,
                start_new_session=True,
                stderr=subprocess.DEVNULL,  # the process may be gone by then: nothing to say
            )
            os.kill(os.getpid(), signal.SIGSTOP)
        else:
            os.kill(os.getpid(), signal.SIGKILL)

    def _classify(self, operation: str, params: dict[str, Any]) -> dict[str, Any] | None:
        if operation == "TransactWriteItems":
            record = self._record_element(params)
            if record is None:
                return {"kind": "effect"}  # business code's own transaction
            # once's commit (``attempt.write``): the staged writes and the record's
            # completion in one transaction, the effect and the finalize at once.
            values = record["ExpressionAttributeValues"]
            if _staged(record.get("UpdateExpression", ""), values):
                return self._staged_commit(record["Key"], values)
            return {**self._finalize(record["Key"], values), "commit": True}
        if params.get("TableName") != self._table:
            return None
        key = (params.get("Key") or params.get("Item") or {}).get("id")
        item = _text(key)
        values = params.get("ExpressionAttributeValues") or {}
        update = params.get("UpdateExpression", "")
        if operation == "UpdateItem" and is_clear(update):
            # once's clear of a sent outbox: fenced by the completion that stored it (its
            # fence; after a staged commit, its owner), by no claim's owner (any later
            # delivery may send what a record owes and clear it).
            return {
                "kind": "clear",
                "item": item,
                "fence": _text(values.get(":fence")),
                "owner": _text(values.get(":me")),
            }
        if operation == "UpdateItem" and _staged(update, values):
            return self._staged_commit(params["Key"], values)
        if operation == "PutItem":
            expiry = _text(params["Item"].get("in_progress_expiration"))
            return {
                "kind": "claim",
                "item": item,
                "lease_end": self._lease_end(expiry),
                "claim": uuid.uuid4().hex,
            }
        if operation == "UpdateItem" and "ADD" in params.get("UpdateExpression", ""):
            return {
                "kind": "claim",
                "item": item,
                "lease_end": self._lease_end(_text(values[":lease"])),
                "claim": _text(values.get(":me")),
                "owned": True,  # the record names its owner: a takeover can be seen
            }
        if operation in ("UpdateItem", "DeleteItem"):
            return self._finalize(params["Key"], values, delete=operation == "DeleteItem")
        return None

    def _record_element(self, params: dict[str, Any]) -> dict[str, Any] | None:
        """The element of a transaction that writes a record of the idempotency table."""
        for element in params.get("TransactItems", []):
            for body in element.values():
                if body.get("TableName") == self._table:
                    return dict(body)
        return None

    @staticmethod
    def _staged_commit(key: dict[str, Any], values: dict[str, Any]) -> dict[str, Any]:
        """``effects="staged"``'s one write: a completion with no claim before it. Its owner
        is the one it writes (new with every commit); its fence is not known before it
        lands (the transaction does not return it): None."""
        return {
            "kind": "finalize",
            "item": _text(key.get("id")),
            "op": "complete",
            "result": _text(values.get(":result")),
            "claim": _text(values.get(":me")),
            "fence": None,
            "commit": True,
            "staged": True,
        }

    @staticmethod
    def _finalize(
        key: dict[str, Any], values: dict[str, Any], *, delete: bool = False
    ) -> dict[str, Any]:
        failed = any(_text(v) == "FAILED" for v in values.values())
        op = "delete" if delete else "fail" if failed else "complete"
        result = _text(values.get(":result") or values.get(":response_data"))
        return {
            "kind": "finalize",
            "item": _text(key.get("id")),
            "op": op,
            "result": result,
            "claim": _text(values.get(":me")),
            "fence": _text(values.get(":fence")),
        }

    def _lease_end(self, expiry_ms: str | None) -> int | None:
        """When a lease ends (epoch ms on this worker's skewed clock), on the monotonic clock
        every process shares: exact, whenever this thread runs (no reading of "now")."""
        if not expiry_ms:
            return None
        return int(expiry_ms) * 1_000_000 - self._skew_ns + self._wall_to_monotonic_ns

    def _before(
        self, params: dict[str, Any], model: Any, context: dict[str, Any], **_: Any
    ) -> None:
        call = self._classify(model.name, params)
        if call is None:
            return
        call["sent"] = time.monotonic_ns()
        if "lease_end" in call:
            # The lease left as this request leaves (the history's ``lease_ms``).
            end = call.pop("lease_end")
            call["lease_ms"] = None if end is None else (end - call["sent"]) / 1_000_000
        context["chaos"] = call
        if call["kind"] == "finalize" and self._roll("kill_before_finalize"):
            self._fault("kill_before_finalize")
        elif call.get("staged") and self._roll("pause"):
            # Business code ran, nothing is written yet: stopped here, the process is the
            # staged mode's zombie. It resumes once another copy's commit landed.
            self._fault("pause", {**call, "owned": True})
        elif call["kind"] == "clear" and self._roll("kill_before_clear"):
            # The outbox was sent (the clear comes after every send): it is sent again.
            self._fault("kill_before_clear")
        if call["kind"] == "finalize":
            # Recorded as it leaves, not only when answered: a process killed (by another of
            # its threads, or at its function timeout) with a finalize in flight records no
            # ``finalize``, yet the write may land and release the lease, and the next claim
            # is then legitimate. ``two_live_owners`` counts a lease as held until this send.
            self._history.add(
                "finalize_sent",
                item=call["item"],
                claim=call["claim"] or getattr(self._local, "claim", None),
                sent=call["sent"],
            )

    def _after(
        self, http_response: Any, parsed: dict[str, Any], context: dict[str, Any], **_: Any
    ) -> None:
        call = context.get("chaos")
        if call is None:
            return
        if http_response.status_code >= 300 and not _own_retry(call, parsed):
            return
        kind = call.pop("kind")
        landed = time.monotonic_ns()
        if kind == "effect":
            if self._roll("kill_after_effect"):
                self._fault("kill_after_effect")
            return
        if kind == "clear":
            self._history.add("clear", landed=landed, **call)
            return
        if kind == "claim":
            self._local.claim = call["claim"]
            owned = call.pop("owned", False)
            self._history.add("claim", landed=landed, **call)
            old = parsed.get("Attributes") or {}
            if _text(old.get("status")) == "COMPLETED":
                # A claim takes a COMPLETED record only past its retention: a new operation on
                # the key. If the record still owed its outbox, once's claim removed it, and
                # that operation's messages are never sent: only a retention shorter than the
                # message's stay away makes it (the harness's short ``--retention-s``). The
                # two-hop checks take both into account.
                self._history.add(
                    "record_replaced", item=call["item"], claim=call["claim"], owing="outbox" in old
                )
            if self._roll("kill_after_claim"):
                self._fault("kill_after_claim")
            elif self._roll("pause"):
                self._fault("pause", {**call, "owned": owned})
            return
        call["claim"] = call["claim"] or getattr(self._local, "claim", None)
        commit = call.pop("commit", False)
        call.pop("owned", None)
        self._history.add("finalize", landed=landed, **call)
        if commit and self._roll("kill_after_effect"):
            # Committed: the effect and the record's completion landed; the outbox (if any)
            # is owed, and the message is not acknowledged.
            self._fault("kill_after_effect")


def _wall_to_monotonic_ns() -> int:
    """The offset from the real wall clock (``time.time_ns``, never skewed by the harness)
    to the monotonic clock, from the closest of a few paired readings."""
    best: tuple[int, int] | None = None
    for _ in range(20):
        before = time.monotonic_ns()
        wall = time.time_ns()
        after = time.monotonic_ns()
        pair = (after - before, (before + after) // 2 - wall)
        best = pair if best is None or pair < best else best
    assert best is not None
    return best[1]


#: The sleeper of a pause after once's claim (``Probe._fault``): after ``least`` seconds,
#: resume the process once the record no longer names its owner (claimed anew, or gone),
#: or after ``most`` seconds. Before a staged commit (``staged``: the record is not yet
#: written by this process) it waits instead for a record that names another owner:
#: another copy's commit landed. A process of its own: the paused one runs no thread.
_RESUME_AFTER_TAKEOVER = """
import os, signal, sys, time
import boto3
table, item, owner, pid, least, most, mode = sys.argv[1:8]
started = time.monotonic()
ddb = boto3.client("dynamodb")
time.sleep(float(least))
while time.monotonic() - started < float(most):
    try:
        found = ddb.get_item(TableName=table, Key={"id": {"S": item}}, ConsistentRead=True)
    except Exception:
        found = {"Item": {"owner": {"S": owner}}}  # not known: look again
    holder = found.get("Item", {}).get("owner", {}).get("S")
    if holder != owner and (mode != "staged" or holder is not None):
        break
    time.sleep(0.2)
os.kill(int(pid), signal.SIGCONT)
"""


def _own_retry(call: dict[str, Any], parsed: dict[str, Any]) -> bool:
    """once's write whose first answer was lost: the SDK's retry is refused, and the item
    it returns carries our own owner (and, for a finalize, our fence)."""
    old = parsed.get("Item") or {}
    if call.get("commit"):
        # A commit's retry refused by the record's condition: the record element is last.
        reasons = parsed.get("CancellationReasons") or [{}]
        old = reasons[-1].get("Item") or {}
    if call.get("claim") is None or _text(old.get("owner")) != call["claim"]:
        return False
    # A staged commit's owner is new with that commit: the owner alone says it is ours.
    return (
        call["kind"] == "claim"
        or call.get("staged", False)
        or _text(old.get("fence")) == call.get("fence")
    )


def _staged(update: str, values: dict[str, Any]) -> bool:
    """``effects="staged"``'s commit: it completes the record and adds to the fence (as a
    claim does), with no lease."""
    return "#status = :completed" in update and "ADD #fence" in update and ":lease" not in values
