"""Fair samples of a stream: seeded bottom-k (reservoir) sampling, per stratum if asked.

Each case gets a priority from a keyed hash of the seed and its conversation's
digest (plus its position in the stream when duplicates are kept); a stratum
keeps the ``n`` cases of smallest priority seen so far in a bounded heap. That is
reservoir sampling with random keys: every subset of size ``n`` is equally
likely, the result does not depend on the order of the input or on the file
size, and the same seed over the same traffic gives the same sample. Memory is
``n`` cases per stratum (one stratum unless stratified).

Quotas: proportional (``n`` split over strata by their sizes, largest remainders
first, ties by stratum name) or equal (``per_stratum``: ``n`` from every stratum).
A stratum smaller than its quota, or a stream smaller than ``n``, gives all it
has and a warning saying so.

Drawing before building (:meth:`Sampler.draw`): the items offered are cheap
references, and a case is built only for those drawn. A reference that turns out
unusable (its conversation refused, a duplicate of a case already drawn) is
replaced by the next in priority order; ``spare`` more per stratum are kept for
that, and :class:`SampleExhausted` is raised when they run out (the caller then
builds every case instead).
"""

from __future__ import annotations

import hashlib
import heapq
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["SampleExhausted", "Sampler", "Stratum"]


class SampleExhausted(Exception):
    """:meth:`Sampler.draw` ran out of spare references in a stratum that held more than it kept."""


@dataclass
class Stratum:
    """One stratum's population and what the sample took from it."""

    population: int = 0
    """Cases offered (after duplicates, errors and skips were removed)."""
    quota: int = 0
    """Cases asked of it."""
    taken: int = 0
    """Cases in the sample."""
    heap: list[tuple[int, int, Any]] = field(default_factory=list, repr=False)


class Sampler:
    """Seeded bottom-k sampling of cases, overall or per stratum (see the module docstring)."""

    def __init__(
        self,
        n: int,
        *,
        seed: int = 0,
        per_stratum: bool = False,
        keep_duplicates: bool = False,
        spare: int = 0,
    ) -> None:
        if n < 1:
            raise ValueError("a sample needs n >= 1")
        self.n = n
        self.spare = max(0, spare)
        """References kept beyond ``n`` per stratum, to replace unusable ones (:meth:`draw`)."""
        self.per_stratum = per_stratum
        self.keep_duplicates = keep_duplicates
        self._hash = hashlib.blake2b(digest_size=8, key=str(seed).encode())
        """Keyed by the seed; copied for each priority."""
        self.strata: dict[str, Stratum] = {}

    def priority(self, digest: str, seq: int) -> int:
        """The random key: a hash of the seed, the conversation and (keeping duplicates) its position."""
        data = f"{digest}:{seq}" if self.keep_duplicates else digest
        h = self._hash.copy()
        h.update(data.encode())
        return int.from_bytes(h.digest(), "big")

    def offer(self, stratum: str, digest: str, seq: int, item: Any) -> None:
        """Consider ``item`` (the ``seq``-th case of the stream) for stratum ``stratum``."""
        s = self.strata.get(stratum)
        if s is None:
            s = self.strata[stratum] = Stratum()
        s.population += 1
        entry = (-self.priority(digest, seq), seq, item)
        if len(s.heap) < self.n + self.spare:
            heapq.heappush(s.heap, entry)
        elif entry[0] > s.heap[0][0]:  # a smaller priority than the largest kept
            heapq.heapreplace(s.heap, entry)

    def _quotas(self) -> None:
        if self.per_stratum:
            for s in self.strata.values():
                s.quota = self.n
            return
        total = sum(s.population for s in self.strata.values())
        if total <= self.n:
            for s in self.strata.values():
                s.quota = s.population
            return
        shares = {name: self.n * s.population / total for name, s in self.strata.items()}
        for name, s in self.strata.items():
            s.quota = int(shares[name])
        left = self.n - sum(s.quota for s in self.strata.values())
        order = sorted(self.strata, key=lambda k: (-(shares[k] - int(shares[k])), k))
        for name in order[:left]:
            self.strata[name].quota += 1

    def result(self) -> tuple[list[Any], list[str]]:
        """The sampled items in stream order, and warnings (a stratum or stream smaller than asked)."""
        self._quotas()
        chosen: list[tuple[int, Any]] = []
        warnings: list[str] = []
        for name in sorted(self.strata):
            s = self.strata[name]
            kept = sorted(s.heap, key=lambda e: -e[0])[: s.quota]  # smallest priorities first
            s.taken = len(kept)
            chosen.extend((seq, item) for _, seq, item in kept)
            if self.per_stratum and s.taken < self.n:
                warnings.append(f"stratum {name!r} has only {s.taken} case(s), fewer than the {self.n} asked")
            s.heap = []
        total = sum(s.population for s in self.strata.values())
        if not self.per_stratum and total < self.n:
            warnings.append(f"only {total} case(s) to sample from, fewer than the {self.n} asked")
        chosen.sort(key=lambda e: e[0])
        return [item for _, item in chosen], warnings

    def draw(self, build: Callable[[Any], Any | None]) -> tuple[list[Any], list[str]]:
        """Like :meth:`result`, building the items drawn: ``build(item)`` gives the case, or ``None``.

        An item whose ``build`` gives ``None`` leaves its stratum's population and
        the next in priority order takes its place; quotas are then worked out
        again over the corrected populations (each item is built at most once).

        Raises:
            SampleExhausted: a stratum ran out of items while it had offered more
                than it kept.
        """
        built: dict[int, Any] = {}
        held = {name: s.population <= len(s.heap) for name, s in self.strata.items()}
        ranked = {name: sorted(s.heap, key=lambda e: -e[0]) for name, s in self.strata.items()}
        while True:
            self._quotas()
            before = sum(s.population for s in self.strata.values())
            chosen: list[tuple[int, Any]] = []
            for name in sorted(self.strata):
                s = self.strata[name]
                taken = 0
                for _, seq, item in ranked[name]:
                    if taken == s.quota:
                        break
                    if seq not in built:
                        built[seq] = case = build(item)
                        if case is None:
                            s.population -= 1
                    case = built[seq]
                    if case is not None:
                        chosen.append((seq, case))
                        taken += 1
                if taken < s.quota and not held[name]:
                    raise SampleExhausted(name)
                s.taken = taken
            if sum(s.population for s in self.strata.values()) == before:
                break
        warnings: list[str] = []
        for name in sorted(self.strata):
            s = self.strata[name]
            if self.per_stratum and s.taken < self.n:
                warnings.append(f"stratum {name!r} has only {s.taken} case(s), fewer than the {self.n} asked")
            s.heap = []
        total = sum(s.population for s in self.strata.values())
        if not self.per_stratum and total < self.n:
            warnings.append(f"only {total} case(s) to sample from, fewer than the {self.n} asked")
        chosen.sort(key=lambda e: e[0])
        return [case for _, case in chosen], warnings
