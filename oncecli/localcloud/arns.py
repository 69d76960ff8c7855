"""The ARN of a resource from what names it (a table's name, a queue's URL, a bus's name).

Why: two emulations spell the same ARNs and must agree: resolving a template's
``Fn::GetAtt`` (``resolve``: the ARN a role's grant names) and IAM's checks of a call
(``iam_actions``: the ARN the call acts on). A grant matches a call only if both spell the
resource alike, so each ARN is spelled here once.
"""

from __future__ import annotations

import re
from urllib.parse import urlparse


def table_arn(name: str, account: str, region: str) -> str:
    """A DynamoDB table's ARN (a TableName may be one already)."""
    return name if name.startswith("arn:") else f"arn:aws:dynamodb:{region}:{account}:table/{name}"


def queue_arn(url: str, account: str, region: str) -> str:
    """A queue's ARN from its URL (``.../<account>/<name>``; the account is the URL's)."""
    if url.startswith("arn:"):
        return url
    parts = [p for p in urlparse(url).path.split("/") if p]
    owner, name = (parts[-2], parts[-1]) if len(parts) >= 2 else (account, parts[-1])
    host = urlparse(url).hostname or ""
    found = re.match(r"(?:sqs\.)?([a-z]{2}(?:-[a-z]+)+-\d)\.", host)
    return f"arn:aws:sqs:{found.group(1) if found else region}:{owner}:{name}"


def event_bus_arn(name: str | None, account: str, region: str) -> str:
    """An event bus's ARN from PutEvents' ``EventBusName``: a name or an ARN ("The name or
    ARN of the event bus to receive the event"), the default bus when it is left out
    (botocore events/2015-10-07 PutEventsRequestEntry.EventBusName)."""
    if name and name.startswith("arn:"):
        return name
    return f"arn:aws:events:{region}:{account}:event-bus/{name or 'default'}"
