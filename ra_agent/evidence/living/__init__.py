"""Living evidence: every evaluation of a handbook's questions kept append-only (`history.py`), what changed between
two evaluations (`changes.py`: new studies, verdict transitions, new reviews, new questions) and who is told
(`notify.py`: a webhook URL or a command). It reads `evidence.questions`' `QuestionSet` and never judges anything
itself. See docs/living_evidence.md.
"""
