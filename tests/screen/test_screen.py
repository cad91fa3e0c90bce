"""Screening on the demo corpus's real labels: the model beats random order, decisions and models persist and replay,
exports read back through ra's own importers, bad labels fail in one line."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest
from screen_support import screen_cfg, warm_cache

from ra_agent.cli import main
from ra_agent.ingest.importers import import_file
from ra_agent.screen.export import export_decisions
from ra_agent.screen.project import decide, decisions, project_from_import, read_seed_labels, records
from ra_agent.screen.session import step, stop_status, stored_model
from ra_agent.screen.simulate import choose_priors, metrics, random_orders, simulate
from ra_agent.workspace import open_store


def test_simulation_on_the_demo_labels_beats_random_order_by_a_clear_margin(demo_labelled, demo_features):
    cfg = screen_cfg(Path("unused"))
    y = demo_labelled.labels
    priors = choose_priors(y, seed=0)
    order, m = simulate(demo_features, y, cfg.screen, seed=0, priors=priors, retrain_every=25)
    assert sorted(order.tolist()) == list(range(len(y)))  # every record once, priors first
    assert order[:2].tolist() == list(priors)
    randoms = [metrics(y[o]) for o in random_orders(y, priors, seed=0, runs=20)]
    random_wss = float(np.mean([r.wss95 for r in randoms]))
    assert m.wss95 > random_wss + 0.25, (m, random_wss)
    assert m.recall_at_10 > 2 * float(np.mean([r.recall_at_10 for r in randoms]))
    assert m.atd < 0.5 * float(np.mean([r.atd for r in randoms]))


def test_labels_shuffled_give_no_gain_over_random(demo_labelled, demo_features):
    """The same loop on labels that carry no signal finds nothing early: the margin above comes from the text."""
    cfg = screen_cfg(Path("unused"))
    y = np.random.default_rng(1).permutation(demo_labelled.labels)
    _, m = simulate(demo_features, y, cfg.screen, seed=0, retrain_every=25)
    assert m.wss95 < 0.2


def test_decisions_persist_and_a_reload_retrains_the_same_model(workspace, subset_csv, cache_dir):
    with open_store(workspace) as store:
        project = project_from_import(workspace, store, subset_csv, seed_labels=None)
        first = step(workspace, store, project)
        assert first.trained_seq == 0 and len(first.next) == workspace.screen.show_next
        shown = [r.pmid for r in first.next]
        labels = {int(r["pubmedID"]): int(r["label_included"]) for r in csv.DictReader(subset_csv.open())}
        include = next(p for p, label in labels.items() if label == 1)
        decide(store, project, include, "include", reason="head-to-head PPI trial")
        for pmid in shown[:4]:
            if pmid != include:
                decide(store, project, pmid, "exclude")
        trained = step(workspace, store, project)
        warm_cache(workspace, cache_dir)
    assert trained.trained_seq == len(decisions_of(workspace, project))
    with open_store(workspace) as store:  # a new process: same decisions, same model, same ranking
        again = step(workspace, store, project)
        row = stored_model(store, project)
    assert again.digest == trained.digest != "untrained"
    assert again.ranking == trained.ranking
    assert row is not None and row["digest"] == trained.digest and row["trained_seq"] == trained.trained_seq
    assert include not in {p for p, _ in again.ranking}  # decided records leave the queue


def decisions_of(cfg, project):
    with open_store(cfg) as store:
        return decisions(store, project)


def test_a_later_decision_replaces_an_earlier_one_and_history_replays(workspace, subset_csv):
    with open_store(workspace) as store:
        project = project_from_import(workspace, store, subset_csv)
        pmid = records(store, project)[0].pmid
        first = decide(store, project, pmid, "include")
        second = decide(store, project, pmid, "exclude", reason="not a PPI comparison")
        assert second == first + 1
        now = decisions(store, project)
        assert [(d.pmid, d.label, d.reason) for d in now] == [(pmid, 0, "not a PPI comparison")]
        assert [(d.pmid, d.label) for d in decisions(store, project, upto=first)] == [(pmid, 1)]
        with pytest.raises(Exception, match="not a record of project"):
            decide(store, project, 1, "include")


def test_seed_labels_from_the_import_and_exports_round_trip_through_ra_importers(workspace, subset_csv, tmp_path):
    with open_store(workspace) as store:
        project = project_from_import(workspace, store, subset_csv, seed_labels="label_included")
        made = decisions(store, project)
        csv_out, n_csv = export_decisions(store, project, tmp_path / "decisions.csv")
        ris_out, n_ris = export_decisions(store, project, tmp_path / "decisions.ris")
    expected = read_seed_labels(subset_csv, "label_included")
    assert {d.pmid: d.label for d in made} == expected and n_csv == n_ris == len(expected)
    assert {d.origin for d in made} == {"seed:label_included"}
    assert read_seed_labels(csv_out, "label_included") == expected  # the export's own label column
    for out in (csv_out, ris_out):
        fresh = screen_cfg(tmp_path / f"back_{out.suffix[1:]}")
        with open_store(fresh) as store:
            summary = import_file(store, out, fresh)
            assert not summary.problems
            back = {p.pmid: p.title for p in store.papers(store.all_pmids())}
        assert set(back) == set(expected)
        originals = {int(r["pubmedID"]): r["title"] for r in csv.DictReader(subset_csv.open())}
        assert all(back[p] == " ".join(originals[p].split()) for p in back if originals[p])
    assert "KW  - ra-screen: include" in ris_out.read_text()


def test_stopping_rules_on_a_replayed_order(demo_labelled, demo_features):
    """On ra's replay of the demo labels: the consecutive-excludes rule fires only after its run of excludes, and the
    recall estimate never claims the target before most includes are found."""
    cfg = screen_cfg(Path("unused"), stop_rule="recall_estimate")
    y = demo_labelled.labels
    order, _ = simulate(demo_features, y, cfg.screen, seed=0, retrain_every=25)
    seq = y[order].tolist()
    first_stop = next(i for i in range(1, len(seq) + 1) if stop_status(seq[:i], len(seq), cfg.screen).stop)
    assert sum(seq[:first_stop]) / sum(seq) >= 0.8, first_stop
    rule = screen_cfg(Path("unused"), stop_rule="consecutive_excludes", stop_consecutive_excludes=30).screen
    for i in range(1, len(seq) + 1):
        status = stop_status(seq[:i], len(seq), rule)
        tail = seq[max(0, i - 30) : i]
        if status.stop and i < len(seq):
            assert len(tail) == 30 and sum(tail) == 0


def test_cli_decide_shows_next_records_and_a_missing_label_column_is_one_line(workspace, subset_csv, capsys,
                                                                               tmp_path, cache_dir):  # fmt: skip
    config = tmp_path / "config.toml"
    config.write_text(f'[workspace]\ndata_dir = "{workspace.data_dir}"\ndemo_corpus = ""\n[ingest]\noffline = true\n')
    assert main(["--config", str(config), "screen", "--from", str(subset_csv), "--next", "3"]) == 0
    out = capsys.readouterr().out
    assert "import:ppi_subset.csv: 0 of 240 screened" in out and out.count("PMID ") == 3
    assert "stopping aid (buscar_ranked): silent until 24 decisions and one include (0 made, 0 included)" in out
    pmid = out.split("PMID ")[1].split()[0]
    assert main(["--config", str(config), "screen", "--decide", pmid, "include", "--reason", "RCT of two PPIs"]) == 0
    out = capsys.readouterr().out
    assert f"decision 1: PMID {pmid} include (RCT of two PPIs)" in out and "1 of 240 screened, 1 included" in out
    warm_cache(workspace, cache_dir)
    code = main(["--config", str(config), "screen", "simulate", str(subset_csv), "--label", "label_screened"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1
    assert "ppi_subset.csv" in err[0] and "label_screened" in err[0]


def test_an_observer_sees_every_model_and_the_replay_goes_on_past_the_last_include(demo_labelled, demo_features):
    """simulate.replay with `observe` (what bench/bench_stopping.py uses to read the model's scores for Quant): the
    same order as without it while includes remain, one model per batch the observer asks for, to the last record."""
    from ra_agent.screen.model import prepare
    from ra_agent.screen.simulate import replay

    screen = screen_cfg(Path("unused")).screen
    y = demo_labelled.labels
    prep, priors = prepare(demo_features, screen), choose_priors(y, seed=0)
    seen: list[int] = []

    def observe(fitted, order, undecided):
        assert len(order) + len(undecided) == len(y) and not set(order) & set(undecided.tolist())
        assert fitted.digest != "untrained" and len(fitted.scores) == len(y)
        seen.append(len(order))
        return 150

    plain = replay(prep, y, priors, screen, seed=0, retrain_every=150)
    observed = replay(prep, y, priors, screen, seed=0, observe=observe)
    last = int(np.flatnonzero(y[plain] == 1).max())
    assert observed[: last + 1].tolist() == plain[: last + 1].tolist()
    assert sorted(observed.tolist()) == list(range(len(y)))
    assert seen == list(range(2, len(y), 150))  # a model every 150 decisions, past the last include
    assert seen[-1] > last + 1


def test_simulate_after_the_demo_embeds_no_record_the_index_holds(tmp_path, demo_labelled, demo_features, capsys):
    """`ra screen simulate data/demo/*.csv` after the demo used to embed again the 1,289 records the demo had embedded
    (2 min of silence): the vectors come from the workspace's active index, and only records it lacks are embedded."""
    from demo_corpus import demo_rows, write_demo_subset

    from ra_agent.embed.embedder import SentenceTransformerEmbedder
    from ra_agent.screen.simulate import read_labelled_csv, simulation_features
    from ra_agent.store.vectors import VectorStore, configured_slug, emb_root, switch_active

    cfg = screen_cfg(tmp_path / "data")  # a fresh workspace: no screening cache to explain a missing embedding
    csv_path = write_demo_subset(tmp_path / "ppi_subset.csv", demo_rows()[:240])
    data = read_labelled_csv(csv_path, "label_included")
    rows = [i for i, r in enumerate(demo_labelled.records[:240]) if r.text.strip()]
    left_out = rows[-3:]  # three records the index lacks (imported after the last embedding)
    kept = [i for i in rows if i not in left_out]
    index = VectorStore.create(emb_root(cfg.data_dir) / configured_slug(cfg), model=cfg.embedding.model_name,
                               version=cfg.embedding.model_version, dim=demo_features.dense.shape[1])  # fmt: skip
    index.append([demo_labelled.records[i].pmid for i in kept], demo_features.dense[kept])  # the demo's vectors
    switch_active(cfg.data_dir, configured_slug(cfg))
    encoded: list[int] = []

    class Counting(SentenceTransformerEmbedder):
        def encode(self, texts):
            encoded.append(len(texts))
            return super().encode(texts)

    features = simulation_features(cfg, data, embedder=Counting(cfg))
    assert sum(encoded) == 3
    stored = VectorStore(emb_root(cfg.data_dir) / configured_slug(cfg))
    pmids = [data.records[i].pmid for i in kept]
    assert np.array_equal(features.dense[kept], stored.get(pmids).astype(np.float32))

    for path in (cfg.data_dir / "cache" / "screen").glob("screen-E-*"):
        path.unlink()  # the three embedded above: now every record of the CSV is in the index
    index.append([data.records[i].pmid for i in left_out], features.dense[left_out])
    config = tmp_path / "config.toml"
    config.write_text(f'[workspace]\ndata_dir = "{cfg.data_dir}"\ndemo_corpus = ""\n[ingest]\noffline = true\n')
    code = main(["--config", str(config), "screen", "simulate", str(csv_path), "--label", "label_included",
                 "--seeds", "1", "--retrain-every", "40"])  # fmt: skip
    assert code == 0 and "ppi_subset.csv: 240 records" in capsys.readouterr().out
    assert not list((cfg.data_dir / "cache" / "screen").glob("screen-E-*"))  # no record was embedded
