"""The micro-VM boots Debian's kernel as its uncompressed ELF (PVH): decompressed once, here."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from chaos_ext._products.sandbox.vm.initramfs import newest_kernel
from chaos_ext._products.sandbox.vm.kernel import boot_image


@pytest.fixture
def release() -> str:
    if not list(Path("/boot").glob("vmlinuz-*")):
        pytest.skip("no Debian kernel installed (linux-image-amd64)")
    return newest_kernel()


def test_a_pvh_kernel_is_unpacked_once_into_the_cache(release: str, tmp_path: Path) -> None:
    if "CONFIG_PVH=y" not in Path(f"/boot/config-{release}").read_text():
        pytest.skip("this kernel has no PVH entry point")
    image = boot_image(release, tmp_path)
    assert image.parent == tmp_path and image.name.startswith(f"vmlinux-{release}-")
    assert image.read_bytes()[:4] == b"\x7fELF"
    assert image.stat().st_size > Path(f"/boot/vmlinuz-{release}").stat().st_size
    mtime = image.stat().st_mtime_ns
    assert boot_image(release, tmp_path) == image and image.stat().st_mtime_ns == mtime


def test_without_pvh_the_bzimage_boots_as_before(release: str, tmp_path: Path) -> None:
    boot = tmp_path / "boot"
    boot.mkdir()
    shutil.copy(f"/boot/vmlinuz-{release}", boot / f"vmlinuz-{release}")
    (boot / f"config-{release}").write_text("# CONFIG_PVH is not set\n")
    assert boot_image(release, tmp_path / "cache", boot) == boot / f"vmlinuz-{release}"
    (boot / f"config-{release}").write_text("CONFIG_PVH=y\n")
    (boot / f"vmlinuz-{release}").write_bytes(b"MZ not a kernel")  # no XZ payload
    assert boot_image(release, tmp_path / "cache", boot) == boot / f"vmlinuz-{release}"
