"""Check one image file the way the trainer will read it, and shrink it when asked (Pillow).

An image is accepted when Pillow decodes it completely and it is JPEG or PNG, the two formats
the trainer's input pipeline decodes (`trainer.data`, by magic bytes, whatever the file name).
Its bytes are stored unchanged, except:

- CMYK/YCCK JPEGs are re-encoded as RGB JPEG (the public ImageNet converter does the same;
  TensorFlow's decoder does not promise them);
- with `max_side`, an image whose longer side is larger is resized to it (Lanczos, aspect kept)
  and re-encoded as JPEG at `quality`, which is what cuts the data size.

Everything else is a `Rejection` with a kind (for counters) and a reason (for rejected.txt):
bad data never raises. Re-encoding is deterministic for a given Pillow (the Dataflow worker
package pins the launcher's Pillow), so shards are reproducible.
"""

from __future__ import annotations

import io
import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from PIL import Image

FORMATS = ("JPEG", "PNG")


@dataclass(frozen=True)
class Checked:
    """An image to store: its bytes, format and size after any re-encoding."""

    data: bytes
    format: str  # JPEG | PNG
    height: int
    width: int
    channels: int
    resized: bool = False
    reencoded: bool = False


@dataclass(frozen=True)
class Rejection:
    """Why a file is not stored. `kind`: empty | not-an-image | unsupported | corrupt | too-large |
    unreadable."""

    kind: str
    reason: str


def check_image(data: bytes, *, max_side: int | None = None, quality: int = 90) -> Checked | Rejection:
    """Decode `data` fully; return what to store, or why not."""
    from PIL import Image, UnidentifiedImageError

    if not data:
        return Rejection("empty", "empty file")
    fmt: str | None = (
        "JPEG" if data.startswith(b"\xff\xd8\xff") else "PNG" if data.startswith(b"\x89PNG") else "image"
    )
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            with Image.open(io.BytesIO(data)) as im:
                fmt = im.format
                if fmt not in FORMATS:
                    return Rejection("unsupported", f"{fmt} image: only JPEG and PNG are stored")
                width, height = im.size
                if max_side and max(width, height) > max_side:
                    # thumbnail() lets libjpeg decode at a reduced DCT scale first: fast, and
                    # it still reads the whole file, so a truncated one fails here.
                    im.thumbnail((max_side, max_side), Image.Resampling.LANCZOS)
                    return _jpeg(im, quality, resized=True)
                im.load()
                if fmt == "JPEG" and im.mode in ("CMYK", "YCbCr"):
                    return _jpeg(im, quality, resized=False)
                return Checked(data, fmt, height, width, _channels(im.mode))
    except UnidentifiedImageError:
        return Rejection("not-an-image", "not an image (Pillow cannot identify it)")
    except Image.DecompressionBombError as e:
        return Rejection("too-large", f"too large to decode safely: {e}")
    except MemoryError:
        raise
    except Exception as e:  # Pillow raises OSError, SyntaxError, ValueError, EOFError... on bad data
        return Rejection("corrupt", f"corrupt or truncated {fmt}: {_first_line(e)}")


def _jpeg(im: Image.Image, quality: int, *, resized: bool) -> Checked:
    if im.mode not in ("RGB", "L"):
        im = im.convert("RGB")  # drops alpha, as the trainer's decode_png(channels=3) does
    buf = io.BytesIO()
    im.save(buf, format="JPEG", quality=quality)
    width, height = im.size
    return Checked(buf.getvalue(), "JPEG", height, width, _channels(im.mode), resized=resized, reencoded=True)


def _channels(mode: str) -> int:
    return {"1": 1, "L": 1, "I": 1, "I;16": 1, "F": 1, "LA": 2, "RGBA": 4, "P": 3}.get(mode, 3)


def _first_line(error: Exception) -> str:
    text = str(error).strip().splitlines()
    return text[0] if text else type(error).__name__
