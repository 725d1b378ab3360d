#!/usr/bin/env bash
# Runs a command and reports the peaks of its anonymous (heap, stacks) and file-backed (executable, libraries)
# resident memory, sampled from /proc/PID/status every 20 ms. Usage: Benchmarks/rss-split.sh COMMAND [ARGS...]
# (the command's output goes to $RSS_SPLIT_OUT, default /dev/null).
set -uo pipefail
"$@" > "${RSS_SPLIT_OUT:-/dev/null}" 2>&1 &
pid=$!; anon=0; file=0
while kill -0 "$pid" 2>/dev/null; do
    a=$(awk '/^RssAnon/ {print $2}' "/proc/$pid/status" 2>/dev/null); f=$(awk '/^RssFile/ {print $2}' "/proc/$pid/status" 2>/dev/null)
    if [ -n "$a" ] && [ "$a" -gt "$anon" ]; then anon=$a; fi
    if [ -n "$f" ] && [ "$f" -gt "$file" ]; then file=$f; fi
    sleep 0.02
done
wait "$pid"; status=$?
echo "{\"rss_anon_max_kb\":$anon,\"rss_file_max_kb\":$file,\"exit\":$status}"
