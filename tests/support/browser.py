"""Headless Chromium (Debian's ``chromium``, installed by scripts/ensure-chromium) opening a page.

``open_page`` loads the page, untouched (it has no script), in a frame of the width asked for
(so a phone's 400 px works, though headless Chromium's window is 500 px at the least) inside a
probe page whose script measures, once everything has laid out, every ``<svg>`` (its size, its
marks, its smallest text in CSS px, its text), every table, the text each row of a card table
shows, where the sections and the verdict are, and the leaderboard's cells. It returns the
measurements with every console message.
"""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest

PROBE = """<!DOCTYPE html>
<html><body style="margin:0">
<iframe id="page" src="%(src)s" style="border:0;width:%(width)dpx;height:%(height)dpx"></iframe>
<script>
window.addEventListener("load", function () {
  var w = document.getElementById("page").contentWindow, d = w.document;
  function box(el) {
    var b = el.getBoundingClientRect();
    return {left: b.left, right: b.right, top: b.top, bottom: b.bottom};
  }
  function fontPx(text) {
    var m = text.getScreenCTM();
    var size = parseFloat(w.getComputedStyle(text).fontSize);
    return size * Math.sqrt(Math.abs(m.a * m.d - m.b * m.c));
  }
  var all = function (sel, root) {
    return Array.prototype.slice.call((root || d).querySelectorAll(sel));
  };
  var verdict = d.getElementById("verdict");
  document.body.setAttribute("data-probe", JSON.stringify({
    title: d.title,
    viewport: w.innerWidth,
    scrollWidth: d.documentElement.scrollWidth,
    sections: all("section").map(function (s) { return s.id; }),
    verdict: verdict ? {top: box(verdict).top, text: verdict.textContent} : null,
    svgs: all("svg").map(function (svg) {
      var b = box(svg), texts = all("text", svg);
      return {label: svg.getAttribute("aria-label"), width: b.right - b.left,
              height: b.bottom - b.top, top: b.top, right: b.right,
              marks: all("path, use, rect", svg).length,
              minFontPx: Math.min.apply(null, texts.map(fontPx)),
              texts: texts.map(function (t) { return t.textContent; })};
    }),
    tables: all("table").map(function (t) {
      return {css: t.className, right: box(t).right, scrollWidth: t.scrollWidth,
              clientWidth: t.clientWidth, containerWidth: t.parentElement.clientWidth};
    }),
    cards: all("table.cards tbody tr").map(function (row) {
      return {css: row.closest("table").className, text: row.innerText};
    }),
    board: all("table.board tbody tr").map(function (row) {
      return {name: row.cells[0].textContent, nameBox: box(row.cells[0]),
              hoursBox: box(row.cells[1]), hours: row.cells[1].textContent};
    })
  }));
});
</script></body></html>"""
_PROBED = re.compile(r'data-probe="([^"]*)"')
_CONSOLE = re.compile(r":CONSOLE[^\]]*\] (.*)")


@dataclass(frozen=True)
class Rendered:
    title: str
    viewport: int
    scroll_width: int
    #: The ids of the page's sections, in order.
    sections: list[str]
    #: The verdict line's top and text, or None.
    verdict: dict | None
    svgs: list[dict]
    tables: list[dict]
    #: Every row of a ``cards`` table: its table's class and the text it shows.
    cards: list[dict]
    #: The leaderboard's rows: name, worker-hours, and both cells' boxes.
    board: list[dict]
    console: list[str]


def chromium() -> str:
    """The Chromium executable, or skip the test with the reason."""
    for name in ("chromium", "chromium-browser"):
        if found := shutil.which(name):
            return found
    pytest.skip("no headless Chromium: run scripts/ensure-chromium (Debian package chromium)")


def open_page(page: Path, width: int = 1000, height: int = 2000) -> Rendered:
    """Load ``page`` in a frame of ``width`` x ``height`` CSS pixels and measure its layout."""
    executable = chromium()
    with tempfile.TemporaryDirectory() as scratch:
        copy = Path(scratch) / "page.html"
        copy.write_text(page.read_text())
        probe = Path(scratch) / "probe.html"
        probe.write_text(PROBE % {"src": copy.name, "width": width, "height": height})
        result = subprocess.run(
            [
                executable, "--headless", "--no-sandbox", "--disable-gpu",
                "--no-first-run", "--enable-logging=stderr", "--v=0",
                "--allow-file-access-from-files", f"--user-data-dir={scratch}/profile",
                f"--window-size={max(width, 500)},{height}", "--dump-dom", probe.as_uri(),
            ],
            capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
    found = _PROBED.search(result.stdout)
    assert found, f"Chromium rendered nothing (exit {result.returncode}): {result.stderr[-2000:]}"
    probed = json.loads(html.unescape(found.group(1)))
    return Rendered(
        title=probed["title"],
        viewport=probed["viewport"],
        scroll_width=probed["scrollWidth"],
        sections=probed["sections"],
        verdict=probed["verdict"],
        svgs=probed["svgs"],
        tables=probed["tables"],
        cards=probed["cards"],
        board=probed["board"],
        console=_CONSOLE.findall(result.stderr),
    )
