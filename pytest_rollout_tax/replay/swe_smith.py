"""SWE-smith-style chat rows: no ``tool_calls``; the assistant writes its one call into its
message as XML, ``<function=bash>\\n<parameter=command>ls</parameter>\\n</function>`` (SWE-agent's
``xml_function_calling`` parser), and the next user message is the observation, after an
``OBSERVATION:`` line."""

from __future__ import annotations

import re

_FUNCTION = re.compile(r"<function=([^>]+)>\n(.*?)</function>", re.S)
_PARAMETER = re.compile(r"<parameter=([^>]+)>(.*?)</parameter>", re.S)
_EDGE_NEWLINES = re.compile(r"^\n|\n$")
#: How the observation starts (SWE-agent's XML templates).
OBSERVATION = "OBSERVATION:\n"
#: How OpenHands starts a tool's answer when the model has no function calling
#: (``fn_call_converter``): ``EXECUTION RESULT of [execute_bash]:``.
OPENHANDS_HEADER = re.compile(r"EXECUTION RESULT of \[[^\]\n]+\]:\n")
#: The names SWE-agent's XML parser takes as another's (SWE-Gym's): ``execute_bash`` is bash.
ALIASES = {"execute_bash": "bash", "finish": "submit"}


def call(text: str, aliases: dict[str, str] = ALIASES) -> tuple[str, dict[str, str]] | None:
    """The function call in an assistant message: its name (``aliases`` renamed) and
    arguments (each without the newline the format wraps a multi-line value in); None when it
    has none or several (the harness refused those as format errors: nothing ran)."""
    found = _FUNCTION.findall(text)
    if len(found) != 1:
        return None
    name, body = found[0]
    arguments = {key: _EDGE_NEWLINES.sub("", value) for key, value in _PARAMETER.findall(body)}
    return aliases.get(name.strip(), name.strip()), arguments


def observation(text: str) -> str:
    """The output of a call, without the ``OBSERVATION:`` line (or OpenHands' header) before
    it."""
    header = OPENHANDS_HEADER.match(text)
    if header:
        return text[header.end() :]
    return text[len(OBSERVATION) :] if text.startswith(OBSERVATION) else text


def openhands(text: str) -> bool:
    """Whether an observation starts with OpenHands' ``EXECUTION RESULT of [...]:`` header."""
    return OPENHANDS_HEADER.match(text) is not None
