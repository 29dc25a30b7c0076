#!/usr/bin/env bash
# Makes sure Debian's chromium is installed for the HTML report test (the test opens the report in it).
# Installs it with apt-get when running as root and it is missing; otherwise says what to do. Never fails the run.
set -u
if command -v chromium >/dev/null 2>&1 || [ -x /usr/bin/chromium ]; then exit 0; fi
if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
  echo "ensure-chromium: installing Debian's chromium for the HTML report test (apt-get)..."
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null 2>&1 || true
  if apt-get install -y -qq chromium >/dev/null 2>&1; then echo "ensure-chromium: installed $(chromium --version 2>/dev/null)"; exit 0; fi
  echo "ensure-chromium: apt-get could not install chromium; the HTML report test will say so."
  exit 0
fi
echo "ensure-chromium: chromium is not installed; run 'sudo apt-get install -y chromium' to run the HTML report test."
