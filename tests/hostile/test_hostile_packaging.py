"""Hostile and careless folders through the packager (issue 41, area B; docs/security-notes/packaging.md).

A code folder holding `.env` files, a service-account key, OAuth user credentials, `.ssh/`, PEM
and key files, a private key under an innocent name, `.git/`, a virtual environment and caches:
none of it reaches what would leave this machine, on every path (a script job's image context and
sdist, a model factory's image and sdist, an `image.context` of your own without a
.dockerignore), and `package --dry-run` names each file left out with its reason. A
`.gcloudignore` is honoured (gitignore rules, `!` re-includes, `#!include:`), a key the user ships
on purpose needs `image.include_secrets` naming it, and a 2 GiB file is refused (exit 2) from its
size alone, without being read.
"""

from __future__ import annotations

import base64
import gzip
import io
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.cli_support import edge_env
from tests.owncode.conftest import REPOSITORY, factory_data
from tests.owncode.conftest import script_data as owncode_script_data
from tests.shared import cli_runner
from vertex_trainer.errors import SpecError
from vertex_trainer.packaging import plan_build
from vertex_trainer.packaging.build_plan import archive_bytes
from vertex_trainer.spec import build_spec


def _key_body(seed: int) -> str:
    """Lines shaped like a key's base64 body (random bytes, not a key)."""
    raw = bytes((seed * 31 + i * 7) % 256 for i in range(288))
    text = base64.b64encode(raw).decode()
    return "\n".join(text[i : i + 64] for i in range(0, len(text), 64))


def _pem(kind: str, seed: int) -> str:
    label = f"{kind} PRIVATE KEY".strip()
    return f"-----BEGIN {label}-----\n{_key_body(seed)}\n-----END {label}-----\n"


# What must never be packaged: path -> why (the dry run's reason names this).
SECRETS = {
    ".env": "credential",
    ".env.local": "credential",
    "sa-key.json": "service-account key",
    "creds.json": "refresh token",
    ".ssh/": "credential",
    "server.pem": "credential",
    "tls.key": "credential",
    "notes/deploy.txt": "private key",
    ".git/": "version control",
    ".venv/": "virtual environment",
    "__pycache__/": "cache",
}
# What must be packaged: the code and its ordinary files (a harmless JSON among them).
KEPT = ("task.py", "helper.py", "config.json", "notes/readme.txt", "data/small.csv")


@pytest.fixture
def secrets_dir(tmp_path: Path) -> Path:
    """The done-when folder: code, ordinary files and every kind of secret a careless folder holds."""
    code = tmp_path / "code"
    for sub in ("notes", "data", ".ssh", ".git", ".venv/lib", "__pycache__"):
        (code / sub).mkdir(parents=True)
    (code / "task.py").write_text("import helper\nprint(helper.X)\n")
    (code / "helper.py").write_text("X = 1\n")
    (code / "config.json").write_text(json.dumps({"type": "config", "layers": 3}))
    (code / "notes" / "readme.txt").write_text("how to run\n")
    (code / "data" / "small.csv").write_text("a,b\n1,2\n")
    (code / ".env").write_text("API_TOKEN=abc123\n")
    (code / ".env.local").write_text("DB_PASSWORD=hunter2\n")
    key = {
        "type": "service_account",
        "project_id": "my-project-1",
        "private_key_id": "0123456789abcdef",
        "private_key": _pem("", 1),
        "client_email": "trainer@my-project-1.iam.gserviceaccount.com",
        "token_uri": "https://oauth2.googleapis.com/token",
    }
    (code / "sa-key.json").write_text(json.dumps(key, indent=2))
    user = {
        "type": "authorized_user",
        "client_id": "764086051850-6qr4p6gpi6hn506pt8ejuq83di341hur.apps.googleusercontent.com",
        "client_secret": "d-FL95Q19q7MQmFpd7hHD0Ty",
        "refresh_token": "1//0gExampleRefreshTokenValueThatIsLongEnough",
    }
    (code / "creds.json").write_text(json.dumps(user))
    (code / ".ssh" / "id_rsa").write_text(_pem("OPENSSH", 2))
    (code / ".ssh" / "known_hosts").write_text("github.com ssh-ed25519 AAAA\n")
    (code / "server.pem").write_text(_pem("RSA", 3))
    (code / "tls.key").write_text(_pem("EC", 4))
    (code / "notes" / "deploy.txt").write_text("the deploy key:\n" + _pem("RSA", 5))  # by content only
    (code / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (code / ".git" / "config").write_text("[remote]\n\turl = https://user:token@example.com/r.git\n")
    (code / ".venv" / "pyvenv.cfg").write_text("home = /usr/bin\n")
    (code / ".venv" / "lib" / "site.py").write_text("X = 2\n")
    (code / "__pycache__" / "helper.cpython-311.pyc").write_bytes(b"\x00cache")
    return code


def script_data(code: Path, **image: Any) -> dict:
    """tests/owncode's script job (task.py from `code`) without its args; `image`: more image fields."""
    return owncode_script_data(code, args=None, image=image)


def _names(archive: bytes) -> set[str]:
    with tarfile.open(fileobj=io.BytesIO(archive), mode="r:gz") as tar:
        return {m.name for m in tar.getmembers() if m.isfile() or m.issym()}


def _packaged(data: dict) -> tuple[Any, set[str]]:
    """(plan, the files of the archive that would leave this machine, relative to the code)."""
    spec = build_spec(data)
    plan = plan_build(spec)
    return plan, _names(archive_bytes(plan, spec))


def _under(names: set[str], prefix: str) -> set[str]:
    return {n[len(prefix) :] for n in names if n.startswith(prefix)}


def _assert_screened(files: set[str]) -> None:
    for secret in SECRETS:
        if secret.endswith("/"):
            assert not any(f.startswith(secret) for f in files), (secret, sorted(files))
        else:
            assert secret not in files, (secret, sorted(files))
    assert not any(f.endswith(".pyc") for f in files)


# -- every path --------------------------------------------------------------------------------


def test_a_script_jobs_image_context_holds_no_secret(secrets_dir):
    plan, names = _packaged(script_data(secrets_dir))
    code = _under(names, "code/")
    _assert_screened(code)
    assert set(KEPT) <= code
    assert {e.name for e in plan.entries} == names - {".vertex-trainer/spec.yaml"}  # hashed = sent


def test_a_script_jobs_sdist_holds_no_secret(secrets_dir):
    data = script_data(secrets_dir, repository=None, python_package=True)
    _, names = _packaged(data)
    code = _under(names, "vertex_trainer_code-1.0/vertex_trainer_script/code/")
    _assert_screened(code)
    assert set(KEPT) <= code
    # A module job's code sits at the sdist's top: the same screen.
    data["image"] = {**data["image"], "script": None, "module": "helper"}
    _, names = _packaged(data)
    top = _under(names, "vertex_trainer_code-1.0/")
    _assert_screened(top)
    assert set(KEPT) <= top


@pytest.mark.parametrize("python_package", [False, True])
def test_a_model_factorys_code_holds_no_secret(secrets_dir, python_package):
    image: dict[str, Any] = {"repository": None, "python_package": True} if python_package else {}
    _, names = _packaged(factory_data(secrets_dir, **image))
    code = _under(names, "vertex_trainer_task-1.0/") if python_package else _under(names, "code/")
    _assert_screened(code)
    assert {"task.py", "helper.py", "models/net.py"} <= code


def test_an_image_context_without_a_dockerignore_holds_no_secret(secrets_dir):
    (secrets_dir / "Dockerfile").write_text("FROM python:3.11-slim\nCOPY . /app\n")
    data = script_data(secrets_dir)
    data["image"] = {"repository": REPOSITORY, "context": str(secrets_dir)}
    _, names = _packaged(data)
    _assert_screened(names)
    assert {"Dockerfile", *KEPT} <= names


# -- .gcloudignore, .dockerignore, the opt-in --------------------------------------------------


def test_a_gcloudignore_leaves_out_and_re_includes(secrets_dir):
    (secrets_dir / "data" / "keep.csv").write_text("x\n")
    (secrets_dir / "scratch.log").write_text("x\n")
    (secrets_dir / ".gitignore").write_text("*.log\n")
    (secrets_dir / ".gcloudignore").write_text("# mine\ndata/*.csv\n!data/keep.csv\n#!include:.gitignore\n")
    plan, names = _packaged(script_data(secrets_dir))
    code = _under(names, "code/")
    assert "data/small.csv" not in code and "data/keep.csv" in code and "scratch.log" not in code
    assert ".gcloudignore" not in code and ".gitignore" not in code  # gcloud's own defaults
    reasons = {s.path: s.reason for s in plan.screened}
    assert reasons["data/small.csv"] == ".gcloudignore line 2: data/*.csv"
    assert reasons["scratch.log"] == ".gitignore line 1: *.log (#!include in .gcloudignore line 4)"
    # A file the credential rules leave out stays out whatever .gcloudignore re-includes.
    (secrets_dir / ".gcloudignore").write_text("!.env\n!sa-key.json\n")
    _, names = _packaged(script_data(secrets_dir))
    assert ".env" not in _under(names, "code/") and "sa-key.json" not in _under(names, "code/")


def test_a_gcloudignore_that_includes_a_missing_file_is_exit_2(secrets_dir):
    (secrets_dir / ".gcloudignore").write_text("#!include:.nothere\n")
    with pytest.raises(SpecError) as err:
        plan_build(build_spec(script_data(secrets_dir)))
    assert "image.code" in str(err.value) and ".nothere" in str(err.value)


def test_the_dockerignore_still_applies_after_the_screen(secrets_dir):
    (secrets_dir / ".dockerignore").write_text("notes\n")
    plan, names = _packaged(script_data(secrets_dir))
    assert not _under(names, "code/notes/")
    assert {s.path: s.reason for s in plan.screened}["notes/"] == ".dockerignore: notes"


def test_a_key_shipped_on_purpose_needs_include_secrets_naming_it(secrets_dir):
    data = script_data(secrets_dir, include_secrets=["server.pem", ".ssh/id_rsa"])
    plan, names = _packaged(data)
    code = _under(names, "code/")
    assert {"server.pem", ".ssh/id_rsa"} <= code
    assert ".ssh/known_hosts" not in code and "tls.key" not in code and ".env" not in code
    kept = {s.path: s.reason for s in plan.screened if s.kept}
    assert set(kept) == {"server.pem", ".ssh/id_rsa"}
    assert all("image.include_secrets" in why for why in kept.values())


@pytest.mark.parametrize("entry", ["*", "**", "**/*", ".*", "/", ""])
def test_include_secrets_is_never_a_blanket_switch(secrets_dir, entry):
    with pytest.raises(SpecError) as err:
        build_spec(script_data(secrets_dir, include_secrets=[entry]))
    assert "image.include_secrets[0]" in str(err.value)


def test_include_secrets_naming_nothing_left_out_is_exit_2(secrets_dir):
    with pytest.raises(SpecError) as err:
        plan_build(build_spec(script_data(secrets_dir, include_secrets=["helper.py"])))
    text = str(err.value)
    assert "image.include_secrets[0]" in text and "package" in text and "--dry-run" in text


def test_include_secrets_needs_a_folder_of_yours(secrets_dir):
    data = script_data(secrets_dir, include_secrets=["server.pem"])
    data["image"] = {"repository": REPOSITORY, "include_secrets": ["server.pem"]}
    data["trainer"] = {"model": "tiny-cnn", "train_data": "gs://my-bucket/d/train-*", "num_classes": 3}
    with pytest.raises(SpecError) as err:
        build_spec(data)
    assert "include_secrets" in str(err.value) and "image.code" in str(err.value)


# -- what the dry run says ---------------------------------------------------------------------


def test_package_dry_run_lists_each_file_left_out_and_why(tmp_path, secrets_dir):
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(script_data(secrets_dir)))
    run = cli_runner(edge_env(tmp_path), cwd=tmp_path)

    text = run("package", path, "--dry-run")
    assert text.returncode == 0, text.stderr
    lines = text.stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("left out of image.code"))
    listed = {line.split()[0]: line for line in lines[start + 1 :] if line.startswith("  ")}
    for secret, why in SECRETS.items():
        assert secret in listed, (secret, lines[start:])
        assert why in listed[secret], listed[secret]
    assert not any(kept in listed for kept in KEPT)

    as_json = run("package", path, "--dry-run", "--output", "json")
    assert as_json.returncode == 0, as_json.stderr
    left = {item["path"]: item for item in json.loads(as_json.stdout)["left_out"]}
    assert set(SECRETS) <= set(left)
    assert left["sa-key.json"]["credential"] is True and left[".git/"]["credential"] is False
    assert all(item["field"] == "image.code" for item in left.values())


def test_a_real_build_says_which_credentials_stayed_out(secrets_dir):
    from vertex_trainer.packaging.ensure import credential_line

    plan = plan_build(build_spec(script_data(secrets_dir)))
    line = credential_line(plan)
    assert line is not None and "sa-key.json" in line and ".ssh/" in line and "include_secrets" in line
    assert ".git/" not in line  # only what looks like a credential


# -- bounds: a huge file is refused from its size, never read ------------------------------------

# The CLI in a fresh process that reports its own peak RSS: VmHWM is this process image's own
# (getrusage's ru_maxrss is not: Linux carries the parent's high-water mark across fork and exec).
WRAPPER = """
import sys
from vertex_trainer.cli import main
try:
    main(sys.argv[1:])
    code = 0
except SystemExit as exc:
    code = exc.code if isinstance(exc.code, int) else 1
with open("/proc/self/status") as status:
    peak = next(line.split()[1] for line in status if line.startswith("VmHWM:"))
print(f"peak-rss-kib={peak}", file=sys.stderr)
sys.exit(code)
"""


@pytest.mark.parametrize("command", [["validate"], ["package", "--dry-run"]])
def test_a_2_gib_file_in_image_code_is_refused_without_being_read(tmp_path, command):
    code = tmp_path / "code"
    (code / "data").mkdir(parents=True)
    (code / "task.py").write_text("print('hi')\n")
    big = code / "data" / "huge.bin"
    with open(big, "wb") as f:
        os.truncate(f.fileno(), 2 * 1024**3)  # sparse: no disk used
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(script_data(code)))
    env = edge_env(tmp_path)
    done = subprocess.run(
        [sys.executable, "-c", WRAPPER, *command, str(path)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stdout + done.stderr
    err = done.stderr
    for needle in ("image.code", "data/huge.bin", "2.0 GiB", "512.0 MiB", ".gcloudignore"):
        assert needle in err, err
    peak_kib = int(err.rsplit("peak-rss-kib=", 1)[1].split()[0])
    assert peak_kib < 400 * 1024, f"peak RSS {peak_kib} KiB: the file was read"


def test_the_hash_streams_a_large_file_within_the_limit(tmp_path):
    """A file under the limit is hashed in chunks: the digest is the whole file's."""
    import hashlib

    from vertex_trainer.packaging.context import entry_from_file

    path = tmp_path / "weights.bin"
    data = os.urandom(3 * 1024 * 1024 + 17)
    path.write_bytes(data)
    entry = entry_from_file("weights.bin", path)
    assert entry.size == len(data) and entry.digest == hashlib.sha256(data).hexdigest()
    buf = io.BytesIO()
    from vertex_trainer.packaging.context import write_archive

    write_archive([entry], buf)
    with tarfile.open(fileobj=io.BytesIO(gzip.decompress(buf.getvalue()))) as tar:
        member = tar.extractfile("weights.bin")
        assert member is not None and member.read() == data


def test_a_huge_requirements_txt_is_refused_before_it_is_read(tmp_path):
    code = tmp_path / "code"
    code.mkdir()
    (code / "task.py").write_text("print('hi')\n")
    with open(code / "requirements.txt", "wb") as f:
        os.truncate(f.fileno(), 3 * 1024**2)
    with pytest.raises(SpecError) as err:
        plan_build(build_spec(script_data(code)))
    text = str(err.value)
    assert "image.code" in text and "requirements.txt" in text and "1.0 MiB" in text


def test_a_fifo_in_image_code_is_left_out_not_waited_on(tmp_path):
    code = tmp_path / "code"
    code.mkdir()
    (code / "task.py").write_text("print('hi')\n")
    os.mkfifo(code / "pipe")  # opening it would block until a writer came
    plan, names = _packaged(script_data(code))
    assert "code/pipe" not in names and "code/task.py" in names
    assert "not a regular file" in {s.path: s.reason for s in plan.screened}["pipe"]


def test_a_key_let_in_by_name_but_left_out_by_dockerignore_is_not_said_to_be_packaged(secrets_dir):
    (secrets_dir / ".dockerignore").write_text("server.pem\n")
    plan, names = _packaged(script_data(secrets_dir, include_secrets=["server.pem"]))
    assert "code/server.pem" not in names
    said = [s for s in plan.screened if s.path == "server.pem"]
    assert [(s.kept, s.reason) for s in said] == [(False, ".dockerignore: server.pem")]


# -- recognised by content, and what is not -------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "what"),
    [
        (_pem("", 1), "a PKCS #8 private key"),
        (_pem("RSA", 1), "an RSA private key"),
        (_pem("EC", 1), "an EC private key"),
        (_pem("OPENSSH", 1), "an OpenSSH private key"),
        (_pem("ENCRYPTED", 1), "an encrypted private key"),
        (
            "-----BEGIN RSA PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\nDEK-Info: AES-128-CBC,00FF\n\n"
            + _key_body(2)
            + "\n-----END RSA PRIVATE KEY-----\n",
            "an RSA private key",
        ),
        (
            "-----BEGIN PGP PRIVATE KEY BLOCK-----\nVersion: GnuPG v2\n\n" + _key_body(3) + "\n",
            "a PGP private key",
        ),
        (json.dumps({"type": "service_account", "private_key": _pem("", 4)}), "a service-account key"),
        (
            json.dumps(
                {
                    "type": "authorized_user",
                    "client_secret": "d-FL95Q19q7M",
                    "refresh_token": "1//0" + "x" * 40,
                }
            ),
            "OAuth credentials with a refresh token (authorized_user)",
        ),
    ],
)
def test_credentials_are_recognised_by_content(text, what):
    from vertex_trainer.packaging.screen import recognise

    assert recognise(text.encode()) == what


@pytest.mark.parametrize(
    "text",
    [
        'if line.startswith("-----BEGIN RSA PRIVATE KEY-----"):\n    kind = "rsa"\n',  # code that parses keys
        "-----BEGIN CERTIFICATE-----\n" + _key_body(5) + "\n-----END CERTIFICATE-----\n",  # public
        "-----BEGIN PUBLIC KEY-----\n" + _key_body(6) + "\n-----END PUBLIC KEY-----\n",
        json.dumps({"type": "service_account", "client_email": "a@b.iam.gserviceaccount.com"}),  # no key
        json.dumps({"type": "authorized_user", "client_secret": "", "refresh_token": ""}),  # emptied
        json.dumps({"type": "external_account", "credential_source": {"file": "/var/run/token"}}),
    ],
)
def test_ordinary_files_are_not_taken_for_credentials(text):
    from vertex_trainer.packaging.screen import recognise

    assert recognise(text.encode()) is None


def test_submit_dry_run_names_what_was_left_out_in_its_package_step(tmp_path, secrets_dir):
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(script_data(secrets_dir)))
    run = cli_runner(edge_env(tmp_path), cwd=tmp_path)
    done = run("submit", path, "--dry-run", "--output", "json")
    assert done.returncode == 0, done.stderr
    step = json.loads(done.stdout)["package"]
    left = {item["path"] for item in step["left_out"] if item["credential"]}
    assert {".env", "sa-key.json", "creds.json", ".ssh/", "server.pem", "notes/deploy.txt"} <= left
