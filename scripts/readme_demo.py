"""Put the closing block of a real demo run into README.md (between its demo-closing markers).

usage: bash scripts/demo.sh | tee demo.log; python scripts/readme_demo.py demo.log

The excerpt is the run's "demo finished. What it found:" block up to the lines about the UI; tests/flow/
test_demo_closing.py checks that `ra demo` ends with the same block, goal ids aside.
"""

from __future__ import annotations

import sys
from pathlib import Path

from ra_agent.agent.closing import README_BEGIN, README_END, closing_excerpt

ROOT = Path(__file__).resolve().parents[1]


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    readme = ROOT / "README.md"
    try:
        excerpt = closing_excerpt(Path(argv[1]).read_text(encoding="utf-8"))
        text = readme.read_text(encoding="utf-8")
        before, rest = text.split(README_BEGIN, 1)
        after = rest.split(README_END, 1)[1]
    except (OSError, ValueError) as exc:  # no such log, no closing block in it, no markers in README.md
        print(f"readme_demo: {exc}", file=sys.stderr)
        return 2
    block = "\n```\n" + "\n".join(excerpt) + "\n```\n"
    readme.write_text(before + README_BEGIN + block + README_END + after, encoding="utf-8")
    print(f"README.md: the demo's closing block ({len(excerpt)} lines) from {argv[1]}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
