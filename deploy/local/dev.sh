#!/usr/bin/env bash
# simrun on this machine: `dev.sh demo` runs the example workflow on the embedded default,
# `dev.sh test` runs the test suite (needs PostgreSQL and Redis on 127.0.0.1, started if down,
# and Chromium, installed from Debian when run as root).
set -euo pipefail
cd "$(dirname "$0")/../.."

# What the tests need from Debian beyond Python: a browser for the pages' tests (Chromium),
# Redis, and PostgreSQL letting user postgres in from 127.0.0.1 without a password. As root
# with apt-get, Chromium and Redis are installed when missing; PostgreSQL, whose access needs
# setting up, and anything when not root are named in one line, before anything else runs.
test_prerequisites() {
  local missing=()
  command -v chromium >/dev/null 2>&1 || missing+=(chromium)
  if ! command -v redis-cli >/dev/null 2>&1 \
    || { ! redis-cli -h 127.0.0.1 ping >/dev/null 2>&1 && ! command -v redis-server >/dev/null 2>&1; }; then
    missing+=(redis-server)
  fi
  if ! command -v pg_isready >/dev/null 2>&1 \
    || { ! pg_isready -q -h 127.0.0.1 -p 5432 && ! command -v pg_ctlcluster >/dev/null 2>&1; }; then
    echo "the tests need PostgreSQL on 127.0.0.1:5432 with user postgres trusted from 127.0.0.1: install with 'sudo apt-get install -y postgresql ${missing[*]}', then run this again" >&2
    exit 1
  fi
  [ "${#missing[@]}" -eq 0 ] && return 0
  if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    echo "the tests need ${missing[*]}: install with 'sudo apt-get install -y ${missing[*]}' (Debian's packages), then run this again" >&2
    exit 1
  fi
  echo "installing ${missing[*]} from Debian's packages for the tests" >&2
  DEBIAN_FRONTEND=noninteractive apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
}
if [ "${1:-}" = test ]; then test_prerequisites; fi

python_bin=${SIMRUN_BOOTSTRAP_PYTHON:-}
if [ -z "$python_bin" ]; then
  if command -v pyenv >/dev/null 2>&1; then python_bin=$(pyenv which python 2>/dev/null || true); fi
  [ -n "$python_bin" ] || python_bin=$(command -v python3.13 || command -v python3)
fi
"$python_bin" -c 'import sys; assert sys.version_info >= (3, 13), sys.version' 2>/dev/null || {
  echo "simrun needs Python 3.13 (found $("$python_bin" --version 2>&1)); install it (pyenv install 3.13)" >&2
  exit 1
}

# uv (pinned) in the bootstrap Python makes the virtual environment and installs into it
if ! "$python_bin" -m uv --version >/dev/null 2>&1; then
  "$python_bin" -m pip install -q --disable-pip-version-check uv==0.13.9
fi
[ -x .venv/bin/python ] || "$python_bin" -m uv venv -q .venv --python "$python_bin"
# bytecode compiled at install: every pod and supervisor (which may run with
# PYTHONDONTWRITEBYTECODE, or in a read-only image) would compile pydantic & co. at each start
"$python_bin" -m uv pip install -q --compile-bytecode --python .venv/bin/python -r requirements/dev.txt \
  --overrides requirements/overrides.txt
.venv/bin/python -m compileall -q -j 0 harness/src examples/simrun-examples/src cluster >/dev/null

start_services() {
  if ! pg_isready -q -h 127.0.0.1 -p 5432 2>/dev/null; then
    pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql)" main start
  fi
  if ! redis-cli -h 127.0.0.1 ping >/dev/null 2>&1; then
    mkdir -p /var/lib/redis /var/log/redis
    redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" --appendonly no \
      --dir /var/lib/redis --logfile /var/log/redis/ci.log
  fi
  for _ in $(seq 1 100); do
    pg_isready -q -h 127.0.0.1 -p 5432 && redis-cli -h 127.0.0.1 ping >/dev/null 2>&1 && return 0
    sleep 0.2
  done
  echo "PostgreSQL or Redis did not come up on 127.0.0.1" >&2
  return 1
}

case "${1:-}" in
  setup)
    exit 0
    ;;
  demo)
    shift
    exec .venv/bin/simrun demo "$@"
    ;;
  test)
    shift
    start_services
    export DATABASE_URL=${SIMRUN_TEST_DATABASE_URL:-postgres://postgres@127.0.0.1:5432/postgres}
    export SIMRUN_TEST_REDIS_URL=${SIMRUN_TEST_REDIS_URL:-redis://127.0.0.1:6379/15}
    export CELERY_BROKER_URL=${CELERY_BROKER_URL:-$SIMRUN_TEST_REDIS_URL}
    export SIMRUN_CELERY_QUEUE=simrun-test-$$
    set +e
    # three processes by default (pytest-xdist): most tests wait on the processes they start,
    # so three keep two cores busy; SIMRUN_TEST_PROCESSES=0 runs them all in this one
    .venv/bin/python -m pytest -p no:cacheprovider -n "${SIMRUN_TEST_PROCESSES:-3}" \
      --dist "${SIMRUN_TEST_DIST:-worksteal}" "$@"
    code=$?
    set -e
    if [ "$code" -eq 5 ]; then echo "pytest collected no tests: that is a failure" >&2; exit 1; fi
    exit "$code"
    ;;
  *)
    echo "usage: deploy/local/dev.sh setup | demo [--keep] | test [pytest args]" >&2
    exit 2
    ;;
esac
