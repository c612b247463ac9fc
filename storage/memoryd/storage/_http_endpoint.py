"""An OpenAI-compatible HTTP endpoint's URL and headers, checked and built one way for every
client memoryd has (the embedder here, the chat model in the server)."""

from __future__ import annotations

from urllib.parse import SplitResult, urlsplit


def http_endpoint(url: str, setting: str, key_setting: str) -> SplitResult:
    """``url`` split, if it is an http(s) URL with a host and no credentials (they belong in
    ``key_setting``, sent as a header, never in a URL that is logged); ValueError otherwise."""
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"{setting} must be an http(s) URL with a host, got {url!r}")
    if parts.username is not None or parts.password is not None:
        raise ValueError(f"{setting} must not carry credentials; set {key_setting} instead")
    return parts


def json_headers(api_key: str) -> dict[str, str]:
    """The headers of a JSON request, with the key as a bearer token if there is one."""
    headers = {"Content-Type": "application/json", "Accept": "application/json", "User-Agent": "memoryd"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    return headers
