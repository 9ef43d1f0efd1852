# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""Client code that test_typecheck.py type-checks with mypy --strict
against the package (never run). The lines marked `# type: ignore[...]`
are mistakes a checker must catch: with --warn-unused-ignores, a hint too
loose to catch one fails the check, as a hint that refuses right code
does."""

import asyncio
from typing import List, Optional

import hipline
from hipline import BufferArg, Scalar


async def clone_once(dev: hipline.Device) -> bytes:
    with dev.create_queue() as q:
        src: hipline.Buffer = q.alloca(1024)
        done: hipline.Fence = q.fill(src, 0x01020304, wait=src.ready)
        await done
        fn = hipline.Function.lookup("hipline.clone")
        results: List[hipline.Buffer] = await hipline.ProgramInvocation(
            fn, q, [src])
        data: bytearray = await q.read_bytes(results[0])
        q.dealloca(results[0])
        q.dealloca(src)
        return bytes(data)


def user_kernel(q: hipline.Queue, exe: hipline.Executable,
                a: hipline.Buffer) -> hipline.Fence:
    target: str = exe.select(q.device)
    count: int = exe.kernel_arg_count("add_u64", q.device)
    assert target and count
    return q.dispatch("add_u64", [BufferArg(a, "rw"), Scalar.u64(1),
                                  Scalar.u32(len(a) // 8)],
                      grid=(1,), block=(64,), executable=exe)


def on_stream(q: hipline.Queue, a: hipline.Buffer) -> hipline.Fence:
    def launch(stream: int, pointers: List[int]) -> None:
        assert stream and pointers

    return q.native_call(launch, [BufferArg(a, "r")])


def gather(backend: str) -> int:
    devices: List[hipline.Device] = hipline.devices(backend, checked=True)
    count: int = hipline.Device.count(backend)
    hipline.enable_peer_access(devices)
    hipline.enable_peer_access(d for d in devices)
    reach: bool = devices[0].can_access_peer(devices[-1])
    on: bool = devices[0].peer_access_enabled(devices[-1])
    stats: hipline.PeerStats = devices[0].peer_stats()
    with devices[0].create_queue() as q:
        a, b = q.alloca(64), q.alloca(64)
        q.copy(a, b).wait()
    assert reach or on or count
    return stats.peer_copies + stats.staged_copies


def peer_mistakes(dev: hipline.Device) -> None:
    hipline.enable_peer_access(dev)  # type: ignore[arg-type]
    hipline.enable_peer_access(["host"])  # type: ignore[list-item]
    dev.can_access_peer(0)  # type: ignore[arg-type]
    mem: hipline.MemoryStats = dev.peer_stats()  # type: ignore[assignment]
    n: str = hipline.Device.count()  # type: ignore[assignment]
    hipline.devices(checked="yes")  # type: ignore[arg-type]
    del mem, n


def mistakes(q: hipline.Queue, buf: hipline.Buffer) -> None:
    q.alloca("64")  # type: ignore[arg-type]
    q.fill(buf, 1, wait=buf)  # type: ignore[arg-type]
    size: str = len(buf)  # type: ignore[assignment]
    value: str = hipline.Semaphore(0).value  # type: ignore[assignment]
    hipline.Device(ordinal="0")  # type: ignore[arg-type]
    hipline.Executable({"host": 5})  # type: ignore[dict-item]
    stats: hipline.QueueStats = q.memory_stats()  # type: ignore[assignment]
    timeout: Optional[float] = None
    q.wait_idle(timeout)
    q.native_call(print, [buf])  # type: ignore[list-item]
    del size, value, stats


def main() -> None:
    with hipline.Device("host") as dev:
        print(asyncio.run(clone_once(dev))[:4])
    try:
        hipline.environment_check()
    except hipline.InvalidArgumentError as e:
        code: hipline.StatusCode = e.code
        print(code.name, e.message)
