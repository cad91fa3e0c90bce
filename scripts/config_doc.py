"""Write docs/config.md from the commented config.toml (run after adding or changing a knob)."""

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
INTRO = """# Configuration reference (`config.toml`)

Every numeric knob of the design memos lives in `config.toml`; ra reads it once at start-up into
typed, frozen dataclasses (`ra_agent/config.py`). An unknown key, a wrong type, an out-of-range
value, a URL whose scheme the key does not take (`eutils_base_url = "file:///etc"`) or a URL that
does not parse (`"http://[bad"`, a port past 65535) stops ra with an error naming the file, the
section and the key.

- **Which file:** `--config PATH` on the CLI, else `RA_CONFIG`, else `./config.toml`. Relative paths
  (e.g. `data_dir`) are resolved against the config file's folder.
- **Environment overrides:** `RA_<SECTION>__<KEY>=value`, nested sections joined by `__`
  (`RA_INGEST__MAX_QPS=5`, `RA_EXPANSION__SEMANTIC__TAU_START=0.55`). Values are parsed as TOML
  and validated like the file.
- **Secrets** never live in the file (a secret-looking key there is an error): `NCBI_API_KEY`,
  `NCBI_EMAIL` and `CROSSREF_MAILTO` come from the environment or a `.env` file beside
  `config.toml`, and are masked in every log and metadata value.
- **Changing the embedding model** (`model_name` / `model_version`) changes the `code_version` of the
  embedding assets: the shards show unsynced in the Dagster UI; backfill `embedding_shard_job` over all
  partitions, then materialise `embedding_index`, which switches `emb/ACTIVE` only once the new
  folder is complete (the old one stays readable).
"""


def render(config_text: str) -> str:
    out = [INTRO.rstrip("\n")]
    section = None
    for line in config_text.splitlines():
        header = re.match(r"^\[([\w.]+)\]", line)
        if header:
            section = header.group(1)
            out += ["", f"## `[{section}]`", "", "| key | default | meaning |", "|---|---|---|"]
            continue
        knob = re.match(r"^(\w+)\s*=\s*(.*?)\s*(#\s*(.*))?$", line)
        if knob and section:
            key, value, _, comment = knob.groups()
            out.append(f"| `{key}` | `{value}` | {(comment or '').replace('|', '/')} |")
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    target = ROOT / "docs" / "config.md"
    target.write_text(render((ROOT / "config.toml").read_text(encoding="utf-8")), encoding="utf-8")
    sys.stdout.write(f"wrote {target}\n")
