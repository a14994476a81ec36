"""tf.train.Example bytes and TFRecord framing without TensorFlow (runs on Dataflow workers).

The records are the trainer's input (docs/contract.md section 4, the layout of the public ImageNet
converters and of `trainer.datagen`). TensorFlow is 600 MB and 3 s to import; a Dataflow worker
only needs to *write* five message types, so they are encoded here by hand:

    Example  { Features features = 1; }
    Features { map<string, Feature> feature = 1; }      # entries: key = 1, value = 2
    Feature  { BytesList bytes_list = 1; Int64List int64_list = 3; }
    BytesList{ repeated bytes value = 1; }
    Int64List{ repeated int64 value = 1 [packed]; }

Map entries are written sorted by key, so the bytes equal TensorFlow's
`SerializeToString(deterministic=True)` (tests/dataprep checks it against TensorFlow).

TFRecord framing: uint64 length, uint32 masked CRC-32C of the length, the data, uint32 masked
CRC-32C of the data (all little-endian); CRC-32C from google-crc32c (C), which apache-beam[gcp]
already installs through google-cloud-storage.
"""

from __future__ import annotations

import posixpath
import struct
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, BinaryIO

import google_crc32c

FeatureValue = bytes | str | int | Sequence[bytes] | Sequence[int]

_MASK_DELTA = 0xA282EAD8
_U32 = 0xFFFFFFFF
_U64 = 0xFFFFFFFFFFFFFFFF


# -- protobuf wire format ---------------------------------------------------------------------
def _varint(value: int) -> bytes:
    value &= _U64  # negative int64: ten bytes of two's complement, as protobuf writes it
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _field(number: int, payload: bytes) -> bytes:
    """A length-delimited field (wire type 2)."""
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _feature(value: FeatureValue) -> bytes:
    values: list[bytes | str | int] = [value] if isinstance(value, (bytes, str, int)) else list(value)
    ints = [v for v in values if isinstance(v, int) and not isinstance(v, bool)]
    if values and len(ints) == len(values):
        return _field(3, _field(1, b"".join(_varint(v) for v in ints)))  # Int64List, packed
    texts = [v.encode() if isinstance(v, str) else v for v in values if isinstance(v, (bytes, str))]
    if len(texts) == len(values):
        return _field(1, b"".join(_field(1, t) for t in texts))
    raise TypeError(f"a feature is bytes/str or int values, got {values!r}")


def encode_example(features: Mapping[str, FeatureValue]) -> bytes:
    """A serialized tf.train.Example: str/bytes values become BytesList, ints Int64List."""
    entries = b"".join(
        _field(1, _field(1, key.encode()) + _field(2, _feature(features[key]))) for key in sorted(features)
    )
    return _field(1, entries)


def image_example(
    image: bytes,
    label: int,
    *,
    image_format: str,
    height: int,
    width: int,
    channels: int,
    synset: str = "",
    filename: str = "",
) -> bytes:
    """One record in the ImageNet layout `trainer.data` reads (label 0-based)."""
    return encode_example(
        {
            "image/encoded": image,
            "image/format": image_format,
            "image/class/label": label,
            "image/class/synset": synset,
            "image/height": height,
            "image/width": width,
            "image/channels": channels,
            "image/colorspace": "RGB" if channels != 1 else "Grayscale",
            "image/filename": filename,
        }
    )


def _read_varint(data: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos
        shift += 7


def _fields(data: bytes) -> Iterator[tuple[int, int, bytes | int]]:
    pos = 0
    while pos < len(data):
        tag, pos = _read_varint(data, pos)
        number, wire = tag >> 3, tag & 7
        if wire == 0:
            value, pos = _read_varint(data, pos)
            yield number, wire, value
        elif wire == 2:
            size, pos = _read_varint(data, pos)
            yield number, wire, data[pos : pos + size]
            pos += size
        else:
            raise ValueError(f"unexpected wire type {wire} in an Example")


def _nested(value: bytes | int) -> bytes:
    """A message field's payload: length-delimited, never a varint."""
    if isinstance(value, int):
        raise ValueError(f"unexpected varint {value} where an Example has a message")
    return value


def decode_example(data: bytes) -> dict[str, list[Any]]:
    """The features of a serialized Example: {key: [bytes...] or [int...]} (for tools and tests)."""
    out: dict[str, list[Any]] = {}
    for _, _, features in _fields(data):
        for _, _, entry in _fields(_nested(features)):
            parts = {number: _nested(value) for number, _, value in _fields(_nested(entry))}
            key = parts.get(1, b"").decode()
            values: list[Any] = []
            for kind, _, body in _fields(parts.get(2, b"")):
                for _, _, value in _fields(_nested(body)):
                    if kind == 1:
                        values.append(value)
                    elif isinstance(value, int):  # an unpacked int64 (wire type 0)
                        values.append(_signed(value))
                    else:
                        pos = 0
                        while pos < len(value):
                            v, pos = _read_varint(value, pos)
                            values.append(_signed(v))
            out[key] = values
    return out


def _signed(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


# -- TFRecord framing -------------------------------------------------------------------------
def masked_crc(data: bytes) -> int:
    crc: int = google_crc32c.value(data)
    return (((crc >> 15) | (crc << 17)) + _MASK_DELTA) & _U32


def frame(record: bytes) -> bytes:
    """One record in TFRecord framing."""
    length = struct.pack("<Q", len(record))
    return length + struct.pack("<I", masked_crc(length)) + record + struct.pack("<I", masked_crc(record))


def write_record(handle: BinaryIO, record: bytes) -> int:
    """Append one framed record; returns the bytes written."""
    framed = frame(record)
    handle.write(framed)
    return len(framed)


def read_records(handle: BinaryIO) -> Iterator[bytes]:
    """The records of a TFRecord file, checking both CRCs (for tools and tests)."""
    while True:
        header = handle.read(12)
        if not header:
            return
        if len(header) < 12:
            raise ValueError("truncated TFRecord header")
        length, crc = struct.unpack("<QI", header)
        if masked_crc(header[:8]) != crc:
            raise ValueError("corrupt TFRecord length")
        data = handle.read(length)
        footer = handle.read(4)
        if len(data) < length or len(footer) < 4:
            raise ValueError("truncated TFRecord")
        if masked_crc(data) != struct.unpack("<I", footer)[0]:
            raise ValueError("corrupt TFRecord data")
        yield data


def shard_name(prefix: str, index: int, shards: int) -> str:
    """`train-00003-of-00016`: the ImageNet converters' naming (and trainer.datagen's)."""
    return f"{prefix}-{index:05d}-of-{shards:05d}"


def join(base: str, *parts: str) -> str:
    """posixpath.join for local POSIX paths and gs:// alike."""
    return posixpath.join(base, *parts)
