"""The page's change-point section: a gated run with history shows the latest change point of each
series (testbed, figure, size, beyond the noise or not, run, date); too little history is said
in a line; an ungated run has no such section."""

from __future__ import annotations

from html.parser import HTMLParser

from support.reports import COLD, report, rollouts

from pytest_rollout_tax.gate.history import ChangePoint
from pytest_rollout_tax.gate.latest import Latest
from pytest_rollout_tax.page import html as html_report

BED = "local Linux x86_64, 4 CPUs, local, exec"
POINT = ChangePoint(BED, "local.step.p95", "0012_ab12cd", 0.003, 0.006, 1e-6, 0.0002,
                    "2026-12-05T10:00:00Z")  # fmt: skip


class Section(HTMLParser):
    """The text of one ``<section id=...>``'s table cells and list items."""

    def __init__(self, anchor: str) -> None:
        super().__init__()
        self.anchor, self.inside, self.cells, self.items = anchor, False, [], []
        self.current: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "section":
            self.inside = ("id", self.anchor) in attrs
        elif self.inside and tag in ("td", "li"):
            self.current = []

    def handle_endtag(self, tag: str) -> None:
        if tag == "section":
            self.inside = False
        elif self.current is not None and tag in ("td", "li"):
            (self.cells if tag == "td" else self.items).append("".join(self.current).strip())
            self.current = None

    def handle_data(self, data: str) -> None:
        if self.current is not None:
            self.current.append(data)


def section(page: str) -> Section:
    parsed = Section("change-points")
    parsed.feed(page)
    return parsed


def test_the_latest_change_point_is_on_the_page_with_its_size_and_date() -> None:
    note = f"change points: docker on [{BED}]: none over 9 saved run(s)"
    page = html_report.render(report(rollouts("local", COLD)), history=Latest((POINT,), (note,), 9))
    found = section(page)
    assert found.cells == [BED, "local.step.p95", "3ms", "6ms", "+100.0%", "15.0", "yes",
                           "0012_ab12cd", "2026-12-05T10:00:00Z"]  # fmt: skip
    assert found.items == [note]
    assert 'href="#change-points"' in page


def test_too_little_history_is_said_on_the_page() -> None:
    line = f"change points: local on [{BED}]: 1 saved run(s) on this testbed, 3 needed: none"
    page = html_report.render(
        report(rollouts("local", COLD)), history=Latest(notes=(line,), runs=1)
    )
    assert section(page).items == [line] and section(page).cells == []


def test_an_ungated_run_has_no_change_point_section() -> None:
    page = html_report.render(report(rollouts("local", COLD)))
    assert 'id="change-points"' not in page
