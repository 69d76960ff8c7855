"""The benchmarks behind ``make bench`` (``python -m proof.bench``) and
``docs/performance.md``: batch latency against Powertools, DynamoDB work per record, cold
start, and throughput through the local cloud. See ``__main__`` for how a run is organised.

Part of the repository's proof: it may import every floor below (the runtime and its kit,
the construct, the local cloud, the commands), the example (``payments``) and the rest of
the proof (the demo, the harness); nothing below the proof imports it
(``tests/unit/house/test_layering.py``).
"""
