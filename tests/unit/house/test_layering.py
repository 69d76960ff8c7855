"""Imports only go down: the floors of the code, and no circle of modules.

The graph is read from the source files with ``ast``, not from what Python happened to
import: every ``import`` and ``from ... import`` counts, at the top of a module, inside a
function, under ``TYPE_CHECKING`` alike (a lazy import is still a dependency, only a later
one). ``from a.b import c`` is an arrow to the module ``a.b.c`` when there is one, else to
``a.b``. Not counted: the parent packages Python runs before a module (every
``__init__`` here imports nothing above its lowest member), and a name handed to
``importlib`` at run time.

The floors, from the bottom; a module imports its own floor or the ones below::

    runtime      once (once.testing: once_env, the kit on moto)
    construct    once_cdk
    local cloud  oncecli.localcloud and what it stands on: oncecli.aws, .consumers, .errors,
                 .project
    commands     oncecli.operate, oncecli.redrive, and oncecli.testing (the once_cloud
                 fixture: the local cloud, read as ``once status`` reads it)
    entry point  oncecli.cli: the ``once`` command's parser and ``guarded`` (a command's
                 exit codes); nothing of the product imports it
    proof        proof (the demo, the chaos harness, the benchmarks, the example's ledger
                 read back) and the example it runs: payments, infra
"""

from __future__ import annotations

import ast
from fnmatch import fnmatchcase
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]

#: Each top-level package and the folder it is read from.
SOURCES = {
    "once": ROOT / "functions" / "once",
    "once_cdk": ROOT / "once_cdk",
    "oncecli": ROOT / "oncecli",
    "proof": ROOT / "proof",
    "payments": ROOT / "functions" / "payments",
    "infra": ROOT / "infra",
}

#: The floors, lowest first: a module's name matches exactly one floor's patterns
#: (``pkg.*``: the package and everything in it; a bare name: that module only).
FLOORS: tuple[tuple[str, tuple[str, ...]], ...] = (
    # once.batchresponse: Lambda's rule for a batch response, below both emulations of
    # Lambda (once.testing and oncecli.localcloud), named so that it stays here.
    # once.invocation, once.twophase, once.staged: the batch processor's invocation and its
    # two modes' runners, below it (once.processor imports them, never the other way).
    (
        "runtime",
        ("once", "once.*", "once.batchresponse", "once.invocation", "once.twophase", "once.staged"),
    ),
    ("construct", ("once_cdk", "once_cdk.*")),
    (
        "local cloud",
        (
            "oncecli",
            "oncecli.localcloud",
            "oncecli.localcloud.*",
            "oncecli.aws",
            "oncecli.consumers",
            "oncecli.errors",
            "oncecli.project",
        ),
    ),
    (
        "commands",
        (
            "oncecli.operate",
            "oncecli.dlq",
            "oncecli.redrive",
            "oncecli.logs",
            "oncecli.invoke",
            "oncecli.testing",
            "oncecli.testing.*",
        ),
    ),
    ("entry point", ("oncecli.cli",)),
    ("proof", ("proof", "proof.*", "payments", "payments.*", "infra", "infra.*")),
)

#: The packages whose modules may not form a circle.
PRODUCT = ("once", "once_cdk", "oncecli")


def _modules() -> dict[str, Path]:
    found = {}
    for top, folder in SOURCES.items():
        for path in folder.rglob("*.py"):
            parts = [top, *path.relative_to(folder).with_suffix("").parts]
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


MODULES = _modules()


def _known(name: str) -> str | None:
    """``name`` or the closest package above it that is one of ours."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _imports(name: str, path: Path) -> set[str]:
    """The modules of ours that ``name`` imports, anywhere in its file."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str | None] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found.update(_known(alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                source = ".".join([*base, *([node.module] if node.module else [])])
            else:
                source = node.module or ""
            for alias in node.names:
                submodule = f"{source}.{alias.name}"
                found.add(submodule if submodule in MODULES else _known(source))
    return {m for m in found if m is not None and m != name}


GRAPH = {name: _imports(name, path) for name, path in MODULES.items()}


def _floor(module: str) -> int:
    (floor,) = [
        i for i, (_, patterns) in enumerate(FLOORS) if any(fnmatchcase(module, p) for p in patterns)
    ]
    return floor


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected set of two modules or more (Tarjan), each one a circle."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph[node]):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            members = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                members.append(member)
                if member == node:
                    break
            if len(members) > 1:
                found.append(sorted(members))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_graph_sees_the_imports_it_must() -> None:
    """The reader finds what it is for: a top-level import, a lazy one, a relative one."""
    assert "once.constants" in GRAPH["once.handler"]
    assert "once.handler" in GRAPH["once"]  # inside ``__getattr__``
    assert "oncecli.localcloud.cloud" in GRAPH["oncecli.cli"]
    assert len(MODULES) > 100


@pytest.mark.parametrize("module", sorted(MODULES))
def test_every_module_stands_on_one_floor(module: str) -> None:
    matched = [floor for floor, patterns in FLOORS if any(fnmatchcase(module, p) for p in patterns)]
    assert len(matched) == 1, f"{module} is on the floors {matched}: give it exactly one"


def test_no_module_imports_one_that_imports_it() -> None:
    product = {
        name: {t for t in targets if t.split(".")[0] in PRODUCT}
        for name, targets in GRAPH.items()
        if name.split(".")[0] in PRODUCT
    }
    circles = _cycles(product)
    assert not circles, "modules that import each other:\n" + "\n".join(map(str, circles))


def test_no_package_imports_one_that_imports_it() -> None:
    """Between the top-level packages (once, once_cdk, oncecli, the proof, the example's
    payments and infra), the arrows make no circle either."""
    packages: dict[str, set[str]] = {top: set() for top in SOURCES}
    for name, targets in GRAPH.items():
        packages[name.split(".")[0]].update(t.split(".")[0] for t in targets)
    for top, targets in packages.items():
        targets.discard(top)
    circles = _cycles(packages)
    assert not circles, "packages that import each other:\n" + "\n".join(map(str, circles))


def test_imports_only_go_down() -> None:
    upward = sorted(
        f"{name} ({FLOORS[_floor(name)][0]}) imports {target} ({FLOORS[_floor(target)][0]})"
        for name, targets in GRAPH.items()
        for target in targets
        if _floor(target) > _floor(name)
    )
    assert not upward, "imports up a floor:\n" + "\n".join(upward)
