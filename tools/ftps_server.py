#!/usr/bin/env python3
"""ftps_server: a pyftpdlib FTP server for the ftp plugin's tests, in the foreground.

    python tools/ftps_server.py --root DIR --user U --password P [--cert PEM --key PEM]
                                [--plain] [--hostile-name NAME] [--no-epsv --pasv-address A]
                                [--log FILE]

prints `ftps_server listening on PORT` once it accepts connections (on 127.0.0.1, a free port).

  --cert/--key      explicit FTPS (AUTH TLS), TLS required on the control and data connections
  --plain           plain FTP only: AUTH TLS is refused (a server without TLS)
  --hostile-name    every MLSD and LIST also lists a file of that name (`../x`: a server trying
                    to make the client write outside its destination folder)
  --no-epsv         EPSV refused, so the client uses PASV, whose reply names --pasv-address
                    instead of the server's own (a server pointing the data connection elsewhere)
  --dead-data-port  EPSV refused, and PASV names a port where nothing listens (every data
                    connection fails while the control connection works)
  --log             pyftpdlib's log: a line per transfer (`APPE /dir/f.partial completed=1
                    bytes=123 seconds=0.1`), per login, and per CWD, RNTO, REST, SIZE, PASV, EPSV

Needs pyftpdlib and pyOpenSSL (scripts/requirements-test.txt).
"""
import argparse
import logging
import sys

from pyftpdlib.authorizers import DummyAuthorizer
from pyftpdlib.handlers import FTPHandler, TLS_FTPHandler
from pyftpdlib.servers import FTPServer


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--root", required=True)
    parser.add_argument("--user", required=True)
    parser.add_argument("--password", required=True)
    parser.add_argument("--cert")
    parser.add_argument("--key")
    parser.add_argument("--plain", action="store_true")
    parser.add_argument("--hostile-name")
    parser.add_argument("--no-epsv", action="store_true")
    parser.add_argument("--pasv-address")
    parser.add_argument("--dead-data-port", action="store_true")
    parser.add_argument("--log")
    args = parser.parse_args()

    if args.log:
        logging.basicConfig(filename=args.log, level=logging.INFO, format="%(message)s")

    authorizer = DummyAuthorizer()
    authorizer.add_user(args.user, args.password, args.root, perm="elradfmwMT")

    if args.plain:
        base = FTPHandler
    else:
        base = TLS_FTPHandler

    class Handler(base):
        pass

    Handler.authorizer = authorizer
    # Log the commands the tests count too (pyftpdlib logs transfers, and a few commands).
    Handler.log_cmds_list = Handler.log_cmds_list + ["REST", "APPE", "SIZE", "PASV", "EPSV"]
    if not args.plain:
        Handler.certfile = args.cert
        Handler.keyfile = args.key
        Handler.tls_control_required = True
        Handler.tls_data_required = True
    if args.pasv_address:
        Handler.masquerade_address = args.pasv_address
    if args.no_epsv:
        def refuse_epsv(self, line):
            self.respond("502 EPSV not offered here.")
        Handler.ftp_EPSV = refuse_epsv

    if args.dead_data_port:
        import socket
        probe = socket.socket()
        probe.bind(("127.0.0.1", 0))
        dead = probe.getsockname()[1]
        probe.close()

        def refuse_epsv(self, line):
            self.respond("502 EPSV not offered here.")

        def dead_pasv(self, line):
            self.respond("227 Entering passive mode (127,0,0,1,%d,%d)." % (dead >> 8, dead & 255))

        Handler.ftp_EPSV = refuse_epsv
        Handler.ftp_PASV = dead_pasv

    if args.hostile_name:
        from pyftpdlib.filesystems import AbstractedFS
        name = args.hostile_name

        class HostileFS(AbstractedFS):
            def format_mlsx(self, basedir, listing, perms, facts, ignore_err=True):
                yield ("type=file;size=3;modify=20260101000000; %s\r\n" % name).encode("utf8", self.cmd_channel.unicode_errors)
                yield from super().format_mlsx(basedir, listing, perms, facts, ignore_err)

            def format_list(self, basedir, listing, ignore_err=True):
                yield ("-rw-r--r--   1 owner    group           3 Jan 01 00:00 %s\r\n" % name).encode("utf8", self.cmd_channel.unicode_errors)
                yield from super().format_list(basedir, listing, ignore_err)

        Handler.abstracted_fs = HostileFS

    server = FTPServer(("127.0.0.1", 0), Handler)
    port = server.socket.getsockname()[1]
    print("ftps_server listening on %d" % port, flush=True)
    server.serve_forever()


if __name__ == "__main__":
    sys.exit(main())
