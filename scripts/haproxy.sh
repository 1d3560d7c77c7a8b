#!/usr/bin/env bash
# HAProxy for the reverse-proxy run (tests/haproxy.rs, ignored by default),
# which starts its own on a free loopback port with a configuration of its
# own: Debian's package, installed when missing (apt's output shown only
# if it fails). CI does not run it.
set -euo pipefail
if ! command -v haproxy >/dev/null; then
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
  log="$(mktemp)"
  trap 'rm -f "$log"' EXIT
  if ! { $sudo apt-get update -qq \
    && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq haproxy; } >"$log" 2>&1; then
    cat "$log" >&2
    exit 1
  fi
fi
haproxy -v | sed -n 1p
