"""Put the closing block of a real demo run into README.md (between its demo-closing markers).

usage: bash scripts/demo.sh | tee demo.log; python scripts/readme_demo.py demo.log

The excerpt is the run's "demo finished. What it found:" block up to the lines about the UI, and the first lines
of the first dossier it names (`dossier_excerpt`; run this in the folder the demo ran in, so the dossier is there);
tests/flow/test_demo_closing.py checks that `ra demo` ends with the same block and writes the same dossier lines,
goal ids aside.
"""

from __future__ import annotations

import sys
from pathlib import Path

from ra_agent.agent.closing import (
    DOSSIER_BEGIN,
    DOSSIER_END,
    README_BEGIN,
    README_END,
    closing_excerpt,
    dossier_excerpt,
)

ROOT = Path(__file__).resolve().parents[1]


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    readme = ROOT / "README.md"
    try:
        excerpt = closing_excerpt(Path(argv[1]).read_text(encoding="utf-8"))
        read = excerpt[excerpt.index("Read:") + 1 :] if "Read:" in excerpt else []
        if not read or not read[0].strip().endswith(".md"):
            raise ValueError(f"the closing block of {argv[1]} names no dossier to read")
        dossier = dossier_excerpt((ROOT / read[0].strip()).read_text(encoding="utf-8"))
        text = readme.read_text(encoding="utf-8")
        for begin, end, lines in ((README_BEGIN, README_END, excerpt), (DOSSIER_BEGIN, DOSSIER_END, dossier)):
            if begin not in text or end not in text:
                raise ValueError(f"README.md has no markers {begin!r} ... {end!r}")
            before, rest = text.split(begin, 1)
            after = rest.split(end, 1)[1]
            text = before + begin + "\n```\n" + "\n".join(lines) + "\n```\n" + end + after
    except (OSError, ValueError) as exc:  # no such log or dossier, no closing block in it, no markers in README.md
        print(f"readme_demo: {exc}", file=sys.stderr)
        return 2
    readme.write_text(text, encoding="utf-8")
    print(f"README.md: the demo's closing block ({len(excerpt)} lines) and its dossier's first lines from {argv[1]}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
