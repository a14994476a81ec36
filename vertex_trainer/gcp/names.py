"""Google's grammars for the names a person types (issue 41): checked at the edge, before a value
reaches generated code, a shell script or a request. Each check raises UserError (exit 2) naming
the flag, the value (as `repr()` shows it: a newline, a terminal escape or a bidirectional
override in a value is shown escaped, never acted on) and the fix. Pure: the standard library only.

Sources (read 2026): Cloud Storage bucket names (cloud.google.com/storage/docs/buckets#naming)
and object names (cloud.google.com/storage/docs/objects#naming); Cloud Run service names, which a
Cloud Run function (2nd gen) is (RFC 1035 labels: a lowercase letter first, letters, digits and
hyphens, at most 63, no hyphen last); service account ids (6-30 characters of the same alphabet)
and e-mail addresses; IAM principal identifiers for allow policies
(cloud.google.com/iam/docs/principal-identifiers).
"""

from __future__ import annotations

import re

from vertex_trainer.errors import UserError

_BUCKET_CHARS = re.compile(r"^[a-z0-9][a-z0-9._-]*[a-z0-9]$")
_IPV4 = re.compile(r"^\d{1,3}(\.\d{1,3}){3}$")
_FUNCTION = re.compile(r"^[a-z](?:[a-z0-9-]{0,61}[a-z0-9])?$")
_SERVICE_ACCOUNT = re.compile(
    r"^[a-z0-9][a-z0-9-]{0,61}[a-z0-9]@[a-z][a-z0-9.-]*[a-z0-9]\.iam\.gserviceaccount\.com$"
    r"|^[0-9]+-compute@developer\.gserviceaccount\.com$"
    r"|^[a-z][a-z0-9-]*[a-z0-9]@appspot\.gserviceaccount\.com$"
)
_EMAIL = re.compile(
    r"^[A-Za-z0-9._%+'-]{1,64}@[A-Za-z0-9](?:[A-Za-z0-9.-]{0,251}[A-Za-z0-9])?\.[A-Za-z]{2,63}$"
)
_DOMAIN = re.compile(r"^(?=.{1,253}$)([a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z]{2,63}$")
_LOCATION = re.compile(r"^[a-z][a-z0-9-]{0,62}[a-z0-9]$")
_FEDERATED = re.compile(r"^principal(Set)?://iam\.googleapis\.com/[A-Za-z0-9._~:/@*=+-]+$")

# What a name under the trigger's prefix may not hold, on top of Google's own rules: the trainer
# splits its data flags on commas, and `[ ] * ? \` are wildcards (or the escape) of the glob it
# and gcloud match patterns with; a folder holding one names more than one folder.
SPLIT_OR_GLOB = frozenset(",[]*?\\")
PUBLIC_MEMBERS = ("allUsers", "allAuthenticatedUsers")
MEMBER_FORMS = (
    "user:EMAIL, serviceAccount:EMAIL, group:EMAIL, domain:DOMAIN, principal://... or principalSet://..."
)


def shown(value: str) -> str:
    """A value as a message shows it: quoted, every character that is not printable escaped."""
    return repr(value)


def check_bucket(value: str, flag: str = "--bucket") -> str:
    """A bucket name: 3-63 characters of a-z, 0-9, '-', '_' and '.', a letter or digit at each
    end; with dots up to 222, each dot-separated part at most 63; not an IPv4 address, not
    starting with "goog", not holding "google" (or "g00gle")."""
    if value.startswith("gs://"):
        raise UserError(
            f"{flag} {shown(value)}: give the bucket's name, without gs://",
            hint=f"{flag} {value[5:].split('/', 1)[0]}",
        )
    parts = value.split(".")
    longest = 222 if len(parts) > 1 else 63
    problem = (
        "is not a bucket name (3-63 characters of a-z, 0-9, '-', '_' and '.', a letter or "
        "digit first and last)"
        if not _BUCKET_CHARS.match(value) or not 3 <= len(value) <= longest
        else "has a dot-separated part that is empty or over 63 characters"
        if any(not p or len(p) > 63 for p in parts)
        else "is an IP address, which Cloud Storage refuses as a bucket name"
        if _IPV4.match(value)
        else "starts with 'goog' or holds 'google', which Cloud Storage reserves"
        if value.startswith("goog") or "google" in value or "g00gle" in value
        else ""
    )
    if problem:
        raise UserError(f"{flag} {shown(value)} {problem}", hint="e.g. my-training-data")
    return value


def _name_problem(value: str, what: str) -> str:
    """Why `value` cannot be part of an object name under the trigger ("" when it can)."""
    if "\r" in value or "\n" in value:
        return f"{what} holds a line break, which a Cloud Storage object name cannot"
    bad = sorted({c for c in value if not c.isprintable() and c != " "})
    if bad:
        return f"{what} holds the control or invisible character(s) {', '.join(map(ascii, bad))}"
    glob = sorted(SPLIT_OR_GLOB & set(value))
    if glob:
        return (
            f"{what} holds {' '.join(glob)}: the trainer splits its data paths on ',' and reads "
            "[ ] * ? \\ as wildcards, so the folder would name other data than its own"
        )
    return ""


def check_prefix(value: str, flag: str = "--prefix") -> str:
    """An object-name prefix: no leading or double '/', no '.' or '..' part, no line break or
    control character, none of `, [ ] * ? \\`, at most 900 bytes (an object name is at most
    1024, and the folder and the marker follow it)."""
    problem = _name_problem(value, "the prefix")
    if not problem and (value.startswith("/") or "//" in value):
        problem = "an object name prefix has no leading or double '/'"
    if not problem and any(p in (".", "..") for p in value.split("/")[:-1]):
        problem = "a '.' or '..' part names no folder in Cloud Storage"
    if not problem and value.startswith(".well-known/acme-challenge/"):
        problem = "Cloud Storage refuses object names under .well-known/acme-challenge/"
    if not problem and len(value.encode()) > 900:
        problem = f"{len(value.encode())} bytes; at most 900 (an object name is at most 1024)"
    if problem:
        raise UserError(f"{flag} {shown(value)}: {problem}", hint="e.g. --prefix datasets/")
    return value


def check_marker(value: str, flag: str = "--marker") -> str:
    """The marker: an object name's last part (no '/'), not '.' or '..', at most 100 bytes, with
    the prefix's character rules."""
    problem = (
        "the marker is an object's last name part, e.g. _SUCCESS"
        if not value or "/" in value or value in (".", "..")
        else _name_problem(value, "the marker")
        or (f"{len(value.encode())} bytes; at most 100" if len(value.encode()) > 100 else "")
    )
    if problem:
        raise UserError(f"{flag} {shown(value)}: {problem}", hint="e.g. --marker _SUCCESS")
    return value


FOLDER_PUNCTUATION = "-_.=+@%~:/"


def folder_problem(folder: str) -> str:
    """Why `folder` (an object name's part between the prefix and the marker: whoever may upload
    to the bucket chooses it) cannot be one data folder of the bucket ("" when it can): what
    `_name_problem` refuses, an empty, '.' or '..' part, or a character other than a letter, a
    digit or one of FOLDER_PUNCTUATION. The folder reaches the run's flags and, through a spec's
    `{{ trigger.folder }}`, whatever the spec pastes it into (a `sh -c` command included), so it
    holds no quote, space, `;`, `$`, backtick or other shell, glob or split character."""
    if not folder.strip("/"):
        return "names no folder"
    what = f"the folder {shown(folder)}"
    problem = _name_problem(folder, what)
    if not problem and any(p in ("", ".", "..") for p in folder.split("/")):
        problem = f"{what} has an empty, '.' or '..' part"
    other = sorted({c for c in folder if not c.isalnum() and c not in FOLDER_PUNCTUATION})
    if not problem and other:
        problem = (
            f"{what} holds {' '.join(map(repr, other))}: a folder's name is letters, digits and "
            f"{' '.join(FOLDER_PUNCTUATION)} (it reaches the run's flags, and a spec may paste it "
            "into a command)"
        )
    return problem


def check_function(value: str, flag: str = "--function") -> str:
    """A Cloud Run function (2nd gen) name: a Cloud Run service id, RFC 1035."""
    if not _FUNCTION.match(value):
        raise UserError(
            f"{flag} {shown(value)} is not a function name: 1-63 characters of a-z, 0-9 and '-', "
            "a lowercase letter first, no '-' last",
            hint="e.g. vt-digits",
        )
    return value


def check_service_account(value: str, flag: str) -> str:
    """A service account's e-mail: ID@PROJECT.iam.gserviceaccount.com (a user-made ID is 6-30
    characters; Google's agents have longer ones), or the Compute Engine or App Engine default
    account."""
    if not _SERVICE_ACCOUNT.match(value):
        raise UserError(
            f"{flag} {shown(value)} is not a service account e-mail",
            hint="NAME@PROJECT.iam.gserviceaccount.com (NAME: 6-30 characters of a-z, 0-9 and '-')",
        )
    return value


def check_location(value: str, flag: str = "--trigger-location") -> str:
    """A Google Cloud location id: us, eu, nam4, us-central1, ..."""
    if not _LOCATION.match(value):
        raise UserError(
            f"{flag} {shown(value)} is not a location (lowercase letters, digits and '-')",
            hint="the bucket's location, e.g. us, eu or us-central1",
        )
    return value


def check_member(value: str, flag: str = "--member") -> str:
    """An IAM principal for a grant: user:, serviceAccount:, group: (an e-mail), domain: (a
    domain), or a federated principal://, principalSet://. The public principals (allUsers,
    allAuthenticatedUsers) are refused: the tool never makes a resource public."""
    if value in PUBLIC_MEMBERS or value.lower() in {m.lower() for m in PUBLIC_MEMBERS}:
        raise UserError(
            f"{flag} {value}: a public principal (anyone on the internet, or any Google account); "
            "setup grants only to named principals; nothing was sent",
            hint=f"name who: {MEMBER_FORMS}",
        )
    kind, sep, rest = value.partition(":")
    ok = bool(sep) and (
        (kind == "serviceAccount" and _EMAIL.match(rest) is not None and rest.endswith("gserviceaccount.com"))
        or (kind in ("user", "group") and _EMAIL.match(rest) is not None)
        or (kind == "domain" and _DOMAIN.match(rest) is not None)
        or (kind in ("principal", "principalSet") and _FEDERATED.match(value) is not None)
    )
    if not ok:
        raise UserError(f"{flag} {shown(value)} is not an IAM principal; nothing was sent", hint=MEMBER_FORMS)
    return value
