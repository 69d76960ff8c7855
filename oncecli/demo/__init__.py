"""``once demo``: a workload with every kind of trouble (``workload``), sent through the
local cloud (``drive``), and the stored state checked message by message (``verdict``).

Part of the repository's proof, the top floor but one: it may import every floor below (the
runtime, the construct, the local cloud, the commands) and the example in the checkout
(``payments``, through ``example``); only the proof and ``oncecli.cli`` import it
(``tests/unit/test_layering.py``).
"""
