# What the test suite needs besides picobridge itself, one function per prerequisite.
# Sourced by scripts/test (which runs them all) and .ci/run (which starts them early, in the
# background, while it installs and lints). Each returns at once when its thing is there, so
# running them again costs nothing. A new prerequisite (say, a Matrix homeserver): one more
# `need_NAME` function below and its name in PREREQUISITES.
# shellcheck shell=bash

PREREQUISITES=(chromium pi synapse)

prereq_say() { echo "prereqs: $*" >&2; }

is_root() { [ "$(id -u)" -eq 0 ]; }

# Debian packages, as root only; waits for another apt/dpkg run to finish instead of failing.
apt_install() {
    if ! is_root || ! command -v apt-get >/dev/null 2>&1; then
        prereq_say "missing: $*; install it as root (apt-get install $*), or run the tests as root"
        return 1
    fi
    local wait=(-o DPkg::Lock::Timeout=300)
    apt-get "${wait[@]}" update -qq
    DEBIAN_FRONTEND=noninteractive apt-get "${wait[@]}" install -y -qq --no-install-recommends "$@"
}

# The status page test renders the page in headless Chromium (Debian's package).
need_chromium() {
    command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 \
        || apt_install chromium
}

# The prime-rpc tests run the real pi coding agent, pinned in tests/peers/pi (its lock file):
# installed with `npm ci` when missing or another version, under the lock the tests use too
# (tests/e2e/prime_rpc_support.py), so a test run and this never install over each other.
need_pi() {
    command -v npm >/dev/null 2>&1 || apt_install nodejs npm || return 1
    local dir="tests/peers/pi"
    pi_installed "$dir" && return 0
    flock "$dir/.install.lock" sh -c '
        node -e "$1" "$2" || npm ci --prefix "$2" --no-audit --no-fund --loglevel=error
    ' sh "$(pi_check_js)" "$dir"
    pi_installed "$dir" || { prereq_say "npm ci did not install the pinned pi in $dir"; return 1; }
}

# The Matrix tests run a real Synapse, in a venv of its own ($SYNAPSE_TEST_VENV,
# else .synapse-venv here: tests/synapse/install.py, whose lock the tests wait on too).
need_synapse() {
    python3 -m tests.synapse.install
}

# Exit 0 when node_modules holds the version package.json pins (npm writes
# node_modules/.package-lock.json last: without it the tree is half made).
pi_check_js() {
    cat <<'JS'
const dir = require("path").resolve(process.argv[1]);
const name = "@mariozechner/pi-coding-agent";
try {
    require(dir + "/node_modules/.package-lock.json");
    const want = require(dir + "/package.json").dependencies[name];
    process.exit(require(dir + "/node_modules/" + name + "/package.json").version === want ? 0 : 1);
} catch (e) { process.exit(1); }
JS
}

pi_installed() { node -e "$(pi_check_js)" "$1" 2>/dev/null; }

# Every prerequisite at once, each logging to its own file; the log of each one that failed
# is shown. Returns non-zero when any failed.
need_all() {
    local logs pids=() name failed=0 i=0
    logs="$(mktemp -d)"
    for name in "${PREREQUISITES[@]}"; do
        "need_$name" >"$logs/$name.log" 2>&1 &
        pids+=($!)
    done
    for name in "${PREREQUISITES[@]}"; do
        if ! wait "${pids[$i]}"; then
            prereq_say "$name could not be installed:"
            cat "$logs/$name.log" >&2
            failed=1
        fi
        i=$((i + 1))
    done
    rm -rf "$logs"
    return "$failed"
}
