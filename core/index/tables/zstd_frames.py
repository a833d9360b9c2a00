"""zstd for the stored format (the note texts, the term-major arrays): Python's own ``compression.zstd`` from
3.14, ``backports.zstd`` (the same module, PEP 784) before; and one frame of bytes read back whole."""

from __future__ import annotations

import sys

if sys.version_info >= (3, 14):
    from compression import zstd
else:  # the same module, for Python 3.11-3.13 (PEP 784)
    from backports import zstd

__all__ = ["compressor", "one_frame", "zstd"]


def compressor(level: int, *, checksum: bool = False, zdict: bytes | None = None) -> zstd.ZstdCompressor:
    """A compressor at ``level`` (with the frame's checksum, and a dictionary, when asked). One per thread:
    it is not safe to share."""
    options: dict[int, int] = {
        zstd.CompressionParameter.compression_level: level,
        zstd.CompressionParameter.checksum_flag: int(checksum),
    }
    return zstd.ZstdCompressor(options=options, zstd_dict=None if zdict is None else zstd.ZstdDict(zdict))


def one_frame(data: bytes, zdict: zstd.ZstdDict | tuple[zstd.ZstdDict, int] | None = None) -> bytes:
    """The bytes of exactly one frame (``zdict``: its dictionary, as ``ZstdDecompressor`` takes it); a frame cut
    short, or anything after it, is a ``zstd.ZstdError``."""
    decompressor = zstd.ZstdDecompressor(zstd_dict=zdict)
    raw = decompressor.decompress(data)
    if not decompressor.eof or decompressor.unused_data:
        raise zstd.ZstdError("truncated or trailing data")
    return raw
