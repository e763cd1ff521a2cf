"""The payloads of one partition's consecutive events on their way out of a stream.

They stay in the pieces readers gave them in (a storage's ``Lines``, or lists): a
batch is cut from them where its limit falls, and the JSON array of a batch is
written with one copy of each piece. A piece that a cut falls inside is cut as a
window of its text when its line ends are known, else split into events. A batch of
one piece is that piece, so small batches cost what they cost as lists.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import overload

from app.storage.engine import Lines, sliceable


def payload_bytes(piece: Sequence[bytes]) -> int:
    """The size of a piece's payloads."""
    if type(piece) is Lines:  # not isinstance: Sequence's ABC check costs ~1 us
        return piece.payload_bytes()
    return sum(map(len, piece))  # ~10 ns an event


def json_items(payloads: Sequence[bytes]) -> list[bytes]:
    """The events as the items of a JSON array: parts to join, commas included."""
    if type(payloads) is Lines:
        return [payloads.data.replace(b"\n", b",")]
    if type(payloads) is Payloads:
        parts: list[bytes] = []
        for piece in payloads.pieces:
            if parts:
                parts.append(b",")
            parts += json_items(piece)
        return parts
    return [b",".join(payloads)]


class Payloads(Sequence[bytes]):
    """Events in order, as pieces of consecutive events (none of them empty)."""

    __slots__ = ("_count", "pieces")

    def __init__(self, pieces: list[Sequence[bytes]] | None = None, count: int = 0) -> None:
        self.pieces: list[Sequence[bytes]] = pieces if pieces is not None else []
        self._count = count

    def __len__(self) -> int:
        return self._count

    def __iter__(self) -> Iterator[bytes]:
        for piece in self.pieces:
            yield from piece

    @overload
    def __getitem__(self, index: int) -> bytes: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[bytes]: ...

    def __getitem__(self, index: int | slice) -> bytes | Sequence[bytes]:
        return list(self)[index]

    def add(self, piece: Sequence[bytes]) -> None:
        if piece:
            self.pieces.append(piece)
            self._count += len(piece)

    def cut(self, count: int) -> Payloads:
        """The first ``count`` events (all there are, at most), taken off these."""
        pieces = self.pieces
        taken = index = 0
        while index < len(pieces) and taken + len(pieces[index]) <= count:
            taken += len(pieces[index])
            index += 1
        head = pieces[:index]
        if taken < count and index < len(pieces):
            events = sliceable(pieces[index])
            head.append(events[:count - taken])
            pieces[index] = events[count - taken:]
            taken = count
        del pieces[:index]
        self._count -= taken
        return Payloads(head, taken)

    def whole(self) -> Sequence[bytes]:
        """These events as one sequence: the piece itself when there is one."""
        return self.pieces[0] if len(self.pieces) == 1 else self

    def groups(self, size: int) -> list[Sequence[bytes]]:
        """These events in groups of ``size``, the last one shorter if need be. A piece
        that groups cut into is cut as windows (``sliceable``), or split once however
        many groups it goes to."""
        groups: list[Sequence[bytes]] = []
        current: list[Sequence[bytes]] = []
        filled = 0
        for piece in self.pieces:
            count = len(piece)
            if filled + count <= size:
                current.append(piece)
                filled += count
                if filled == size:
                    groups.append(Payloads(current, size).whole())
                    current, filled = [], 0
                continue
            # groups of one are the events themselves: cheaper split than as windows
            events = list(piece) if size == 1 and type(piece) is not list else sliceable(piece)
            start = 0
            if filled:
                start = size - filled
                current.append(events[:start])
                groups.append(Payloads(current, size))
            whole = start + (count - start) // size * size
            groups += [events[index:index + size] for index in range(start, whole, size)]
            current, filled = ([events[whole:]], count - whole) if whole < count else ([], 0)
        if current:
            groups.append(Payloads(current, filled).whole())
        return groups
