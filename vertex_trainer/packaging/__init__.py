"""Turn the trainer into something Vertex AI can run: an image in Artifact Registry, or a
Python package on a prebuilt TensorFlow training image.

The seam (docs/packager.md):

* `plan_artifact(spec) -> contract.Artifact`: what the job will run, with the exact image tag.
  Pure and fast: it assembles the build context in memory and hashes it, nothing else (no
  network, no subprocess). `render`, `submit --dry-run` and `--local` use it.
* `ensure_artifact(spec, *, settings, builder=None, dry_run=False, log=None) -> PackageResult`:
  make sure the artifact exists, building or uploading only what is missing.

Modules, each one job, data flowing down the list:

  context     .dockerignore rules, context entries, the content hash, the reproducible tar.gz
  screen      what never leaves this machine: the screen every packaged folder passes
  templates   Dockerfile variants and templates, the trainer's requirements
  owncode     your own code (image.code) as an image or as a Python package
  factory     a model factory job's image: the bundled trainer's, with image.code in it
  build_plan  BuildPlan: what would be built and its name; plan_artifact (pure)
  registry    does <repository>:<tag> exist? (Docker Registry HTTP API v2)
  cloudbuild  the Cloud Build REST client
  docker      the local docker CLI driver
  ensure      the orchestration: plan, tag check, build/upload, PackageResult

Every network call goes through vertex_trainer.gcp (one retry policy, one error parser); the
endpoints come from a `Settings` argument, never from the environment.
"""

from vertex_trainer.packaging.build_plan import (
    BUILDERS,
    DEFAULT_BUILDER,
    PLATFORM,
    SPEC_ENTRY,
    TAG_HEX_CHARS,
    BuildFailed,
    BuildPlan,
    archive_bytes,
    executor_image,
    plan_artifact,
    plan_build,
    plan_bundled_context,
    plan_custom_context,
    resolve_variant,
    staging_location,
)
from vertex_trainer.packaging.cloudbuild import cloud_build_request, run_cloud_build
from vertex_trainer.packaging.context import (
    FIXED_MTIME,
    ContextEntry,
    DockerIgnore,
    hash_entries,
    walk_context,
    write_archive,
)
from vertex_trainer.packaging.docker import docker_available, docker_commands, run_docker_build
from vertex_trainer.packaging.ensure import PackageResult, ensure_artifact
from vertex_trainer.packaging.registry import registry_tag_exists
from vertex_trainer.packaging.templates import (
    FRAMEWORK_NAMES,
    VARIANTS,
    Variant,
    bundled_trainer_dir,
    render_dockerfile,
    render_dockerignore,
    trainer_requirements,
    write_root_files,
)

__all__ = [
    "BUILDERS",
    "DEFAULT_BUILDER",
    "FIXED_MTIME",
    "FRAMEWORK_NAMES",
    "PLATFORM",
    "SPEC_ENTRY",
    "TAG_HEX_CHARS",
    "VARIANTS",
    "BuildFailed",
    "BuildPlan",
    "ContextEntry",
    "DockerIgnore",
    "PackageResult",
    "Variant",
    "archive_bytes",
    "bundled_trainer_dir",
    "cloud_build_request",
    "docker_available",
    "docker_commands",
    "ensure_artifact",
    "executor_image",
    "hash_entries",
    "plan_artifact",
    "plan_build",
    "plan_bundled_context",
    "plan_custom_context",
    "registry_tag_exists",
    "render_dockerfile",
    "render_dockerignore",
    "resolve_variant",
    "run_cloud_build",
    "run_docker_build",
    "staging_location",
    "trainer_requirements",
    "walk_context",
    "write_archive",
    "write_root_files",
]
