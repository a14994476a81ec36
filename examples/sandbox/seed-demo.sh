#!/usr/bin/env bash
# The seed's flow on this machine (docs/sandbox.md, "The seed's flow"): a dataset lands in the
# bucket, its _SUCCESS marker fires the Cloud Run function, the function starts a Vertex AI
# Pipelines run that trains (Flex Start), registers and deploys; the endpoint answers. Nothing is
# typed in between. Run it inside a sandbox that serves the function (`make sandbox-seed-demo`):
#
#   vertex-trainer trigger render examples/sandbox/digits-seed.yaml --bucket sandbox-demo \
#       --prefix incoming/ --project sandbox -o /tmp/digits-fn
#   vertex-trainer dev sandbox --quiet --function /tmp/digits-fn -- bash examples/sandbox/seed-demo.sh
set -euo pipefail

: "${VERTEX_TRAINER_API_ENDPOINT:?run me inside the sandbox: vertex-trainer dev sandbox --function DIR -- bash $0}"
PY=${PY:-python}
FOLDER=gs://sandbox-demo/incoming/digits-1

step() { printf '\n\033[1m== %s\033[0m\n' "$*" >&2; }

step "1. upload the dataset's shards (each upload is an event; none starts a run)"
"$PY" examples/sandbox/digits.py upload "$FOLDER"

step "2. upload the _SUCCESS marker: the function starts one pipeline run"
"$PY" examples/sandbox/digits.py marker "$FOLDER"

step "3. the run: train (FLEX_START), import, upload, endpoint, deploy"
"$PY" examples/sandbox/digits.py await-runs --count 1

step "4. the endpoint answers"
"$PY" examples/sandbox/digits.py ask-endpoint digits-seed --count 100
