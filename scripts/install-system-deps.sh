#!/usr/bin/env bash
# Install the Debian packages gameday's demo and tests use. Idempotent: when
# everything is present it returns at once. Services are installed, never
# started by the package manager (tests and the sandbox start their own
# instances on their own ports and data directories).
#   scripts/install-system-deps.sh         everything (make test)
#   scripts/install-system-deps.sh demo    only what make demo needs (a faster first install)
#   scripts/install-system-deps.sh bench   the demo's services and what the benchmarks compare
#                                          against (make bench): dnsperf, wrk, nginx, pgbench,
#                                          kubectl, pandoc, stress-ng
set -euo pipefail
mode="${1:-all}"
case "$mode" in
  all|demo|bench) ;;
  *) echo "usage: $0 [demo|bench]" >&2; exit 3 ;;
esac
cd "$(dirname "$0")"

# the demo: the sandbox's services, its node VM (qemu, Debian's kernel, busybox) and sshd
packages=(
  python3 python3-venv iproute2 procps psmisc openssh-server openssh-client
  dnsmasq-base nftables postgresql-15 prometheus
  qemu-system-x86 linux-image-amd64 busybox-static
)
# the benchmarks' peers: dnsperf (benchmarks/dns.py), wrk and nginx (load.py), pgbench
# (db.py; postgresql-15 has it, postgresql-client too), kubectl (k8s.py), pandoc (report.py
# and cli.py: chaostoolkit-reporting converts with it), stress-ng (sandbox.py)
if [ "$mode" = "bench" ]; then
  packages+=(dnsperf wrk nginx postgresql-client pandoc stress-ng)
  command -v kubectl >/dev/null 2>&1 || packages+=(kubernetes-client)
fi
if [ "$mode" = "all" ]; then
  packages+=(
    mariadb-server prometheus-alertmanager prometheus-pushgateway
    dnsperf wrk hyperfine nginx openssl ca-certificates stress-ng conntrack
    chromium pandoc
  )
  # kubectl: Debian's kubernetes-client, unless a kubectl is already installed
  command -v kubectl >/dev/null 2>&1 || packages+=(kubernetes-client)
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "system packages: all present"
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "system packages missing (${missing[*]}); run as root" >&2
  exit 1
fi
echo "system packages: installing ${#missing[@]}: ${missing[*]}"
created_policy=0
if [ ! -e /usr/sbin/policy-rc.d ]; then
  printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d
  chmod +x /usr/sbin/policy-rc.d
  created_policy=1
fi
cleanup() { [ "$created_policy" -eq 1 ] && rm -f /usr/sbin/policy-rc.d; return 0; }
trap cleanup EXIT
export DEBIAN_FRONTEND=noninteractive
./progress.sh "apt-get update" apt-get update -q -o DPkg::Lock::Timeout=600
./progress.sh "installing system packages" \
  apt-get install -y -q -o DPkg::Lock::Timeout=600 --no-install-recommends "${missing[@]}"
