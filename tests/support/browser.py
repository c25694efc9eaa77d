"""Headless Chromium (Debian's ``chromium``, installed by scripts/ensure-chromium) opening a page.

``open_page`` loads a copy of the page with a probe script appended (the page itself has no
script) that measures every ``<svg>`` and the page's width once it has laid out, and returns
the measurements with every console message Chromium logged.
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

PROBE = """<script>
document.body.setAttribute("data-probe", JSON.stringify({
  viewport: window.innerWidth,
  scrollWidth: document.documentElement.scrollWidth,
  svgs: Array.from(document.querySelectorAll("svg")).map(function (svg) {
    var box = svg.getBoundingClientRect();
    return {label: svg.getAttribute("aria-label"), width: box.width, height: box.height,
            marks: svg.querySelectorAll("path, use, rect").length};
  })
}));
</script>"""
_PROBED = re.compile(r'data-probe="([^"]*)"')
_CONSOLE = re.compile(r":CONSOLE[^\]]*\] (.*)")


@dataclass(frozen=True)
class Rendered:
    viewport: int
    scroll_width: int
    svgs: list[dict]
    console: list[str]


def chromium() -> str:
    """The Chromium executable, or skip the test with the reason."""
    for name in ("chromium", "chromium-browser"):
        if found := shutil.which(name):
            return found
    pytest.skip("no headless Chromium: run scripts/ensure-chromium (Debian package chromium)")


def open_page(page: Path, width: int = 1000, height: int = 2000) -> Rendered:
    """Load ``page`` at ``width`` x ``height`` CSS pixels and measure what it laid out."""
    executable = chromium()
    with tempfile.TemporaryDirectory() as scratch:
        probed = Path(scratch) / "probed.html"
        probed.write_text(page.read_text().replace("</body>", PROBE + "</body>"))
        result = subprocess.run(
            [
                executable, "--headless", "--no-sandbox", "--disable-gpu",
                "--no-first-run", "--enable-logging=stderr", "--v=0",
                f"--user-data-dir={scratch}/profile", f"--window-size={width},{height}",
                "--dump-dom", probed.as_uri(),
            ],
            capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
    found = _PROBED.search(result.stdout)
    assert found, f"Chromium rendered nothing (exit {result.returncode}): {result.stderr[-2000:]}"
    probe = json.loads(html.unescape(found.group(1)))
    return Rendered(
        viewport=probe["viewport"],
        scroll_width=probe["scrollWidth"],
        svgs=probe["svgs"],
        console=_CONSOLE.findall(result.stderr),
    )
