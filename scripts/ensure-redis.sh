#!/usr/bin/env bash
# Makes sure Debian's redis-server is installed for the fleet tests (they start their own on a free port).
# Installs it with apt-get when running as root and it is missing; otherwise says what to do. Never fails the run.
set -u
if command -v redis-server >/dev/null 2>&1; then exit 0; fi
if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
  echo "ensure-redis: installing Debian's redis-server for the fleet tests (apt-get)..."
  export DEBIAN_FRONTEND=noninteractive
  if ! apt-get install -y -qq redis-server >/dev/null 2>&1; then
    apt-get update -qq >/dev/null 2>&1 || true
    apt-get install -y -qq redis-server >/dev/null 2>&1 || true
  fi
  # The package may start a system-wide server; the tests start their own, so stop that one.
  if command -v service >/dev/null 2>&1; then service redis-server stop >/dev/null 2>&1 || true; fi
  if command -v redis-server >/dev/null 2>&1; then echo "ensure-redis: installed $(redis-server --version | cut -d' ' -f1-3)"; exit 0; fi
  echo "ensure-redis: apt-get could not install redis-server; the fleet tests will say so."
  exit 0
fi
echo "ensure-redis: redis-server is not installed; run 'sudo apt-get install -y redis-server' to run the fleet tests."
