"""The fault-injection harness: once, Powertools and the naive pattern under the same faults.

Part of the repository's proof, the top floor but one: it may import every floor below (the
runtime, the construct, the local cloud, the commands), the example (``payments``) and the
rest of the proof (the demo's door to the example, ``oncecli.ledger``); only the proof and
``oncecli.cli`` (``once chaos``) import it (``tests/unit/test_layering.py``).
"""
