"""The page's "What bounds each figure" section: for the figures of every other section,
what limits them (the waits, the consumer's CPU, the engine, this machine's cores). It
speaks of all the sections at once, so it is a section of its own, after them.
"""

from __future__ import annotations

from proof.bench.page import Page

BOUNDS = """
## What bounds each figure

- **Big batches, DynamoDB Local.** Three things, and the floor column says which one binds.
  The waits: `once` runs at most `max_workers` records at a time, each paying RTT +
  business + RTT (40 ms here), so a batch takes at least `ceil(batch / max_workers)` such
  rounds. The consumer's CPU: every record costs the consumer's process a few milliseconds of
  CPU (botocore builds, signs, sends and parses two requests; `once` parses, hashes and logs),
  and its threads share one GIL, so a batch takes at least batch x CPU per record, however
  many records are in flight; past a few dozen records this is the bound, and it is the
  figure that carries over to a Lambda, whose CPU is a share of a core set by its memory
  size. The machine: here DynamoDB Local's Java, the consumer and every other process share
  2 cores, so the engine's CPU per call also counts. Powertools runs records one after the
  other: its time is the batch size times one record's (two calls, the business time and
  its CPU), so the ratio tends to the consumer's CPU per record over Powertools' time per
  record as batches grow, whatever `max_workers` is (the "floor / Powertools" column).
- **Batch latency, DynamoDB Local.** The injected round trip and the business time: Java
  answers an item call in about a millisecond and serves concurrent calls in parallel, so
  `once`'s batch of 10 approaches its floor of claim + business + complete (about
  2 RTT + business), while Powertools pays that sum once per record because its
  `BatchProcessor` runs records one after the other. The ratio's physical limit is about
  1/batch size (0.1 for 10 records), reached when client-side CPU is negligible beside the
  injected waits. This is the engine whose ratio speaks for real DynamoDB, where calls are
  served in parallel too.
- **Batch latency, moto server.** moto's server: every call costs milliseconds of Python on
  one process with a GIL, so concurrent claims queue at the server and `once`'s
  concurrency buys less. The moto ratio is an upper bound (a pessimistic one) on what
  concurrency gives; its absolute times say more about moto than about either consumer.
- **Both engines, and this machine.** Client and server share 2 cores here. CPU spent in
  botocore (request signing, serialization, parsing) by 10 threads competes with the engine,
  so the p99 columns carry this machine's noise; the median is the figure to compare.
- **DynamoDB work.** Calls are counted on the wire and are a property of the protocol, not
  of the engine; DynamoDB Local reports consumed capacity for successful writes. For writes
  refused by their condition DynamoDB reports nothing but bills the existing item's size
  (1 KB units, at least 1): the "WRU refused" column is that rule applied to the item the
  refusal returned. So the cost of a duplicate grows with the stored result, up to the cap.
- **Cold start.** Module imports in a fresh interpreter on this machine (not a Lambda
  sandbox, whose CPU share depends on memory size): the relative order is the finding; the
  absolute figures are this machine's. The asset size is exact.
- **Throughput.** The local cloud's event source mapping emulator polls moto's SQS and
  invokes worker processes; with 2 cores, more workers than cores mostly add contention,
  so the curve flattens early, bounded by moto's single server process and by this machine.
"""


def section(page: Page) -> None:
    page.text(BOUNDS)
