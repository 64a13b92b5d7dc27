"""One file's bytes from an HTTP server into an open file, bounded by the size the Hub
announced: the library's session and retry rules, every network read written at once
(so a dropped connection keeps all that arrived), Stop asked at least once a second
while no byte arrives, more bytes than announced refused. download.py decides what to
fetch and where it goes."""

from __future__ import annotations

import queue
import threading
from typing import Iterator

from ..base.cancel import check
from .hub import HubError, HubUnreachable

POLL_SECONDS = 1.0  # the longest a network read waits before Stop is asked again


class TooLong(HubError):
    """The server sent more than the Hub announced."""


def chunks(response, should_stop) -> Iterator[bytes]:
    """The response's bytes as they arrive, read by a helper thread so that Stop is asked
    at least every POLL_SECONDS while the server sends nothing; a stop closes the
    response and leaves the helper to end with its read."""
    arrived: queue.Queue = queue.Queue()
    done = object()
    closed = threading.Event()

    def pump() -> None:
        try:
            for chunk in response.iter_bytes():
                if closed.is_set():
                    return
                arrived.put(chunk)
            arrived.put(done)
        except BaseException as exc:  # handed to the caller's thread
            arrived.put(exc)

    threading.Thread(target=pump, daemon=True, name="download-read").start()
    try:
        while True:
            try:
                item = arrived.get(timeout=POLL_SECONDS)
            except queue.Empty:
                check(should_stop)
                continue
            if item is done:
                return
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        closed.set()
        try:
            response.close()
        except Exception:  # closing from this thread while the helper reads
            pass


def stream(url: str, fh, resume: int, size: int, headers: dict, meter,
            filename: str) -> None:
    """Bytes ``resume``..``size`` of the file into ``fh``, with the library's HTTP session;
    a dropped connection continues with a range request (five times without progress,
    then one line), more bytes than announced is ``TooLong``."""
    import httpx2
    from huggingface_hub import constants
    from huggingface_hub.utils import hf_raise_for_status, http_stream_backoff

    written, attempts = resume, 0
    timeout = float(constants.HF_HUB_DOWNLOAD_TIMEOUT)
    while written < size:
        request_headers = dict(headers, **({"Range": f"bytes={written}-"} if written else {}))
        before = written
        try:
            with http_stream_backoff("GET", url, headers=request_headers, timeout=timeout,
                                     retry_on_exceptions=(), retry_on_status_codes=(408, 429)) as response:
                hf_raise_for_status(response)
                if written and response.status_code == 200:  # the range was ignored: restart
                    meter.done -= written
                    fh.seek(0)
                    fh.truncate()
                    written = 0
                for chunk in chunks(response, meter.should_stop):
                    if written + len(chunk) > size:
                        raise TooLong(f"{filename}: the server sent more than the "
                                       f"{size:,} bytes the Hub announced; removed what "
                                       "arrived")
                    fh.write(chunk)
                    written += len(chunk)
                    meter.add(len(chunk))
        except httpx2.TimeoutException:
            raise HubUnreachable(f"{filename}: the server sent nothing for {timeout:.0f} s "
                                 f"after {written / 1e6:,.1f} of {size / 1e6:,.1f} MB; run it "
                                 "again, it resumes") from None
        except (httpx2.RemoteProtocolError, httpx2.NetworkError):
            pass  # a dropped connection: continue from what arrived
        attempts = 0 if written > before else attempts + 1
        if written < size and attempts >= 5:
            raise HubUnreachable(f"{filename}: the connection keeps closing at "
                                 f"{written / 1e6:,.1f} of {size / 1e6:,.1f} MB; run it again, "
                                 "it resumes")
