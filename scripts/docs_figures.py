#!/usr/bin/env python3
"""docs_figures: the README's and docs' example outputs and the figures their prose quotes,
regenerated from real runs, never typed.

    python scripts/docs_figures.py                  # every block, then every figure
    python scripts/docs_figures.py replay-think     # one block and the figures read from it
    python scripts/docs_figures.py --check          # no run: the markers and figures agree

A generated block is a fenced block between two markers, named after an entry of BLOCKS:

    <!-- generated: NAME -->
    ```
    ...
    ```
    <!-- /generated: NAME -->

and a figure the prose quotes is written between two markers, named after an entry of FIGURES
(the block it is read from, and a pattern whose first group is the figure):

    the spread is <!-- figure: NAME -->1.42x<!-- /figure --> here

Each block is the rollout-tax summary of its command, run now in a temporary folder with this
checkout on PYTHONPATH (copies of example_suite/ and example_trajectories/ beside it), at 80
columns; each figure is then read from its block and written everywhere it is quoted, so a
figure quoted in two places has one value. tests/test_docs.py checks the markers and the
figures without running anything, and this script on one small block.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: The width the blocks are rendered at (the summary wraps to COLUMNS).
COLUMNS = 80


@dataclass(frozen=True)
class Block:
    """An example output: the pytest arguments of its run, and how the docs show it."""

    args: tuple[str, ...]
    #: The command line shown above the summary (``$ pytest ...`` then ``...``), or None: the
    #: summary alone, from its ``rollout tax`` rule.
    shown: str | None = None


@dataclass(frozen=True)
class Figure:
    """A figure the prose quotes: the block it is read from and the pattern that finds it."""

    block: str
    pattern: str

    def read(self, body: str) -> str:
        found = re.search(self.pattern, body, re.DOTALL | re.MULTILINE)
        if found is None:
            raise ValueError(f"no match for {self.pattern!r} in the block {self.block!r}")
        return found.group(1)


REPLAY = ("--rollout-replay", "example_trajectories", "--substrate=local,docker",
          "--rollout-rounds=5")  # fmt: skip
BLOCKS = {
    "quickstart-local": Block(("example_suite",)),
    "quickstart-docker": Block(("example_suite", "--substrate=local,docker")),
    "replay-think": Block(REPLAY, shown="pytest " + " ".join(REPLAY)),
    "replay-no-think": Block(
        (*REPLAY, "--rollout-think-time=0"),
        shown="pytest " + " ".join(REPLAY) + " \\\n    --rollout-think-time=0",
    ),
}
FIGURES = {
    "spread-think": Figure("replay-think", r"worker-hours (\d+\.\d+x) \(docker vs\s+local\)"),
    "spread-no-think": Figure("replay-no-think", r"worker-hours (\d+\.\d+x) \(docker vs\s+local\)"),
    "cold-start-spread-think": Figure("replay-think", r"cold start p50 (\d[\d,.]*x) \(docker"),
    "think-share-docker": Figure("replay-think", r"docker hours:.*?think (\d+%)"),
}

_BLOCK = re.compile(
    r"<!-- generated: (?P<name>[\w-]+) -->\n```\n(?P<body>.*?)```\n<!-- /generated: (?P=name) -->",
    re.DOTALL,
)
_FIGURE = re.compile(r"<!-- figure: (?P<name>[\w-]+) -->(?P<value>.*?)<!-- /figure -->")
_OPENING = re.compile(r"<!-- (generated|figure): ([\w-]+) -->")


def doc_files(root: Path = ROOT) -> list[Path]:
    """The README and every page of docs/."""
    return [root / "README.md", *sorted((root / "docs").rglob("*.md"))]


def blocks_in(text: str) -> dict[str, list[str]]:
    """Each generated block's bodies in ``text``, by name."""
    found: dict[str, list[str]] = {}
    for match in _BLOCK.finditer(text):
        found.setdefault(match["name"], []).append(match["body"])
    return found


def figures_in(text: str) -> dict[str, list[str]]:
    """Each quoted figure's values in ``text``, by name."""
    found: dict[str, list[str]] = {}
    for match in _FIGURE.finditer(text):
        found.setdefault(match["name"], []).append(match["value"])
    return found


def problems(
    files: Iterable[Path],
    blocks: dict[str, Block] = BLOCKS,
    figures: dict[str, Figure] = FIGURES,
) -> list[str]:
    """What is wrong with the markers of ``files``, one line each: a marker with no well-formed
    pair, an unknown name, a figure quoted with two values, or one its block does not show."""
    lines: list[str] = []
    bodies: dict[str, set[str]] = {}
    values: dict[str, set[str]] = {}
    for path in files:
        text = path.read_text()
        found_blocks, found_figures = blocks_in(text), figures_in(text)
        for kind, name in _OPENING.findall(text):
            known = blocks if kind == "generated" else figures
            if name not in known:
                lines.append(f"{path.name}: unknown {kind} {name!r}")
        opened = len(re.findall(r"<!-- generated: ", text))
        if opened != sum(map(len, found_blocks.values())):
            lines.append(f"{path.name}: a generated block without its fence or closing marker")
        if len(re.findall(r"<!-- figure: ", text)) != sum(map(len, found_figures.values())):
            lines.append(f"{path.name}: a figure without its closing marker")
        for name, found in found_blocks.items():
            bodies.setdefault(name, set()).update(found)
        for name, found in found_figures.items():
            values.setdefault(name, set()).update(found)
    for name, found in bodies.items():
        if len(found) > 1:
            lines.append(f"block {name!r} reads differently in two places")
    for name, found in values.items():
        if len(found) > 1:
            lines.append(f"figure {name!r} quoted with {len(found)} values: {sorted(found)}")
        figure = figures.get(name)
        if figure is None or figure.block not in bodies:
            continue
        try:
            shown = {figure.read(body) for body in bodies[figure.block]}
        except ValueError as exc:
            lines.append(f"figure {name!r}: {exc}")
            continue
        if found != shown:
            lines.append(f"figure {name!r} is {sorted(found)}; its block shows {sorted(shown)}")
    return lines


def summary_of(output: str) -> list[str]:
    """The summary's lines: from the ``rollout tax`` rule to the next rule or report line."""
    lines = output.splitlines()
    start = next(i for i, line in enumerate(lines) if " rollout tax " in line)
    end = next(
        (i for i, line in enumerate(lines[start + 1 :], start + 1)
         if line.startswith(("==", "report written", "rollout-tax gate"))),
        len(lines),
    )  # fmt: skip
    return lines[start:end]


def run_block(block: Block, root: Path = ROOT) -> str:
    """The body ``block`` has in the docs, from a run made now."""
    with tempfile.TemporaryDirectory(prefix="docs-figures-") as work:
        for folder in ("example_suite", "example_trajectories"):
            shutil.copytree(root / folder, Path(work) / folder)
        env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
        env |= {"COLUMNS": str(COLUMNS), "PYTHONPATH": str(root)}
        command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *block.args]
        done = subprocess.run(command, cwd=work, env=env, capture_output=True, text=True)
    summary = summary_of(done.stdout)
    if block.shown is None:
        return "\n".join(summary) + "\n"
    return "\n".join([f"$ {block.shown}", "...", *summary[1:]]) + "\n"


def regenerate(
    names: Iterable[str],
    files: Iterable[Path],
    *,
    blocks: dict[str, Block] = BLOCKS,
    figures: dict[str, Figure] = FIGURES,
    run: Callable[[Block], str] = run_block,
) -> list[Path]:
    """Run each named block once, write it between its markers in ``files``, then write every
    figure read from those blocks where it is quoted; the files changed."""
    files = list(files)
    bodies = {name: run(blocks[name]) for name in names}
    quoted = {
        name: figure.read(bodies[figure.block])
        for name, figure in figures.items()
        if figure.block in bodies
    }
    changed = []
    for path in files:
        text = path.read_text()
        new = _BLOCK.sub(lambda m: _block(m["name"], bodies.get(m["name"], m["body"])), text)
        new = _FIGURE.sub(lambda m: _figure(m["name"], quoted.get(m["name"], m["value"])), new)
        if new != text:
            path.write_text(new)
            changed.append(path)
    return changed


def _block(name: str, body: str) -> str:
    return f"<!-- generated: {name} -->\n```\n{body}```\n<!-- /generated: {name} -->"


def _figure(name: str, value: str) -> str:
    return f"<!-- figure: {name} -->{value}<!-- /figure -->"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("blocks", nargs="*", metavar="BLOCK", help="default: every block")
    parser.add_argument("--check", action="store_true", help="run nothing: check the markers")
    options = parser.parse_args(argv)
    unknown = [name for name in options.blocks if name not in BLOCKS]
    if unknown:
        parser.error(f"unknown block {unknown[0]!r}; one of {', '.join(BLOCKS)}")
    if not options.check:
        changed = regenerate(options.blocks or list(BLOCKS), doc_files())
        for path in changed:
            print(f"docs_figures: rewrote {path.relative_to(ROOT)}")
    found = problems(doc_files())
    for line in found:
        print(f"docs_figures: {line}", file=sys.stderr)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
