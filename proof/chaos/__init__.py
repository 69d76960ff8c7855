"""The fault-injection harness: once, Powertools and the naive pattern under the same faults.

Part of the repository's proof (``make chaos``): it may import every floor below (the
runtime, the construct, the local cloud, the commands), the example (``payments``) and the
rest of the proof (``proof.example``, ``proof.ledger``); nothing below the proof imports it
(``tests/unit/house/test_layering.py``).
"""
