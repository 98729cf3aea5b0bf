"""Background work (issue 11, item 6): it runs on a thread of its own, off the event
loop."""

import threading

from memoryd.runtime import background


async def test_runs_on_a_thread_of_its_own():
    loop_thread = threading.get_ident()
    name, ident = await background.run(lambda: (threading.current_thread().name,
                                                threading.get_ident()))
    assert name.startswith("memoryd-background") and ident != loop_thread

