"""What every export reader shares: the items a reader yields (a Paper, a ParseProblem, a FieldWarning on the record
after it), author names and MeSH headings as exports write them, and an export's lines."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from ra_agent.ingest.medline import clean
from ra_agent.models import Paper, ParseProblem

_INITIALS_FIRST = re.compile(r"^((?:[A-Z]\.?\s+)+)(\S.*)$")  # "K D Bardhan", "S. Müller-Lissner"


Record = Paper | ParseProblem


@dataclass(frozen=True)
class FieldWarning:
    """A note on the record that follows it in the stream: a defect it loads despite (no title, unreadable year, no
    closing ER), or, with `defect=False`, a plain fact (loaded under a DOI id); kept apart from skipped ones.

    A record with a defect is loaded as a new record or when it equals the stored one: it never changes a stored
    record (import_file)."""

    problem: ParseProblem
    defect: bool = True


def author_name(raw: str) -> str:
    """'K D Bardhan' / 'Bardhan, K. D.' → 'Bardhan KD' (PubMed's "Last Initials"); other shapes unchanged."""
    name = clean(raw)
    last, comma, given = name.partition(",")
    if comma and given.strip():
        initials = "".join(part[0] for part in re.split(r"[\s.\-]+", given) if part)
        return f"{last.strip()} {initials.upper()}"
    if match := _INITIALS_FIRST.match(name):
        return f"{match.group(2)} {re.sub(r'[^A-Z]', '', match.group(1))}"
    return name


def mesh_headings(values: Iterable[str]) -> list[str]:
    """MeSH descriptors of an export's keyword/MH field: "Anticoagulants/*therapeutic use" → "Anticoagulants"
    (qualifiers and the major-topic star dropped, duplicates once, order kept)."""
    return list(dict.fromkeys(d for d in (v.strip().lstrip("*").split("/")[0].strip() for v in values) if d))


def qualified_headings(values: Iterable[str]) -> list[str]:
    """The keyword/MH entries that carry subheadings or a major-topic star, as written ("Anticoagulants/*therapeutic
    use", "*Fibrin"): what `Paper.mesh_terms` keeps; empty when the export gave bare descriptors only."""
    kept = [" ".join(v.split()) for v in values]
    return kept if any("/" in v or v.startswith("*") for v in kept) else []


def export_lines(path: Path) -> Iterator[str]:
    """The file's lines, streamed (line endings kept; a BOM dropped). check_text_file has vetted the encoding."""
    with path.open(encoding="utf-8-sig", newline="") as fh:
        yield from fh


__all__ = ["FieldWarning", "Record", "author_name", "export_lines", "mesh_headings", "qualified_headings"]
