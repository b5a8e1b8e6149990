"""Build (and cache) the micro-VM's initramfs: busybox-static, kernel modules, an init.

The initramfs is tiny: busybox, the modules the lane needs (with their
dependencies from ``modules.dep``, loaded dependencies first) and an ``/init``
that mounts the host's root read-only over 9p, a writable 9p share, and then
runs ``/run/vmshare/boot.sh`` (written by the host for each boot) chrooted in
the host's root, so the guest runs the host's own python, venv and iproute2.

It is written as a ``newc`` cpio archive by Python (no ``cpio`` binary needed)
and cached under the work directory, keyed by kernel release, module list,
busybox binary and init script.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import os
import shutil
from collections.abc import Iterable, Sequence
from pathlib import Path

from chaos_ext._products.sandbox.errors import SandboxError

__all__ = [
    "DEFAULT_MODULES",
    "INIT_SCRIPT",
    "build_initramfs",
    "module_load_order",
    "newest_kernel",
    "qemu_available",
]

DEFAULT_MODULES: tuple[str, ...] = (
    "9p",
    "9pnet_virtio",
    "virtio_pci",
    "virtio_net",
    "veth",
    "bridge",
    "sch_netem",
    "sch_htb",
    "sch_tbf",
    "sch_prio",
    "sch_sfq",
    "sch_ingress",
    "cls_u32",
    "cls_matchall",
    "cls_flower",
    # the DNS packet-rate limit (limit_dns_rate); libcrc32c (nf_tables' dependency) asks the
    # crypto API for crc32c at load time, and nothing can modprobe it here: load it first
    "crc32c_generic",
    "nf_tables",
    "nft_limit",
    "nft_objref",
)
"""Modules the network lane (and the local sandbox) needs; dependencies are added."""

BUSYBOX = Path("/bin/busybox")
BOOT_MARKER = "GAMEDAY-VM-INIT"
EXIT_MARKER = "GAMEDAY-VM-EXIT"
SHARE_IN_GUEST = "/run/vmshare"
HOST_TMP_IN_GUEST = "/run/hosttmp"
"""The host's /tmp (read-only), hidden under the guest's own tmpfs /tmp."""

INIT_SCRIPT = f"""#!/bin/busybox sh
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
echo {BOOT_MARKER}
for m in $(cat /modules.order); do
  insmod /modules/$m.ko 2>/dev/null || echo "gameday-vm: insmod $m failed"
done
opts=trans=virtio,version=9p2000.L,msize=262144
mount -t 9p -o $opts,ro,cache=loose hostroot /mnt || {{ echo "{EXIT_MARKER} 97"; poweroff -f; }}
mkdir -p /hosttmp && mount --bind /mnt/tmp /hosttmp
mount -t tmpfs -o mode=1777 tmpfs /mnt/tmp
mount -t tmpfs -o mode=755 tmpfs /mnt/run
mkdir -p /mnt{SHARE_IN_GUEST} /mnt/run/netns /mnt/run/sshd /mnt{HOST_TMP_IN_GUEST}
mount --move /hosttmp /mnt{HOST_TMP_IN_GUEST}
mount -t 9p -o $opts,rw share /mnt{SHARE_IN_GUEST} || {{ echo "{EXIT_MARKER} 98"; poweroff -f; }}
mount -t proc proc /mnt/proc
mount -t sysfs sysfs /mnt/sys
mount -t devtmpfs devtmpfs /mnt/dev
mkdir -p /mnt/dev/pts /mnt/dev/shm
mount -t devpts devpts /mnt/dev/pts
mount -t tmpfs tmpfs /mnt/dev/shm
hostname gameday-vm
chroot /mnt /bin/sh {SHARE_IN_GUEST}/boot.sh
echo "{EXIT_MARKER} $?"
sync
poweroff -f
"""


def _read_deps(modules_dir: Path) -> dict[str, tuple[str, list[str]]]:
    """``name -> (relative path, dependency names)`` from ``modules.dep``."""
    deps: dict[str, tuple[str, list[str]]] = {}
    try:
        text = (modules_dir / "modules.dep").read_text()
    except OSError as exc:
        raise SandboxError(f"cannot read {modules_dir}/modules.dep: {exc}") from exc
    for line in text.splitlines():
        path, _, rest = line.partition(":")
        deps[_name_of(path)] = (path, [_name_of(d) for d in rest.split()])
    return deps


def _name_of(path: str) -> str:
    return Path(path).name.split(".ko")[0]


def module_load_order(kernel_release: str, wanted: Iterable[str], modules_root: Path) -> list[str]:
    """The modules to insmod, dependencies first (like modprobe would).

    Raises SandboxError naming a module that this kernel does not ship.
    """
    deps = _read_deps(modules_root / kernel_release)
    order: list[str] = []

    def visit(name: str) -> None:
        if name in order:
            return
        if name not in deps:
            raise SandboxError(f"kernel {kernel_release} has no module {name!r}")
        for dep in reversed(deps[name][1]):
            visit(dep)
        order.append(name)

    for name in wanted:
        visit(name)
    return order


def _cpio_entry(name: str, mode: int, data: bytes = b"", ino: int = 0) -> bytes:
    fields = (ino, mode, 0, 0, 1, 0, len(data), 0, 0, 0, 0, len(name) + 1, 0)
    header = "070701" + "".join(f"{f:08x}" for f in fields)
    out = header.encode() + name.encode() + b"\0"
    out += b"\0" * (-len(out) % 4)
    out += data + b"\0" * (-len(data) % 4)
    return out


def _archive(files: Sequence[tuple[str, int, bytes]]) -> bytes:
    buf = io.BytesIO()
    for ino, (name, mode, data) in enumerate(files, start=1):
        buf.write(_cpio_entry(name, mode, data, ino))
    buf.write(_cpio_entry("TRAILER!!!", 0))
    return gzip.compress(buf.getvalue(), compresslevel=6)


def build_initramfs(
    kernel_release: str,
    cache_dir: Path,
    modules: Sequence[str] = DEFAULT_MODULES,
    modules_root: Path = Path("/lib/modules"),
) -> Path:
    """Build the initramfs once and return its cached path."""
    if not BUSYBOX.exists():
        raise SandboxError(f"{BUSYBOX} is missing: install Debian's busybox-static")
    order = module_load_order(kernel_release, modules, modules_root)
    stat = BUSYBOX.stat()
    key = hashlib.sha256(
        "\n".join(
            [kernel_release, *order, INIT_SCRIPT, f"{stat.st_size}:{stat.st_mtime_ns}"]
        ).encode()
    ).hexdigest()[:12]
    target = cache_dir / f"initramfs-{kernel_release}-{key}.cpio.gz"
    if target.exists():
        return target
    deps = _read_deps(modules_root / kernel_release)
    files: list[tuple[str, int, bytes]] = [
        (d, 0o40755, b"") for d in ("bin", "dev", "proc", "sys", "mnt", "modules", "tmp")
    ]
    files.append(("bin/busybox", 0o100755, BUSYBOX.read_bytes()))
    files.append(("init", 0o100755, INIT_SCRIPT.encode()))
    files.append(("modules.order", 0o100644, "\n".join(order).encode() + b"\n"))
    for name in order:
        data = (modules_root / kernel_release / deps[name][0]).read_bytes()
        files.append((f"modules/{name}.ko", 0o100644, data))
    cache_dir.mkdir(parents=True, exist_ok=True)
    tmp = target.with_suffix(f".tmp{os.getpid()}")
    tmp.write_bytes(_archive(files))
    os.replace(tmp, target)
    return target


def newest_kernel(modules_root: Path = Path("/lib/modules"), boot: Path = Path("/boot")) -> str:
    """The newest kernel release with both a vmlinuz and a modules tree."""
    releases = sorted(
        p.name[len("vmlinuz-") :]
        for p in boot.glob("vmlinuz-*")
        if (modules_root / p.name[len("vmlinuz-") :] / "modules.dep").exists()
    )
    if not releases:
        raise SandboxError(
            "no kernel with modules found under /boot and /lib/modules: "
            "install Debian's linux-image-amd64"
        )
    return releases[-1]


def qemu_available() -> bool:
    """Whether qemu-system-x86_64 is on PATH."""
    return shutil.which("qemu-system-x86_64") is not None
