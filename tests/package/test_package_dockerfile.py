"""The Dockerfiles the project ships and renders: golden root files, layer order, hadolint."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from tests.package.conftest import HOSTILE_VALUES
from vertex_trainer import packaging as p
from vertex_trainer.errors import UserError
from vertex_trainer.packaging.templates import _finalize

DIGEST = "sha256:" + "ab" * 32


def _hadolint(pk, text: str, tmp_path) -> subprocess.CompletedProcess:
    path = tmp_path / "Dockerfile"
    path.write_text(text)
    return subprocess.run([pk.hadolint, "--no-color", str(path)], capture_output=True, text=True, timeout=60)


def test_root_dockerfile_is_the_rendered_gpu_template(pk):
    assert (pk.REPO / "Dockerfile").read_text() == p.render_dockerfile("gpu"), (
        "regenerate with: python -m vertex_trainer.packaging --write-root-files"
    )


def test_root_dockerignore_is_the_shipped_template(pk):
    assert (pk.REPO / ".dockerignore").read_text() == p.render_dockerignore()


RENDERINGS = {
    "root": None,
    "gpu": dict(variant="gpu"),
    "cpu": dict(variant="cpu"),
    "tpu": dict(variant="tpu"),
    "gpu+pip": dict(variant="gpu", pip_packages=["pandas==2.2.3", "scipy>=1.13,<2"]),
    "cpu+digest": dict(variant="cpu", base_image_digest=DIGEST),
    "tpu+base": dict(
        variant="tpu",
        base_image="python:3.11.13-slim-bookworm",
        base_image_digest=DIGEST,
        pip_packages=["tensorflow-datasets==4.9.9"],
    ),
}


@pytest.mark.parametrize("name", list(RENDERINGS))
def test_hadolint_passes(pk, tmp_path, name):
    kwargs = RENDERINGS[name]
    text = (pk.REPO / "Dockerfile").read_text() if kwargs is None else p.render_dockerfile(**kwargs)
    result = _hadolint(pk, text, tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr


def test_hadolint_is_really_checking(pk, tmp_path):
    # The gate above means something only if hadolint fails a bad file.
    result = _hadolint(pk, "FROM python\nRUN pip install requests\nUSER root\n", tmp_path)
    assert result.returncode != 0 and "DL3006" in result.stdout


@pytest.mark.parametrize("variant", sorted(p.VARIANTS))
def test_layer_order_user_and_entrypoint(variant):
    lines = [
        ln
        for ln in p.render_dockerfile(variant, pip_packages=["pandas==2.2.3"]).splitlines()
        if ln and not ln.startswith("#")
    ]
    index = {ln: i for i, ln in enumerate(lines)}
    framework = next(i for i, ln in enumerate(lines) if "--no-deps tf-keras" in ln)
    deps = index["COPY trainer_image/requirements.txt ./requirements.txt"]
    assert framework < deps
    extra = index["COPY trainer_image/requirements-extra.txt ./requirements-extra.txt"]
    code = index["COPY trainer_image/trainer/ ./trainer/"]
    assert deps < extra < code, "dependency layers must come before the code layer"
    assert lines[-2] == "USER 10001:10001"
    assert lines[-1] == 'ENTRYPOINT ["python", "-m", "trainer.task"]'
    base = lines[0].split()[1]
    assert lines[0].startswith("FROM ") and ":" in base and not base.endswith(":latest")


def test_variant_bases_and_tpu_framework_layer():
    assert p.render_dockerfile("gpu").splitlines()[4] == "FROM tensorflow/tensorflow:2.21.0-gpu"
    assert "FROM tensorflow/tensorflow:2.21.0\n" in p.render_dockerfile("cpu")
    tpu = p.render_dockerfile("tpu")
    assert "tensorflow-tpu==2.20.0" in tpu
    assert "--find-links https://storage.googleapis.com/libtpu-tf-releases/index.html" in tpu
    assert "tensorflow-tpu==" not in p.render_dockerfile("gpu")
    # tf-keras matches each variant's TensorFlow, without dragging in a second TensorFlow.
    assert "--no-deps tf-keras==2.20.1" in tpu
    assert "--no-deps tf-keras==2.21.0" in p.render_dockerfile("gpu")


def test_digest_pins_the_base():
    assert f"FROM tensorflow/tensorflow:2.21.0@{DIGEST}\n" in p.render_dockerfile(
        "cpu", base_image_digest=DIGEST
    )
    # With a digest the tag may even be omitted.
    assert f"FROM python@{DIGEST}\n" in p.render_dockerfile(
        "tpu", base_image="python", base_image_digest=DIGEST
    )


def test_unpinned_base_is_refused():
    for base in ("python", "python:latest"):
        with pytest.raises(UserError) as e:
            p.render_dockerfile("cpu", base_image=base)
        assert e.value.exit_code == 2 and "pinned" in str(e.value)


def test_rendering_is_pure():
    assert p.render_dockerfile("tpu", pip_packages=["a==1"]) == p.render_dockerfile(
        "tpu", pip_packages=["a==1"]
    )


@pytest.mark.skipif(shutil.which("sh") is None or shutil.which("grep") is None, reason="needs sh and grep")
@pytest.mark.parametrize("variant", sorted(p.VARIANTS))
def test_requirements_layer_leaves_the_framework_pins_to_the_framework_layer(tmp_path, variant):
    """The RUN line that filters requirements.txt, executed by a POSIX shell as in the image."""
    run = next(ln for ln in p.render_dockerfile(variant).splitlines() if ln.startswith("RUN { grep"))
    filter_cmd = run[len("RUN ") :].rstrip(" \\")
    (tmp_path / "requirements.txt").write_text(
        "# comment\ntf-keras==2.21.0   # Keras 2\ntensorboard>=2.20\nTensorFlow-CPU==2.21.0\n"
        "  tf_keras\ntensorflow\ntensorflow-datasets==4.9.9\nPillow>=10\n"
    )
    subprocess.run(["sh", "-c", filter_cmd], cwd=tmp_path, check=True)
    kept = (tmp_path / "requirements-image.txt").read_text().splitlines()
    assert kept == ["# comment", "tensorboard>=2.20", "tensorflow-datasets==4.9.9", "Pillow>=10"]
    (tmp_path / "requirements.txt").write_text("tf-keras==2.21.0\n")  # nothing left is fine too
    subprocess.run(["sh", "-c", filter_cmd], cwd=tmp_path, check=True)
    assert (tmp_path / "requirements-image.txt").read_text() == ""


@pytest.mark.parametrize(
    "field,value", [*HOSTILE_VALUES, ("base_image_digest", "sha256:" + "ab" * 32 + "\nRUN id")]
)
def test_hostile_values_never_reach_a_rendered_dockerfile(field, value):
    with pytest.raises(UserError) as e:
        p.render_dockerfile("gpu", **{field: value})
    assert e.value.exit_code == 2 and f"image.{field}" in str(e.value)


def test_finalize_refuses_line_breaks_whatever_the_caller_forgot():
    with pytest.raises(UserError) as e:
        _finalize("a\nRUN id")
    assert "line break" in str(e.value)


def test_the_spec_accepts_exactly_the_packagers_variants_and_builders(make_spec):
    """The spec layer checks image.variant / image.builder without importing the packager: the
    two lists must not drift apart."""
    from vertex_trainer.spec import images

    assert set(images.VARIANTS) == set(p.VARIANTS)
    assert set(images.BUILDERS) == set(p.BUILDERS)
    for variant in p.VARIANTS:
        assert make_spec(variant=variant).image.variant == variant
    for builder in p.BUILDERS:
        assert make_spec(builder=builder).image.builder == builder
