"""`python -m trainer.serve [MODEL_DIR] [--port PORT] [--host HOST]`: the exported model behind
Vertex AI's prediction contract (docs/contract.md section 5, docs/serving.md).

`deploy.serving_image: auto` runs the job's own training image with this module as the
Vertex AI Model's container command, and `vertex-trainer serve` runs the very same `serve()`
locally: the TensorFlow and the preprocessing that trained and evaluated the model serve it.

Vertex AI sets AIP_HTTP_PORT, AIP_HEALTH_ROUTE, AIP_PREDICT_ROUTE, AIP_STORAGE_URI (a copy of the
model's artifactUri) and AIP_DEPLOYED_MODEL_ID; only main() reads them (settings_from_env) and
passes the values down.

Routes: GET <health> answers 200 once the model is loaded (503 while loading: Vertex AI routes no
traffic until it answers 200); a POST <predict> that comes while the model loads is held until it
is loaded (up to Limits.load_wait_s), then answered, so the first request after start gets a
prediction, not a 503. POST <predict>
takes {"instances": [{"b64": "<base64 JPEG or PNG>"}, ...]} (or the named form
{"image_bytes": {"b64": ...}}; "parameters" is ignored) and answers
{"predictions": [{"class": int, "probabilities": [float, ...]}, ...], "deployedModelId": "..."}.
All instances of a request are checked first (a bad one is a 400 naming it), then classified
in batches of BATCH_SIZE by the SavedModel's serving_default signature (trainer/export.py).
"""

from __future__ import annotations

import argparse
import base64
import binascii
import dataclasses
import io
import ipaddress
import json
import os
import sys
import threading
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

from trainer.http_body import BadRequest, declared_length, parse_json, read_body

DEFAULT_PORT = 8080
DEFAULT_HEALTH_ROUTE = "/health"
DEFAULT_PREDICT_ROUTE = "/predict"
LOCAL_DEPLOYED_MODEL_ID = "local"
BATCH_SIZE = 64  # instances per model call: bounds the memory of one call, whatever the request size
JPEG_MAGIC = b"\xff\xd8\xff"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@dataclasses.dataclass(frozen=True)
class Limits:
    """What one request may carry; beyond it the request is refused (400, or 413 for the body)."""

    max_instances: int = 1024
    max_image_bytes: int = 10 * 1024 * 1024
    max_pixels: int = 40_000_000  # width x height of one image, checked from its header
    max_body_bytes: int = 64 * 1024 * 1024  # read from the socket, whatever the framing
    max_json_depth: int = 32  # a request nests 4: {"instances": [{"image_bytes": {"b64": ...}}]}
    max_json_values: int = 65_536  # commas, [ and { in the body: a few per instance
    load_wait_s: float = 600.0  # how long a request that comes while loading is held


class ServeError(Exception):
    """The model cannot be served (missing, not a trainer export): main() exits 2."""


def log(message: str) -> None:
    print(f"serve: {message}", flush=True)


# ---------------------------------------------------------------------------------------------
# The model


class Model:
    """A trainer export loaded for prediction: predict(list of encoded images)."""

    def __init__(self, model_dir: str, *, batch_size: int = BATCH_SIZE):
        from trainer import export
        from trainer._keras import tf  # not Keras 3 (and matplotlib): 0.3 s of the start-up

        self.model_dir = model_dir
        self.batch_size = batch_size
        self._errors = (tf.errors.InvalidArgumentError,)
        try:
            if not tf.io.gfile.exists(model_dir.rstrip("/") + "/saved_model.pb"):
                raise ServeError(
                    f"no saved_model.pb in {model_dir} (pass the export's directory, "
                    "<output_dir>/model, or set AIP_STORAGE_URI)"
                )
            loaded = tf.saved_model.load(model_dir)
            config = export.read_serving_config(model_dir) or {}
        except tf.errors.OpError as e:
            raise ServeError(f"cannot load the model from {model_dir}: {_first_line(e)}") from None
        signature = loaded.signatures.get(export.BYTES_SIGNATURE)
        inputs = signature.structured_input_signature[1] if signature is not None else {}
        if list(inputs) != [export.INPUT_NAME]:
            raise ServeError(
                f"{model_dir} has no {export.BYTES_SIGNATURE} signature taking "
                f"{export.INPUT_NAME} (exported by an older trainer? train again to re-export)"
            )
        self._loaded = loaded  # keeps the signature's variables alive
        self._signature = signature
        self._tf = tf
        # One call now: the first request is not slow, and a broken export fails here, not later.
        self._call([tf.io.encode_png(tf.zeros([2, 2, 3], tf.uint8)).numpy()])
        self.num_classes = int(signature.structured_outputs["probabilities"].shape[-1])
        labels = config.get("labels")
        self.labels = list(labels) if labels else None
        self.description = (
            f"{config.get('model') or 'model'}, {self.num_classes} classes, "
            f"image_size {config.get('image_size', '?')}, "
            f"eval_crop_fraction {config.get('eval_crop_fraction', '?')}"
        )

    def predict(self, images: Sequence[bytes]) -> list[dict[str, Any]]:
        """One prediction dict per image, in order; BadRequest naming an image that fails to decode."""
        predictions: list[dict[str, Any]] = []
        for start in range(0, len(images), self.batch_size):
            chunk = list(images[start : start + self.batch_size])
            try:
                classes, probabilities = self._call(chunk)
            except self._errors:
                # One undecodable image fails the whole batch: find it, to name it.
                self._name_undecodable(chunk, start)
                raise
            for cls, probs in zip(classes.tolist(), probabilities.tolist(), strict=True):
                prediction = {"class": int(cls), "probabilities": probs}
                if self.labels and 0 <= cls < len(self.labels):
                    prediction["label"] = self.labels[cls]
                predictions.append(prediction)
        return predictions

    def _call(self, images: list[bytes]) -> tuple[Any, Any]:
        out = self._signature(image_bytes=self._tf.constant(images, dtype=self._tf.string))
        return out["classes"].numpy(), out["probabilities"].numpy()

    def _name_undecodable(self, images: list[bytes], offset: int) -> None:
        for i, image in enumerate(images):
            try:
                self._call([image])
            except self._errors:
                raise BadRequest(
                    f"instance {offset + i}: the image data is corrupt (it cannot be decoded as JPEG or PNG)"
                ) from None


# ---------------------------------------------------------------------------------------------
# The request


def parse_request(body: bytes | bytearray, limits: Limits, *, input_name: str = "image_bytes") -> list[bytes]:
    """The encoded images of a predict request body, each checked; BadRequest naming the bad one."""
    request = parse_json(body, max_depth=limits.max_json_depth, max_values=limits.max_json_values)
    usage = 'send {"instances": [{"b64": "<base64 JPEG or PNG>"}, ...]}'
    if not isinstance(request, dict):
        raise BadRequest(f"the request body must be a JSON object: {usage}")
    if "instances" not in request:
        raise BadRequest(f'no "instances" in the request: {usage}')
    instances = request["instances"]
    if not isinstance(instances, list):
        raise BadRequest(f'"instances" must be a list: {usage}')
    if not instances:
        raise BadRequest('"instances" is empty')
    if len(instances) > limits.max_instances:
        raise BadRequest(
            f"{len(instances)} instances; at most {limits.max_instances} per request "
            "(split it into several requests)"
        )
    return [_instance_bytes(i, instance, limits, input_name) for i, instance in enumerate(instances)]


def _instance_bytes(index: int, instance: Any, limits: Limits, input_name: str) -> bytes:
    where = f"instance {index}"
    value = instance
    if isinstance(value, dict) and list(value) == [input_name]:
        value = value[input_name]
    if not (isinstance(value, dict) and list(value) == ["b64"]):
        raise BadRequest(
            f'{where}: expected {{"b64": "<base64 JPEG or PNG>"}} or '
            f'{{"{input_name}": {{"b64": ...}}}}, got {_describe(instance)}'
        )
    text = value["b64"]
    if not isinstance(text, str):
        raise BadRequest(f'{where}: "b64" must be a string, got {type(text).__name__}')
    data = _b64decode(where, text)
    check_image(where, data, limits)
    return data


def _b64decode(where: str, text: str) -> bytes:
    # Standard or URL-safe alphabet, line breaks (base64 without -w0) and missing padding are fine.
    compact = "".join(text.split()).replace("-", "+").replace("_", "/")
    compact += "=" * (-len(compact) % 4)
    try:
        return base64.b64decode(compact, validate=True)
    except (binascii.Error, ValueError) as e:
        raise BadRequest(f"{where}: invalid base64 ({e})") from None


def check_image(where: str, data: bytes, limits: Limits) -> None:
    """JPEG or PNG, within the byte and pixel limits, with a readable header (no TensorFlow)."""
    if not data:
        raise BadRequest(f"{where}: the image is empty")
    if len(data) > limits.max_image_bytes:
        raise BadRequest(f"{where}: the image is {len(data)} bytes; the limit is {limits.max_image_bytes}")
    if data.startswith(JPEG_MAGIC):
        kind = "JPEG"
    elif data.startswith(PNG_MAGIC):
        kind = "PNG"
    else:
        raise BadRequest(f"{where}: not a JPEG or PNG image")
    from PIL import Image

    try:
        with Image.open(io.BytesIO(data), formats=[kind]) as image:
            width, height = image.size
    except Image.DecompressionBombError:
        raise BadRequest(f"{where}: the image has more than {limits.max_pixels} pixels") from None
    except Exception:
        raise BadRequest(f"{where}: not a valid {kind} image (its header cannot be read)") from None
    if width * height > limits.max_pixels:
        raise BadRequest(
            f"{where}: the image is {width}x{height} pixels; the limit is {limits.max_pixels} pixels"
        )


def _describe(value: Any) -> str:
    if isinstance(value, dict):
        keys = ", ".join(repr(k) for k in list(value)[:5])
        return f"an object with keys {keys}" if keys else "an empty object"
    return f"a JSON {type(value).__name__}".replace("str", "string").replace("NoneType", "null")


# ---------------------------------------------------------------------------------------------
# The HTTP server


class PredictionServer(ThreadingHTTPServer):
    """The HTTP server; `model` is None while loading (health answers 503 then)."""

    daemon_threads = True

    def __init__(
        self,
        address: tuple[str, int],
        *,
        health_route: str = DEFAULT_HEALTH_ROUTE,
        predict_route: str = DEFAULT_PREDICT_ROUTE,
        deployed_model_id: str = LOCAL_DEPLOYED_MODEL_ID,
        limits: Limits = Limits(),
    ):
        super().__init__(address, _Handler)
        self.health_route = health_route
        self.predict_route = predict_route
        self.deployed_model_id = deployed_model_id
        self.limits = limits
        self.model: Model | None = None
        self.settled = threading.Event()  # set once loading has ended, loaded or failed
        # Listening on loopback (`vertex-trainer serve`, the sandbox): only this machine's clients,
        # so a browser's request is refused unless it names loopback (no DNS rebinding: a page
        # whose name points at 127.0.0.1 reading predictions) and comes from a loopback page. In
        # the container (0.0.0.0) Vertex AI's front end is the client, and no header is checked.
        self.loopback_only = _loopback(address[0])

    @property
    def port(self) -> int:
        return self.server_address[1]

    @property
    def url(self) -> str:
        """Where a client on this machine reaches the server, e.g. http://127.0.0.1:8080."""
        host = self.socket.getsockname()[0]  # server_address, as a str
        host = "127.0.0.1" if host in ("0.0.0.0", "") else host
        return f"http://{host}:{self.port}"


class _Handler(BaseHTTPRequestHandler):
    """The routes. Every answer is JSON, http.server's own refusals included (send_error); a
    request whose body is not read (refused, or a route that takes none) closes the connection, so
    its bytes are never taken for the next request."""

    protocol_version = "HTTP/1.1"
    timeout = 120  # a stalled client frees its thread
    server: PredictionServer
    _body_read = False

    def _foreign(self) -> bool:
        """On loopback: refuse (403) a Host that is not loopback or an Origin of another site."""
        if not self.server.loopback_only:
            return False
        host, origin = self.headers.get("Host"), self.headers.get("Origin")
        if host is not None and not _loopback(_hostname(host)):
            why = f"Host {host!r} is not this machine's loopback"
        elif origin is not None and not _loopback(urlsplit(origin.strip().lower()).hostname or ""):
            why = f"Origin {origin!r} is another site"
        else:
            return False
        self._reply(403, {"error": f"{why}: this server answers only on 127.0.0.1 (docs/serving.md)"})
        return True

    def do_GET(self) -> None:
        if self._foreign():
            return
        path = urlsplit(self.path).path
        if path == self.server.health_route:
            if self.server.model is None:
                self._reply(503, {"status": "loading"})
            else:
                self._reply(200, {"status": "ready"})
        else:
            self._refuse_method()

    def do_POST(self) -> None:
        if self._foreign():
            return
        if urlsplit(self.path).path == self.server.predict_route:
            self._predict()
        else:
            self._refuse_method()

    def do_HEAD(self) -> None:
        if not self._foreign():
            self._refuse_method()

    def _refuse_method(self) -> None:
        """405 naming the route's one method (Allow), or 404 for a path that is no route."""
        path = urlsplit(self.path).path
        allowed = {self.server.health_route: "GET", self.server.predict_route: "POST"}.get(path)
        if allowed is None:
            self._reply(
                404,
                {
                    "error": f"no route {self.command} {path}; this server answers GET "
                    f"{self.server.health_route} and POST {self.server.predict_route}"
                },
            )
        else:
            self._reply(405, {"error": f"use {allowed} {path}"}, allow=allowed)

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """http.server's refusals (a malformed request line or header, an unknown method) as the
        contract's JSON, never its HTML page; an unknown method on a route is 405, as any other."""
        self.close_connection = True
        if getattr(self, "request_version", "") == "HTTP/0.9":  # a request line it could not read
            self.request_version = self.protocol_version  # answered with a status line all the same
        command = getattr(self, "command", "")
        if code == HTTPStatus.NOT_IMPLEMENTED and command and not hasattr(self, f"do_{command}"):
            self._refuse_method()
            return
        self._reply(code, {"error": message or HTTPStatus(code).phrase})

    def handle_expect_100(self) -> bool:
        """`Expect: 100-continue`: a body that would be refused is refused before it is sent."""
        if self.command == "POST" and urlsplit(self.path).path == self.server.predict_route:
            try:
                declared_length(self.headers, self.server.limits.max_body_bytes)
            except BadRequest as e:
                self._reply(e.status, {"error": str(e)})
                return False
        return super().handle_expect_100()

    def _predict(self) -> None:
        started = time.perf_counter()
        model, limits, count = self.server.model, self.server.limits, 0
        answer: dict[str, Any]
        try:
            body = read_body(self.rfile, self.headers, limits.max_body_bytes)
            self._body_read = True
            if model is None:  # held until the model is loaded: the first request gets an answer
                self.server.settled.wait(limits.load_wait_s)
                model = self.server.model
            if model is None:
                raise BadRequest(
                    "the model is not loaded (still loading, or it failed to load); "
                    "retry when the health route answers 200",
                    status=503,
                )
            images = parse_request(body, limits)
            count = len(images)
            predictions = model.predict(images)
        except BadRequest as e:
            status, answer = e.status, {"error": str(e)}
        except Exception as e:
            traceback.print_exc()
            status, answer = 500, {"error": f"internal error: {type(e).__name__}: {_first_line(e)}"}
        else:
            status, answer = (
                200,
                {"predictions": predictions, "deployedModelId": self.server.deployed_model_id},
            )
        detail = f"instances={count}" if status == 200 else answer["error"]
        log(f"POST {self.path} {status} {detail} {1000 * (time.perf_counter() - started):.1f}ms")
        self._reply(status, answer)

    def _reply(self, status: int, answer: dict[str, Any], **headers: str) -> None:
        data = json.dumps(answer).encode()
        request_headers = getattr(self, "headers", None)
        if not self._body_read and request_headers is not None:
            length = request_headers.get("Content-Length", "0").strip()
            if "Transfer-Encoding" in request_headers or length != "0":
                self.close_connection = True  # its unread body must not be taken for a request
        self._body_read = False
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in headers.items():
            self.send_header(name.capitalize(), value)
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        if getattr(self, "command", "") != "HEAD" and status >= 200 and status not in (204, 304):
            self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        pass  # predict requests are logged by _predict; health checks (every few seconds) are not


def _hostname(authority: str) -> str:
    """'127.0.0.1:8080', '[::1]:80', 'localhost' -> the host name, lower case, without the port."""
    authority = authority.strip().lower()
    if authority.startswith("["):
        return authority[1:].split("]", 1)[0]
    return authority.rsplit(":", 1)[0] if authority.count(":") == 1 else authority


def _loopback(name: str) -> bool:
    """localhost, or an address of the loopback network (127.0.0.0/8, ::1); a DNS name is not."""
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def serve(
    model_dir: str,
    host: str = "127.0.0.1",
    port: int = DEFAULT_PORT,
    *,
    health_route: str = DEFAULT_HEALTH_ROUTE,
    predict_route: str = DEFAULT_PREDICT_ROUTE,
    deployed_model_id: str = LOCAL_DEPLOYED_MODEL_ID,
    limits: Limits = Limits(),
    ready: Callable[[PredictionServer], None] | None = None,
) -> None:
    """Serve the export in `model_dir` (local path or gs://) on host:port until stopped.

    The server listens at once (health answers 503, predict requests are held) and loads the
    model; once loaded, health answers 200, held requests are answered, and `ready(server)` is
    called (from the loading thread) with the running
    PredictionServer: `server.url` is where to reach it (port 0 picks a free port), and
    `server.shutdown()` from any other thread makes serve() return. KeyboardInterrupt propagates
    after the socket is closed. Raises ServeError if the model cannot be loaded or the port is
    not one (0 to 65535), OSError if the address cannot be bound.
    """
    try:
        port_number(port)
    except ValueError:
        raise ServeError(f"port {port} is not a port number ({PORTS})") from None
    server = PredictionServer(
        (host, port),
        health_route=health_route,
        predict_route=predict_route,
        deployed_model_id=deployed_model_id,
        limits=limits,
    )
    log(f"listening on {host}:{server.port}; loading the model from {model_dir}")
    failure: list[BaseException] = []

    def load() -> None:
        from trainer.banner import quiet_startup

        try:
            try:
                with quiet_startup():  # TensorFlow's start-up banner stays off the screen
                    server.model = Model(model_dir)
            except ServeError:
                raise
            except Exception as e:
                raise ServeError(
                    f"cannot load the model from {model_dir}: {type(e).__name__}: {_first_line(e)}"
                ) from e
            log(
                f"model loaded ({server.model.description}); serving {server.url} "
                f"(GET {health_route}, POST {predict_route})"
            )
            if ready is not None:
                ready(server)
        except BaseException as e:
            failure.append(e)
            server.settled.set()
            server.shutdown()
        finally:
            server.settled.set()  # held requests go on: answered, or 503 if it failed

    loader = threading.Thread(target=load, name="load-model", daemon=True)
    loader.start()
    try:
        server.serve_forever(poll_interval=0.2)
    finally:
        server.server_close()
    loader.join(timeout=5)
    if failure:
        raise failure[0]


# ---------------------------------------------------------------------------------------------
# The container's entrypoint


PORTS = "0 to 65535"


def port_number(text: str | int) -> int:
    """A TCP port (0: any free one); ValueError for anything else."""
    port = int(text)
    if not 0 <= port <= 65535:
        raise ValueError(f"{text} is not a port number ({PORTS})")
    return port


def _port_arg(text: str) -> int:
    try:
        return port_number(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text} is not a port number ({PORTS})") from None


def settings_from_env(environ: Mapping[str, str]) -> dict[str, Any]:
    """The Vertex AI serving variables (defaults for a local run): serve()'s keyword arguments."""
    port_text = environ.get("AIP_HTTP_PORT") or str(DEFAULT_PORT)
    try:
        port = port_number(port_text)
    except ValueError:
        raise ServeError(f"AIP_HTTP_PORT={port_text!r} is not a port number ({PORTS})") from None
    return {
        "model_dir": environ.get("AIP_STORAGE_URI") or None,
        "port": port,
        "health_route": environ.get("AIP_HEALTH_ROUTE") or DEFAULT_HEALTH_ROUTE,
        "predict_route": environ.get("AIP_PREDICT_ROUTE") or DEFAULT_PREDICT_ROUTE,
        "deployed_model_id": environ.get("AIP_DEPLOYED_MODEL_ID") or LOCAL_DEPLOYED_MODEL_ID,
    }


def main(argv: Sequence[str] | None = None, environ: Mapping[str, str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m trainer.serve",
        description="Serve a trainer export behind Vertex AI's prediction contract.",
    )
    parser.add_argument("model_dir", nargs="?", help="the export (local or gs://); default $AIP_STORAGE_URI")
    parser.add_argument(
        "--port", type=_port_arg, help=f"default $AIP_HTTP_PORT, else {DEFAULT_PORT}; 0 = any free port"
    )
    parser.add_argument("--host", default="0.0.0.0", help="address to listen on (default 0.0.0.0)")
    args = parser.parse_args(argv)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")  # before TensorFlow loads: no INFO noise
    try:
        settings = settings_from_env(os.environ if environ is None else environ)
        model_dir = settings.pop("model_dir")
        model_dir = args.model_dir or model_dir
        if not model_dir:
            raise ServeError("no model directory: pass MODEL_DIR or set AIP_STORAGE_URI")
        if args.port is not None:
            settings["port"] = args.port
        serve(model_dir, host=args.host, **settings)
    except ServeError as e:
        print(f"error: {e}", file=sys.stderr, flush=True)
        return 2
    except OSError as e:  # the address is taken or not ours
        print(f"error: cannot listen on {args.host}:{settings['port']}: {e}", file=sys.stderr, flush=True)
        return 2
    except KeyboardInterrupt:
        log("stopped")
    return 0


def _first_line(error: BaseException) -> str:
    text = str(getattr(error, "message", None) or error).strip()
    return text.splitlines()[0] if text else type(error).__name__


if __name__ == "__main__":
    sys.exit(main())
