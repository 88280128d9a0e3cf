#!/usr/bin/python3
"""Generates tests/data/tcpstore_trace.txt: the bytes PyTorch's TCPStore client and
server exchange for each store operation.

Run with the Python that has PyTorch (2.15 here):
    torchpy tests/golden/gen_tcpstore_trace.py > tests/data/tcpstore_trace.txt

A PyTorch TCPStore server (the classic backend, use_libuv=False) listens on a free
port, a relay between it and a PyTorch client records both directions, and each
operation's bytes are printed as one block:

  # name          the operation (the client call that made the bytes)
  C hex           everything the client sent for it
  S hex           everything the server answered ("S" alone: nothing)

tests/test_dist_store.c sends each C block to ctorch's server and expects exactly
the S block back. The PING nonce is the client's process id, echoed back whatever it is.
"""
import datetime
import socket
import threading
import time

from torch.distributed import TCPStore


def main():
    master = TCPStore("127.0.0.1", 0, 1, True, use_libuv=False, wait_for_workers=False)
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(4)
    log = []
    lock = threading.Lock()

    def pipe(src, dst, tag):
        while True:
            try:
                data = src.recv(65536)
            except OSError:
                return
            if not data:
                dst.close()
                return
            with lock:
                log.append((tag, data))
            dst.sendall(data)

    def accept():
        while True:
            c, _ = listener.accept()
            s = socket.create_connection(("127.0.0.1", master.port))
            threading.Thread(target=pipe, args=(c, s, "C"), daemon=True).start()
            threading.Thread(target=pipe, args=(s, c, "S"), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    blocks = []

    def mark(name):
        time.sleep(0.3)
        with lock:
            c = b"".join(d for t, d in log if t == "C")
            s = b"".join(d for t, d in log if t == "S")
            log.clear()
        blocks.append((name, c, s))

    client = TCPStore("127.0.0.1", listener.getsockname()[1], 1, False,
                      timeout=datetime.timedelta(seconds=10), use_libuv=False)
    mark("connect")
    client.set("k", "v"); mark("set")
    client.get("k"); mark("get")
    client.add("n", 5); mark("add")
    client.add("n", -2); mark("add again")
    client.compare_set("k", "v", "w"); mark("compare_set hit")
    client.compare_set("k", "zz", "q"); mark("compare_set miss")
    client.compare_set("fresh", "", "new"); mark("compare_set missing key")
    client.check(["k", "absent"]); mark("check not ready")
    client.check(["k", "n"]); mark("check ready")
    client.wait(["k"]); mark("wait ready")
    client.num_keys(); mark("num_keys")
    client.append("k", "x"); mark("append")
    client.multi_get(["k", "n"]); mark("multi_get")
    client.multi_set(["a", "b"], ["1", "2"]); mark("multi_set")
    client.delete_key("a"); mark("delete_key")
    client.delete_key("a"); mark("delete_key missing")
    try:
        client.wait(["never"], datetime.timedelta(milliseconds=300))
    except Exception:
        pass
    mark("wait timeout then cancel")
    for name, c, s in blocks:
        print("#", name)
        print("C", c.hex())
        print("S", s.hex())


if __name__ == "__main__":
    main()
