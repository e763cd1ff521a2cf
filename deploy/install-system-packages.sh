#!/usr/bin/env bash
# Installs the Debian packages the local stack runs: PostgreSQL and ZooKeeper
# (which brings Java). Does nothing when they are already there.
set -euo pipefail

missing=()
compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null || missing+=(postgresql)
[ -x /usr/share/zookeeper/bin/zkServer.sh ] || missing+=(zookeeper)
[ ${#missing[@]} -eq 0 ] && exit 0

sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
echo "installing ${missing[*]} with apt-get"
$sudo apt-get update -q
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q "${missing[@]}"
