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
    .venv/bin/python -m pip install --quiet --upgrade pip
    .venv/bin/python -m pip install --quiet torch==2.13.0
    .venv/bin/python -m pip install --quiet -e ".[dev,celery]"
    echo "$want" > "$stamp"
    echo "setup: installed ra into .venv"
fi
# The browser test (tests/ui) drives Debian's Chromium: the project cannot download a browser build, so the
# `chromium` package is installed when it is missing (as root, or with passwordless sudo). When that cannot
# happen, the reason goes to .venv/.ra-no-chromium (delete it to try again) and the browser test skips with
# it, except under CI, where a missing browser fails the test.
no_chromium=.venv/.ra-no-chromium
if command -v chromium >/dev/null 2>&1 || [ -x /usr/bin/chromium ]; then
    rm -f "$no_chromium"
elif [ ! -f "$no_chromium" ]; then
    why="" as_root=""
    if ! command -v apt-get >/dev/null 2>&1; then
        why="no apt-get here: install Chromium so that \`chromium\` is on PATH"
    elif [ "$(id -u)" != 0 ]; then
        if sudo -n true 2>/dev/null; then as_root="sudo -n"; else
            why="not root and no passwordless sudo: run \`sudo apt-get install -y chromium\`"
        fi
    fi
    if [ -z "$why" ]; then
        echo "setup: installing Debian's chromium (for the browser test)"
        $as_root apt-get update -qq >/dev/null \
            && $as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null \
            || why="\`apt-get install chromium\` failed: install it by hand"
    fi
    if [ -n "$why" ]; then
        echo "$why" > "$no_chromium"
        echo "setup: Chromium is missing ($why); the browser test skips until it is installed"
    fi
fi
# The celery tests (tests/flow/test_celery.py) start Debian's redis-server as their broker, installed here like the
# browser; when that cannot happen the reason goes to .venv/.ra-no-redis and those tests skip with it, except
# under CI, where a missing broker fails them. (Only the binary is used: the tests start their own server.)
no_redis=.venv/.ra-no-redis
if command -v redis-server >/dev/null 2>&1 || [ -x /usr/bin/redis-server ]; then
    rm -f "$no_redis"
elif [ ! -f "$no_redis" ]; then
    why="" as_root=""
    if ! command -v apt-get >/dev/null 2>&1; then
        why="no apt-get here: install Redis so that \`redis-server\` is on PATH"
    elif [ "$(id -u)" != 0 ]; then
        if sudo -n true 2>/dev/null; then as_root="sudo -n"; else
            why="not root and no passwordless sudo: run \`sudo apt-get install -y redis-server\`"
        fi
    fi
    if [ -z "$why" ]; then
        echo "setup: installing Debian's redis-server (the celery tests' broker)"
        $as_root apt-get update -qq >/dev/null \
            && $as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server >/dev/null \
            || why="\`apt-get install redis-server\` failed: install it by hand"
    fi
    if [ -n "$why" ]; then
        echo "$why" > "$no_redis"
        echo "setup: redis-server is missing ($why); the celery tests skip until it is installed"
    fi
fi
