"""Serving a real export: the serving signature preprocesses exactly as evaluation, and
`python -m trainer.serve` (configured by Vertex AI's AIP_* variables) answers the prediction
contract with the accuracy the run measured (issue 10's "done when")."""

from __future__ import annotations

import base64
import io
import json
import threading

import numpy as np
import pytest

from .conftest import call, write_records

pytestmark = pytest.mark.trainer


def b64(data: bytes) -> dict:
    return {"b64": base64.b64encode(data).decode()}


def predict(server, instances) -> tuple[int, dict]:
    return call("POST", server.url + server.predict_route, {"instances": instances})


def test_digits_served_accuracy_matches_the_runs_eval_accuracy(digits_run, digits_server):
    status, answer = predict(digits_server, [b64(image) for image in digits_run.images])
    assert status == 200, answer
    assert answer["deployedModelId"] == "456"  # AIP_DEPLOYED_MODEL_ID
    classes = np.array([p["class"] for p in answer["predictions"]])
    assert len(classes) == len(digits_run.labels) == 297
    served = float(np.mean(classes == np.array(digits_run.labels)))
    evaluated = digits_run.metrics["eval_accuracy"]
    print(f"digits: served accuracy {served:.4f} on 297 held-out PNGs, eval_accuracy {evaluated:.4f}")
    # The trainer learns the digits (the one digits training of the trainer's tests is this one).
    assert evaluated >= 0.9 and digits_run.metrics["eval_examples"] == 275  # whole batches of 25
    assert abs(served - evaluated) <= 0.03, (served, evaluated)


def test_one_batch_equals_single_requests_in_either_form(digits_run, digits_server):
    images = digits_run.images[:100]  # more than one model batch (64)
    status, batch = predict(digits_server, [b64(image) for image in images])
    assert status == 200, batch
    for image, together in zip(images, batch["predictions"], strict=True):
        status, alone = predict(digits_server, [{"image_bytes": b64(image)}])
        assert status == 200, alone
        alone = alone["predictions"][0]
        assert alone["class"] == together["class"]
        np.testing.assert_allclose(alone["probabilities"], together["probabilities"], atol=1e-5)
        probabilities = together["probabilities"]
        assert len(probabilities) == 10 and sum(probabilities) == pytest.approx(1.0, abs=1e-5)
        assert together["class"] == int(np.argmax(probabilities))


def corrupt_pixels(png_bytes: bytes) -> bytes:
    """A PNG whose header reads fine but whose pixel data is zeros: only decoding can tell."""
    return png_bytes[:41] + bytes(len(png_bytes) - 53) + png_bytes[-12:]


def test_bad_instances_are_named_and_the_server_keeps_serving(digits_run, digits_server):
    good = [b64(image) for image in digits_run.images[:3]]
    status, answer = predict(digits_server, good + [b64(corrupt_pixels(digits_run.images[3]))])
    assert (status, answer) == (
        400,
        {"error": "instance 3: the image data is corrupt (it cannot be decoded as JPEG or PNG)"},
    )
    status, answer = predict(digits_server, good[:1] + [b64(b"GIF89a" + bytes(20))])
    assert (status, answer) == (400, {"error": "instance 1: not a JPEG or PNG image"})
    status, answer = call("POST", digits_server.url + digits_server.predict_route, b"[")
    assert status == 400 and answer["error"].startswith("the request body is not JSON")
    status, answer = predict(digits_server, good)
    assert status == 200 and len(answer["predictions"]) == 3
    assert "Traceback" not in "".join(digits_server.output)


def test_routes_come_from_the_vertex_variables(digits_server):
    assert call("GET", digits_server.url + digits_server.health_route) == (200, {"status": "ready"})
    assert call("GET", digits_server.url + "/health")[0] == 404
    assert call("POST", digits_server.url + "/predict", {"instances": []})[0] == 404


def test_export_has_the_signatures_and_serving_config(synth_run):
    import tensorflow as tf

    config = json.loads((synth_run.model_dir / "serving_config.json").read_text())
    assert {
        k: config[k]
        for k in ("num_classes", "image_size", "eval_crop_fraction", "input", "signature", "labels", "model")
    } == {
        "num_classes": 4,
        "image_size": 16,
        "eval_crop_fraction": 0.875,
        "input": "image_bytes",
        "signature": "serving_default",
        "labels": None,
        "model": "tiny-cnn",
    }
    assert synth_run.metrics["precision"] == "mixed_bfloat16" and synth_run.metrics["replicas"] == 2
    loaded = tf.saved_model.load(str(synth_run.model_dir))
    assert set(loaded.signatures) == {"serving_default", "serving_images", "preprocess"}
    bytes_sig, images_sig = loaded.signatures["serving_default"], loaded.signatures["serving_images"]
    assert bytes_sig.structured_input_signature[1] == {
        "image_bytes": tf.TensorSpec([None], tf.string, name="image_bytes")
    }
    assert images_sig.structured_input_signature[1] == {
        "image": tf.TensorSpec([None, 16, 16, 3], tf.uint8, name="image")
    }
    for signature in (bytes_sig, images_sig):  # float32 out, although the model ran in bfloat16
        assert signature.structured_outputs == {
            "classes": tf.TensorSpec([None], tf.int64, name="classes"),
            "probabilities": tf.TensorSpec([None, 4], tf.float32, name="probabilities"),
        }


def odd_images() -> tuple[list[bytes], str]:
    """Non-square JPEGs and PNGs, grayscale and RGBA: the crop and decode paths serving must share."""
    from PIL import Image

    rng = np.random.default_rng(3)
    images = []
    for (h, w), mode, fmt in [
        ((30, 20), "RGB", "JPEG"),
        ((17, 40), "L", "PNG"),
        ((25, 25), "RGBA", "PNG"),
        ((21, 33), "RGB", "PNG"),
        ((40, 29), "L", "JPEG"),
    ]:
        channels = {"RGB": 3, "L": 1, "RGBA": 4}[mode]
        pixels = rng.integers(0, 256, (h, w, channels), dtype=np.uint8)
        buf = io.BytesIO()
        Image.fromarray(pixels.squeeze(-1) if channels == 1 else pixels, mode).save(buf, format=fmt)
        images.append(buf.getvalue())
    return images


@pytest.mark.parametrize(
    "run_name,odd",
    [("synth_run", False), ("digits_run", False), ("synth_run", True)],
    ids=["synth-jpeg-crop-bf16", "digits-png", "odd-shapes"],
)
def test_serving_signature_preprocesses_as_evaluation(request, tmp_path, run_name, odd):
    """The export's predictions on encoded bytes equal the Keras model's predictions on the batch
    the evaluation pipeline (trainer/data.py) makes of the same records."""
    import tensorflow as tf

    from trainer import data
    from trainer._keras import keras

    run = request.getfixturevalue(run_name)
    if odd:
        encoded = odd_images()
        write_records(tmp_path / "odd-00000-of-00001", encoded, [0] * len(encoded), "JPEG")
        files = [str(tmp_path / "odd-00000-of-00001")]
    else:
        encoded = run.images
        files = sorted(str(f) for f in run.data.glob("validation-*"))
    config = json.loads((run.model_dir / "serving_config.json").read_text())
    eval_cfg = data.PipelineConfig(
        image_size=config["image_size"],
        num_classes=config["num_classes"],
        training=False,
        eval_crop_fraction=config["eval_crop_fraction"],
        deterministic=True,
    )
    eval_images, _ = next(iter(data.build_dataset(files, eval_cfg, len(encoded))))

    loaded = tf.saved_model.load(str(run.model_dir))
    served_images = loaded.signatures["preprocess"](image_bytes=tf.constant(encoded))["images"]
    np.testing.assert_array_equal(served_images.numpy(), eval_images.numpy())

    served = loaded.signatures["serving_default"](image_bytes=tf.constant(encoded))
    on_pixels = loaded.signatures["serving_images"](image=eval_images)
    np.testing.assert_allclose(served["probabilities"].numpy(), on_pixels["probabilities"].numpy(), atol=1e-6)
    np.testing.assert_array_equal(served["classes"].numpy(), on_pixels["classes"].numpy())

    # The Keras model as evaluate() runs it (eagerly). Under bfloat16 (8 significant bits: a
    # relative step of 2**-8 ~ 0.4% on every activation) the saved graph's fused kernels round
    # differently from the eager layers: a model difference, not a preprocessing one (the pixels
    # above are identical). Where two classes are near a tie (p ~ 0.5, the steepest point of the
    # softmax: dp = p(1 - p) dlogit) a logit gap that differs by ~0.05 moves a probability by
    # ~0.012 (seen in a clean clone's CI: 1.17e-2; 4e-4 to 5.4e-3 on other runs), so bfloat16
    # gets 3e-2, and the predicted class must agree wherever the top two are further apart.
    model = keras.models.load_model(str(run.model_dir), compile=False)
    evaluated = model(eval_images, training=False).numpy()
    probabilities = served["probabilities"].numpy()
    bf16 = run.metrics["precision"] == "mixed_bfloat16"
    tolerance = 3e-2 if bf16 else 1e-5
    np.testing.assert_allclose(probabilities, evaluated, atol=tolerance)
    top_two = np.sort(evaluated, axis=1)[:, -2:]
    clear = top_two[:, 1] - top_two[:, 0] > 2 * tolerance
    assert clear.any()
    np.testing.assert_array_equal(probabilities.argmax(1)[clear], evaluated.argmax(1)[clear])


def test_serve_function_runs_in_process_and_stops(digits_run):
    """What `vertex-trainer serve` calls: serve(..., port=0, ready=...) and server.shutdown()."""
    from trainer import serve

    started = threading.Event()
    servers = []

    def ready(server):
        servers.append(server)
        started.set()

    thread = threading.Thread(
        target=serve.serve, args=(str(digits_run.model_dir),), kwargs={"port": 0, "ready": ready}, daemon=True
    )
    thread.start()
    assert started.wait(timeout=60), "the server never became ready"
    server = servers[0]
    try:
        assert server.url.startswith("http://127.0.0.1:")
        assert call("GET", server.url + "/health") == (200, {"status": "ready"})
        status, answer = call("POST", server.url + "/predict", {"instances": [b64(digits_run.images[0])]})
        assert status == 200 and answer["deployedModelId"] == "local"
        assert answer["predictions"][0]["class"] == digits_run.labels[0]
    finally:
        server.shutdown()
    thread.join(timeout=10)
    assert not thread.is_alive()


def test_serve_refuses_a_directory_without_an_export(tmp_path):
    from trainer import serve

    with pytest.raises(serve.ServeError, match=f"no saved_model.pb in {tmp_path}"):
        serve.serve(str(tmp_path), port=0)
    (tmp_path / "saved_model.pb").write_bytes(b"not a SavedModel")
    with pytest.raises(serve.ServeError, match="cannot load the model from"):
        serve.serve(str(tmp_path), port=0)


def test_a_factorys_export_keeps_the_traces_its_own_layers_load_back_with(tmp_path):
    """export.save skips the layers' traces for a built-in model (its layers load from their
    configs: benchmarks/RESULTS-export.md) and keeps them for a factory's model, whose own layers
    load back only through them when their code is not there to rebuild them from a config."""
    import tensorflow as tf

    from trainer import export
    from trainer._keras import keras

    class Doubled(keras.layers.Layer):  # the user's own layer: no get_config, not registered
        def call(self, x):
            return tf.cast(x, tf.float32) * 2.0

    inputs = keras.Input(shape=(8, 8, 3), dtype="uint8", name="image")
    features = keras.layers.GlobalAveragePooling2D()(Doubled()(inputs))
    model = keras.Model(inputs, keras.layers.Dense(2, activation="softmax")(features))
    pixels = np.random.default_rng(0).integers(0, 256, (2, 8, 8, 3), dtype=np.uint8)
    expected = model(pixels).numpy()

    for name, loads in (("mypkg.models:build", True), ("tiny-cnn", False)):
        target = str(tmp_path / name.replace(":", "_"))
        export.save(
            model,
            target,
            export.ServingConfig(num_classes=2, image_size=8, eval_crop_fraction=1.0, model=name),
        )
        served = tf.saved_model.load(target).signatures["serving_images"](image=tf.constant(pixels))
        np.testing.assert_allclose(served["probabilities"].numpy(), expected, atol=1e-6)  # either way
        if loads:
            np.testing.assert_allclose(
                keras.models.load_model(target, compile=False)(pixels), expected, atol=1e-6
            )
        else:
            with pytest.raises(ValueError, match="Doubled"):
                keras.models.load_model(target, compile=False)
