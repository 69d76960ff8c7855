"""The fault rates of the harness's small seeded runs (``test_harness*``), in one place."""

from __future__ import annotations

# Enough zombies and crashes in a few hundred deliveries to exercise every path. That each
# enabled fault is injected at all holds by construction, not by these rates: a drawn fault
# also fires on the run's first event that can fire it (``faults.Dice``), an outage window
# opens on a DynamoDB call (``harness.OutageWindows``), a short retention's first wave
# lasts until a sweep deleted a record, and each seed's first wave has poison payments for
# the DLQ redrive to move (pinned below). The rates set how often faults come after that.
RATES = {
    "pause": 0.03,
    "kill_after_claim": 0.01,
    "kill_after_effect": 0.01,
    "kill_before_finalize": 0.01,
    "throttle": 0.05,
    "lost_response": 0.05,
    "outage": 0.03,
    "delete_failed": 0.02,
    "short_visibility": 0.1,
}
#: Short enough for records to expire and be swept within a run of a few hundred messages.
RETENTION_S = 25  # command.MIN_RETENTION_S: past the longest run from a claim to its business code

#: The two-hop workload's own faults on top of RATES: kills between an outbox's sends and
#: its clear, sends refused, sends applied twice (their answer lost).
TWO_HOP_RATES = RATES | {"kill_before_clear": 0.02, "send_failed": 0.03, "send_duplicated": 0.03}
#: The share of the first wave's payment ids the two-hop SNS run sends again, once their
#: hop-1 records' retention has passed (``traffic.add_reuse``).
REUSE = 0.15
#: The EventBridge chain's own faults on top of TWO_HOP_RATES: a PutEvents entry failed (the
#: others put), a clear throttled past the SDK's retries.
EVENTS_RATES = TWO_HOP_RATES | {"event_entry_failed": 0.03, "throttle_clear": 0.02}
