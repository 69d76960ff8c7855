"""The benchmarks behind ``make bench`` (``python -m oncecli.bench``) and
``docs/performance.md``: batch latency against Powertools, DynamoDB work per record, cold
start, and throughput through the local cloud. See ``__main__`` for how a run is organised.
"""
