"""The static results site: plain HTML and CSS pages from shared results (pure: name -> page text).

    index.html                 every workload, mode and precision, with its device models and counts
    bench-<slug>.html          one per workload, mode and precision: per configuration (a section
                               per comparability key), each device model's result and machine
                               count, median, 10th-90th percentile and best, over machines;
                               and a --protocol mlperf-client work's overall figures (the
                               geometric means its runs stored, carried by their lines), a small
                               table beside its categories' sections
    device-<slug>.html         one per device model: every work it did, and its recorded settings

A generation configuration's rows also say how they executed (compile mode, CUDA graphs) and the
bound their decode hit; overhead-bound results are a row per host CPU model (compare/collection.py).

Published references are rows of their own, marked and cited. This module gathers each page's
figures as plain strings; the templates ``templates/site_*.html.j2`` lay them out
(``render/templating.py``: Jinja2 with autoescape, so a device model from a bundle is text, never
markup); each page carries a Content-Security-Policy that allows no script and nothing from the
network.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

from accelbench.compare.collection import Collection, KeySummary, OverallGroup, collect, model_groups
from accelbench.compare.peers import ModelGroup, PeerResult, model_key
from accelbench.reference.published import PUBLISHED_LABEL
from accelbench.render.format import format_rate, format_seconds
from accelbench.results.catalogue import ACROSS_CASES, key_headline
from accelbench.results.first_use import plural
from accelbench.results.key import KEY_FIELDS, config_label

CSP = "default-src 'none'; style-src 'unsafe-inline'"
KeyTuple = tuple[Any, ...]


def slug(text: str) -> str:
    """A file-name-safe, collision-free name: readable part plus a short hash of the whole."""
    readable = re.sub(r"[^a-z0-9]+", "-", text.casefold()).strip("-")[:40] or "x"
    return f"{readable}-{hashlib.sha256(text.encode('utf-8')).hexdigest()[:8]}"


def counted(count: int, noun: str) -> str:
    """"1 machine", "2,000 machines"."""
    return f"{count:,} {plural(noun, count)}"


def _key(key: KeyTuple) -> dict[str, Any]:
    return dict(zip(KEY_FIELDS, key, strict=True))


def _unit(key: KeyTuple) -> str:
    """What a configuration's figures count: its headline's words (results/catalogue.headline)."""
    return key_headline(_key(key)).label


def _bench_name(key: KeyTuple) -> tuple[str, str, str]:
    fields = _key(key)
    return str(fields["workload"]), str(fields["mode"]), str(fields["precision"])


def _bench_file(name: tuple[str, str, str]) -> str:
    return f"bench-{slug(' '.join(name))}.html"


def _device_file(model: str) -> str:
    return f"device-{slug(model_key(model))}.html"


GROUP_HEADERS = ("device model", "results", "median", "p10–p90", "best")
DECODE_HEADERS = ("execution", "decode bound")


def _figures(group: ModelGroup, count: str) -> list[str]:
    """A group's count, median, 10th-90th percentile and best, as its table shows them."""
    return [count, format_rate(group.median), f"{format_rate(group.low)}–{format_rate(group.high)}",
            format_rate(group.best)]


def _groups_table(groups: Sequence[ModelGroup], caption: str) -> dict[str, Any]:
    """The source column only where a published figure is in the table; the execution and decode
    bound columns only where a generation group has them."""
    source = any(g.published for g in groups)
    decode = any(g.recipe or g.decode for g in groups)
    rows = [{"name": g.device_model, "href": _device_file(g.device_model), "published": g.published,
             "figures": _figures(g, str(g.count) if g.published
                                 else f"{g.count} ({counted(g.machines, 'machine')})"),
             "recipe": g.recipe, "decode": g.decode} for g in groups]
    headers = (*GROUP_HEADERS, *(DECODE_HEADERS if decode else ()), *(("source",) if source else ()))
    return {"caption": caption, "source": source, "decode": decode, "rows": rows, "headers": headers}


def _heading(key: KeyTuple, page_keys: Sequence[KeyTuple]) -> str:
    """The configuration's words; where two configurations of one page read the same, the key
    fields in which they differ are added (every KEY_FIELDS field keeps its own section)."""
    label = config_label(_key(key))
    twins = [other for other in page_keys if other != key and config_label(_key(other)) == label]
    differing = [index for index, name in enumerate(KEY_FIELDS)
                 if any(other[index] != key[index] for other in twins)]
    extra = ", ".join(f"{KEY_FIELDS[index].replace('_', ' ')} {key[index]}" for index in differing)
    return f"{label} ({extra})" if extra else label


def _settings_rows(counts: Counter[tuple[str, str]]) -> list[tuple[str, str]]:
    """Each recorded setting with its four most common values and their counts."""
    rows = []
    for label in sorted({label for label, _ in counts}):
        values = Counter({value: count for (name, value), count in counts.items() if name == label})
        shown = ", ".join(f"{value} ({count})" for value, count in values.most_common(4))
        if len(values) > 4:
            shown += f", {len(values) - 4} more"
        rows.append((label, shown))
    return rows


def _apart_note(apart: Counter[str]) -> str:
    if not apart:
        return ""
    named = sorted(apart)
    reasons = "; ".join(named[:3]) + (f"; and {len(named) - 3} more reason(s)" if len(named) > 3 else "")
    return f"{sum(apart.values())} result(s) of this configuration flagged invalid and left out: {reasons}"


OVERALL_HEADERS = ("device model", "runs", "categories", *(f.label for f in ACROSS_CASES))


def _overall_tables(name: tuple[str, str, str],
                    overall: dict[KeyTuple, list[OverallGroup]]) -> list[dict[str, Any]]:
    """The bench page's figures across cases (MLPerf Client's overall), a small table per overall
    key beside its categories' sections: each device model's stored figures (a lone run's as it
    stored them; several runs: the median over machines), in the cells compare's table of them
    uses (``format_seconds``, tokens/s). Read from the collection, never from the categories."""
    tables: list[dict[str, Any]] = []
    for key in sorted((k for k in overall if _bench_name(k) == name), key=lambda k: tuple(map(str, k))):
        rows = [{"name": g.device_model, "href": _device_file(g.device_model), "published": "",
                 "figures": [f"{g.groups} ({counted(g.machines, 'machine')})", str(g.categories),
                             format_seconds(g.ttft_s), f"{format_rate(g.token_rate)} tokens/s"]}
                for g in overall[key]]
        tables.append({"heading": f"{config_label(_key(key))}: overall, across its categories",
                       "table": {"caption": "Geometric means over the categories, as each run stored "
                                            "them (median over machines where several shared)",
                                 "source": False, "decode": False, "rows": rows,
                                 "headers": OVERALL_HEADERS}})
    return tables


def render_site(peers: Iterable[PeerResult] | Collection, generated_at: str = "") -> dict[str, str]:
    """Every page of the site, by file name, from peers or from a collection's summary (what a
    large collection is read into: ``sharing/query.py``). A result flagged implausible or
    quarantined is in no table (its configuration's section counts it)."""
    from accelbench.render.templating import render

    collection = peers if isinstance(peers, Collection) else collect(peers)
    measured = {key: summary for key, summary in collection.keys.items() if summary.measured}
    benches: dict[tuple[str, str, str], list[KeyTuple]] = {}
    for key in sorted(measured, key=lambda k: tuple(str(v) for v in k)):
        benches.setdefault(_bench_name(key), []).append(key)
    pages: dict[str, str] = {}
    index_rows = []
    tops = _chart_tops(benches.values(), measured)
    for name, keys in sorted(benches.items()):
        sections = [{"heading": _heading(key, keys),
                     "table": _groups_table(measured[key].groups,
                                            f"Device models, fastest median first ({_unit(key)})"),
                     "apart": _apart_note(measured[key].apart)} for key in keys]
        pages[_bench_file(name)] = render("site_bench.html.j2", title=" · ".join(name), csp=CSP,
                                          sections=sections,
                                          overall=_overall_tables(name, collection.overall),
                                          published_label=PUBLISHED_LABEL) + "\n"
        results = sum(g.count for key in keys for g in measured[key].measured)
        models = {model_key(g.device_model) for key in keys for g in measured[key].measured}
        index_rows.append({"workload": name[0], "mode": name[1], "precision": name[2],
                           "href": _bench_file(name), "configurations": len(keys), "models": len(models),
                           "results": results, "shown": _index_figures(keys, measured, tops)})
    for model, (spelling, counts) in collection.settings.items():
        pages[_device_file(spelling)] = _device_page(spelling, model_groups(collection, model), counts)
    flagged = collection.apart
    fields = ", ".join(name.replace("_", " ") for name in KEY_FIELDS)
    summary = (f"{counted(collection.results, 'shared result')} from "
               f"{counted(collection.machines, 'machine')} and "
               f"{counted(len(collection.settings), 'device model')}; "
               f"generated {generated_at}. Figures are each work's headline rate: samples per second at "
               "the median step time, a generation case's decode tokens per second over the batch, or "
               "a --protocol case's rate as its peer publishes it (llama-bench's pp or tg, gpt-fast's "
               "tokens/s, MLPerf Client's 2nd+ token rate). "
               "An MLPerf Client work's page also shows its overall figures, the geometric means over "
               "its categories as each run stored them. "
               "Medians and bands are over machines (each machine's median result); a best is the "
               "fastest single result. A result is "
               f"compared only with results of the same work (the same {fields}), and an overhead-bound "
               "decode (host launches) only with results driven by the same host CPU model. "
               f"{INDEX_NOTE}"
               + (f" {flagged:,} result(s) flagged invalid (implausible on their own machine, or "
                  "quarantined: far above their device model, or in conflict) are left out."
                  if flagged else ""))
    pages["index.html"] = render("site_index.html.j2", csp=CSP, summary=summary, headers=INDEX_HEADERS,
                                 rows=index_rows, published_label=PUBLISHED_LABEL) + "\n"
    return pages


INDEX_HEADERS = ("workload", "mode", "precision", "configurations", "device models", "results",
                 "configuration shown", "best", "median", "device models' medians")
INDEX_NOTE = ("Each row's figures are of its configuration with the most results (named): best is "
              "the fastest single result (a figure one run produced) and its device model, median "
              "the fastest device model's median over its machines, and the chart each device "
              "model's median, fastest first (a bar's title names it); bars of one unit share one "
              "scale across the page, so a bar's length is its figure against the fastest median "
              "of that unit.")
#: Bars in an index row's chart; the bench page lists every device model.
CHART_BARS = 6


def _shown_key(keys: Sequence[KeyTuple], measured: dict[KeyTuple, KeySummary]) -> KeyTuple:
    """The configuration an index row shows: the one with the most results."""
    return max(keys, key=lambda k: sum(g.count for g in measured[k].measured))


def _chart_tops(benches: Iterable[Sequence[KeyTuple]],
                measured: dict[KeyTuple, KeySummary]) -> dict[str, float]:
    """The fastest median of each unit among the configurations the index shows: the scale of
    every bar of that unit, so that a lone device model's bar is not drawn full width."""
    tops: dict[str, float] = {}
    for keys in benches:
        key = _shown_key(keys, measured)
        for group in measured[key].measured:
            tops[_unit(key)] = max(tops.get(_unit(key), 0.0), group.median)
    return tops


def _index_figures(keys: Sequence[KeyTuple], measured: dict[KeyTuple, KeySummary],
                   tops: dict[str, float]) -> dict[str, Any] | None:
    """The index cells of one workload, mode and precision: the configuration with the most
    results, its best and median figures (with their unit and device model), and a small chart
    of its device models' medians on its unit's scale (``tops``)."""
    key = _shown_key(keys, measured)
    groups = sorted(measured[key].measured, key=lambda g: -g.median)
    if not groups:
        return None
    unit = _unit(key)
    best = max(groups, key=lambda g: g.best)
    return {"heading": _heading(key, keys),
            "best": f"{format_rate(best.best)} {unit} ({best.device_model})",
            "median": f"{format_rate(groups[0].median)} {unit} ({groups[0].device_model})",
            "chart": _chart(groups[:CHART_BARS], unit, tops.get(unit) or groups[0].median)}


def _chart(groups: Sequence[ModelGroup], unit: str, top: float) -> dict[str, Any]:
    """The bars of an index row (inline SVG): one per device model, its length its median
    against ``top`` (the fastest median of the unit)."""
    width, bar, gap = 120, 8, 2
    bars = [{"title": f"{g.device_model}: median {format_rate(g.median)} {unit} over "
                      f"{counted(g.machines, 'machine')}",
             "y": i * (bar + gap), "width": f"{max(g.median / (top or 1.0) * width, 1.0):.1f}"}
            for i, g in enumerate(groups)]
    label = "; ".join(f"{g.device_model} {format_rate(g.median)}" for g in groups)
    return {"width": width, "height": len(groups) * (bar + gap) - gap, "bar": bar, "bars": bars,
            "label": f"medians ({unit}; full width {format_rate(top)}): {label}"}


def _device_page(model: str, work: Sequence[tuple[KeyTuple, ModelGroup]],
                 settings: Counter[tuple[str, str]]) -> str:
    """Every work one device model did, and the settings its results recorded."""
    from accelbench.render.templating import render

    keys = sorted({key for key, _ in work}, key=lambda k: tuple(str(v) for v in k))
    rows = []
    decode = any(group.recipe or group.decode for _, group in work)
    # One row per group: a generation key may hold several (overhead-bound per host CPU model).
    for key, group in sorted(work, key=lambda item: (keys.index(item[0]), -item[1].median)):
        name = _bench_name(key)
        rows.append({"name": " · ".join(name), "href": _bench_file(name),
                     "heading": _heading(key, [k for k in keys if _bench_name(k) == name]),
                     "figures": _figures(group, f"{group.count} ({counted(group.machines, 'machine')})"),
                     "recipe": group.recipe, "decode": group.decode, "unit": _unit(key)})
    headers = ("workload · mode · precision", "configuration", "results", "median", "p10–p90", "best",
               *(DECODE_HEADERS if decode else ()), "rate")
    return render("site_device.html.j2", title=model, csp=CSP, headers=headers, rows=rows, decode=decode,
                  settings=_settings_rows(settings)) + "\n"
