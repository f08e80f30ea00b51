"""Connection floods against a running npub-server, and /healthz measured from another process.

    python3 bench/floods/flood.py URL idle      # 1,100 idle connections from 127.0.0.2
    python3 bench/floods/flood.py URL reopen    # 5,000 connections from 127.0.0.2, each reopened
                                                # as soon as it is closed

The flood starts, settles for a few seconds, then a separate process (so that the flood's own
event loop does not delay the measurement) asks /healthz HEALTH times, one fresh connection from
127.0.0.1 each with a 10 s bound, and the flood stops. Prints the answers by status and the
p50/p99/max latency of the 200s. Standard library only.
"""
import asyncio
import multiprocessing
import socket
import sys
import time
from urllib.parse import urlparse

HEALTH = 200
PAUSE = 0.02


def measure(host, port, out):
    """/healthz HEALTH times with blocking sockets: (status line, seconds) each."""
    results = []
    for _ in range(HEALTH):
        start = time.perf_counter()
        try:
            with socket.create_connection((host, port), timeout=10) as s:
                s.sendall(b"GET /healthz HTTP/1.1\r\nhost: b\r\nconnection: close\r\n\r\n")
                data = b""
                while True:
                    chunk = s.recv(4096)
                    if not chunk:
                        break
                    data += chunk
            status = data.split(b"\r\n", 1)[0].decode(errors="replace") or "(nothing)"
        except OSError as e:
            status = f"({type(e).__name__})"
        results.append((status, time.perf_counter() - start))
        time.sleep(PAUSE)
    out.put(results)


async def connect_from(src, host, port):
    return await asyncio.open_connection(host, port, local_addr=(src, 0))


async def idle_flood(host, port, stop):
    held = []
    for _ in range(1100):
        try:
            held.append(await asyncio.wait_for(connect_from("127.0.0.2", host, port), 5))
        except (asyncio.TimeoutError, OSError):
            pass
    await stop.wait()
    for _, w in held:
        w.close()


async def reopen_one(host, port, stop):
    while not stop.is_set():
        try:
            r, w = await asyncio.wait_for(connect_from("127.0.0.2", host, port), 2)
        except (asyncio.TimeoutError, OSError):
            await asyncio.sleep(0.01)
            continue
        try:
            # Held until the server closes it (or a handshake the kernel dropped: 1 s of silence).
            while not stop.is_set():
                data = await asyncio.wait_for(r.read(256), 1)
                if not data:
                    break
        except (asyncio.TimeoutError, OSError):
            pass
        w.close()


async def flood(host, port, mode, results):
    stop = asyncio.Event()
    if mode == "idle":
        tasks = [asyncio.create_task(idle_flood(host, port, stop))]
    else:
        tasks = [asyncio.create_task(reopen_one(host, port, stop)) for _ in range(5000)]
    await asyncio.sleep(3)
    q = multiprocessing.Queue()
    p = multiprocessing.Process(target=measure, args=(host, port, q))
    p.start()
    while p.is_alive() and q.empty():
        await asyncio.sleep(0.1)
    results.extend(q.get())
    p.join()
    stop.set()
    await asyncio.gather(*tasks, return_exceptions=True)


def main():
    url, mode = sys.argv[1], sys.argv[2]
    u = urlparse(url)
    results = []
    asyncio.run(flood(u.hostname, u.port, mode, results))
    by_status = {}
    for status, _ in results:
        by_status[status] = by_status.get(status, 0) + 1
    ok = sorted(t for s, t in results if s.startswith("HTTP/1.1 200"))
    print(f"flood: {mode}; /healthz asked {len(results)} times from another process")
    for status, n in sorted(by_status.items()):
        print(f"  {n:4d} x {status}")
    if ok:
        p99 = ok[min(len(ok) - 1, int(len(ok) * 0.99))]
        print(f"  200s: p50 {ok[len(ok) // 2] * 1e3:.1f} ms, p99 {p99 * 1e3:.1f} ms, "
              f"max {ok[-1] * 1e3:.1f} ms")


if __name__ == "__main__":
    main()
