# The vertex-trainer training image, gpu variant.
# Generated from vertex_trainer/templates/Dockerfile.j2: edit the template, not this file.
# Build context: the repository root, filtered by .dockerignore (what `vertex-trainer package`
# assembles and hashes into the image tag).
FROM tensorflow/tensorflow:2.21.0-gpu

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    PYTHONPATH=/opt/trainer

# Vertex AI needs no root inside the container: the trainer runs as an unprivileged user.
RUN groupadd --system --gid 10001 trainer \
 && useradd --system --uid 10001 --gid trainer --create-home --home-dir /home/trainer trainer

WORKDIR /opt/trainer

# Reduction Server's NCCL transport plugin (scaling.reduction_server, docs/scaling.md): the
# google-reduction-server package from Google's google-fast-socket apt repository, as
# https://cloud.google.com/vertex-ai/docs/training/distributed-training#reduction-server installs it.
# No version is pinned: none could be sourced (2026-12-02). Google's page and its samples
# (GoogleCloudPlatform/vertex-ai-samples' training Dockerfiles) install it unpinned (`apt install -y
# google-reduction-server`), no public file names a version of it, and the repository's package
# list was out of reach from where this was written. `dpkg-query -W google-reduction-server` in
# the built image names the one installed; pin it here once a version is read from that list.
# hadolint ignore=DL3008
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates curl gnupg \
 && curl -fsSL -o /tmp/google-apt-key.gpg https://packages.cloud.google.com/apt/doc/apt-key.gpg \
 && gpg --dearmor -o /usr/share/keyrings/google-fast-socket.gpg /tmp/google-apt-key.gpg \
 && rm /tmp/google-apt-key.gpg \
 && echo "deb [signed-by=/usr/share/keyrings/google-fast-socket.gpg] https://packages.cloud.google.com/apt google-fast-socket main" \
      > /etc/apt/sources.list.d/google-fast-socket.list \
 && apt-get update \
 && apt-get install -y --no-install-recommends google-reduction-server \
 && rm -rf /var/lib/apt/lists/*

# The framework layer (gpu): changes only when the variant's pins change.
RUN python -m pip install --no-cache-dir --no-deps tf-keras==2.21.0

# Dependencies before code: editing the trainer rebuilds only the small code layer below.
# TensorFlow and tf-keras belong to the framework layer, pinned to match each other: their lines
# in requirements.txt are left out here so the variant's pins win.
COPY trainer_image/requirements.txt ./requirements.txt
RUN { grep -viE '^[[:space:]]*(tensorflow|tensorflow-cpu|tensorflow-gpu|tensorflow-tpu|tf-nightly|tf-keras|tf_keras)([^[:alnum:]_.-]|$)' requirements.txt || true; } > requirements-image.txt \
 && python -m pip install --no-cache-dir -r requirements-image.txt

# The code layer.
COPY trainer_image/trainer/ ./trainer/

# Numeric, so the runtime can tell it is not root without reading /etc/passwd.
USER 10001:10001
ENTRYPOINT ["python", "-m", "trainer.task"]
