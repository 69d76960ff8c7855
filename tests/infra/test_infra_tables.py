"""The idempotency and ledger tables."""

from __future__ import annotations

import pytest

from once import constants as c


def _table(synth, which):
    construct = getattr(synth.stack.tables, which)
    return synth.template["Resources"][synth.logical_id(construct)]


def test_no_global_table_anywhere_because_moto_skips_them(all_stages):
    for synth in all_stages:
        assert synth.resources("AWS::DynamoDB::GlobalTable") == {}
        assert len(synth.resources("AWS::DynamoDB::Table")) == 2


@pytest.mark.parametrize("which", ["idempotency", "ledger"])
def test_tables_are_keyed_by_the_shared_partition_key_as_a_string(synth, which):
    props = _table(synth, which)["Properties"]
    assert props["KeySchema"] == [{"AttributeName": c.PARTITION_KEY, "KeyType": "HASH"}]
    assert props["AttributeDefinitions"] == [
        {"AttributeName": c.PARTITION_KEY, "AttributeType": "S"}
    ]
    assert c.PARTITION_KEY == "id"


@pytest.mark.parametrize("which", ["idempotency", "ledger"])
def test_tables_are_on_demand_with_point_in_time_recovery(synth, which):
    props = _table(synth, which)["Properties"]
    assert props["BillingMode"] == "PAY_PER_REQUEST"
    assert "ProvisionedThroughput" not in props
    assert props["PointInTimeRecoverySpecification"] == {"PointInTimeRecoveryEnabled": True}


def test_idempotency_records_expire_on_the_shared_ttl_attribute(synth):
    props = _table(synth, "idempotency")["Properties"]
    assert props["TimeToLiveSpecification"] == {
        "AttributeName": c.TTL_ATTRIBUTE,
        "Enabled": True,
    }


def test_ledger_entries_never_expire(synth):
    assert "TimeToLiveSpecification" not in _table(synth, "ledger")["Properties"]


@pytest.mark.parametrize("which", ["idempotency", "ledger"])
def test_prod_tables_survive_stack_deletion_and_are_protected(prod, which):
    table = _table(prod, which)
    assert table["DeletionPolicy"] == "Retain"
    assert table["UpdateReplacePolicy"] == "Retain"
    assert table["Properties"]["DeletionProtectionEnabled"] is True


@pytest.mark.parametrize("which", ["idempotency", "ledger"])
@pytest.mark.parametrize("stage", ["dev", "local"])
def test_non_prod_tables_are_destroyed_with_the_stack(request, stage, which):
    synth = request.getfixturevalue(stage)
    table = _table(synth, which)
    assert table["DeletionPolicy"] == "Delete"
    assert table["Properties"]["DeletionProtectionEnabled"] is False
