"""The workflows between the clients and the orchestrator (docs/architecture.md): what a submit
checks before it sends (`preflight`, `capacity`), the capacity fallback's attempts (`fallback`),
deploy requests from a finished job (`deployment`), tuning jobs and their trials (`tuning`) and
bench runs (`benchmark`). Each module is imported by its own name; this package imports nothing,
so loading one workflow never loads the others."""
