"""``memoryd bench extraction``: turns in, memories out, scored against a hand-written set."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from memoryd.cli import CliError, connection_options, tls_settings

from .._locomo import BenchError
from .._server import ServerError, sigterm_unwinds
from ._extraction_run import ExtractionOptions, ExtractionResult, run_extraction
from ._extraction_set import DEFAULT_DIALOGUES, summarise
from .._report import machine, sha256, versions
from .._run_options import add_run_options

ADMIN_TOKEN_FILE = ".memoryd/tokens/admin.token"  # what `make serve` (the embedded default) writes
# Options that set up the embedded server or its model: a server at --addr has its own.
_EMBEDDED_ONLY = ("url", "scripted", "api_key_env", "timeout", "output_mode", "max_tokens", "concurrency", "port")

def _positive(kind: type) -> Any:
    def parse(value: str) -> Any:
        try:
            number = kind(value)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{value!r} is not a number") from None
        if number <= 0:
            raise argparse.ArgumentTypeError("must be positive")
        return number
    return parse


def add_extraction_command(benchmarks: Any) -> None:
    bench = benchmarks.add_parser(
        "extraction", help="extraction: recall, precision and leaks of memories extracted from dialogues",
        parents=[connection_options(addr=False)],
        description="Start an embedded server with an extraction model (or use the one at --addr, with the model "
                    "it is configured with), send each dialogue of the set (bench/extraction/dialogues.json: "
                    "English and Chinese, with injection lines, identity and financial numbers, e-mail addresses, "
                    "passing remarks and relative dates) as turns in extract mode, wait for every job, and score "
                    "the stored memories against the set: recall and precision per language, forbidden strings "
                    "found anywhere the API returns them (every field of every memory and version, Recall's "
                    "memories and prompt block, the job's answer), by field, drops by reason, seconds per job. "
                    "Without --url or --addr the model is a scripted stand-in answering each dialogue's "
                    "scripted_answer: that run measures memoryd's own filtering, not a model. Exits 0 once "
                    "measured, 1 if the run could not be made.")
    model = bench.add_mutually_exclusive_group()
    model.add_argument("--url", help="an OpenAI-compatible endpoint (…/v1) whose chat model extracts")
    model.add_argument("--scripted", action="store_true",
                       help="the scripted stand-in model, in process (the default without --url)")
    bench.add_argument("--model", help="the model name sent to --url (required with it); with --addr, only a "
                                       "label for the report: the server's own model extracts")
    bench.add_argument("--api-key-env", metavar="VAR", help="the environment variable holding --url's API key")
    bench.add_argument("--timeout", type=_positive(float), metavar="S",
                       help="seconds per model request (MEMORYD_EXTRACTION_TIMEOUT_SECONDS; default: the server's)")
    bench.add_argument("--output-mode", metavar="MODE",
                       help="how the JSON schema is asked for: auto, json_schema, json_object or prompt, as the "
                            "server takes them (MEMORYD_EXTRACTION_OUTPUT; default: the server's)")
    bench.add_argument("--max-tokens", type=_positive(int), metavar="N",
                       help="the bound on an answer (MEMORYD_EXTRACTION_MAX_TOKENS; default: the server's)")
    bench.add_argument("--concurrency", type=_positive(int), metavar="N",
                       help="requests to the model at once (MEMORYD_EXTRACTION_CONCURRENCY; default: the server's)")
    bench.add_argument("--dialogues", type=Path, default=DEFAULT_DIALOGUES, metavar="FILE",
                       help=f"the dialogue set (default: {DEFAULT_DIALOGUES})")
    bench.add_argument("--wait", type=_positive(float), default=600.0, metavar="S",
                       help="seconds to wait for the jobs after the last Write (default 600)")
    bench.add_argument("--port", type=_positive(int), metavar="PORT",
                       help="the embedded server's port on 127.0.0.1 (default: a free one)")
    bench.add_argument("--addr", metavar="HOST:PORT",
                       help="use the memoryd already running here, with the extraction model it is configured "
                            "with, instead of starting one (the connection options speak TLS to it); needs a "
                            "tenant admin's token: the run stores a view for the agent bench-extraction in that "
                            "tenant, mints its token, and writes to fresh subjects <prefix>-<run id>-<dialogue>")
    bench.add_argument("--admin-token", default=os.environ.get("MEMORYD_ADMIN_TOKEN", ""),
                       help="a tenant admin's token for --addr (default: $MEMORYD_ADMIN_TOKEN, then "
                            "--admin-token-file)")
    bench.add_argument("--admin-token-file", default=ADMIN_TOKEN_FILE, metavar="FILE",
                       help=f"a file holding it (default: {ADMIN_TOKEN_FILE}, the one `make serve` writes)")
    bench.add_argument("--subject-prefix", default="extraction",
                       help="subjects are <prefix>-<dialogue id> (default extraction); with --addr a run id follows "
                            "the prefix")
    add_run_options(bench, json_help="also write the figures, per dialogue too, as JSON", json_metavar="FILE",
                    progress_help="no progress bar on stderr")
    bench.set_defaults(run=run_extraction_command)


def _figure(value: float | None, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def report(result: ExtractionResult, figures: dict[str, Any]) -> str:
    options = result.options
    if options.addr is not None:
        model = f"the server's own at {options.addr}" + (f" ({options.model})" if options.model != "scripted" else "")
    elif options.scripted:
        model = "scripted stand-in (each dialogue's scripted_answer)"
    else:
        model = f"{options.model} at {options.url}"
    languages = ", ".join(f"{lang} {row['dialogues']}" for lang, row in figures["by_language"].items())
    lines = [f"extraction: {figures['all']['dialogues']} dialogues ({languages}); model: {model}",
             f"{'':<6} {'expected':>8} {'matched':>7} {'recall':>6}  {'stored':>6} {'matching':>8} {'precision':>9}"]
    for name, row in [*figures["by_language"].items(), ("all", figures["all"])]:
        lines.append(f"{name:<6} {row['expected']:>8} {row['matched']:>7} {_figure(row['recall']):>6}  "
                     f"{row['stored']:>6} {row['matching']:>8} {_figure(row['precision']):>9}")
    leaks = figures["forbidden_leaks"]
    kinds = ", ".join(f"{kind} {n}" for kind, n in figures["leaks_by_kind"].items())
    lines.append(f"forbidden leaks: {figures['leaked_strings']}" + (
        f" strings, in {len(leaks)} places (WARNING: should be 0); strings by field: {kinds}" if leaks else ""))
    found: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for leak in leaks:
        found.setdefault((leak["dialogue"], leak["forbidden"]), []).append(leak)
    for (dialogue, forbidden), places in found.items():
        fields = ", ".join(dict.fromkeys(place["kind"] for place in places))
        first = places[0]
        lines.append(f"  {dialogue}: {forbidden!r} in {fields} ({len(places)} places; first {first['where']}: "
                     f"{first['value']!r})")
    dropped = figures["dropped"]
    lines.append("dropped, all jobs: " + (", ".join(f"{reason} {n}" for reason, n in dropped.items()) or "none"))
    lines.append("written, all jobs: " + (", ".join(f"{outcome} {n}" for outcome, n in figures["written"].items())
                                          or "nothing"))
    jobs, seconds = figures["jobs"], figures["seconds_per_job"]
    lines.append(f"jobs: {jobs['succeeded']} succeeded, {len(jobs['failed'])} failed or unfinished; seconds per job "
                 f"(created → finished, queueing included): mean {_figure(seconds['mean'], 2)}, "
                 f"p50 {_figure(seconds['p50'], 2)}, max {_figure(seconds['max'], 2)}; "
                 f"first Write → last job {result.jobs_wall_seconds:.1f} s")
    lines += [f"  {f['dialogue']}: {f['state']}: {f['error']}" for f in jobs["failed"]]
    missed = [(d["id"], must) for d in figures["dialogues"] for must in d["missed"]]
    if missed:
        lines.append("missed (expected, nothing stored matches):")
        lines += [f"  {name}: {' + '.join(must)}" for name, must in missed]
    extra = [(d["id"], text) for d in figures["dialogues"] for text in d["extra"]]
    if extra:
        lines.append("extra (stored, no expected memory matches):")
        lines += [f"  {name}: {text}" for name, text in extra]
    return "\n".join(lines)


def _admin_token(args: argparse.Namespace) -> str:
    if args.admin_token:
        return str(args.admin_token).strip()
    path = Path(args.admin_token_file)
    if path.is_file():
        return path.read_text().strip()
    raise BenchError(f"--addr needs a tenant admin's token: pass --admin-token, set MEMORYD_ADMIN_TOKEN, or point "
                     f"--admin-token-file at one ({path} does not exist)")


def run_extraction_command(args: argparse.Namespace) -> int:
    if args.url is not None and not args.model:
        print("memoryd bench: error: --url needs --model", file=sys.stderr)
        return 2
    if args.addr is not None:
        given = [f"--{name.replace('_', '-')}" for name in _EMBEDDED_ONLY if getattr(args, name) not in (None, False)]
        if given:
            print(f"memoryd bench: error: --addr uses the server's own extraction settings: drop {', '.join(given)}",
                  file=sys.stderr)
            return 2
    try:
        options = ExtractionOptions(dialogues=args.dialogues, url=args.url, model=args.model or "scripted",
                                    api_key_env=args.api_key_env, timeout=args.timeout, output_mode=args.output_mode,
                                    max_tokens=args.max_tokens, concurrency=args.concurrency, wait=args.wait,
                                    start_timeout=args.start_timeout, subject_prefix=args.subject_prefix,
                                    addr=args.addr, tls=tls_settings(args) if args.addr is not None else None,
                                    admin_token=_admin_token(args) if args.addr is not None else "",
                                    port=args.port or 0)
        before = machine()
        with sigterm_unwinds():
            result = run_extraction(options, progress=None if args.no_progress else sys.stderr)
        after = machine()
    except (BenchError, ServerError, CliError) as exc:
        print(f"memoryd bench: error: {exc}", file=sys.stderr)
        return 1
    figures = summarise(result.outcomes)
    print(report(result, figures))
    if args.json:
        document = {"model": {"scripted": options.scripted, "url": options.url, "name": options.model,
                              "server_own": options.addr is not None,
                              "output_mode": options.output_mode, "max_tokens": options.max_tokens,
                              "concurrency": options.concurrency, "timeout": options.timeout,
                              "requests": result.model_requests},
                    "dialogues_file": {"path": str(options.dialogues), "sha256": sha256(options.dialogues)},
                    "seconds": result.seconds, "jobs_wall_seconds": result.jobs_wall_seconds,
                    "server": result.server, "machine": {"before": before, "after": after}, "versions": versions(),
                    **figures}
        Path(args.json).write_text(json.dumps(document, indent=2, ensure_ascii=False) + "\n")
        print(f"results written to {args.json}", file=sys.stderr)
    return 0
