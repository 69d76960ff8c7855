"""The local cloud: the example stack's ``local`` stage on this machine.

``template`` synthesizes the CDK app and makes its template deployable on moto; ``engines``
runs moto's server (patched in ``motoserver``) and DynamoDB Local; ``cloud`` deploys the
template there; ``mapping`` plays the event source mapping, with Lambda's batch-response rule
from ``once.batchresponse`` and each function invocation in a process of its own (``invocation``).

The local cloud's floor: above the runtime and the construct, below the commands. It may
import ``once``, ``once_cdk`` and what it stands on in ``oncecli``: ``aws``, ``errors``,
``project``. Never the commands (``operate``, ``redrive``, ``testing``, ``cli``) or the proof
(``demo``, ``chaos``, ``bench``, ``ledger``), which import it
(``tests/unit/house/test_layering.py``).
"""
