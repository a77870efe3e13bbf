#!/usr/bin/env bash
# Installs the Debian packages orchestrate builds against and tests with. Idempotent and quick
# when everything is already there (no apt-get update then).
set -euo pipefail
packages=(
  pkg-config gcc libc6-dev          # C plugins are built with plain cc; system-library targets use pkg-config
  libssl-dev                        # libcrypto: SHA-256 for the fs plugin
  libsqlite3-dev sqlite3            # the state store (GRDB links the system SQLite); sqlite3 for the bench baseline
  libcurl4-openssl-dev              # the HTTP plugin
  libssh2-1-dev                     # the SFTP plugin
  libpq-dev postgresql              # the PostgreSQL state store; a throwaway server for its tests
  openssl                           # certificates for the TLS tests (database, HTTP)
  openssh-server openssh-client     # a real sshd on loopback for the SFTP tests
  nginx-light                       # a real HTTP server on loopback for the HTTP tests
  vsftpd                            # a real FTPS server on loopback for the FTP tests (run in the foreground)
  tmux                              # terminal tests of the progress display
  iproute2 curl                     # ip netns, veth, bridges: the several-machines tests (and curl to the sandbox)
  python3                           # test tools: scripted servers, the fault proxy, the crash campaign
  python3-venv chromium chromium-driver  # PyPI test packages in a venv (scripts/python-venv.sh: prometheus-client, schemathesis, selenium) and the dashboard's browser test
  cargo rustc                       # the Rust example plugin (plugins/examples/hello-rust), built and run by a test
  systemd                           # systemd-analyze verify checks contrib/systemd/orchestrate-serve.service (needs no running systemd)
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "installing: ${missing[*]}" >&2
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
