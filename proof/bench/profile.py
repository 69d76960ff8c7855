"""Where ``once`` spends its own time: pyinstrument over many one-record batches.

pyinstrument samples the thread that started it. A batch of one record runs in the calling
thread (``once`` only uses its pool for two keys or more), so one-record batches with no
injected latency and no business time show the client-side cost per record: parsing,
hashing, request building, botocore, logging, metrics. In a batch of 10 that cost is paid
10 times under one GIL, which is what separates ``once`` from its floor of 2 RTT + business.
"""

from __future__ import annotations

from typing import Any

from oncecli.project import ROOT
from proof.bench.subjects import Subjects, body, business, invoke, new_keys

MAX_LINES = 60
FLAT_LINES = 30


def run(subjects: Subjects, batches: int) -> dict[str, Any]:
    from pyinstrument import Profiler

    subjects.wire.latency_ms = 0.0
    handler = subjects.build("once", business(0))
    for key in new_keys(5):
        invoke(handler, [body(key)])
    profiler = Profiler(interval=0.0005)
    profiler.start()
    for key in new_keys(batches):
        invoke(handler, [body(key)])
    profiler.stop()
    text = profiler.output_text(unicode=False, color=False, show_all=False)
    lines = [line for line in text.splitlines() if line.strip()]
    # Self time by function, libraries included: the waits on the engine's answer show up
    # as socket reads, the rest is the CPU a record costs the consumer.
    flat = profiler.output_text(unicode=False, color=False, flat=True, time="percent_of_total")
    rows = [line for line in flat.splitlines() if line.strip()]
    # pyinstrument names the profiled file by its absolute path: the page shows it relative.
    root = f"{ROOT}/"
    lines = [line.replace(root, "") for line in lines]
    rows = [line.replace(root, "") for line in rows]
    return {
        "batches": batches,
        "text": "\n".join(lines[:MAX_LINES]),
        "flat": "\n".join(rows[:FLAT_LINES]),
    }
