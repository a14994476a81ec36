"""The hand-built Example encoder and TFRecord framing, and the image checks."""

from __future__ import annotations

import io

import pytest
from PIL import Image

from vertex_trainer.dataprep import images, records

FEATURES = {
    "image/encoded": b"\xff\xd8\xff\x00jpeg",
    "image/class/label": 3,
    "image/format": "JPEG",
    "empty": b"",
    "many": [b"a", b"bc"],
    "ints": [-5, 0, 300, 2**40],
}


def test_examples_decode_to_what_was_encoded():
    data = records.encode_example(FEATURES)
    decoded = records.decode_example(data)
    assert decoded == {
        "image/encoded": [FEATURES["image/encoded"]],
        "image/class/label": [3],
        "image/format": [b"JPEG"],
        "empty": [b""],
        "many": [b"a", b"bc"],
        "ints": [-5, 0, 300, 2**40],
    }
    assert records.encode_example(dict(reversed(FEATURES.items()))) == data  # key order does not matter


def test_framing_round_trip_and_crc_check():
    buf = io.BytesIO()
    for r in (b"one", b"", b"x" * 70000):
        records.write_record(buf, r)
    assert list(records.read_records(io.BytesIO(buf.getvalue()))) == [b"one", b"", b"x" * 70000]
    bad = bytearray(buf.getvalue())
    bad[14] ^= 1
    with pytest.raises(ValueError, match="corrupt TFRecord data"):
        list(records.read_records(io.BytesIO(bytes(bad))))
    # The masked CRC-32C of TFRecord: crc32c("") = 0 -> mask(0) = 0xa282ead8.
    assert records.masked_crc(b"") == 0xA282EAD8


@pytest.mark.trainer
def test_bytes_equal_tensorflow(tmp_path):
    import tensorflow as tf

    def feature(v):
        values = v if isinstance(v, list) else [v]
        if all(isinstance(x, int) for x in values):
            return tf.train.Feature(int64_list=tf.train.Int64List(value=values))
        return tf.train.Feature(
            bytes_list=tf.train.BytesList(value=[x.encode() if isinstance(x, str) else x for x in values])
        )

    example = tf.train.Example(
        features=tf.train.Features(feature={k: feature(v) for k, v in FEATURES.items()})
    )
    ours = records.encode_example(FEATURES)
    assert ours == example.SerializeToString(deterministic=True)
    assert tf.train.Example.FromString(ours) == example

    with tf.io.TFRecordWriter(str(tmp_path / "tf")) as w:
        w.write(ours)
        w.write(b"")
    with open(tmp_path / "ours", "wb") as f:
        records.write_record(f, ours)
        records.write_record(f, b"")
    assert (tmp_path / "ours").read_bytes() == (tmp_path / "tf").read_bytes()


def _encoded(mode="RGB", fmt="JPEG", size=(40, 30)) -> bytes:
    buf = io.BytesIO()
    Image.new(mode, size, 128 if mode in ("L", "CMYK") else (200, 100, 50)).save(buf, format=fmt)
    return buf.getvalue()


@pytest.mark.parametrize(
    "data,kind",
    [
        (b"", "empty"),
        (b"hello world", "not-an-image"),
        (_encoded(fmt="GIF"), "unsupported"),
        (_encoded(fmt="BMP"), "unsupported"),
        (_encoded()[:120], "corrupt"),
        (_encoded(fmt="PNG")[:60], "corrupt"),
    ],
)
def test_bad_data_is_a_rejection(data, kind):
    result = images.check_image(data)
    assert isinstance(result, images.Rejection) and result.kind == kind, result


def test_good_images_are_kept_or_reencoded():
    for mode, fmt in (("RGB", "JPEG"), ("L", "JPEG"), ("RGB", "PNG"), ("RGBA", "PNG"), ("L", "PNG")):
        data = _encoded(mode, fmt)
        result = images.check_image(data)
        assert result.data == data and result.format == fmt and (result.width, result.height) == (40, 30)
    cmyk = images.check_image(_encoded("CMYK"))
    assert cmyk.reencoded and cmyk.channels == 3 and Image.open(io.BytesIO(cmyk.data)).mode == "RGB"
    small = images.check_image(_encoded(size=(40, 30)), max_side=64)
    assert not small.resized and not small.reencoded
    big = images.check_image(_encoded("RGBA", "PNG", size=(200, 100)), max_side=64)
    assert big.resized and big.format == "JPEG" and (big.width, big.height) == (64, 32)
