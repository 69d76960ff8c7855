"""AWS's rule for a Lambda response to an SQS batch, as the local cloud applies it: the one
written in the runtime's floor, ``once.batchresponse``, which the test kit (``once_env``)
applies too, so that the two emulations decide alike
(tests/unit/test_batch_response_agreement.py). Only a name kept for the harness
(``proof.chaos.worker``) and tests/localcloud/test_batchrules.py; the rule, its rows and
their citations live there, and the local cloud's own modules import it from there."""

from __future__ import annotations

from once.batchresponse import MALFORMED, Decision, decide

__all__ = ["MALFORMED", "Decision", "decide"]
