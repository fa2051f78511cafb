#!/usr/bin/env bash
# System packages the tests need: headless Chromium for the HTML report test, shellcheck for actionlint,
# bubblewrap for the sandbox that runs repository code (tests/sandbox/ fail under CI=true without it).
set -euo pipefail
if ! command -v chromium >/dev/null 2>&1; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq chromium shellcheck >/dev/null
fi
if ! command -v bwrap >/dev/null 2>&1; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq bubblewrap >/dev/null
fi
