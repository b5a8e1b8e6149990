#!/usr/bin/env bash
# Install the Debian packages gameday's demo and tests use. Idempotent: when
# everything is present it returns at once. Services are installed, never
# started by the package manager (tests and the sandbox start their own
# instances on their own ports and data directories).
set -euo pipefail

packages=(
  python3 python3-venv iproute2 procps psmisc
  dnsmasq-base nftables postgresql-15 mariadb-server prometheus openssh-server openssh-client
  prometheus-alertmanager prometheus-pushgateway
  dnsperf wrk hyperfine nginx openssl ca-certificates
  qemu-system-x86 linux-image-amd64 busybox-static
  chromium pandoc
)
# kubectl: Debian's kubernetes-client, unless a kubectl is already installed
command -v kubectl >/dev/null 2>&1 || packages+=(kubernetes-client)

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
echo "system packages: installing ${missing[*]}"
created_policy=0
if [ ! -e /usr/sbin/policy-rc.d ]; then
  printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d
  chmod +x /usr/sbin/policy-rc.d
  created_policy=1
fi
cleanup() { [ "$created_policy" -eq 1 ] && rm -f /usr/sbin/policy-rc.d; return 0; }
trap cleanup EXIT
export DEBIAN_FRONTEND=noninteractive
apt-get update -q -o DPkg::Lock::Timeout=600
apt-get install -y -q -o DPkg::Lock::Timeout=600 --no-install-recommends "${missing[@]}"
