"""The PRISMA 2020 flow of a cluster: its counts from the store and the expansion log, and the flow diagram (PNG)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from ra_agent.config import Config
from ra_agent.evidence.pico.extract import PicoRecord, is_rct
from ra_agent.fileio import atomic_writer
from ra_agent.models import Paper
from ra_agent.store.db import Store
from ra_agent.topics.expansion import expansion_history

FLOW_FIGSIZE_IN = (8, 7)
FLOW_DPI = 110


class FlowEvidence(Protocol):
    """What the flow reads of a cluster's evidence (`reports.common.ClusterEvidence`)."""

    @property
    def cluster_id(self) -> str: ...
    @property
    def papers(self) -> Sequence[Paper]: ...
    @property
    def records(self) -> Mapping[int, PicoRecord]: ...
    @property
    def eligible(self) -> Sequence[Paper]: ...


@dataclass(frozen=True)
class PrismaFlow:
    """PRISMA 2020 flow counts of a cluster, computed from the store and the expansion log."""

    identified: int  # every record ra holds (the corpus: imports, searches, expansion fetches)
    from_cluster: int  # members of the topic cluster
    from_expansion: int  # expansion candidates that did not become members
    screened: int
    excluded_screening: int  # records outside the topic cluster, expansion rejects included
    assessed: int  # members (title/abstract level)
    no_pico: int
    not_randomised: int
    missing_pio: int
    eligible: int
    included: int

    def rows(self) -> list[dict[str, Any]]:
        return [
            {"stage": "Records identified", "n": self.identified,
             "detail": "every record in the corpus (search exports, PubMed searches, expansion fetches)"},
            {"stage": "Records screened (title/abstract)", "n": self.screened,
             "detail": "by topic: embedding clusters audited by rules, then the cosine-frontier expansion"},
            {"stage": "Records excluded at screening", "n": self.excluded_screening,
             "detail": f"outside this topic cluster ({self.from_expansion} of them expansion candidates rejected "
                       "by the cosine frontier or the boundary judge)"},
            {"stage": "Reports assessed for eligibility", "n": self.assessed,
             "detail": "cluster members (abstracts; no full text)"},
            {"stage": "Excluded: no PICO record", "n": self.no_pico, "detail": ""},
            {"stage": "Excluded: not randomised", "n": self.not_randomised, "detail": "reviews included"},
            {"stage": "Excluded: randomised, P/I/O not stated", "n": self.missing_pio, "detail": ""},
            {"stage": "Eligible trials", "n": self.eligible, "detail": ""},
            {"stage": "Studies included in the synthesis", "n": self.included, "detail": ""},
        ]  # fmt: skip


def prisma_flow(cfg: Config, store: Store, ev: FlowEvidence) -> PrismaFlow:
    members = {p.pmid for p in ev.papers}
    candidates: set[int] = set()
    for run in expansion_history(cfg, ev.cluster_id):
        candidates.update(run.get("candidates", []))
    outside = candidates - members
    corpus = store.conn.execute("SELECT COUNT(*) FROM paper").fetchone()[0]
    identified = corpus + len(outside - store.existing_pmids(outside))  # candidates never stored count too
    no_pico = sum(p.pmid not in ev.records for p in ev.papers)
    randomised = [p for p in ev.papers if p.pmid in ev.records and is_rct(p, ev.records[p.pmid])]
    return PrismaFlow(
        identified=identified,
        from_cluster=len(members),
        from_expansion=len(outside),
        screened=identified,
        excluded_screening=identified - len(members),
        assessed=len(members),
        no_pico=no_pico,
        not_randomised=len(members) - no_pico - len(randomised),
        missing_pio=len(randomised) - len(ev.eligible),
        eligible=len(ev.eligible),
        included=len(ev.eligible),
    )


def prisma_flow_png(flow: PrismaFlow, path: Path) -> Path:
    """A PRISMA 2020-style flow diagram (boxes and arrows) as PNG, drawn on an Agg canvas and written atomically."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=FLOW_FIGSIZE_IN, dpi=FLOW_DPI)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    ax.set_xlim(0, 10)
    ax.set_ylim(1.2, 9.8)
    ax.axis("off")
    main = [
        (8.8, f"Records identified\n(n = {flow.identified}: every record in the corpus)"),
        (6.6, f"Records screened by topic\n(n = {flow.screened})"),
        (4.4, f"Reports assessed for eligibility\n(n = {flow.assessed} cluster members)"),
        (2.2, f"Eligible trials (n = {flow.eligible})\nIncluded in synthesis (n = {flow.included})"),
    ]  # fmt: skip
    side = {
        1: f"Excluded at screening (n = {flow.excluded_screening}):\noutside this topic cluster\n"
        f"({flow.from_expansion} expansion rejects)",
        2: f"Excluded (n = {flow.assessed - flow.eligible}):\nno PICO record {flow.no_pico}\n"
        f"not randomised {flow.not_randomised}\nP/I/O not stated {flow.missing_pio}",
    }
    box = {"boxstyle": "round,pad=0.4", "facecolor": "white", "edgecolor": "black"}
    for i, (y, text) in enumerate(main):
        ax.text(3.2, y, text, ha="center", va="center", fontsize=9, bbox=box)
        if i:
            ax.annotate("", xy=(3.2, y + 0.75), xytext=(3.2, main[i - 1][0] - 0.75),
                        arrowprops={"arrowstyle": "->"})  # fmt: skip
        if i in side:
            ax.text(8.4, y, side[i], ha="center", va="center", fontsize=8.5, bbox=box)
            ax.annotate("", xy=(6.4, y), xytext=(5.4, y), arrowprops={"arrowstyle": "->"})
    ax.set_title("PRISMA 2020 flow (computed by ra)", fontsize=11)
    with atomic_writer(path) as fh:
        fig.savefig(fh, format="png")
    return path
