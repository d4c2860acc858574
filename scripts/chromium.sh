#!/usr/bin/env bash
# Debian's headless-capable Chromium for the browser tests: scripts/chromium.sh path | install
#   path     print the browser's path and exit 0, or exit 3 when it is not installed.
#   install  install Debian's 'chromium' package if missing (as root, or with sudo when that
#            needs no password), then print its path. Exit 3, with the reason on stderr, when it
#            cannot be installed here (no apt-get, neither root nor password-less sudo): the
#            browser tests skip with that reason. Any other failure exits 1.
# Playwright drives it through `executable_path`: no browser is ever downloaded (never run
# `playwright install`). EOS_CHROMIUM names another Chromium binary instead.
set -euo pipefail

find_chromium() {
  local candidate
  for candidate in "${EOS_CHROMIUM:-}" /usr/bin/chromium /usr/bin/chromium-browser; do
    if [[ -n "$candidate" && -x "$candidate" ]]; then
      echo "$candidate"
      return 0
    fi
  done
  return 1
}

cannot() { echo "chromium.sh: $*" >&2; exit 3; }

install_chromium() {
  local sudo=()
  if [[ "$(id -u)" -ne 0 ]]; then
    command -v sudo >/dev/null || cannot "Chromium is not installed, and installing it needs root or sudo: apt-get install chromium"
    sudo -n true 2>/dev/null || cannot "Chromium is not installed, and sudo asks for a password: run 'sudo apt-get install chromium' once"
    sudo=(sudo -n)
  fi
  command -v apt-get >/dev/null || cannot "Chromium is not installed and apt-get is not available: install Chromium and set EOS_CHROMIUM to its binary"
  echo "chromium.sh: Chromium not found; installing Debian's 'chromium' package" >&2
  # A lock held by another apt run (unattended upgrades) is waited for, not an error.
  "${sudo[@]}" apt-get -o DPkg::Lock::Timeout=300 update -qq >&2
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 install -y -qq \
    --no-install-recommends chromium >&2
}

case "${1:-}" in
  path) find_chromium || exit 3 ;;
  install)
    if ! find_chromium; then
      install_chromium
      find_chromium || { echo "chromium.sh: the 'chromium' package is installed but no binary found" >&2; exit 1; }
    fi
    ;;
  *) echo "usage: $0 path | install" >&2; exit 1 ;;
esac
