"""The prediction server's HTTP contract without TensorFlow: a stand-in model behind the real
PredictionServer (routes, statuses, request checks naming the instance, limits), the request
parser, and the entrypoint's settings. The real model is in test_serving_model.py."""

from __future__ import annotations

import base64
import http.client
import json
import threading

import numpy as np
import pytest

from trainer import serve

from .conftest import call, png

LIMITS = serve.Limits(max_instances=4, max_image_bytes=4096, max_pixels=64 * 64, max_body_bytes=64 * 1024)
IMAGE = png(np.full((8, 8, 3), 200, np.uint8))


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


OK = {"b64": b64(IMAGE)}


class FakeModel:
    """Answers class 1 for every image; records the batches it was called with."""

    num_classes = 3

    def __init__(self, error: Exception | None = None):
        self.calls: list[list[bytes]] = []
        self.error = error

    def predict(self, images):
        self.calls.append(list(images))
        if self.error:
            raise self.error
        return [{"class": 1, "probabilities": [0.25, 0.5, 0.25]} for _ in images]


@pytest.fixture
def server():
    srv = serve.PredictionServer(
        ("127.0.0.1", 0),
        health_route="/health",
        predict_route="/predict",
        deployed_model_id="local",
        limits=LIMITS,
    )
    thread = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield srv
    srv.shutdown()
    srv.server_close()
    thread.join(timeout=10)


def test_health_is_503_while_loading_and_a_prediction_waits_for_the_model(server):
    assert call("GET", server.url + "/health") == (503, {"status": "loading"})
    answers: list = []
    request = threading.Thread(
        target=lambda: answers.append(call("POST", server.url + "/predict", {"instances": [OK]}))
    )
    request.start()  # the first request after start: held while the model loads (issue 24 item 8)
    assert call("GET", server.url + "/health") == (503, {"status": "loading"})
    assert request.is_alive() and answers == []  # nothing answers it before the model is there
    server.model = FakeModel()
    server.settled.set()
    request.join(timeout=60)
    assert answers[0][0] == 200 and answers[0][1]["predictions"][0]["class"] == 1
    assert call("GET", server.url + "/health") == (200, {"status": "ready"})


def test_a_prediction_held_while_loading_gets_503_if_the_load_fails(server):
    server.settled.set()  # loading ended without a model
    status, answer = call("POST", server.url + "/predict", {"instances": [OK]})
    assert status == 503 and "not loaded" in answer["error"]


def test_predict_takes_both_instance_forms_in_one_model_call(server):
    server.model = model = FakeModel()
    named = {"image_bytes": {"b64": b64(IMAGE)}}
    status, answer = call(
        "POST", server.url + "/predict", {"instances": [OK, named, OK], "parameters": {"ignored": True}}
    )
    assert status == 200, answer
    assert answer == {
        "predictions": [{"class": 1, "probabilities": [0.25, 0.5, 0.25]}] * 3,
        "deployedModelId": "local",
    }
    assert model.calls == [[IMAGE, IMAGE, IMAGE]]


def corrupt_png_header() -> bytes:
    return serve.PNG_MAGIC + b"garbage" * 3


def noise_png(side: int) -> bytes:
    return png(np.random.default_rng(0).integers(0, 256, (side, side, 3), dtype=np.uint8))


BAD_REQUESTS = {
    "not JSON": (b"{not json", "the request body is not JSON"),
    "not an object": ([OK], "the request body must be a JSON object"),
    "no instances": ({"inputs": [OK]}, 'no "instances" in the request'),
    "instances not a list": ({"instances": OK}, '"instances" must be a list'),
    "no instance": ({"instances": []}, '"instances" is empty'),
    "too many instances": ({"instances": [OK] * 5}, "5 instances; at most 4 per request"),
    "a bare string": ({"instances": [OK, OK, OK, b64(IMAGE)]}, 'instance 3: expected {"b64"'),
    "other keys": ({"instances": [OK, {"b64": b64(IMAGE), "key": 1}]}, 'instance 1: expected {"b64"'),
    "wrong input name": ({"instances": [{"image": {"b64": b64(IMAGE)}}]}, 'instance 0: expected {"b64"'),
    "b64 not a string": ({"instances": [OK, {"b64": 12}]}, 'instance 1: "b64" must be a string'),
    "invalid base64": ({"instances": [OK, OK, {"b64": "not base64!"}]}, "instance 2: invalid base64"),
    "empty image": ({"instances": [{"b64": ""}]}, "instance 0: the image is empty"),
    "not JPEG or PNG": (
        {"instances": [OK, {"b64": b64(b"GIF89a" + bytes(40))}]},
        "instance 1: not a JPEG or PNG image",
    ),
    "bad PNG header": (
        {"instances": [OK, {"b64": b64(corrupt_png_header())}]},
        "instance 1: not a valid PNG image",
    ),
    "bad JPEG header": (
        {"instances": [OK, {"b64": b64(serve.JPEG_MAGIC + bytes(40))}]},
        "instance 1: not a valid JPEG image",
    ),
    "too many bytes": ({"instances": [OK, {"b64": b64(noise_png(48))}]}, "instance 1: the image is "),
    "too many pixels": (
        {"instances": [OK, {"b64": b64(png(np.zeros((100, 70), np.uint8)))}]},
        "instance 1: the image is 70x100 pixels; the limit is 4096 pixels",
    ),
}


@pytest.mark.parametrize("body,message", BAD_REQUESTS.values(), ids=BAD_REQUESTS.keys())
def test_bad_requests_are_400_naming_the_instance(server, body, message):
    server.model = model = FakeModel()
    status, answer = call("POST", server.url + "/predict", body)
    assert status == 400, answer
    assert set(answer) == {"error"} and answer["error"].startswith(message), answer
    assert model.calls == [], "nothing reaches the model when one instance is bad"


def test_too_large_body_is_413(server):
    server.model = FakeModel()
    status, answer = call("POST", server.url + "/predict", b"x" * (LIMITS.max_body_bytes + 1))
    assert status == 413 and "limit is 65536" in answer["error"]


def test_chunked_body_is_read(server):
    server.model = FakeModel()
    body = json.dumps({"instances": [OK, OK]}).encode()
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    try:
        conn.request(
            "POST",
            "/predict",
            body=iter([body[:10], body[10:]]),
            headers={"Content-Type": "application/json"},
            encode_chunked=True,
        )
        response = conn.getresponse()
        assert response.status == 200
        assert len(json.loads(response.read())["predictions"]) == 2
    finally:
        conn.close()


def test_unknown_routes_and_wrong_methods(server):
    server.model = FakeModel()
    status, answer = call("GET", server.url + "/v1/models")
    assert status == 404 and answer["error"] == (
        "no route GET /v1/models; this server answers GET /health and POST /predict"
    )
    assert call("POST", server.url + "/nope", {"instances": [OK]})[0] == 404
    assert call("GET", server.url + "/predict")[0] == 405
    assert call("POST", server.url + "/health", b"{}")[0] == 405


def test_unexpected_model_error_is_a_one_line_500(server, capsys):
    server.model = FakeModel(error=RuntimeError("boom\nsecond line"))
    status, answer = call("POST", server.url + "/predict", {"instances": [OK]})
    assert (status, answer) == (500, {"error": "internal error: RuntimeError: boom"})
    assert "Traceback" in capsys.readouterr().err  # logged on the server's side only


def test_base64_variants_are_accepted():
    data = bytes(range(256)) * 3
    standard = base64.b64encode(data).decode()
    for text in (
        standard,
        base64.urlsafe_b64encode(data).decode(),
        standard.rstrip("="),
        "\n".join(standard[i : i + 76] for i in range(0, len(standard), 76)),
    ):
        assert serve._b64decode("instance 0", text) == data


def test_settings_from_env_defaults_and_vertex_values():
    assert serve.settings_from_env({}) == {
        "model_dir": None,
        "port": 8080,
        "health_route": "/health",
        "predict_route": "/predict",
        "deployed_model_id": "local",
    }
    vertex = {
        "AIP_HTTP_PORT": "7080",
        "AIP_HEALTH_ROUTE": "/v1/endpoints/1/deployedModels/2",
        "AIP_PREDICT_ROUTE": "/v1/endpoints/1/deployedModels/2:predict",
        "AIP_STORAGE_URI": "gs://bucket/model-copy",
        "AIP_DEPLOYED_MODEL_ID": "2",
    }
    assert serve.settings_from_env(vertex) == {
        "model_dir": "gs://bucket/model-copy",
        "port": 7080,
        "health_route": "/v1/endpoints/1/deployedModels/2",
        "predict_route": "/v1/endpoints/1/deployedModels/2:predict",
        "deployed_model_id": "2",
    }


def test_main_without_model_or_with_a_bad_port_exits_2(capsys):
    assert serve.main([], environ={}) == 2
    assert capsys.readouterr().err == "error: no model directory: pass MODEL_DIR or set AIP_STORAGE_URI\n"
    assert serve.main(["/some/model"], environ={"AIP_HTTP_PORT": "http"}) == 2
    assert capsys.readouterr().err == "error: AIP_HTTP_PORT='http' is not a port number (0 to 65535)\n"
