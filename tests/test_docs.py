"""The documentation a newcomer reads: every link resolves, and the README stays short."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCUMENTS = [README, *sorted((ROOT / "docs").rglob("*.md"))]
README_MAX_LINES = 400

FENCE = re.compile(r"^(```|~~~)")
#: Inline code, which may wrap onto the next line of its paragraph.
INLINE_CODE = re.compile(r"`[^`]*`")
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
#: A path inside the repository, wherever a page names it (prose, code, commands).
REPO_PATH = re.compile(  # not a link target "](path)": the link check resolves those
    r"(?<![\w./-])(?<!\]\()(?:\.ci|benchmarks|docs|example_suite|images|pytest_rollout_tax|scripts|tests)"
    r"/[\w./-]*[\w/]"
)


def prose(path: Path) -> str:
    """The text of ``path`` with fenced code blocks blanked (line numbers kept)."""
    lines, fenced = [], False
    for line in path.read_text().splitlines():
        if FENCE.match(line.strip()):
            fenced = not fenced
            line = ""
        lines.append("" if fenced else line)
    return "\n".join(lines)


def line_of(text: str, position: int) -> int:
    return text.count("\n", 0, position) + 1


def slug(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link keeps its text
    text = re.sub(r"[^\w\- ]", "", text.lower())
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every heading anchor of ``path``; a repeated one gets ``-1``, ``-2``, ... as on GitHub."""
    seen: dict[str, int] = {}
    found = set()
    for line in prose(path).splitlines():
        match = HEADING.match(line)
        if not match:
            continue
        base = slug(match.group(2))
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def links(path: Path) -> list[tuple[int, str]]:
    """The targets of the inline links of ``path`` (outside code), with their line numbers."""
    text = INLINE_CODE.sub(lambda m: re.sub(r"[^\n]", " ", m.group()), prose(path))
    return [(line_of(text, m.start()), m.group(1)) for m in LINK.finditer(text)]


def broken_link(source: Path, target: str) -> str | None:
    """Why ``target`` (a link in ``source``) leads nowhere, or None when it resolves."""
    if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # https:, mailto:: not checked offline
        return None
    file_part, _, anchor = target.partition("#")
    destination = (source.parent / file_part).resolve() if file_part else source
    if not destination.is_relative_to(ROOT):
        return f"{target}: outside the repository"
    if not destination.exists():
        return f"{target}: no such file"
    if anchor and destination.suffix == ".md" and anchor not in anchors(destination):
        return f"{target}: no heading #{anchor} in {destination.relative_to(ROOT)}"
    return None


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_and_anchor_resolves(document):
    problems = [
        f"{document.relative_to(ROOT)}:{number}: {why}"
        for number, target in links(document)
        if (why := broken_link(document, target)) is not None
    ]
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_repository_path_a_page_names_exists(document):
    """`images/sandbox/packages.txt`, `python benchmarks/peers.py`: files in the repository.

    A test id in sample output (``tests/test_x.py::test_a``) stands for the user's own file.
    """
    text = document.read_text()
    missing = [
        f"{document.relative_to(ROOT)}:{line_of(text, m.start())}: {m.group()}"
        for m in REPO_PATH.finditer(text)
        if not text.startswith("::", m.end()) and not (ROOT / m.group()).exists()
    ]
    assert not missing, "\n".join(missing)


#: A Markdown file named anywhere in a page (a link, prose, a code span).
MARKDOWN_NAME = re.compile(r"[\w-]+\.md\b")
#: A relative path that climbs (``../x``), in a link or in prose.
CLIMBING_PATH = re.compile(r"(?:\.\./)+[\w.-]*")


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_document_cites_files_outside_the_project(document):
    """Every Markdown file a page names is one the repository carries, and no relative path
    leaves the repository: a reader has only what the project ships."""
    text = document.read_text()
    carried = {path.name for path in ROOT.glob("**/*.md") if not _ignored(path)}
    where = document.relative_to(ROOT)
    for name in MARKDOWN_NAME.findall(text):
        assert name in carried, f"{where} names {name}, which the repository does not carry"
    for climbing in CLIMBING_PATH.findall(text):
        target = (document.parent / climbing).resolve()
        assert target.is_relative_to(ROOT), f"{where} points outside the repository: {climbing}"
    assert "/work/" not in text, f"{where} names a path of one machine"


def _ignored(path: Path) -> bool:
    """Files outside the project's own tree: tool environments and caches."""
    return any(part.startswith(".") or part == "build" for part in path.relative_to(ROOT).parts)


def test_every_docs_page_is_linked_from_the_readme():
    linked = {
        (README.parent / target.partition("#")[0]).resolve()
        for _, target in links(README)
        if not re.match(r"^[a-z]+:", target)
    }
    orphans = [str(p.relative_to(ROOT)) for p in DOCUMENTS[1:] if p.resolve() not in linked]
    assert not orphans, f"docs pages the README does not link: {orphans}"


def test_the_readme_stays_short_and_has_a_table_of_contents():
    lines = README.read_text().splitlines()
    assert len(lines) < README_MAX_LINES, f"README.md has {len(lines)} lines"
    assert "## Contents" in lines
    assert "## Development" in lines  # other sections are added right before it


def test_the_readme_shows_the_quick_start_commands_ci_runs():
    """.ci/run runs the README's two quick-start commands; they must stay in the README."""
    readme = README.read_text()
    commands = [
        line.replace(" -p no:cacheprovider", "")
        for line in (ROOT / ".ci" / "run").read_text().splitlines()
        if line.startswith("pip install")
    ]
    assert len(commands) == 2
    for command in commands:
        assert f"\n{command} " in readme, command


def test_slug_matches_github():
    assert slug("`k8s` (alias `kubernetes`): one pod per rollout") == (
        "k8s-alias-kubernetes-one-pod-per-rollout"
    )
    assert slug("Gating: `--rollout-compare-fail METRIC.STAT:THRESHOLD`") == (
        "gating---rollout-compare-fail-metricstatthreshold"
    )
    assert slug("A rollout, phase by phase") == "a-rollout-phase-by-phase"


def test_every_plugin_option_is_in_the_readme_with_its_ini_twin():
    """A switch a user cannot find does not exist for them (``--rollout-replay-strict``)."""
    from pytest_rollout_tax.plugin.settings import OPTIONS

    readme = README.read_text()
    for flag, _, _, _, _ in OPTIONS:
        ini = flag.removeprefix("--").replace("-", "_")
        assert f"`{flag}" in readme, flag
        if flag.startswith("--rollout-"):
            assert f"`{ini}`" in readme, ini


#: Figures the docs state in more than one place (issue 47, finding 10): each claim, and where
#: it is written (file, pattern whose group is the figure). A claim must read the same
#: everywhere it is written, and be written at least twice for this to check anything.
#: (The example trajectory's spreads are generated: ``scripts/docs_figures.py``, checked below.)
REPEATED_FIGURES = {
    "local-session's step against local's, the latest run": [
        ("docs/substrates/transports.md", r"(\d+\.\d+)x(?: `local`)? at a load of \d+ on 2 cores"),
        ("docs/performance.md", r"local-session (\d+\.\d+)x local's in the latest run"),
    ],
}


@pytest.mark.parametrize("claim", REPEATED_FIGURES)
def test_a_figure_written_in_two_places_reads_the_same_in_both(claim: str) -> None:
    found = [
        (name, value)
        for name, pattern in REPEATED_FIGURES[claim]
        for value in re.findall(pattern, (ROOT / name).read_text(), re.DOTALL)
    ]
    assert len(found) >= 2, f"{claim}: written in fewer than two places: {found}"
    assert len({value for _, value in found}) == 1, f"{claim}: {found}"


def _docs_figures():
    """scripts/docs_figures.py, imported from its path (scripts/ is no package)."""
    spec = importlib.util.spec_from_file_location("docs_figures", ROOT / "scripts/docs_figures.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_each_generated_block_and_quoted_figure_is_well_formed_and_agrees() -> None:
    """Deliverable 7: every block between ``generated`` markers is a fenced block of a known
    run, and every figure the prose quotes reads the same everywhere and as its block shows."""
    figures = _docs_figures()
    assert figures.problems(DOCUMENTS) == []
    text = "".join(path.read_text() for path in DOCUMENTS)
    assert set(figures.blocks_in(text)) == set(figures.BLOCKS)  # each block is in the docs
    quoted = figures.figures_in(text)
    assert set(quoted) == set(figures.FIGURES)
    assert any(len(values) > 1 for values in quoted.values()) or len(quoted) > 1


def test_a_figure_quoted_with_two_values_or_unlike_its_block_is_named(tmp_path) -> None:
    figures = _docs_figures()
    block = "spread: worker-hours 1.42x (docker vs local)\n"
    page = tmp_path / "page.md"
    page.write_text(
        f"<!-- generated: replay-no-think -->\n```\n{block}```\n"
        "<!-- /generated: replay-no-think -->\n"
        "is <!-- figure: spread-no-think -->1.42x<!-- /figure -->, "
        "then <!-- figure: spread-no-think -->1.17x<!-- /figure -->\n"
        "<!-- generated: nope -->\n"
    )
    found = figures.problems([page])
    assert "page.md: unknown generated 'nope'" in found
    assert "page.md: a generated block without its fence or closing marker" in found
    assert "figure 'spread-no-think' quoted with 2 values: ['1.17x', '1.42x']" in found
    assert "figure 'spread-no-think' is ['1.17x', '1.42x']; its block shows ['1.42x']" in found


def test_the_script_regenerates_one_small_block_and_the_figures_read_from_it(tmp_path) -> None:
    """A real run of one small block (the full regeneration is too slow for a test): the block
    is rewritten with the run's summary, and a figure read from it in both places it is quoted."""
    figures = _docs_figures()
    small = figures.Block(("example_suite/test_agent_loop.py", "--rollout-rounds=1"))
    rollouts = figures.Figure("small", r"^local\s+(\d+)\s")
    page = tmp_path / "page.md"
    stale = "\n".join(
        [
            "<!-- generated: small -->",
            "```",
            "typed by hand",
            "```",
            "<!-- /generated: small -->",
            "<!-- figure: rollouts -->7<!-- /figure -->,",
            "<!-- figure: rollouts -->9<!-- /figure -->",
        ]
    )
    page.write_text(stale)
    catalogue = {"blocks": {"small": small}, "figures": {"rollouts": rollouts}}
    assert figures.problems([page], **catalogue)  # stale: two values
    assert figures.regenerate(["small"], [page], **catalogue) == [page]
    text = page.read_text()
    (body,) = figures.blocks_in(text)["small"]
    assert body.startswith("=") and " rollout tax " in body.splitlines()[0], body
    assert re.search(r"^local\s+1\s", body, re.MULTILINE) and "typed by hand" not in text
    assert figures.figures_in(text) == {"rollouts": ["1", "1"]}
    assert figures.problems([page], **catalogue) == []


def test_a_documented_stand_in_command_installs_what_it_imports():
    """Issue 47, finding 12: ``python -m support.e2b_server`` needs aiohttp, which only the
    ``dev`` extra installs: each block that runs a stand-in installs that extra first."""
    import tomllib

    dev = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert any(req.startswith("aiohttp") for req in dev["dev"])
    blocks = [
        block
        for page in (ROOT / "docs").rglob("*.md")
        for block in re.findall(r"```\w*\n(.*?)```", page.read_text(), re.DOTALL)
        if "python -m support." in block
    ]
    assert len(blocks) >= 3
    for block in blocks:
        before = block[: block.index("python -m support.")]
        assert "pip install -e '.[dev]'" in before, block
