#!/usr/bin/env bash
# The controller of the one-server deployment (deploy/compose.yaml) in one container: the
# Celery worker with beat embedded (-B) and the watcher. With the local backend both start
# and signal the processes of runs, which then live in this container, so both must be here.
# When either ends, the other is stopped and the container exits with its status (compose
# restarts it); SIGTERM stops both, each with its own grace.
set -u

celery -A simrun_site worker -B --loglevel=INFO &
worker=$!
python manage.py simrun watch &
watcher=$!

trap 'kill -TERM "$worker" "$watcher" 2>/dev/null' TERM INT
wait -n "$worker" "$watcher"
status=$?
kill -TERM "$worker" "$watcher" 2>/dev/null
wait
exit "$status"
