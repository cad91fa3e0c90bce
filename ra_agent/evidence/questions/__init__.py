"""The review-question pipeline, one question from its handbook to its dossier:
handbook -> topic -> studies -> coverage -> verdict -> dossier.

- handbook -> topic: `topic.py` reads a handbook's seed query (and the synonyms its prose lists) as a `Topic` with
  the terms and MeSH headings that find its concepts (`agent.questions.handbook_topic` opens the handbook);
- studies: `candidates.py` reads the records that may bear on the topic through the store's indexes (full-text and
  MeSH) and the corpus counts the topic's terms come from, `corpus.py` the reviews' reference lists; the judge
  (`judge.py`: `RulesJudge`, or `llm_judge.py`'s LLM) says which records are eligible trials (`trials.py`; a
  trial's reports that are not of its effects: `not_trials.py`) and whether a review's own question
  (`review_asks.py`) encompasses a question;
- coverage and verdict: `build.py` groups the eligible trials into the topic's questions, assesses which reviews
  cover each one and gives its verdict;
- dossier: `dossier.py` writes one Markdown dossier per question and questions.json;
- map: `gap_map.py` lays the questions out as an evidence-gap map (a cell per question), `gap_map_draw.py` draws
  it as gap_map.png and an offline gap_map.html (docs/gap_map.md).

`model.py` holds the shared types (`ReviewQuestion`, `CoveringReview`, `Eligibility`, `Judgement`, the verdict
names) and imports nothing of this folder. See docs/review_questions.md.
"""
