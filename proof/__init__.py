"""The repository's proof: what shows that once keeps its promise, run from this checkout.

    demo    ``make demo``: the example app on the local cloud, a workload with every kind of
            trouble, each message's fate checked
    chaos   ``make chaos``: the fault-injection harness, once beside Powertools and the
            naive pattern under the same faults
    bench   ``make bench``: the benchmarks behind docs/performance.md
    example, ledger, errors: the example app found in this checkout, its ledger read back,
            and the proof's own failures

Why a folder of its own: none of it works in a team's project (it runs the example app of
this repository, ``functions/payments`` and ``infra``), so none of it is in the wheel, and
the ``once`` command a team installs does not offer it. It is the top floor: it may import
everything below (the runtime, the construct, the local cloud, the commands, ``oncecli.cli``
for its exit codes) and the example; nothing below imports it
(``tests/unit/house/test_layering.py``). Its plotting and profiling dependencies are the
repository's (requirements-dev.txt), not a team's.
"""
