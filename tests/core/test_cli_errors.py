"""The CLI error contract: one line `ra: error: <file>[:<line>]: <field>: <what>`, exit 2 for bad input, no traceback."""

from __future__ import annotations

import csv
import shutil
import sqlite3
from pathlib import Path

import pytest

from ra_agent.cli import main

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "data" / "demo" / "Cohen_2006_ProtonPumpInhibitors.csv"
FIXTURES = ROOT / "tests" / "fixtures"
HANDBOOK = ROOT / "handbooks" / "seek_gap_ppi_gerd.md"


@pytest.fixture
def cfg_path(tmp_path) -> Path:
    path = tmp_path / "config.toml"
    path.write_text('[workspace]\ndata_dir = "ws"\ndemo_corpus = ""\n[ingest]\noffline = true\n')
    return path


def ra(capsys, cfg_path: Path, *argv: str) -> tuple[int, str, str]:
    code = main(["--config", str(cfg_path), *argv])
    out, err = capsys.readouterr()
    return code, out, err


def error_lines(err: str) -> list[str]:
    assert "Traceback" not in err
    return [line for line in err.splitlines() if line.startswith("ra: error: ")]


def papers(cfg_path: Path) -> int:
    db = cfg_path.parent / "ws" / "ra.sqlite"
    if not db.exists():
        return 0
    with sqlite3.connect(db) as conn:
        return conn.execute("SELECT COUNT(*) FROM paper").fetchone()[0]


def demo_head(path: Path, rows: int) -> Path:
    with DEMO.open(encoding="utf-8", newline="") as src, path.open("w", encoding="utf-8", newline="") as dst:
        for i, line in enumerate(src):
            if i > rows:
                break
            dst.write(line)
    return path


def bad_inputs(tmp: Path) -> dict[str, tuple[Path, str]]:
    """name -> (file, expected error after 'ra: error: <file>')."""
    made = {
        "wrong_columns": (b"Title,Abstract\nA title,An abstract\n", ":1: header: no PMID column", ".csv"),
        "empty": (b"", ":1: header: empty file", ".csv"),
        "bom_only": (b"\xef\xbb\xbf", ":1: header: empty file", ".csv"),
        "latin1": ("pubmedID,title\n10024259,Müller\n".encode("latin-1"), ":2: encoding: byte 25 (0xfc)", ".csv"),
        "latin1_ris": ("TY  - JOUR\nTI  - Müller\nER  - \n".encode("latin-1"), ":2: encoding: byte 18", ".ris"),
        "empty_ris": (b"", ": content: no ris records found", ".ris"),
        "binary_txt": (
            (FIXTURES / "medline" / "pmparser_baseline_pubmed26n1334.xml.gz").read_bytes()[:4096],
            ":1: content: binary data",
            ".txt",
        ),  # fmt: skip
        "no_extension": (b"%PDF-1.4 not an export\n", ": format: no file extension and not recognisable", ""),
    }
    out = {}
    for name, (data, expected, suffix) in made.items():
        path = tmp / f"{name}{suffix}"
        path.write_bytes(data)
        out[name] = (path, expected)
    return out


def test_each_bad_export_is_one_line_and_the_other_files_still_import(tmp_path, capsys, cfg_path):
    good_xml = FIXTURES / "eutils" / "pubmed1.xml"
    other_xml = FIXTURES / "eutils" / "klortho_efetch.pubmed.xml"
    bad = bad_inputs(tmp_path)
    files = [str(good_xml), *(str(p) for p, _ in bad.values()), str(other_xml)]
    code, out, err = ra(capsys, cfg_path, "import", *files)
    assert code == 2
    lines = error_lines(err)
    assert all(line.startswith(f"ra: error: {p}{e}") for line, (p, e) in zip(lines, bad.values(), strict=True))
    # the files before and after the bad ones were imported
    assert f"{good_xml}: 2 new, 0 updated" in out and f"{other_xml}: 1 new, 1 updated" in out
    assert papers(cfg_path) == 3


def test_a_file_without_extension_is_recognised_by_its_content(tmp_path, capsys, cfg_path):
    export = demo_head(tmp_path / "pubmed_export", 5)
    code, out, err = ra(capsys, cfg_path, "import", str(export))
    assert (code, error_lines(err)) == (0, []) and f"{export}: 5 new" in out
    assert papers(cfg_path) == 5


def test_unterminated_quote_is_reported_and_the_swallowed_rows_are_kept(tmp_path, capsys, cfg_path):
    rows = list(csv.reader(DEMO.open(encoding="utf-8", newline="")))
    header, body = rows[0], rows[1:6]
    path = tmp_path / "export.csv"
    with path.open("w", encoding="utf-8", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(header)
        writer.writerow(body[0])
        fh.write(",".join([body[1][0], body[1][1], '"' + body[1][2].replace('"', "")]) + ",,,2000,,\n")
        writer.writerows(body[2:])
    assert papers(cfg_path) == 0
    code, out, err = ra(capsys, cfg_path, "import", str(path))
    assert code == 2
    assert f"{path}: 4 new, 0 updated, 0 unchanged, 1 problems" in out
    assert "export.csv:3: field 'title': quote opened and never closed (swallowed 1 following row); row skipped" in err
    assert papers(cfg_path) == 4
    db = sqlite3.connect(cfg_path.parent / "ws" / "ra.sqlite")
    titles = dict(db.execute("SELECT pmid, title FROM paper").fetchall())
    assert titles == {int(r[1]): r[2] for r in (body[0], *body[2:])}


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["stop", "../../etc"], r"ws/goals: goal: '../../etc' is not a goal id"),
        (["pause", "000000000000"], r"ws/goals: goal: no goal 000000000000 in this workspace"),
        (["run", str(HANDBOOK), "--goal", "000000000000"], r"ws/goals: goal: no goal 000000000000"),
        (["run", "/dev/zero"], r"/dev/zero: not a regular file"),
        (["run", "missing.md"], r"missing.md: no such handbook"),
        (["run", "seek_gap_pp_gerd.md"], r"seek_gap_pp_gerd.md: no such handbook; available in "),
        (["queries", "remove", "never registered"], r"ws: query: no registered search 'never registered'"),
    ],
)
def test_bad_arguments_are_one_line_errors(capsys, cfg_path, argv, expected):
    code, _, err = ra(capsys, cfg_path, *argv)
    lines = error_lines(err)
    assert code == 2 and len(lines) == 1
    assert expected in lines[0]
    assert not (cfg_path.parent / "ws" / "goals").exists() or not any((cfg_path.parent / "ws" / "goals").iterdir())


def test_a_handbook_is_named_as_the_launchpad_shows_it_and_a_wrong_name_lists_the_handbooks(capsys, cfg_path):
    from ra_agent.cli import resolve_handbook

    shipped = sorted(p.stem for p in (ROOT / "handbooks").glob("*.md"))
    assert "seek_gap_ppi_gerd" in shipped
    for name in ("seek_gap_ppi_gerd", "seek_gap_ppi_gerd.md", str(HANDBOOK)):
        assert resolve_handbook(name, cfg_path).resolve() == HANDBOOK.resolve()
    code, _, err = ra(capsys, cfg_path, "run", "seek_gap_pp_gerd")
    (line,) = error_lines(err)
    assert code == 2 and line.endswith("(ra run NAME, or a path to a handbook file)")
    assert ", ".join(shipped) in line


def test_bad_handbooks_are_one_line_errors(tmp_path, capsys, cfg_path):
    latin = tmp_path / "latin1.md"
    latin.write_bytes(HANDBOOK.read_bytes().replace(b"---\n", "---\n# café\n".encode("latin-1"), 1))
    huge = tmp_path / "huge.md"
    huge.write_bytes(HANDBOOK.read_bytes() + b"x" * 1_000_000)
    no_goal = tmp_path / "no_goal.md"
    no_goal.write_text(HANDBOOK.read_text(encoding="utf-8").replace("Primary_goal:", "Primary_gaol:", 1))
    expected = {
        latin: ":2: encoding: byte 9 (0xe9) is not UTF-8",
        huge: ": size: ",
        no_goal: "Primary_gaol",
    }
    for path, message in expected.items():
        code, _, err = ra(capsys, cfg_path, "run", str(path))
        lines = error_lines(err)
        assert code == 2 and len(lines) == 1 and lines[0].startswith(f"ra: error: {path}"), lines
        assert message in lines[0]
    assert "above the 1000000-byte cap for a handbook ([goal] handbook_max_bytes)" in ra(
        capsys, cfg_path, "run", str(huge))[2]  # fmt: skip
    assert not (cfg_path.parent / "ws" / "goals").exists() or not any((cfg_path.parent / "ws" / "goals").iterdir())


def test_deeply_nested_success_expressions_are_handbook_errors(tmp_path, capsys, cfg_path):
    """150 nested parentheses or 1,000 NOTs used to end in 'internal error: RecursionError': now a one-line
    handbook error naming the file, the line of the token past the nesting cap, and the Success key."""
    text = HANDBOOK.read_text(encoding="utf-8")
    success = "Success:\n  eligible_trials >= 6\n  AND PRISMA_compliant == false\n"
    assert success in text
    success_line = text[: text.index(success)].count("\n") + 1
    parens = tmp_path / "parens.md"
    nested = "Success:\n" + "  (\n" * 150 + "  eligible_trials >= 6\n" + "  )" * 150 + "\n"
    parens.write_text(text.replace(success, nested), encoding="utf-8")
    nots = tmp_path / "nots.md"
    nots.write_text(text.replace(success, "Success: " + "NOT " * 1000 + "PRISMA_compliant\n"), encoding="utf-8")
    for path, line in ((parens, success_line + 51), (nots, success_line)):
        code, _, err = ra(capsys, cfg_path, "run", str(path))
        lines = error_lines(err)
        assert code == 2 and len(lines) == 1, lines
        assert lines[0] == (f"ra: error: {path}:{line}: Success: nested more than 50 levels deep (parentheses and "
                            "NOTs); write the expression flatter")  # fmt: skip
    assert not (cfg_path.parent / "ws" / "goals").exists() or not any((cfg_path.parent / "ws" / "goals").iterdir())


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("[ingest]\nbackoff_factor = nan\n", ":2: [ingest] backoff_factor: expected a finite number, got nan"),
        ("[ingest]\nrequest_timeout_s = nan\n", ":2: [ingest] request_timeout_s: expected a finite number"),
        ("[sr]\nsr_overlap_pivot = nan\n", ":2: [sr] sr_overlap_pivot: expected a finite number"),
        ("[sr]\nprisma_mandatory_items = [99, -3]\n", ":2: [sr] prisma_mandatory_items[0]: 99 is out of range [4, 10]"),
        ("\n[expansion.semantic]\ntau_floor = 0.9\n", ":3: [expansion.semantic] tau_floor: 0.9 is above tau_start"),
        (
            '[ingest]\neutils_base_url = "file:///etc"\n',
            ":2: [ingest] eutils_base_url: 'file:///etc' is not a http:// or https:// URL",
        ),
        ('[ingest]\ncrossref_base_url = "ftp://api.crossref.org"\n', ":2: [ingest] crossref_base_url: 'ftp://"),
        ('[ingest]\neutils_base_url = "eutils.ncbi.nlm.nih.gov"\n', ":2: [ingest] eutils_base_url: 'eutils.ncbi"),
        (
            '[ingest]\neutils_base_url = "https:///entrez"\n',
            ":2: [ingest] eutils_base_url: 'https:///entrez' names no host",
        ),
        ('\n[llm]\nollama_host = "gopher://127.0.0.1:70"\n', ":3: [llm] ollama_host: 'gopher://127.0.0.1:70' is not"),
        ('[llm]\nopenai_base_url = "file:///v1"\n', ":2: [llm] openai_base_url: 'file:///v1' is not a http://"),
        (  # urlsplit raised ValueError here: "internal error: ValueError: Invalid IPv6 URL"
            '[ingest]\neutils_base_url = "http://[bad"\n',
            ":2: [ingest] eutils_base_url: 'http://[bad' is not a http:// or https:// URL (Invalid IPv6 URL)",
        ),
        ('[llm]\nollama_host = "http://127.0.0.1:99999"\n', ":2: [llm] ollama_host: 'http://127.0.0.1:99999' is not a"),
        ('[store]\nurl = "mysql://db/ra"\n', ":2: [store] url: 'mysql://db/ra' is not a postgresql:// or postgres://"),
    ],
)
def test_config_values_that_would_break_later_are_refused(tmp_path, capsys, text, expected):
    path = tmp_path / "config.toml"
    path.write_text(text)
    code, _, err = ra(capsys, path, "status")
    lines = error_lines(err)
    assert code == 2 and len(lines) == 1 and lines[0].startswith(f"ra: error: {path}{expected}")
    assert not (tmp_path / "data").exists()  # nothing was created


def test_a_file_url_for_eutils_is_refused_before_any_request(tmp_path, capsys, monkeypatch):
    """The issue's setting, from the environment too: `ra ingest` stops at config load naming the key; it
    used to pass validation and fail at request time after four tries."""
    monkeypatch.setenv("RA_INGEST__EUTILS_BASE_URL", "file:///etc")
    path = tmp_path / "config.toml"
    path.write_text("")
    code, _, err = ra(capsys, path, "ingest", "--query", "proton pump inhibitors")
    lines = error_lines(err)
    assert code == 2 and lines == [
        "ra: error: environment RA_INGEST__EUTILS_BASE_URL: [ingest] eutils_base_url: 'file:///etc' is not a "
        "http:// or https:// URL"
    ]
    assert not (tmp_path / "data").exists()


def test_config_that_is_a_directory_or_not_utf8(tmp_path, capsys):
    folder = tmp_path / "conf.d"
    folder.mkdir()
    latin = tmp_path / "latin1.toml"
    latin.write_bytes('[tools]\nallowed_hosts = ["caf\xe9"]\n'.encode("latin-1"))
    for path, message in ((folder, ": is a directory, not a config file"),
                          (latin, ":2: encoding: byte 29 (0xe9) is not UTF-8")):  # fmt: skip
        code, _, err = ra(capsys, path, "status")
        lines = error_lines(err)
        assert code == 2 and len(lines) == 1 and lines[0].startswith(f"ra: error: {path}{message}")


def test_env_override_errors_blame_the_variable(capsys, cfg_path, monkeypatch):
    monkeypatch.setenv("RA_INGEST__MAX_QPS", "fast")
    code, _, err = ra(capsys, cfg_path, "status")
    assert code == 2
    assert error_lines(err) == ["ra: error: environment RA_INGEST__MAX_QPS: [ingest] max_qps: expected a number, "
                                "got 'fast'"]  # fmt: skip
    monkeypatch.delenv("RA_INGEST__MAX_QPS")
    monkeypatch.setenv("RA_INGEST__MAX_QPZ", "3")
    code, _, err = ra(capsys, cfg_path, "status")
    assert code == 2 and error_lines(err)[0].startswith(
        "ra: error: environment RA_INGEST__MAX_QPZ: [ingest] unknown key 'max_qpz'")  # fmt: skip


def test_debug_shows_the_traceback(capsys, cfg_path):
    with pytest.raises(Exception, match="is not a goal id"):
        main(["--config", str(cfg_path), "--debug", "stop", "../../etc"])


def test_demo_copy_imports_cleanly(tmp_path, capsys, cfg_path):
    """The whole bundled demo corpus through `ra import`: every row loads, exit 0 (PMID-only rows are warnings)."""
    copy = tmp_path / "demo.csv"
    shutil.copy(DEMO, copy)
    code, out, err = ra(capsys, cfg_path, "import", str(copy))
    assert code == 0 and not error_lines(err)
    assert papers(cfg_path) == 1333 and f"{copy}: 1333 new" in out


def test_python_m_ra_agent_cli_status_runs(cfg_path):
    """`python -m ra_agent.cli` defines every helper before main() runs (status_lines used to come after it)."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}
    proc = subprocess.run([sys.executable, "-m", "ra_agent.cli", "--config", str(cfg_path), "status"], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=120)  # fmt: skip
    assert proc.returncode == 0 and "error" not in proc.stderr.lower(), proc.stderr
    assert "papers: 0 (0 with abstract), refs: 0 (+0 unmapped DOIs)" in proc.stdout and "goals: 0" in proc.stdout


def test_utf16_exports_xml_errors_and_a_huge_seed_query_are_each_one_plain_line(tmp_path, capsys, cfg_path):
    """Issue 40 §8: a UTF-16 file was "binary data" without naming the encoding; the XML error said "line 5, line 5";
    a 10,000-term Seed_query was accepted and echoed whole (238 KB)."""
    rows = "pubmedID,title\n10024259,Symptomatic gastro-oesophageal reflux disease\n"
    (tmp_path / "excel_utf16.csv").write_bytes(rows.encode("utf-16"))  # with its byte-order mark, as Excel saves it
    (tmp_path / "no_bom_utf16.csv").write_bytes(rows.encode("utf-16-be"))
    code, _, err = ra(capsys, cfg_path, "import", str(tmp_path / "excel_utf16.csv"), str(tmp_path / "no_bom_utf16.csv"))
    assert code == 2 and error_lines(err) == [
        f"ra: error: {tmp_path / 'excel_utf16.csv'}:1: encoding: UTF-16 (little-endian, with a byte-order mark) text, "
        "not UTF-8; re-save the file as UTF-8",
        f"ra: error: {tmp_path / 'no_bom_utf16.csv'}:1: encoding: UTF-16 (big-endian) text, not UTF-8; re-save the "
        "file as UTF-8",
    ]

    real = (FIXTURES / "eutils" / "pubmed1.xml").read_text(encoding="utf-8")
    cut = real.index("</ArticleTitle>")
    broken = tmp_path / "mismatch.xml"
    broken.write_text(real[:cut] + "</Article>" + real[cut + len("</ArticleTitle>") :], encoding="utf-8")
    code, _, err = ra(capsys, cfg_path, "import", str(broken))
    (problem,) = [line for line in err.splitlines() if "not well-formed XML" in line]
    line = real[:cut].count("\n") + 1
    assert f"not well-formed XML at line {line}, column " in problem
    assert f"(Opening and ending tag mismatch: ArticleTitle line {line} and Article); 0 records read" in problem
    assert problem.count(f"line {line}") == 2  # the position once, and the tag's own line in libxml2's message

    terms = " OR ".join(f"omeprazole{i}[tiab]" for i in range(10_000))
    handbook = tmp_path / "huge_query.md"
    handbook.write_text(HANDBOOK.read_text().replace("Seed_query:", f'Seed_query: "{terms}"\n# was:', 1))
    for command in ("run", "questions"):
        code, out, err = ra(capsys, cfg_path, command, str(handbook))
        assert code == 2 and len(err) < 600 and "omeprazole9999" not in out + err, err
        assert error_lines(err) == [
            f"ra: error: {handbook}:5: Seed_query: {len(terms):,} characters (10,000 terms) is above the 4,000 a "
            "search_pubmed query may hold ([llm] max_arg_chars): narrow it, or import the records of a large search "
            "with `ra import`"
        ]


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["ask", ""], "ra: error: ask: question: empty"),
        (["ask", "   "], "ra: error: ask: question: empty"),
        (["ask", "PPIs for reflux?", "--max-tool-calls", "9"], "ra: error: ask: --max-tool-calls: 9 is not within 1-8"),
        (["ingest", "--query", " "], "ra: error: ingest: --query: empty"),
        (["ingest", "--query", "reflux", "--since", "2020-13-45"], "argument --since: '2020-13-45' is not a date"),
        (["ingest", "--query", "reflux", "--retmax", "0"], "argument --retmax: 0 is not >= 1"),
        (["run", "seek_gap_ppi_gerd", "--max-cycles", "-1"], "argument --max-cycles: -1 is not >= 1"),
        (["screen", "simulate", str(DEMO), "--label", "label_included", "--seeds", "0"], "argument --seeds: 0 is not"),
        (["screen", "--next", "0"], "argument --next: 0 is not >= 1"),
        (["llm", "serve", "--port", "70000"], "argument --port: 70000 is not a port (1-65535)"),
    ],
)
def test_bad_input_exits_2_before_any_work(capsys, cfg_path, argv, expected):
    """Refused before the workspace opens: no store, no goal, no paper embedded (`ra ask ""` used to embed the
    pending papers, then fail with an internal error and exit 1)."""
    try:
        code, _, err = ra(capsys, cfg_path, *argv)
    except SystemExit as exc:  # argparse's own refusal: usage, then `ra <command>: error: ...`
        code, err = exc.code, capsys.readouterr().err
    assert code == 2 and "Traceback" not in err
    assert expected in err, err
    assert len([line for line in err.splitlines() if "error:" in line]) == 1, err
    assert not (cfg_path.parent / "ws").exists()


def test_store_copy_refuses_a_missing_source_without_creating_it(tmp_path, capsys):
    """A mistyped source path used to be created as an empty store and "copied" (0 rows, exit 0)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("store_copy", ROOT / "scripts" / "store_copy.py")
    assert spec and spec.loader
    store_copy = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(store_copy)
    missing, target = tmp_path / "typo.sqlite", tmp_path / "target.sqlite"
    assert store_copy.main([str(missing), str(target)]) == 2
    assert capsys.readouterr().err.strip() == f"store_copy: {missing}: source: no such SQLite file"
    assert not missing.exists() and not target.exists()
