"""The intervention class table (evidence.class_table): every class a seed query names is read as that class,
agents of its classes are recognised in real records (the demo corpus), and a class word the table lacks is refused
with a one-line handbook error."""

from __future__ import annotations

import csv
import re
from pathlib import Path

import pytest

from ra_agent.agent.questions import handbook_topic
from ra_agent.agent.success import HandbookError
from ra_agent.evidence.classes import CLASSES, agents_in, classes_named, lineage
from ra_agent.evidence.questions.topic import Topic

ROOT = Path(__file__).resolve().parents[3]
DEMO = ROOT / "data" / "demo" / "Cohen_2006_ProtonPumpInhibitors.csv"
HANDBOOK = ROOT / "handbooks" / "seek_gap_ppi_gerd.md"


def _handbook(tmp_path: Path, seed: str) -> Path:
    """The demo handbook with another seed query (same prose, same fields)."""
    path = tmp_path / "handbook.md"
    text = HANDBOOK.read_text(encoding="utf-8")
    assert 'Seed_query: "proton pump inhibitors AND gastroesophageal reflux"' in text
    path.write_text(text.replace("proton pump inhibitors AND gastroesophageal reflux", seed), encoding="utf-8")
    return path


def test_the_table_is_broad_and_well_formed():
    names = [c.name for c in CLASSES]
    assert len(names) == len(set(names)) and len(names) >= 150
    for cls in CLASSES:
        assert cls.names and all(p in names for p in cls.parents), cls.name
        assert cls.source, cls.name
    groups = {m.group(1) for c in CLASSES for m in re.finditer(r"ATC ([A-Z])\d", c.source)}
    assert set("ABCGHJLMNPRS") <= groups


@pytest.mark.parametrize("cls", [c.name for c in CLASSES])
def test_every_class_name_is_read_as_that_class_in_a_seed_query(cls):
    topic = Topic.from_seed_query(f"{cls} AND chronic kidney disease")
    assert topic.intervention == (cls,), topic.describe()
    assert [c.label for c in topic.population] == ["chronic kidney disease"]


def test_class_words_reviewers_use_are_read_through_the_handbook(tmp_path):
    for seed, wanted in [
        ("antihistamines AND allergic rhinitis", "antihistamine"),
        ("estrogens AND postmenopausal women", "estrogen"),
        ("skeletal muscle relaxants AND low back pain", "muscle relaxant"),
        ("stimulants AND attention deficit hyperactivity disorder", "psychostimulant"),
        ("antimuscarinic drugs AND overactive bladder", "antimuscarinic"),
        ("SGLT2 inhibitors AND heart failure", "SGLT2 inhibitor"),
    ]:
        topic = handbook_topic(_handbook(tmp_path, seed))
        assert topic.intervention == (wanted,), (seed, topic.describe())
        assert "pharmacological treatment" in lineage(wanted)


def test_a_class_word_naming_a_condition_or_a_test_stays_in_the_population():
    opioid = Topic.from_seed_query("buprenorphine AND opioid use disorder")
    assert opioid.intervention == ("opioid",) and [c.label for c in opioid.population] == ["opioid use disorder"]
    ulcer = Topic.from_seed_query("proton pump inhibitors AND NSAID-induced ulcer")
    assert ulcer.comparator == () and [c.label for c in ulcer.population] == ["NSAID-induced ulcer"]
    breast = Topic.from_seed_query("aromatase inhibitors AND estrogen receptor-positive breast cancer")
    assert breast.intervention == ("aromatase inhibitor",) and len(breast.population) == 1
    assert agents_in("serum cholesterol and histidine") == []  # -terol, -tidine words that are no drug
    assert classes_named("tricyclic antidepressants") == ["tricyclic antidepressant"]  # not also "antidepressant"


def test_agents_of_the_new_classes_are_recognised_in_demo_records():
    rows = {r["pubmedID"]: r for r in csv.DictReader(DEMO.open(encoding="utf-8"))}

    def classes(pmid: str) -> dict[str, str]:
        row = rows[pmid]
        return {a.word: a.cls for a in agents_in(f"{row['title']} {row['abstract']}")}

    triple = classes("10343146")  # pantoprazole, amoxicillin and clarithromycin for Helicobacter pylori
    assert triple["amoxicillin"] == "penicillin" and triple["clarithromycin"] == "macrolide"
    assert triple["pantoprazole"] == "proton pump inhibitor"
    assert all("antibiotic" in lineage(triple[w]) for w in ("amoxicillin", "clarithromycin"))
    assert classes("10228801")["metronidazole"] == "nitroimidazole"
    assert classes("10179922")["diclofenac"] == "non-steroidal anti-inflammatory drug"
    chemo = classes("12174375")  # arterial 5-fluorouracil and mitomycin C for liver metastases
    assert chemo["fluorouracil"] == "antimetabolite" and "antineoplastic" in lineage(chemo["fluorouracil"])
    assert lineage(chemo["mitomycin c"])[-2:] == ("antineoplastic", "pharmacological treatment")


def test_an_unknown_class_word_is_a_one_line_handbook_error(tmp_path):
    path = _handbook(tmp_path, "acupuncture AND chronic low back pain")
    with pytest.raises(HandbookError) as caught:
        handbook_topic(path)
    message = str(caught.value)
    assert len(message.splitlines()) == 1
    assert "handbook.md" in message and ":1" in message and "Seed_query" in message
    assert "names no intervention the class table knows" in message


def test_the_treatment_causing_the_condition_is_not_the_comparator():
    from ra_agent.evidence.questions.trials import comparator_of, tested_agents
    from ra_agent.models import Paper

    row = next(r for r in csv.DictReader(DEMO.open(encoding="utf-8")) if r["pubmedID"] == "8839554")
    paper = Paper(pmid=8839554, title=row["title"], abstract=row["abstract"])
    assert "chemotherapy-induced" in paper.title and "cyclophosphamide" in paper.abstract  # background chemotherapy
    topic = Topic.from_seed_query("proton pump inhibitors AND gastroduodenal mucosal injury")
    agents = tested_agents(paper, topic)
    assert [a.word for a in agents] == ["omeprazole"]
    assert comparator_of(paper, agents, topic) == "placebo or no treatment"  # "A randomized, placebo-controlled"
