"""Evidence: what the trials of a question say and whether a review already answers it, one folder per concern.

Folders, each importing only those before it: `classes` (the intervention class vocabulary), `pico` (PICO
extraction and study design), `synthesis` (arm data, comparisons, pooling), `questions` (the review-question
pipeline: handbook topic -> studies -> coverage -> verdict -> dossier, kept as one QuestionSet per handbook), `sr` (the systematic-review search and its
overlap with a cluster, the alternative PICO), `prisma` (the PRISMA 2020 check, full texts, checklist, flow) and
`reports` (a goal's gap dossier and SR draft of a review question). See docs/architecture.md.
"""

from ra_agent.evidence.pico.design import publication_kinds
from ra_agent.evidence.pico.extract import PicoFileError, pico_code_version, read_pico
from ra_agent.evidence.prisma.store import load_prisma
from ra_agent.evidence.questions.dossier import set_table
from ra_agent.evidence.questions.question_set import QuestionSetError, question_set_problems
from ra_agent.evidence.questions.question_set import rules_version as questions_code_version
from ra_agent.evidence.synthesis import synthesis_code_version
from ra_agent.evidence.synthesis.report import drafts_synthesis

__all__ = ["PicoFileError", "QuestionSetError", "drafts_synthesis", "load_prisma", "pico_code_version", "publication_kinds",
           "question_set_problems", "questions_code_version", "read_pico", "set_table", "synthesis_code_version"]  # fmt: skip
