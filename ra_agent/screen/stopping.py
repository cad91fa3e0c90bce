"""Stopping rules of the screening aid: when may a team stop screening, and what does that rest on.

Statistical rules (Callaghan & Müller-Hansen 2020, "Statistical stopping criteria for automated screening in
systematic reviews", Systematic Reviews 9:273, doi 10.1186/s13643-020-01521-4): the null hypothesis is that recall
is below the target τ. With r includes found, recall < τ means at least K = floor(r / τ) + 1 - r_before includes
are in the urn the sample came from; the p-value is the hypergeometric probability of finding as few includes as
the sample did from such an urn. Stop when p < 1 - confidence.
- `buscar`: after ranked screening, the next records are drawn at random from those left (the urn); the p-value
  is of that random sample. The sample is drawn from the moment the ranked test's p falls below
  `stop_sample_from` (it then looks more likely than not that the target is met).
- `buscar_ranked`: no random sample. Each run of the latest ranked decisions is treated as if drawn at random
  from itself and the undecided records (the `calculate_h0` of PyPI buscarpy, same authors); the least p over
  those runs. It rests on the ranking putting includes no later than a random order would.
Heuristic rules (no guarantee): `recall_estimate` (the add-one include rate of the latest decisions x undecided
records), `consecutive_excludes`; `none`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TypeAlias

import numpy as np

from ra_agent.config import ScreenConfig

Labels: TypeAlias = "Sequence[int] | np.ndarray"  # 1 include, 0 exclude, in the order decided
STATISTICAL = ("buscar", "buscar_ranked")


@dataclass(frozen=True)
class StopStatus:
    """The stopping aid after the decisions made: the rule, its estimate and whether it says stop."""

    rule: str
    screened: int
    total: int
    includes: int
    stop: bool
    reason: str  # what the verdict rests on, one line
    estimated_left: float = 0.0  # recall_estimate: add-one include rate of the recent decisions x undecided records
    estimated_recall: float = 0.0  # recall_estimate: found / (found + left)
    consecutive_excludes: int = 0
    p_value: float | None = None  # statistical rules: p of "recall < target" (None: too few decisions to test)
    recall_bound: float | None = None  # statistical rules: recall >= this with the configured confidence
    sampling: bool = False  # buscar: the next records are drawn at random from those left
    sample_from: int | None = None  # buscar: decisions made in ranked order before the random sample began
    sample_size: int = 0  # buscar: decisions in the random sample so far
    speaks_after: int = 0  # the aid says nothing about stopping before this many decisions
    target: float = 0.95  # stop_recall_target
    confidence: float = 0.95  # stop_confidence

    def lines(self) -> list[str]:
        """What `ra screen` prints: the rule, its estimate with its uncertainty, and the advice."""
        head = f"stopping aid ({self.rule}): "
        if self.screened >= self.total:
            return [head + "every record is screened"]
        if self.screened < self.speaks_after or not self.includes:
            return [head + f"silent until {self.speaks_after} decisions and one include "
                    f"({self.screened} made, {self.includes} included)"]  # fmt: skip
        out = [head + self.reason]
        if self.sampling:
            out.append(f"  the next records are drawn AT RANDOM from the {self.total - (self.sample_from or 0)} left "
                       f"after {self.sample_from} ranked decisions ({self.sample_size} drawn so far): decide each "
                       "one, they are the test's sample")  # fmt: skip
        if self.stop:
            out.append(self.advice())
        return out

    def fields(self) -> dict[str, float | int | str | bool | None]:
        """The verdict as named fields (asset metadata): the rule, the advice and the active rule's own figures. A
        statistical rule publishes its p-value and recall bound (None while it is silent); a heuristic rule
        publishes its estimate under the rule's name, never beside a statistical verdict."""
        out: dict[str, float | int | str | bool | None] = {"stop_rule": self.rule, "stop": self.stop,
                                                           "stop_reason": self.reason}  # fmt: skip
        out["stop_advice"] = " | ".join(line.strip() for line in self.lines())
        if self.rule in STATISTICAL:
            out |= {"stop_p_value": self.p_value, "stop_recall_bound": self.recall_bound,
                    "stop_recall_target": self.target, "stop_confidence": self.confidence}  # fmt: skip
        if self.rule == "buscar":
            out |= {"stop_sampling": self.sampling, "stop_sample_from": self.sample_from,
                    "stop_sample_size": self.sample_size}  # fmt: skip
        elif self.rule == "recall_estimate":
            out |= {"recall_estimate_includes_left": self.estimated_left,
                    "recall_estimate_recall": self.estimated_recall}  # fmt: skip
        elif self.rule == "consecutive_excludes":
            out["consecutive_excludes"] = self.consecutive_excludes
        return out

    def advice(self) -> str:
        """The line that says stopping is advised, with what the advice assumes."""
        if self.rule not in STATISTICAL:
            return f"  you may stop ({self.rule}: a heuristic, no guarantee)"
        said = f"  you may stop: recall >= {self.target:.0%} with {self.confidence:.0%} confidence"
        return said + (", if the ranking puts includes no later than a random order would (buscar_ranked)"
                       if self.rule == "buscar_ranked" else "")  # fmt: skip


def speaks_after(total: int, screen: ScreenConfig) -> int:
    """Decisions before the aid says anything about stopping (at least one include is needed too)."""
    return max(1, math.ceil(screen.stop_min_screened * total))


def h0_pvalue(k: int, urn: int, needed: int, drawn: int) -> float:
    """P(at most k includes in `drawn` records from an urn of `urn` holding `needed` includes): the p-value of
    "recall < target" (needed = the fewest includes the urn must hold for that)."""
    from scipy.stats import hypergeom

    if needed <= k or needed > urn:
        return 1.0 if needed <= k else 0.0
    return float(hypergeom.cdf(k, urn, needed, drawn))


def needed_left(found: int, found_before: int, target: float) -> int:
    """Fewest includes the urn must hold for recall < target: floor(found / target) + 1 - found before the urn."""
    return math.floor(found / target + 1e-9) + 1 - found_before


def ranked_pvalue(labels: Labels, total: int, target: float) -> float:
    """buscar_ranked: the least p over the runs of the latest decisions, each run taken as a sample of itself and the
    undecided records. Among runs holding the same number of includes the longest gives the least p, so only the
    runs that start just after an include (or at the first decision) are tested."""
    from scipy.stats import hypergeom

    y = np.asarray(labels, dtype=np.int64)
    n, found = len(y), int(y.sum())
    if not found:
        return 1.0
    starts = np.concatenate([[0], np.flatnonzero(y == 1) + 1])  # a run starts at 0 or just after an include
    starts = starts[starts < n]
    before = np.concatenate([[0], np.cumsum(y)])[starts]  # includes found before each run
    k, drawn, urn = found - before, n - starts, total - starts
    needed = np.floor(found / target + 1e-9).astype(np.int64) + 1 - before
    testable = (needed > k) & (needed <= urn)
    if (needed[~testable] > urn[~testable]).any():
        return 0.0  # an urn too small to hold the includes recall < target needs
    if not testable.any():
        return 1.0
    k, urn, needed, drawn = k[testable], urn[testable], needed[testable], drawn[testable]
    return float(np.min(hypergeom.cdf(k, urn, needed, drawn)))


def recall_bound(labels: Labels, total: int, start: int, confidence: float) -> float:
    """Recall >= this with `confidence`, from the sample labels[start:] of the urn left after `start` decisions: the
    largest includes-left count the sample does not reject at that level (bisection), as recall found / possible."""
    y = np.asarray(labels, dtype=np.int64)
    found, before = int(y.sum()), int(y[:start].sum())
    k, drawn, urn = found - before, len(y) - start, total - start
    alpha = 1 - confidence
    lo, hi = k, urn - (drawn - k)  # the urn holds between k and (all but the sample's excludes) includes
    if h0_pvalue(k, urn, hi, drawn) >= alpha:
        return round(found / (before + hi), 4) if before + hi else 0.0
    while hi - lo > 1:  # invariant: p(lo) >= alpha > p(hi)
        mid = (lo + hi) // 2
        if h0_pvalue(k, urn, mid, drawn) >= alpha:
            lo = mid
        else:
            hi = mid
    return round(found / (before + lo), 4) if before + lo else 0.0


def ranked_recall_bound(labels: Labels, total: int, confidence: float) -> float:
    """buscar_ranked's recall bound: the best bound over the runs it tests."""
    y = np.asarray(labels, dtype=np.int64)
    starts = np.concatenate([[0], np.flatnonzero(y == 1) + 1])
    return max((recall_bound(y, total, int(s), confidence) for s in starts if s < len(y)), default=0.0)


def sample_start(labels: Labels, total: int, screen: ScreenConfig) -> int | None:
    """buscar: the decisions made in ranked order before the random sample began: the first point (after the aid
    speaks) where the ranked test's p fell below `stop_sample_from`; None while ranked screening goes on."""
    y = np.asarray(labels, dtype=np.int64)
    found = np.cumsum(y)
    for n in range(speaks_after(total, screen), len(y) + 1):
        if found[n - 1] and ranked_pvalue(y[:n], total, screen.stop_recall_target) < screen.stop_sample_from:
            return n
    return None


def heuristic_estimate(labels: Labels, total: int, screen: ScreenConfig) -> tuple[float, float, int]:
    """(estimated includes left, estimated recall, current run of excludes): the add-one include rate of the last
    `stop_window` decisions, or of the current run of excludes when longer, x the undecided records."""
    screened, found = len(labels), int(sum(labels))
    streak = 0
    for label in reversed(labels):
        if label:
            break
        streak += 1
    window = list(labels)[-max(screen.stop_window, streak) :] if screened else []
    rate = (sum(window) + 1) / (len(window) + 1)  # add-one: a run of excludes never reads as "none left"
    left = round(rate * (total - screened), 1)
    return left, (round(found / (found + left), 4) if found + left > 0 else 0.0), streak


def stop_status(labels_in_order: Labels, total: int, screen: ScreenConfig,
                sample_from: int | None = None) -> StopStatus:  # fmt: skip
    """The stopping aid over the decisions in the order made (`screen.stop_rule`). buscar: `sample_from` = where
    the random sample began (None: found from the labels by `sample_start`)."""
    labels = [int(x) for x in labels_in_order]
    screened, found = len(labels), sum(labels)
    target, confidence = screen.stop_recall_target, screen.stop_confidence
    left, recall, streak = heuristic_estimate(labels, total, screen)
    quiet = speaks_after(total, screen)
    base = StopStatus(screen.stop_rule, screened, total, found, False, "", estimated_left=left, estimated_recall=recall,
                      consecutive_excludes=streak, speaks_after=quiet, target=target, confidence=confidence)  # fmt: skip
    if screened >= total:
        return replace(base, stop=True, reason="all records screened")
    enough = screened >= quiet and found > 0
    if screen.stop_rule == "buscar_ranked":
        if not enough:
            return replace(base, reason="too few decisions to test")
        p = ranked_pvalue(labels, total, target)
        bound = ranked_recall_bound(labels, total, confidence)
        why = (f"p = {p:.3f} that recall < {target:.0%} (the latest ranked runs taken as random samples); "
               f"recall >= {bound:.0%} with {confidence:.0%} confidence")  # fmt: skip
        return replace(base, stop=p < 1 - confidence, reason=why, p_value=round(p, 4), recall_bound=bound)
    if screen.stop_rule == "buscar":
        start = sample_from if sample_from is not None else sample_start(labels, total, screen)
        if not enough or start is None:
            why = (f"ranked screening; the random sample starts when the ranked test's p < {screen.stop_sample_from:g}"
                   if enough else "too few decisions to test")  # fmt: skip
            return replace(base, reason=why)
        drawn = screened - start
        k = found - sum(labels[:start])
        if not drawn:
            return replace(base, reason="the random sample starts now", sampling=True, sample_from=start)
        p = h0_pvalue(k, total - start, needed_left(found, found - k, target), drawn)
        bound = recall_bound(labels, total, start, confidence)
        why = (f"p = {p:.3f} that recall < {target:.0%} ({k} includes in a random sample of {drawn} of the "
               f"{total - start} left); recall >= {bound:.0%} with {confidence:.0%} confidence")  # fmt: skip
        stop = p < 1 - confidence
        return replace(base, stop=stop, reason=why, p_value=round(p, 4), recall_bound=bound, sampling=not stop,
                       sample_from=start, sample_size=drawn)  # fmt: skip
    if screen.stop_rule == "recall_estimate":
        met = recall >= target
        why = f"estimated recall {recall:.0%} (target {target:.0%}; {left:g} includes estimated left, a heuristic)"
    elif screen.stop_rule == "consecutive_excludes":
        met = streak >= screen.stop_consecutive_excludes
        why = f"{streak} consecutive excludes (rule: {screen.stop_consecutive_excludes}; a heuristic)"
    else:
        met, why = False, "no stopping rule ([screen] stop_rule = none)"
    return replace(base, stop=met and enough, reason=why)


@dataclass(frozen=True)
class StopPoint:
    """Where a rule first advised stopping on one screening order."""

    rule: str
    screened: int  # decisions made when the aid first said stop
    total: int
    recall: float  # share of the includes found by then
    sample_from: int | None = None  # buscar: ranked decisions before the random sample

    @property
    def share(self) -> float:
        return self.screened / self.total


def first_stop(labels_in_order: Labels, screen: ScreenConfig, *, seed: int = 0) -> StopPoint:
    """Replay a screening order (labels in the model's order) through `screen.stop_rule`. buscar: from the point
    its sample begins, the rest of the records come in a random order drawn with `seed` (as `ra screen` draws them),
    not the model's."""
    y = np.asarray(labels_in_order, dtype=np.int64)
    total, includes = len(y), int(y.sum())
    start = None
    if screen.stop_rule == "buscar":
        start = sample_start(y, total, screen)
        if start is not None:
            rest = np.random.default_rng(seed).permutation(y[start:])
            y = np.concatenate([y[:start], rest])
    found = np.cumsum(y)
    at = total
    if screen.stop_rule in STATISTICAL:
        target = screen.stop_recall_target
        alpha = 1 - screen.stop_confidence
        for n in range(max(speaks_after(total, screen), (start or 0) + 1), total + 1):
            if not found[n - 1]:
                continue
            if start is not None:
                k = int(found[n - 1] - found[start - 1]) if start else int(found[n - 1])
                p = h0_pvalue(k, total - start, needed_left(int(found[n - 1]), int(found[n - 1]) - k, target),
                              n - start)  # fmt: skip
            elif screen.stop_rule == "buscar":
                break  # the random sample never started: screened to the end in ranked order
            else:
                p = ranked_pvalue(y[:n], total, target)
            if p < alpha:
                at = n
                break
    else:
        at = next((n for n in range(1, total + 1) if stop_status(y[:n], total, screen).stop), total)
    return StopPoint(screen.stop_rule, at, total, round(float(found[at - 1]) / includes, 4) if includes else 1.0,
                     start)  # fmt: skip


def hypergeometric_best(labels_in_order: Labels, screen: ScreenConfig) -> int:
    """Hindsight ceiling for rules on the hypergeometric test: ranked screening up to the point where the target
    recall is reached (known only in hindsight), then the smallest sample of the records left that, finding no
    include, gives p < 1 - confidence; the records screened by then. Not a strict bound (a run that starts earlier
    is a different test and can end a few records sooner when few are left), a measure of what the test can give."""
    from scipy.stats import hypergeom

    y = np.asarray(labels_in_order, dtype=np.int64)
    total, includes = len(y), int(y.sum())
    found = np.cumsum(y)
    at = int(np.argmax(found >= math.ceil(screen.stop_recall_target * includes))) + 1
    r, urn = int(found[at - 1]), total - at
    needed = needed_left(r, r, screen.stop_recall_target)
    if needed > urn:
        return at
    alpha = 1 - screen.stop_confidence
    lo, hi = 0, urn  # p(0 includes in a sample of hi) = 0 < alpha
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if hypergeom.pmf(0, urn, needed, mid) < alpha:
            hi = mid
        else:
            lo = mid
    return at + hi
