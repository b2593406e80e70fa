# SPDX-License-Identifier: MIT
"""Python objects that own one C resource each, released exactly once."""
import weakref


class Owner:
    """Base of the Python objects that own one C resource (a handle, a registration, a block).
    It is released exactly once: by the owner's own method (free(), close(), unregister()), at
    the end of a `with` block, or, the safety net rather than the plan, by the garbage
    collector. weakref.finalize, unlike __del__, runs at most once and also at interpreter exit.
    A subclass calls _own() with the release function and its arguments (not a bound method of
    self: that would keep self alive forever)."""
    kind = "object"   # its name in messages

    def _own(self, release, *args):
        self._finalizer = weakref.finalize(self, release, *args)

    @property
    def alive(self):
        return self._finalizer.alive

    def _release_once(self, verb):
        """An explicit release (free(), unregister()): a second one is the caller's bug."""
        if not self._finalizer.alive:
            raise ValueError(f"{self.kind} {verb} twice")
        self._finalizer()

    def close(self):
        """Release now if not done yet; a second close() does nothing."""
        if self._finalizer.alive:
            self._finalizer()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class Handle(Owner):
    """An opaque C handle (a stream, a pool...) with a destroy function; a dead handle never
    reaches C: _live(what) refuses it with ValueError."""
    kind = "handle"

    def _own_handle(self, handle, destroy):
        self.handle = handle
        self._own(destroy, handle)

    def _live(self, what):
        if not self._finalizer.alive:
            raise ValueError(f"{self.kind} used after close(): cannot {what}")
        return self.handle
