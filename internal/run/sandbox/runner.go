package sandbox

// runnerMarker opens the runner's source, so the sandboxes of appkb can be
// told from other bwrap processes by their command line (see sweepOrphans).
const runnerMarker = "# appkb sandbox runner\n"

// runnerScript is the Python program that python3 runs inside the
// sandbox (as python3 -I -B -c runnerScript CPU DATA AS NPROC FSIZE NOFILE,
// where -1 is no limit).
//
// It first lowers its resource limits, so nothing the user wrote ever runs
// without them. Then it writes the line "ready" on stdout (a sandbox the
// pool started ahead waits there, its start-up paid for) and reads
// {"code": ..., "inputs": {...}} from stdin,
// keeps a private copy of stdout for the answer and points fd 1 (and
// sys.stdout) at stderr, so print() and even C-level writes to fd 1 cannot
// mix with the answer. The code runs as a fresh __main__ module, main is
// called with the inputs as keyword arguments, and exactly one JSON line
// goes to the private copy:
//
//	{"result": {...}}
//	{"error": {"kind": "...", "type": "...", "message": "...", "line": N, "source": "..."}}
//
// kind is one of: syntax, exception, memory, no_main, not_dict, not_json,
// setup. The process leaves with os._exit, so threads the code started
// cannot keep it alive.
//
// When the host bound its network proxy at proxySocket (/run/appkb/proxy.sock),
// the runner first starts a forwarder thread: it listens on a free port of
// the sandbox's own loopback and relays every connection to that socket,
// and the proxy variables name it, so requests, urllib and the like go
// through the host's guarded proxy. Nothing else leaves the sandbox.
const runnerScript = runnerMarker + `
import json, os, resource, sys

OUT = None


def send(obj):
    data = (json.dumps(obj, ensure_ascii=True, allow_nan=False) + "\n").encode("ascii")
    view = memoryview(data)
    while view:
        n = os.write(OUT if OUT is not None else 1, view)
        view = view[n:]


def leave(obj):
    for f in (sys.stdout, sys.stderr):
        try:
            f.flush()
        except Exception:
            pass
    send(obj)
    os._exit(0)


def fail(kind, message, type_="", line=0, source=""):
    leave({"error": {"kind": kind, "type": type_, "message": message, "line": line, "source": source}})


def cap(which, soft, hard):
    if soft < 0:
        return
    _, cur_hard = resource.getrlimit(which)
    if cur_hard != resource.RLIM_INFINITY:
        hard = min(hard, cur_hard)
        soft = min(soft, hard)
    resource.setrlimit(which, (soft, hard))


try:
    cpu, data, vm, nproc, fsize, nofile = (int(a) for a in sys.argv[1:7])
    cap(resource.RLIMIT_CPU, cpu, cpu + 1)
    cap(resource.RLIMIT_DATA, data, data)
    cap(resource.RLIMIT_AS, vm, vm)
    cap(resource.RLIMIT_NPROC, nproc, nproc)
    cap(resource.RLIMIT_FSIZE, fsize, fsize)
    cap(resource.RLIMIT_NOFILE, nofile, nofile)
    cap(resource.RLIMIT_CORE, 0, 0)
except Exception as e:
    fail("setup", "the resource limits could not be set: %s: %s" % (type(e).__name__, e))

import types

try:
    os.write(1, b"ready\n")
    request = json.loads(sys.stdin.buffer.read())
    code = request["code"]
    inputs = request["inputs"]
    null = os.open("/dev/null", os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    OUT = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
except Exception as e:
    fail("setup", "the request could not be read: %s: %s" % (type(e).__name__, e))

PROXY_SOCKET = "/run/appkb/proxy.sock"


def start_forwarder():
    import socket, threading, time

    def pipe(src, dst):
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                dst.sendall(data)
        except OSError:
            pass
        try:
            dst.shutdown(socket.SHUT_WR)
        except OSError:
            pass

    def serve(client):
        upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            upstream.connect(PROXY_SOCKET)
            back = threading.Thread(target=pipe, args=(upstream, client), daemon=True)
            back.start()
            pipe(client, upstream)
            back.join()
        except Exception:
            pass
        finally:
            upstream.close()
            client.close()

    def accept(server):
        while True:
            try:
                client, _ = server.accept()
                threading.Thread(target=serve, args=(client,), daemon=True).start()
            except Exception:
                time.sleep(0.05)  # out of descriptors or threads: do not spin

    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    threading.Thread(target=accept, args=(server,), daemon=True).start()
    url = "http://127.0.0.1:%d" % server.getsockname()[1]
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"):
        os.environ[name] = url
        os.environ[name.lower()] = url
    for name in ("NO_PROXY", "no_proxy"):
        os.environ.pop(name, None)


if os.path.exists(PROXY_SOCKET):
    try:
        start_forwarder()
    except Exception as e:
        fail("setup", "the network forwarder could not start: %s: %s" % (type(e).__name__, e))

lines = code.splitlines()


def source_of(n):
    if 0 < n <= len(lines):
        return lines[n - 1].strip()
    return ""


def raised(e):
    if isinstance(e, MemoryError):
        fail("memory", "out of memory", "MemoryError")
    # traceback is imported only when needed: it costs a sixth of the
    # runner's start-up, and most runs raise nothing.
    import traceback

    line = 0
    for frame in traceback.extract_tb(e.__traceback__):
        if frame.filename == "<code>":
            line = frame.lineno or 0
    try:
        message = str(e)
    except Exception:
        message = ""
    fail("exception", message, type(e).__name__, line, source_of(line))


try:
    compiled = compile(code, "<code>", "exec")
except SyntaxError as e:
    line = e.lineno or 0
    fail("syntax", e.msg or "invalid syntax", type(e).__name__, line, (e.text or "").strip() or source_of(line))
except BaseException as e:
    raised(e)

module = types.ModuleType("__main__")
module.__dict__["__builtins__"] = __builtins__
sys.modules["__main__"] = module
try:
    exec(compiled, module.__dict__)
    main = module.__dict__.get("main")
    if not callable(main):
        fail("no_main", "the code does not define a function main")
    result = main(**inputs)
except BaseException as e:
    raised(e)

if not isinstance(result, dict):
    fail("not_dict", "main must return a dict, not %s" % ("None" if result is None else type(result).__name__))
try:
    leave({"result": result})
except MemoryError:
    fail("memory", "out of memory", "MemoryError")
except (TypeError, ValueError, RecursionError) as e:
    fail("not_json", "main returned a value that cannot be turned into JSON: %s" % e)
`
