"""The device table `servewatch budget --gpu NAME[,NAME...]` screens on: parsed from its TOML text, and names
matched (issue 40). Pure, standard library only: the file is found by ``tui.resources`` and read by the caller.

A device is one accelerator, or one machine whose GPU shares the system's memory (``unified``). Its memory is what
the driver reports (nvidia-smi's total, in MiB), with the public source it was read from; for unified memory the
share the GPU may use by default is an ASSUMPTION with its own source, and the budget divides only that share (said
wherever it is used). The table ships no prices.

Matching (:func:`resolve`): case-insensitive; the canonical name; else the names that start with the query followed
by ``-`` (``L4`` is ``L4-24GB``, never ``L40S-48GB``); else the names that start with the query. One match, or
several of equal memory, is accepted and the match said; otherwise :class:`DeviceError` lists the matches.
"""

from __future__ import annotations

import math
import tomllib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

__all__ = ["KINDS", "THIS_MACHINE", "Device", "DeviceError", "DeviceMatch", "DeviceTable", "parse_devices",
           "resolve", "this_machine"]

#: the kinds a device may be, in the order the table lists them
KINDS = ("datacenter", "consumer", "unified")
MIB = 2**20
GIB = 2**30
#: the name `--gpu` takes for the machine it runs on (not in the table: its memory is read when asked, kind ``host``)
THIS_MACHINE = "THIS-MACHINE"


class DeviceError(ValueError):
    """A device table that cannot be read, or a name that matches no device or several of different memory."""


@dataclass(frozen=True, slots=True)
class Device:
    """One row of the device table."""

    name: str
    kind: str
    sold: str
    memory_mib: int
    source: str
    gpu_share: float | None = None  # unified memory: the share the GPU may use by default (an assumption)
    gpu_share_source: str | None = None

    @property
    def memory_gib(self) -> float:
        """The memory the driver reports (or the RAM as fitted, for unified memory), GiB."""
        return self.memory_mib * MIB / GIB

    @property
    def usable_gib(self) -> float:
        """The memory a budget divides: all of it, or for unified memory the GPU's assumed share."""
        return self.memory_gib * (self.gpu_share if self.gpu_share is not None else 1.0)

    def assumption(self) -> str:
        """The sentence a budget on this device carries (its figures, their source, the assumed share)."""
        sold = self.sold if self.kind == "host" else f"{self.sold} as sold"
        text = f"device {self.name} ({self.kind}): {sold}, {self.memory_mib:,} MiB = {self.memory_gib:.2f} GiB ({self.source})"
        if self.gpu_share is not None:
            text += (f"; ASSUMED usable by the GPU: {self.gpu_share:.1%} = {self.usable_gib:.2f} GiB "
                     f"({self.gpu_share_source})")
        return text


@dataclass(frozen=True, slots=True)
class DeviceTable:
    devices: tuple[Device, ...]
    collected: str | None = None
    source: str = "the device table"

    @property
    def names(self) -> list[str]:
        return [d.name for d in self.devices]


@dataclass(frozen=True, slots=True)
class DeviceMatch:
    """What one query matched: the device used and, when the query was not its canonical name, the sentence saying
    which (``note``)."""

    query: str
    device: Device
    note: str | None = None


def _text(v: object, what: str, where: str) -> str:
    if not isinstance(v, str) or not v.strip():
        raise DeviceError(f"{where}: {what} must be a non-empty string")
    return v.strip()


def _device(entry: object, where: str) -> Device:
    if not isinstance(entry, dict):
        raise DeviceError(f"{where}: a [[device]] must be a table")
    unknown = set(entry) - {"name", "kind", "sold", "memory_mib", "source", "gpu_share", "gpu_share_source"}
    if unknown:
        raise DeviceError(f"{where}: unknown key(s) {', '.join(sorted(unknown))}")
    name = _text(entry.get("name"), "name", where)
    where = f"{where} ({name})"
    if any(c.isspace() or c == "," for c in name):
        raise DeviceError(f"{where}: a name has no spaces or commas (it is given in comma lists)")
    kind = _text(entry.get("kind"), "kind", where)
    if kind not in KINDS:
        raise DeviceError(f"{where}: kind must be one of {', '.join(KINDS)}, got {kind!r}")
    mib = entry.get("memory_mib")
    if isinstance(mib, bool) or not isinstance(mib, int) or not 0 < mib <= 10**9:
        raise DeviceError(f"{where}: memory_mib must be a whole number of MiB > 0")
    share = entry.get("gpu_share")
    share_source = entry.get("gpu_share_source")
    if kind == "unified":
        if isinstance(share, bool) or not isinstance(share, (int, float)) or not math.isfinite(share) \
                or not 0 < share <= 1:
            raise DeviceError(f"{where}: unified memory needs gpu_share, the GPU's share (0 < share <= 1)")
        share_source = _text(share_source, "gpu_share_source (where the assumed share comes from)", where)
        share = float(share)
    elif share is not None or share_source is not None:
        raise DeviceError(f"{where}: gpu_share is for unified memory only")
    return Device(name=name, kind=kind, sold=_text(entry.get("sold"), "sold", where), memory_mib=mib,
                  source=_text(entry.get("source"), "source", where), gpu_share=share, gpu_share_source=share_source)


def parse_devices(text: str, source: str = "the device table") -> DeviceTable:
    """The table in ``text`` (TOML: ``[table]`` and ``[[device]]`` entries); raises DeviceError naming the entry."""
    try:
        data = tomllib.loads(text)
    except (tomllib.TOMLDecodeError, TypeError) as exc:
        raise DeviceError(f"{source}: not valid TOML: {exc}") from None
    entries = data.get("device")
    if not isinstance(entries, list) or not entries:
        raise DeviceError(f"{source}: no [[device]] entries")
    devices = [_device(e, f"{source}: device {i + 1}") for i, e in enumerate(entries)]
    seen: set[str] = set()
    for d in devices:
        if d.name.lower() in seen:
            raise DeviceError(f"{source}: device {d.name} is listed twice")
        seen.add(d.name.lower())
    meta = data.get("table")
    collected = meta.get("collected") if isinstance(meta, dict) else None
    return DeviceTable(tuple(devices), str(collected) if collected is not None else None, source)


def this_machine(memory_bytes: int, how: str) -> Device:
    """The machine `servewatch budget` runs on as a device (``--gpu this-machine``): CPU inference (llama.cpp
    without a GPU) holds the weights and the KV cache in the system's memory, so the budget divides all of it (the
    runtime margin is what stays for the system and other processes). Kind ``host``: a run's budget on it is held
    against the run machine's memory, never called a GPU budget for a run without a GPU."""
    if isinstance(memory_bytes, bool) or not isinstance(memory_bytes, int) or memory_bytes <= 0:
        raise DeviceError(f"--gpu {THIS_MACHINE.lower()}: this machine's memory is unknown ({how})")
    mib = memory_bytes // MIB
    return Device(name=THIS_MACHINE, kind="host", sold=f"{memory_bytes / GIB:.1f} GiB of system memory",
                  memory_mib=mib, source=f"{how}, read when the table was made; CPU inference: weights and KV cache "
                                         "in the system's memory")


def _matches(table: DeviceTable, query: str) -> list[Device]:
    q = query.strip().lower()
    exact = [d for d in table.devices if d.name.lower() == q]
    if exact:
        return exact
    bounded = [d for d in table.devices if d.name.lower().startswith(q + "-")]
    if bounded:
        return bounded
    return [d for d in table.devices if d.name.lower().startswith(q)]


def _listing(devices: Iterable[Device]) -> str:
    return ", ".join(f"{d.name} ({d.usable_gib:.2f} GiB)" for d in devices)


def resolve(table: DeviceTable, queries: Sequence[str]) -> list[DeviceMatch]:
    """Each query's device (:func:`_matches`), in order, each device once. Raises DeviceError: no match (the table's
    names listed), or several of different memory (the matches listed)."""
    out: list[DeviceMatch] = []
    used: set[str] = set()
    for raw in queries:
        query = raw.strip()
        if not query:
            continue
        found = _matches(table, query)
        if not found:
            raise DeviceError(f"--gpu {query}: no device of that name in {table.source}; known: "
                              + ", ".join(table.names))
        if len({d.memory_mib for d in found}) > 1 or len({d.usable_gib for d in found}) > 1:
            raise DeviceError(f"--gpu {query} matches devices of different memory: {_listing(found)}; give more of "
                              "the name")
        dev = found[0]
        note = None
        if dev.name.lower() != query.lower():
            note = (f"--gpu {query}: {dev.name}" if len(found) == 1 else
                    f"--gpu {query} matches {', '.join(d.name for d in found)} (the same memory): {dev.name} used")
        if dev.name in used:
            continue
        used.add(dev.name)
        out.append(DeviceMatch(query, dev, note))
    if not out:
        raise DeviceError("--gpu: give at least one device name")
    return out
