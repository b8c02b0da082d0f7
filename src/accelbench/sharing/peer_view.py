"""A bundle line as a peer (compare/peers.py's PeerResult): key, device model, headline rate, and
the recorded settings that can explain a difference, as short labelled values.

The same function turns the user's own cases into peers (through the line ``share`` would write),
so the user's result and the shared ones are read by one piece of code and cannot disagree.

The key is read field by field from ``results/key.KEY_FIELDS``; the rate is the figure
``results/catalogue.headline`` names for the key (samples_per_s, a generation case's
decode_tokens_per_s_total, or a --protocol case's own: llama-bench's pp or tg ...).
A line whose workload or device model was redacted is never a peer
(nothing says what it was: two redacted names are not the same work or the same device). A line
that cannot be right on its own machine (``plausible.implausible``: beyond its device's limits,
self-contradictory, tokens that do not match) is a peer flagged implausible: kept apart, never
in a band.

A line of an MLPerf Client run also carries its run's figures across cases (``overall_of``: the
stored overall geometric means of its group), which a site shows beside the categories' rows.
"""

from __future__ import annotations

import sys
from typing import Any

from accelbench.compare.decode_diagnosis import DecodeDiagnosis
from accelbench.compare.peers import PeerOverall, PeerResult, model_key
from accelbench.devices.power import BUSY_LOAD  # a machine this loaded per CPU was busy
from accelbench.results.catalogue import headline
from accelbench.results.key import KEY_DEFAULTS, KEY_FIELDS
from accelbench.sharing.bundle import MAX_STRING, BadLine, number, section, text
from accelbench.sharing.plausible import implausible
from accelbench.sharing.privacy import is_redacted

#: Why a line is no peer at all (a skipped line's reason, counted by the loader).
REDACTED_NAME = "redacted name"


def _on_off(value: Any) -> str | None:
    return None if not isinstance(value, bool) else ("on" if value else "off")


def _yes_no(value: Any) -> str | None:
    return None if not isinstance(value, bool) else ("yes" if value else "no")


def _power_text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, dict):
        return ", ".join(f"{k}={v}" for k, v in sorted(value.items())) or None
    if isinstance(value, list):
        return ", ".join(f"{v:g} W" if isinstance(v, int | float) else str(v) for v in value) or None
    return str(value)


def settings_of(line: dict[str, Any], kind: str) -> dict[str, str]:
    """Label -> value for every recorded setting that can move a figure (unstated ones left out)."""
    settings, validity = line.get("settings") or {}, line.get("validity") or {}
    software, host = line.get("software") or {}, line.get("host") or {}
    flags = settings.get("backend_flags") or {}
    power = settings.get("power") or {}
    found: dict[str, str | None] = {
        "float32 matmul precision": flags.get("float32_matmul_precision"),
        "threads": str(settings["threads"]) if isinstance(settings.get("threads"), int)
        and settings["threads"] > 0 else None,
        "loader workers": str(settings["loader_workers"]) if isinstance(settings.get("loader_workers"), int)
        else None,
        "torch": software.get("torch"), "OS": host.get("os"),
        "power source": _power_text(power.get("power_source")),
        "CPU governor": _power_text(power.get("cpu_governor")),
        "energy preference": _power_text(power.get("energy_performance_preference")),
        "macOS power mode": _power_text(power.get("macos_power_mode")),
        "noisy": _yes_no(validity.get("noisy")), "drift": _yes_no(validity.get("drift")),
        "selftest": validity.get("selftest"),
    }
    load = power.get("load_per_cpu")
    if isinstance(load, int | float) and not isinstance(load, bool):
        found["machine load"] = "busy" if load >= BUSY_LOAD else "idle"
    if kind == "cuda":
        found.update({"TF32 (matmul)": _on_off(flags.get("cuda_matmul_allow_tf32")),
                      "TF32 (cuDNN)": _on_off(flags.get("cudnn_allow_tf32")),
                      "cuDNN benchmark": _on_off(flags.get("cudnn_benchmark")),
                      "CUDA build": software.get("cuda") or software.get("hip"),
                      "GPU power limit": _power_text(power.get("gpu_power_limit_w"))})
    # Interned: a collection repeats the same few values many thousand times.
    return {sys.intern(label): sys.intern(str(value)[:80]) for label, value in found.items()
            if value is not None and value != ""}


#: (field, default, its exact type): bool is not accepted for an int field, nor an int for a bool.
_KEY_TYPES = tuple((name, KEY_DEFAULTS[name], type(KEY_DEFAULTS[name])) for name in KEY_FIELDS)
_MODE, _NEW, _PROTOCOL = (KEY_FIELDS.index(name) for name in ("mode", "new_tokens", "protocol"))


#: Keys already checked, by their raw values and those values' types (True and 1 are equal and hash
#: alike, so the types are part of what was checked). A collection repeats a few keys many times.
_CHECKED: dict[tuple[tuple[Any, ...], tuple[type, ...]], tuple[Any, ...]] = {}
_CHECKED_MAX = 100_000


def key_of(line: dict[str, Any]) -> tuple[Any, ...]:
    key = section(line, "key")
    raw = tuple(key.get(name) for name in KEY_FIELDS)
    seen = (raw, tuple(map(type, raw)))
    found = _CHECKED.get(seen)
    if found is None:
        found = _check_key(key)
        if len(_CHECKED) < _CHECKED_MAX:
            _CHECKED[seen] = found
    return found


def _check_key(key: dict[str, Any]) -> tuple[Any, ...]:
    values = []
    for name, default, kind in _KEY_TYPES:
        value = key.get(name)
        if value is None:
            value = default
        elif type(value) is not kind:
            raise BadLine(f"key field {name!r} must be a {kind.__name__}")
        elif kind is str:
            if len(value) > MAX_STRING:
                raise BadLine(f"field 'key.{name}' is longer than {MAX_STRING} characters")
            if is_redacted(value):
                raise BadLine(f"key field {name!r} is redacted: never compared", REDACTED_NAME)
            value = sys.intern(value)
        values.append(value)
    return tuple(values)


def peer_of(line: dict[str, Any], settings_for: set[str] | None = None) -> PeerResult | None:
    """The line as a peer; None for a case that did not finish (shared with its status only).

    ``settings_for``: the device models (model_key) whose settings are wanted; other peers only
    count towards their model's figures, and reading settings is most of a line's cost."""
    if line.get("status") != "ok":
        return None
    key = key_of(line)
    device = section(line, "device")
    kind = text(device.get("kind"), "device.kind")
    figures = section(line, "figures")
    rate = headline(key[_MODE], key[_PROTOCOL], key[_NEW]).name  # a --protocol line: its peer's rate
    throughput = number(figures.get(rate), f"figures.{rate}")
    dataset_size = figures.get("dataset_size")
    if throughput <= 0:
        raise BadLine(f"field 'figures.{rate}' must be positive")
    model = text(device.get("model"), "device.model")
    if is_redacted(model):
        raise BadLine("the device model is redacted: never compared", REDACTED_NAME)
    model = sys.intern(model)
    wanted = settings_for is None or model_key(model) in settings_for
    decode = line.get("decode")  # a generation line's bound, host CPU and execution (optional)
    return PeerResult(key, sys.intern(kind), model, throughput,
                      settings_of(line, kind) if wanted else {},
                      machine_id=text(line.get("machine_id"), "machine_id", default=""),
                      content_hash=line["hash"],
                      dataset_size=dataset_size if isinstance(dataset_size, int) and dataset_size > 0 else 0,
                      invalid=implausible(line), date=_date(line.get("date")),
                      decode=DecodeDiagnosis.of_generation(decode, figures) if decode is not None else None,
                      overall=overall_of(line))


def _date(value: Any) -> str:
    return sys.intern(value) if isinstance(value, str) and len(value) == 10 else ""


def overall_of(line: dict[str, Any]) -> PeerOverall | None:
    """The line's figures across cases (its ``overall`` section: the stored figures of its run's
    group, sharing/build.overall_sections), read leniently: a line without the section, with a
    group that is not complete (a category missing: MLPerf Client gives no overall score), or with
    a section this reader cannot read carries none, and stays a peer as before (the section is
    optional; a malformed one costs the line nothing but the section)."""
    carried = line.get("overall")
    if not isinstance(carried, dict):
        return None
    try:
        group = text(carried.get("group_id"), "overall.group_id")
        protocol = text(carried.get("protocol"), "overall.protocol")
        categories = carried.get("categories")
        ttft = number(carried.get("mlperf_ttft_geomean_s"), "overall.mlperf_ttft_geomean_s")
        rate = number(carried.get("mlperf_token_rate_geomean"), "overall.mlperf_token_rate_geomean")
    except BadLine:
        return None
    if (not group or carried.get("missing") or not isinstance(categories, list)
            or not categories or ttft <= 0 or rate <= 0):
        return None
    return PeerOverall(sys.intern(group), sys.intern(protocol), len(categories), ttft, rate)
