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

followed by the block's payload. A block with both lengths 0 ends the stream. The payload of an
LZ4 block is the LZ4 *block format*: sequences of a token (literal length in the high nibble,
match length - 4 in the low nibble, 15 meaning "more length bytes follow, 255 means continue"),
the literals, a 2-byte little-endian match offset and the match, copied byte by byte because it
may overlap its own output. The last sequence has literals only.

Written from the format descriptions (lz4 block format, lz4-java's stream framing); see
``specs/spark.md#checkpoint-files``.
"""

from __future__ import annotations

import struct

from rollcheck.pyimpl.errors import InvalidInputError

__all__ = ["lz4_block_decompress", "lz4_stream_decompress", "xxh32", "STREAM_SEED"]

MAGIC = b"LZ4Block"
STREAM_SEED = 0x9747B28C
_HEADER = 8 + 1 + 4 + 4 + 4
_P1, _P2, _P3, _P4, _P5 = 2654435761, 2246822519, 3266489917, 668265263, 374761393
_M = 0xFFFFFFFF


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _M


def xxh32(data: bytes, seed: int = 0) -> int:
    """The 32-bit xxHash of ``data``.

    Examples
    --------
    >>> hex(xxh32(b""))
    '0x2cc5d05'
    >>> hex(xxh32(b"abc"))
    '0x32d153ff'
    """
    n = len(data)
    i = 0
    if n >= 16:
        v1 = (seed + _P1 + _P2) & _M
        v2 = (seed + _P2) & _M
        v3 = seed & _M
        v4 = (seed - _P1) & _M
        limit = n - 16
        while i <= limit:
            a, b, c, d = struct.unpack_from("<4I", data, i)
            v1 = (_rotl((v1 + a * _P2) & _M, 13) * _P1) & _M
            v2 = (_rotl((v2 + b * _P2) & _M, 13) * _P1) & _M
            v3 = (_rotl((v3 + c * _P2) & _M, 13) * _P1) & _M
            v4 = (_rotl((v4 + d * _P2) & _M, 13) * _P1) & _M
            i += 16
        h = (_rotl(v1, 1) + _rotl(v2, 7) + _rotl(v3, 12) + _rotl(v4, 18)) & _M
    else:
        h = (seed + _P5) & _M
    h = (h + n) & _M
    while i + 4 <= n:
        (k,) = struct.unpack_from("<I", data, i)
        h = (_rotl((h + k * _P3) & _M, 17) * _P4) & _M
        i += 4
    while i < n:
        h = (_rotl((h + data[i] * _P5) & _M, 11) * _P1) & _M
        i += 1
    h ^= h >> 15
    h = (h * _P2) & _M
    h ^= h >> 13
    h = (h * _P3) & _M
    h ^= h >> 16
    return h


def lz4_block_decompress(src: bytes, original_length: int) -> bytes:
    """Decompress one LZ4 block whose decompressed size is known.

    Raises
    ------
    InvalidInputError
        The block is corrupt (a match before the start, lengths that overrun the input, or a
        result of the wrong size).

    Examples
    --------
    >>> # literal "ab", then a match of length 6 at offset 2 (overlapping copy), then literal "c"
    >>> lz4_block_decompress(bytes([0x22]) + b"ab" + bytes([2, 0]) + bytes([0x10]) + b"c", 9)
    b'ababababc'
    """
    out = bytearray()
    i = 0
    n = len(src)
    while i < n:
        token = src[i]
        i += 1
        lit = token >> 4
        if lit == 15:
            while True:
                if i >= n:
                    raise InvalidInputError("LZ4 block: literal length runs past the end")
                b = src[i]
                i += 1
                lit += b
                if b != 255:
                    break
        if i + lit > n:
            raise InvalidInputError("LZ4 block: literals run past the end")
        out += src[i:i + lit]
        i += lit
        if i >= n:  # the last sequence carries literals only
            break
        if i + 2 > n:
            raise InvalidInputError("LZ4 block: truncated match offset")
        offset = src[i] | (src[i + 1] << 8)
        i += 2
        mlen = token & 15
        if mlen == 15:
            while True:
                if i >= n:
                    raise InvalidInputError("LZ4 block: match length runs past the end")
                b = src[i]
                i += 1
                mlen += b
                if b != 255:
                    break
        mlen += 4
        start = len(out) - offset
        if offset == 0 or start < 0:
            raise InvalidInputError(f"LZ4 block: match offset {offset} before the start of the output")
        if offset >= mlen:
            out += out[start:start + mlen]
        else:  # overlapping copy: repeat the period
            period = bytes(out[start:])
            reps, rest = divmod(mlen, offset)
            out += period * reps + period[:rest]
    if len(out) != original_length:
        raise InvalidInputError(f"LZ4 block: decompressed {len(out)} bytes, header says {original_length}")
    return bytes(out)


def lz4_stream_decompress(data: bytes, verify_checksum: bool = True) -> bytes:
    """Decompress an lz4-java block stream (``LZ4BlockOutputStream``), checking every checksum.

    Examples
    --------
    >>> payload = b"hello hello hello"
    >>> raw = MAGIC + bytes([0x10]) + struct.pack("<iii", len(payload), len(payload),
    ...                                         xxh32(payload, STREAM_SEED) & 0xFFFFFFF) + payload
    >>> end = MAGIC + bytes([0x10]) + struct.pack("<iii", 0, 0, 0)
    >>> lz4_stream_decompress(raw + end)
    b'hello hello hello'
    """
    out = bytearray()
    i = 0
    block = 0
    while i < len(data):
        if data[i:i + 8] != MAGIC:
            raise InvalidInputError(f"LZ4 stream: block {block} at byte {i} lacks the LZ4Block magic")
        if i + _HEADER > len(data):
            raise InvalidInputError(f"LZ4 stream: block {block} header is truncated")
        token = data[i + 8]
        clen, olen, check = struct.unpack_from("<iii", data, i + 9)
        i += _HEADER
        method = token & 0xF0
        if olen == 0 and clen == 0:
            return bytes(out)
        if clen < 0 or olen < 0 or i + clen > len(data):
            raise InvalidInputError(f"LZ4 stream: block {block} lengths are invalid")
        payload = data[i:i + clen]
        i += clen
        if method == 0x10:
            piece = payload
        elif method == 0x20:
            piece = lz4_block_decompress(payload, olen)
        else:
            raise InvalidInputError(f"LZ4 stream: block {block} has unknown method {method:#x}")
        if verify_checksum and (xxh32(piece, STREAM_SEED) & 0xFFFFFFF) != (check & 0xFFFFFFF):
            raise InvalidInputError(f"LZ4 stream: block {block} checksum mismatch")
        out += piece
        block += 1
    raise InvalidInputError("LZ4 stream: missing end-of-stream block")
