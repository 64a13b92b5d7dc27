"""``download``: GPT-2, or a Llama / Qwen model, from the Hugging Face Hub into its
cache, resumably."""

from __future__ import annotations

import argparse
import sys


def register(sub) -> None:
    dl = sub.add_parser("download", help="download GPT-2 or a Llama / Qwen model from the "
                                         "Hugging Face Hub into its cache (resumable); it "
                                         "becomes the default model")
    dl.add_argument("model", nargs="?", default="gpt2",
                    help="gpt2 (124M, the default), gpt2-medium, gpt2-large, gpt2-xl, or a "
                         "repository id such as openai-community/gpt2, "
                         "HuggingFaceTB/SmolLM2-135M or Qwen/Qwen3-0.6B")
    dl.add_argument("--revision", default="main", help="branch, tag or commit (default main)")
    dl.set_defaults(func=download)


def download(args: argparse.Namespace) -> int:
    from ..core.weights import download as fetching, hub

    fetching.check_revision(args.revision)  # before a word or a byte goes out
    repo_id, _ = hub.resolve(args.model)
    resumed = fetching.partial_bytes(repo_id)
    print(f"{repo_id} from {hub.endpoint()} into {hub.cache_dir()}"
          + (f"; resuming after {resumed / 1e6:,.1f} MB" if resumed else ""), file=sys.stderr)
    tty = sys.stderr.isatty()
    last = {"share": -1, "width": 0}

    def show(p) -> None:
        if p.phase == fetching.Phase.DONE:
            return
        text = p.line()
        if tty:
            pad = " " * max(0, last["width"] - len(text))
            sys.stderr.write("\r" + text + pad)
            last["width"] = len(text)
        else:  # a log file: a line per tenth, and each check
            share = int(10 * p.done_bytes / p.total_bytes) if p.total_bytes else 0
            if share == last["share"] and p.phase == fetching.Phase.DOWNLOAD:
                return
            last["share"] = share
            sys.stderr.write(text + "\n")
        sys.stderr.flush()

    try:
        result = fetching.download(repo_id, progress=show, revision=args.revision)
    except hub.HubUnreachable as exc:  # one line, with the ways that need no network
        raise hub.HubUnreachable(f"{exc}; {hub.OFFLINE_CHOICES} (gpt-explorer --checkpoint "
                                 "gpt2/124M, or gpt-explorer train)") from None
    except KeyboardInterrupt:
        kept = fetching.partial_bytes(repo_id)
        print(f"\ninterrupted: {kept / 1e6:,.1f} MB kept in the cache; run the same command "
              "again to resume", file=sys.stderr)
        return 130
    finally:
        if tty and last["width"]:
            sys.stderr.write("\n")
    for notice in result.notices:
        print(f"note: {notice}", file=sys.stderr)
    if result.already_complete:
        print(f"{repo_id} is already complete in the cache ({result.folder}); nothing to "
              "download", file=sys.stderr)
    else:
        print(f"downloaded {result.fetched_bytes / 1e6:,.1f} MB; every weights file matches "
              f"the Hub's sha256", file=sys.stderr)
    print(f"{repo_id} is now the default model: gpt-explorer (the app), gpt-explorer generate …",
          file=sys.stderr)
    print(result.folder)
    return 0
