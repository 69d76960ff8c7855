"""The demo, the chaos harness and the benchmarks find the example app in the checkout they
run in (the wheel does not ship ``payments``), and say so clearly where there is none."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from oncecli.chaos import command
from oncecli.demo import example
from oncecli.errors import CliError

ROOT = Path(__file__).resolve().parents[2]


def _fake_checkout(root: Path) -> Path:
    (root / "functions" / "payments").mkdir(parents=True)
    (root / "functions" / "payments" / "__init__.py").write_text("")
    (root / "functions" / "payments" / "handler.py").write_text("")
    (root / "cdk.json").write_text('{"app": "python3 app.py"}')
    return root


@pytest.fixture
def installed(monkeypatch, tmp_path):
    """As from a wheel: this package's own folder is not a checkout."""
    site = tmp_path / "site-packages"
    site.mkdir()
    monkeypatch.setattr(example, "SOURCE", site)
    return site


def test_the_checkout_this_package_runs_from_is_found():
    assert example.find_checkout(Path("/")) == ROOT


def test_outside_a_checkout_the_error_says_to_run_in_one(installed, tmp_path):
    elsewhere = tmp_path / "team-project"
    elsewhere.mkdir()
    assert example.find_checkout(elsewhere) is None
    with pytest.raises(example.NotInCheckout) as caught:
        example.require(elsewhere)
    assert isinstance(caught.value, CliError)
    assert "run them in a checkout" in str(caught.value)
    assert str(elsewhere) in str(caught.value)


def test_an_installed_package_finds_the_checkout_at_or_above_the_working_directory(
    installed, tmp_path
):
    checkout = _fake_checkout(tmp_path / "once")
    below = checkout / "examples" / "orders"
    below.mkdir(parents=True)
    (below / "cdk.json").write_text("{}")  # a CDK app without the example is not it
    assert example.find_checkout(below) == checkout
    assert example.functions_dir(checkout) == checkout / "functions"


def test_require_puts_the_checkouts_functions_on_the_path_once(monkeypatch):
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p != str(ROOT / "functions")])
    assert example.require() == ROOT / "functions"
    assert example.require() == ROOT / "functions"
    assert sys.path.count(str(ROOT / "functions")) == 1
    # Appended: what is installed comes first, the example is found after it.
    assert sys.path[-1] == str(ROOT / "functions")
    from payments.ledger import ENTRY_PREFIX

    assert ENTRY_PREFIX


def test_another_payments_first_on_the_path_is_refused(monkeypatch, tmp_path):
    team = tmp_path / "team"
    (team / "payments").mkdir(parents=True)
    (team / "payments" / "__init__.py").write_text("")
    monkeypatch.syspath_prepend(str(team))
    for name in [n for n in sys.modules if n == "payments" or n.startswith("payments.")]:
        monkeypatch.delitem(sys.modules, name)
    with pytest.raises(example.NotInCheckout, match="another 'payments' comes first"):
        example.require()


def test_its_exit_code_is_its_own_and_the_chaos_command_lists_it():
    code = example.NotInCheckout.exit_code
    others = [cls for cls in CliError.__subclasses__() if cls is not example.NotInCheckout]
    assert code not in {cls.exit_code for cls in others}
    assert f"  {code:<4} {example.NotInCheckout.meaning}" in command.EPILOG
