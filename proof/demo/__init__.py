"""``make demo``: a workload with every kind of trouble (``workload``), sent through the
local cloud (``drive``), and the stored state checked message by message (``verdict``).

Part of the repository's proof: it may import every floor below (the runtime, the
construct, the local cloud, the commands) and the example in the checkout (``payments``,
through ``proof.example``); nothing below the proof imports it
(``tests/unit/house/test_layering.py``).
"""
