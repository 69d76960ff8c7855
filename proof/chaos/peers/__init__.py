"""Peer consumers: the patterns ``once`` is measured against, as test subjects.

They are not part of the Lambda asset. Each exposes ``make_handler(process, table_name=...,
key=..., client=...)`` returning a Lambda SQS handler, and calls business code with the
same ``process(body, attempt)`` shape as ``once``, so a benchmark or a fault harness can
plug one business function into all three and compare like with like.
"""
