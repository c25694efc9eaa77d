"""The substrates of one session: one Substrate per selected name, made on first use, with
their warm pools."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

from ..core.pool_stats import PoolStats
from ..core.record import Rollout
from ..core.sandbox import Sandbox
from ..core.substrate import Prepare, Substrate
from ..core.transport import OUTPUT_CAP
from ..errors import RolloutTaxError, SubstrateUnavailable
from ..substrates.registry import Registry
from ..substrates.selection import SubstrateSpec
from .pool import WarmPool
from .reuse import Recycler

log = logging.getLogger(__name__)
#: Seconds the session waits, at its end, for the cleanups of creates it abandoned (a create
#: past its budget is awaited so that what it makes late is deleted, not left behind).
LATE_CREATE_WAIT_S = 30.0


@dataclass
class Substrates:
    """One Substrate per name per process, created lazily; a failure to create is remembered."""

    specs: dict[str, SubstrateSpec]
    registry: Registry
    session_id: str
    #: Bytes of each output stream a step keeps, on every substrate.
    output_cap: int = OUTPUT_CAP
    _substrates: dict[str, Substrate] = field(default_factory=dict)
    _errors: dict[str, RolloutTaxError] = field(default_factory=dict)
    _warm: dict[str, WarmPool] = field(default_factory=dict)
    _recyclers: dict[str, Recycler] = field(default_factory=dict)

    def validate(self) -> None:
        """Check every spec's options now, so a bad value is a usage error, not N failures.

        A substrate whose SDK is not installed is left for its rollouts to report.
        """
        for spec in self.specs.values():
            try:
                substrate_class = self.registry.load(spec.kind)
            except SubstrateUnavailable:
                continue
            parsed = substrate_class.parse(spec.options, owner=spec.name)
            substrate_class.check_usage(parsed, owner=spec.name)

    def get(self, name: str) -> Substrate:
        """The substrate ``name``; raises the same RolloutTaxError for every rollout if broken."""
        if name in self._errors:
            raise self._errors[name]
        if name not in self._substrates:
            spec = self.specs[name]
            try:
                substrate = self.registry.create(
                    spec.name, spec.kind, session_id=self.session_id, **spec.options
                )
            except RolloutTaxError as exc:
                self._errors[name] = exc
                raise
            substrate.output_cap = self.output_cap
            self._substrates[name] = substrate
        return self._substrates[name]

    def start(
        self,
        name: str,
        rollout: Rollout,
        *,
        timeout: float | None = None,
        prepare: Prepare | None = None,
    ) -> Sandbox:
        """A fresh sandbox of ``name`` for ``rollout``, prepared if asked: claimed from its
        warm pool if it has one (``pool=K``; ``prepare`` then runs on the claimed sandbox, in
        its cold start, as phase ``prepare``); with ``reuse="reset"`` (and no ``prepare``), a
        used one reset (fleet/reuse.py); else cold-started."""
        substrate = self.get(name)
        if substrate.options.reuse == "reset" and prepare is None:
            recycler = self._recyclers.setdefault(name, Recycler(substrate))
            return recycler.start(rollout, timeout=timeout)
        warm = self.warm_pool(name)
        if warm is None:
            return substrate.start(rollout, timeout=timeout, prepare=prepare)
        sandbox = warm.claim(rollout, timeout=timeout)
        if prepare is not None:
            started = time.perf_counter()
            try:
                prepare(sandbox)
            except BaseException:
                sandbox.close()
                raise
            rollout.phases["prepare"] = time.perf_counter() - started
            rollout.cold_start_s = (rollout.cold_start_s or 0.0) + rollout.phases["prepare"]
        return sandbox

    def warm_pool(self, name: str) -> WarmPool | None:
        """The warm pool of ``name`` (made, and filling, from its first claim on), or None
        without ``pool=K``. Each process has its own: under xdist, one pool per worker."""
        substrate = self.get(name)
        if substrate.options.pool < 1:
            return None
        if name not in self._warm:
            self._warm[name] = WarmPool(substrate, substrate.options.pool)
        return self._warm[name]

    def close_pools(self) -> dict[str, PoolStats]:
        """Destroy every unclaimed pooled sandbox, ``pool=K``'s and the pools the substrates'
        services keep (k8s claim mode's); what each pool did, by substrate name."""
        for recycler in self._recyclers.values():
            recycler.close()
        self._recyclers.clear()
        stats = {}
        for name, warm in self._warm.items():
            warm.close()
            stats[name] = warm.stats
        self._warm.clear()
        for name, substrate in self._substrates.items():
            if (own := substrate.close_own_pool()) is not None:
                found = [stats[name].to_record()] if name in stats else []
                stats[name] = PoolStats.merge([*found, own.to_record()])
        return stats

    def reap_session(self, names: list[str] | None = None) -> int:
        """Remove whatever this session left behind on ``names`` (default: those in use), once
        the creates it abandoned have been cleaned up (:meth:`settle`)."""
        self.settle()
        removed = 0
        for name in names if names is not None else list(self._substrates):
            try:
                removed += self.get(name).reap(self.session_id)
            except RolloutTaxError as exc:
                log.warning("rollout-tax: could not reap %s: %s", name, exc)
        return removed

    def settle(self, timeout: float = LATE_CREATE_WAIT_S) -> None:
        """Wait up to ``timeout`` seconds in all for the cleanups of abandoned creates; a
        create still unanswered then is left to the session's reap and is logged."""
        deadline = time.monotonic() + timeout
        for name, substrate in self._substrates.items():
            late = substrate.late_creates
            if not late.settle(max(0.0, deadline - time.monotonic())):
                log.warning(
                    "rollout-tax: %s: %d abandoned create(s) still unanswered", name, late.pending
                )

    def reap_leftovers(self) -> Iterator[tuple[str, int | RolloutTaxError]]:
        """Remove what any session left on every substrate: per name, how many, or why not."""
        for name in self.specs:
            try:
                yield name, self.get(name).reap(None)
            except RolloutTaxError as exc:
                yield name, exc

    def close(self) -> None:
        self.close_pools()
        self.settle()
        for substrate in self._substrates.values():
            substrate.close()
        self._substrates.clear()
