"""Reading RunPod's pod billing (`GET /v2/billing/pods`, listPodBilling), strictly.

Where it sits: the RunPod adapter, beside the pod's parser (wire.py) and the catalog's
(catalog.py). The client's `pod_billing` hands this module the answer's JSON; observe
(rpp/observe/billing.py) keeps what it returns for decide, which sums each pool's own
pods' records into status.spend.

Why strict, when the pod listing is read field by field and keeps odd pods: a bill is
a sum. One record skipped or read as zero would make the spend look lower than it is,
and a spend that looks right while it is not is worse than none. So any record that is
not RunPod's shape (no podId, a time that does not parse, an amount that is not a
finite number, a bucket that ends before it starts) fails the whole answer with a
WireError naming the record and field; the client turns it into BadResponse, and
observe keeps the last good reading with its time.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Mapping
from typing import Any

from rpp.adapters.runpod.reading import WireError, is_number, show
from rpp.model.observations import BillingRecord
from rpp.model.timestamps import from_rfc3339

BUCKET_SIZE = "hour"
"""The bucket the controller asks for: status.spend's last hour needs hours, and a
month of hourly records for a pool's pods stays far below the client's answer limit."""


def billing_query(*, start: dt.datetime, end: dt.datetime) -> dict[str, str | int]:
    """The query of one read: hourly buckets in [start, end), both sent as RFC 3339 UTC."""
    return {"startTime": _rfc3339(start), "endTime": _rfc3339(end), "bucketSize": BUCKET_SIZE}


def billing_from_json(data: Any) -> tuple[BillingRecord, ...]:
    """Every record of a listPodBilling answer; a WireError for any that is not RunPod's
    shape (the error names it: `records[3].totalAmount: ...`)."""
    if not isinstance(data, Mapping):
        raise WireError(f"pod billing answer is {show(data)}, not an object")
    records = data.get("records")
    if not isinstance(records, list):
        raise WireError(f"pod billing answer's records is {show(records)}, not a list")
    return tuple(_record(raw, f"records[{index}]") for index, raw in enumerate(records))


def _record(raw: Any, at: str) -> BillingRecord:
    if not isinstance(raw, Mapping):
        raise WireError(f"{at} is {show(raw)}, not an object")
    pod_id = raw.get("podId")
    if not isinstance(pod_id, str) or not pod_id.strip():
        raise WireError(f"{at}.podId is {show(pod_id)}, not a pod id")
    start, end = _time(raw, at, "startTime"), _time(raw, at, "endTime")
    if end <= start:
        raise WireError(f"{at}: its bucket ends ({raw['endTime']}) before it starts")
    amount = raw.get("totalAmount")
    if not is_number(amount) or not math.isfinite(amount) or amount < 0:
        raise WireError(f"{at}.totalAmount is {show(amount)}, not an amount in USD")
    return BillingRecord(pod_id=pod_id, start=start, end=end, amount=float(amount))


def _time(raw: Mapping[str, Any], at: str, field: str) -> dt.datetime:
    value = raw.get(field)
    if isinstance(value, str):
        try:
            return from_rfc3339(value)
        except ValueError:
            pass
    raise WireError(f"{at}.{field} is {show(value)}, not an RFC 3339 time")


def _rfc3339(when: dt.datetime) -> str:
    if when.tzinfo is None:
        raise ValueError("a billing window needs timezone-aware times")
    return when.astimezone(dt.UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")
