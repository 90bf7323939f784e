"""The KV connectors' families, as vLLM 0.32 declares them (rows as in ``metric_schema``).

- The OffloadingConnector (``kv_connector/v1/offloading/metrics.py``): flat counters and size
  histograms per direction, and the deprecated ``kv_offload_total_*`` with ``transfer_type``
  (``CPU_to_GPU`` = load, ``GPU_to_CPU`` = store), still fed for the CPU backend.
- NIXL (``kv_connector/v1/nixl/stats.py``): per-transfer histograms and failure counters; the
  pod that pulls (decode) records the transfers, both pods publish the families.

Not served: ``kv_offload_lookup_{sync,async}_delay_seconds`` (the simulator's host lookup takes
no time) and ``kv_offload_allocation_failure`` (its host tier evicts, it never fails).
"""

from __future__ import annotations

Row = tuple[str, str, str, str, tuple[str, ...], tuple[float, ...] | str | None]
"""(concept, kind, name, help, extra label names, buckets or a bucket rule)."""

TRANSFER_SIZE_BUCKETS = (1e6, 5e6, 10e6, 20e6, 40e6, 60e6, 80e6, 100e6, 150e6, 200e6)
TRANSFER_TYPES = ("CPU_to_GPU", "GPU_to_CPU")
_XFER = (0.001, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0, 5.0)
NIXL_BYTES_BUCKETS = tuple(2 ** (10 + i) for i in range(1, 25, 2))
NIXL_DESC_BUCKETS = (10, 20, 30, 50, 75, 100, 200, 400, 1000, 2000, 4000, 10000, 20000, 50000)

OFFLOAD: tuple[Row, ...] = (
    ("off_load_bytes", "counter", "kv_offload_load_bytes",
     "Total bytes loaded from offload storage to GPU.", (), None),
    ("off_load_time", "counter", "kv_offload_load_time",
     "Total load time from offload storage to GPU, in seconds.", (), None),
    ("off_load_size", "histogram", "kv_offload_load_size",
     "Histogram of KV offload load operation size, in bytes.", (), TRANSFER_SIZE_BUCKETS),
    ("off_store_bytes", "counter", "kv_offload_store_bytes",
     "Total bytes stored from GPU to offload storage.", (), None),
    ("off_store_time", "counter", "kv_offload_store_time",
     "Total store time from GPU to offload storage, in seconds.", (), None),
    ("off_store_size", "histogram", "kv_offload_store_size",
     "Histogram of KV offload store operation size, in bytes.", (), TRANSFER_SIZE_BUCKETS),
    ("off_total_bytes", "counter", "kv_offload_total_bytes",
     "Number of bytes offloaded by KV connector", ("transfer_type",), None),
    ("off_total_time", "counter", "kv_offload_total_time",
     "Total time measured by all KV offloading operations", ("transfer_type",), None),
    ("off_size", "histogram", "kv_offload_size",
     "Histogram of KV offload transfer size, in bytes.", ("transfer_type",),
     TRANSFER_SIZE_BUCKETS),
)  # fmt: skip

NIXL: tuple[Row, ...] = (
    ("nixl_xfer_time", "histogram", "nixl_xfer_time_seconds",
     "Histogram of transfer duration for NIXL KV Cache transfers.", (), _XFER[1:]),
    ("nixl_post_time", "histogram", "nixl_post_time_seconds",
     "Histogram of transfer post time for NIXL KV Cache transfers.", (), _XFER),
    ("nixl_bytes", "histogram", "nixl_bytes_transferred",
     "Histogram of bytes transferred per NIXL KV Cache transfers.", (), NIXL_BYTES_BUCKETS),
    ("nixl_descriptors", "histogram", "nixl_num_descriptors",
     "Histogram of number of descriptors per NIXL  KV Cache transfers.", (), NIXL_DESC_BUCKETS),
    ("nixl_failed", "counter", "nixl_num_failed_transfers",
     "Number of failed NIXL KV Cache transfers, including handshake and notification "
     "failures. NOTE: KV expiry is tracked separately in vllm:nixl_num_kv_expired_reqs.", (),
     None),
    ("nixl_failed_notif", "counter", "nixl_num_failed_notifications",
     "Number of failed NIXL KV Cache notifications. Retained for compatibility; these "
     "failures are also included in vllm:nixl_num_failed_transfers.", (), None),
    ("nixl_expired", "counter", "nixl_num_kv_expired_reqs",
     "Number of requests that had their KV expire. NOTE: This metric is tracked on the P "
     "instance.", (), None),
    ("nixl_after_expiry", "counter", "nixl_num_notifications_after_expiry",
     "Number of completion notifications for requests that were no longer tracked, usually "
     "because their KV lease expired. The KV blocks may have been reused before the transfer "
     "finished. Counted per notification (one per remote rank), not per request.", (), None),
)  # fmt: skip
