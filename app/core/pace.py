"""A pace of at most R items a second: spaced 1/R apart on average, and never more than R (at least one) within
any one second, however late the sender's turns come."""

import math
from collections import deque

WINDOW = 1.0  # seconds


class Pace:
    def __init__(self, per_second: float, now: float) -> None:
        self.per_second = per_second
        self.gap = 1 / per_second
        self.next_at = now  # when the next item may go
        self.cap = max(1, math.floor(per_second))  # items within any one second
        self.sent: deque[tuple[float, int]] = deque()  # (when, how many) over the last second

    def retime(self, per_second: float) -> None:
        """Go on at `per_second` from now on: what went within the last second still counts against the new cap."""
        self.per_second = per_second
        self.gap = 1 / per_second
        self.cap = max(1, math.floor(per_second))

    def due(self, now: float, most: int) -> int:
        """How many items may go at `now` (at most `most`)."""
        if now < self.next_at:
            return 0
        # A sender that fell behind (a slow transaction, a paused loop) gets at most a second's credit back.
        self.next_at = max(self.next_at, now - WINDOW)
        while self.sent and self.sent[0][0] <= now - WINDOW:
            self.sent.popleft()
        room = self.cap - sum(n for _, n in self.sent)
        return max(0, min(most, room, math.floor((now - self.next_at) * self.per_second) + 1))

    def spent(self, count: int, now: float) -> None:
        """`count` items went at `now`."""
        if count:
            self.sent.append((now, count))
            self.next_at += count * self.gap
