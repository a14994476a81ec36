#!/usr/bin/env bash
# The whole cloud path on this machine, build to prediction (docs/sandbox.md). Run it inside the
# sandbox, which hands it the environment and stops everything when it ends (`make sandbox-demo`):
#
#   vertex-trainer dev sandbox --quiet --bucket sandbox-demo -- bash examples/sandbox/demo.sh
#
# Each step is the command you would run against Google Cloud; only the variables differ.
set -euo pipefail

: "${VERTEX_TRAINER_API_ENDPOINT:?run me inside the sandbox: vertex-trainer dev sandbox --bucket sandbox-demo -- bash $0}"
VT=${VT:-vertex-trainer}
PY=${PY:-python}
SPEC=examples/sandbox/digits.yaml
out=$(mktemp)
trap 'rm -f "$out"' EXIT

step() { printf '\n\033[1m== %s\033[0m\n' "$*" >&2; }

step "1. upload a small dataset to the (emulated) bucket"
"$PY" examples/sandbox/digits.py upload gs://sandbox-demo/digits

step "2. submit: build the image with Cloud Build, create the CustomJob, follow its logs, deploy"
"$VT" submit "$SPEC" --deploy | tee "$out"
job=$(awk '$1 == "created" || $1 == "adopted" {print $2; exit}' "$out")
folder=$(awk '$1 == "output" {print $2; exit}' "$out")   # the job's own folder below output_dir

step "3. the job's log in Cloud Logging"
"$VT" logs "$job" | tail -n 4

step "4. metrics.json, read back from the bucket (the job's own folder)"
FOLDER="$folder" "$PY" - <<'EOF'
import json, os
from vertex_trainer.gcp import storage
from vertex_trainer.settings import Settings

metrics = storage.read_json(Settings.from_environ(os.environ), os.environ["FOLDER"] + "/metrics.json")
print(json.dumps({k: metrics[k] for k in ("eval_accuracy", "epochs", "steps", "train_examples_per_sec")}))
EOF

step "5. predict: job.deploy(spec).predict(...) on the endpoint"
"$PY" examples/sandbox/digits.py predict "$SPEC" "$job" --count 100
