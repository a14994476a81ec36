"""Secret-looking values shown as `***` wherever the tool prints or saves them (issue 41 item 7;
docs/security-notes/redaction.md). A leaf: plain functions over JSON-like values.

What looks secret is decided by the NAME, never by guessing at a value: an env variable's name, a
flag's (`--api-key=VALUE`, `--api-key VALUE`) or a `NAME=VALUE` argument's (`env API_KEY=x ...`,
Hydra's `db.password=x`). A name is split into words at `_`, `-`, `.` and camelCase
(`WANDB_API_KEY` -> WANDB, API, KEY; `apiKey` -> api, Key), and looks secret when

- a word is one of WORDS (KEY, TOKEN, SECRET, PASSWORD, CREDENTIALS, AUTH, ...), or
- a word ends with one of ENDINGS (`GHTOKEN`, `DBPASSWORD`, `APIKEY`), or
- two words in a row are one of PAIRS (`CONN_STR`, `CONNECTION_STRING`).

Whole words, so `KEYBOARD`, `MONKEY`, `TOKENIZER_PATH`, `MAX_TOKENS` and `TF_CPP_MIN_LOG_LEVEL`
stay visible. A value that is a URL with a password (`postgres://me:pw@db/x`) has the password
masked whatever its name (as pip shows an index URL).

Only copies are masked: what is sent to Vertex AI, what a local replica receives and what
`render` prints (the body you send yourself) keep the real values.
"""

from __future__ import annotations

import itertools
import re
from typing import Any, TypeVar

__all__ = [
    "MASK",
    "hidden",
    "looks_secret",
    "note",
    "redact",
    "redact_args",
    "redact_yaml",
    "shown_name",
    "terminal_safe",
    "userinfo_masked",
]

T = TypeVar("T")

MASK = "***"

WORDS = frozenset(
    {
        "KEY",
        "TOKEN",
        "SECRET",
        "SECRETS",
        "PASSWORD",
        "PASSWORDS",
        "PASSWD",
        "PASS",
        "PASSPHRASE",
        "PWD",
        "CREDENTIAL",
        "CREDENTIALS",
        "CREDS",
        "PRIVATE",
        "AUTH",
        "AUTHORIZATION",
        "SAS",  # Azure's shared access signatures
        "DSN",  # Sentry's carries its key
        "COOKIE",
        "WEBHOOK",  # a Slack or Teams webhook URL is its own credential
    }
)
ENDINGS = (
    "PASSWORD",
    "PASSWD",
    "SECRET",
    "TOKEN",
    "APIKEY",
    "ACCESSKEY",
    "SECRETKEY",
    "PRIVATEKEY",
    "CREDENTIAL",
    "CREDENTIALS",
    "CONNSTR",
    "CONNECTIONSTRING",
)
PAIRS = frozenset({("CONN", "STR"), ("CONNECTION", "STRING")})

# Keys whose value is a list of command-line words: containerSpec/pythonPackageSpec `args` and
# `command`, the spec's `args:`, `command:` and `trainer.extra_args`, a dry run's trial args.
_ARG_KEYS = frozenset({"args", "command", "extra_args"})
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_ASSIGNMENT = re.compile(r"^(-{0,2})([A-Za-z_][A-Za-z0-9_.-]*)=(.+)$", re.DOTALL)
_URL_USERINFO = re.compile(r"(?P<head>[A-Za-z][A-Za-z0-9+.-]*://)[^/\s@]+@")
_URL_PASSWORD = re.compile(r"(?P<head>[A-Za-z][A-Za-z0-9+.-]*://[^/\s:@]*:)(?P<password>[^/\s@]+)(?=@)")
# A colour (SGR: ESC [ digits m) is kept; any other control character is shown, not sent.
_CONTROL = re.compile(r"(\x1b\[[0-9;]*m)|[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def _words(name: str) -> list[str]:
    return [w.upper() for w in re.split(r"[^A-Za-z0-9]+", _CAMEL.sub("_", name)) if w]


def looks_secret(name: str) -> bool:
    """Whether a value named `name` (an env variable, a flag without its dashes, a `NAME=` key)
    is masked: a word of it in WORDS, a word ending in one of ENDINGS, or two words in PAIRS.
    `PWD` alone is the shell's working directory, not a password."""
    words = _words(name)
    if words == ["PWD"]:
        return False
    if any(w in WORDS or w.endswith(ENDINGS) for w in words):
        return True
    return any(pair in PAIRS for pair in itertools.pairwise(words))


def _url_masked(value: str) -> str:
    return _URL_PASSWORD.sub(lambda m: m["head"] + MASK, value)


def userinfo_masked(text: str) -> str:
    """`text` with the user part of every URL in it shown as `***` (`https://me:pw@host`,
    `git+https://ghp_TOKEN@github.com`: a token is often the user name): for a message that
    quotes a refused value, which has no name to judge it by."""
    return _URL_USERINFO.sub(lambda m: m["head"] + MASK + "@", text)


def redact_args(args: list[str] | tuple[str, ...], found: list[str] | None = None) -> list[str]:
    """Command-line words with the values of secret-looking flags masked: `--api-key=V`,
    `--api-key V` (the next word, unless it is a flag itself) and `API_KEY=V`; a URL's password in
    any word. `found` collects the names masked."""
    out: list[str] = []
    hide_next = ""
    for word in args:
        if not isinstance(word, str):
            out.append(word)
            hide_next = ""
            continue
        if hide_next and not word.startswith("-"):
            out.append(MASK)
            _note(found, hide_next)
            hide_next = ""
            continue
        hide_next = ""
        assignment = _ASSIGNMENT.match(word)
        if assignment and looks_secret(assignment[2]):
            out.append(f"{assignment[1]}{assignment[2]}={MASK}")
            _note(found, assignment[1] + assignment[2])
        elif word.startswith("-") and "=" not in word and looks_secret(word.lstrip("-")):
            out.append(word)
            hide_next = word
        else:
            out.append(_masked_value(word, assignment[1] + assignment[2] if assignment else "args", found))
    return out


def _masked_value(value: str, name: str, found: list[str] | None) -> str:
    masked = _url_masked(value)
    if masked != value:
        _note(found, name)
    return masked


def _note(found: list[str] | None, name: str) -> None:
    if found is not None and name not in found:
        found.append(name)


def _env_value(name: Any, value: Any, found: list[str] | None) -> Any:
    """One environment variable's value as shown: MASK when its name looks secret (and it is
    set), else with a URL's password masked."""
    if isinstance(name, str) and looks_secret(name) and value not in (None, ""):
        _note(found, name)
        return MASK
    return _masked_value(value, str(name), found) if isinstance(value, str) else value


def _env_list(entries: list[Any], found: list[str] | None) -> list[Any]:
    """Vertex AI's EnvVar list ([{"name", "value"}], REST or proto field names alike)."""
    return [
        {**entry, "value": _env_value(entry["name"], entry["value"], found)}
        if isinstance(entry, dict) and isinstance(entry.get("name"), str) and "value" in entry
        else entry
        for entry in entries
    ]


def _env_map(env: dict[Any, Any], found: list[str] | None) -> dict[Any, Any]:
    """The spec's `env:` mapping."""
    return {name: _env_value(name, value, found) for name, value in env.items()}


def _walk(node: Any, found: list[str] | None) -> Any:
    if isinstance(node, dict):
        out: dict[Any, Any] = {}
        for key, value in node.items():
            if key == "env" and isinstance(value, list):
                out[key] = _env_list(value, found)
            elif key == "env" and isinstance(value, dict):
                out[key] = _env_map(value, found)
            elif key in _ARG_KEYS and isinstance(value, (list, tuple)):
                out[key] = redact_args(value, found)
            else:
                out[key] = _walk(value, found)
        return out
    if isinstance(node, (list, tuple)):
        return [_walk(v, found) for v in node]
    return node


def redact(node: T) -> T:
    """A copy of `node` (a CustomJob, HyperparameterTuningJob or PipelineJob body, a spec's dict,
    a dry run's object: any JSON-like value) with every secret-looking value masked: the env
    entries (`env: [{name, value}]` of a containerSpec or pythonPackageSpec, a spec's `env:`
    mapping) and the words of `args`, `command` and `extra_args` (see redact_args). `node`
    itself is never changed."""
    return _walk(node, None)  # type: ignore[no-any-return]


def hidden(node: Any) -> tuple[str, ...]:
    """The names whose values `redact(node)` masks, first seen first (env names as written,
    flags with their dashes, "args" for a URL's password in an argument)."""
    found: list[str] = []
    _walk(node, found)
    return tuple(found)


def note(names: tuple[str, ...] | list[str]) -> str:
    """The one line a printed dry run adds when it masked something."""
    return (
        f"values that look secret are shown as {MASK} ({', '.join(names)}); the job receives the "
        "real values. Keep real secrets in Secret Manager"
    )


# What redact_yaml walks: a spec's values after its YAML aliases are expanded, and their depth
# (spec.load refuses a spec beyond 20,000 values or 32 levels, so no spec the tool ran exceeds them).
_YAML_VALUES = 20_000
_YAML_DEPTH = 64


def redact_yaml(text: str) -> str:
    """A spec's YAML text with secret-looking values masked (re-dumped as JobSpec.to_yaml dumps
    it); unchanged when nothing is masked. Text that is not YAML is returned as it is, and so is
    YAML no spec could be (nesting past a few hundred levels, aliases that expand past
    _YAML_VALUES values or refer to themselves): `report` reads a run's spec.yaml from its folder,
    which someone else may have written."""
    import yaml

    try:
        data = yaml.safe_load(text)
    except (yaml.YAMLError, RecursionError):
        return text
    if not _within_bounds(data):
        return text
    masked = redact(data)
    if masked == data:
        return text
    return str(yaml.safe_dump(masked, sort_keys=False, default_flow_style=False))


def _within_bounds(data: Any) -> bool:
    """Whether `data`, its aliases expanded, holds at most _YAML_VALUES values and _YAML_DEPTH
    levels (a walk without recursion, so an alias to itself ends at the depth bound)."""
    stack: list[tuple[Any, int]] = [(data, 0)]
    count = 0
    while stack:
        node, depth = stack.pop()
        count += 1
        if count > _YAML_VALUES or depth > _YAML_DEPTH:
            return False
        if isinstance(node, dict):
            stack.extend((v, depth + 1) for pair in node.items() for v in pair)
        elif isinstance(node, (list, tuple)):
            stack.extend((v, depth + 1) for v in node)
    return True


def shown_name(name: str) -> str:
    """A file's name from a folder someone else filled, as one line of a listing: every character
    that is not printable (control characters, so escape sequences; line breaks, which would forge
    a line of the listing; tabs; Unicode format characters, such as bidi overrides) as `\\xNN`,
    `\\uNNNN` or `\\UNNNNNNNN`, as Python escapes it. Ordinary names are unchanged."""
    if name.isprintable():
        return name
    return "".join(c if c.isprintable() else _escaped(c) for c in name)


def _escaped(char: str) -> str:
    n = ord(char)
    return f"\\x{n:02x}" if n < 0x100 else f"\\u{n:04x}" if n < 0x10000 else f"\\U{n:08x}"


def terminal_safe(line: str) -> str:
    """Text from elsewhere as printed on your terminal (a job's log line, the error Vertex AI
    reports for a job, a service's message): its control characters are shown as `\\xNN` instead
    of sent, where an escape sequence sets the window title, writes the clipboard (OSC 52), clears
    the screen or moves the cursor over earlier lines. Colours, tabs and newlines stay; a CR ending
    the text (a CRLF log) is dropped."""
    return _CONTROL.sub(lambda m: m[1] or f"\\x{ord(m[0]):02x}", line.removesuffix("\r"))
