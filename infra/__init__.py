"""The example app: the payments service deployed as one ``OnceConsumer`` plus its ledger.

``infra.app.build_app`` builds the whole application; ``app.py`` (the CDK entry point) and
the infra tests both call it, so what the tests check is what ``cdk synth`` emits.
"""
