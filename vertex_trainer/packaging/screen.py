"""What never leaves this machine: the screen every packaged folder passes (docs/packager.md,
"What is left out"; docs/security-notes/packaging.md).

A folder of yours (image.code, image.context) is packaged into a build context or an sdist that
is uploaded to the staging bucket and built into Artifact Registry. Before a file goes in, in this
order, the first rule that matches leaves it out, and says why:

1. built-in (`BUILTIN`): gcloud's default .gcloudignore (`.gcloudignore`, `.git`, `.gitignore`;
   googlecloudsdk/command_lib/util/gcloudignore.py DEFAULT_IGNORE_FILE), Python caches, Jupyter
   checkpoints, virtual environments (`.venv`, or any directory holding `pyvenv.cfg` or
   `conda-meta/`) and vertex-trainer's own records. No rule of yours brings these back.
2. credentials by name (`CREDENTIALS`: `.env*`, `*.pem`, `*.key`, `id_rsa*`, `.ssh/`, ...).
3. the folder's own `.gcloudignore`, with gcloud's rules: gitignore syntax (pathspec's
   GitIgnoreSpec), `!` re-includes, a directory left out cannot have files re-included, and
   `#!include:FILE` inserts a file of the same folder (one level, as gcloud). gcloud's generated
   default also includes `.gitignore`; here only a `.gcloudignore` that says so does, since a
   .gitignore often lists generated files a job needs, and what it lists as secret the
   credential rules already cover.
4. its `.dockerignore` (Docker's rules, context.DockerIgnore; `walk_screened` reads it).
5. credentials by content (`recognise`, the first `context.HEAD_BYTES` of each file): a service-account
   key, OAuth user credentials with a refresh token, a PEM / OpenSSH / PGP private key.

A file that 2 or 5 leaves out is packaged only when `image.include_secrets` names it (a path or a
glob, never a blanket pattern: spec/images.py); every entry there must name such a file.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pathspec

from vertex_trainer.errors import SpecError
from vertex_trainer.packaging.context import ContextEntry, DockerIgnore, walk_context

IGNORE_FILE_BYTES = 1024 * 1024  # a .gcloudignore or .dockerignore longer than this is refused
GCLOUDIGNORE = ".gcloudignore"
DOCKERIGNORE = ".dockerignore"

# (gitignore pattern, why it is left out): what never belongs to a build or a package.
BUILTIN: tuple[tuple[str, str], ...] = (
    (".gcloudignore", "gcloud's default .gcloudignore"),
    (".git", "version control data (gcloud's default .gcloudignore)"),
    (".gitignore", "gcloud's default .gcloudignore"),
    ("/.vertex-trainer", "vertex-trainer's own records"),
    ("__pycache__/", "a Python cache"),
    ("*.pyc", "a Python cache"),
    (".ipynb_checkpoints/", "Jupyter checkpoints"),
    (".venv/", "a virtual environment"),
)
VENV_MARKERS = ("pyvenv.cfg", "conda-meta")  # a directory holding one is a virtual environment
RUNS_MARKER = ".vertex-trainer"  # a directory holding it is an output_dir of local runs (local/layout.py)
# (gitignore pattern, what it is): files that hold credentials by their very name.
CREDENTIALS: tuple[tuple[str, str], ...] = (
    (".env*", "an environment file"),
    ("*.pem", "a PEM file"),
    ("*.key", "a key file"),
    ("*.p12", "a PKCS #12 key store"),
    ("*.pfx", "a PKCS #12 key store"),
    ("*.jks", "a Java key store"),
    ("*.keystore", "a key store"),
    ("id_rsa*", "an SSH key"),
    ("id_dsa*", "an SSH key"),
    ("id_ecdsa*", "an SSH key"),
    ("id_ed25519*", "an SSH key"),
    (".ssh/", "SSH keys and configuration"),
    (".gnupg/", "GnuPG keys"),
    (".aws/", "AWS credentials"),
    (".netrc", "login credentials"),
    (".git-credentials", "git credentials"),
    (".pypirc", "package index credentials"),
    ("application_default_credentials.json", "gcloud's application-default credentials"),
)
_PRIVATE_KEY = re.compile(
    # a BEGIN line, then (after optional PEM headers) a base64 line: in a file, or escaped in JSON
    rb"-----BEGIN ((?:[A-Z0-9]+ )*)PRIVATE KEY(?: BLOCK)?-----(?:\\n|\r?\n)"
    rb"(?:[A-Za-z-]+: [^\r\n\\]*(?:\\n|\r?\n))*(?:\\n|\r?\n)?[A-Za-z0-9+/=]{40}"
)
_SERVICE_ACCOUNT = re.compile(rb'"type"\s*:\s*"service_account"')
_REFRESH_TOKEN = re.compile(rb'"refresh_token"\s*:\s*"[^"\s]{16,}"')
_CLIENT_SECRET = re.compile(rb'"client_secret"\s*:\s*"[^"\s]{8,}"')
_TYPE = re.compile(rb'"type"\s*:\s*"([a-z_]{1,40})"')


def recognise(head: bytes) -> str | None:
    """What credential the start of a file holds, by its content; None for anything else.

    Args:
        head: the file's first bytes (context.HEAD_BYTES of them).
    Returns:
        e.g. "a service-account key", or None.
    """
    key = _PRIVATE_KEY.search(head)
    if key and _SERVICE_ACCOUNT.search(head):
        return "a service-account key"
    if _REFRESH_TOKEN.search(head) and _CLIENT_SECRET.search(head):
        kind = _TYPE.search(head)
        return f"OAuth credentials with a refresh token ({kind.group(1).decode() if kind else 'JSON'})"
    if key:
        return _KEY_NAMES.get(key.group(1).decode().strip(), "a private key")
    return None


_KEY_NAMES = {  # the PEM label before PRIVATE KEY, as people say it
    "": "a PKCS #8 private key",
    "RSA": "an RSA private key",
    "EC": "an EC private key",
    "DSA": "a DSA private key",
    "OPENSSH": "an OpenSSH private key",
    "ENCRYPTED": "an encrypted private key",
    "PGP": "a PGP private key",
}


@dataclass(frozen=True)
class Screened:
    """A file (or a directory, its path ending in '/') the screen left out, or let in on purpose."""

    field: str  # the folder's spec field: image.code, image.context (or "the bundled trainer")
    path: str  # relative to that folder
    reason: str
    credential: bool = False  # left out (or let in) as a credential
    kept: bool = False  # packaged anyway: image.include_secrets names it

    def to_json(self) -> dict[str, object]:
        return {
            "field": self.field,
            "path": self.path,
            "reason": self.reason,
            "credential": self.credential,
            "kept": self.kept,
        }


def read_ignore_file(path: Path, field: str) -> str:
    """An ignore file's text ("" when there is none), bounded and UTF-8 (exit 2 otherwise)."""
    if not path.is_file():
        return ""
    size = path.stat().st_size
    if size > IGNORE_FILE_BYTES:
        raise SpecError(
            field,
            f"holds a {path.name} of {size} bytes, over the {IGNORE_FILE_BYTES} an ignore file may be",
            value=str(path.parent),
            hint=f"shorten {path}: a pattern covers a whole folder (data/)",
        )
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise SpecError(
            field,
            f"holds a {path.name} that is not UTF-8 text (byte {exc.start})",
            value=str(path.parent),
            hint=f"save {path} as UTF-8",
        ) from None


def _gitignore(lines: list[str]) -> pathspec.GitIgnoreSpec:
    return pathspec.GitIgnoreSpec.from_lines(lines)


class _Rules:
    """gitignore-style lines, each with where it came from, matched as gcloud matches them."""

    def __init__(self, lines: list[tuple[str, str]]):
        self.origins = [origin for _, origin in lines]
        self.spec = _gitignore([text for text, _ in lines])

    def match(self, rel: str, is_dir: bool) -> str | None:
        """The origin of the line that leaves `rel` out (a directory's contents are never
        re-included: the walk prunes it first), or None."""
        result = self.spec.check_file(rel + "/" if is_dir else rel)
        if result.include and result.index is not None:
            return self.origins[result.index]
        return None


def gcloudignore_rules(root: Path, field: str) -> _Rules | None:
    """The folder's .gcloudignore, `#!include:` lines expanded (gcloud: a file of the same folder,
    one level deep); None when there is none."""
    text = read_ignore_file(root / GCLOUDIGNORE, field)
    if not text:
        return None
    lines: list[tuple[str, str]] = []
    for n, line in enumerate(text.splitlines(), 1):
        lines.append((line, f"{GCLOUDIGNORE} line {n}: {line.strip()}"))
        if not (line.startswith("#") and line[1:].lstrip().startswith("!include:")):
            continue
        name = line[line.find("!include:") + len("!include:") :].strip()
        if "/" in name or not (root / name).is_file():
            raise SpecError(
                field,
                f"{GCLOUDIGNORE} line {n} includes {name!r}, "
                + ("which is not in the same folder" if "/" in name else "which is not there"),
                value=str(root),
                hint=f"name a file beside {GCLOUDIGNORE} (e.g. #!include:.gitignore), or remove the line",
            )
        for m, included in enumerate(read_ignore_file(root / name, field).splitlines(), 1):
            where = f"{name} line {m}: {included.strip()} (#!include in {GCLOUDIGNORE} line {n})"
            lines.append((included, where))
    return _Rules(lines)


_BUILTIN = _Rules([(p, f"built-in rule {p}: {why}") for p, why in BUILTIN])
_CREDENTIALS = _Rules([(p, f"a credential by its name ({p}: {what})") for p, what in CREDENTIALS])


class _OptIn:
    """image.include_secrets: Docker-style globs over paths in the folder (context._pattern_regex)."""

    def __init__(self, patterns: tuple[str, ...]):
        self.patterns = patterns
        self.each = [DockerIgnore(p) for p in patterns]
        self.used = [False] * len(patterns)

    def match(self, rel: str) -> int | None:
        for i, rules in enumerate(self.each):
            if rules.excluded(rel):
                self.used[i] = True
                return i
        return None

    def reaches_into(self, directory: str) -> bool:
        """Could an entry name something inside this directory (so it must be walked)?"""
        return any(p.reaches_into(directory) for rules in self.each for p in rules.patterns)


class Screen:
    """The rules one folder's files pass before they are packaged (the module's docstring).

    The walk (context.walk_context) asks `directory`, `file` and `content`; each returns the
    reason a path is left out, or None to keep it. What was decided is in `screened`.
    """

    def __init__(
        self,
        root: Path,
        *,
        field: str,
        include_secrets: tuple[str, ...] = (),
        own_rules: bool = True,
    ):
        """Args:
        root: the folder.
        field: its spec field, named in every reason and message.
        include_secrets: image.include_secrets (credentials to package anyway).
        own_rules: apply the built-in rules and the folder's .gcloudignore, and record what
            its .dockerignore leaves out (False for the bundled trainer, whose .dockerignore
            template says what goes in: only credentials are screened and recorded there).
        """
        self.root, self.field, self.own_rules = root, field, own_rules
        self.gcloudignore = gcloudignore_rules(root, field) if own_rules else None
        self.opt_in = _OptIn(tuple(include_secrets))
        self.screened: list[Screened] = []
        self._kept: set[str] = set()  # credentials let in by name: their content is not asked again

    def _out(self, rel: str, reason: str, *, credential: bool = False) -> str:
        self.screened.append(Screened(self.field, rel, reason, credential))
        return reason

    def _credential(self, rel: str, reason: str) -> str | None:
        """Leave a credential out, unless image.include_secrets names it."""
        i = self.opt_in.match(rel)
        if i is None:
            return self._out(rel, reason, credential=True)
        why = f"packaged on purpose: image.include_secrets[{i}] {self.opt_in.patterns[i]!r} ({reason})"
        self.screened.append(Screened(self.field, rel, why, True, kept=True))
        self._kept.add(rel)
        return None

    def directory(self, rel: str, path: Path) -> str | None:
        """Why the directory `rel` is left out whole (it is then not walked), or None."""
        if self.own_rules:
            builtin = _BUILTIN.match(rel, True)
            if builtin:
                return self._out(rel + "/", builtin)
            marker = next((m for m in VENV_MARKERS if (path / m).exists()), None)
            if marker:
                return self._out(rel + "/", f"a virtual environment (it holds {marker})")
            if (path / RUNS_MARKER).is_dir():  # a local output_dir: models, checkpoints, records
                return self._out(rel + "/", f"local runs of vertex-trainer (it holds {RUNS_MARKER}/)")
        credential = _CREDENTIALS.match(rel, True)
        if credential and not self.opt_in.reaches_into(rel):
            return self._out(rel + "/", credential, credential=True)
        if self.gcloudignore is not None:
            own = self.gcloudignore.match(rel, True)
            if own:
                return self._out(rel + "/", own)
        return None

    def file(self, rel: str) -> str | None:
        """Why the file `rel` is left out by its name, or None."""
        if self.own_rules:
            builtin = _BUILTIN.match(rel, False)
            if builtin:
                return self._out(rel, builtin)
        # (a file inside a credential directory, walked because include_secrets reaches in, matches
        # that directory's pattern: gitignore rules match what a directory holds)
        credential = _CREDENTIALS.match(rel, False)
        if credential and self._credential(rel, credential):
            return credential
        if self.gcloudignore is not None:
            own = self.gcloudignore.match(rel, False)
            if own:
                self._drop_kept(rel)
                return self._out(rel, own)
        return None

    def _drop_kept(self, rel: str) -> None:
        """A credential let in by name that a later rule leaves out after all: not 'packaged'."""
        if rel in self._kept:
            self._kept.discard(rel)
            self.screened = [s for s in self.screened if not (s.kept and s.path == rel)]

    def content(self, rel: str, head: bytes) -> str | None:
        """Why the file `rel` is left out by its first bytes, or None."""
        what = recognise(head)
        if what is None or rel in self._kept:
            return None
        return self._credential(rel, f"a credential by its content: {what}")

    def left_out(self, rel: str, reason: str) -> None:
        """Record a file the caller's own rules left out (the .dockerignore)."""
        if self.own_rules:
            self._drop_kept(rel)
            self._out(rel, reason)

    def finish(self) -> tuple[Screened, ...]:
        """What was decided; every image.include_secrets entry must have named a credential.

        Raises:
            SpecError: an entry named none (exit 2).
        """
        for i, used in enumerate(self.opt_in.used):
            if not used:
                raise SpecError(
                    f"image.include_secrets[{i}]",
                    f"names no file of {self.field} ({self.root}) that is left out as a credential",
                    value=self.opt_in.patterns[i],
                    hint="name the file as the dry run lists it: vertex-trainer package SPEC --dry-run "
                    "(its 'left out' lines), or remove the entry",
                )
        return tuple(self.screened)


def walk_screened(
    root: Path,
    *,
    field: str,
    ignore: DockerIgnore | None = None,
    prefix: str = "",
    include_secrets: tuple[str, ...] = (),
    own_rules: bool = True,
    screened: list[Screened] | None = None,
) -> list[ContextEntry]:
    """The files of a folder that pass its `Screen`, then Docker's rules (context.walk_context).

    Args:
        root: the folder.
        field: its spec field (as `Screen`'s).
        ignore: Docker's rules (default: the folder's own .dockerignore, read after its
            .gcloudignore).
        prefix: the folder's place in the context or sdist (`ignore` matches the prefixed names).
        include_secrets: image.include_secrets (as `Screen`'s).
        own_rules: as `Screen`'s.
        screened: collects what was left out (or let in on purpose), for the dry run.
    Returns:
        The entries, sorted by name.
    Raises:
        UserError: a bound is passed, an ignore file is unreadable, or an image.include_secrets
            entry names no credential (exit 2; a SpecError naming `field` but for a bound in
            the bundled trainer).
    """
    screen = Screen(root, field=field, include_secrets=include_secrets, own_rules=own_rules)
    if ignore is None:
        ignore = DockerIgnore(read_ignore_file(root / DOCKERIGNORE, field))
    entries = walk_context(root, ignore, prefix=prefix, screen=screen)
    found = screen.finish()
    if screened is not None:
        screened.extend(found)
    return entries
