"""Time to completion of a delivery that was not done: how long a message that came back
BUSY or failed waited before it was done.

Retry backoff exists to shorten that wait (without it the message comes back only after the
queue's visibility timeout), so the chaos harness and the retry benchmark both report it,
from the same events: per message, the first delivery that ended ``busy`` or ``failed``,
and the first moment after it that the message was ``done`` (acknowledged: processed, or a
duplicate of a completed record). A message never done (it went to the DLQ, or the run
ended first) is counted as unfinished, not timed. Pure functions, tested row by row.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from dataclasses import dataclass

#: The kinds of a delivery that was not done, in the order the reports show them.
NOT_DONE = ("busy", "failed")
DONE = "done"


@dataclass(frozen=True)
class Mark:
    """One observation: a message (any stable id), when (seconds, one clock), what."""

    message: str
    t_s: float
    kind: str  # busy, failed or done


def waits(marks: Iterable[Mark]) -> dict[str, list[float]]:
    """Seconds from each message's first busy/failed delivery to its first done after it,
    grouped by that first kind; ``unfinished_<kind>`` lists (as zeros) those never done."""
    first: dict[str, Mark] = {}
    done: dict[str, list[float]] = {}
    for mark in sorted(marks, key=lambda m: m.t_s):
        if mark.kind in NOT_DONE:
            first.setdefault(mark.message, mark)
        elif mark.kind == DONE:
            done.setdefault(mark.message, []).append(mark.t_s)
    out: dict[str, list[float]] = {k: [] for k in NOT_DONE}
    out |= {f"unfinished_{k}": [] for k in NOT_DONE}
    for message, mark in first.items():
        after = [t for t in done.get(message, []) if t >= mark.t_s]
        if after:
            out[mark.kind].append(after[0] - mark.t_s)
        else:
            out[f"unfinished_{mark.kind}"].append(0.0)
    return out


def summarize(marks: Iterable[Mark]) -> dict[str, dict[str, float | int | None]]:
    """Per kind: ``count`` timed, ``median_s`` (None when none), ``p90_s``, ``unfinished``."""
    found = waits(marks)
    out: dict[str, dict[str, float | int | None]] = {}
    for kind in NOT_DONE:
        seconds = sorted(found[kind])
        out[kind] = {
            "count": len(seconds),
            "median_s": round(statistics.median(seconds), 2) if seconds else None,
            "p90_s": round(seconds[min(len(seconds) - 1, int(0.9 * len(seconds)))], 2)
            if seconds
            else None,
            "unfinished": len(found[f"unfinished_{kind}"]),
        }
    return out
