#!/usr/bin/env python3
"""An HTTP CONNECT proxy for tests of `lookout models fetch` behind $HTTPS_PROXY (standard library only).

    test-connect-proxy.py LOG

Listens on a loopback port (printed as http://127.0.0.1:PORT on the first line of standard output), answers
`CONNECT host:port` by opening that connection and relaying bytes both ways, and logs each tunnel's target
to LOG. Anything else gets 405.
"""
import socket
import sys
import threading


def relay(source: socket.socket, target: socket.socket) -> None:
    try:
        while data := source.recv(65536):
            target.sendall(data)
    except OSError:
        pass
    finally:
        for end in (source, target):
            try:
                end.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def serve(client: socket.socket, log: str) -> None:
    request = b""
    while b"\r\n\r\n" not in request:
        chunk = client.recv(4096)
        if not chunk:
            client.close()
            return
        request += chunk
    line = request.split(b"\r\n", 1)[0].decode("latin-1").split()
    if len(line) < 2 or line[0] != "CONNECT":
        client.sendall(b"HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\n\r\n")
        client.close()
        return
    host, port = line[1].rsplit(":", 1)
    with open(log, "a") as out:
        out.write(f"CONNECT {host}:{port}\n")
    upstream = socket.create_connection((host, int(port)))
    client.sendall(b"HTTP/1.1 200 Connection Established\r\n\r\n")
    threading.Thread(target=relay, args=(client, upstream), daemon=True).start()
    relay(upstream, client)


def main() -> None:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    print(f"http://127.0.0.1:{listener.getsockname()[1]}", flush=True)
    sys.stdout.close()
    while True:
        client, _ = listener.accept()
        threading.Thread(target=serve, args=(client, sys.argv[1]), daemon=True).start()


if __name__ == "__main__":
    main()
