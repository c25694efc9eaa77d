"""Read observations written by a mini-swe-agent run's own ``action_observation_template``
(``info.config.agent``): the template, a Jinja string over the command's ``output``
(``{"output", "returncode"}``), is turned into a pattern that finds them again."""

from __future__ import annotations

import ast
import re
from collections.abc import Callable

#: What a template substitutes: the output text, the exit code, or the whole dict (rendered
#: as Python writes it: ``{'output': '...', 'returncode': 0}``).
_OUTPUT = re.compile(r"output(?:\.output|\[['\"]output['\"]\])$")
_CODE = re.compile(r"output(?:\.returncode|\[['\"]returncode['\"]\])$")
_EXPRESSION = re.compile(r"\{\{-?\s*(.*?)\s*-?\}\}", re.S)

Parse = Callable[[str], "tuple[int | None, int | None] | None"]


def compile_template(template: str) -> Parse | None:
    """A reader of observations rendered by ``template``: text -> (exit code, output bytes),
    or None where the text does not match. None when the template has control blocks
    (``{% if %}``), whose renderings no single pattern covers."""
    if "{%" in template or "{#" in template:
        return None
    template = template[:-1] if template.endswith("\n") else template  # Jinja drops it
    pattern, kinds, position = [], [], 0
    for found in _EXPRESSION.finditer(template):
        pattern.append(re.escape(template[position : found.start()]))
        expression = found.group(1).split("|")[0].strip()
        kind = (
            "output" if _OUTPUT.match(expression)
            else "code" if _CODE.match(expression)
            else "dict" if expression == "output"
            else None
        )  # fmt: skip
        if kind is None:  # anything else the template shows: matched, not read
            pattern.append(".*?")
        else:
            kinds.append(kind)
            pattern.append(r"(-?\d+)" if kind == "code" else "(.*)")
        position = found.end()
    pattern.append(re.escape(template[position:]))
    if not kinds:
        return None
    compiled = re.compile("".join(pattern), re.S)

    def parse(text: str) -> tuple[int | None, int | None] | None:
        matched = compiled.fullmatch(text) or compiled.search(text)
        if matched is None:
            return None
        code = size = None
        for kind, value in zip(kinds, matched.groups(), strict=True):
            if kind == "code" and code is None:
                code = int(value)
            elif kind == "output" and size is None:
                size = len(value.encode("utf-8", "surrogatepass"))
            elif kind == "dict":
                code, size = _dict(value, code, size)
        return code, size

    return parse


def _dict(text: str, code: int | None, size: int | None) -> tuple[int | None, int | None]:
    """The exit code and output size in a rendered output dict."""
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return code, size
    if not isinstance(value, dict):
        return code, size
    output, returncode = value.get("output"), value.get("returncode")
    if isinstance(output, str) and size is None:
        size = len(output.encode("utf-8", "surrogatepass"))
    if isinstance(returncode, int) and not isinstance(returncode, bool) and code is None:
        code = returncode
    return code, size
