"""The ``trajectory`` marker's arguments, checked: every error names the test and the argument."""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from ..core import contract
from ..core.substrate import Prepare
from ..errors import did_you_mean

MARK_NAME = "@pytest.mark.trajectory"
#: The ceilings of ``steps`` (a trajectory length to project) and ``rounds`` (each a test item).
MAX_COUNTS = {"steps": 1_000_000, "rounds": 10_000}


class Mark(Protocol):
    """What a pytest ``Mark`` has that the marker's parser reads."""

    @property
    def args(self) -> tuple[Any, ...]: ...
    @property
    def kwargs(self) -> Mapping[str, Any]: ...


@dataclass(frozen=True)
class Trajectory:
    """The ``trajectory`` marker's arguments, checked."""

    steps: int | None = None
    rounds: int | None = None
    timeout: float | None = None
    substrates: tuple[str, ...] | None = None
    #: FUNC(sandbox): the setup every rollout's sandbox gets before its steps (not steps).
    prepare: Callable[[Any], object] | None = None

    @classmethod
    def from_marker(
        cls, mark: Mark | None, test: str = "", known: Collection[str] | None = None
    ) -> Trajectory:
        """The marker's arguments; a ValueError naming the argument and ``test`` if one is bad.

        ``known``: the substrate names ``substrates`` may use (default: any).
        """
        if mark is None:
            return cls()
        at = f" in {test}" if test else ""
        if mark.args:
            raise ValueError(f"{MARK_NAME}{at}: takes keyword arguments only, got {mark.args!r}")
        unknown = set(mark.kwargs) - {"steps", "rounds", "timeout", "substrates", "prepare"}
        if unknown:
            raise ValueError(f"{MARK_NAME}{at}: unknown argument(s) {', '.join(sorted(unknown))}")
        kwargs = mark.kwargs
        for name in ("steps", "rounds"):
            value = kwargs.get(name)
            most = MAX_COUNTS[name]
            if value is not None and (type(value) is not int or not 1 <= value <= most):
                raise _bad_argument(name, value, at, f"expected an integer from 1 to {most:,}")
        timeout = kwargs.get("timeout")
        try:
            contract.check_timeout(timeout)
        except ValueError:
            raise _bad_argument(
                "timeout", timeout, at, "expected a positive finite number of seconds"
            ) from None
        prepare = kwargs.get("prepare")
        if prepare is not None and not callable(prepare):
            raise _bad_argument("prepare", prepare, at, "expected a function of the sandbox")
        return cls(
            prepare=prepare,
            steps=kwargs.get("steps"),
            rounds=kwargs.get("rounds"),
            timeout=timeout,
            substrates=_substrate_names(kwargs.get("substrates"), at, known),
        )

    def preparation(self, nodeid: str, param_id: str) -> Prepare | None:
        """The ``prepare`` of the rollout ``nodeid`` (parameter ``param_id``), keyed by the test
        without that parameter: the test's rounds share one prepared snapshot."""
        if self.prepare is None:
            return None
        return Prepare(nodeid.replace(f"[{param_id}]", "").replace(param_id, ""), self.prepare)


def _bad_argument(name: str, value: Any, at: str, problem: str) -> ValueError:
    return ValueError(f"{MARK_NAME}({name}={value!r}){at}: {problem}")


def _substrate_names(value: Any, at: str, known: Collection[str] | None) -> tuple[str, ...] | None:
    """The marker's ``substrates`` as names, each one of ``known``."""
    if value is None:
        return None
    names = value.split(",") if isinstance(value, str) else value
    if not isinstance(names, (list, tuple)) or not all(isinstance(n, str) for n in names):
        raise _bad_argument("substrates", value, at, "expected a list of names")
    names = tuple(name.strip() for name in names)
    if not names:
        raise _bad_argument("substrates", value, at, "expected at least one substrate name")
    unknown = [name for name in names if known is not None and name not in known]
    if unknown:
        listed = ", ".join(map(repr, unknown))
        raise _bad_argument(
            "substrates",
            value,
            at,
            f"unknown substrate{'s' if len(unknown) > 1 else ''} {listed}"
            f"{did_you_mean(unknown[0], known or ())}; "
            f"known substrates: {', '.join(sorted(known or ()))}",
        )
    return names
