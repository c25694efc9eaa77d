"""The package's layout keeps its promises (docs/architecture.md), read from the source alone."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "pytest_rollout_tax"
NAME = PACKAGE.name
#: The wings, from the bottom up: each imports only those before it.
WINGS = (
    "core", "text", "substrates", "fleet", "replay", "report", "train_logs", "recording", "gate",
    "summary", "telemetry", "page", "integrations", "outputs", "plugin", "cli",
)  # fmt: skip
#: The only wings that may import pytest.
PYTEST_WINGS = ("plugin", "integrations", "outputs")
MAX_LINES = 500
MAX_TOP_MODULES = 6


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def imports(name: str) -> set[str]:
    """Every module of the package ``name`` imports (type-checking imports too), and every
    outside top-level package it imports."""
    path = MODULES[name]
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                module = ".".join([*base, node.module] if node.module else base)
            else:
                module = node.module or ""
            submodules = {f"{module}.{alias.name}" for alias in node.names}
            found |= (submodules & MODULES.keys()) or {module}
    return {m if m.startswith(NAME) else m.split(".")[0] for m in found} - {name}


GRAPH = {name: {m for m in imports(name) if m in MODULES} for name in MODULES}


def wing(name: str) -> str | None:
    parts = name.split(".")
    return parts[1] if len(parts) > 2 or (len(parts) == 2 and parts[1] in WINGS) else None


def cycle() -> list[str] | None:
    """One import cycle among the package's modules, or None (a package importing its own
    submodules, as an ``__init__`` re-exporting them does, is no cycle)."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for dep in sorted(GRAPH[node]):
            if dep.startswith(node + ".") or node.startswith(dep + "."):
                continue
            if state.get(dep) == 1:
                return [*stack[stack.index(dep) :], dep]
            if dep not in state and (found := visit(dep)):
                return found
        stack.pop()
        state[node] = 2
        return None

    for name in GRAPH:
        if name not in state and (found := visit(name)):
            return found
    return None


def test_the_package_has_no_import_cycle():
    assert cycle() is None


@pytest.mark.parametrize("name", [n for n in MODULES if wing(n) == "core"])
def test_core_imports_only_core_and_the_errors(name):
    upward = {m for m in GRAPH[name] if m != f"{NAME}.errors" and wing(m) != "core"}
    assert not upward, f"{name} imports {sorted(upward)}"


@pytest.mark.parametrize("name", [n for n in MODULES if wing(n)])
def test_a_wing_imports_only_the_wings_below_it(name):
    here = WINGS.index(wing(name))
    upward = {m for m in GRAPH[name] if wing(m) and WINGS.index(wing(m)) > here}
    assert not upward, f"{name} imports {sorted(upward)}"


def test_only_the_plugin_and_the_integrations_import_pytest():
    importers = {name for name in MODULES if {"pytest", "_pytest"} & imports(name)}
    assert importers
    assert {wing(name) for name in importers} <= set(PYTEST_WINGS), sorted(importers)


@pytest.mark.parametrize("name", list(MODULES))
def test_no_module_is_over_the_line_limit(name):
    lines = MODULES[name].read_text().count("\n")
    assert lines <= MAX_LINES, f"{name}: {lines} lines"


def test_few_modules_lie_at_the_top_and_each_wing_says_what_it_is_for():
    top = [path for path in PACKAGE.glob("*.py")]
    assert len(top) <= MAX_TOP_MODULES, sorted(p.name for p in top)
    for name in WINGS:
        docstring = ast.get_docstring(ast.parse((PACKAGE / name / "__init__.py").read_text()))
        assert docstring, name


def test_the_checks_see_what_they_check():
    """Guards against a walker that finds nothing: known edges are seen."""
    assert f"{NAME}.core.record" in GRAPH[f"{NAME}.core.sandbox"]
    assert f"{NAME}.core.sandbox" in GRAPH[f"{NAME}.core.substrate"]
    assert "pytest" in imports(f"{NAME}.plugin.hooks")


def test_an_output_is_one_module_the_plugin_never_names():
    """Outputs are found by discovery (plugin/hooks.py's pytest_addhooks): the plugin imports no
    output that implements the hook, and each such output declares its own option (but the
    terminal summary, always printed)."""
    outputs = [n for n in MODULES if wing(n) == "outputs" and n != f"{NAME}.outputs"]
    hooked = [n for n in outputs if "def pytest_rollout_tax_report" in MODULES[n].read_text()]
    expected = {"json_file", "html_page", "terminal_summary"}
    assert {n.rsplit(".", 1)[1] for n in hooked} >= expected
    plugin = {m for n in MODULES if wing(n) == "plugin" for m in GRAPH[n]}
    assert not plugin & set(hooked), sorted(plugin & set(hooked))
    for name in hooked:
        if name != f"{NAME}.outputs.terminal_summary":
            assert "def pytest_addoption" in MODULES[name].read_text(), name


def stash_keys(name: str) -> tuple[set[str], set[str]]:
    """The stash keys module ``name`` defines (``KEY = pytest.StashKey[...]()``) and those it
    reads or writes (``config.stash[KEY]``, ``.stash.get(KEY)``, ``KEY in config.stash``)."""
    tree = ast.parse(MODULES[name].read_text())

    def is_stash(node: ast.AST) -> bool:
        return isinstance(node, ast.Attribute) and node.attr == "stash"

    defined, used = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and "StashKey" in ast.unparse(node.value):
            defined |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        elif isinstance(node, ast.Subscript) and is_stash(node.value):
            used.add(ast.unparse(node.slice))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if is_stash(node.func.value) and node.args:
                used.add(ast.unparse(node.args[0]))
        elif isinstance(node, ast.Compare) and any(map(is_stash, node.comparators)):
            used.add(ast.unparse(node.left))
    return defined, used


def test_no_output_reads_the_config_stash():
    """An output is handed the session's outcome (outputs/outcome.py) and hands back its
    result: nothing reaches it, or leaves it, through pytest's config stash. An output may keep
    its own state there between its hooks (an exporter's URL checked at configure time), under
    keys of its own that no other module names."""
    outputs = [n for n in MODULES if wing(n) == "outputs"]
    assert f"{NAME}.outputs.html_page" in outputs
    for name in outputs:
        defined, used = stash_keys(name)
        assert used <= defined, f"{name} reads stash keys it does not own: {used - defined}"
        for other in MODULES:
            text = MODULES[other].read_text() if other != name else ""
            leaked = [key for key in defined if f"import {key}" in text or f".{key}]" in text]
            assert not leaked, f"{other} reads {name}'s stash keys {leaked}"
    assert stash_keys(f"{NAME}.plugin.hooks")[1], "the walker sees a stash where there is one"


def test_the_report_wing_holds_the_document_and_the_summary_its_text():
    """report/ makes no line of text a terminal prints: the summary's makers are in summary/."""
    report = {n for n in MODULES if wing(n) == "report"}
    assert not {f"{NAME}.report.{m}" for m in ("terminal", "lines", "table")} & report
    assert f"{NAME}.summary.sections" in GRAPH[f"{NAME}.summary.terminal"]
