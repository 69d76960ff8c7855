"""The bridge finds the record Powertools itself wrote for a message, for any message: the
id (``<key_prefix>#<hash>``) and the validation hash are computed as Powertools 3.x computes
them (``persistence/base.py``: the JMESPath extraction with Powertools' functions, the
canonical JSON, the hash), proven by letting Powertools' own ``idempotent_function`` write
the record and reading it at the key the bridge derives."""

from __future__ import annotations

import json
from typing import Any

import boto3
import pytest
from aws_lambda_powertools.utilities.idempotency import (
    DynamoDBPersistenceLayer,
    IdempotencyConfig,
    idempotent_function,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from moto import mock_aws

from once.powertools import PowertoolsBridge
from tests.conftest import REGION, build_event

TABLE = "powertools-ids"
#: Powertools warns where a key expression finds nothing, and where no Lambda context was
#: registered: both are cases this test runs on purpose.
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20)
)
_json = st.recursive(
    _scalars,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)
#: A renewal's body: its key (any JSON value, missing keys included), an amount, and more.
_bodies = st.fixed_dictionaries(
    {"renewalId": _json, "amount": _json}, optional={"note": st.text(max_size=30)}
)
#: (what the team's function was given, its key expression, its validation expression)
_CONFIGS = [
    ("record", "powertools_json(body).renewalId", ""),
    ("record", "messageId", "powertools_json(body).amount"),
    ("body", "renewalId", "[amount, note]"),
    ("body", "", ""),
]


def _write_with_powertools(
    dynamodb: Any, data: str, key: str, validation: str, record: dict[str, Any]
) -> str:
    """Run the record through Powertools' own decorator; the prefix of the ids it writes."""
    persistence = DynamoDBPersistenceLayer(table_name=TABLE, boto3_client=dynamodb)
    config = IdempotencyConfig(event_key_jmespath=key, payload_validation_jmespath=validation)

    @idempotent_function(
        data_keyword_argument="payload", config=config, persistence_store=persistence
    )
    def renew(payload: Any) -> dict[str, bool]:
        return {"ok": True}

    payload = record if data == "record" else json.loads(record["body"])
    renew(payload=payload)
    return f"test-func.{renew.__module__}.{renew.__qualname__}"


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(body=_bodies, config=st.sampled_from(_CONFIGS))
def test_the_bridge_finds_the_record_powertools_wrote_for_any_message(
    body: dict[str, Any], config: tuple[str, str, str]
) -> None:
    data, key, validation = config
    record = build_event([body])["Records"][0]
    with mock_aws():
        dynamodb = boto3.client("dynamodb", region_name=REGION)
        dynamodb.create_table(
            TableName=TABLE,
            BillingMode="PAY_PER_REQUEST",
            KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
        )
        prefix = _write_with_powertools(dynamodb, data, key, validation, record)
        items = dynamodb.scan(TableName=TABLE)["Items"]
        bridge = PowertoolsBridge(
            table_name=TABLE,
            key_prefix=prefix,
            data=data,  # type: ignore[arg-type]
            event_key_jmespath=key,
            payload_validation_jmespath=validation,
        )
        found = bridge.record_for(record)
    if not items:  # Powertools found no key and kept no record: nor does the bridge
        assert found is None
        return
    (item,) = items
    assert found is not None
    assert found.key() == {"id": item["id"]}
    assert found.validation == item.get("validation", {}).get("S", "")
