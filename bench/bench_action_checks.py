"""Benchmark: the Action argument checks on hostile sizes, ra's linear URL/path scan vs the regex it replaced.

Baseline (same run): the pre-issue-13 URL regex `[A-Za-z][A-Za-z0-9+.-]*://[^\\s'"<>()]+` applied with
findall, which rescans every run of letters from each of its positions (quadratic). Inputs: a query of
--letters letters without a space, and one of --mb megabytes of mixed words. Also times parse_action on
a 5 MB reply and on 5,000-deep JSON (refused before any parser recurses). Prints; never asserts.

    python bench/bench_action_checks.py [--letters 80000] [--mb 5] [--baseline-max 80000]
"""

from __future__ import annotations

import argparse
import re
import time

from ra_agent.llm.protocol import DEFAULT_LIMITS, _security_problem, parse_action

OLD_URL_RE = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"<>()]+")
HOSTS = ("eutils.ncbi.nlm.nih.gov", "api.crossref.org")


def timed(fn) -> tuple[float, object]:
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--letters", type=int, default=80_000)
    ap.add_argument("--mb", type=float, default=5.0)
    ap.add_argument("--baseline-max", type=int, default=80_000, help="skip the quadratic baseline above this size")
    args = ap.parse_args()
    words = ("omeprazole healing of erosive oesophagitis HbA1c 7% / 53 mmol/mol " * 100_000)[: int(args.mb * 1e6)]
    for name, text in (("letters", "a" * args.letters), ("words", words)):
        t_new, verdict = timed(lambda text=text: _security_problem(text, HOSTS))
        line = f"{name:8s} {len(text):>10,} chars  ra linear scan {t_new:8.3f} s ({verdict or 'accepted'})"
        if len(text) <= args.baseline_max:
            t_old, _ = timed(lambda text=text: OLD_URL_RE.findall(text))
            line += f"  | old regex {t_old:8.3f} s  ({t_old / max(t_new, 1e-9):.0f}x)"
        else:
            line += "  | old regex skipped (quadratic)"
        print(line)
    reply = "Thinking. " * 500_000 + 'Action: {"tool": "search_pubmed", "args": {"query": "x"}}'
    t, out = timed(lambda: parse_action(reply))
    print(f"parse_action on a {len(reply) / 1e6:.1f} MB reply: {t:.3f} s -> {getattr(out, 'kind', out)} "
          f"(cap {DEFAULT_LIMITS.max_reply_chars:,} chars)")  # fmt: skip
    deep = 'Action: {"tool": "t", "args": ' + '{"a": ' * 5000 + "1" + "}" * 5001
    t, out = timed(lambda: parse_action(deep))
    print(f"parse_action on 5,000-deep JSON: {t:.4f} s -> {getattr(out, 'kind', out)}: {getattr(out, 'message', '')}")


if __name__ == "__main__":
    main()
