#!/usr/bin/env bash
# Set up everything the demo and the tests need on a fresh Debian machine that has
# only Python 3.11+ and apt: the Debian packages the tests run for real (graphviz
# for diagrams, nginx for `nginx -t` and traffic through the slots, prometheus for
# the PromQL tests), then a virtualenv in .venv with the package and its dev tools.
# Idempotent: what is already there is not installed again.
set -euo pipefail
cd "$(dirname "$0")/.."

want_debs=()
command -v dot >/dev/null 2>&1 || want_debs+=(graphviz)
command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ] || want_debs+=(nginx-light)
# promtool (check rules, test rules) comes with Debian's prometheus package.
{ command -v promtool >/dev/null 2>&1 || [ -x /usr/bin/promtool ]; } || want_debs+=(prometheus)
if ! python3 -c 'import venv, ensurepip' >/dev/null 2>&1; then want_debs+=(python3-venv); fi

if [ ${#want_debs[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; else SUDO=; fi
  echo "bootstrap: installing Debian packages: ${want_debs[*]}" >&2
  # apt-get-wait: waits while another apt (unattended-upgrades) holds apt's locks.
  $SUDO scripts/apt-get-wait update -qq
  # RUNLEVEL=1 asks invoke-rc.d not to start the packages' services: the tests start
  # nginx and prometheus themselves, on 127.0.0.1 and free ports, with their own configs.
  # env, so that sudo passes the variables on.
  $SUDO env DEBIAN_FRONTEND=noninteractive RUNLEVEL=1 scripts/apt-get-wait install -y -qq \
    --no-install-recommends "${want_debs[@]}" >/dev/null
fi

stamp=.venv/.installed
if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  .venv/bin/python -m pip install -q --upgrade pip >/dev/null
  .venv/bin/python -m pip install -q -e '.[dev]'
  touch "$stamp"
fi
