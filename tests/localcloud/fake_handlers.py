"""Handlers for the worker tests: each misbehaves in one way Lambda must survive."""

import os
import time


def ok(event, context):
    return {
        "batchItemFailures": [],
        "remaining": context.get_remaining_time_in_millis(),
        "name": context.function_name,
        "env": os.environ.get("FAKE_ENV"),
    }


def slow(event, context):
    time.sleep(30)


def crash(event, context):
    os._exit(3)


def raises(event, context):
    raise RuntimeError("boom")


def not_json(event, context):
    return {1, 2}
