"""The workloads users copy: the example suite and the README's documented workload."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
EXAMPLE_SUITE = ROOT / "example_suite"


def readme_workload() -> str:
    """The workload the README documents, exactly as a user would copy it."""
    readme = (ROOT / "README.md").read_text()
    block = readme.split("<!-- user-workload -->", 1)[1]
    return block.split("```python\n", 1)[1].split("```", 1)[0]


def example_modules() -> dict[str, str]:
    """The example suite's test modules, by module name."""
    return {path.stem: path.read_text() for path in sorted(EXAMPLE_SUITE.glob("test_*.py"))}
