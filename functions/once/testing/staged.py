"""The staged mode's guard: a test fails when business code under ``effects="staged"`` changes
anything through AWS itself instead of staging it on the attempt.

Under ``effects="staged"`` no claim is made before business code runs: copies of a message in
flight at once may all run it, and only what it staged (``attempt.write``, ``attempt.send``)
is committed once. A ``PutItem``, a ``SendMessage`` or a ``Publish`` of its own would happen
once per copy. The kit cannot see every effect (an HTTP call to a payment API is invisible
to it), but it sees every AWS call made through botocore: during each invocation of such a
handler it wraps ``BaseClient._make_api_call``, and a call that changes something, made
while the business function's frame is on the calling thread's stack, is a violation. The
call still goes through (the test sees what AWS would do); ``deliver`` raises once the
invocation ended, naming each call.

A call is judged by what it does (``effect_of``), from its service, its operation and, where
the operation's name does not say, its parameters:

- **PartiQL** (DynamoDB's ``ExecuteStatement``, ``BatchExecuteStatement``,
  ``ExecuteTransaction``; RDS Data API's ``ExecuteStatement``...) by its statements' verbs:
  ``SELECT`` reads; ``INSERT``, ``UPDATE``, ``DELETE``... change. IAM authorizes DynamoDB's
  PartiQL the same way, by verb (``dynamodb:PartiQLSelect``, ``PartiQLInsert``...:
  https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/ql-iam.html).
- **Calls that change nothing a second run would repeat**, named per service for the
  services a handler commonly calls (``UNCHANGING``): STS's credentials, KMS's cryptography,
  Comprehend's and Rekognition's detections, Translate, Polly, Textract's analyses, Bedrock's
  and SageMaker's invocations of a model.
- **Reads by name**: AWS names its read actions ``Get*``, ``List*``, ``Describe*``,
  ``Query``, ``Scan``, ``BatchGet*``, ``TransactGet*``, ``Head*``... (the IAM action lists,
  https://docs.aws.amazon.com/service-authorization/latest/reference/reference_policies_actions-resources-contextkeys.html,
  class them read and list actions).
- **Changes by name**: ``Put*``, ``Update*``, ``Delete*``, ``Create*``, ``Send*``,
  ``Publish*``, ``Start*``, ``Invoke`` (Lambda: the function may change anything),
  ``Receive*`` (it changes a message's visibility)... (``CHANGE_PREFIXES``).
- **Anything else is unknown**: the test is warned (``UnknownCallWarning``, naming the
  call), never failed, since the guard would otherwise refuse what may be a read.
"""

from __future__ import annotations

import functools
import re
import sys
import threading
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from enum import StrEnum
from types import CodeType
from typing import Any

from botocore.client import BaseClient

#: Operation-name prefixes of calls that read and change nothing.
READ_PREFIXES = (
    "Get",
    "List",
    "Describe",
    "Query",
    "Scan",
    "BatchGet",
    "TransactGet",
    "Head",
    "Lookup",
    "Search",
    "Select",
    "Filter",
    "Check",
)
#: Per service (botocore's name), the calls that are not reads by name but change nothing a
#: second run would repeat: they derive, detect, translate, sign or hand out credentials.
#: From each service's API reference (the actions' descriptions).
UNCHANGING: dict[str, frozenset[str]] = {
    "sts": frozenset(
        {
            "AssumeRole",
            "AssumeRoleWithSAML",
            "AssumeRoleWithWebIdentity",
            "AssumeRoot",
            "DecodeAuthorizationMessage",
        }
    ),
    "kms": frozenset(
        {
            "Decrypt",
            "DeriveSharedSecret",
            "Encrypt",
            "GenerateDataKey",
            "GenerateDataKeyPair",
            "GenerateDataKeyPairWithoutPlaintext",
            "GenerateDataKeyWithoutPlaintext",
            "GenerateMac",
            "GenerateRandom",
            "ReEncrypt",
            "Sign",
            "Verify",
            "VerifyMac",
        }
    ),
    "comprehend": frozenset(
        {
            "BatchDetectDominantLanguage",
            "BatchDetectEntities",
            "BatchDetectKeyPhrases",
            "BatchDetectSentiment",
            "BatchDetectSyntax",
            "BatchDetectTargetedSentiment",
            "ClassifyDocument",
            "ContainsPiiEntities",
            "DetectDominantLanguage",
            "DetectEntities",
            "DetectKeyPhrases",
            "DetectPiiEntities",
            "DetectSentiment",
            "DetectSyntax",
            "DetectTargetedSentiment",
            "DetectToxicContent",
        }
    ),
    "translate": frozenset({"TranslateDocument", "TranslateText"}),
    "polly": frozenset({"SynthesizeSpeech"}),
    "textract": frozenset({"AnalyzeDocument", "AnalyzeExpense", "AnalyzeID", "DetectDocumentText"}),
    "rekognition": frozenset(
        {
            "CompareFaces",
            "DetectCustomLabels",
            "DetectFaces",
            "DetectLabels",
            "DetectModerationLabels",
            "DetectProtectiveEquipment",
            "DetectText",
            "RecognizeCelebrities",
        }
    ),
    "bedrock-runtime": frozenset(
        {
            "ApplyGuardrail",
            "Converse",
            "ConverseStream",
            "CountTokens",
            "InvokeModel",
            "InvokeModelWithResponseStream",
        }
    ),
    "sagemaker-runtime": frozenset({"InvokeEndpoint", "InvokeEndpointWithResponseStream"}),
    # IAM's reference classes these reads: a Logs Insights query, a Kinesis subscription.
    "logs": frozenset({"StartQuery", "StopQuery", "StartLiveTail"}),
    "kinesis": frozenset({"SubscribeToShard"}),
}
#: Calls whose name reads as a read but that change something: Step Functions'
#: ``GetActivityTask`` takes the task from every other worker (IAM's reference classes it a
#: write: https://docs.aws.amazon.com/service-authorization/latest/reference/list_awsstepfunctions.html).
CHANGES_DESPITE_NAME = frozenset({("stepfunctions", "GetActivityTask")})
#: Operation-name prefixes of calls that change something.
CHANGE_PREFIXES = (
    "Put",
    "Update",
    "Delete",
    "Create",
    "Send",
    "Publish",
    "Start",
    "Stop",
    "Batch",
    "TransactWrite",
    "Tag",
    "Untag",
    "Add",
    "Remove",
    "Set",
    "Modify",
    "Change",
    "Attach",
    "Detach",
    "Associate",
    "Disassociate",
    "Enable",
    "Disable",
    "Register",
    "Deregister",
    "Import",
    "Restore",
    "Reset",
    "Rotate",
    "Cancel",
    "Complete",
    "Abort",
    "Copy",
    "Upload",
    "Invoke",
    "Terminate",
    "Run",
    "Purge",
    "Increment",
    "Write",
    "Receive",
    "Subscribe",
    "Unsubscribe",
    "Confirm",
    "Revoke",
    "Grant",
    "Schedule",
    "Release",
    "Assign",
    "Unassign",
    "Accept",
    "Reject",
)
#: Statements by service and operation (PartiQL, SQL): where each request names them.
_STATEMENTS = {
    ("dynamodb", "ExecuteStatement"): ("Statement",),
    ("dynamodb", "BatchExecuteStatement"): ("Statements", "Statement"),
    ("dynamodb", "ExecuteTransaction"): ("TransactStatements", "Statement"),
    ("rds-data", "ExecuteStatement"): ("sql",),
    ("rds-data", "BatchExecuteStatement"): ("sql",),
    ("redshift-data", "ExecuteStatement"): ("Sql",),
    ("redshift-data", "BatchExecuteStatement"): ("Sqls",),
}
#: The first words of a statement that may only read (``EXPLAIN`` and ``WITH`` read unless a
#: changing word follows: ``EXPLAIN ANALYZE DELETE`` runs the delete).
_READ_VERBS = frozenset({"SELECT", "EXISTS", "SHOW", "EXPLAIN", "WITH", "VALUES", "DESCRIBE"})
#: Words that make a statement change something wherever they stand in it, outside quotes and
#: comments: a data-modifying clause (``WITH gone AS (DELETE ...)``), ``SELECT ... INTO`` a
#: new table, DDL, a procedure call, a bulk copy.
_CHANGING_WORDS = frozenset(
    {
        "INSERT", "UPDATE", "DELETE", "MERGE", "UPSERT", "INTO", "CREATE", "DROP", "ALTER",
        "TRUNCATE", "GRANT", "REVOKE", "CALL", "EXEC", "EXECUTE", "COPY", "UNLOAD", "VACUUM",
        "REFRESH",
    }
)  # fmt: skip
#: A statement's words: comments and quoted text (names, strings) are taken out first.
_COMMENT_OR_QUOTED = r"/\*.*?\*/|--[^\n]*|'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"|`[^`]*`"
_WORD = r"[A-Za-z_][A-Za-z0-9_]*"


class Effect(StrEnum):
    """What a call does, as the guard judges it."""

    NONE = "none"  # reads, or changes nothing a second run would repeat
    CHANGE = "change"
    UNKNOWN = "unknown"


class UnknownCallWarning(UserWarning):
    """Business code under ``effects="staged"`` made a call the guard cannot judge."""


#: The method every botocore client's operation goes through (botocore.client.BaseClient).
_PATCHED = "_make_api_call"
_lock = threading.RLock()  # one patch at a time; a nested guard chains to the outer one


def effect_of(service: str, operation: str, params: Any = None) -> Effect:
    """What a botocore call (``dynamodb``, ``PutItem``, its parameters) does."""
    where = _STATEMENTS.get((service, operation))
    if where is not None:
        judged = {_statement_effect(text) for text in _statements(params, where)}
        if not judged:
            return Effect.UNKNOWN
        for effect in (Effect.CHANGE, Effect.UNKNOWN):
            if effect in judged:
                return effect
        return Effect.NONE
    if (service, operation) in CHANGES_DESPITE_NAME:
        return Effect.CHANGE
    if operation in UNCHANGING.get(service, ()) or operation.startswith(READ_PREFIXES):
        return Effect.NONE
    if operation.startswith(CHANGE_PREFIXES):
        return Effect.CHANGE
    return Effect.UNKNOWN


def _statements(params: Any, where: tuple[str, ...]) -> list[str]:
    """The statements (PartiQL, SQL) a request holds, where ``where`` says it holds them."""
    found: list[Any] = [params]
    for name in where:
        inner: list[Any] = []
        for value in found:
            item = value.get(name) if isinstance(value, dict) else None
            inner.extend(item if isinstance(item, list) else [item])
        found = inner
    return [text for text in found if isinstance(text, str) and text.strip()]


def _statement_effect(text: str) -> Effect:
    """A statement reads when its first word may only read and no changing word stands in
    it (outside comments and quoted text); it changes when either says so; else unknown."""
    words = [
        w.upper() for w in re.findall(_WORD, re.sub(_COMMENT_OR_QUOTED, " ", text, flags=re.S))
    ]
    if not words:
        return Effect.UNKNOWN
    if _CHANGING_WORDS & set(words):
        return Effect.CHANGE
    return Effect.NONE if words[0] in _READ_VERBS else Effect.UNKNOWN


def _code_of(business: Any) -> CodeType | None:
    """The code object whose frame is on the stack while ``business`` runs: a function's,
    a bound method's, a ``functools.partial``'s function's, a callable object's ``__call__``."""
    for _ in range(100):
        if isinstance(business, functools.partial):
            business = business.func
            continue
        code = getattr(business, "__code__", None)
        if isinstance(code, CodeType):
            return code
        method = getattr(business, "__func__", None)
        if method is not None:
            business = method
            continue
        if not callable(business) or isinstance(business, type):
            return None
        business = type(business).__call__
    return None


def _from_business(code: CodeType) -> bool:
    frame = sys._getframe(2)
    while frame is not None:
        if frame.f_code is code:
            return True
        frame = frame.f_back  # type: ignore[assignment]
    return False


@contextmanager
def guarded(business: Any) -> Iterator[list[str]]:
    """While the block runs: every AWS call that changes something, made from ``business``
    (on any thread), is listed in the yielded list as ``"<service> <operation>"``."""
    code = _code_of(business)
    seen: list[str] = []
    if code is None:  # no frame to recognise it by: nothing to check
        yield seen
        return
    with _lock:
        original = getattr(BaseClient, _PATCHED)

        def _make_api_call(client: Any, operation: str, params: Any) -> Any:
            service = client.meta.service_model.service_name
            effect = effect_of(service, operation, params)
            if effect is not Effect.NONE and _from_business(code):
                if effect is Effect.CHANGE:
                    seen.append(f"{service} {operation}")
                else:
                    warnings.warn(
                        f'business code under effects="staged" called {service} {operation}, '
                        "which the kit cannot tell a read from a change: if it changes "
                        "anything, copies of a message would each repeat it; stage it on the "
                        'attempt, or use effects="any"',
                        UnknownCallWarning,
                        stacklevel=2,
                    )
            return original(client, operation, params)

        setattr(BaseClient, _PATCHED, _make_api_call)
        try:
            yield seen
        finally:
            setattr(BaseClient, _PATCHED, original)


def violation(calls: list[str]) -> str:
    """What the test is told."""
    listed = ", ".join(dict.fromkeys(calls))
    return (
        f'business code under effects="staged" changed something through AWS itself: '
        f"{listed}. Under staged effects copies of a message may all run business code, so a "
        "call of its own happens once per copy: stage it on the attempt (attempt.write for "
        'DynamoDB, attempt.send for SQS and SNS), or use make_handler(effects="any") (the '
        "default), which claims the message before business code runs."
    )
