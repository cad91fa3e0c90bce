"""Drawing the evidence-gap map (`gap_map.GapMap`): gap_map.png by matplotlib (reports, the Dagster UI) and a
self-contained gap_map.html by Vega-Altair with Vega-Lite's JavaScript inlined (opens offline; hover a cell for its
question, click it, or pick it from the question list, for its studies with links to PubMed, its covering reviews and
the trials since). See docs/gap_map.md."""

from __future__ import annotations

import base64
import logging
import math
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ra_agent.evidence.questions.gap_map import FILES, OUT_OF_SCOPE, PUBMED, VERDICT_COLOURS, Column, GapMap, MapCell
from ra_agent.fileio import atomic_write

log = logging.getLogger(__name__)

# matplotlib marks in points²: the cell with most studies, the least a study gets, below which its count sits beside
MAX_AREA, MIN_AREA, SMALL_AREA = 1400.0, 40.0, 160.0
LEGEND_WIDTH = 2.6  # inches
HTML_MAX_AREA = 2200  # pixels² of the HTML's largest mark
STUDIES_IN_TOOLTIP = 12
LIST_WIDTH, LINE_HEIGHT = 1100, 18  # the list of a picked cell's studies and reviews (pixels)
IN_SCOPE = "in the handbook's scope"
# vega-embed's `defaultStyle` (CSS, no script): the question list above the map rather than squeezing it sideways
EMBED_CSS = (".vega-embed { flex-direction: column-reverse; align-items: flex-start; } "
             ".vega-bindings { margin: 4px 0 12px 8px; font: 14px sans-serif; }")  # fmt: skip


@dataclass(frozen=True)
class MapFiles:
    """What `write_gap_map` left in the folder: the two drawings, or the empty map's statement and no file."""

    png: Path | None
    html: Path | None
    statement: str = ""


def write_gap_map(gap_map: GapMap, folder: Path, cache_dir: Path | None = None) -> MapFiles:
    """gap_map.png and gap_map.html in `folder` (each written whole, then renamed into place; `cache_dir` keeps the
    HTML's script between runs). An empty map writes no picture, removes an earlier one, and returns its one-line
    statement."""
    folder.mkdir(parents=True, exist_ok=True)
    if gap_map.empty:
        for name in FILES:
            (folder / name).unlink(missing_ok=True)
        return MapFiles(None, None, gap_map.statement)
    png, html = (folder / name for name in FILES)
    draw_png(gap_map, png)
    atomic_write(html, map_html(gap_map, cache_dir))
    log.info("gap map of %d questions: %s, %s", len(gap_map.cells), png, html)
    return MapFiles(png, html)


def map_preview(files: MapFiles, max_bytes: int = 400_000) -> str:
    """Markdown showing the map where a local path cannot be opened (the Dagster UI's metadata): the PNG inline as a
    data URI (up to `max_bytes`, else its path) and the HTML's path; an empty map's statement."""
    if files.png is None or files.html is None:
        return files.statement
    data = files.png.read_bytes()
    picture = (f"![evidence-gap map](data:image/png;base64,{base64.b64encode(data).decode()})"
               if len(data) <= max_bytes else f"(gap_map.png is {len(data):,} bytes: open {files.png})")  # fmt: skip
    return f"{picture}\n\nInteractive map (opens offline): `{files.html}`"


# ============================================================================ PNG (matplotlib)


def _area(studies: int, most: int) -> float:
    """The mark's area in points² (area, not radius, grows with the studies); a study or more stays visible."""
    return 0.0 if not studies else max(MIN_AREA, MAX_AREA * studies / max(most, 1))


def draw_png(gap_map: GapMap, path: Path, dpi: int = 110) -> None:
    """The map as a picture: a mark per question sized by its studies and coloured by its verdict (hollow and dashed
    outside the handbook's scope), its count on the mark (beside a small one), the newest covering review's year
    under it, the kinds of comparison over the columns, legends of verdicts and sizes, the title in words and the
    corpus's date. Written whole, then renamed into place."""
    from matplotlib.figure import Figure

    rows, columns = len(gap_map.rows), len(gap_map.columns)
    # Margins in inches from the longest row label and the title's lines: laid out once, drawn once (no tight bbox)
    left = 0.5 + 0.065 * max(len(line) for r in gap_map.rows for line in _row_label(gap_map, r).splitlines())
    width = left + max(4.2, 1.35 * columns) + LEGEND_WIDTH
    title = textwrap.wrap(gap_map.title, int((width - left) * 72 / 7.5))
    subtitle = textwrap.wrap(gap_map.subtitle, int((width - left) * 72 / 4.6))
    top = 0.2 + (10 + 15 * len(title) + 11 * len(subtitle)) / 72
    height = top + 0.9 + max(2.9, 0.62 * rows + 0.6)  # at least the legends' height
    fig = Figure(figsize=(width, height), dpi=dpi)
    grid = fig.add_gridspec(1, 2, width_ratios=(width - left - LEGEND_WIDTH, LEGEND_WIDTH), wspace=0.02,
                            left=left / width, right=1 - 0.05 / width, top=1 - top / height, bottom=0.9 / height)  # fmt: skip
    ax, legend = fig.add_subplot(grid[0, 0]), fig.add_subplot(grid[0, 1])
    _png_marks(ax, gap_map)
    _png_axes(ax, gap_map)
    _png_legends(legend, max(c.studies for c in gap_map.cells))
    lines = [(line, 12, "bold", "black") for line in title] + [(line, 8, "normal", "#444444") for line in subtitle]
    above = 0.0
    for text, size, weight, colour in reversed(lines):  # from the axes' top up, the subtitle's last line first
        ax.annotate(text, (0, 1), xycoords="axes fraction", xytext=(0, 6 + above), textcoords="offset points",
                    fontsize=size, weight=weight, color=colour)  # fmt: skip
        above += size + 3
    partial = path.with_name(f".{path.name}.tmp")
    with partial.open("wb") as fh:
        fig.savefig(fh, format="png")
    partial.replace(path)


def _png_marks(ax, gap_map: GapMap) -> None:
    columns = {c: i for i, c in enumerate(gap_map.columns)}
    rows = {r: i for i, r in enumerate(gap_map.rows)}
    most = max(c.studies for c in gap_map.cells)
    for in_scope in (True, False):  # filled marks, then hollow dashed ones outside the handbook's scope
        cells = [c for c in gap_map.cells if c.in_scope is in_scope]
        if cells:
            colours = [c.colour for c in cells]
            ax.scatter([columns[c.column] for c in cells], [rows[c.row] for c in cells],
                       s=[_area(c.studies, most) for c in cells], facecolors=colours if in_scope else "none",
                       edgecolors=colours, alpha=0.85, linewidths=1.0 if in_scope else 1.6,
                       linestyles="-" if in_scope else "--", zorder=2)  # fmt: skip
    for cell in gap_map.cells:
        x, y = columns[cell.column], rows[cell.row]
        beside = _area(cell.studies, most) < SMALL_AREA  # too small to hold its number
        on_fill = cell.in_scope and not beside  # white on the verdict's colour, else dark
        ax.text(x + (0.09 if beside else 0), y, str(cell.studies), ha="left" if beside else "center", va="center",
                fontsize=9, weight="bold", color="white" if on_fill else "#222222", zorder=3)  # fmt: skip
        if cell.review_label:  # under the mark, below the largest one's edge
            ax.annotate(cell.review_label, (x, y), xytext=(0, -(MAX_AREA**0.5) / 2 - 6), textcoords="offset points",
                        ha="center", va="center", fontsize=7, color="#333333")  # fmt: skip


def _row_label(gap_map: GapMap, row: str) -> str:
    return textwrap.fill(gap_map.row_label(row), 34)


def _png_axes(ax, gap_map: GapMap) -> None:
    """Comparators under the grid, grouped by kind over it; interventions down the side, narrower ones dotted."""
    rows, columns = len(gap_map.rows), len(gap_map.columns)
    ax.set_xticks(range(columns), [textwrap.fill(c.shown, 16) for c in gap_map.columns], fontsize=8)
    ax.set_yticks(range(rows), [_row_label(gap_map, r) for r in gap_map.rows], fontsize=8)
    ax.set_xlim(-0.6, columns - 0.4)
    ax.set_ylim(rows - 0.2, -1.0)  # room under the last row for its review years
    ax.tick_params(length=0)
    ax.grid(True, color="#eeeeee", zorder=0)
    for side in ("top", "right", "left", "bottom"):
        ax.spines[side].set_visible(False)
    groups: dict[str, list[int]] = {}
    for i, column in enumerate(gap_map.columns):
        groups.setdefault(column.kind, []).append(i)
    for kind, xs in groups.items():
        ax.text((xs[0] + xs[-1]) / 2, -0.8, textwrap.fill(kind, 22), ha="center", va="center", fontsize=8,
                style="italic", color="#444444")  # fmt: skip
        ax.plot([xs[0] - 0.35, xs[-1] + 0.35], [-0.6, -0.6], color="#888888", linewidth=0.8)
    ax.set_xlabel("comparator (grouped by kind of comparison)", fontsize=9)
    ax.set_ylabel("intervention (class, then narrower classes)", fontsize=9)


def _png_legends(ax, most: int) -> None:
    """Verdict colours (and the hollow mark of a question outside the scope) over the sizes of 1 and `most` studies."""
    from matplotlib.lines import Line2D

    def dot(label: str, size: float = 9, face: str = "#bbbbbb", edge: str = "#bbbbbb") -> Line2D:
        return Line2D([], [], marker="o", linestyle="", markersize=size, markerfacecolor=face, markeredgecolor=edge,
                      label=label)  # fmt: skip

    verdicts = [dot(verdict, face=colour, edge=colour) for verdict, colour in VERDICT_COLOURS.items()]
    verdicts.append(dot(OUT_OF_SCOPE, face="none", edge="#555555"))
    sizes = [dot(f"{n} stud{'y' if n == 1 else 'ies'}", _area(n, most) ** 0.5) for n in sorted({1, most})]
    ax.add_artist(ax.legend(handles=verdicts, loc="upper left", fontsize=8, frameon=False, title="verdict",
                            title_fontsize=8, alignment="left"))  # fmt: skip
    ax.legend(handles=sizes, loc="lower left", fontsize=8, frameon=False, labelspacing=1.8, handletextpad=1.6,
              borderpad=1.0, title="area: studies", title_fontsize=8, alignment="left")  # fmt: skip
    ax.set_axis_off()


# ============================================================================ HTML (Vega-Altair)


def _column_label(column: Column) -> str:
    """A column's header in lines ("|" splits them): the comparator, then its kind in brackets when it differs."""
    kind = textwrap.wrap(f"({column.kind})", 20) if column.kind != column.shown else []
    return "|".join([*textwrap.wrap(column.shown, 20), *kind])


def _cell_record(gap_map: GapMap, cell: MapCell, most: int) -> dict[str, Any]:
    radius = (HTML_MAX_AREA * cell.studies / max(most, 1) / math.pi) ** 0.5  # pixels, as Vega-Lite sizes the mark
    beside = radius < 11  # too small to hold its number: the count sits right of it
    shown = ", ".join(f"{s.pmid} ({s.year or 'n.d.'})" for s in cell.study_list[:STUDIES_IN_TOOLTIP])
    more = len(cell.study_list) - STUDIES_IN_TOOLTIP
    return {
        "question_id": cell.question_id, "question": cell.in_words, "row": gap_map.row_label(cell.row),
        "column": _column_label(cell.column), "kind": cell.column.kind, "studies": cell.studies,
        "reports": cell.reports, "verdict": cell.verdict, "why": cell.verdict_reason,
        "scope": IN_SCOPE if cell.in_scope else OUT_OF_SCOPE, "review_year": cell.review_year,
        "review_label": cell.review_label,
        "newest_review": f"PMID {n.pmid} ({n.year}) {n.title[:90]}" if (n := cell.newest) else "none",
        "trials_since": ", ".join(str(p) for p in cell.trials_since) or "none",
        "study_pmids": shown + (f" and {more} more" if more > 0 else ""),
        "count_dx": radius + 8 if beside else 0, "count_colour": "white" if cell.in_scope and not beside else "#222222",
    }  # fmt: skip


def _detail_lines(cell: MapCell) -> list[dict[str, Any]]:
    """The lines listed under the map when the cell is picked: the question, its verdict, its studies and reviews
    (each linked to PubMed) and the trials since the newest covering review."""
    lines: list[tuple[str, str | None, str]] = [
        (f"{cell.in_words} ({cell.question_id})", None, "head"),
        (f"{cell.verdict}: {cell.verdict_reason}", None, "verdict"),
        (f"Studies ({cell.studies}; {cell.reports} reports), by their first report:", None, "head"),
    ]
    for s in cell.study_list:
        extra = f" [+{s.reports - 1} reports]" if s.reports > 1 else ""
        lines.append((f"PMID {s.pmid} ({s.year or 'n.d.'}) {s.title[:110]}{extra}", s.url, "link"))
    lines.append((f"Reviews answering it ({len(cell.reviews)}):" if cell.reviews else "No review answers it.", None,
                  "head"))  # fmt: skip
    for r in cell.reviews:
        lines.append((f"PMID {r.pmid} ({r.year or 'n.d.'}) {r.title[:100]} — {r.role}", r.url, "link"))
    if cell.review_year:
        lines.append((f"Trials since the newest covering review ({cell.review_year}): {len(cell.trials_since)}",
                      None, "head"))  # fmt: skip
        for pmid in cell.trials_since:
            lines.append((f"PMID {pmid}", PUBMED.format(pmid=pmid), "link"))
    return [{"question_id": cell.question_id, "order": i, "text": text, "url": url, "style": style}
            for i, (text, url, style) in enumerate(lines)]  # fmt: skip


def map_spec(gap_map: GapMap) -> dict[str, Any]:
    """The map as a Vega-Lite specification (Vega-Altair): its data are the named datasets "cells" (one record per
    question) and "lines" (what a picked cell lists)."""
    import altair as alt

    most = max(c.studies for c in gap_map.cells)
    cells = [_cell_record(gap_map, c, most) for c in gap_map.cells]
    lines = [line for c in gap_map.cells for line in _detail_lines(c)]
    ids = [c.question_id for c in gap_map.cells]
    pick = alt.selection_point(
        name="question", fields=["question_id"], on="click", empty=False,
        bind=alt.binding_select(options=[None, *ids], labels=["(none)", *(f"{c.question_id}: {c.in_words}"[:90]
                                                                            for c in gap_map.cells)], name="Question: "),
    )  # fmt: skip
    rows = [gap_map.row_label(r) for r in gap_map.rows]
    columns = [_column_label(c) for c in gap_map.columns]
    # a header's lines run down from its first: padded so the tallest one ends above the first row
    lifted = 12 * (max(label.count("|") for label in columns))
    x = alt.X("column:N", sort=columns, title="comparator (kind of comparison)",
              axis=alt.Axis(orient="top", labelAngle=0, labelExpr="split(datum.label, '|')", labelLimit=124,
                            labelFontSize=10, labelLineHeight=12, labelPadding=lifted + 4, domain=False, ticks=False))  # fmt: skip
    y = alt.Y("row:N", sort=rows, title="intervention", axis=alt.Axis(labelLimit=260))
    tooltip = [
        alt.Tooltip("question:N", title="question"), alt.Tooltip("question_id:N", title="id"),
        alt.Tooltip("verdict:N"), alt.Tooltip("why:N", title="because"), alt.Tooltip("studies:Q"),
        alt.Tooltip("reports:Q"), alt.Tooltip("newest_review:N", title="newest covering review"),
        alt.Tooltip("trials_since:N", title="trials since it"),
        alt.Tooltip("study_pmids:N", title="studies (PMID of first report)"), alt.Tooltip("scope:N"),
    ]  # fmt: skip
    colour = alt.Color("verdict:N", title="verdict", scale=alt.Scale(domain=list(VERDICT_COLOURS),
                                                                     range=list(VERDICT_COLOURS.values())))  # fmt: skip
    base = alt.Chart(alt.NamedData("cells")).encode(x=x, y=y, tooltip=tooltip)
    marks = (
        base.mark_circle(stroke="black")
        .encode(
            color=colour,
            size=alt.Size("studies:Q", title="studies", scale=alt.Scale(range=[0, HTML_MAX_AREA], zero=True)),
            opacity=alt.Opacity(
                "scope:O",
                title="scope",
                sort=[IN_SCOPE, OUT_OF_SCOPE],
                scale=alt.Scale(domain=[IN_SCOPE, OUT_OF_SCOPE], range=[0.85, 0.25]),
            ),
            strokeWidth=alt.condition(pick, alt.value(4), alt.value(0)),  # type: ignore[arg-type]
        )
        .add_params(pick)
        .properties(name="cells")  # its marks are the group "cells_0_marks" in the page
    )
    counts = base.mark_text(fontWeight="bold", fontSize=12, dx=alt.expr("datum.count_dx"), align="center").encode(
        text="studies:Q", color=alt.Color("count_colour:N", scale=None)
    )
    years = base.mark_text(dy=29, fontSize=9, color="#333333").encode(text="review_label:N")
    grid = alt.layer(marks, counts, years).properties(width=alt.Step(124), height=alt.Step(60))
    # Vega-Lite does not resize a view whose data a selection filters: the list has the height of the longest one
    longest = max((line["order"] for line in lines), default=0) + 1
    detail = (
        alt.Chart(alt.NamedData("lines"), title="Click a cell, or pick a question above, for its studies (links to "
                  "PubMed), the reviews answering it and the trials since")
        .mark_text(align="left", baseline="middle", fontSize=12, limit=LIST_WIDTH)
        .encode(y=alt.Y("order:Q", axis=None, scale=alt.Scale(domain=[-0.5, longest - 0.5], reverse=True)),
                x=alt.value(0),
                text="text:N", href="url:N", tooltip=alt.Tooltip("url:N", title="opens"),  # a tooltip makes it clickable
                color=alt.Color("style:N", legend=None, scale=alt.Scale(
                    domain=["head", "verdict", "link"], range=["#000000", "#444444", "#0b57d0"])))
        .transform_filter(pick)
        .properties(width=LIST_WIDTH, height=LINE_HEIGHT * longest)
    )  # fmt: skip
    chart = alt.vconcat(grid, detail, title=alt.Title(gap_map.title, subtitle=[gap_map.subtitle], anchor="start"))
    spec = chart.resolve_scale(color="independent").configure_view(stroke=None).to_dict()
    spec["datasets"] = {"cells": cells, "lines": lines}
    return spec


def javascript_bundle(cache_dir: Path | None = None) -> str:
    """vega-embed with Vega and Vega-Lite as one script (vl-convert bundles it, seconds on a busy machine), kept in
    `cache_dir` by vl-convert's and Vega-Lite's versions so a later map reuses it."""
    from importlib.metadata import version as installed

    import vl_convert
    from altair.utils._importers import vl_version_for_vl_convert

    version = vl_version_for_vl_convert()
    name = f"vega-embed-{installed('vl-convert-python')}-vl{version}.js"
    cached = cache_dir / name if cache_dir else None
    if cached is not None and cached.is_file():
        return cached.read_text(encoding="utf-8")
    bundle = vl_convert.javascript_bundle(vl_version=version)  # pyright: ignore[reportCallIssue] (snippet: optional)
    if cached is not None:
        cached.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(cached, bundle)
    return bundle


def map_html(gap_map: GapMap, cache_dir: Path | None = None) -> str:
    """One HTML page (Vega-Altair's inline template) holding the map's specification and the script that draws it
    (`javascript_bundle`): it opens from disk with no network."""
    import json

    import altair as alt
    from altair.utils.html import INLINE_HTML_TEMPLATE

    options = {"renderer": "svg", "actions": False, "mode": "vega-lite", "defaultStyle": EMBED_CSS,
               "loader": {"target": "_blank"}}  # a study's link opens PubMed beside the map  # fmt: skip
    return INLINE_HTML_TEMPLATE.render(
        spec=json.dumps(map_spec(gap_map)), embed_options=json.dumps(options), output_div="vis",
        vegalite_version=alt.VEGALITE_VERSION, vegaembed_script=javascript_bundle(cache_dir),
    )  # fmt: skip
