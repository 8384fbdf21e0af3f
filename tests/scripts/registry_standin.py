#!/usr/bin/env python3
"""Helpers of the tag resolver's registry tests (tests/scripts/digest_resolver_test.sh) and
benchmark (bench/digest_resolve.sh), Python's standard library and the openssl command only.
Everything listens on 127.0.0.1 and writes the port it got to --port-file.

  push REGISTRY REPOSITORY TAG [--index]
      pushes a small image (a config and one layer, an OCI manifest) to the real registry over
      plain http, by the distribution API; --index also pushes an OCI index of it under TAG
      instead. Prints the digest TAG names.
  token --key PEM --cert PEM --issuer I --service S --user U --password P --log FILE
      a STAND-IN for a registry's token server (the Docker token protocol, what Docker Hub's
      auth.docker.io speaks), for a real docker-registry configured with `auth: token:`: GET
      /token?service=&scope=repository:NAME:pull answers a JWT signed RS256 (by `openssl dgst`)
      with the certificate in its x5c header. With U:P as Basic: pull on any repository, answered
      as {"token"}; anonymous: pull on repositories under public/ only (elsewhere a token that
      grants nothing, as Docker Hub answers), answered as {"access_token"}; a wrong password:
      401. Each request is logged as "<path> auth=<basic|none>".
  silent
      accepts connections and never answers.
  manifest --body FILE --mode no-digest|sha512
      a STAND-IN registry for what the real one never does: HEAD of any manifest answers 200
      without Docker-Content-Digest (no-digest; GET answers FILE's bytes) or with a sha512 one.
"""
import argparse
import base64
import gzip
import hashlib
import http.server
import io
import json
import os
import socket
import subprocess
import sys
import tarfile
import threading
import time
import urllib.parse
import urllib.request
import uuid

OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_INDEX = "application/vnd.oci.image.index.v1+json"


def b64url(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def write_port(path, port):
    with open(path + ".new", "w") as f:
        f.write(str(port))
    os.rename(path + ".new", path)


def serve(handler, port_file):
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    write_port(port_file, server.server_address[1])
    server.serve_forever()


# push ---------------------------------------------------------------------------------------


def request(method, url, body=b"", headers=None):
    req = urllib.request.Request(url, data=body if method in ("POST", "PUT") else None,
                                 method=method, headers=headers or {})
    with urllib.request.urlopen(req, timeout=10) as answer:
        return answer.status, dict(answer.headers), answer.read()


def push_blob(base, repository, data):
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    _, headers, _ = request("POST", f"{base}/v2/{repository}/blobs/uploads/")
    location = urllib.parse.urljoin(base, headers["Location"])
    location += ("&" if "?" in location else "?") + "digest=" + urllib.parse.quote(digest)
    request("PUT", location, data, {"Content-Type": "application/octet-stream"})
    return digest


def layer_of(text):
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        info = tarfile.TarInfo("etc/ncclguard-test")
        content = text.encode()
        info.size, info.mtime = len(content), 0
        tar.addfile(info, io.BytesIO(content))
    return raw.getvalue(), gzip.compress(raw.getvalue(), mtime=0)


def push(args):
    base = "http://" + args.registry
    tar, layer = layer_of(f"{args.repository}:{args.tag}\n")
    layer_digest = push_blob(base, args.repository, layer)
    config = json.dumps({
        "architecture": "amd64", "os": "linux",
        "rootfs": {"type": "layers", "diff_ids": ["sha256:" + hashlib.sha256(tar).hexdigest()]},
        "config": {}}, sort_keys=True).encode()
    config_digest = push_blob(base, args.repository, config)
    manifest = json.dumps({
        "schemaVersion": 2, "mediaType": OCI_MANIFEST,
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                   "digest": config_digest, "size": len(config)},
        "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip",
                    "digest": layer_digest, "size": len(layer)}]}).encode()
    manifest_digest = "sha256:" + hashlib.sha256(manifest).hexdigest()
    if not args.index:
        request("PUT", f"{base}/v2/{args.repository}/manifests/{args.tag}", manifest,
                {"Content-Type": OCI_MANIFEST})
        print(manifest_digest)
        return
    request("PUT", f"{base}/v2/{args.repository}/manifests/{manifest_digest}", manifest,
            {"Content-Type": OCI_MANIFEST})
    index = json.dumps({
        "schemaVersion": 2, "mediaType": OCI_INDEX,
        "manifests": [{"mediaType": OCI_MANIFEST, "digest": manifest_digest,
                       "size": len(manifest),
                       "platform": {"architecture": "amd64", "os": "linux"}}]}).encode()
    request("PUT", f"{base}/v2/{args.repository}/manifests/{args.tag}", index,
            {"Content-Type": OCI_INDEX})
    print("sha256:" + hashlib.sha256(index).hexdigest())


# token --------------------------------------------------------------------------------------


def token_handler(args):
    with open(args.cert, "rb") as f:
        pem = f.read().decode()
    der = base64.b64decode("".join(
        line for line in pem.splitlines() if line and not line.startswith("-----")))
    header = b64url(json.dumps({"typ": "JWT", "alg": "RS256",
                                "x5c": [base64.b64encode(der).decode()]}).encode())
    log_lock = threading.Lock()

    def sign(claims):
        signing_input = header + "." + b64url(json.dumps(claims).encode())
        signature = subprocess.run(["openssl", "dgst", "-sha256", "-sign", args.key],
                                   input=signing_input.encode(), capture_output=True,
                                   check=True).stdout
        return signing_input + "." + b64url(signature)

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        # Headers and body go out in two writes: with Nagle's algorithm on, the second waits for
        # the client's delayed ACK (40 ms) on a kept-alive connection.
        disable_nagle_algorithm = True

        def log_message(self, *_):
            pass

        def answer(self, status, body, extra=()):
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for name, value in extra:
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):
            url = urllib.parse.urlsplit(self.path)
            query = urllib.parse.parse_qs(url.query)
            auth = self.headers.get("Authorization", "")
            with log_lock, open(args.log, "a") as log:
                log.write(f"{self.path} auth={'basic' if auth.startswith('Basic ') else 'none'}\n")
            if url.path != "/token" or query.get("service") != [args.service]:
                return self.answer(400, {"errors": [{"code": "UNSUPPORTED"}]})
            user = ""
            if auth:
                try:
                    user, _, password = base64.b64decode(auth[6:]).decode().partition(":")
                except ValueError:
                    password = None
                if not auth.startswith("Basic ") or (user, password) != (args.user, args.password):
                    return self.answer(401, {"errors": [{"code": "UNAUTHORIZED"}]},
                                       [("WWW-Authenticate", 'Basic realm="token"')])
            access = []
            for scope in query.get("scope", []):
                kind, _, rest = scope.partition(":")
                name, _, actions = rest.rpartition(":")
                if kind == "repository" and "pull" in actions.split(",") and (
                        user or name.startswith("public/")):
                    access.append({"type": "repository", "name": name, "actions": ["pull"]})
            now = int(time.time())
            token = sign({"iss": args.issuer, "sub": user, "aud": args.service,
                          "exp": now + 300, "nbf": now - 10, "iat": now,
                          "jti": uuid.uuid4().hex, "access": access})
            field = "token" if user else "access_token"
            self.answer(200, {field: token, "expires_in": 300})

    return Handler


# silent and manifest ------------------------------------------------------------------------


def silent(args):
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    write_port(args.port_file, listener.getsockname()[1])
    held = []
    while True:
        connection, _ = listener.accept()
        held.append(connection)  # kept open, never read or answered


def manifest_handler(args):
    with open(args.body, "rb") as f:
        body = f.read()

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        # Headers and body go out in two writes: with Nagle's algorithm on, the second waits for
        # the client's delayed ACK (40 ms) on a kept-alive connection.
        disable_nagle_algorithm = True

        def log_message(self, *_):
            pass

        def headers_only(self):
            self.send_response(200)
            self.send_header("Content-Type", OCI_MANIFEST)
            self.send_header("Content-Length", str(len(body)))
            if args.mode == "sha512":
                self.send_header("Docker-Content-Digest",
                                 "sha512:" + hashlib.sha512(body).hexdigest())
            self.end_headers()

        def do_HEAD(self):
            self.headers_only()

        def do_GET(self):
            self.headers_only()
            self.wfile.write(body)

    return Handler


def main():
    parser = argparse.ArgumentParser()
    commands = parser.add_subparsers(dest="command", required=True)
    p = commands.add_parser("push")
    p.add_argument("registry")
    p.add_argument("repository")
    p.add_argument("tag")
    p.add_argument("--index", action="store_true")
    p = commands.add_parser("token")
    for name in ("port-file", "key", "cert", "issuer", "service", "user", "password", "log"):
        p.add_argument("--" + name, required=True)
    p = commands.add_parser("silent")
    p.add_argument("--port-file", required=True)
    p = commands.add_parser("manifest")
    p.add_argument("--port-file", required=True)
    p.add_argument("--body", required=True)
    p.add_argument("--mode", choices=("no-digest", "sha512"), required=True)
    args = parser.parse_args()
    if args.command == "push":
        push(args)
    elif args.command == "token":
        serve(token_handler(args), args.port_file)
    elif args.command == "silent":
        silent(args)
    else:
        serve(manifest_handler(args), args.port_file)


if __name__ == "__main__":
    sys.exit(main())
