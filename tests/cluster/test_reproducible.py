"""The same data and config give the same clusters under the same names: ids from content, seeds fixed, stages told."""

from __future__ import annotations

import hashlib
import threading

from ra_agent.topics.lifecycle import FORMATION_STAGES, cluster_corpus
from ra_agent.topics.members import ACTIVE, cluster_members
from ra_agent.topics.organise import Stages

from .conftest import NOW, demo_store


def clusters_of(store) -> dict[str, list[int]]:
    rows = store.conn.execute("SELECT cluster_id FROM cluster_manifest WHERE status = ?", (ACTIVE,)).fetchall()
    return {r[0]: cluster_members(store, r[0]).tolist() for r in rows}


def test_two_fresh_workspaces_give_the_same_cluster_ids(tmp_path, clustered, demo, cfg, store):
    """Two workspaces clustered from the same data used to give identical members under 13 different ids (a hash of
    a timestamp); a cluster's id is now the hash of its founding members, so the second run names them alike."""
    first = clusters_of(store)
    with demo_store(tmp_path / "again.sqlite", demo.papers) as again:
        result = cluster_corpus(again, demo.features, cfg, now=NOW)
        second = clusters_of(again)
    assert len(first) >= 5 and first == second
    assert result.cluster_ids == clustered[1].cluster_ids  # in the same (size) order too
    for k, cid in enumerate(result.cluster_ids):  # the id says what the cluster was founded with
        founding = ",".join(str(p) for p in sorted(result.formation.members(k).tolist()))
        assert cid == hashlib.sha1(f"{demo.features.space}\n{founding}".encode()).hexdigest()[:12]


def test_the_clustering_tells_each_stage_as_it_starts(clustered):
    stages = clustered[2]
    assert len(stages) == FORMATION_STAGES
    assert [s.split()[0] for s in stages] == ["reducing", "HDBSCAN", "describing", "offering", "metrics"], stages
    assert stages[0].startswith("reducing 1289 vectors of 384 dimensions")


def test_a_stage_still_running_is_told_again():
    """Clustering printed nothing for 58 s (UMAP): a stage that runs on is told again every `every` seconds."""
    said: list[tuple[int, int, str]] = []
    beat = threading.Event()

    def progress(step: int, steps: int, what: str) -> None:
        said.append((step, steps, what))
        if "still running" in what:
            beat.set()

    with Stages(progress, 2, every=0.01) as say:
        say("reducing")
        assert beat.wait(10)
        say("HDBSCAN")
    assert said[0] == (0, 2, "reducing") and said[-1] == (2, 2, "done")
    beats = [w for step, _, w in said if step == 0 and w != "reducing"]
    assert beats and all(w.startswith("reducing: still running (") and w.endswith(" s in this stage)") for w in beats)
    assert (1, 2, "HDBSCAN") in said
