"""The CDK stack of once: the queues, tables, consumer and alarms, one construct per job.

``infra.app.build_app`` builds the whole application; ``app.py`` (the CDK entry point) and
the infra tests both call it, so what the tests check is what ``cdk synth`` emits.
"""
