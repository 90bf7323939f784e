"""Backend tables and autodetection: which server wrote this page, and which version."""

from __future__ import annotations

from infmon.sources.backends.others import DCGM, LLAMACPP, SGLANG, TGI
from infmon.sources.backends.table import BackendTable
from infmon.sources.backends.vllm import V0_ONLY_MARKERS, V1_ONLY_MARKERS, VLLM_V0, VLLM_V1
from infmon.sources.exposition import Page

BACKENDS: dict[str, BackendTable] = {
    t.name: t for t in (VLLM_V1, VLLM_V0, SGLANG, TGI, LLAMACPP, DCGM)
}
"""Every known table by name (the values ``--backend`` accepts)."""

_BY_PREFIX = (
    ("vllm:", "vllm"),
    ("sglang:", "sglang"),
    ("tgi_", "tgi"),
    ("llamacpp:", "llamacpp"),
    ("DCGM_FI_", "dcgm"),
)


class UnknownBackendError(ValueError):
    """``--backend`` named a table that does not exist."""


def table_named(name: str) -> BackendTable:
    try:
        return BACKENDS[name]
    except KeyError:
        known = ", ".join(BACKENDS)
        raise UnknownBackendError(f"unknown backend {name!r} (known: {known})") from None


def _vllm_table(page: Page) -> BackendTable:
    if any(page.declares(n) for n in V1_ONLY_MARKERS):
        return VLLM_V1
    if any(page.declares(n) for n in V0_ONLY_MARKERS):
        return VLLM_V0
    engine_label = any(
        "engine" in s.labels
        for name in page.names
        if name.startswith("vllm:")
        for s in page.get(name)
    )
    return VLLM_V1 if engine_label else VLLM_V0


def detect(page: Page) -> BackendTable | None:
    """The backend whose prefix names most metrics on the page (its samples, or the families
    its ``# HELP`` / ``# TYPE`` lines declare); None when none matches."""
    counts = dict.fromkeys((fam for _, fam in _BY_PREFIX), 0)
    for name in {*page.names, *page.declared}:
        for prefix, fam in _BY_PREFIX:
            if name.startswith(prefix):
                counts[fam] += 1
                break
    server = {k: v for k, v in counts.items() if k != "dcgm" and v}
    if server:
        best = max(server, key=lambda k: server[k])
        return _vllm_table(page) if best == "vllm" else BACKENDS[best]
    return DCGM if counts["dcgm"] else None


def detect_version(page: Page, table: BackendTable) -> str | None:
    """The version (or era) the page's names point to, from the table's markers."""
    for marker, text in table.versions:
        if all(page.has(n) for n in marker.split("&")):
            return text
    return table.default_version


def forced_mismatch(forced: str | None, detected: str | None) -> str | None:
    """A warning when ``--backend`` names another family than the page's own names do."""
    if forced is None or detected is None or forced not in BACKENDS:
        return None
    if BACKENDS[forced].prefix == BACKENDS[detected].prefix:  # vllm-v1 vs vllm-v0: a choice
        return None
    return (
        f"warning: --backend {forced}, but the page's metric names are {detected}'s "
        f"({BACKENDS[detected].prefix}…): its figures are read with the wrong table"
    )
