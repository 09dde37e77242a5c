"""Stand-ins for the traceback module, which is skipped with the rest of the standard library.

``unittest``'s ``assertRaises`` calls ``clear_frames`` on the traceback it is handed; inside a
compiled frame that is None for an exception raised while tracing (the frame has no real
traceback), and the stand-in then does what the original does with None: nothing.
"""

from __future__ import annotations

from typing import Any


def clear_frames(tb: Any) -> None:
    """``traceback.clear_frames``: clear the locals of each frame the traceback holds; a frame
    still running refuses (RuntimeError), and is left as it is."""
    while tb is not None:
        try:
            tb.tb_frame.clear()
        except RuntimeError:
            pass
        tb = tb.tb_next
