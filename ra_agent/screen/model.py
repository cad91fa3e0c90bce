"""The screening model: linear learners on TF-IDF and on ra's vectors (+ design flags), combined; query strategies."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field

import numpy as np
import scipy.sparse as sp
from sklearn.linear_model import RidgeClassifier
from sklearn.svm import LinearSVC

from ra_agent.config import ScreenConfig
from ra_agent.screen.features import FLAG_NAMES, Features

MODEL_NAME = "ra-screen-v2"  # v2: citation links beside the words


@dataclass
class Prepared:
    """Feature matrices derived once per record set (the learners refit on them after each decision)."""

    tfidf: sp.csr_matrix
    dense: np.ndarray  # centred, unit-norm vectors with the design flags appended
    neighbours: np.ndarray  # centred, unit-norm vectors (cosine to the known includes)
    terms: np.ndarray


def prepare(features: Features, screen: ScreenConfig) -> Prepared:
    """Centre ra's vectors on the record set's mean (MiniLM vectors share a large common direction) and re-normalise,
    append the design flags (scaled by `flag_weight`); append the PICO tokens (scaled by `pico_weight`) and the
    citation links (scaled by `links_weight`, when the records list references) to TF-IDF."""
    dense = np.asarray(features.dense, dtype=np.float64)
    has_text = np.linalg.norm(dense, axis=1) > 0
    if has_text.any():
        dense = dense - dense[has_text].mean(axis=0)
    norms = np.linalg.norm(dense, axis=1, keepdims=True)
    dense = np.where(norms > 0, dense / np.maximum(norms, 1e-12), 0.0)
    dense[~has_text] = 0.0
    with_flags = np.hstack([dense, features.flags * screen.flag_weight])
    tfidf = features.tfidf
    if screen.pico_weight > 0:
        tfidf = sp.csr_matrix(sp.hstack([tfidf, features.pico * screen.pico_weight]))
    if screen.links_weight > 0 and features.links is not None:
        tfidf = sp.csr_matrix(sp.hstack([tfidf, features.links * screen.links_weight]))
    return Prepared(tfidf, with_flags, dense, features.terms)


def balanced_weights(y: np.ndarray, ratio: float) -> np.ndarray:
    """Sample weights for the rare includes: the excludes together weigh 1/`ratio` of the includes' total
    (ASReview's "balanced" sampler weighting), normalised to mean 1."""
    n_in, n_ex = int((y == 1).sum()), int((y == 0).sum())
    w = np.where(y == 1, 1.0, n_in / (ratio * n_ex) if n_ex else 1.0)
    return w * (len(y) / w.sum())


def _z(scores: np.ndarray) -> np.ndarray:
    sd = scores.std()
    return (scores - scores.mean()) / sd if sd > 0 else scores * 0.0


@dataclass
class Fitted:
    """A trained model's scores over every record, its weight digest and what drives it."""

    scores: np.ndarray  # combined score, higher = more likely an include
    parts: dict[str, np.ndarray]  # each learner's rank of every row (1 = its best)
    digest: str
    top_terms: list[tuple[str, float]] = field(default_factory=list)
    coef_terms: np.ndarray | None = None  # TF-IDF learner's weights (for per-record reasons)


def _svm(x, rows: np.ndarray, y: np.ndarray, c: float, ratio: float, seed: int) -> tuple[np.ndarray, LinearSVC]:
    model = LinearSVC(C=c, loss="squared_hinge", random_state=seed)
    model.fit(x[rows], y, sample_weight=balanced_weights(y, ratio))
    return np.asarray(model.decision_function(x), dtype=np.float64), model


def fit(
    prep: Prepared,
    rows: Sequence[int] | np.ndarray,
    labels: Sequence[int] | np.ndarray,
    screen: ScreenConfig,
    seed: int,
) -> Fitted:
    """Train on the decided rows and score every row.

    Learners (they need one include and one exclude; before that the order is the record order): a linear SVM
    on TF-IDF, a ridge classifier (closed form, fast) on the centred vectors + design flags, and the cosine to the nearest known include.
    `combine = "rrf"` fuses their rankings (weight / (rrf_k + rank), so a record near the top of any one learner
    comes up), `"zsum"` sums their weighted z-scores. A learner with weight 0 is skipped.
    """
    rows_a = np.asarray(rows, dtype=np.int64)
    y = np.asarray(labels, dtype=np.int64)
    n = len(prep.dense)
    if len(set(y.tolist())) < 2:
        return Fitted(-np.arange(n, dtype=np.float64), {}, "untrained")
    raw: dict[str, tuple[float, np.ndarray]] = {}
    digest = hashlib.sha1()
    coef_terms = None
    if screen.tfidf_weight > 0:
        s, m = _svm(prep.tfidf, rows_a, y, screen.svm_c, screen.class_ratio, seed)
        raw["tfidf"] = (screen.tfidf_weight, s)
        coef_terms = m.coef_.ravel()
        digest.update(np.round(coef_terms, 8).tobytes())
    if screen.dense_weight > 0:
        ridge = RidgeClassifier(alpha=screen.dense_alpha)
        ridge.fit(prep.dense[rows_a], y, sample_weight=balanced_weights(y, screen.class_ratio))
        s, m = np.asarray(ridge.decision_function(prep.dense), dtype=np.float64), ridge
        raw["vectors"] = (screen.dense_weight, s)
        digest.update(np.round(m.coef_.ravel(), 8).tobytes())
    if screen.knn_weight > 0:
        includes = prep.neighbours[rows_a[y == 1]]
        raw["nearest include"] = (screen.knn_weight, (prep.neighbours @ includes.T).max(axis=1))
    parts: dict[str, np.ndarray] = {}
    for name, (weight, s) in raw.items():
        if screen.combine == "rrf":
            rank = np.empty(n, dtype=np.float64)
            rank[np.argsort(-s, kind="stable")] = np.arange(1, n + 1)
            parts[name] = weight / (screen.rrf_k + rank)
        else:
            parts[name] = weight * _z(s)
    scores = np.sum(list(parts.values()), axis=0) if parts else np.zeros(n)
    top: list[tuple[str, float]] = []
    if coef_terms is not None:
        best = np.argsort(-coef_terms[: len(prep.terms)])[: screen.top_terms]
        top = [(str(prep.terms[i]), round(float(coef_terms[i]), 4)) for i in best if coef_terms[i] > 0]
    ranks = {name: _ranks(s) for name, (_, s) in raw.items()}
    return Fitted(scores, ranks, digest.hexdigest(), top, coef_terms)


def _ranks(scores: np.ndarray) -> np.ndarray:
    out = np.empty(len(scores), dtype=np.int64)
    out[np.argsort(-scores, kind="stable")] = np.arange(1, len(scores) + 1)
    return out


def spec(screen: ScreenConfig, *, embedding: str, seed: int) -> str:
    """The model's full specification as canonical JSON (stored with every trained model)."""
    return json.dumps({"model": MODEL_NAME, "embedding": embedding, "seed": seed, "flags": list(FLAG_NAMES),
                       "screen": asdict(screen)}, sort_keys=True)  # fmt: skip


def choose(
    fitted: Fitted, undecided: np.ndarray, n: int, screen: ScreenConfig, rng: np.random.Generator, includes: int
) -> list[tuple[int, str]]:
    """The next `n` rows to screen with the configured query strategy, each with how it was chosen.

    max: highest score (certainty); max_explore: as max, but while fewer than `explore_until_includes`
    includes are known each pick is, with probability `explore_share`, a random undecided record;
    uncertainty: the records in the middle of the ranking (the combined score's median); random: random order.
    """
    if len(undecided) == 0:
        return []
    scores = fitted.scores[undecided]
    strategy = screen.query_strategy
    if strategy == "random":
        order = rng.permutation(len(undecided))
        return [(int(undecided[i]), "random order") for i in order[:n]]
    if strategy == "uncertainty":
        order = np.argsort(np.abs(scores - np.median(scores)), kind="stable")
        return [(int(undecided[i]), "nearest the decision boundary") for i in order[:n]]
    order = list(np.argsort(-scores, kind="stable"))
    picked: list[tuple[int, str]] = []
    explore = strategy == "max_explore" and includes < screen.explore_until_includes
    taken: set[int] = set()
    for _ in range(min(n, len(undecided))):
        if explore and rng.random() < screen.explore_share:
            pool = [i for i in range(len(undecided)) if i not in taken]
            i = int(pool[int(rng.integers(len(pool)))])
            why = "exploration (random pick)"
        else:
            i = int(next(j for j in order if j not in taken))
            why = "highest score"
        taken.add(i)
        picked.append((int(undecided[i]), why))
    return picked


def reasons(fitted: Fitted, prep: Prepared, row: int, flags: np.ndarray, k: int = 3) -> str:
    """Why a row scores as it does: the TF-IDF terms pulling it towards include, its design flags, each learner."""
    bits = []
    if fitted.coef_terms is not None:
        vec = prep.tfidf[row]
        keep = vec.indices < len(prep.terms)  # the words (the PICO tokens follow them)
        vec.data, vec.indices = vec.data[keep], vec.indices[keep]
        contrib = vec.data * fitted.coef_terms[vec.indices]
        best = np.argsort(-contrib)[:k]
        terms = [str(prep.terms[vec.indices[i]]) for i in best if contrib[i] > 0]
        if terms:
            bits.append("terms " + ", ".join(repr(t) for t in terms))
    names = [FLAG_NAMES[i] for i in np.flatnonzero(flags) if FLAG_NAMES[i] != "design: none found"]
    if names:
        bits.append(f"{'; '.join(names)} ({'rules'})")
    if fitted.parts:
        bits.append("rank by " + ", ".join(f"{name} #{part[row]}" for name, part in fitted.parts.items()))
    return " | ".join(bits) or "no cue"
