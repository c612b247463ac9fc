"""Log lines as plain text (the default) or one JSON object per line (``log_format = "json"``),
and the access log: one line per memoryd RPC on the ``memoryd.access`` logger.

An access line names the request id, the method, the status code, the duration, the trace id
and the caller's tenant and agent (identifiers, as in audit events) — never a token, a
subject, a query or a memory's content:

    memoryd.access: request_id=9f2c… method=memoryd.v1.MemoryService/Recall code=OK duration_ms=4.1 tenant=acme agent=support-bot trace_id=4bf9…

As JSON the same fields are keys of the line's object (``duration_ms`` a number).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from .._config import Config

ACCESS_LOGGER = "memoryd.access"
_access = logging.getLogger(ACCESS_LOGGER)


class JsonFormatter(logging.Formatter):
    """One JSON object per record: time (UTC, ISO 8601), level, logger, message, the record's
    ``fields`` (the access log's) and the exception, if any."""

    def format(self, record: logging.LogRecord) -> str:
        fields = getattr(record, "fields", None)
        line: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
        }
        if isinstance(fields, Mapping):  # an access line: its fields are the message
            line.update(fields)
        else:
            line["message"] = record.getMessage()
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return json.dumps(line, ensure_ascii=False, default=str)


def configure_logging(config: Config) -> None:
    """Apply ``log_format`` to the process's log handlers (the CLI has set them up)."""
    if config.log_format == "json":
        for handler in logging.getLogger().handlers:
            handler.setFormatter(JsonFormatter())


def log_access(fields: Mapping[str, Any]) -> None:
    """One access line: ``key=value`` pairs as text, the same pairs as JSON keys."""
    if _access.isEnabledFor(logging.INFO):
        text = " ".join(f"{key}={value}" for key, value in fields.items() if value != "")
        _access.info("%s", text, extra={"fields": dict(fields)})
