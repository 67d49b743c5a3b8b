"""The lz4-java block-stream parser over the reference LZ4 and xxHash libraries."""

import random
import struct

import lz4.block
import pytest

from rollcheck.pyimpl.errors import InvalidInputError
from rollcheck.spark_replay.checkpoint.lz4block import (
    MAGIC,
    STREAM_SEED,
    lz4_block_decompress,
    lz4_stream_decompress,
    xxh32,
)


def _stream(pieces, raw_every=0):
    """An lz4-java ``LZ4BlockOutputStream`` of ``pieces``: LZ4 blocks (every ``raw_every``-th raw)."""
    out = b""
    for n, piece in enumerate(pieces):
        check = xxh32(piece, STREAM_SEED) & 0xFFFFFFF
        if raw_every and n % raw_every == raw_every - 1:
            token, body = 0x10, piece
        else:
            token, body = 0x20, lz4.block.compress(piece, store_size=False)
        out += MAGIC + bytes([token]) + struct.pack("<iii", len(body), len(piece), check) + body
    return out + MAGIC + bytes([0x10]) + struct.pack("<iii", 0, 0, 0)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_stream_round_trip_of_many_blocks(seed):
    rng = random.Random(seed)
    print("seed", seed)
    words = [bytes(rng.choice(b"abcdefgh") for _ in range(rng.randint(1, 9))) for _ in range(40)]
    pieces = [b"".join(rng.choice(words) for _ in range(rng.randint(0, 5000))) for _ in range(6)]
    pieces.append(rng.randbytes(3000))  # incompressible: a block longer than its input
    data = _stream(pieces, raw_every=3)
    assert lz4_stream_decompress(data) == b"".join(pieces)


def test_block_whose_last_sequence_is_a_match_is_corrupt():
    # the block format's end rule: the last 5 bytes are literals; the reference decoder (and
    # lz4-java's) refuses a block ending in a match
    block = bytes([0x22]) + b"ab" + bytes([2, 0])
    with pytest.raises(InvalidInputError, match="corrupt"):
        lz4_block_decompress(block, 8)


def test_block_shorter_or_longer_than_announced():
    piece = b"state store " * 50
    block = lz4.block.compress(piece, store_size=False)
    assert lz4_block_decompress(block, len(piece)) == piece
    with pytest.raises(InvalidInputError, match="header says"):
        lz4_block_decompress(block, len(piece) + 7)
    with pytest.raises(InvalidInputError, match="corrupt"):
        lz4_block_decompress(block, len(piece) - 7)
    with pytest.raises(InvalidInputError, match="corrupt"):
        lz4_block_decompress(block[:-3], len(piece))


def test_stream_checksum_uses_the_stream_seed():
    piece = b"x" * 100
    body = lz4.block.compress(piece, store_size=False)
    unseeded = xxh32(piece) & 0xFFFFFFF
    assert unseeded != xxh32(piece, STREAM_SEED) & 0xFFFFFFF
    head = MAGIC + bytes([0x20]) + struct.pack("<iii", len(body), len(piece), unseeded)
    end = MAGIC + bytes([0x10]) + struct.pack("<iii", 0, 0, 0)
    with pytest.raises(InvalidInputError, match="checksum"):
        lz4_stream_decompress(head + body + end)
    assert lz4_stream_decompress(head + body + end, verify_checksum=False) == piece
