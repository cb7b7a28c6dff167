#!/usr/bin/env python3
"""An RTSP server for tests of `lookout detect|track rtsp://…`: Debian's GStreamer RTSP server (python3-gi,
gir1.2-gst-rtsp-server-1.0) playing an H.264 MP4 file, without re-encoding it.

    test-rtsp-server.py VIDEO.mp4 [--user NAME --password WORD] [--die-after SECONDS]

Serves rtsp://127.0.0.1:PORT/video (printed on the first line of standard output) to each client from the
file's start; with --user, only to clients that give that name and password (Basic authentication). Runs
until killed; with --die-after, kills itself (SIGKILL, as a crashed server) that many seconds after its first
client connects, so that a test of a server lost mid-stream does not depend on how long the client took to start.
"""
import argparse
import os
import signal
import socket
import sys

import gi

gi.require_version("Gst", "1.0")
gi.require_version("GstRtspServer", "1.0")
from gi.repository import GLib, Gst, GstRtspServer  # noqa: E402


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("video")
    parser.add_argument("--user")
    parser.add_argument("--password")
    parser.add_argument("--die-after", type=float)
    options = parser.parse_args()
    Gst.init(None)
    server = GstRtspServer.RTSPServer()
    server.set_address("127.0.0.1")
    port = free_port()
    server.set_service(str(port))
    factory = GstRtspServer.RTSPMediaFactory()
    location = options.video.replace('"', '\\"')
    factory.set_launch(f'( filesrc location="{location}" ! qtdemux ! h264parse ! rtph264pay name=pay0 pt=96 )')
    factory.set_shared(False)
    if options.user:
        auth = GstRtspServer.RTSPAuth()
        token = GstRtspServer.RTSPToken()
        token.set_string(GstRtspServer.RTSP_TOKEN_MEDIA_FACTORY_ROLE, "user")
        auth.add_basic(GstRtspServer.RTSPAuth.make_basic(options.user, options.password), token)
        server.set_auth(auth)
        permissions = GstRtspServer.RTSPPermissions()
        for permission in [GstRtspServer.RTSP_PERM_MEDIA_FACTORY_ACCESS, GstRtspServer.RTSP_PERM_MEDIA_FACTORY_CONSTRUCT]:
            permissions.add_permission_for_role("user", permission, True)
        factory.set_permissions(permissions)
    server.get_mount_points().add_factory("/video", factory)
    if options.die_after is not None:
        armed = []

        def first_client(*_):
            if not armed:
                armed.append(True)
                GLib.timeout_add(int(options.die_after * 1000), lambda: os.kill(os.getpid(), signal.SIGKILL))

        server.connect("client-connected", first_client)
    if server.attach(None) == 0:
        sys.exit("cannot start the RTSP server")
    print(f"rtsp://127.0.0.1:{port}/video", flush=True)
    GLib.MainLoop().run()


if __name__ == "__main__":
    main()
