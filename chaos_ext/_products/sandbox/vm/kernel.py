"""Which kernel image qemu boots: the uncompressed ELF (PVH entry) when possible.

A bzImage decompresses itself inside the guest; under emulation (TCG) Debian's
XZ-compressed kernel takes about 5 s of every boot to do that, on every boot
(measured: first console output after 6.2 s, 0.9 s with the ELF; the guest's
agent ready after 13.0 s, 7.7 s with the ELF). A kernel built with
``CONFIG_PVH=y`` (Debian's is) can be booted as its uncompressed ``vmlinux``
through the PVH entry point, so it is decompressed once, on the host, with
Python's lzma, and cached next to the initramfs. Anything else (no PVH, no XZ
payload) boots the bzImage as before.
"""

from __future__ import annotations

import lzma
import os
from pathlib import Path

__all__ = ["boot_image"]

XZ_MAGIC = b"\xfd7zXZ\x00"
ELF_MAGIC = b"\x7fELF"


def _has_pvh(config: Path) -> bool:
    try:
        return "CONFIG_PVH=y" in config.read_text().splitlines()
    except OSError:
        return False


def _extract(bzimage: Path, target: Path) -> bool:
    data = bzimage.read_bytes()
    start = data.find(XZ_MAGIC)
    if start < 0:
        return False
    try:
        elf = lzma.LZMADecompressor(format=lzma.FORMAT_XZ).decompress(data[start:])
    except lzma.LZMAError:
        return False
    if not elf.startswith(ELF_MAGIC):
        return False
    tmp = target.with_suffix(f".tmp{os.getpid()}")
    tmp.write_bytes(elf)
    os.replace(tmp, target)
    return True


def boot_image(release: str, cache_dir: Path, boot: Path = Path("/boot")) -> Path:
    """The ELF ``vmlinux`` of ``release`` (cached) if it can boot via PVH, else its bzImage."""
    bzimage = boot / f"vmlinuz-{release}"
    if not _has_pvh(boot / f"config-{release}"):
        return bzimage
    stat = bzimage.stat()
    target = cache_dir / f"vmlinux-{release}-{stat.st_size}-{stat.st_mtime_ns}"
    if target.exists():
        return target
    cache_dir.mkdir(parents=True, exist_ok=True)
    return target if _extract(bzimage, target) else bzimage
