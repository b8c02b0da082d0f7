"""The static results site: plain HTML and CSS pages from shared results (pure: name -> page text).

    index.html                 every workload, mode and precision, with its device models and counts
    bench-<slug>.html          one per workload, mode and precision: per configuration (a section
                               per comparability key), each device model's result and machine
                               count, median, 10th-90th percentile and best, over machines
    device-<slug>.html         one per device model: every work it did, and its recorded settings

Published references are rows of their own, marked and cited. Markup is built only with
``render.html.el``, which escapes every string (a device model from a bundle is text, never markup);
each page carries a Content-Security-Policy that allows no script and nothing from the network.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

from accelbench.compare.peers import ModelGroup, PeerResult, group_peers, model_key, published_peers
from accelbench.reference.published import PUBLISHED_LABEL
from accelbench.render.format import format_rate
from accelbench.render.html import Markup, el
from accelbench.results import rate_unit
from accelbench.results.key import KEY_FIELDS, config_label

STYLE = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2em auto;max-width:1100px;
padding:0 1em;color:#222}
h1{margin-bottom:.2em}h2{border-bottom:2px solid #ddd;padding-bottom:.2em;margin-top:1.6em;font-size:1.15em}
table{border-collapse:collapse;margin:.8em 0;font-size:.9em}
th,td{border:1px solid #ccc;padding:.3em .6em;text-align:left;vertical-align:top}
caption{text-align:left;font-weight:600;padding:.3em 0}
td.n{text-align:right;font-variant-numeric:tabular-nums}th{background:#f3f3f3}
tr.published td{font-style:italic;color:#666;background:#fafafa}
.note{color:#555;font-size:.9em}nav{margin:.5em 0 1em}a{color:#0645ad}
"""
CSP = "default-src 'none'; style-src 'unsafe-inline'"
KeyTuple = tuple[Any, ...]


def slug(text: str) -> str:
    """A file-name-safe, collision-free name: readable part plus a short hash of the whole."""
    readable = re.sub(r"[^a-z0-9]+", "-", text.casefold()).strip("-")[:40] or "x"
    return f"{readable}-{hashlib.sha256(text.encode('utf-8')).hexdigest()[:8]}"


def _page(title: str, *body: Any) -> str:
    head = el("head", el("meta", charset="utf-8"),
              el("meta", http_equiv="Content-Security-Policy", content=CSP),
              el("meta", name="viewport", content="width=device-width, initial-scale=1"),
              el("title", title), el("style", Markup(STYLE)))
    nav = el("nav", el("a", "all results", href="index.html"))
    return "<!doctype html>\n" + el("html", head, el("body", nav, el("h1", title), *body), lang="en") + "\n"


def _key(key: KeyTuple) -> dict[str, Any]:
    return dict(zip(KEY_FIELDS, key, strict=True))


def _bench_name(key: KeyTuple) -> tuple[str, str, str]:
    fields = _key(key)
    return str(fields["workload"]), str(fields["mode"]), str(fields["precision"])


def _bench_file(name: tuple[str, str, str]) -> str:
    return f"bench-{slug(' '.join(name))}.html"


def _device_file(model: str) -> str:
    return f"device-{slug(model_key(model))}.html"


def _number(text: str) -> Markup:
    return el("td", text, class_="n")


def _group_row(group: ModelGroup, link: bool = True, source: bool = True) -> Markup:
    name: Any = group.device_model
    if link and not group.published:
        name = el("a", group.device_model, href=_device_file(group.device_model))
    if group.published:
        name = el("span", f"{group.device_model} (published)")
    count = str(group.count) if group.published else f"{group.count} ({group.machines} machines)"
    return el("tr", el("td", name), _number(count), _number(format_rate(group.median)),
              _number(f"{format_rate(group.low)}–{format_rate(group.high)}"),
              _number(format_rate(group.best)),
              el("td", group.published) if source else None, class_="published" if group.published else None)


GROUP_HEADERS = ("device model", "results", "median", "p10–p90", "best", "source")


def _groups_table(groups: Sequence[ModelGroup], caption: str, link: bool = True) -> Markup:
    """The source column only where a published figure is in the table."""
    source = any(g.published for g in groups)
    headers = GROUP_HEADERS if source else GROUP_HEADERS[:-1]
    return el("table", el("caption", caption),
              el("thead", el("tr", *(el("th", h) for h in headers))),
              el("tbody", *(_group_row(g, link, source) for g in groups)))


def _heading(key: KeyTuple, page_keys: Sequence[KeyTuple]) -> str:
    """The configuration's words; where two configurations of one page read the same, the key
    fields in which they differ are added (every KEY_FIELDS field keeps its own section)."""
    label = config_label(_key(key))
    twins = [other for other in page_keys if other != key and config_label(_key(other)) == label]
    differing = [index for index, name in enumerate(KEY_FIELDS)
                 if any(other[index] != key[index] for other in twins)]
    extra = ", ".join(f"{KEY_FIELDS[index].replace('_', ' ')} {key[index]}" for index in differing)
    return f"{label} ({extra})" if extra else label


def _with_published(key: KeyTuple, peers: list[PeerResult]) -> list[PeerResult]:
    """The published references that did this work, sized by the measured results' dataset."""
    sizes = Counter(p.dataset_size for p in peers if p.dataset_size)
    if not sizes:
        return peers
    fields = _key(key)
    size = sizes.most_common(1)[0][0]
    extra = [p for p in published_peers(str(fields["workload"]), str(fields["mode"]), size) if p.key == key]
    return peers + extra


def _settings_table(peers: Sequence[PeerResult]) -> Markup:
    labels = sorted({label for p in peers for label in p.settings})
    rows = []
    for label in labels:
        counts = Counter(p.settings[label] for p in peers if label in p.settings)
        shown = ", ".join(f"{value} ({count})" for value, count in counts.most_common(4))
        if len(counts) > 4:
            shown += f", {len(counts) - 4} more"
        rows.append(el("tr", el("td", label), el("td", shown)))
    return el("table", el("caption", "Recorded settings (value and number of results)"),
              el("thead", el("tr", el("th", "setting"), el("th", "values"))), el("tbody", *rows))


def _invalid_note(invalid: Sequence[PeerResult]) -> Markup | None:
    if not invalid:
        return None
    reasons = "; ".join(dict.fromkeys(p.invalid for p in invalid))
    return el("p", f"{len(invalid)} result(s) of this configuration flagged invalid and left out: {reasons}",
              class_="note")


def render_site(peers: Iterable[PeerResult], generated_at: str = "") -> dict[str, str]:
    """Every page of the site, by file name. A result flagged invalid is in no table (its
    configuration's section counts it)."""
    by_key: dict[KeyTuple, list[PeerResult]] = {}
    invalid: dict[KeyTuple, list[PeerResult]] = {}
    for peer in peers:
        (invalid if peer.invalid else by_key).setdefault(peer.key, []).append(peer)
    benches: dict[tuple[str, str, str], list[KeyTuple]] = {}
    for key in sorted(by_key, key=lambda k: tuple(str(v) for v in k)):
        benches.setdefault(_bench_name(key), []).append(key)
    grouped = {key: group_peers(_with_published(key, members)) for key, members in by_key.items()}
    pages: dict[str, str] = {}
    index_rows = []
    for name, keys in sorted(benches.items()):
        sections = []
        for key in keys:
            sections += [el("h2", _heading(key, keys)),
                         _groups_table(grouped[key], f"Device models, fastest median first "
                                                     f"({rate_unit(name[1])})"),
                         _invalid_note(invalid.get(key, []))]
        pages[_bench_file(name)] = _page(" · ".join(name), *sections, _published_note())
        results = sum(len(by_key[key]) for key in keys)
        models = {model_key(p.device_model) for key in keys for p in by_key[key]}
        index_rows.append(el("tr", el("td", el("a", name[0], href=_bench_file(name))), el("td", name[1]),
                             el("td", name[2]), _number(str(len(keys))), _number(str(len(models))),
                             _number(str(results))))
    by_model: dict[str, list[PeerResult]] = {}
    for members in by_key.values():
        for peer in members:
            by_model.setdefault(model_key(peer.device_model), []).append(peer)
    for members in by_model.values():
        pages[_device_file(_spelling(members))] = _device_page(members, grouped)
    total = sum(len(m) for m in by_key.values())
    machines = len({p.machine_id for m in by_key.values() for p in m if p.machine_id})
    flagged = sum(len(m) for m in invalid.values())
    index = el("table", el("caption", "Workloads, modes and precisions"),
               el("thead", el("tr", *(el("th", h) for h in ("workload", "mode", "precision", "configurations",
                                                            "device models", "results")))),
               el("tbody", *index_rows))
    fields = ", ".join(name.replace("_", " ") for name in KEY_FIELDS)
    pages["index.html"] = _page(
        "accelbench results",
        el("p", f"{total:,} shared results from {machines:,} machines and {len(by_model):,} device models; "
                f"generated {generated_at}. Figures are each work's headline rate: samples per second at "
                "the median step time, or a generation case's decode tokens per second over the batch. "
                "Medians, bands and bests are over machines (each machine's median result). A result is "
                f"compared only with results of the same work (the same {fields})."
                + (f" {flagged:,} result(s) flagged invalid (a figure above its device's measured "
                   "ceiling) are left out." if flagged else ""), class_="note"),
        index, _published_note())
    return pages


def _spelling(members: Sequence[PeerResult]) -> str:
    return Counter(p.device_model for p in members).most_common(1)[0][0]


def _device_page(members: Sequence[PeerResult], grouped: dict[KeyTuple, list[ModelGroup]]) -> str:
    """Every work one device model did, and the settings its results recorded."""
    model = _spelling(members)
    keys = sorted({p.key for p in members}, key=lambda k: tuple(str(v) for v in k))
    rows = []
    for key in keys:
        group = next(g for g in grouped[key] if model_key(g.device_model) == model_key(model)
                     and not g.published)
        name = _bench_name(key)
        rows.append(el("tr", el("td", el("a", " · ".join(name), href=_bench_file(name))),
                       el("td", _heading(key, [k for k in keys if _bench_name(k) == name])),
                       _number(f"{group.count} ({group.machines} machines)"),
                       _number(format_rate(group.median)),
                       _number(f"{format_rate(group.low)}–{format_rate(group.high)}"),
                       _number(format_rate(group.best)), el("td", rate_unit(name[1]))))
    work = el("table", el("caption", "Every work measured on this device model"),
              el("thead", el("tr", *(el("th", h) for h in ("workload · mode · precision", "configuration",
                                                           "results", "median", "p10–p90", "best",
                                                           "rate")))),
              el("tbody", *rows))
    return _page(model, work, _settings_table(members))


def _published_note() -> Markup:
    return el("p", f"Rows marked (published) are {PUBLISHED_LABEL}: epoch times from their sources turned "
              "into samples per second; an epoch as published may include evaluation.", class_="note")
