"""The build's progress line on stderr, and how it writes sizes and durations."""

import sys
import time


def size_text(num_bytes):
    """`num_bytes` for a person: "950 B", "1.2 KB", "116.0 MB" (powers of 1000)."""
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if num_bytes < 1000 or unit == "TB":
            return f"{num_bytes:.0f} {unit}" if unit == "B" else f"{num_bytes:.1f} {unit}"
        num_bytes /= 1000


def _duration(seconds):
    minutes, seconds = divmod(int(seconds), 60)
    if not minutes:
        return f"{seconds}s"
    return f"{minutes}m{seconds:02d}s" if minutes < 60 else f"{minutes // 60}h{minutes % 60:02d}m"


class Progress:
    """One progress line on stderr: images written, text read, a later stage, elapsed time and
    ETA; redrawn every second on a terminal, else printed every `every` s, and not at all for
    builds shorter than `after` s."""

    def __init__(self, title, image_bytes, text_bytes, stream=None, every=30.0, after=3.0):
        self.title, self.stream = title, stream or sys.stderr
        self.image_total, self.text_total = image_bytes, text_bytes
        self.image_done = self.images = self.text_done = self.lines = 0
        self.stage, self._stage_share, self._stage_start = "", None, None
        self._start = time.monotonic()
        self._tty = getattr(self.stream, "isatty", lambda: False)()
        self._every = 1.0 if self._tty else every
        self._after, self._last, self._shown = after, 0.0, False

    def set_stage(self, text, share):
        """The stage after the images and the text (say "caption tables 3/70"), with the share of
        its work done, in [0, 1]; its ETA counts from the first call."""
        if self._stage_start is None:
            self._stage_start = time.monotonic()
        self.stage, self._stage_share = text, share

    def line(self):
        elapsed = time.monotonic() - self._start
        parts, rates = [], []
        if self.image_total:
            share = self.image_done / self.image_total
            parts.append(f"images {100 * share:.0f}% ({self.images:,}, "
                         f"{size_text(self.image_done)} of {size_text(self.image_total)})")
            rates.append(share)
        if self.text_total:
            share = self.text_done / self.text_total
            parts.append(f"text {100 * share:.0f}% ({self.lines / 1e6:.1f}M lines)")
            rates.append(share)
        if self.stage:
            parts.append(self.stage)
        share, taken = min(rates) if rates else 0.0, elapsed
        if self._stage_share is not None and (not rates or share >= 1):
            share, taken = self._stage_share, time.monotonic() - self._stage_start
        eta = f", ETA {_duration(taken * (1 - share) / share)}" if 0 < share < 1 else ""
        return f"{self.title}: {' | '.join(parts)} | {_duration(elapsed)}{eta}"

    def show(self, force=False):
        now = time.monotonic()
        if not force and (now - self._start < self._after or now - self._last < self._every):
            return
        self._last, self._shown = now, True
        print(self.line().ljust(100) if self._tty else self.line(),
              end="\r" if self._tty else "\n", file=self.stream, flush=True)

    def done(self):
        if self._shown:
            self.show(force=True)
            if self._tty:
                print(file=self.stream)

