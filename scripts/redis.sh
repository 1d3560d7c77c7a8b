#!/usr/bin/env bash
# redis-server for the fleet tests (tests/fleet_redis.rs), which each start
# their own on a free loopback port: Debian's package, installed when
# missing. `.ci/run` calls it before running them.
set -euo pipefail
if ! command -v redis-server >/dev/null; then
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq redis-server >/dev/null
fi
redis-server --version
