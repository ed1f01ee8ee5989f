"""Lines longer than the scanner's cap (MAX_LINE, 64 KiB): it keeps only their ends. They are counted as
an input is read, and said once per input."""

from __future__ import annotations

from borrowguard.scan.normalize import HEAD, MAX_LINE


def kib(n: int) -> str:
    return f"{n // 1024} KiB"


class LongLines:
    """Counts lines and notices those longer than MAX_LINE (the scanner keeps only their ends)."""

    def __init__(self) -> None:
        self.lines = 0
        self.long = 0
        self.first_long: int | None = None
        self._run = 0  # length of the line not yet ended
        self._counted = False  # that line is already counted as long

    def _long(self, line_no: int) -> None:
        self.long += 1
        if self.first_long is None:
            self.first_long = line_no

    def see(self, data: bytes) -> None:
        if not data:
            return
        first = data.find(b"\n")
        if first == -1:
            self._run += len(data)
            if self._run > MAX_LINE and not self._counted:
                self._long(self.lines + 1)
                self._counted = True
            return
        if self._run + first > MAX_LINE and not self._counted:
            self._long(self.lines + 1)
        # The lines after the first: a window of MAX_LINE + 1 bytes from a line's start holds its newline
        # unless that line is too long; jumping to the window's last newline costs one pass at memchr speed.
        pos, end, counted = first + 1, len(data), False
        while pos + MAX_LINE + 1 <= end:
            nl = data.rfind(b"\n", pos, pos + MAX_LINE + 1)
            if nl == -1:
                self._long(self.lines + data.count(b"\n", 0, pos) + 1)
                nl = data.find(b"\n", pos + MAX_LINE + 1)
                if nl == -1:
                    counted = True
                    break
            pos = nl + 1
        last = data.rfind(b"\n")
        self._run = end - last - 1
        self._counted = counted
        self.lines += data.count(b"\n")

    @property
    def seen(self) -> int:
        """Lines so far, the last one counted even without its newline."""
        return self.lines + (1 if self._run else 0)

    def note(self) -> str | None:
        return long_lines_note(self.long, self.first_long) if self.long and self.first_long else None


def long_lines_note(count: int, first: int) -> str:
    """What to say, once, about lines the scanner keeps only the ends of."""
    many = f"{count:,} lines are" if count > 1 else "a line is"
    where = f"the first is line {first:,}" if count > 1 else f"line {first:,}"
    return (
        f"{many} longer than {kib(MAX_LINE)} ({where}): only the first and last {kib(HEAD)} of such a "
        "line are scanned (the middle of a huge line is a prompt or an image, not a failure signature)"
    )
