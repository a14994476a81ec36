"""The one HTTP layer for every Google API the tool calls.

- `auth`: Application Default Credentials and sessions (an http:// endpoint is an emulator).
- `http`: `ApiClient`: one retry policy (backoff with full jitter, bounded in attempts and time),
  one error parser turning Google error bodies into the project's errors.
- `lro`: long-running-operation polling.
- `storage`: the one Cloud Storage client factory, uploads, reads and bucket metadata.

Everything here takes its endpoints and policies as arguments (see vertex_trainer.settings);
nothing reads the environment.
"""
