"""Issue 29, submit: ``share --push`` into a folder, a git checkout (for real) and a Hugging Face
dataset through the real huggingface_hub client against a stand-in of the Hub's commit API on
127.0.0.1 (the Hub cannot be reached here)."""

from __future__ import annotations

import base64
import json
import subprocess
import threading
from collections.abc import Iterator
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlparse

import pytest
from conftest_report import assert_one_line_error
from conftest_share import EPYC_MODEL, environment, result, run

from accelbench.hub.push import submission
from accelbench.sharing.sources import load_peers
from accelbench.store.jsonfile import save_record


def _runs(tmp_path: Path, count: int = 2) -> list[str]:
    paths = []
    for index in range(count):
        record = run(f"push{index:04d}", [result(EPYC_MODEL, 900.0 + index, seed=index, device="cpu")],
                     environment("cpu", EPYC_MODEL, hostname="me"))
        paths.append(str(save_record(record, tmp_path / f"run{index}.json")))
    return paths


def test_the_path_keeps_folders_small_and_names_the_bundle_by_its_hash() -> None:
    """Issue 29 (submit): one file per submission, bundles/<yyyy>/<mm>/<2 hex of the machine id>/
    <16 hex of the bundle's sha256>.jsonl."""
    text = '{"bundle":2}\n'
    sub = submission(text, "ab34567890abcdef", datetime(2026, 3, 4, tzinfo=timezone.utc))
    assert sub.path == f"bundles/2026/03/ab/{sub.digest[:16]}.jsonl"


def test_push_into_a_folder_and_a_git_checkout(tmp_path: Path, inline_cli) -> None:
    """Issue 29 (submit): --push DIR writes the file under its path (the hub's compare reads it);
    a git work tree gets it added and committed (not pushed); the same bundle again adds nothing."""
    runs = _runs(tmp_path)
    hub = tmp_path / "hub"
    pushed = inline_cli("share", *runs, "--push", str(hub), "--yes")
    assert pushed.returncode == 0, pushed.stderr
    (file,) = hub.rglob("*.jsonl")
    assert file.relative_to(hub).parts[0] == "bundles" and len(file.relative_to(hub).parts) == 5
    shown = " ".join(pushed.stdout.split())
    assert "2 line(s)" in shown and file.relative_to(hub).as_posix() in shown
    assert f"2 result(s) written to {file}" in pushed.stderr
    assert len(load_peers([str(hub)], print).peers) == 2
    again = inline_cli("share", *runs, "--push", str(hub), "--yes")
    assert again.returncode == 0 and "already holds this bundle" in again.stderr
    # A git checkout: committed, with only that file.
    repo = tmp_path / "team-hub"
    repo.mkdir()
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.org", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@example.org"}
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "unrelated.txt").write_text("not mine to commit\n")
    with pytest.MonkeyPatch.context() as patch:
        for name, value in env.items():
            patch.setenv(name, value)
        committed = inline_cli("share", *runs, "--push", str(repo / "results"), "--yes")
    assert committed.returncode == 0, committed.stderr
    assert "committed (not pushed)" in committed.stderr
    log = subprocess.run(["git", "-C", str(repo), "log", "--name-only", "--format=%s"], capture_output=True,
                         text=True, check=True).stdout.split("\n")
    assert log[0].startswith("accelbench: 2 result(s) from machine ")
    assert [name for name in log[1:] if name.strip()] == ["results/" + file.relative_to(hub).as_posix()]
    status = subprocess.run(["git", "-C", str(repo), "status", "--porcelain"], capture_output=True, text=True,
                            check=True).stdout
    assert status.strip() == "?? unrelated.txt"


def test_push_without_a_terminal_or_yes_is_refused(tmp_path: Path, cli) -> None:
    """Issue 29 (submit): it asks before sending; no terminal and no --yes: one line, exit 2,
    nothing written."""
    runs = _runs(tmp_path, 1)
    refused = cli("share", *runs, "--push", str(tmp_path / "hub"))
    assert_one_line_error(refused, "--yes")
    assert not (tmp_path / "hub").exists()
    bad = cli("share", *runs, "--push", "hf://datasets/only-org", "--yes")
    assert_one_line_error(bad, "hf://datasets/ORG/NAME")


def test_declining_at_the_prompt_sends_nothing_and_is_not_an_error(tmp_path: Path,
                                                                    accelbench_home: Path) -> None:
    """Issue 36: answering "n" to "Send N result(s) ...? [y/N]" is the user's choice, not a
    failure: "nothing sent", exit 0 (it was 1), nothing in the hub. A real process on a
    pseudo-terminal, as the prompt needs one."""
    import os
    import sys

    runs = _runs(tmp_path, 1)
    hub = tmp_path / "hub"
    master, slave = os.openpty()
    process = subprocess.Popen([sys.executable, "-m", "accelbench", "share", *runs, "--push", str(hub)],
                               stdin=slave, stdout=slave, stderr=slave, close_fds=True,
                               env={**os.environ, "ACCELBENCH_HOME": str(accelbench_home),
                                    "COLUMNS": "100"})
    os.close(slave)
    shown = b""
    while b"[y/N]" not in shown:
        chunk = os.read(master, 65536)
        assert chunk, shown
        shown += chunk
    os.write(master, b"n\n")
    try:
        while chunk := os.read(master, 65536):
            shown += chunk
    except OSError:  # the process has exited
        pass
    os.close(master)
    assert process.wait(timeout=60) == 0, shown
    assert b"nothing sent" in shown and b"Traceback" not in shown
    assert not hub.exists() or not any(path.is_file() for path in hub.rglob("*"))


# --- a stand-in for the Hub's commit API -----------------------------------------------------------
class _Hub:
    """What the stand-in received; only ``acme/results`` exists."""

    def __init__(self) -> None:
        self.preuploads: list[dict[str, Any]] = []
        self.commits: list[dict[str, Any]] = []
        #: Revision ("main", "refs/pr/N") -> the paths it holds; open pull requests' numbers.
        self.files: dict[str, set[str]] = {"main": set()}
        self.open_requests: list[int] = []


def _handler(hub: _Hub, base: list[str]) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the base's name
            pass

        def _reply(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)

        def do_HEAD(self) -> None:  # noqa: N802 - the base's name: a file's metadata (file_exists)
            prefix = "/datasets/acme/results/resolve/"
            path = unquote(urlparse(self.path).path)
            revision, _, name = path[len(prefix):].partition("/") if path.startswith(prefix) else ("", "", "")
            if revision == "refs" and name.startswith("pr/"):
                number, _, name = name[3:].partition("/")
                revision = f"refs/pr/{number}"
            found = name in hub.files.get(revision, set())
            self.send_response(200 if found else 404)
            headers = ({"X-Repo-Commit": "c" * 40, "ETag": '"e"', "Content-Length": "0"} if found
                       else {"X-Error-Code": "EntryNotFound", "Content-Length": "0"})
            for header, value in headers.items():
                self.send_header(header, value)
            self.end_headers()

        def do_GET(self) -> None:  # noqa: N802 - the base's name
            if urlparse(self.path).path == "/api/datasets/acme/results/discussions":
                requests = [{"title": "accelbench", "num": n, "author": {"name": "someone"},
                             "createdAt": "2026-01-01T00:00:00.000Z", "status": "open",
                             "repo": {"name": "acme/results", "type": "dataset"}, "isPullRequest": True}
                            for n in hub.open_requests]
                return self._reply(200, {"count": len(requests), "start": 0, "discussions": requests})
            if urlparse(self.path).path == "/api/datasets/acme/results":
                if self.headers.get("Authorization") != "Bearer hf_test_token":
                    return self._reply(401, {"error": "Invalid credentials"})
                return self._reply(200, {"id": "acme/results", "sha": "b" * 40, "private": False})
            return self._reply(404, {"error": "Repository not found"}, {"X-Error-Code": "RepoNotFound"})

        def do_POST(self) -> None:  # noqa: N802 - the base's name
            url = urlparse(self.path)
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            parts = url.path.split("/")  # /api/datasets/ORG/NAME/(paths-info|preupload|commit)/REVISION
            if parts[:3] != ["", "api", "datasets"] or len(parts) != 7:
                return self._reply(404, {"error": "not found"})
            repo, action = f"{parts[3]}/{parts[4]}", parts[5]
            if repo != "acme/results":
                return self._reply(404, {"error": "Repository not found"}, {"X-Error-Code": "RepoNotFound"})
            if self.headers.get("Authorization") != "Bearer hf_test_token":
                return self._reply(401, {"error": "Invalid credentials"})
            query = {k: v[0] for k, v in parse_qs(url.query).items()}
            if action == "paths-info":  # which of the paths asked (a form) the revision holds
                held = hub.files.get(unquote(parts[6]), set())
                asked = parse_qs(body.decode()).get("paths", [])
                return self._reply(200, [{"type": "file", "path": path, "size": 0, "oid": "e" * 40}
                                         for path in asked if path in held])
            if action == "preupload":
                payload = json.loads(body)
                hub.preuploads.append({"payload": payload, "query": query})
                return self._reply(200, {"files": [{"path": f["path"], "uploadMode": "regular",
                                                    "shouldIgnore": False} for f in payload["files"]]})
            if action == "commit":
                items = [json.loads(line) for line in body.decode().splitlines() if line.strip()]
                hub.commits.append({"items": items, "query": query, "revision": parts[6],
                                    "content_type": self.headers.get("Content-Type")})
                number = 7 + len(hub.open_requests)
                hub.open_requests.append(number)
                hub.files[f"refs/pr/{number}"] = {i["value"]["path"] for i in items if i["key"] == "file"}
                where = f"{base[0]}/datasets/acme/results"
                return self._reply(200, {"commitUrl": f"{where}/commit/{'c' * 40}", "commitOid": "c" * 40,
                                         "pullRequestUrl": f"{where}/discussions/{number}"})
            return self._reply(404, {"error": "not found"})

    return Handler


@pytest.fixture
def hub_server() -> Iterator[tuple[str, _Hub]]:
    hub, base = _Hub(), [""]
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(hub, base))
    base[0] = f"http://127.0.0.1:{httpd.server_address[1]}"
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield base[0], hub
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_push_to_a_hugging_face_dataset_opens_a_pull_request(tmp_path: Path, cli, hub_server,
                                                             accelbench_home: Path) -> None:
    """Issue 29 (submit): the real huggingface_hub client sends the bundle, under its path, as a
    commit with create_pr; the stand-in received exactly the bundle share --dry-run prints."""
    pytest.importorskip("huggingface_hub")
    address, hub = hub_server
    runs = _runs(tmp_path)
    env = {"HF_ENDPOINT": address, "HF_TOKEN": "hf_test_token", "HF_HOME": str(tmp_path / "hf-home"),
           "HF_HUB_DISABLE_TELEMETRY": "1"}
    pushed = cli("share", *runs, "--push", "hf://datasets/acme/results", "--yes", env=env)
    assert pushed.returncode == 0, pushed.stderr
    assert "pull request" in pushed.stderr and "/datasets/acme/results/discussions/7" in pushed.stderr
    (preupload,) = hub.preuploads
    assert preupload["query"] == {"create_pr": "1"}
    (commit,) = hub.commits
    assert commit["query"] == {"create_pr": "1"} and commit["revision"] == "main"
    assert commit["content_type"] == "application/x-ndjson"
    header, file = commit["items"]
    assert header["key"] == "header" and header["value"]["summary"].startswith("accelbench: 2 result(s)")
    assert file["key"] == "file" and file["value"]["encoding"] == "base64"
    sent = base64.b64decode(file["value"]["content"]).decode()
    path = file["value"]["path"]
    assert path == preupload["payload"]["files"][0]["path"] and path.startswith("bundles/")
    assert path in " ".join(pushed.stdout.split())
    dry = cli("share", *runs, "--dry-run", "--json", env=env)
    assert [json.loads(line)["hash"] for line in sent.splitlines()] == \
        [json.loads(line)["hash"] for line in dry.stdout.splitlines()]
    assert submission(sent, json.loads(sent.splitlines()[0])["machine_id"]).path.rsplit("/", 1)[1] == \
        path.rsplit("/", 1)[1]
    assert not (accelbench_home / "outbox").exists()


def test_hub_failures_are_one_line_and_the_bundle_is_kept(tmp_path: Path, inline_cli, hub_server,
                                                          accelbench_home: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 29 (submit): no login, no such dataset, a refused login (HTTP 401) and no network are
    one line, exit 2, and the bundle is kept in the outbox."""
    address, hub = hub_server
    runs = _runs(tmp_path, 1)
    for name, value in {"HF_ENDPOINT": address, "HF_HOME": str(tmp_path / "hf-home"),
                        "HF_HUB_DISABLE_TELEMETRY": "1", "HF_TOKEN": ""}.items():
        monkeypatch.setenv(name, value)
    target = ("share", *runs, "--push", "hf://datasets/acme/results", "--yes")
    assert_one_line_error(inline_cli(*target), "no Hugging Face login", "kept at")
    monkeypatch.setenv("HF_TOKEN", "hf_test_token")
    assert_one_line_error(inline_cli("share", *runs, "--push", "hf://datasets/acme/nothing", "--yes"),
                          "no dataset acme/nothing", "kept at")
    monkeypatch.setenv("HF_TOKEN", "hf_wrong")
    assert_one_line_error(inline_cli(*target), "HTTP 401")
    monkeypatch.setenv("HF_TOKEN", "hf_test_token")
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")
    assert_one_line_error(inline_cli(*target), "cannot reach the Hub")
    kept = list((accelbench_home / "outbox").glob("*.jsonl"))
    assert len(kept) == 1 and len(kept[0].read_text().splitlines()) == 1
    assert hub.commits == []
