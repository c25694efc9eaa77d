"""``bwrap``: one bubblewrap sandbox per rollout, no container engine (docs/substrates/bwrap.md).

``lifecycle`` checks the kernel, launches, resets and reaps sandboxes; ``launch`` is one
sandbox's processes; ``rootfs`` exports the image once; ``steps`` holds both transports.
"""

from .launch import BwrapHandle
from .lifecycle import BwrapSubstrate
from .options import BwrapOptions

__all__ = ["BwrapHandle", "BwrapOptions", "BwrapSubstrate"]
