"""A hosted provider's credentials: the environment variables they come from, read once."""

from __future__ import annotations

import os
from dataclasses import dataclass

from ...errors import CredentialsMissing, redact


@dataclass(frozen=True)
class Credentials:
    """Where a provider's credentials come from: environment variables only (never options,
    which a report could echo), and what to tell a user who has not set them."""

    #: The variables, all required (``E2B_API_KEY``; ``MODAL_TOKEN_ID``, ``MODAL_TOKEN_SECRET``).
    variables: tuple[str, ...]
    #: What to do, after "VARIABLE is not set; ": ``export an E2B API key (URL) to run ...``.
    hint: str

    def read(self, substrate: str) -> dict[str, str]:
        """The values, stripped; CredentialsMissing (the rollouts are skipped) naming every
        variable that is unset or empty."""
        values = {name: os.environ.get(name, "").strip() for name in self.variables}
        missing = [name for name, value in values.items() if not value]
        if missing:
            verb = " is" if len(self.variables) == 1 else ""
            raise CredentialsMissing(
                f"{substrate}: {' and '.join(missing)}{verb} not set; {self.hint}"
            )
        return values

    @property
    def named(self) -> str:
        """The variables as an error message names them: ``MODAL_TOKEN_ID/MODAL_TOKEN_SECRET``."""
        return "/".join(self.variables)


class Secrets:
    """The values a substrate holds, kept out of every message it makes."""

    def __init__(self, values: list[str]) -> None:
        self.values = values

    def redact(self, value: object) -> str:
        """``str(value)`` without any credential in it."""
        return redact(str(value), self.values)
