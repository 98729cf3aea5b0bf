"""Run by test_inotify_limits: the watch of argv[1] in a process with no file descriptor
left when the doorbell is armed (as when the uid is out of inotify instances); the warning
frees them, so what follows (the notifier, polling) works. Prints what it saw."""

import asyncio, os, resource, sys
from pathlib import Path
from memoryd.ingest.watcher import watch_changes
root = Path(sys.argv[1])
async def main():
    stop = asyncio.Event()
    from memoryd.ingest import inotify_wake
    inotify_wake._lib()
    warned = []
    fillers = []
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard))
    try:
        while True:
            fillers.append(os.open(os.devnull, os.O_RDONLY))
    except OSError:
        pass
    def ready():
        for fd in fillers: os.close(fd)
        fillers.clear()
    gen = watch_changes((root,), lambda c, p: p.endswith(".jsonl"), debounce_ms=20, stop=stop,
                        force_polling=None, warn=lambda t: (warned.append(t), ready()))
    first = asyncio.ensure_future(gen.__anext__())
    await asyncio.sleep(1.0)
    (root / "a.jsonl").write_text("{}\n")
    got = await asyncio.wait_for(first, 30)
    print("GOT", sorted(p for _, p in got))
    print("WARN", warned)
    stop.set()
asyncio.run(main())
