#!/usr/bin/env bash
# Set up everything Metastore needs on this machine; safe to run again and again.
#
#   1. .venv/ in the project root (python3 -m venv), pip upgraded once, and the
#      project installed with `pip install -e ".[dev]"`, which also compiles the
#      C extension (flight_server/_gather.c). The install is redone only when
#      pyproject.toml, setup.py or a C source changes: .venv/.metastore-installed holds the
#      sha256 of those files as last installed.
#   2. a redis-server binary (Debian's package). Metastore starts its own private
#      redis-server on a free loopback port (engine/redis_server.py), so a system
#      daemon that apt may start is stopped again.
#   3. Java 17 for Spark (a warning only: nothing but Spark needs it).
#   4. Debian's chromium and chromium-driver (and a font) for the UI's browser
#      tests (tests/engine/ui: selenium drives them headless, no network).
#
# Environment: PYTHON=/path/to/python3.11 picks the interpreter for the venv.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/.venv"
STAMP="$VENV/.metastore-installed"
PIP_STAMP="$VENV/.metastore-pip-upgraded"
REQUIRED_PY="3.11"
REQUIRED_JAVA="17"

log() { printf '[bootstrap] %s\n' "$*"; }
warn() { printf '[bootstrap] WARNING: %s\n' "$*" >&2; }
die() { printf '[bootstrap] ERROR: %s\n' "$*" >&2; exit 1; }

is_root() { [[ "$(id -u)" -eq 0 ]]; }

# ---------------------------------------------------------------- apt helpers

APT_UPDATED=0
apt_update_once() {
    if [[ "$APT_UPDATED" -eq 0 ]]; then
        log "apt-get update"
        apt-get update -qq
        APT_UPDATED=1
    fi
}

# apt_install PKG...: install with apt, running `apt-get update` only when the
# package lists do not know a package yet, or when the install fails on stale lists.
apt_install() {
    local pkg
    for pkg in "$@"; do
        if ! apt-cache policy "$pkg" 2>/dev/null | grep -q 'Candidate: [^(]'; then
            apt_update_once
            break
        fi
    done
    log "apt-get install $*"
    if ! DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null; then
        [[ "$APT_UPDATED" -eq 0 ]] || return 1
        apt_update_once
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null
    fi
}

# ---------------------------------------------------------------- python venv

find_python() {
    local candidate
    for candidate in "${PYTHON:-}" python3 "python$REQUIRED_PY"; do
        [[ -n "$candidate" ]] || continue
        command -v "$candidate" >/dev/null 2>&1 || continue
        if [[ "$("$candidate" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null)" == "$REQUIRED_PY" ]]; then
            command -v "$candidate"
            return 0
        fi
    done
    return 1
}

venv_works() {
    [[ -x "$VENV/bin/python" ]] &&
        [[ "$("$VENV/bin/python" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null)" == "$REQUIRED_PY" ]]
}

ensure_venv() {
    if venv_works; then
        return 0
    fi
    if [[ -e "$VENV" ]]; then
        warn ".venv exists but its python does not run Python $REQUIRED_PY; recreating it"
        rm -rf "$VENV"
    fi
    local python
    python="$(find_python)" || die "Python $REQUIRED_PY is required (pyproject.toml); none found as python3 or python$REQUIRED_PY (set PYTHON=...)"
    if ! "$python" -c 'import ensurepip' >/dev/null 2>&1; then
        # Debian's own python3 ships venv/ensurepip in a separate package.
        is_root || die "$python cannot create virtual environments; install python$REQUIRED_PY-venv (apt-get install python$REQUIRED_PY-venv) or run this script as root"
        apt_install "python$REQUIRED_PY-venv"
    fi
    log "creating .venv with $python"
    "$python" -m venv "$VENV"
}

# pip in the venv, minus the machine-wide pip.conf's warnings about local
# index folders that do not exist (one line per package: they bury real errors).
venv_pip() {
    "$VENV/bin/python" -m pip --disable-pip-version-check "$@" 2>&1 |
        { grep -v -e 'is ignored: it is neither a file nor a directory' || true; }
}

ensure_pip_upgraded() {
    [[ -f "$PIP_STAMP" ]] && return 0
    log "upgrading pip in .venv"
    venv_pip install --quiet --upgrade pip
    touch "$PIP_STAMP"
}

# pyproject.toml, setup.py and the C sources: an edited .c file is compiled again (an editable
# install compiles extensions once, into the tree).
pyproject_hash() {
    (cd "$ROOT" && sha256sum pyproject.toml setup.py flight_server/*.c) | sha256sum | cut -d' ' -f1
}

# The stamp matches and the project really is installed, editable, from this tree, with its
# C extension built when there is a compiler to build it (without one, pip skips it: the
# extension is optional and the Flight server warns that it answers without it).
install_is_current() {
    [[ -f "$STAMP" ]] && [[ "$(cat "$STAMP")" == "$(pyproject_hash)" ]] || return 1
    [[ -x "$VENV/bin/metastore" ]] || return 1
    (cd / && "$VENV/bin/python" - "$ROOT" <<'PY' >/dev/null 2>&1)
import importlib.metadata, os, sys
importlib.metadata.version("metastore")
import engine
root = os.path.realpath(sys.argv[1])
sys.exit(0 if os.path.realpath(engine.__file__).startswith(root + os.sep) else 1)
PY
    if command -v cc >/dev/null 2>&1 || command -v gcc >/dev/null 2>&1; then
        (cd / && "$VENV/bin/python" -c 'import flight_server._gather' >/dev/null 2>&1) || return 1
    fi
}

ensure_project_installed() {
    if install_is_current; then
        log "project already installed (pyproject.toml and C sources unchanged)"
        return 0
    fi
    local hash
    hash="$(pyproject_hash)"
    log "installing the project: pip install -e \".[dev]\" (takes a minute or two the first time)"
    rm -f "$STAMP"
    (cd "$ROOT" && venv_pip install --quiet --progress-bar off -e ".[dev]")
    printf '%s\n' "$hash" >"$STAMP"
    log "project installed"
}

# Compile the project's own modules to bytecode. pip compiles what it installs, but an
# editable install leaves the sources to be compiled at import; where the environment
# sets PYTHONDONTWRITEBYTECODE (this machine kind does), that happens again in every
# process: ~50 ms of a fresh `metastore show` (issue #30 target 5). Up-to-date files are
# skipped; a stale .pyc is never used (Python checks the source's mtime).
compile_project() {
    (cd "$ROOT" && "$VENV/bin/python" -m compileall -q -j 0 engine flight_server spark_bridge >/dev/null) \
        || warn "compileall failed: modules will be compiled at import"
}

# ---------------------------------------------------------------- redis-server

find_redis_server() {
    command -v redis-server 2>/dev/null && return 0
    local path
    for path in /usr/bin/redis-server /usr/sbin/redis-server /usr/local/bin/redis-server; do
        [[ -x "$path" ]] && { echo "$path"; return 0; }
    done
    return 1
}

# Stop the system redis daemon that Debian's post-install script may have started
# (it listens on 6379 and would run at every boot). Metastore runs its own.
stop_system_redis() {
    local pidfile=/run/redis/redis-server.pid pid=""
    if command -v systemctl >/dev/null 2>&1 && [[ -d /run/systemd/system ]]; then
        systemctl disable --now redis-server >/dev/null 2>&1 || true
    fi
    if [[ -f "$pidfile" ]] || pgrep -u redis -x redis-server >/dev/null 2>&1; then
        log "stopping the system redis-server daemon that apt started (Metastore runs its own)"
        service redis-server stop >/dev/null 2>&1 || /etc/init.d/redis-server stop >/dev/null 2>&1 || true
    fi
    [[ -f "$pidfile" ]] && pid="$(cat "$pidfile" 2>/dev/null || true)"
    if [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null; then
        kill "$pid" 2>/dev/null || true
    fi
    # Only processes of the `redis` system user, i.e. the packaged daemon, never ours.
    for pid in $(pgrep -u redis -x redis-server 2>/dev/null || true); do
        kill "$pid" 2>/dev/null || true
    done
    if command -v update-rc.d >/dev/null 2>&1 && [[ -e /etc/init.d/redis-server ]]; then
        update-rc.d redis-server disable >/dev/null 2>&1 || true
    fi
}

ensure_redis_server() {
    local path
    if path="$(find_redis_server)"; then
        log "redis-server: $path"
        return 0
    fi
    is_root || die "redis-server is not installed and this is not root: install Debian's redis-server package (sudo apt-get install redis-server), then run scripts/bootstrap.sh again"
    apt_install redis-server
    stop_system_redis
    path="$(find_redis_server)" || die "apt installed redis-server but no redis-server binary was found"
    log "redis-server installed: $path"
}

# ---------------------------------------------------------------- java

check_java() {
    local java=java
    if [[ -n "${JAVA_HOME:-}" && -x "$JAVA_HOME/bin/java" ]]; then
        java="$JAVA_HOME/bin/java"
    fi
    if ! command -v "$java" >/dev/null 2>&1; then
        warn "java not found: Spark (RayDP / pyspark) needs Java $REQUIRED_JAVA; the rest works without it (apt-get install openjdk-$REQUIRED_JAVA-jre-headless)"
        return 0
    fi
    local line version
    line="$("$java" -version 2>&1 | head -n 1)"
    version="$(sed -n 's/.*version "\([0-9]*\).*/\1/p' <<<"$line")"
    if [[ "$version" == "$REQUIRED_JAVA" ]]; then
        log "java $REQUIRED_JAVA: ok"
    else
        warn "Spark needs Java $REQUIRED_JAVA, found: ${line:-unknown} ($java)"
    fi
}

# ---------------------------------------------------------------- chromium

ensure_chromium() {
    if command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1; then
        log "chromium + chromedriver: $(command -v chromium), $(command -v chromedriver)"
        return 0
    fi
    is_root || die "chromium/chromium-driver are not installed and this is not root: sudo apt-get install chromium chromium-driver fonts-dejavu-core, then run scripts/bootstrap.sh again"
    apt_install chromium chromium-driver fonts-dejavu-core
    command -v chromedriver >/dev/null 2>&1 || die "apt installed chromium-driver but no chromedriver was found"
    log "chromium installed: $(command -v chromium)"
}

main() {
    local start=$SECONDS
    ensure_venv
    ensure_pip_upgraded
    ensure_project_installed
    compile_project
    ensure_redis_server
    ensure_chromium
    check_java
    log "done in $((SECONDS - start))s"
}

if [[ "${BASH_SOURCE[0]}" == "$0" ]]; then
    main "$@"
fi
