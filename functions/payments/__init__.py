"""The example service: credits an account ledger once per payment."""
