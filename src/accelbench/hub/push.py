"""``share --push TARGET``: one bundle submitted to a hub, one file per submission.

A submission's path keeps every folder of the hub small (the Hugging Face Hub advises at most a
few thousand files per folder; a git checkout stays browsable)::

    bundles/<yyyy>/<mm>/<first 2 hex digits of the machine id>/<sha256 of the bundle, 16 digits>.jsonl

(256 folders a month: a million submissions a month is about 4,000 files a folder). The name is
the bundle's own hash, so the same bundle submitted twice is the same file name: a push whose file
is already there, under any month's folder since ``FIRST_MONTH`` (in the folder, on the dataset's
main branch, or in one of its open pull requests: one request per branch for every month's path)
says "already there; nothing sent" and sends nothing, never a second pull request.

Targets: ``hf://datasets/ORG/NAME`` opens a pull request on the dataset through huggingface_hub's
commit API (``HfApi.create_commit(..., create_pr=True)``, with the user's usual login or
``HF_TOKEN``; ``HF_ENDPOINT`` is honoured); any other target is a folder (made if missing): the
file is written, and where the folder is inside a git work tree it is added and committed (never
pushed: the team's own remote and review decide that). Every failure is a ``UsageError`` (one
line, exit code 2); nothing is taken from the history, and a failed Hub push keeps the bundle in
the data folder's outbox (the error names it).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from accelbench.errors import UsageError
from accelbench.files import data_home, write_atomic
from accelbench.results.catalogue import key_headline
from accelbench.results.key import config_label
from accelbench.results.protocol_overall import Overall

_HF_DATASET = re.compile(r"hf://datasets/([A-Za-z0-9][\w.-]*)/([A-Za-z0-9][\w.-]*)/?")
GIT_TIMEOUT_S = 60.0
HTTP_TIMEOUT_S = 30.0
OUTBOX = "outbox"
#: The first month a bundle can have been pushed in (``share --push`` is younger): the months from
#: it to now are where a bundle pushed before may already be.
FIRST_MONTH = (2025, 1)


@dataclass(frozen=True)
class Row:
    """One line of a submission as the confirmation shows it."""

    workload: str
    mode: str
    config: str
    device_model: str
    rate: float | None
    unit: str
    #: The figures across cases the line carries (its ``overall`` section: MLPerf Client's overall,
    #: as its run stored them) and the group they are of; None and "" where it carries none.
    overall: Overall | None = None
    overall_group: str = ""


@dataclass(frozen=True)
class Submission:
    path: str
    text: str
    machine_id: str
    rows: list[Row] = field(default_factory=list)

    @property
    def lines(self) -> int:
        return len(self.rows)

    @property
    def digest(self) -> str:
        return hashlib.sha256(self.text.encode("utf-8")).hexdigest()


def _row(text: str) -> Row:
    line: dict[str, Any] = json.loads(text)
    key, device, figures = line.get("key") or {}, line.get("device") or {}, line.get("figures") or {}
    mode = str(key.get("mode", ""))
    rate = figures.get(key_headline(key).name) if line.get("status") == "ok" else None  # a protocol's own
    section = line.get("overall")
    overall = _overall(section)
    return Row(str(key.get("workload", "")), mode, config_label(key), str(device.get("model", "")),
               rate if isinstance(rate, int | float) else None,
               str(line.get("rate_unit", "")) if rate is not None else str(line.get("status", "")),
               overall, str(section.get("group_id", "")) if overall is not None and isinstance(section, dict)
               else "")


def _overall(section: Any) -> Overall | None:
    """A line's ``overall`` section as the record stored it (sharing/build.overall_sections); None
    where there is none or it cannot be read."""
    if not isinstance(section, dict):
        return None
    try:
        return Overall.from_dict(section)
    except UsageError:
        return None


def submission(text: str, machine_id: str, when: datetime | None = None) -> Submission:
    """The bundle ``text`` (as ``share`` wrote it) as a submission: its path and what it holds."""
    when = when or datetime.now(timezone.utc)
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
    prefix = (machine_id[:2] or "00").lower()
    path = f"bundles/{when:%Y}/{when:%m}/{prefix}/{digest[:16]}.jsonl"
    return Submission(path, text, machine_id, [_row(line) for line in text.splitlines() if line.strip()])


def every_month_path(sub: Submission, when: datetime | None = None) -> list[str]:
    """Every path ``sub`` can have been pushed under, from its own month back to ``FIRST_MONTH``
    (the same folder and file name under each month)."""
    when = when or datetime.now(timezone.utc)
    head, _, tail = sub.path.partition("/")  # bundles / yyyy/mm/<prefix>/<name>
    rest = tail.split("/", 2)[2]
    year, month, paths = when.year, when.month, [sub.path]
    while (year, month) > FIRST_MONTH:
        year, month = (year, month - 1) if month > 1 else (year - 1, 12)
        paths.append(f"{head}/{year:04d}/{month:02d}/{rest}")
    return paths


def is_hf_target(target: str) -> bool:
    return target.startswith("hf://")


def check_target(target: str) -> None:
    """Refuse a target that can never work before anything is built or asked."""
    if is_hf_target(target):
        if _HF_DATASET.fullmatch(target) is None:
            raise UsageError(f"push target {target!r} is not hf://datasets/ORG/NAME (or a folder)")
        return
    folder = Path(target)
    if folder.exists() and not folder.is_dir():
        raise UsageError(f"push target {target} is a file; give a folder, a git checkout or "
                         "hf://datasets/ORG/NAME")


def push(target: str, sub: Submission) -> str:
    """Send ``sub``; the sentence that says where it went."""
    return _push_hf(target, sub) if is_hf_target(target) else _push_folder(Path(target), sub)


# --- a folder or a git checkout --------------------------------------------------------------------
def _git(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", "-C", str(folder), *args], capture_output=True, text=True,
                          timeout=GIT_TIMEOUT_S, check=False)


def _in_git_work_tree(folder: Path) -> bool:
    try:
        done = _git(folder, "rev-parse", "--is-inside-work-tree")
    except (OSError, subprocess.SubprocessError):  # no git on this machine: a plain folder
        return False
    return done.returncode == 0 and done.stdout.strip() == "true"


def _push_folder(folder: Path, sub: Submission) -> str:
    destination = folder / sub.path
    try:
        destination.parent.mkdir(parents=True, exist_ok=True)
        for path in every_month_path(sub):  # pushed this month or an earlier one
            if (folder / path).is_file() and (folder / path).read_text(encoding="utf-8") == sub.text:
                return f"{folder / path} already holds this bundle; nothing to add"
        write_atomic(destination, sub.text)
    except OSError as error:
        raise UsageError(f"cannot write into {folder}: {error.strerror or error}") from None
    if not _in_git_work_tree(folder):
        return f"{sub.lines} result(s) written to {destination}"
    message = f"accelbench: {sub.lines} result(s) from machine {sub.machine_id}"
    relative = str(destination.resolve().relative_to(_top_level(folder)))
    for args in (("add", "--", relative), ("commit", "-q", "-m", message, "--", relative)):
        done = _git(_top_level(folder), *args)
        if done.returncode != 0:
            first = (done.stderr.strip() or done.stdout.strip()).splitlines()
            raise UsageError(f"git {args[0]} in {folder} failed ({first[0] if first else done.returncode}); "
                             f"the bundle is written at {destination}")
    return f"{sub.lines} result(s) written to {destination} and committed (not pushed)"


def _top_level(folder: Path) -> Path:
    return Path(_git(folder, "rev-parse", "--show-toplevel").stdout.strip()).resolve()


# --- a Hugging Face dataset ------------------------------------------------------------------------
def _keep(sub: Submission) -> Path:
    """Keep the bundle a failed Hub push could not send (nothing is lost locally)."""
    kept = data_home() / OUTBOX / Path(sub.path).name
    try:
        kept.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(kept, sub.text)
    except OSError:
        return Path("(not kept: the data folder is not writable)")
    return kept


def _hf_failure(error: Exception, repo: str) -> str:
    from huggingface_hub.utils import HfHubHTTPError, RepositoryNotFoundError

    if isinstance(error, RepositoryNotFoundError):
        return f"no dataset {repo} on the Hub (or this login may not open pull requests on it)"
    if isinstance(error, HfHubHTTPError):
        status = getattr(getattr(error, "response", None), "status_code", None)
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        if status in (401, 403):
            return f"the Hub refused this login (HTTP {status}): {first}"
        return f"HTTP error from the Hub: {first}"
    first = str(error).strip().splitlines()[0] if str(error).strip() else ""
    return f"cannot reach the Hub ({type(error).__name__}{': ' + first if first else ''})"


def _already_there(api: Any, repo: str, paths: list[str]) -> tuple[str, str]:
    """Which of ``paths`` (one bundle under every month's folder) is already on the dataset, and
    where (("", "") where none): its main branch, or an open pull request (one request for the list,
    one paths-info request per branch for all the paths)."""
    def found(revision: str | None) -> str:
        held = {entry.path for entry in
                api.get_paths_info(repo, paths, repo_type="dataset", revision=revision)}
        return next((path for path in paths if path in held), "")

    path = found(None)
    if path:
        return path, "on the main branch"
    for request in api.get_repo_discussions(repo, repo_type="dataset", discussion_type="pull_request",
                                            discussion_status="open"):
        path = found(request.git_reference)
        if path:
            return path, f"in open pull request {request.url}"
    return "", ""


def _push_hf(target: str, sub: Submission) -> str:
    match = _HF_DATASET.fullmatch(target)
    if match is None:
        raise UsageError(f"push target {target!r} is not hf://datasets/ORG/NAME (or a folder)")
    repo = f"{match.group(1)}/{match.group(2)}"
    try:
        from huggingface_hub import CommitOperationAdd, HfApi, get_token
    except ImportError:
        raise UsageError(f"pushing to {target} needs huggingface_hub: "
                         "pip install 'accelbench[hub]'") from None
    token = get_token()
    if not token:
        raise UsageError(f"no Hugging Face login to push to {target}: run `hf auth login` or set "
                         f"HF_TOKEN; the bundle is kept at {_keep(sub)}")
    api = HfApi(endpoint=os.environ.get("HF_ENDPOINT") or None, token=token)
    try:
        # One request without retries first: an unknown dataset or no network is said at once
        # (the commit's own requests retry for about half a minute).
        api.dataset_info(repo, timeout=HTTP_TIMEOUT_S)
        path, there = _already_there(api, repo, every_month_path(sub))
        if there:
            return f"{path} is already {there} of {target}: already there; nothing sent"
        info = api.create_commit(
            repo_id=repo, repo_type="dataset", create_pr=True,
            operations=[CommitOperationAdd(path_in_repo=sub.path,
                                           path_or_fileobj=sub.text.encode("utf-8"))],
            commit_message=f"accelbench: {sub.lines} result(s) from machine {sub.machine_id}",
            commit_description="Submitted with `accelbench share --push`; every line carries its "
                               "content hash.")
    except Exception as error:  # the Hub's errors are many classes; each becomes one line
        raise UsageError(f"cannot push to {target}: {_hf_failure(error, repo)}; the bundle is kept at "
                         f"{_keep(sub)}") from None
    where = info.pr_url or info.commit_url
    return f"{sub.lines} result(s) sent to {target} as {sub.path}: pull request {where}"
