"""The local cloud: the example stack's ``local`` stage on this machine.

``template`` synthesizes the CDK app and makes its template deployable on moto; ``engines``
runs moto's server (patched in ``motoserver``) and DynamoDB Local; ``cloud`` deploys the
template there; ``mapping`` plays the event source mapping, with AWS's response rules in
``batchrules`` and each function invocation in a process of its own (``invocation``).
"""
