"""Decoder of the LZ4 *block stream* framing that Spark's ``lz4`` compression codec writes.

Spark compresses state store files with lz4-java's ``LZ4BlockOutputStream``. The stream is a
sequence of blocks, each with a 21-byte header:

======  =====  =========================================================
offset  bytes  field
======  =====  =========================================================
0       8      magic ``b"LZ4Block"``
8       1      token: high nibble = method (``0x10`` raw, ``0x20`` LZ4), low nibble = level
9       4      compressed length (little-endian)
13      4      original length (little-endian)
17      4      checksum: XXH32 of the original bytes, seed ``0x9747b28c``, low 28 bits
======  =====  =========================================================

followed by the block's payload. A block with both lengths 0 ends the stream.

This framing is lz4-java's own: it is neither the LZ4 *frame* format (``lz4.frame``, magic
``0x184D2204``) nor a size-prefixed block, so the thin parser here walks the headers and hands
each payload to the reference LZ4 library (``lz4.block.decompress``, the LZ4 *block format*) and
each checksum to ``xxhash``. The reference decoder enforces the block format's end-of-block rules
(the last 5 bytes are literals, the last match starts at least 12 bytes before the end), which
every compressor, lz4-java's included, follows; a block breaking them is reported as corrupt.
See ``specs/spark.md#checkpoint-files``.
"""

from __future__ import annotations

import struct

import lz4.block
import xxhash

from rollcheck.pyimpl.errors import InvalidInputError

__all__ = ["lz4_block_decompress", "lz4_stream_decompress", "xxh32", "STREAM_SEED"]

MAGIC = b"LZ4Block"
STREAM_SEED = 0x9747B28C
_HEADER = 8 + 1 + 4 + 4 + 4
_HEAD = struct.Struct("<8sBiii")
_MASK28 = 0xFFFFFFF


def xxh32(data: bytes, seed: int = 0) -> int:
    """The 32-bit xxHash of ``data``.

    Parameters
    ----------
    data : bytes
        The bytes to hash.
    seed : int, optional
        The hash seed (lz4-java's block streams use :data:`STREAM_SEED`).

    Returns
    -------
    int
        The unsigned 32-bit hash.

    Examples
    --------
    >>> hex(xxh32(b""))
    '0x2cc5d05'
    >>> hex(xxh32(b"abc"))
    '0x32d153ff'
    """
    return int(xxhash.xxh32_intdigest(data, seed=seed))


def lz4_block_decompress(src: bytes, original_length: int) -> bytes:
    """Decompress one LZ4 block whose decompressed size is known.

    Parameters
    ----------
    src : bytes
        The block (LZ4 block format, no size prefix).
    original_length : int
        The decompressed size the stream header announces.

    Returns
    -------
    bytes
        Exactly ``original_length`` bytes.

    Raises
    ------
    InvalidInputError
        The block is corrupt (a match before the start, lengths that overrun the input or the
        output, the block format's end rules broken) or decompresses to another size.

    Examples
    --------
    >>> # literal "ab", a match of length 6 at offset 2 (overlapping copy), 12 final literals
    >>> lz4_block_decompress(bytes([0x22]) + b"ab" + bytes([2, 0, 0xC0]) + b"c" * 12, 20)
    b'ababababcccccccccccc'
    """
    if original_length < 0:
        raise InvalidInputError(f"LZ4 block: negative decompressed length {original_length}")
    if original_length == 0:
        if src not in (b"", b"\x00"):
            raise InvalidInputError("LZ4 block: data in a block whose decompressed length is 0")
        return b""
    try:
        out = lz4.block.decompress(src, uncompressed_size=original_length)
    except lz4.block.LZ4BlockError:
        raise InvalidInputError(
            "LZ4 block: corrupt (a match offset before the start of the output, or lengths that "
            f"overrun the {len(src)}-byte input or the {original_length}-byte output)") from None
    if len(out) != original_length:
        raise InvalidInputError(f"LZ4 block: decompressed {len(out)} bytes, header says {original_length}")
    return bytes(out)


def lz4_stream_decompress(data: bytes, verify_checksum: bool = True) -> bytes:
    """Decompress an lz4-java block stream (``LZ4BlockOutputStream``), checking every checksum.

    Parameters
    ----------
    data : bytes
        The whole stream, up to and including its end-of-stream block.
    verify_checksum : bool, optional
        Check each block's masked XXH32 (default true).

    Returns
    -------
    bytes
        The concatenated blocks.

    Raises
    ------
    InvalidInputError
        A missing magic, a truncated header, invalid lengths, an unknown method, a corrupt block,
        a checksum mismatch or a missing end-of-stream block.

    Examples
    --------
    >>> payload = b"hello hello hello"
    >>> raw = MAGIC + bytes([0x10]) + struct.pack("<iii", len(payload), len(payload),
    ...                                         xxh32(payload, STREAM_SEED) & 0xFFFFFFF) + payload
    >>> end = MAGIC + bytes([0x10]) + struct.pack("<iii", 0, 0, 0)
    >>> lz4_stream_decompress(raw + end)
    b'hello hello hello'
    """
    view = memoryview(data)
    out = bytearray()
    i = 0
    block = 0
    n = len(data)
    while i < n:
        if view[i:i + 8] != MAGIC:
            raise InvalidInputError(f"LZ4 stream: block {block} at byte {i} lacks the LZ4Block magic")
        if i + _HEADER > n:
            raise InvalidInputError(f"LZ4 stream: block {block} header is truncated")
        _, token, clen, olen, check = _HEAD.unpack_from(data, i)
        i += _HEADER
        method = token & 0xF0
        if olen == 0 and clen == 0:
            return bytes(out)
        if clen < 0 or olen < 0 or i + clen > n:
            raise InvalidInputError(f"LZ4 stream: block {block} lengths are invalid")
        payload = data[i:i + clen]
        i += clen
        if method == 0x10:
            piece = payload
        elif method == 0x20:
            piece = lz4_block_decompress(payload, olen)
        else:
            raise InvalidInputError(f"LZ4 stream: block {block} has unknown method {method:#x}")
        if verify_checksum and (xxhash.xxh32_intdigest(piece, seed=STREAM_SEED) & _MASK28) != (check & _MASK28):
            raise InvalidInputError(f"LZ4 stream: block {block} checksum mismatch")
        out += piece
        block += 1
    raise InvalidInputError("LZ4 stream: missing end-of-stream block")
