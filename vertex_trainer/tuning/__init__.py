"""Hyperparameter tuning: a spec with `tune:` becomes a Vertex AI HyperparameterTuningJob, or
its trials run here one by one (docs/tuning.md; docs/contract.md section 10).

    tuning_run.py   the tuning job's body, its trials run locally, the best trial

The `tune:` block is spec/tune.py; the client is vertex/hptuning.py.
"""
