#!/usr/bin/python3
"""gRPC client checks against tallyd's --grpc-port, run by it_grpc.c.

  grpc_client.py STUBS HOST:PORT CHECK [ARGS...]

STUBS is the directory python3 -m grpc_tools.protoc wrote tally's proto/
stubs to (it_grpc generates them at test time).  Each CHECK prints what it
saw and exits 0 when tallyd answered as expected, 1 otherwise.  The raw_*
checks speak HTTP/2 byte by byte over a socket (hpack decodes the answers)
to send what a well-behaved client library never sends.
"""
import importlib.util
import os
import socket
import struct
import sys
import threading

import grpc

STUBS, TARGET, CHECK = sys.argv[1], sys.argv[2], sys.argv[3]
ARGS = sys.argv[4:]
sys.path.insert(0, STUBS)

# grpc.health.v1's stubs would be the package "grpc", which grpcio owns:
# load its messages from their file instead.
_spec = importlib.util.spec_from_file_location("health_pb2", os.path.join(STUBS, "grpc/health/v1/health_pb2.py"))
health_pb2 = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(health_pb2)

from envoy.service.ratelimit.v3 import rls_pb2, rls_pb2_grpc  # noqa: E402

HEALTH = "/grpc.health.v1.Health/Check"
RLS = "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit"


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def channel(**opts):
    options = [(k, v) for k, v in opts.items()]
    if os.environ.get("GRPC_CA"):
        with open(os.environ["GRPC_CA"], "rb") as f:
            ca = f.read()
        key = cert = None
        if os.environ.get("GRPC_CLIENT_CERT"):
            with open(os.environ["GRPC_CLIENT_CERT"], "rb") as f:
                cert = f.read()
            with open(os.environ["GRPC_CLIENT_KEY"], "rb") as f:
                key = f.read()
        creds = grpc.ssl_channel_credentials(root_certificates=ca, private_key=key, certificate_chain=cert)
        options.append(("grpc.ssl_target_name_override", os.environ.get("GRPC_SNI", "localhost")))
        return grpc.secure_channel(TARGET, creds, options=options)
    return grpc.insecure_channel(TARGET, options=options)


def health_call(ch):
    return ch.unary_unary(HEALTH, request_serializer=health_pb2.HealthCheckRequest.SerializeToString,
                          response_deserializer=health_pb2.HealthCheckResponse.FromString)


def expect_code(fn, code, what):
    try:
        fn()
    except grpc.RpcError as e:
        if e.code() != code:
            fail("%s: %s (%s), expected %s" % (what, e.code(), e.details(), code))
        print("%s: %s: %s" % (what, e.code().name, e.details()))
        return e
    fail("%s: succeeded, expected %s" % (what, code))


def check_health():
    with channel() as ch:
        call = health_call(ch)
        want = ARGS[0] if ARGS else "SERVING"
        for service in ("", "envoy.service.ratelimit.v3.RateLimitService"):
            r = call(health_pb2.HealthCheckRequest(service=service), timeout=10)
            got = health_pb2.HealthCheckResponse.ServingStatus.Name(r.status)
            print("health %r: %s" % (service, got))
            if got != want:
                fail("expected %s" % want)
        expect_code(lambda: call(health_pb2.HealthCheckRequest(service="no.such.Service"), timeout=10),
                    grpc.StatusCode.NOT_FOUND, "unknown service")


def check_unimplemented():
    with channel() as ch:
        m = ch.unary_unary("/no.such.Service/Method", request_serializer=lambda b: b, response_deserializer=lambda b: b)
        expect_code(lambda: m(b"", timeout=10), grpc.StatusCode.UNIMPLEMENTED, "unknown method")


def rls_request(domain="edge", n=1):
    req = rls_pb2.RateLimitRequest(domain=domain)
    for i in range(n):
        d = req.descriptors.add()
        e = d.entries.add()
        e.key, e.value = "remote_address", "192.0.2.%d" % i
    return req


def check_rls_code():
    """ShouldRateLimit answered with the status ARGS[0] (metadata ARGS[1:] as name=value)."""
    want = getattr(grpc.StatusCode, ARGS[0])
    md = [tuple(a.split("=", 1)) for a in ARGS[1:]]
    with channel() as ch:
        stub = rls_pb2_grpc.RateLimitServiceStub(ch)
        expect_code(lambda: stub.ShouldRateLimit(rls_request(), timeout=10, metadata=md), want, "ShouldRateLimit")


def check_too_large():
    """A message over 4 MiB: RESOURCE_EXHAUSTED, then the channel still works."""
    with channel() as ch:
        stub = rls_pb2_grpc.RateLimitServiceStub(ch)
        big = rls_request(domain="x" * (4 * 1024 * 1024 + 16))
        expect_code(lambda: stub.ShouldRateLimit(big, timeout=20), grpc.StatusCode.RESOURCE_EXHAUSTED, "5 MiB message")
        r = health_call(ch)(health_pb2.HealthCheckRequest(), timeout=10)
        if r.status != health_pb2.HealthCheckResponse.SERVING:
            fail("health after the large message: %s" % r.status)
        print("health after: SERVING")


def check_concurrent():
    """ARGS[0] calls in flight at once on one connection (one channel)."""
    n = int(ARGS[0]) if ARGS else 1000
    with channel() as ch:
        call = health_call(ch)
        futs = [call.future(health_pb2.HealthCheckRequest(), timeout=60) for _ in range(n)]
        ok = sum(1 for f in futs if f.result().status == health_pb2.HealthCheckResponse.SERVING)
        print("%d of %d concurrent calls SERVING" % (ok, n))
        if ok != n:
            fail("some calls failed")




def desc(req, pairs, hits=None, limit=None):
    d = req.descriptors.add()
    for k, v in pairs:
        e = d.entries.add()
        e.key, e.value = k, v
    if hits is not None:
        d.hits_addend.value = hits
    if limit is not None:
        d.limit.requests_per_unit, d.limit.unit = limit
    return d


def expect(cond, what):
    if not cond:
        fail(what)


def check_rls_fields():
    """Every field of ShouldRateLimit against it_grpc's --rls-config (domain
    edge: remote_address 3/minute named per_ip, path=/api 100/hour,
    free=yes unlimited); metadata ARGS as name=value."""
    R = rls_pb2.RateLimitResponse
    md = [tuple(a.split("=", 1)) for a in ARGS]
    with channel() as ch:
        stub = rls_pb2_grpc.RateLimitServiceStub(ch)

        def call(req):
            return stub.ShouldRateLimit(req, timeout=10, metadata=md)

        # one descriptor: the configured limit, its name, what remains, the reset
        req = rls_pb2.RateLimitRequest(domain="edge")
        desc(req, [("remote_address", "10.0.0.1")])
        r = call(req)
        print("one descriptor:", R.Code.Name(r.overall_code), r.statuses)
        expect(r.overall_code == R.OK and len(r.statuses) == 1, "overall OK with one status")
        s = r.statuses[0]
        expect(s.code == R.OK, "status OK")
        expect(s.HasField("current_limit"), "current_limit present")
        expect(s.current_limit.requests_per_unit == 3 and s.current_limit.unit == R.RateLimit.MINUTE, "3 per minute")
        expect(s.current_limit.name == "per_ip", "the rule's name")
        expect(s.limit_remaining == 2, "2 remaining after 1 of 3")
        expect(s.HasField("duration_until_reset"), "duration_until_reset present")
        reset = s.duration_until_reset.seconds + s.duration_until_reset.nanos / 1e9
        expect(0 < reset <= 60, "reset within the minute: %s" % reset)
        names = [h.key.lower() for h in r.response_headers_to_add]
        print("headers:", [(h.key, h.value) for h in r.response_headers_to_add])
        expect("ratelimit" in names and "ratelimit-policy" in names, "RateLimit and RateLimit-Policy headers")

        # the request's hits_addend charges each descriptor that much
        req.hits_addend = 2
        r = call(req)
        expect(r.overall_code == R.OK and r.statuses[0].limit_remaining == 0, "hits_addend 2: 0 remaining")
        req.hits_addend = 0   # unset: 1
        r = call(req)
        print("over:", R.Code.Name(r.overall_code), r.statuses[0])
        expect(r.overall_code == R.OVER_LIMIT and r.statuses[0].code == R.OVER_LIMIT, "OVER_LIMIT at the 4th")
        expect(r.statuses[0].limit_remaining == 0, "0 remaining when over")

        # three descriptors: statuses in the request's order; no rule and unlimited carry no limit
        req = rls_pb2.RateLimitRequest(domain="edge")
        desc(req, [("path", "/api")])
        desc(req, [("nothing", "configured")])
        desc(req, [("free", "yes")])
        r = call(req)
        print("three:", r.statuses)
        expect(r.overall_code == R.OK and len(r.statuses) == 3, "three statuses")
        expect(r.statuses[0].current_limit.requests_per_unit == 100 and
               r.statuses[0].current_limit.unit == R.RateLimit.HOUR and r.statuses[0].limit_remaining == 99,
               "path=/api: 100 per hour, 99 left")
        expect(not r.statuses[1].HasField("current_limit") and r.statuses[1].code == R.OK, "no rule: OK, no limit")
        expect(not r.statuses[2].HasField("current_limit") and r.statuses[2].code == R.OK, "unlimited: OK, no limit")

        # a descriptor's own hits_addend (a wrapper: 5 > 3 is over at once)
        req = rls_pb2.RateLimitRequest(domain="edge")
        desc(req, [("remote_address", "10.0.0.2")], hits=5)
        r = call(req)
        expect(r.overall_code == R.OVER_LIMIT, "descriptor hits_addend 5 over 3")
        # ... and set to 0 it charges nothing (where the request's would charge 1)
        req = rls_pb2.RateLimitRequest(domain="edge", hits_addend=1)
        desc(req, [("remote_address", "10.0.0.3")], hits=0)
        r = call(req)
        expect(r.overall_code == R.OK and r.statuses[0].limit_remaining == 3, "hits_addend 0 charges nothing")

        # the request's limit override replaces the configured one
        req = rls_pb2.RateLimitRequest(domain="edge")
        desc(req, [("remote_address", "10.0.0.4")], limit=(7, 4))   # 7 a DAY
        r = call(req)
        print("override:", r.statuses[0])
        expect(r.statuses[0].current_limit.requests_per_unit == 7 and r.statuses[0].current_limit.unit == R.RateLimit.DAY,
               "override: 7 per day")
        expect(r.statuses[0].limit_remaining == 6, "override: 6 left")

        # refusals: no domain, no descriptor
        expect_code(lambda: call(rls_pb2.RateLimitRequest(domain="", descriptors=req.descriptors)),
                    grpc.StatusCode.INVALID_ARGUMENT, "no domain")
        expect_code(lambda: call(rls_pb2.RateLimitRequest(domain="edge")), grpc.StatusCode.INVALID_ARGUMENT,
                    "no descriptors")


def check_envoy_recipe():
    """deploy/gateways/envoy: the requests its envoy.yaml makes Envoy send
    (domain edge; /login: [generic_key=login, remote_address] and the
    virtual host's [remote_address]) against its ratelimit.yaml: 5 logins a
    minute per address, the 6th over with the login rule's status."""
    R = rls_pb2.RateLimitResponse
    with channel() as ch:
        stub = rls_pb2_grpc.RateLimitServiceStub(ch)
        for i in range(6):
            req = rls_pb2.RateLimitRequest(domain="edge")
            desc(req, [("generic_key", "login"), ("remote_address", "198.51.100.7")])
            desc(req, [("remote_address", "198.51.100.7")])
            r = stub.ShouldRateLimit(req, timeout=10)
            names = [s.current_limit.name for s in r.statuses]
            print("login %d: %s %s %s" % (i + 1, R.Code.Name(r.overall_code), names,
                                          [s.limit_remaining for s in r.statuses]))
            expect(names == ["login", "per_address"], "the rules matched")
            if i < 5:
                expect(r.overall_code == R.OK and r.statuses[0].limit_remaining == 4 - i, "login %d allowed" % (i + 1))
            else:
                expect(r.overall_code == R.OVER_LIMIT and r.statuses[0].code == R.OVER_LIMIT and
                       r.statuses[1].code == R.OK, "the 6th login over its limit, the address limit not")
        req = rls_pb2.RateLimitRequest(domain="edge")   # another address: its own buckets
        desc(req, [("remote_address", "198.51.100.8")])
        r = stub.ShouldRateLimit(req, timeout=10)
        expect(r.overall_code == R.OK and r.statuses[0].limit_remaining == 19, "another address: 19 left of 20")


# ---------------------------------------------------------------- raw HTTP/2 --

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"


def frame(ftype, flags, sid, payload):
    return struct.pack(">I", len(payload))[1:] + bytes([ftype, flags]) + struct.pack(">I", sid) + payload


def lit(name, value):
    """HPACK: a literal header field without indexing, new name, no Huffman."""
    name, value = name.encode(), value.encode()
    return b"\x00" + bytes([len(name)]) + name + bytes([len(value)]) + value


def request_headers(path, extra=()):
    block = lit(":method", "POST") + lit(":scheme", "http") + lit(":path", path) + lit(":authority", "tally")
    block += lit("content-type", "application/grpc") + lit("te", "trailers")
    for n, v in extra:
        block += lit(n, v)
    return block


class Raw:
    def __init__(self):
        host, port = TARGET.rsplit(":", 1)
        self.s = socket.create_connection((host, int(port)), timeout=10)
        self.buf = b""
        import hpack
        self.dec = hpack.Decoder()
        self.s.sendall(PREFACE + frame(4, 0, 0, b""))

    def read_frame(self):
        while len(self.buf) < 9 or len(self.buf) < 9 + int.from_bytes(self.buf[:3], "big"):
            d = self.s.recv(65536)
            if not d:
                return None
            self.buf += d
        n = int.from_bytes(self.buf[:3], "big")
        f = (self.buf[3], self.buf[4], int.from_bytes(self.buf[5:9], "big") & 0x7FFFFFFF, self.buf[9:9 + n])
        self.buf = self.buf[9 + n:]
        if f[0] == 4 and not f[1] & 1:
            self.s.sendall(frame(4, 1, 0, b""))   # SETTINGS ack
        return f

    def answer(self, sid):
        """The headers of stream sid until it ends: {name: value}, or None when the connection ends."""
        hdrs = {}
        while True:
            f = self.read_frame()
            if f is None:
                return None
            ftype, flags, fsid, payload = f
            if ftype == 7:   # GOAWAY
                print("GOAWAY error code", int.from_bytes(payload[4:8], "big"))
                return None
            if fsid != sid:
                continue
            if ftype == 1:
                for n, v in self.dec.decode(payload):
                    hdrs[n if isinstance(n, str) else n.decode()] = v if isinstance(v, str) else v.decode()
            if ftype == 3:
                hdrs["rst"] = str(int.from_bytes(payload[:4], "big"))
                return hdrs
            if ftype in (0, 1) and flags & 1:
                return hdrs


def grpc_msg(payload):
    return b"\x00" + struct.pack(">I", len(payload)) + payload


def expect_status(hdrs, code, what):
    if hdrs is None or hdrs.get("grpc-status") != code:
        fail("%s: got %r, expected grpc-status %s" % (what, hdrs, code))
    print("%s: grpc-status %s %s" % (what, code, hdrs.get("grpc-message", "")))


def check_raw_truncated():
    """A message cut short (its prefix says 100 bytes, 3 come): a status,
    then the same connection answers a health check."""
    r = Raw()
    r.s.sendall(frame(1, 4, 1, request_headers(HEALTH)) + frame(0, 1, 1, b"\x00\x00\x00\x00\x64abc"))
    expect_status(r.answer(1), "13", "truncated message")
    hc = grpc_msg(health_pb2.HealthCheckRequest().SerializeToString())
    r.s.sendall(frame(1, 4, 3, request_headers(HEALTH)) + frame(0, 1, 3, hc))
    expect_status(r.answer(3), "0", "health on the same connection")


def check_raw_compressed():
    r = Raw()
    r.s.sendall(frame(1, 4, 1, request_headers(HEALTH, [("grpc-encoding", "gzip")])) +
                frame(0, 1, 1, b"\x01\x00\x00\x00\x00"))
    expect_status(r.answer(1), "12", "compressed message")


def check_raw_not_protobuf():
    r = Raw()
    r.s.sendall(frame(1, 4, 1, request_headers(RLS)) + frame(0, 1, 1, grpc_msg(b"\xff\xff\xff\xff")))
    want = ARGS[0] if ARGS else "3"
    expect_status(r.answer(1), want, "not a protobuf message")


def check_raw_deadline():
    """grpc-timeout 200m and a request that never ends: DEADLINE_EXCEEDED from tallyd."""
    r = Raw()
    r.s.sendall(frame(1, 4, 1, request_headers(HEALTH, [("grpc-timeout", "200m")])) + frame(0, 0, 1, b"\x00\x00"))
    expect_status(r.answer(1), "4", "request still arriving at its deadline")


def check_raw_malformed():
    """Frames HTTP/2 forbids: a DATA frame on stream 0, then (new connection)
    a SETTINGS frame of 5 bytes: the connection ends with a GOAWAY."""
    for bad in (frame(0, 0, 0, b"abc"), frame(4, 0, 0, b"\x00\x03\x00\x00\x00")):
        r = Raw()
        r.s.sendall(bad)
        got_goaway = False
        while True:
            try:
                f = r.read_frame()
            except (ConnectionResetError, socket.timeout):
                break
            if f is None:
                break
            if f[0] == 7:
                got_goaway = True
                print("GOAWAY error code", int.from_bytes(f[3][4:8], "big"))
        if not got_goaway:
            fail("no GOAWAY for a malformed frame")


def check_raw_goaway_drain():
    """A stream open (its request not ended) when tallyd gets SIGTERM
    (ARGS[0] is tallyd's pid): a GOAWAY comes, the stream still finishes."""
    import signal
    r = Raw()
    hc = grpc_msg(health_pb2.HealthCheckRequest().SerializeToString())
    r.s.sendall(frame(1, 4, 1, request_headers(HEALTH)) + frame(0, 0, 1, hc[:3]))
    r.read_frame()   # its SETTINGS: the stream was taken
    os.kill(int(ARGS[0]), signal.SIGTERM)
    while True:
        f = r.read_frame()
        if f is None:
            fail("the connection ended before a GOAWAY")
        if f[0] == 7:
            print("GOAWAY, last stream", int.from_bytes(f[3][:4], "big") & 0x7FFFFFFF)
            break
    r.s.sendall(frame(0, 1, 1, hc[3:]))
    expect_status(r.answer(1), "0", "the stream open at SIGTERM")


CHECKS = {n[len("check_"):]: f for n, f in list(globals().items()) if n.startswith("check_")}
if CHECK not in CHECKS:
    fail("unknown check %s (%s)" % (CHECK, ", ".join(sorted(CHECKS))))
CHECKS[CHECK]()
print("ok")
