"""A load worker process: ``python -m tui.sources.load.worker_process``, started by the coordinator's
:class:`~tui.sources.load.coordinator.PipeLink`.

It reads frames (:mod:`tui.sources.load.wire`) on its standard input -- ``setup``, ``step``, ``stop``,
``cancel``, ``exit`` -- runs a :class:`~tui.sources.load.worker.WorkerEngine`, and writes its batches as
frames on its standard output. It ignores SIGINT (Ctrl-C is the coordinator's to decide) and ends, cancelling
what is in flight, when its input closes. Nothing in the package imports this module: run as ``__main__`` it
is the only copy of itself (what it pickles is defined in :mod:`tui.sources.load.wire`).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from typing import Any

from tui.sources.load.wire import frame, read_frame
from tui.sources.load.worker import WorkerEngine


async def _serve() -> int:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=2**26)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(0, "rb", 0))
    w_transport, w_protocol = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin,
                                                            os.fdopen(1, "wb", 0))
    writer = asyncio.StreamWriter(w_transport, w_protocol, None, loop)
    lock = asyncio.Lock()

    async def send(msg: Any) -> None:
        async with lock:
            writer.write(frame(msg))
            await writer.drain()  # backpressure: a slow coordinator slows the batches, not the requests' timing

    engine: WorkerEngine | None = None
    task: asyncio.Task | None = None
    try:
        while True:
            msg = await read_frame(reader)
            if msg is None:  # the coordinator is gone: nobody to record for
                if engine is not None:
                    engine.cancel()
                break
            kind = msg[0]
            if kind == "setup":
                engine = WorkerEngine(msg[1], send)
                info = await engine.start()
                await send(("ready", info))
            elif kind == "step" and engine is not None:
                task = engine.begin(msg[1])
            elif kind == "stop" and engine is not None:
                engine.stop_step()
            elif kind == "cancel" and engine is not None:
                engine.cancel()
            elif kind == "exit":
                break
    finally:
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(BaseException):
                await task
        if engine is not None:
            await engine.close()
    return 0


def main() -> int:
    """Entry point of a worker process (``python -m tui.sources.load.worker_process``)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the coordinator's to decide
    try:
        return asyncio.run(_serve())
    except BrokenPipeError:
        return 0



if __name__ == "__main__":
    sys.exit(main())
