"""`dev sandbox`: only its user can drive it (issue 41; docs/security-notes/listening.md).

Every stand-in the sandbox serves requires its token as `Authorization: Bearer`, refuses a
foreign Host (DNS rebinding) or Origin (a web page), and its JSON methods take only JSON: a
request a browser page could make, or another user's process, is refused and starts nothing;
the real clients with the token work (tests/sandbox). And what listens while a two-replica job
runs there: the tool's servers on loopback only, the replicas' in a network of their own."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import textwrap
import uuid
from pathlib import Path

import pytest

from tests.hostile.test_hostile_listening import LISTEN_AS_TF, LOOPBACK, interfaces_of
from tests.process_support import processes_with_env, tcp_listeners
from vertex_trainer.local import netns

pytestmark = pytest.mark.wire  # a sandbox in this process, its servers on loopback

PROJECT, REGION, BUCKET = "sandbox", "us-central1", "hostile"
VERTEX = "aiplatform.googleapis.com"
# The function under `--function`: records each event it is handed (the guard in front of it
# decides which reach it).
RECORDER = textwrap.dedent("""\
    import json, pathlib

    def on_object_finalized(event):
        with open(pathlib.Path(__file__).resolve().parent / "events.jsonl", "a") as f:
            f.write(json.dumps({"id": event["id"], "subject": event["subject"]}) + "\\n")
    """)


@pytest.fixture(scope="module")
def box(tmp_path_factory):
    """One sandbox for the module (its function records events), and the marker its processes
    carry; stopped after, with none of them left."""
    from vertex_trainer.automation.storage_events import TriggerConfig
    from vertex_trainer.sandbox import Sandbox

    function = tmp_path_factory.mktemp("function")
    (function / "main.py").write_text(RECORDER)
    (function / "trigger.json").write_text(TriggerConfig(bucket=BUCKET).to_json())
    mark = f"VT_TEST_{uuid.uuid4().hex}"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VERTEX_TRAINER_", "AIP_"))}
    env[mark] = "1"
    with Sandbox(env, buckets=[BUCKET], project=PROJECT, region=REGION, function=str(function)) as sandbox:
        sandbox.test_marker = mark
        yield sandbox
    assert processes_with_env(mark) == []


def _send(url: str, method: str = "GET", body: bytes | None = None, headers: dict | None = None):
    """One request exactly as given (Host included, when given): (status, JSON answer or None)."""
    import http.client
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
    try:
        conn.request(method, parts.path + (f"?{parts.query}" if parts.query else ""), body, headers or {})
        resp = conn.getresponse()
        data = resp.read()
    finally:
        conn.close()
    try:
        return resp.status, json.loads(data) if data else None
    except ValueError:
        return resp.status, None


def _job_body(tmp_path) -> bytes:
    """A CustomJob whose one replica would leave a file behind: what a page would post."""
    flag = tmp_path / "ran"
    script = f"open({str(flag)!r}, 'w').write('ran')"
    return json.dumps(
        {
            "displayName": "posted",
            "jobSpec": {
                "workerPoolSpecs": [
                    {
                        "machineSpec": {"machineType": "n1-standard-4"},
                        "replicaCount": "1",
                        "containerSpec": {"imageUri": "x/y:z", "command": ["python", "-c", script]},
                    }
                ]
            },
        }
    ).encode()


def _hostile_requests(token: str) -> dict[str, dict]:
    """The ways in that must stay shut, each a full set of headers (JSON body unless said)."""
    json_type = {"Content-Type": "application/json"}
    good = {**json_type, "Authorization": f"Bearer {token}"}
    return {
        "no token": dict(json_type),
        "a wrong token": {**json_type, "Authorization": "Bearer guessed"},
        "the token as Basic": {**json_type, "Authorization": f"Basic {token}"},
        "text/plain (a page's simple request)": {**good, "Content-Type": "text/plain"},
        "a form (a page's simple request)": {**good, "Content-Type": "application/x-www-form-urlencoded"},
        "Origin: https://evil.example": {**good, "Origin": "https://evil.example"},
        "Origin: null (a sandboxed page)": {**good, "Origin": "null"},
        "Host: evil.example (DNS rebinding)": {**good, "Host": "evil.example"},
        "Host: evil.example:PORT (DNS rebinding)": {**good, "Host": "evil.example:8765"},
    }


def test_a_job_posted_without_the_token_or_as_a_page_would_is_refused_and_runs_nothing(box, tmp_path):
    url = f"{box.vertex.url}/v1/projects/{PROJECT}/locations/{REGION}/customJobs"
    answers = {
        how: _send(url, "POST", _job_body(tmp_path), headers)
        for how, headers in _hostile_requests(box.token).items()
    }
    for how, (status, body) in answers.items():
        assert status in (400, 401, 403), (how, status, body)
        assert set(body["error"]) == {"code", "message", "status"}, (how, body)  # Google's shape
        assert body["error"]["status"] in ("INVALID_ARGUMENT", "UNAUTHENTICATED", "PERMISSION_DENIED")
    assert answers["no token"][0] == answers["a wrong token"][0] == 401
    assert "VERTEX_TRAINER_EMULATOR_TOKEN" in answers["no token"][1]["error"]["message"]
    assert answers["text/plain (a page's simple request)"][0] == 400
    assert (
        answers["Origin: https://evil.example"][0] == answers["Host: evil.example (DNS rebinding)"][0] == 403
    )
    # Nothing was created, queued or started.
    assert box.vertex.jobs == {} and box.vertex.calls("create") == []
    assert not (tmp_path / "ran").exists()
    assert [p for p in processes_with_env(box.test_marker) if "CLUSTER_SPEC" in _environ(p)] == []
    # The token, as Google's clients send a credential, is what lets a client in.
    status, listed = _send(
        url, headers={"Authorization": f"Bearer {box.token}", "Origin": "http://127.0.0.1:8888"}
    )
    assert status == 200 and listed.get("customJobs", []) == []


def _environ(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/environ").read_bytes().decode("utf-8", "replace")
    except OSError:
        return ""


def test_every_stand_in_requires_the_token(box, tmp_path):
    """Each stand-in the sandbox serves, asked without the token and with a wrong one: 401; with
    it: answered. The registry asks for it through its own token exchange."""
    reads = {
        "Vertex AI": f"{box.vertex.url}/v1/projects/{PROJECT}/locations/{REGION}/customJobs",
        "Cloud Storage": f"{box.gcs.endpoint}/storage/v1/b/{BUCKET}/o",
        "Cloud Build": f"{box.cloudbuild.url}/v1/projects/{PROJECT}/locations/{REGION}/builds/1",
        "Cloud Logging": f"{box.logging.url}/v2/entries:list",
        "Cloud Quotas": f"{box.quotas.url}/v1/projects/{PROJECT}/locations/global/services/{VERTEX}/"
        "quotaInfos",
        "Cloud Billing": f"{box.billing.url}/v1/services",
        "Cloud Monitoring": f"{box.monitoring.url}/v3/projects/{PROJECT}/timeSeries",
        "Service Usage": f"{box.serviceusage.url}/v1/projects/{PROJECT}/services/{VERTEX}",
        "IAM": f"{box.iam.url}/v1/projects/{PROJECT}:testIamPermissions",
        "the registry": f"{box.registry.url}/v2/p/r/trainer/manifests/v1",
    }
    for name, url in reads.items():
        for headers in ({}, {"Authorization": "Bearer guessed"}):
            status, body = _send(url, headers=headers)
            assert status == 401, (name, headers, status, body)
        status, _ = _send(url, headers={"Authorization": f"Bearer {box.token}"})
        assert status != 401, (name, status)
    # Writing an object (a marker could start a run through the function): refused the same way.
    upload = f"{box.gcs.endpoint}/upload/storage/v1/b/{BUCKET}/o?uploadType=media&name=incoming/_SUCCESS"
    status, _ = _send(upload, "POST", b"x", {"Content-Type": "text/plain"})
    assert status == 401
    status, _ = _send(
        upload,
        "POST",
        b"x",
        {"Content-Type": "text/plain", "Authorization": f"Bearer {box.token}", "Host": "evil.example"},
    )
    assert status == 403
    assert box.gcs.list_objects(BUCKET) == []


def test_the_served_function_takes_events_only_from_the_sandbox(box):
    """`--function`: functions-framework listens on loopback; an event without the sandbox's token
    (what a page or another process could post) is refused before the function runs."""
    event = {
        "ce-specversion": "1.0",
        "ce-id": "1",
        "ce-type": "google.cloud.storage.object.v1.finalized",
        "ce-source": f"//storage.googleapis.com/projects/_/buckets/{BUCKET}",
        "ce-subject": "objects/incoming/_SUCCESS",
        "Content-Type": "application/json",
    }
    body = json.dumps({"bucket": BUCKET, "name": "incoming/_SUCCESS", "generation": "1"}).encode()
    good = {**event, "Authorization": f"Bearer {box.token}"}
    for headers in (
        event,
        {**event, "Authorization": "Bearer guessed"},
        {**good, "Host": "evil.example"},
        {**good, "Origin": "https://evil.example"},
        {**good, "Content-Type": "text/plain"},
    ):
        status, _ = _send(box.function.url, "POST", body, headers)
        assert status in (400, 401, 403), (headers, status)
    recorded = Path(box.function.directory, "events.jsonl")
    assert not recorded.exists()
    status, _ = _send(box.function.url, "POST", body, good)
    assert status == 200 and len(recorded.read_text().splitlines()) == 1


def test_the_metadata_server_gives_the_token_only_to_this_users_processes(box):
    """Pipeline tasks get the token from the sandbox's metadata server, as GCE's: only with
    Metadata-Flavor: Google, a loopback Host, and from a process of the sandbox's user."""
    host = box.gateway.env()["GCE_METADATA_HOST"]
    url = f"http://{host}/computeMetadata/v1/instance/service-accounts/default/token"
    assert _send(url)[0] == 403
    assert _send(url, headers={"Metadata-Flavor": "Google", "Host": "evil.example"})[0] == 403
    status, answer = _send(url, headers={"Metadata-Flavor": "Google"})
    assert status == 200 and answer["access_token"] == box.token
    if os.geteuid() != 0:
        pytest.skip("another user's process needs root to start here")
    import subprocess

    # nobody's process (bash's /dev/tcp: this user's Python may not be nobody's to run).
    address, port = host.rsplit(":", 1)
    request = (
        "GET /computeMetadata/v1/instance/service-accounts/default/token HTTP/1.0\\r\\n"
        f"Host: {host}\\r\\nMetadata-Flavor: Google\\r\\n\\r\\n"
    )
    other = subprocess.run(
        ["/bin/bash", "-c", f'exec 3<>/dev/tcp/{address}/{port}; printf "{request}" >&3; cat <&3'],
        capture_output=True,
        text=True,
        timeout=60,
        preexec_fn=lambda: (os.setgid(65534), os.setuid(65534)),
        check=False,
    )
    assert other.stdout.startswith("HTTP/1.1 403"), (other.stdout, other.stderr)
    assert "Not a process of the sandbox's user" in other.stdout
    assert box.token not in other.stdout


# -- what listens during a sandbox run of a two-replica job ------------------------------------


def _family(pid: int) -> list[int]:
    """`pid` and every process below it."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                ppid = int(Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry))
    found, todo = [], [pid]
    while todo:
        p = todo.pop()
        found.append(p)
        todo += children.get(p, [])
    return found


def _socket_inodes(pids: list[int]) -> set[str]:
    inodes = set()
    for pid in pids:
        try:
            for fd in os.listdir(f"/proc/{pid}/fd"):
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
                if target.startswith("socket:["):
                    inodes.add(target[8:-1])
        except OSError:
            continue
    return inodes


def _listeners_by_inode(table_dir: str = "/proc/self/net") -> dict[str, tuple[str, int]]:
    return {inode: (address, port) for address, port, inode in tcp_listeners(table_dir)}


def test_during_a_two_replica_sandbox_job_every_server_of_the_tool_listens_on_loopback_only(box, tmp_path):
    """Every socket this process and the processes it started (the stand-ins, the gRPC face, the
    served function, the job's replicas) listens on: loopback, as this machine's network sees
    them; the replicas' servers, which bind every interface as TensorFlow's do, are in a
    network of their own with only lo (or the sandbox said at start that they cannot be)."""
    from vertex_trainer.settings import Settings
    from vertex_trainer.vertex.custom_jobs import JobsClient

    go = tmp_path / "go"
    script = LISTEN_AS_TF + textwrap.dedent(f"""
        print("listening", port, flush=True)
        while not os.path.exists({str(go)!r}):
            time.sleep(0.01)
    """)
    pool = {
        "machineSpec": {"machineType": "n1-standard-4"},
        "replicaCount": "1",
        "containerSpec": {"imageUri": "x/y:z", "command": ["python", "-c", script]},
    }
    body = {
        "displayName": "two-replicas",
        "labels": {"vertex-trainer-key": uuid.uuid4().hex[:12]},
        "jobSpec": {
            "workerPoolSpecs": [pool, pool],
            "baseOutputDirectory": {"outputUriPrefix": f"gs://{BUCKET}/runs/two"},
        },
    }
    settings = dataclasses.replace(Settings.from_environ(box.env()), project=PROJECT, region=REGION)
    jobs = JobsClient(PROJECT, REGION, settings=settings)
    job = jobs.create_once(body)
    try:
        both = box.logging.wait_until(
            lambda f: (
                sum("listening" in str(e.get("jsonPayload", {}).get("message")) for e in f.entries) == 2
            ),
            timeout=120,
        )
        assert both, [e.get("jsonPayload") for e in box.logging.entries][-10:]
        family = _family(os.getpid())
        ours = _socket_inodes(family)
        listening_here = {i: a for i, a in _listeners_by_inode().items() if i in ours}
        replicas = [p for p in family if "CLUSTER_SPEC=" in _environ(p)]
        nets = {p: os.readlink(f"/proc/{p}/ns/net") for p in replicas}
        theirs = {p: _listeners_by_inode(f"/proc/{p}/net") for p in replicas}
        interfaces = {p: interfaces_of(p) for p in replicas}
    finally:
        go.write_text("go")
    from vertex_trainer.vertex.custom_jobs import Job

    Job(job, jobs).wait(timeout=120)
    # This machine's network: the tool's servers are there, every one on loopback.
    ports = {port for _, port in listening_here.values()}
    for url in (box.vertex.url, box.gcs.endpoint, box.gcs.proxy_url, box.logging.url, box.function.url):
        assert int(url.rstrip("/").rsplit(":", 1)[1]) in ports, (url, listening_here)
    assert {address for address, _ in listening_here.values()} <= LOOPBACK, listening_here
    assert len(replicas) == 2, replicas
    if netns.unavailable() is None:
        # The replicas' wildcard servers: in one network of their own, whose only interface is lo.
        assert len(set(nets.values())) == 1 and os.readlink("/proc/self/ns/net") not in nets.values()
        assert all(interfaces[p] == ["lo"] for p in replicas), interfaces
        assert all(any(a == "::" or a == "0.0.0.0" for a, _ in t.values()) for t in theirs.values()), theirs


@pytest.mark.gcloud
@pytest.mark.wire
@pytest.mark.skipif(shutil.which("gcloud") is None, reason="gcloud is not installed")
def test_gcloud_drives_a_stand_in_with_the_token_as_its_access_token_file(tmp_path):
    """docs/sandbox.md: gcloud sends the sandbox's token when CLOUDSDK_AUTH_ACCESS_TOKEN_FILE
    names a file holding it; without it, it is refused (401, gcloud exits non-zero)."""
    import subprocess

    from vertex_trainer.emulators.vertex import FakeVertex

    token = "t-" + uuid.uuid4().hex
    with FakeVertex(validate=False).require(token) as fake:
        config = tmp_path / "gcloud"
        (config / "configurations").mkdir(parents=True)
        (config / "active_config").write_text("default")
        (config / "configurations" / "config_default").write_text(
            f"[api_endpoint_overrides]\naiplatform = {fake.url}/\n\n[core]\nproject = p\n"
            "disable_usage_reporting = true\n\n[component_manager]\ndisable_update_check = true\n"
        )
        (tmp_path / "token").write_text(token)
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("CLOUDSDK_", "GOOGLE_", "VERTEX_TRAINER_"))
        }
        env["CLOUDSDK_CONFIG"] = str(config)
        argv = ["gcloud", "ai", "custom-jobs", "list", "--region=us-central1", "--format=json"]
        listed = subprocess.run(
            argv,
            env={**env, "CLOUDSDK_AUTH_ACCESS_TOKEN_FILE": str(tmp_path / "token")},
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert listed.returncode == 0, listed.stderr
        assert json.loads(listed.stdout) == []
        sent = {k.lower(): v for k, v in fake.calls("list")[-1].headers.items()}
        assert sent["authorization"] == f"Bearer {token}"
        without = subprocess.run(
            [*argv, "--access-token-file", str(tmp_path / "nothing")],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert without.returncode != 0
        assert len(fake.calls("list")) == 1  # the refused one never reached the service
