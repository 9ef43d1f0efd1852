# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""The serving example as an HTTP server, over loopback: malformed,
oversized, slow (slowloris) and concurrent requests and a shutdown in the
middle of a request. Every request gets an HTTP answer with the right
status; the server drains and exits 0. Needs aiohttp (python3-aiohttp)."""

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import unittest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..",
                                    "..", ".."))
SERVE = os.path.join(ROOT, "bench", "serve", "serve.py")
sys.path.insert(0, os.path.dirname(SERVE))

IO_TIMEOUT = 120  # A bound on a hang, not a timing check.


def start_server(*extra):
    try:
        import aiohttp  # noqa: F401
    except ImportError:
        raise AssertionError(
            "%s has no aiohttp: install python3-aiohttp (tools/test.sh "
            "does) and run the tests with an interpreter that has it" %
            sys.executable)
    proc = subprocess.Popen(
        [sys.executable, SERVE, "--size", "4096", "--queues", "2",
         "--max-body", "4096"] + list(extra),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    if not line.startswith("LISTENING "):
        proc.kill()
        raise AssertionError("server did not start: %r %s" %
                             (line, proc.stderr.read()))
    return proc, int(line.split()[1])


def connect(port):
    s = socket.create_connection(("127.0.0.1", port), timeout=IO_TIMEOUT)
    s.settimeout(IO_TIMEOUT)
    return s


def read_response(s):
    """(status, headers, body) of one response, or None if the server
    closed the connection without one."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = s.recv(65536)
        if not chunk:
            return None
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {}
    for h in lines[1:]:
        k, _, v = h.partition(":")
        headers[k.strip().lower()] = v.strip()
    n = int(headers.get("content-length", "0"))
    while len(rest) < n:
        chunk = s.recv(65536)
        if not chunk:
            break
        rest += chunk
    return status, headers, rest[:n]


def request(port, raw):
    with connect(port) as s:
        s.sendall(raw)
        return read_response(s)


def post(path, body, extra=b""):
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    return (b"POST %s HTTP/1.1\r\nHost: t\r\nContent-Type: application/json"
            b"\r\nContent-Length: %d\r\n%s\r\n%s" %
            (path.encode(), len(data), extra, data))


class ExpectationTest(unittest.TestCase):
    def test_expected_values_are_float32(self):
        import serve
        # 7 * 3**14 > 2**24: float32 rounds it; the expectation does too.
        v = serve.expected_value(6, 14)
        self.assertEqual(v, serve.round_f32(v))
        self.assertNotEqual(v, 7.0 * 3.0**14)
        self.assertEqual(serve.expected_value(0, 3), 27.0)


class ServeHttpTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.proc, cls.port = start_server("--header-timeout", "1",
                                          "--body-timeout", "1",
                                          "--idle-timeout", "5")

    @classmethod
    def tearDownClass(cls):
        r = request(cls.port, post("/shutdown", {}))
        rc = cls.proc.wait(IO_TIMEOUT)
        err = cls.proc.stderr.read()
        cls.proc.stdout.close()
        cls.proc.stderr.close()
        assert r and r[0] == 200, r
        assert rc == 0, (rc, err)
        assert "Traceback" not in err, err

    def status(self, raw):
        r = request(self.port, raw)
        self.assertIsNotNone(r, "no HTTP answer to %r" % raw[:80])
        return r[0], r[2]

    def test_exact_results_past_float32_integers(self):
        for steps, seed in ((14, 6), (15, 5), (15, 6), (1, 0)):
            st, body = self.status(post("/generate",
                                        {"steps": steps, "seed": seed}))
            self.assertEqual(st, 200, body)
            reply = json.loads(body)
            self.assertTrue(reply["ok"])
            self.assertEqual(reply["value"], reply["expected"])

    def test_malformed_requests_get_400(self):
        for raw in (b"GARBAGE\r\n\r\n",
                    b"GET\r\n\r\n",
                    b"POST /generate HTTP/1.1\r\nContent-Length: abc\r\n\r\n",
                    b"POST /generate HTTP/1.1\r\nContent-Length: -5\r\n\r\n",
                    b"POST /generate HTTP/1.1\r\nContent-Length: 2\r\n"
                    b"Content-Length: 7\r\n\r\n{}",
                    b"GET /stats HTTP/1.1\r\nX-Long: " + b"a" * 20000 +
                    b"\r\n\r\n",
                    b"GET /" + b"a" * 20000 + b" HTTP/1.1\r\n\r\n",
                    post("/generate", b"{not json"),
                    post("/generate", b"\xff\xfe")):
            st, _ = self.status(raw)
            self.assertEqual(st, 400, raw[:60])

    def test_strict_json_types_get_422(self):
        for body in ({"steps": 2.9}, {"steps": "3"}, {"steps": True},
                     {"steps": 0}, {"steps": 16}, {"assume_no_alias": "false"},
                     {"assume_no_alias": 0}, {"seed": -1}, {"seed": 2**32},
                     {"seed": 1.0}, {"bogus": 1}, [1, 2], "text", None):
            st, reply = self.status(post("/generate", body))
            self.assertEqual(st, 422, body)
            self.assertFalse(json.loads(reply)["ok"])

    def test_oversized_body_gets_413(self):
        st, _ = self.status(post("/generate", b"{" + b" " * 100000 + b"}"))
        self.assertEqual(st, 413)
        # Announced but not sent: answered without buffering it.
        st, _ = self.status(b"POST /generate HTTP/1.1\r\nHost: t\r\n"
                            b"Content-Length: 1000000000\r\n\r\n{")
        self.assertIn(st, (408, 413))

    def test_routes(self):
        self.assertEqual(self.status(b"GET /nope HTTP/1.1\r\n\r\n")[0], 404)
        self.assertEqual(self.status(b"GET /generate HTTP/1.1\r\n\r\n")[0],
                         405)
        st, body = self.status(b"GET /stats HTTP/1.1\r\n\r\n")
        self.assertEqual(st, 200)
        self.assertIn("memory", json.loads(body))

    def test_slow_and_silent_clients_get_408(self):
        # A head sent a piece at a time and never finished (slowloris).
        with connect(self.port) as s:
            s.sendall(b"POST /generate HTTP/1.1\r\nHost: t\r\n")
            r = read_response(s)
        self.assertIsNotNone(r)
        self.assertEqual(r[0], 408)
        # A connection that sends nothing.
        with connect(self.port) as s:
            r = read_response(s)
        self.assertEqual(r and r[0], 408)
        # A body that never arrives.
        with connect(self.port) as s:
            s.sendall(b"POST /generate HTTP/1.1\r\nHost: t\r\n"
                      b"Content-Length: 100\r\n\r\n{\"st")
            r = read_response(s)
        self.assertEqual(r and r[0], 408)
        # A second head, slow, on a kept-alive connection.
        with connect(self.port) as s:
            s.sendall(b"GET /stats HTTP/1.1\r\nHost: t\r\n\r\n")
            self.assertEqual(read_response(s)[0], 200)
            s.sendall(b"GET /stats HTTP/1.1\r\n")
            r = read_response(s)
        self.assertEqual(r and r[0], 408)

    def test_many_idle_connections_are_closed(self):
        socks = [connect(self.port) for _ in range(64)]
        for s in socks:
            r = read_response(s)
            self.assertEqual(r and r[0], 408)
            s.close()
        self.assertEqual(self.status(b"GET /stats HTTP/1.1\r\n\r\n")[0], 200)

    def test_concurrent_requests(self):
        results, lock = [], threading.Lock()

        def client(i):
            with connect(self.port) as s:
                for j in range(4):
                    s.sendall(post("/generate", {"steps": 1 + (i + j) % 15,
                                                 "seed": i * 10 + j,
                                                 "assume_no_alias": j % 2 == 0}))
                    r = read_response(s)
                    with lock:
                        results.append(r and (r[0], json.loads(r[2])["ok"]))

        ts = [threading.Thread(target=client, args=(i,)) for i in range(16)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        self.assertEqual(results, [(200, True)] * 64)


class ShutdownTest(unittest.TestCase):
    """A shutdown in the middle of a request answers that request."""

    def _mid_request(self, stop):
        proc, port = start_server("--body-timeout", "60")
        try:
            body = json.dumps({"steps": 15, "seed": 3}).encode()
            with connect(port) as s, connect(port) as idle:
                idle.sendall(b"GET /stats HTTP/1.1\r\nHost: t\r\n\r\n")
                self.assertEqual(read_response(idle)[0], 200)
                s.sendall(b"POST /generate HTTP/1.1\r\nHost: t\r\n"
                          b"Content-Length: %d\r\n\r\n" % len(body) +
                          body[:5])
                # The server has the head: the request is in flight.
                st = request(port, b"GET /stats HTTP/1.1\r\n\r\n")
                while json.loads(st[2])["in_flight"] < 1:
                    st = request(port, b"GET /stats HTTP/1.1\r\n\r\n")
                answer = stop(port)
                s.sendall(body[5:])
                r = read_response(s)
                self.assertIsNotNone(r, "the in-flight request got no answer")
                self.assertEqual(r[0], 200, r)
                self.assertTrue(json.loads(r[2])["ok"])
                if answer is not None:
                    self.assertEqual(answer[0], 200)
                # The idle keep-alive connection is closed by the drain.
                self.assertIsNone(read_response(idle))
            rc = proc.wait(IO_TIMEOUT)
            err = proc.stderr.read()
            self.assertEqual(rc, 0, err)
            self.assertNotIn("Traceback", err)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            proc.stdout.close()
            proc.stderr.close()

    def test_shutdown_request(self):
        self._mid_request(lambda port: request(port, post("/shutdown", {})))

    def test_sigterm(self):
        self._mid_request_signal()

    def _mid_request_signal(self):
        proc, port = start_server("--body-timeout", "60")
        try:
            body = json.dumps({"steps": 15, "seed": 4}).encode()
            with connect(port) as s:
                s.sendall(b"POST /generate HTTP/1.1\r\nHost: t\r\n"
                          b"Content-Length: %d\r\n\r\n" % len(body) +
                          body[:5])
                st = request(port, b"GET /stats HTTP/1.1\r\n\r\n")
                while json.loads(st[2])["in_flight"] < 1:
                    st = request(port, b"GET /stats HTTP/1.1\r\n\r\n")
                proc.send_signal(signal.SIGTERM)
                s.sendall(body[5:])
                r = read_response(s)
                self.assertIsNotNone(r, "the in-flight request got no answer")
                self.assertEqual(r[0], 200, r)
            rc = proc.wait(IO_TIMEOUT)
            err = proc.stderr.read()
            self.assertEqual(rc, 0, err)
            self.assertNotIn("Traceback", err)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            proc.stdout.close()
            proc.stderr.close()


class LoadgenUsageTest(unittest.TestCase):
    def test_refuses_no_clients_and_non_positive_durations(self):
        loadgen = os.path.join(ROOT, "bench", "serve", "loadgen.py")
        for args in (["--clients", "0"], ["--clients", "-3"],
                     ["--duration", "0"], ["--duration", "-1"],
                     ["--duration", "nan"]):
            p = subprocess.run([sys.executable, loadgen] + args,
                               capture_output=True, text=True,
                               timeout=IO_TIMEOUT)
            self.assertEqual(p.returncode, 2, (args, p.stderr))
            self.assertIn("usage:", p.stderr)


if __name__ == "__main__":
    unittest.main()
