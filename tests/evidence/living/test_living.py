"""Living evidence on real records: CD006468's catheter records (tests/fixtures/gaps) imported in time order, the
handbook's questions judged after each step, every evaluation kept in its history and the changes named with the
studies and reviews that caused them; a corrupt history is named by file and line and the next evaluation still
appends; two evaluations at once never interleave; the webhook and command are told, and a failing one never fails
the evaluation."""

from __future__ import annotations

import json
import logging
import multiprocessing
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from gaps_replay import DEMO, DEMO_HANDBOOK, HANDBOOK, SUBSET, gaps_rows, review_versions, write_years, year_of

from ra_agent.agent.living import set_changes, set_history
from ra_agent.agent.questions import load_question_set, questions_root
from ra_agent.cli import main
from ra_agent.config import load_config
from ra_agent.evidence.living.changes import ASKED, NEW, Changes
from ra_agent.evidence.living.history import Evaluation, append_evaluation, read_history
from ra_agent.workspace import open_store

CONFIG = '[workspace]\ndata_dir = "data"\ndemo_corpus = ""\n[ingest]\noffline = true\n[llm]\nbrain = "rules"\n'


def project(tmp_path: Path, extra: str = "") -> Path:
    (tmp_path / "config.toml").write_text(CONFIG + extra)
    return tmp_path / "config.toml"


def step(config: Path, after: int, upto: int, clean: bool = True, source: Path = SUBSET,
         handbook: Path = HANDBOOK) -> tuple[object, Changes]:  # fmt: skip
    """Import the records of `source` published in (after, upto], judge the handbook's questions, return the set and
    its changes (its history `clean`: every line readable)."""
    csv = write_years(config.parent / f"records_{after}_{upto}.csv", after, upto, source)
    assert main(["--config", str(config), "import", str(csv)]) == 0
    cfg = load_config(config, environ={})
    with open_store(cfg) as store:
        qset = load_question_set(cfg, store, handbook)
    changes, problems = set_changes(cfg, qset)
    assert changes is not None and (not problems) == clean
    return qset, changes


def test_replay_to_2007_2011_and_the_rest_names_each_review_version_and_the_trials_between(tmp_path, capsys):
    """Issue 36's replay with the default knobs: the first version of CD006468 covers the topic's question, the 2011
    versions take over with the trials published between them named, the 2014 version covers it again."""
    config = project(tmp_path)
    years, versions = year_of(), review_versions()
    first = min(versions, key=lambda p: (versions[p], p))  # 17636845, the 2007 version

    qset, changes = step(config, 0, 2007)
    topic = qset.topic_question
    assert changes.before is None and changes.transitions == []  # nothing to compare with yet
    assert topic.verdict == "covered" and topic.covering.pmid == first
    assert "first evaluation" in changes.summary()

    qset, changes = step(config, 2007, 2011)
    topic = qset.topic_question
    change = next(c for c in changes.questions if c.id == topic.id)
    assert change.kind == ASKED and (change.verdict_before, change.verdict_after) == ("covered", "covered")
    assert topic.covering.pmid in versions and versions[topic.covering.pmid] == 2011  # a 2011 version of CD006468
    assert change.covering_before["pmid"] == first and change.covering_after["pmid"] == topic.covering.pmid
    new = {p for reports in change.new_studies.values() for p in reports}
    assert new == {19217991, 19567452} and all(2007 < years[p] <= 2011 for p in new)  # trials of 2009
    assert {r["pmid"] for r in change.new_reviews} >= {p for p, y in versions.items() if y == 2011}
    assert change.new_reports == {"s-15767643": [18317868]}  # a 2008 report of a study counted in 2005
    words = change.words()
    assert "2 new studies: PMID 19217991; PMID 19567452" in words
    assert f"covered by PMID {topic.covering.pmid} (2011) (was PMID {first} (2007))" in words
    # with [sr] update_after_trials = 3, two trials between the 2008 reviews and the 2011 version warrant no update
    assert not any(q.verdict == "covered, update warranted" for q in qset.questions)

    qset, changes = step(config, 2011, 9999)
    topic = qset.topic_question
    latest = max(versions, key=versions.get)
    assert topic.covering.pmid == latest == 25318061
    change = next(c for c in changes.questions if c.id == topic.id)
    # the one trial record of 2012 (22958287) locks catheters with heparin: part of the device, no new study
    assert change.new_studies == {} and years[22958287] == 2012
    assert 22958287 not in topic.trials
    assert [r["pmid"] for r in change.new_reviews] == [latest]
    assert changes.transitions == []  # no question new, no verdict moved: the 2014 version covers what 2011 did

    # the history holds the three evaluations, changes.md the latest comparison, --changes prints them in words
    cfg = load_config(config, environ={})
    history = set_history(cfg, qset.key)
    assert [e.records for e in history.evaluations] == [249, 325, 420] and not history.problems
    folder = questions_root(cfg) / qset.key
    assert (folder / "changes.md").read_text(encoding="utf-8") == changes.markdown()
    capsys.readouterr()
    assert main(["--config", str(config), "questions", str(HANDBOOK), "--changes"]) == 0
    out = capsys.readouterr().out
    assert f"new review PMID {latest} (2014)" in out and "PMID 22958287" not in out
    assert main(["--config", str(config), "questions", str(HANDBOOK), "--since", "2000-01-01"]) == 0
    out = capsys.readouterr().out
    assert out.count("## ") == 3 and "first evaluation" in out and "PMID 19217991" in out


def test_a_yearly_replay_shows_gap_to_covered_update_warranted_and_covered_again(tmp_path):
    """The same records by year with [sr] update_after_trials = 2 and min_eligible_trials = 5 (a team that wants the
    warning at two trials, and five trials of 1995-2005 as enough for a review): the 2005 gap is covered by the
    2006 review, the 2009 trials after the 2008 reviews warrant an update, and the 2011 version of CD006468 covers
    the question again."""
    config = project(tmp_path, "[sr]\nupdate_after_trials = 2\nmin_eligible_trials = 5\n")
    years, versions = year_of(), review_versions()
    qset, changes = step(config, 0, 2005)
    topic_id = qset.topic_question.id
    assert qset.topic_question.verdict == "gap"

    qset, changes = step(config, 2005, 2006)
    change = next(c for c in changes.transitions if c.id == topic_id)
    assert (change.verdict_before, change.verdict_after) == ("gap", "covered")
    covering = change.covering_after["pmid"]
    assert years[covering] == 2006 and covering in {r["pmid"] for r in change.new_reviews}
    assert "gap -> covered" in change.words() and f"covered by PMID {covering} (2006)" in change.words()

    qset, changes = step(config, 2006, 2008)
    assert qset.topic_question.verdict == "covered" and years[qset.topic_question.newest.pmid] == 2008

    qset, changes = step(config, 2008, 2010)
    change = next(c for c in changes.transitions if c.id == topic_id)
    assert (change.verdict_before, change.verdict_after) == ("covered", "covered, update warranted")
    newest = qset.topic_question.newest.pmid
    assert change.trials_since == [19217991, 19567452] and all(years[p] > years[newest] for p in change.trials_since)
    assert f"2 trials since PMID {newest} (2008): PMID 19217991, PMID 19567452" in change.words()

    qset, changes = step(config, 2010, 2011)
    change = next(c for c in changes.transitions if c.id == topic_id)
    assert (change.verdict_before, change.verdict_after) == ("covered, update warranted", "covered")
    assert versions.get(change.covering_after["pmid"]) == 2011  # a 2011 version of CD006468 covers it again
    assert "covered, update warranted -> covered" in change.words()


def test_the_demo_corpus_replayed_by_year_names_the_reviews_and_trials_of_each_step(tmp_path, capsys):
    """The bundled demo corpus (records of 1992-2003) imported up to 2000, up to 2001, then the rest, the demo
    handbook's questions judged after each step with the default knobs. What ra reports is checked against the
    records themselves: a new study is a record of the step's years, every verdict that moved is named, a question
    turns covered only by a review of the step (a record whose title says review), and an update is warranted
    exactly where the trials after the question's newest review, by the records' years, reach [sr]
    update_after_trials."""
    config = project(tmp_path)
    years = year_of(DEMO)
    titles = {int(r["pubmedID"]): r["title"] for r in gaps_rows(DEMO)}
    update_after = load_config(config, environ={}).sr.update_after_trials
    before: dict[str, str] = {}  # question id -> its verdict at the step before
    for after, upto in [(-1, 2000), (2000, 2001), (2001, 9999)]:  # -1: the records without a year come first
        qset, changes = step(config, after, upto, source=DEMO, handbook=DEMO_HANDBOOK)
        arrived = {p for p, y in years.items() if after < y <= upto}
        assert changes.after.records == sum(1 for y in years.values() if y <= upto)
        topic = qset.topic_question
        for q in qset.questions:  # trials since the newest review, by the records' years
            if q.newest is not None:
                assert q.newest.year == years[q.newest.pmid]
                since = sorted(r[0] for r in q.studies.values() if years[r[0]] > years[q.newest.pmid])
                assert list(q.trials_since) == since
                assert (q.verdict == "covered, update warranted") == (len(since) >= update_after), q.id
        if not before:
            assert changes.before is None and changes.transitions == [] and topic.verdict == "gap"
        else:
            moved = {q.id for q in qset.questions if q.id in before and before[q.id] != q.verdict}
            assert moved and {c.id for c in changes.transitions if c.kind == ASKED} == moved
            for change in changes.questions:
                assert change.kind == NEW or change.verdict_before == before[change.id]
                for reports in change.new_studies.values():  # a new study: reports of this step's records
                    assert set(reports) <= arrived, (change.id, reports)
                assert {p for r in change.new_reports.values() for p in r} <= arrived
                for review in change.new_reviews:
                    assert review["pmid"] in arrived and "review" in titles[review["pmid"]].lower()
                if change.covering_changed:
                    assert change.covering_after["pmid"] in {r["pmid"] for r in change.new_reviews}
                if change.kind == ASKED and change.verdict_after.startswith("covered"):
                    assert change.verdict_before.startswith("covered") or change.covering_changed
            change = next(c for c in changes.transitions if c.id == topic.id)
            words = change.words()
            assert f"{change.verdict_before} -> {change.verdict_after}" in words
            assert change.new_studies and f"PMID {sorted(change.new_studies.values())[0][0]}" in words
        if upto == 2001:  # the first review answering the topic's question: gap -> covered
            covering = topic.covering.pmid
            assert (change.verdict_before, change.verdict_after) == ("gap", "covered")
            assert years[covering] == 2001 and f"covered by PMID {covering} (2001) (was none)" in words
        if upto == 9999:  # trials after the newest review reach the knob: covered -> update warranted
            assert (change.verdict_before, change.verdict_after) == ("covered", "covered, update warranted")
            assert years[topic.newest.pmid] > 2001 and len(topic.trials_since) >= update_after
        before = {q.id: q.verdict for q in qset.questions}

    capsys.readouterr()
    assert main(["--config", str(config), "questions", str(DEMO_HANDBOOK), "--since", "2000-01-01"]) == 0
    out = capsys.readouterr().out
    assert out.count("## ") == 3 and "gap -> covered" in out and "covered -> covered, update warranted" in out


def test_a_corrupt_history_is_named_by_line_and_the_next_evaluation_still_appends(tmp_path, capsys, caplog):
    config = project(tmp_path)
    qset, _ = step(config, 0, 2007)
    cfg = load_config(config, environ={})
    path = set_history(cfg, qset.key).path
    good = path.read_bytes()
    path.write_bytes(good + b"{not json}\n" + good[: len(good) // 2])  # a line edited by hand, then a torn one
    history = read_history(path)
    assert len(history.evaluations) == 1 and len(history.problems) == 2
    assert history.problems[0].startswith(f"{path}:2: not an evaluation")
    assert history.problems[1].startswith(f"{path}:3: a torn last line")
    assert all("\n" not in p for p in history.problems)

    with caplog.at_level(logging.WARNING):
        qset, changes = step(config, 2007, 2011, clean=False)  # the next evaluation runs, appends on a line of its own
    assert f"{path}:3: a torn last line" in caplog.text
    history = read_history(path)
    assert [e.line for e in history.evaluations] == [1, 4] and len(history.problems) == 2
    assert changes.before is not None and changes.before.records == 249  # compared with the last readable one
    assert path.read_bytes().startswith(good + b"{not json}\n" + good[: len(good) // 2] + b"\n")  # kept as it was
    capsys.readouterr()
    assert main(["--config", str(config), "questions", str(HANDBOOK), "--changes"]) == 0
    captured = capsys.readouterr()
    assert captured.err.splitlines() == [f"ra: {p}" for p in history.problems]
    assert "2 new studies" in captured.out


def _append_many(path: str, line: str, count: int, out) -> None:
    evaluation = Evaluation.from_dict(json.loads(line))
    out.put([len(append_evaluation(Path(path), evaluation).evaluations) for _ in range(count)])


def test_two_evaluations_at_once_never_interleave(tmp_path):
    """Two processes append a real evaluation 25 times each: every line whole, and each append read the history
    whole before it (each saw a different number of evaluations: 0 to 49)."""
    config = project(tmp_path)
    qset, _ = step(config, 0, 9999)
    line = json.dumps(Evaluation.of(qset).as_dict())
    assert len(line) > 8192  # longer than one pipe buffer: a write the kernel may split without the lock
    path = tmp_path / "concurrent.history.jsonl"
    spawn = multiprocessing.get_context("spawn")
    out = spawn.Queue()
    workers = [spawn.Process(target=_append_many, args=(str(path), line, 25, out)) for _ in range(2)]
    for w in workers:
        w.start()
    seen = out.get(timeout=120) + out.get(timeout=120)
    for w in workers:
        w.join(timeout=60)
        assert w.exitcode == 0
    history = read_history(path)
    assert len(history.evaluations) == 50 and not history.problems
    assert sorted(seen) == list(range(50))


class Hook(BaseHTTPRequestHandler):
    received: list[dict] = []
    status = 200

    def do_POST(self):  # noqa: N802 (http.server's name)
        body = self.rfile.read(int(self.headers["Content-Length"]))
        Hook.received.append(json.loads(body))
        self.send_response(Hook.status)
        self.end_headers()

    def log_message(self, *args):
        pass


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def hook_server():
    Hook.received, Hook.status = [], 200
    server = ThreadingHTTPServer(("127.0.0.1", 0), Hook)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/ra"
    finally:
        server.shutdown()
        server.server_close()


def test_the_webhook_and_the_command_are_told_and_a_failing_one_never_fails_the_run(tmp_path, hook_server, caplog):
    told = tmp_path / "told.md"
    command = f"python3 -c \"import sys; open('{told}', 'w').write(sys.stdin.read())\""
    config = project(tmp_path, f'[living]\nwebhook_url = "{hook_server}"\nwebhook_command = "{command.replace(chr(34), chr(92) + chr(34))}"\n')  # fmt: skip
    step(config, 0, 2007)
    assert Hook.received == [] and not told.exists()  # a first evaluation has nothing to tell
    _, changes = step(config, 2007, 2011)
    assert len(Hook.received) == 1
    sent = Hook.received[0]
    assert sent["summary"] == changes.summary() and any("PMID 19217991" in line for line in sent["lines"])
    assert told.read_text(encoding="utf-8") == changes.markdown()

    # the webhook answers 500, then nothing listens: logged, the evaluation is kept
    Hook.status = 500
    with caplog.at_level(logging.WARNING):
        _, changes = step(config, 2011, 2013)
    assert "webhook" in caplog.text and "HTTP Error 500" in caplog.text and changes.questions
    down = f"http://127.0.0.1:{free_port()}/ra"
    config.write_text(CONFIG + f'[living]\nwebhook_url = "{down}"\nwebhook_command = "/nonexistent/notify"\n')
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        qset, changes = step(config, 2013, 9999)
    assert f"webhook {down}: failed" in caplog.text and "command '/nonexistent/notify': failed" in caplog.text
    assert len(set_history(load_config(config, environ={}), qset.key).evaluations) == 4
